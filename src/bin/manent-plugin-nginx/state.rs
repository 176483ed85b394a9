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
///
/// The answer is trusted only when the other end of this very connection, still open when the
/// answer is in, is nginx's (see [`trusted`]) — not whoever listens on the port by then: another
/// local user who held the port, answered, then let nginx have it, is not nginx. A worker that
/// finishes after a reload closes a connection as soon as it answered; the plugin asks again
/// on a fresh one.
pub async fn read_within(
    addr: SocketAddr,
    master: Option<u32>,
    limit: Duration,
) -> Result<Served, Unread> {
    let mut closed = 0;
    loop {
        match ask(addr, master, limit).await {
            Err(Asked::Closed) if closed < 2 => closed += 1,
            Err(Asked::Closed) => {
                return Err(Unread::Other(format!(
                    "whatever listens on {addr} closed each connection before the plugin could \
                     tell who answered on it, so the answer is not trusted: it may be another \
                     process than nginx holding the port (`ss -ltnp 'sport = :{}'` names it), or \
                     nginx's state location with `keepalive_timeout 0` forced on it",
                    addr.port()
                )));
            }
            Err(Asked::Unread(u)) => return Err(u),
            Ok(served) => return Ok(served),
        }
    }
}

/// Why one ask had no answer to trust.
enum Asked {
    /// The other end closed before its owner could be checked.
    Closed,
    Unread(Unread),
}

impl From<Unread> for Asked {
    fn from(u: Unread) -> Self {
        Asked::Unread(u)
    }
}

/// One GET of the state location on a fresh connection.
async fn ask(addr: SocketAddr, master: Option<u32>, limit: Duration) -> Result<Served, Asked> {
    let at = format!("http://{addr}{STATE_PATH}");
    let within = humantime::format_duration(limit);
    let mut stream = match tokio::time::timeout(limit, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            return Err(Unread::Silent(format!("nothing answers at {at} ({e})")).into());
        }
        Err(_) => {
            return Err(Unread::Silent(format!("no answer at {at} within {within}")).into());
        }
    };
    // HTTP/1.1: the connection stays open once answered, so its other end can be looked up.
    let request = format!("GET {STATE_PATH} HTTP/1.1\r\nHost: manent\r\n\r\n");
    let io = async {
        stream.write_all(request.as_bytes()).await?;
        answer(&mut stream).await
    };
    let (head, payload) = match tokio::time::timeout(limit, io).await {
        Ok(Ok(a)) => a,
        Ok(Err(e)) => return Err(Unread::Silent(format!("reading {at}: {e}")).into()),
        Err(_) => {
            return Err(Unread::Silent(format!("{at} did not answer within {within}")).into());
        }
    };
    let local = stream
        .local_addr()
        .map_err(|e| Unread::Silent(format!("reading {at}: {e}")))?;
    trusted(addr, local, master)?;
    drop(stream);
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        return Err(Unread::Other(format!(
            "{at} answered status {status}: nginx runs a configuration without the plugin's \
             state location"
        ))
        .into());
    }
    serde_json::from_str(payload.trim()).map_err(|e| {
        Unread::Other(format!(
            "{at} answered something that is not the plugin's state ({e})"
        ))
        .into()
    })
}

/// An HTTP answer's head and body: the body as long as its `Content-Length` says, else to the
/// connection's end; at most 1 MiB.
async fn answer(stream: &mut tokio::net::TcpStream) -> std::io::Result<(String, String)> {
    const MOST: usize = 1 << 20;
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let text = String::from_utf8_lossy(&got);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            });
            if length.is_some_and(|n| body.len() >= n) {
                return Ok((head.to_owned(), body.to_owned()));
            }
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 || got.len() + n > MOST {
            let text = String::from_utf8_lossy(&got);
            let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
            return Ok((head.to_owned(), body.to_owned()));
        }
        got.extend_from_slice(&buf[..n]);
    }
}

/// Whether the other end of the connection from `local` to `addr` belongs to nginx: to its
/// master's user, or to its workers' (a socket a worker accepted is the worker's user's: the
/// master runs as root and its workers as `www-data` most often). Another user — one who took
/// the port while nginx did not hold it — is not nginx. Where the kernel cannot be asked about
/// one socket, the port's listener (the master's) is checked instead.
fn trusted(addr: SocketAddr, local: SocketAddr, master: Option<u32>) -> Result<(), Asked> {
    use manent::sys::sock_diag::{ESTABLISHED, tcp_socket};
    let (owner, inode) = match tcp_socket(addr, local) {
        Some(Some((s, ESTABLISHED))) if s.inode != 0 => (Some(s.uid), Some(s.inode)),
        // Closed, or closing (a socket closed into TIME_WAIT has no owner left to check).
        Some(Some(_)) => return Err(Asked::Closed),
        // No such socket — or no TCP diagnostics in this kernel, which says the same: this
        // side of the connection tells which.
        Some(None) if matches!(tcp_socket(local, addr), Some(Some(_))) => {
            return Err(Asked::Closed);
        }
        Some(None) | None => (listener_uid(addr), None),
    };
    let nginx = master.and_then(process_uid);
    if owner.is_some() && owner == nginx {
        return Ok(());
    }
    // Only when the owner is not the master's user: a few /proc reads per child.
    let workers: Vec<u32> = master.map(crate::control::child_uids).unwrap_or_default();
    match (owner, nginx) {
        // The workers' user: the socket must be one nginx itself holds open.
        (Some(o), Some(_)) if workers.contains(&o) => {
            let held = master
                .zip(inode)
                .and_then(|(m, i)| crate::control::holds_socket(m, i));
            let open = || matches!(tcp_socket(addr, local), Some(Some((_, ESTABLISHED))));
            match held {
                Some(true) => Ok(()),
                // A worker that finished closed it in between: asked again.
                Some(false) if !open() => Err(Asked::Closed),
                Some(false) => Err(Unread::Other(format!(
                    "{addr} answered from a socket of uid {o}, nginx's workers' user, that no \
                     nginx process holds: another program of that user is not trusted"
                ))
                .into()),
                None => Err(Unread::Other(format!(
                    "{addr} answered from a socket of uid {o}, nginx's workers' user, and the \
                     plugin cannot read which process holds it (run the plugin as root, as \
                     nginx's master runs): the answer is not trusted"
                ))
                .into()),
            }
        }
        (Some(o), Some(n)) => Err(Unread::Other(format!(
            "{addr} answered from a socket of uid {o}, neither nginx's master's (uid {n}) nor \
             its workers'{}: another user's listener is not trusted",
            if workers.is_empty() {
                String::new()
            } else {
                let uids: Vec<String> = workers.iter().map(u32::to_string).collect();
                format!(" (uid {})", uids.join(", "))
            }
        ))
        .into()),
        (Some(o), None) => Err(Unread::Other(format!(
            "nginx's master process is not found (its pid file), and a process of uid {o} \
             answers at {addr} in its place: the answer is not trusted"
        ))
        .into()),
        (None, None) => Err(Unread::Other(format!(
            "cannot tell who holds {addr}: nginx's master process is not found (its pid \
             file); the answer there is not trusted"
        ))
        .into()),
        (None, _) => Err(Unread::Other(format!(
            "cannot find the listener of {addr} among the kernel's listening sockets: its \
             answer is not trusted"
        ))
        .into()),
    }
}
