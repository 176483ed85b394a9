//! A private nginx for tests and benchmarks: its own prefix, pid file and loopback ports, the
//! servers of an application in two slots (blue and green, each the tests' own backend serving
//! its own root, `router::Slot`), and a front that proxies to the pool manent's nginx plugin
//! renders. Stopped when dropped.

#![allow(dead_code, reason = "each test binary uses part of the support module")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use super::router::{Router, Server, Slot, free_port, get};

/// The plugin binary.
pub const PLUGIN: &str = env!("CARGO_BIN_EXE_manent-plugin-nginx");

/// Where nginx is, if it is installed.
pub fn binary() -> Option<PathBuf> {
    ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// The plugin's access log format for upstream `web`, as its documentation gives it.
pub const LOG_FORMAT: &str = "log_format web_canary escape=json '{\"msec\":\"$msec\",\"status\":\"$status\",\
\"upstream_addr\":\"$upstream_addr\",\"upstream_status\":\"$upstream_status\",\
\"upstream_response_time\":\"$upstream_response_time\"}';\n";

/// A running nginx.
pub struct Nginx {
    pub bin: PathBuf,
    pub prefix: PathBuf,
    pub conf: PathBuf,
    pub upstreams: PathBuf,
    pub front: u16,
    /// Where the plugin's file makes nginx answer what it loaded.
    pub state: u16,
    /// The front's access log, in the plugin's `web_canary` format: written once
    /// [`Router::log_traffic`] asks for it (every request a line costs a loaded machine).
    pub access_log: PathBuf,
    logging: bool,
    /// The user nginx's workers run as (its master runs as root).
    workers_user: &'static str,
    pub servers: Vec<Server>,
    slots: Vec<Slot>,
    child: Option<Child>,
}

impl Nginx {
    /// nginx under `prefix` with `n` servers; `stable` is what the blue slot serves at first.
    pub fn start(prefix: &Path, n: usize, stable: &str) -> Option<Nginx> {
        let bin = binary()?;
        for d in ["conf", "logs", "builds"] {
            std::fs::create_dir_all(prefix.join(d)).unwrap();
        }
        let mut slots = Vec::new();
        let servers = super::router::servers(prefix, n, stable, |root| {
            let s = Slot::serve(root);
            let port = s.port;
            slots.push(s);
            port
        });
        let mut n = Nginx {
            bin,
            prefix: prefix.to_owned(),
            conf: prefix.join("conf/nginx.conf"),
            upstreams: prefix.join("conf/manent-web.conf"),
            front: free_port(),
            state: free_port(),
            access_log: prefix.join("logs/web.canary.json"),
            logging: false,
            workers_user: "root",
            servers,
            slots,
            child: None,
        };
        // What an operator writes once: the pool on blue; the plugin owns the file from then on.
        n.hand_written("blue");
        std::fs::write(&n.conf, n.main_conf(true, false)).unwrap();
        n.spawn();
        Some(n)
    }

    /// Reloads nginx with its workers run as `user`, the way most hosts run them (`www-data`,
    /// its master as root); everything under the prefix is made readable to them.
    pub fn workers_as(&mut self, user: &'static str) {
        use std::os::unix::fs::PermissionsExt;
        let mut dir = Some(self.prefix.as_path());
        while let Some(d) =
            dir.filter(|d| d.starts_with(std::env::temp_dir()) && *d != std::env::temp_dir())
        {
            let mode = std::fs::metadata(d).unwrap().permissions().mode();
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode | 0o755)).unwrap();
            dir = d.parent();
        }
        self.workers_user = user;
        std::fs::write(&self.conf, self.main_conf(true, false)).unwrap();
        self.reload();
    }

    /// nginx.conf: the front proxies to `$web_pool` from the included file, or (`included`
    /// false) straight to the blue slot; `broken` adds a directive nginx does not know.
    fn main_conf(&self, included: bool, broken: bool) -> String {
        let p = self.prefix.display();
        let (include, pool, log) = if included {
            (
                format!("  include {};\n", self.upstreams.display()),
                "$web_pool".to_owned(),
                if self.logging {
                    format!("access_log {} web_canary; ", self.access_log.display())
                } else {
                    String::new()
                },
            )
        } else {
            (
                String::new(),
                format!("127.0.0.1:{}", self.servers[0].blue),
                String::new(),
            )
        };
        format!(
            "user {};\nworker_processes 2;\npid {p}/logs/nginx.pid;\nerror_log {p}/logs/error.log;\n\
             events {{ worker_connections 512; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {p}/logs/client;\n  proxy_temp_path {p}/logs/proxy;\n\
             \x20 fastcgi_temp_path {p}/logs/fastcgi;\n  uwsgi_temp_path {p}/logs/uwsgi;\n  scgi_temp_path {p}/logs/scgi;\n\
             {include}{}\
             \x20 server {{ listen 127.0.0.1:{}; {log}location / {{ proxy_pass http://{pool}; }} }}\n}}\n",
            self.workers_user,
            if broken {
                "  no_such_directive on;\n"
            } else {
                ""
            },
            self.front,
        )
    }

    fn spawn(&mut self) {
        let child = Command::new(&self.bin)
            .arg("-p")
            .arg(&self.prefix)
            .arg("-c")
            .arg(&self.conf)
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let start = Instant::now();
        while get(self.front, None).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "nginx did not start: {}",
                self.error_log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `nginx -s reload`, and a moment for new workers to take over.
    pub fn reload(&self) {
        self.signal_reload();
        std::thread::sleep(Duration::from_millis(300));
    }

    /// The master's workers that take connections (their title is not yet "shutting down"),
    /// each as (pid, start time).
    pub fn workers(&self) -> Vec<(u32, u64)> {
        let master = std::fs::read_to_string(self.prefix.join("logs/nginx.pid")).unwrap();
        let master: u32 = master.trim().parse().unwrap();
        // The kernel's list of the master's children, or every process where it keeps none.
        let pids: Vec<u32> =
            match std::fs::read_to_string(format!("/proc/{master}/task/{master}/children")) {
                Ok(kids) => kids
                    .split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect(),
                Err(_) => std::fs::read_dir("/proc")
                    .unwrap()
                    .flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect(),
            };
        pids.into_iter()
            .filter_map(|pid| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                // After the name: state, ppid, …; the start time is stat's 22nd field.
                let mut rest = stat.rsplit_once(") ")?.1.split_whitespace();
                let ppid: u32 = rest.nth(1)?.parse().ok()?;
                let started: u64 = rest.nth(17)?.parse().ok()?;
                let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).ok()?;
                (ppid == master && cmd.contains("worker process") && !cmd.contains("shutting"))
                    .then_some((pid, started))
            })
            .collect()
    }

    /// `nginx -s reload` alone: it returns once the master has the signal.
    pub fn signal_reload(&self) {
        let out = Command::new(&self.bin)
            .arg("-p")
            .arg(&self.prefix)
            .arg("-c")
            .arg(&self.conf)
            .args(["-s", "reload"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "nginx -s reload: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Router for Nginx {
    const NAME: &'static str = "nginx";

    fn start(dir: &Path, servers: usize, stable: &str) -> Option<Self> {
        Nginx::start(dir, servers, stable)
    }

    fn manent_yml(&self, name: &str) -> String {
        format!(
            "plugins:\n  {name}:\n    external:\n      command: {PLUGIN}\n      start_timeout: 10s\n    \
             nginx: {}\n    prefix: {}\n    conf: {}\n    upstreams: {}\n    upstream: web\n    \
             state_listen: 127.0.0.1:{}\n    access_log: {}\n",
            self.bin.display(),
            self.prefix.display(),
            self.conf.display(),
            self.upstreams.display(),
            self.state,
            self.access_log.display()
        )
    }

    fn targets_yml(&self) -> String {
        super::router::targets_yml(&self.servers)
    }

    fn build(&self, version: &str, healthy: bool) {
        super::router::build(&self.prefix, version, healthy);
    }

    fn build_failing(&self, version: &str) {
        super::router::build_failing(&self.prefix, version);
    }

    fn build_slow(&self, version: &str, ms: u32) {
        super::router::build_slow(&self.prefix, version, ms);
    }

    fn servers(&self) -> &[Server] {
        &self.servers
    }

    fn log_traffic(&mut self) {
        self.logging = true;
        std::fs::write(&self.conf, self.main_conf(true, false)).unwrap();
        self.reload();
    }

    fn artifact_uri(&self) -> String {
        super::router::artifact_uri(&self.prefix)
    }

    fn front(&self) -> u16 {
        self.front
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.prefix.join("logs/error.log")).unwrap_or_default()
    }

    fn hand_written(&self, slot: &str) {
        let mut text = String::from("upstream web_split {\n");
        for s in &self.servers {
            text.push_str(&format!("    server 127.0.0.1:{};\n", s.port(slot)));
        }
        text.push_str("}\nmap $http_x_canary $web_pool { default web_split; }\n");
        // The format the plugin renders, pasted from its documentation: the front logs in it.
        text.push_str(LOG_FORMAT);
        std::fs::write(&self.upstreams, text).unwrap();
        if self.child.is_some() {
            self.reload();
        }
    }

    fn edit_weights(&self, slot: &str, percent: u32) {
        let text = std::fs::read_to_string(&self.upstreams).unwrap();
        let (head, rest) = text.split_once("upstream web_split {").unwrap();
        let (_, tail) = rest.split_once('}').unwrap();
        let other = if slot == "blue" { "green" } else { "blue" };
        let mut split = String::from("upstream web_split {\n");
        for s in &self.servers {
            for (sl, w) in [(slot, percent), (other, 100 - percent)] {
                if w > 0 {
                    split.push_str(&format!(
                        "    server 127.0.0.1:{} weight={w};\n",
                        s.port(sl)
                    ));
                }
            }
        }
        split.push('}');
        std::fs::write(&self.upstreams, format!("{head}{split}{tail}")).unwrap();
        self.reload();
    }

    fn break_check(&self, broken: bool) {
        std::fs::write(&self.conf, self.main_conf(true, broken)).unwrap();
    }

    fn stop(&mut self) {
        super::router::stop(&mut self.child, "-QUIT");
    }

    fn start_again(&mut self) {
        self.spawn();
    }

    fn unload(&mut self, unloaded: bool) {
        std::fs::write(&self.conf, self.main_conf(!unloaded, false)).unwrap();
        self.reload();
    }

    fn leftovers(&self) -> Vec<PathBuf> {
        super::router::manent_temporaries(&self.prefix.join("conf"))
    }

    fn staged(&self) -> (PathBuf, PathBuf) {
        (
            self.prefix.join("conf"),
            self.upstreams.with_extension("manent-new"),
        )
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        self.stop();
    }
}
