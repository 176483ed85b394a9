//! The `manent worker` processes on a configuration: a command that leaves a live canary hands
//! it to a detached one, which a test (or a benchmark) stops before what follows must run with
//! no engine, and at its end.

#![allow(dead_code, reason = "each test binary uses part of the support module")]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The pids of the `manent worker` processes whose command line names `config`.
pub fn of(config: &Path) -> Vec<u32> {
    let config = config.as_os_str().as_encoded_bytes();
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter(|pid| {
                    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                        let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
                        args.contains(&config) && args.contains(&b"worker".as_slice())
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Stops them (SIGTERM, as an operator would; killed 10s later) and waits until they are gone.
pub fn stop(config: &Path) {
    let pids = of(config);
    for pid in &pids {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status();
    }
    let start = Instant::now();
    while pids.iter().any(|p| running(*p)) {
        if start.elapsed() > Duration::from_secs(10) {
            for pid in &pids {
                let _ = Command::new("kill")
                    .arg("-KILL")
                    .arg(pid.to_string())
                    .status();
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A process that has not ended (a zombie waiting for its parent has).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}
