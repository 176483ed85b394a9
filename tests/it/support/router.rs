//! What the shared router suite (`tests/it/routers.rs`) needs of a real traffic router run by a
//! test: nginx (`support/nginx.rs`) and HAProxy (`support/haproxy.rs`) each start their own on
//! loopback ports with two slots (blue and green) per server, and can be broken, stopped and
//! edited by hand the way an operator (or an accident) would.

#![allow(dead_code, reason = "each test binary uses part of the support module")]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

pub use super::ports::free_port;

/// A router under test.
pub trait Router: Sized {
    /// `nginx`, `haproxy`.
    const NAME: &'static str;

    /// Starts one under `dir` with `servers` servers, the blue slot serving `stable`; `None`
    /// when it is not installed (CI refuses that).
    fn start(dir: &Path, servers: usize, stable: &str) -> Option<Self>;
    /// The plugin's entry in manent.yml, named `plugin`.
    fn manent_yml(&self, plugin: &str) -> String;
    /// The descriptor's targets, with their slots' addresses and roots.
    fn targets_yml(&self) -> String;
    /// A build of `version` to deploy, with or without a health page.
    fn build(&self, version: &str, healthy: bool);
    /// A build of `version` whose servers answer 500 to one request in twenty.
    fn build_failing(&self, version: &str);
    /// Has the router record the traffic its plugin reports (nginx: the front's access log;
    /// HAProxy counts by itself).
    fn log_traffic(&mut self) {}
    /// `artifact.uri` for the builds.
    fn artifact_uri(&self) -> String;
    /// The port clients send requests to.
    fn front(&self) -> u16;
    /// The router's error log, for assertion messages.
    fn error_log(&self) -> String;
    /// Replaces the router's configuration with one manent did not write, production on
    /// `slot` (`blue` or `green`) only, and loads it.
    fn hand_written(&self, slot: &str);
    /// By hand, bypassing manent: `percent` of production requests to `slot`, the rest to the
    /// other, loaded.
    fn edit_weights(&self, slot: &str, percent: u32);
    /// Makes the router's configuration check fail (a bad directive in its main file), or
    /// mends it.
    fn break_check(&self, broken: bool);
    /// Makes the router refuse the changes manent makes, or mends it. nginx changes by a
    /// checked reload: its check fails. HAProxy changes weights through its runtime API, which
    /// no configuration check guards: its admin socket answers at level `operator`, which may
    /// read but not set a weight.
    fn refuse_changes(&self, refused: bool) {
        self.break_check(refused);
    }
    /// Stops the router process.
    fn stop(&mut self);
    /// Starts it again with the files as they are.
    fn start_again(&mut self);
    /// Reloads the router with a main configuration that does not use manent's file (everything
    /// to the blue slot), or with the original one again (HAProxy restarts: the files its
    /// command line loads change only so).
    fn unload(&mut self, unloaded: bool);
    /// Temporary files the plugin left beside its own.
    fn leftovers(&self) -> Vec<PathBuf>;

    /// `n` requests through the front: how many answered `version`, and how many failed.
    fn sample(&self, n: usize, header: Option<(&str, &str)>, version: &str) -> (usize, usize) {
        let (mut hits, mut failed) = (0, 0);
        for _ in 0..n {
            match get(self.front(), header) {
                Ok(body) if body.contains(&format!("version {version}")) => hits += 1,
                Ok(_) => {}
                Err(_) => failed += 1,
            }
        }
        (hits, failed)
    }

    /// The share of `n` requests that reached `version`, in percent, and the failures.
    fn share(&self, version: &str, n: usize) -> (f64, usize) {
        let (hits, failed) = self.sample(n, None, version);
        (100.0 * hits as f64 / n as f64, failed)
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
    // One write: a request in pieces waits on Nagle and the router's delayed ACK (HAProxy
    // delays it: 40 ms a request).
    s.set_nodelay(true).ok();
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\n{extra}Connection: close\r\n\r\n");
    s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).map_err(|e| e.to_string())?;
    let status = resp.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        return Err(format!("status {status}"));
    }
    Ok(resp.split("\r\n\r\n").nth(1).unwrap_or("").to_owned())
}

/// Files under `dir` whose name contains `.manent-` (what a half-applied change leaves).
pub fn manent_temporaries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.contains(".manent-"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// One server of the application: its blue and green ports and roots.
pub struct Server {
    pub name: String,
    pub blue: u16,
    pub green: u16,
    pub blue_root: PathBuf,
    pub green_root: PathBuf,
}

impl Server {
    pub fn port(&self, slot: &str) -> u16 {
        if slot == "blue" {
            self.blue
        } else {
            self.green
        }
    }
}

/// `n` servers with their slots' roots under `dir/slots`, the blue slot serving `stable` (a
/// page and a health page); `port` gives each slot's port from its root.
pub fn servers(
    dir: &Path,
    n: usize,
    stable: &str,
    mut port: impl FnMut(&Path) -> u16,
) -> Vec<Server> {
    (1..=n)
        .map(|i| {
            let (blue_root, green_root) = (
                dir.join(format!("slots/web-{i}/blue")),
                dir.join(format!("slots/web-{i}/green")),
            );
            std::fs::create_dir_all(&blue_root).unwrap();
            std::fs::create_dir_all(&green_root).unwrap();
            std::fs::write(blue_root.join("index.html"), format!("version {stable}\n")).unwrap();
            std::fs::write(blue_root.join("health"), "ok\n").unwrap();
            Server {
                name: format!("web-{i}"),
                blue: port(&blue_root),
                green: port(&green_root),
                blue_root,
                green_root,
            }
        })
        .collect()
}

/// The descriptor's targets for `servers`, with their slots' addresses and roots.
pub fn targets_yml(servers: &[Server]) -> String {
    servers
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

/// A build of `version` under `dir/builds`, with or without a health page.
pub fn build(dir: &Path, version: &str, healthy: bool) {
    let dir = dir.join("builds").join(version);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("index.html"), format!("version {version}\n")).unwrap();
    if healthy {
        std::fs::write(dir.join("health"), "ok\n").unwrap();
    }
}

/// A build of `version` under `dir/builds` whose servers answer 500 to 5% of requests (the
/// `fail5` file says so to the slot servers).
pub fn build_failing(dir: &Path, version: &str) {
    build(dir, version, true);
    std::fs::write(
        dir.join("builds").join(version).join("fail5"),
        "5% of requests get 500\n",
    )
    .unwrap();
}

/// `artifact.uri` for the builds under `dir`.
pub fn artifact_uri(dir: &Path) -> String {
    format!("{}/builds/{{version}}", dir.display())
}

/// Stops a router's process with `signal` (`-QUIT`, `-TERM`), killed if it is still there 5s
/// later.
pub fn stop(child: &mut Option<Child>, signal: &str) {
    if let Some(mut child) = child.take() {
        let _ = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}
