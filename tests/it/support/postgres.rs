//! A real PostgreSQL for a test: `initdb` in a temporary directory (as the `postgres` user when
//! the tests run as root: initdb refuses root), a server listening only on a Unix socket in that
//! directory, stopped when the handle drops.
//!
//! Without PostgreSQL's binaries a test is skipped with a note, unless `MANENT_REQUIRE_PG=1` or
//! `CI` is set: then it fails, so CI never passes by skipping.

#![allow(
    dead_code,
    clippy::print_stderr,
    reason = "each test binary uses a part; a skipped test says why"
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running PostgreSQL.
pub struct Postgres {
    dir: tempfile::TempDir,
    server: Option<Child>,
    bin: PathBuf,
    port: u16,
    as_user: Option<String>,
    durable: bool,
    /// Also listening on 127.0.0.1:`port` with TLS (its CA's PEM file), when asked.
    tls: Option<PathBuf>,
}

/// The inputs key every test engine on a test PostgreSQL shares (`engine.inputs_key`).
pub const INPUTS_KEY: &str = "manent-tests-inputs-key-0123456789abcdef";

/// [`INPUTS_KEY`] as the stores take it.
pub fn inputs_key() -> manent::workflow::InputsKey {
    manent::workflow::InputsKey::from_secret(INPUTS_KEY, "the tests' inputs key").unwrap()
}

/// Where Debian puts the server's binaries (not on PATH), newest version first.
fn bin_dir() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("MANENT_PG_BIN") {
        return Some(PathBuf::from(d));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|b| b.join("initdb").is_file() && b.join("postgres").is_file())
        .collect();
    found.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    found.pop()
}

fn required() -> bool {
    std::env::var("MANENT_REQUIRE_PG").is_ok_and(|v| v == "1") || std::env::var("CI").is_ok()
}

fn is_root() -> bool {
    // SAFETY-free: the effective uid through /proc (no libc call needed in tests).
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

impl Postgres {
    /// Starts one, or returns None (with a note) where PostgreSQL is not installed. Tests run
    /// it without fsync; [`Postgres::start_durable`] keeps PostgreSQL's defaults.
    pub fn start() -> Option<Postgres> {
        Postgres::start_with(false)
    }

    /// A server that syncs its WAL at every commit, as in production (benchmarks).
    pub fn start_durable() -> Option<Postgres> {
        Postgres::start_with(true)
    }

    fn start_with(durable: bool) -> Option<Postgres> {
        let Some(bin) = bin_dir() else {
            assert!(
                !required(),
                "PostgreSQL is not installed (apt-get install postgresql)"
            );
            eprintln!("skipped: PostgreSQL is not installed (apt-get install postgresql)");
            return None;
        };
        let as_user = is_root().then(|| "postgres".to_owned());
        let dir = tempfile::Builder::new()
            .prefix("manent-pg-")
            .tempdir()
            .expect("a temporary directory");
        if as_user.is_some() {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(status.success(), "chown of {}", dir.path().display());
        }
        let data = dir.path().join("data");
        let out = command(&as_user, &bin.join("initdb"))
            .args(["-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
            .arg("-D")
            .arg(&data)
            .output()
            .expect("initdb runs");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut pg = Postgres {
            dir,
            server: None,
            bin,
            port: free_port(),
            as_user,
            durable,
            tls: None,
        };
        pg.run_server();
        Some(pg)
    }

    /// One listening on 127.0.0.1 over TLS too, with a certificate for `localhost` from a CA of
    /// its own (PEM file: [`Postgres::ca_file`]).
    pub fn start_tls() -> Option<Postgres> {
        let mut pg = Postgres::start()?;
        pg.stop();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "manent test CA");
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        let data = pg.dir.path().join("data");
        std::fs::write(data.join("server.crt"), cert.pem()).unwrap();
        std::fs::write(data.join("server.key"), key.serialize_pem()).unwrap();
        let ca_file = pg.dir.path().join("ca.pem");
        std::fs::write(&ca_file, ca.pem()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            data.join("server.key"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        if pg.as_user.is_some() {
            for f in ["server.crt", "server.key"] {
                let _ = Command::new("chown")
                    .args(["postgres:postgres"])
                    .arg(data.join(f))
                    .status();
            }
        }
        pg.port = super::ports::free_port();
        pg.tls = Some(ca_file);
        pg.run_server();
        Some(pg)
    }

    /// The CA that signed a TLS server's certificate.
    pub fn ca_file(&self) -> &Path {
        self.tls
            .as_deref()
            .expect("a server started with start_tls")
    }

    /// The TCP port of a TLS server (on 127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    fn run_server(&mut self) {
        let data = self.dir.path().join("data");
        let log = std::fs::File::create(self.dir.path().join("server.log")).expect("log file");
        if self.as_user.is_some() {
            let _ = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(self.dir.path().join("server.log"))
                .status();
        }
        let child = command(&self.as_user, &self.bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-c", "listen_addresses=", "-c"])
            .arg(if self.durable {
                "fsync=on"
            } else {
                "fsync=off"
            })
            .arg("-c")
            .arg(format!(
                "unix_socket_directories={}",
                self.dir.path().display()
            ))
            .args(["-p", &self.port.to_string(), "-c", "max_connections=200"])
            .args(if self.tls.is_some() {
                vec!["-c", "ssl=on", "-c", "listen_addresses=127.0.0.1"]
            } else {
                Vec::new()
            })
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("postgres starts");
        self.server = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&self) {
        let t0 = Instant::now();
        loop {
            let ok = Command::new(self.bin.join("pg_isready"))
                .arg("-h")
                .arg(self.dir.path())
                .args(["-p", &self.port.to_string(), "-q"])
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "PostgreSQL did not start: {}",
                self.server_log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server's log (for a failed test's message).
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// The URL of database `postgres` as user `postgres`, over the Unix socket.
    pub fn url(&self) -> String {
        self.url_of("postgres")
    }

    /// The URL of database `db` (created by [`Postgres::create_db`]).
    pub fn url_of(&self, db: &str) -> String {
        format!(
            "postgres:///{db}?user=postgres&host={}&port={}",
            self.dir.path().display(),
            self.port
        )
    }

    /// Creates an empty database `name`.
    pub fn create_db(&self, name: &str) -> String {
        let out = Command::new(self.bin.join("createdb"))
            .arg("-h")
            .arg(self.dir.path())
            .args(["-p", &self.port.to_string(), "-U", "postgres", name])
            .output()
            .expect("createdb runs");
        assert!(
            out.status.success(),
            "createdb {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.url_of(name)
    }

    /// Stops the server (fast shutdown: connections are cut), as a database outage.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.server.take() {
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(20) {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again after [`Postgres::stop`], on the same data and port.
    pub fn restart(&mut self) {
        self.stop();
        self.run_server();
    }

    /// The directory of its socket.
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `program` run as `as_user` (its uid and gid from /etc/passwd): the process itself, not a
/// wrapper, so a signal to it reaches the server.
fn command(as_user: &Option<String>, program: &Path) -> Command {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(program);
    if let Some(user) = as_user {
        let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
        let fields: Vec<&str> = passwd
            .lines()
            .map(|l| l.split(':').collect::<Vec<_>>())
            .find(|f| f.first() == Some(&user.as_str()))
            .unwrap_or_else(|| panic!("no user {user} (apt-get install postgresql creates it)"));
        let (uid, gid): (u32, u32) = (fields[2].parse().unwrap(), fields[3].parse().unwrap());
        c.uid(uid).gid(gid).env("HOME", fields[5]).env("USER", user);
    }
    c
}

/// A port number for the socket's name (`.s.PGSQL.<port>`): the socket lives in the test's own
/// directory, so any number works; a varied one keeps log lines apart.
fn free_port() -> u16 {
    5432 + (std::process::id() % 1000) as u16
}
