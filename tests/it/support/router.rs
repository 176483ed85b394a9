//! What the shared router suite (`tests/it/routers.rs`) needs of a real traffic router run by a
//! test: nginx (`support/nginx.rs`) and HAProxy (`support/haproxy.rs`) each start their own on
//! loopback ports with two slots (blue and green) per server, and can be broken, stopped and
//! edited by hand the way an operator (or an accident) would. Behind both, each slot of each
//! server is the tests' own backend ([`Slot`]), whose release says how it misbehaves.

#![allow(dead_code, reason = "each test binary uses part of the support module")]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
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
    /// A build of `version` whose servers hold each answer `ms` milliseconds.
    fn build_slow(&self, version: &str, ms: u32);
    /// The application's servers.
    fn servers(&self) -> &[Server];
    /// What `slot` serves now fails one request in twenty (`fail`) and takes `ms` an answer.
    fn misbehave(&self, slot: &str, fail: bool, ms: u32) {
        misbehave(self.servers(), slot, fail, ms);
    }
    /// Has the router log the traffic its plugin reports, with latency (nginx: the front's
    /// access log; HAProxy: its log in the plugin's log-format, without which the plugin reads
    /// HAProxy's counters, which keep no latency).
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
    /// The directory the plugin writes its files into, and the temporary file it writes first.
    fn staged(&self) -> (PathBuf, PathBuf);

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

/// One slot of one server, the tests' own flaky backend: HTTP/1.1 on a loopback port, `/`
/// answering the root's `index.html` and any other path the file of that name (404 when there
/// is none), on a thread of the test's process (stopped with it: nothing outlives the test).
/// The release in the root says how it misbehaves, read at every request: `fail5` answers 500
/// to one request in twenty (counted by this slot alone, so its share is exact whatever the
/// other slots serve), `delay_ms` holds each answer that many milliseconds.
pub struct Slot {
    pub port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Slot {
    pub fn serve(root: &Path) -> Slot {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicU64::new(0));
        let (root, stopped) = (root.to_owned(), stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::Relaxed) {
                    return;
                }
                if let Ok(conn) = conn {
                    let (root, served) = (root.clone(), served.clone());
                    std::thread::spawn(move || answer(conn, &root, &served));
                }
            }
        });
        Slot {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

/// One request on `conn`, answered and closed.
fn answer(mut conn: TcpStream, root: &Path, served: &AtomicU64) {
    conn.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16384 {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split_whitespace().nth(1).unwrap_or("/");
    let path = path
        .split('?')
        .next()
        .unwrap_or("/")
        .trim_start_matches('/');
    let file = if path.is_empty() { "index.html" } else { path };
    let body = (!file.contains("..")).then(|| std::fs::read(root.join(file)).ok());
    let failing =
        root.join("fail5").exists() && served.fetch_add(1, Ordering::Relaxed).is_multiple_of(20);
    if let Some(ms) = std::fs::read_to_string(root.join("delay_ms"))
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    {
        std::thread::sleep(Duration::from_millis(ms));
    }
    let (status, body) = match body.flatten() {
        _ if failing => (
            "500 Internal Server Error",
            b"failing on purpose\n".to_vec(),
        ),
        Some(b) => ("200 OK", b),
        None => ("404 Not Found", b"not found\n".to_vec()),
    };
    // One write: a response in pieces waits on Nagle and the peer's delayed ACK (40 ms).
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    response.extend_from_slice(&body);
    conn.set_nodelay(true).ok();
    let _ = conn.write_all(&response);
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
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

/// A build of `version` under `dir/builds` whose servers hold each answer `ms` milliseconds.
pub fn build_slow(dir: &Path, version: &str, ms: u32) {
    build(dir, version, true);
    std::fs::write(
        dir.join("builds").join(version).join("delay_ms"),
        format!("{ms}\n"),
    )
    .unwrap();
}

/// Makes what `slot` serves on every server fail one request in twenty (`fail`) and take `ms`
/// milliseconds an answer, as a release that misbehaves would (written into the slot's root).
pub fn misbehave(servers: &[Server], slot: &str, fail: bool, ms: u32) {
    for s in servers {
        let root = if slot == "blue" {
            &s.blue_root
        } else {
            &s.green_root
        };
        let _ = std::fs::remove_file(root.join("fail5"));
        let _ = std::fs::remove_file(root.join("delay_ms"));
        if fail {
            std::fs::write(root.join("fail5"), "5% of requests get 500\n").unwrap();
        }
        if ms > 0 {
            std::fs::write(root.join("delay_ms"), format!("{ms}\n")).unwrap();
        }
    }
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
