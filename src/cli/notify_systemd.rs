//! The worker speaks systemd's notify protocol when systemd asks for it (`NOTIFY_SOCKET`, a
//! `Type=notify` unit): `READY=1` once the engine holds its lease and runs, `WATCHDOG=1` every
//! half of `WATCHDOG_USEC` while it still holds it (a frozen engine stops saying it, and systemd
//! kills and restarts it), `STOPPING=1` as it drains. Datagrams on a Unix socket, as
//! sd_notify(3) says; without `NOTIFY_SOCKET` nothing is sent.

use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// Where to tell systemd, when it listens.
#[derive(Debug)]
pub struct Notifier {
    socket: UnixDatagram,
    to: SocketAddr,
    /// How often to say the engine is alive, when systemd watches it.
    pub watchdog: Option<Duration>,
}

impl Notifier {
    /// From the environment systemd gave the process; `None` outside a notify unit.
    pub fn from_env() -> Option<Notifier> {
        let path = std::env::var_os("NOTIFY_SOCKET")?;
        let path = path.to_string_lossy().into_owned();
        let to = match path.strip_prefix('@') {
            // An abstract socket (systemd's own): `@name`.
            Some(name) => {
                use std::os::linux::net::SocketAddrExt as _;
                SocketAddr::from_abstract_name(name.as_bytes()).ok()?
            }
            None => SocketAddr::from_pathname(&path).ok()?,
        };
        let socket = UnixDatagram::unbound().ok()?;
        // Only for this process, as sd_notify's watchdog is: its pid, if said, must be ours.
        let watchdog = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|u| u.parse::<u64>().ok())
            .filter(|_| {
                std::env::var("WATCHDOG_PID")
                    .ok()
                    .and_then(|p| p.parse::<u32>().ok())
                    .is_none_or(|p| p == std::process::id())
            })
            .filter(|u| *u > 0)
            .map(|u| Duration::from_micros(u) / 2);
        Some(Notifier {
            socket,
            to,
            watchdog,
        })
    }

    /// Sends `state` (`READY=1`, …); a systemd that stopped listening is not an error.
    pub fn say(&self, state: &str) {
        let _ = self.socket.send_to_addr(state.as_bytes(), &self.to);
    }
}
