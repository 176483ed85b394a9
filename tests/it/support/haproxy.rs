//! A private HAProxy for tests and benchmarks: master-worker mode in the foreground with its own
//! pid file, master CLI (`-S`) and admin socket in the test's directory; a frontend on a
//! loopback port sending requests to backend `web`, which the plugin's file defines; and the
//! servers of an application in two slots (blue and green), each slot the tests' own backend
//! ([`Slot`]). HAProxy is stopped when dropped.

#![allow(dead_code, reason = "each test binary uses part of the support module")]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use super::router::{Router, Server, Slot, get};

/// The plugin's log-format, as its rendered file and its documentation give it.
pub const LOG_FORMAT: &str = r#"{"manent":1,"at":"%Ts.%ms","backend":"%b","server":"%s","status":%ST,"tr":%Tr,"td":%Td,"releases":"blue=%[var(txn.manent_blue)] green=%[var(txn.manent_green)]"}"#;

/// The plugin binary.
pub const PLUGIN: &str = env!("CARGO_BIN_EXE_manent-plugin-haproxy");

/// Where haproxy is, if it is installed.
pub fn binary() -> Option<PathBuf> {
    [
        "/usr/sbin/haproxy",
        "/usr/bin/haproxy",
        "/usr/local/sbin/haproxy",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
}

/// A line to a HAProxy CLI socket (the admin socket or the master's): what it answered.
pub fn ask(socket: &Path, line: &str) -> std::io::Result<String> {
    let mut s = UnixStream::connect(socket)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(format!("{line}\n").as_bytes())?;
    s.shutdown(std::net::Shutdown::Write)?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// A running HAProxy.
pub struct Haproxy {
    pub bin: PathBuf,
    pub dir: PathBuf,
    /// The operator's main configuration.
    pub conf: PathBuf,
    /// The plugin's file, loaded with a second `-f`.
    pub config: PathBuf,
    pub socket: PathBuf,
    pub master_socket: PathBuf,
    pub front: u16,
    pub servers: Vec<Server>,
    slots: Vec<Slot>,
    /// Without the plugin's file (see `unload`).
    unloaded: bool,
    /// Its log, in the plugin's log-format, once [`Router::log_traffic`] asks for it: the
    /// workers' standard output (`log stdout`).
    pub access_log: PathBuf,
    logging: bool,
    child: Option<Child>,
}

impl Haproxy {
    /// HAProxy in `dir` with `n` servers; `stable` is what the blue slot serves at first.
    pub fn start(dir: &Path, n: usize, stable: &str) -> Option<Haproxy> {
        let bin = binary()?;
        for d in ["conf", "run", "builds"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        let mut slots = Vec::new();
        let servers = super::router::servers(dir, n, stable, |root| {
            let s = Slot::serve(root);
            let port = s.port;
            slots.push(s);
            port
        });
        let mut h = Haproxy {
            bin,
            dir: dir.to_owned(),
            conf: dir.join("conf/haproxy.cfg"),
            config: dir.join("conf/manent-web.cfg"),
            socket: dir.join("run/admin.sock"),
            master_socket: dir.join("run/master.sock"),
            front: super::router::free_port(),
            servers,
            slots,
            unloaded: false,
            access_log: dir.join("run/access.log"),
            logging: false,
            child: None,
        };
        // What an operator writes once: the backend on blue; the plugin owns the file from then on.
        h.hand_written("blue");
        std::fs::write(&h.conf, h.main_conf(false, "admin")).unwrap();
        h.spawn();
        Some(h)
    }

    /// The main configuration: the admin socket at `level`, a frontend to backend `web`;
    /// `broken` adds a keyword HAProxy does not know.
    fn main_conf(&self, broken: bool, level: &str) -> String {
        // The plugin's log-format, as its rendered file gives it, to the workers' stdout.
        let (log, format) = if self.logging {
            (
                "    log stdout format raw local0\n",
                format!("    log global\n    log-format '{}'\n", LOG_FORMAT),
            )
        } else {
            ("", String::new())
        };
        format!(
            "global\n    stats socket {} mode 600 level {level}\n    stats timeout 30s\n{log}{}\
             defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    \
             timeout server 10s\n\
             frontend fe\n    bind 127.0.0.1:{}\n{format}    default_backend web\n",
            self.socket.display(),
            if broken {
                "    no-such-keyword on\n"
            } else {
                ""
            },
            self.front
        )
    }

    /// A main configuration with its own backend `web`, everything on blue: HAProxy started
    /// with it alone does not load the plugin's file.
    fn unloaded_conf(&self) -> PathBuf {
        let path = self.dir.join("conf/unloaded.cfg");
        let mut text = self.main_conf(false, "admin");
        text.push_str("backend web\n");
        for s in &self.servers {
            text.push_str(&format!("    server {} 127.0.0.1:{}\n", s.name, s.blue));
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("run/haproxy.log"))
            .unwrap();
        let mut cmd = Command::new(&self.bin);
        cmd.arg("-W");
        if self.unloaded {
            cmd.arg("-f").arg(self.unloaded_conf());
        } else {
            cmd.arg("-f").arg(&self.conf).arg("-f").arg(&self.config);
        }
        let out = if self.logging {
            Stdio::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.access_log)
                    .unwrap(),
            )
        } else {
            Stdio::null()
        };
        let child = cmd
            .arg("-p")
            .arg(self.dir.join("run/haproxy.pid"))
            .arg("-S")
            .arg(&self.master_socket)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let start = Instant::now();
        while get(self.front, None).is_err()
            || self.worker().is_none()
            || ask(&self.master_socket, "show proc").is_err()
        {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "haproxy did not start: {}",
                self.error_log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The pid of the worker answering the admin socket.
    pub fn worker(&self) -> Option<u32> {
        let info = ask(&self.socket, "show info").ok()?;
        info.lines()
            .find_map(|l| l.strip_prefix("Pid: "))
            .and_then(|p| p.trim().parse().ok())
    }

    /// A reload through the master CLI, once the new worker answers.
    pub fn reload(&self) {
        let old = self.worker();
        let start = Instant::now();
        // The master CLI is away while the master re-executes itself (an earlier reload).
        let said = loop {
            match ask(&self.master_socket, "reload") {
                Ok(said) => break said,
                Err(e) => assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "the master CLI: {e}"
                ),
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(said.trim().is_empty(), "reload: {said}");
        while self.worker() == old || self.worker().is_none() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "haproxy did not reload: {}",
                self.error_log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl Haproxy {
    /// Another HAProxy, not the master's, started on the same admin socket path (as one
    /// started by hand without `-sf` would): it takes the path, with a backend `web` of its own
    /// serving green. Stopped when the child is dropped by the caller (`kill`).
    pub fn intruder(&self) -> Child {
        let conf = self.dir.join("conf/intruder.cfg");
        let mut text = format!(
            "global\n    stats socket {} mode 600 level admin\n\
             defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    \
             timeout server 10s\nfrontend other\n    bind 127.0.0.1:{}\n    default_backend web\n\
             backend web\n",
            self.socket.display(),
            super::router::free_port()
        );
        for s in &self.servers {
            text.push_str(&format!("    server {} 127.0.0.1:{}\n", s.name, s.green));
        }
        std::fs::write(&conf, text).unwrap();
        let child = Command::new(&self.bin)
            .arg("-f")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while self.worker() != Some(child.id()) {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the intruder did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        child
    }

    /// Edits the plugin's file by hand (`from` replaced by `to`) and reloads HAProxy.
    pub fn edit_file(&self, from: &str, to: &str) {
        let text = std::fs::read_to_string(&self.config).unwrap();
        assert!(text.contains(from), "{from:?} in\n{text}");
        std::fs::write(&self.config, text.replace(from, to)).unwrap();
        self.reload();
    }
}

impl Router for Haproxy {
    const NAME: &'static str = "haproxy";

    fn start(dir: &Path, servers: usize, stable: &str) -> Option<Self> {
        Haproxy::start(dir, servers, stable)
    }

    fn manent_yml(&self, name: &str) -> String {
        let log = if self.logging {
            format!("    access_log: {}\n", self.access_log.display())
        } else {
            String::new()
        };
        format!(
            "plugins:\n  {name}:\n    external:\n      command: {PLUGIN}\n      start_timeout: 10s\n    \
             haproxy: {}\n    config: {}\n    socket: {}\n    master_socket: {}\n    backend: web\n{log}",
            self.bin.display(),
            self.config.display(),
            self.socket.display(),
            self.master_socket.display()
        )
    }

    /// HAProxy logs each request in the plugin's log-format to its workers' stdout, a file:
    /// started again (a worker's stdout is its master's).
    fn log_traffic(&mut self) {
        self.logging = true;
        std::fs::write(&self.conf, self.main_conf(false, "admin")).unwrap();
        self.stop();
        self.spawn();
    }

    fn targets_yml(&self) -> String {
        super::router::targets_yml(&self.servers)
    }

    fn build(&self, version: &str, healthy: bool) {
        super::router::build(&self.dir, version, healthy);
    }

    fn build_failing(&self, version: &str) {
        super::router::build_failing(&self.dir, version);
    }

    fn build_slow(&self, version: &str, ms: u32) {
        super::router::build_slow(&self.dir, version, ms);
    }

    fn servers(&self) -> &[Server] {
        &self.servers
    }

    fn artifact_uri(&self) -> String {
        super::router::artifact_uri(&self.dir)
    }

    fn front(&self) -> u16 {
        self.front
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("run/haproxy.log")).unwrap_or_default()
    }

    fn hand_written(&self, slot: &str) {
        let mut text = String::from("backend web\n");
        for s in &self.servers {
            text.push_str(&format!(
                "    server {} 127.0.0.1:{}\n",
                s.name,
                s.port(slot)
            ));
        }
        std::fs::write(&self.config, text).unwrap();
        if self.child.is_some() {
            self.reload();
        }
    }

    /// Through the admin socket, as an operator at 3 am would: `set server … weight`.
    fn edit_weights(&self, slot: &str, percent: u32) {
        let other = if slot == "blue" { "green" } else { "blue" };
        let mut cmds = Vec::new();
        for (i, _) in self.servers.iter().enumerate() {
            let n = i + 1;
            cmds.push(format!("set server web/{slot}{n} weight {percent}"));
            cmds.push(format!(
                "set server web/{other}{n} weight {}",
                100 - percent
            ));
        }
        let said = ask(&self.socket, &cmds.join(";")).unwrap();
        assert!(said.trim().is_empty(), "{said}");
    }

    fn break_check(&self, broken: bool) {
        std::fs::write(&self.conf, self.main_conf(broken, "admin")).unwrap();
    }

    fn refuse_changes(&self, refused: bool) {
        let level = if refused { "operator" } else { "admin" };
        std::fs::write(&self.conf, self.main_conf(false, level)).unwrap();
        self.reload();
    }

    fn stop(&mut self) {
        super::router::stop(&mut self.child, "-TERM");
    }

    fn start_again(&mut self) {
        self.spawn();
    }

    /// A restart with a main configuration of its own (HAProxy has no include: what a command
    /// line loads changes only by starting it again).
    fn unload(&mut self, unloaded: bool) {
        self.stop();
        self.unloaded = unloaded;
        self.spawn();
    }

    fn leftovers(&self) -> Vec<PathBuf> {
        super::router::manent_temporaries(&self.dir.join("conf"))
    }

    fn staged(&self) -> (PathBuf, PathBuf) {
        (
            self.dir.join("conf"),
            self.config.with_extension("manent-new"),
        )
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        self.stop();
    }
}
