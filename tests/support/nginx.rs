//! A private nginx for tests and benchmarks: its own prefix, pid file and loopback ports, two
//! servers of an application in two slots (blue and green, each serving its own root), and a
//! front that proxies to the pool manent's nginx plugin renders. Stopped when dropped.

#![allow(dead_code, reason = "each test binary uses part of the support module")]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The plugin binary.
pub const PLUGIN: &str = env!("CARGO_BIN_EXE_manent-plugin-nginx");

/// Where nginx is, if it is installed.
pub fn binary() -> Option<PathBuf> {
    ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// A free loopback port (bound and released: good enough for a test's own servers).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One server: its blue and green ports and roots.
pub struct Server {
    pub name: String,
    pub blue: u16,
    pub green: u16,
    pub blue_root: PathBuf,
    pub green_root: PathBuf,
}

/// A running nginx.
pub struct Nginx {
    pub bin: PathBuf,
    pub prefix: PathBuf,
    pub conf: PathBuf,
    pub upstreams: PathBuf,
    pub front: u16,
    pub servers: Vec<Server>,
    child: Child,
}

impl Nginx {
    /// nginx under `prefix` with `n` servers; `stable` is what the blue slot serves at first.
    pub fn start(prefix: &Path, n: usize, stable: &str) -> Option<Nginx> {
        let bin = binary()?;
        for d in ["conf", "logs", "builds"] {
            std::fs::create_dir_all(prefix.join(d)).unwrap();
        }
        let servers: Vec<Server> = (1..=n)
            .map(|i| Server {
                name: format!("web-{i}"),
                blue: free_port(),
                green: free_port(),
                blue_root: prefix.join(format!("slots/web-{i}/blue")),
                green_root: prefix.join(format!("slots/web-{i}/green")),
            })
            .collect();
        for s in &servers {
            std::fs::create_dir_all(&s.blue_root).unwrap();
            std::fs::create_dir_all(&s.green_root).unwrap();
            std::fs::write(
                s.blue_root.join("index.html"),
                format!("version {stable}\n"),
            )
            .unwrap();
            std::fs::write(s.blue_root.join("health"), "ok\n").unwrap();
        }
        let front = free_port();
        let upstreams = prefix.join("conf/manent-web.conf");
        // What an operator writes once: the pool on blue; the plugin owns the file from then on.
        let mut placeholder = String::from("upstream web_split {\n");
        for s in &servers {
            placeholder.push_str(&format!("    server 127.0.0.1:{};\n", s.blue));
        }
        placeholder.push_str("}\nmap $http_x_canary $web_pool { default web_split; }\n");
        std::fs::write(&upstreams, placeholder).unwrap();
        let mut slots = String::new();
        for s in &servers {
            for (port, root) in [(s.blue, &s.blue_root), (s.green, &s.green_root)] {
                slots.push_str(&format!(
                    "  server {{ listen 127.0.0.1:{port}; root {}; location / {{ default_type text/plain; }} }}\n",
                    root.display()
                ));
            }
        }
        let p = prefix.display();
        let conf = prefix.join("conf/nginx.conf");
        std::fs::write(
            &conf,
            format!(
                "user root;\nworker_processes 2;\npid {p}/logs/nginx.pid;\nerror_log {p}/logs/error.log;\n\
                 events {{ worker_connections 512; }}\n\
                 http {{\n  access_log off;\n  client_body_temp_path {p}/logs/client;\n  proxy_temp_path {p}/logs/proxy;\n\
                 \x20 fastcgi_temp_path {p}/logs/fastcgi;\n  uwsgi_temp_path {p}/logs/uwsgi;\n  scgi_temp_path {p}/logs/scgi;\n\
                 \x20 include {};\n\
                 \x20 server {{ listen 127.0.0.1:{front}; location / {{ proxy_pass http://$web_pool; }} }}\n{slots}}}\n",
                upstreams.display()
            ),
        )
        .unwrap();
        let child = Command::new(&bin)
            .arg("-p")
            .arg(prefix)
            .arg("-c")
            .arg(&conf)
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let n = Nginx {
            bin,
            prefix: prefix.to_owned(),
            conf,
            upstreams,
            front,
            servers,
            child,
        };
        let start = Instant::now();
        while get(n.front, None).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "nginx did not start: {}",
                std::fs::read_to_string(prefix.join("logs/error.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(n)
    }

    /// The plugin's options in manent.yml.
    pub fn manent_yml(&self, name: &str) -> String {
        format!(
            "plugins:\n  {name}:\n    external:\n      command: {PLUGIN}\n      start_timeout: 10s\n    \
             nginx: {}\n    prefix: {}\n    conf: {}\n    upstreams: {}\n    upstream: web\n",
            self.bin.display(),
            self.prefix.display(),
            self.conf.display(),
            self.upstreams.display()
        )
    }

    /// The descriptor's targets, with their slots.
    pub fn targets_yml(&self) -> String {
        self.servers
            .iter()
            .map(|s| {
                format!(
                    "      - name: {}\n        labels: {{blue: \"127.0.0.1:{}\", green: \"127.0.0.1:{}\", blue_root: \"{}\", green_root: \"{}\"}}\n",
                    s.name,
                    s.blue,
                    s.green,
                    s.blue_root.display(),
                    s.green_root.display()
                )
            })
            .collect()
    }

    /// A build of `version` to deploy (`builds/<version>`, with or without a health file).
    pub fn build(&self, version: &str, healthy: bool) {
        let dir = self.prefix.join("builds").join(version);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("index.html"), format!("version {version}\n")).unwrap();
        if healthy {
            std::fs::write(dir.join("health"), "ok\n").unwrap();
        }
    }

    /// `artifact.uri` for the builds.
    pub fn artifact_uri(&self) -> String {
        format!("{}/builds/{{version}}", self.prefix.display())
    }

    /// `n` requests through the front: how many answered `version`, and how many failed.
    pub fn sample(&self, n: usize, header: Option<(&str, &str)>, version: &str) -> (usize, usize) {
        let (mut hits, mut failed) = (0, 0);
        for _ in 0..n {
            match get(self.front, header) {
                Ok(body) if body.contains(&format!("version {version}")) => hits += 1,
                Ok(_) => {}
                Err(_) => failed += 1,
            }
        }
        (hits, failed)
    }

    /// The error log, for assertion messages.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.prefix.join("logs/error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-QUIT", &self.child.id().to_string()])
            .status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A GET of `/` through `port`: the body of a 200, or why not.
pub fn get(port: u16, header: Option<(&str, &str)>) -> Result<String, String> {
    get_path(port, "/", header)
}

/// A GET of `path` through `port`: the body of a 200, or why not.
pub fn get_path(port: u16, path: &str, header: Option<(&str, &str)>) -> Result<String, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let extra = header.map_or_else(String::new, |(k, v)| format!("{k}: {v}\r\n"));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: test\r\n{extra}Connection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).map_err(|e| e.to_string())?;
    let status = resp.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        return Err(format!("status {status}"));
    }
    Ok(resp.split("\r\n\r\n").nth(1).unwrap_or("").to_owned())
}
