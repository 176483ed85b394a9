//! How a benchmark runs: in full under `cargo bench`, or as a smoke run everywhere else.
//!
//! `cargo test` (the README's test command, which CI runs) runs every benchmark too (each has
//! `test = true` in Cargo.toml) at tiny sizes in seconds, so a benchmark that hangs, fails or no
//! longer builds breaks the build instead of rotting; a smoke run's figures mean nothing.
//! `MANENT_BENCH_SMOKE=1 cargo bench` asks for the same small run in release. Under `cargo test`
//! with a name filter (`cargo test crash`), a benchmark whose name it does not match does not run.
//!
//! In every mode the processes a benchmark starts die with it (`command`), and a watchdog ends a
//! benchmark that outlives its bound, so a hung one cannot hold CI or leave a worker behind.

#![allow(dead_code, reason = "each benchmark uses its own part of it")]

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

/// True for a smoke run: not under `cargo bench` (which passes `--bench`), or
/// `MANENT_BENCH_SMOKE` set to anything but `0`.
pub fn on() -> bool {
    let asked = std::env::var("MANENT_BENCH_SMOKE").is_ok_and(|v| !v.is_empty() && v != "0");
    asked || !std::env::args().any(|a| a == "--bench")
}

/// `full` for a benchmark, `smoke` for a smoke run.
pub fn size<T>(full: T, smoke: T) -> T {
    if on() { smoke } else { full }
}

/// Starts benchmark `name`: false when it should not run at all (a smoke run under a `cargo test`
/// name filter it does not match); otherwise says which run this is and starts the watchdog,
/// which ends the process (and so, through `command`, its children) after `full`, or five minutes
/// for a smoke run.
#[allow(clippy::print_stderr, reason = "a benchmark says what it is doing")]
pub fn begin(name: &str, full: Duration) -> bool {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if on() && !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
        return false;
    }
    if on() {
        eprintln!("bench {name}: smoke run (tiny sizes; its figures mean nothing)");
    }
    let bound = size(full, Duration::from_secs(300));
    let name = name.to_owned();
    std::thread::spawn(move || {
        std::thread::sleep(bound);
        eprintln!(
            "bench {name}: still running after {} s, so it hangs; ending it",
            bound.as_secs()
        );
        for socket in TMUX.lock().map(|s| s.clone()).unwrap_or_default() {
            let _ = std::process::Command::new("tmux")
                .arg("-S")
                .arg(socket)
                .arg("kill-server")
                .status();
        }
        kill_descendants();
        std::process::exit(101);
    });
    true
}

/// SIGKILL to every process descended from this one (routers and databases the test support
/// starts, workers, plugins), read from /proc.
fn kill_descendants() {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // `pid (comm) state ppid …`: comm may hold spaces and parentheses.
            let ppid = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut doomed = vec![std::process::id()];
    let mut i = 0;
    while i < doomed.len() {
        let parent = doomed[i];
        doomed.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    if doomed.len() > 1 {
        let _ = std::process::Command::new("kill")
            .arg("-KILL")
            .args(doomed[1..].iter().map(u32::to_string))
            .status();
    }
}

/// A command whose process gets SIGKILL when this benchmark's thread that starts it ends
/// (`PR_SET_PDEATHSIG`): start long-lived children from the main thread.
pub fn command(program: impl AsRef<OsStr>) -> std::process::Command {
    let mut c = std::process::Command::new(program);
    manent::sys::die_with_parent_std(&mut c);
    c
}

/// tmux servers (by socket) a hung benchmark's watchdog kills: tmux leaves the benchmark's
/// process tree, so dying with it does not reach the console inside.
static TMUX: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Has the watchdog kill the tmux server at `socket` if it fires.
pub fn tmux_server(socket: PathBuf) {
    if let Ok(mut s) = TMUX.lock() {
        s.push(socket);
    }
}
