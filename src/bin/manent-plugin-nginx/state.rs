//! Reading back what nginx loaded: a GET of the state location the rendered file adds, on a
//! loopback port, from a listener that must belong to nginx's master's user — another local
//! user who took the port while nginx did not hold it cannot answer in nginx's place.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::render::{STATE_PATH, Served};

/// How long one read of the state location may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// Why nginx's answer could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unread {
    /// Nothing listens there: nginx is down, or its running configuration does not include
    /// the file.
    Silent(String),
    /// Something answered that is not the plugin's state location.
    Other(String),
}

impl std::fmt::Display for Unread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unread::Silent(s) | Unread::Other(s) => f.write_str(s),
        }
    }
}

/// Checks `state_listen`: a loopback `IP:port`.
pub fn check_listen(listen: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = listen.parse().map_err(|_| {
        format!(
            "state_listen `{listen}` is not an IP:port (e.g. 127.0.0.1:18999): nginx answers \
             there what it loaded"
        )
    })?;
    if !addr.ip().is_loopback() || addr.port() == 0 {
        return Err(format!(
            "state_listen `{listen}` must be a loopback address with a port (127.0.0.1:18999 \
             or [::1]:18999): it is read back over loopback only"
        ));
    }
    Ok(addr)
}

/// The uid of the socket listening on `addr`.
fn listener_uid(addr: SocketAddr) -> Option<u32> {
    // The kernel's list of listening sockets; /proc/net/tcp (every socket, TIME_WAIT and all:
    // 0.2 s on a busy host) only where netlink cannot be asked.
    manent::sys::sock_diag::tcp_listener_uid(addr).unwrap_or_else(|| proc_listener_uid(addr))
}

/// [`listener_uid`] from /proc/net/tcp{,6}.
fn proc_listener_uid(addr: SocketAddr) -> Option<u32> {
    let (file, want) = match addr {
        SocketAddr::V4(a) => {
            let ip = u32::from_le_bytes(a.ip().octets());
            ("/proc/net/tcp", format!("{ip:08X}:{:04X}", a.port()))
        }
        SocketAddr::V6(a) => {
            let hex: String = a
                .ip()
                .octets()
                .chunks(4)
                .map(|c| {
                    let w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                    format!("{w:08X}")
                })
                .collect();
            ("/proc/net/tcp6", format!("{hex}:{:04X}", a.port()))
        }
    };
    let table = std::fs::read_to_string(file).ok()?;
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // local_address, rem_address, st (0A = LISTEN), …, uid at index 7.
        (f.get(1) == Some(&want.as_str()) && f.get(3) == Some(&"0A"))
            .then(|| f.get(7)?.parse().ok())
            .flatten()
    })
}

/// The owner of process `pid`.
fn process_uid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|u| u.parse().ok())
}

/// GETs the state location at `addr`, trusting the answer only from a listener owned by the
/// user nginx's master (`master`) runs as.
pub async fn read(addr: SocketAddr, master: Option<u32>) -> Result<Served, Unread> {
    read_within(addr, master, READ_TIMEOUT).await
}

/// [`read`] with a limit on connecting and on the answer: a reload's confirmation asks with a
/// short one and asks again (a connection an old worker took just as it was told to stop can
/// stall for a TCP retransmission), doubling it each time one runs out.
pub async fn read_within(
    addr: SocketAddr,
    master: Option<u32>,
    limit: Duration,
) -> Result<Served, Unread> {
    let at = format!("http://{addr}{STATE_PATH}");
    let within = humantime::format_duration(limit);
    let mut stream = match tokio::time::timeout(limit, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            return Err(Unread::Silent(format!("nothing answers at {at} ({e})")));
        }
        Err(_) => return Err(Unread::Silent(format!("no answer at {at} within {within}"))),
    };
    let owner = listener_uid(addr);
    let nginx = master.and_then(process_uid);
    match (owner, nginx) {
        (Some(o), Some(n)) if o == n => {}
        (Some(o), Some(n)) => {
            return Err(Unread::Other(format!(
                "{addr} is held by uid {o}, not by nginx's master (uid {n}): another user's \
                 listener is not trusted"
            )));
        }
        (_, None) => {
            return Err(Unread::Other(format!(
                "cannot tell who holds {addr}: nginx's master process is not found (its pid \
                 file); the answer there is not trusted"
            )));
        }
        (None, _) => {
            return Err(Unread::Other(format!(
                "cannot find the listener of {addr} among the kernel's listening sockets: its answer is not trusted"
            )));
        }
    }
    let request = format!("GET {STATE_PATH} HTTP/1.0\r\nHost: manent\r\n\r\n");
    let mut body = Vec::new();
    let io = async {
        stream.write_all(request.as_bytes()).await?;
        stream.read_to_end(&mut body).await
    };
    match tokio::time::timeout(limit, io).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(Unread::Silent(format!("reading {at}: {e}"))),
        Err(_) => {
            return Err(Unread::Silent(format!(
                "{at} did not answer within {within}"
            )));
        }
    }
    let text = String::from_utf8_lossy(&body);
    let (head, payload) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        return Err(Unread::Other(format!(
            "{at} answered status {status}: nginx runs a configuration without the plugin's \
             state location"
        )));
    }
    serde_json::from_str(payload.trim()).map_err(|e| {
        Unread::Other(format!(
            "{at} answered something that is not the plugin's state ({e})"
        ))
    })
}
