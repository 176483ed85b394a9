//! manent against hostile and clumsy input, with the real binary: values built to break out of
//! a shell's quoting, a plugin that completes its handshake and never speaks, engines killed
//! mid-command, corrupted databases, a plugin flooding stderr, multi-line and passed-through
//! secrets, and configuration files that are FIFOs, devices or absurdly nested. Every run is
//! bounded: a hang fails the test instead of stalling it. One file per threat; what several use is
//! here.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::fleet;
use crate::support::sshd;
use fleet::{Fixture, LEDGER_MANENT, me, said, text, wait_until};

mod damaged_db;
mod dead_engine;
mod floods;
mod full_disk;
mod identity;
mod links;
mod not_files;
mod plugins;
mod second_user;
mod secrets;
mod shell;
mod trust;

const FIXTURE_PLUGIN: &str = env!("CARGO_BIN_EXE_manent-fixture-plugin");

/// Longer than anything here takes when it works; reached only by a hang.
const HANG: Duration = Duration::from_secs(60);

/// Runs `cmd` to its end, failing the test if it is still running after `limit`.
fn bounded(mut cmd: Command, limit: Duration, what: &str) -> Output {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    wait_bounded(child, limit, what)
}

/// Waits for `child`, reading its output meanwhile; kills it and fails after `limit`.
fn wait_bounded(mut child: Child, limit: Duration, what: &str) -> Output {
    let pipe = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = pipe(child.stdout.take().map(|s| Box::new(s) as _));
    let err = pipe(child.stderr.take().map(|s| Box::new(s) as _));
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = err.join().unwrap();
            panic!("{what}: still running after {limit:?}\n{}", text(&stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Sends `sig` (`TERM`, `INT`) to `child`.
fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([format!("-{sig}"), child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig} {}", child.id());
}

/// The live (not zombie) processes whose process group is `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    group_members_since(pgid, None)
}

/// Clock ticks since boot now (the unit of a process's start time in /proc).
fn ticks_now() -> u64 {
    let up: f64 = std::fs::read_to_string("/proc/uptime")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    (up * 100.0) as u64
}

/// The live members of group `pgid` started no later than `before` (clock ticks since boot):
/// on a busy machine pids wrap (pid_max is often 32768), and a later process may lead a new
/// group with an old number.
fn group_members_since(pgid: u32, before: Option<u64>) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
        let Some(rest) = stat.rsplit_once(") ").map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        // Field 22 of stat (starttime) is f[19] here.
        let old_enough = before.is_none_or(|b| {
            f.get(19)
                .and_then(|t| t.parse::<u64>().ok())
                .is_none_or(|t| t <= b)
        });
        if f.first() != Some(&"Z")
            && f.get(2).and_then(|g| g.parse().ok()) == Some(pgid)
            && old_enough
        {
            found.push(pid);
        }
    }
    found
}

/// The live processes whose environment holds `KEY=value`.
fn processes_with_env(key: &str, value: &str) -> Vec<u32> {
    let needle = format!("{key}={value}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(") ").map(|(_, r)| r.starts_with('Z')))
            .unwrap_or(true);
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        if !zombie && env.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

// ---------------------------------------------------------------------------------------------
// What the second-user checks share (`second_user.rs`, `trust.rs`).

const NOBODY: u32 = 65534;

/// True when the tests run as root (they must, to act as a second user); otherwise the test is
/// skipped, saying so.
fn as_root(test: &str) -> bool {
    let root = crate::support::is_root();
    if !root {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            format!("{test}: skipped: acting as a second user needs root\n").as_bytes(),
        );
    }
    root
}

/// `script` run by `sh` as `nobody`.
fn as_nobody(script: &str) -> Output {
    use std::os::unix::process::CommandExt;
    let out = Command::new("sh")
        .args(["-c", script])
        .uid(NOBODY)
        .gid(NOBODY)
        .current_dir("/")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "as nobody: {script}\n{}",
        text(&out.stderr)
    );
    out
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().mode() & 0o7777
}

/// A process of its own group that must survive: `sleep 300`, as root or as nobody.
struct Victim(Child);

impl Victim {
    fn start(nobody: bool) -> Victim {
        use std::os::unix::process::CommandExt;
        let mut c = Command::new("sleep");
        c.arg("300").process_group(0);
        if nobody {
            c.uid(NOBODY).gid(NOBODY);
        }
        Victim(c.spawn().unwrap())
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    fn alive(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }

    /// What the engine would record for it: `BOOT START UID EXE`, as anyone can read it from
    /// /proc (its start time is world-readable).
    fn record(&self, uid: u32, exe: &str) -> String {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        let start = stat
            .rsplit_once(") ")
            .unwrap()
            .1
            .split_whitespace()
            .nth(19)
            .unwrap();
        format!("{} {start} {uid} {exe}\n", boot.trim())
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The real path of the `sleep` binary (what /proc/PID/exe shows for a victim).
fn sleep_exe() -> String {
    let out = Command::new("sh")
        .args(["-c", "readlink -f \"$(command -v sleep)\""])
        .output()
        .unwrap();
    text(&out.stdout).trim().to_owned()
}

/// A fixture whose database lives in `shared/`, a directory others may write (`mode`), under a
/// fixture directory nobody may traverse.
fn shared_dir_fixture(mode: u32) -> Fixture {
    let fx = Fixture::new(
        &format!("database: shared/manent.db\n{LEDGER_MANENT}"),
        &[("web", SLOW_APP)],
    );
    chmod(fx.path(), 0o755);
    std::fs::create_dir(fx.path().join("shared")).unwrap();
    chmod(&fx.path().join("shared"), mode);
    fx
}

/// A deploy refused with exit 6, naming `path` and each of `said`; nothing ran.
fn refused_naming(fx: &Fixture, path: &Path, said: &[&str]) {
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}{}", text(&out.stdout));
    assert!(
        err.contains(&path.display().to_string()),
        "names {path:?}: {err}"
    );
    for s in said {
        assert!(err.contains(s), "expected {s:?} in {err}");
    }
    assert!(!fx.path().join("ledger").exists(), "a command ran: {err}");
}

// ---------------------------------------------------------------------------------------------
// Fixtures and readings several threats' files use.

/// Two targets whose command records `start|done TARGET ATTEMPT PGID`, sleeping `DELAY` between.
const SLOW_APP: &str = r#"application: web
artifact: {version: "1.0.0"}
deploy:
  plugin: exec
  params:
    deploy: |
      echo "start $MANENT_TARGET $MANENT_ATTEMPT $$" >> "$FIXTURE/ledger"
      sleep "${DELAY:-0}"
      echo "done $MANENT_TARGET $MANENT_ATTEMPT $$" >> "$FIXTURE/ledger"
parallelism: 2
max_retries: 2
backoff: {base: 10ms, max: 50ms}
environments:
  prod:
    targets: [{name: web-1}, {name: web-2}]
"#;

/// `(event, target, pgid)` per ledger line.
fn slow_ledger(fx: &Fixture) -> Vec<(String, String, u32)> {
    std::fs::read_to_string(fx.path().join("ledger"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((
                f.first()?.to_string(),
                f.get(1)?.to_string(),
                f.get(3)?.parse().ok()?,
            ))
        })
        .collect()
}

fn started(fx: &Fixture) -> Vec<u32> {
    slow_ledger(fx)
        .into_iter()
        .filter(|e| e.0 == "start")
        .map(|e| e.2)
        .collect()
}

fn validate_refuses(fx: &Fixture, expected: &[&str]) {
    let out = bounded(fx.command(&["validate"]), HANG, "validate");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for e in expected {
        assert!(err.contains(e), "expected {e:?} in {err}");
    }
}

const PLAIN_APP: &str = "application: other\nartifact: {version: \"1\"}\ndeploy:\n  plugin: exec\n  params:\n    \
     deploy: echo ok\nenvironments:\n  prod:\n    targets: [{name: o1}]\n";
