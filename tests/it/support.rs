//! What the suites share: the fleet (a configuration and the real binary), and real servers
//! started by a test on loopback — PostgreSQL, sshd, nginx and HAProxy — and the Go toolchain.

pub mod fleet;
pub mod go;
pub mod haproxy;
pub mod nginx;
pub mod postgres;
pub mod router;
pub mod sshd;
