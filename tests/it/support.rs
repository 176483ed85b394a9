//! What the suites share: the fleet (a configuration and the real binary), and real servers
//! started by a test on loopback — PostgreSQL, sshd, nginx and HAProxy — the Go toolchain, and
//! the Python SDK in a venv.

pub mod fleet;
pub mod go;
pub mod haproxy;
pub mod nginx;
pub mod ports;
pub mod postgres;
pub mod python;
pub mod router;
pub mod sshd;
pub mod workers;

/// Whether the tests run as root (the effective uid, read through /proc).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}
