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
