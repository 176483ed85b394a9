//! TCP sockets in one state (listening, established) as the kernel's sock_diag (netlink) lists
//! them, with their owner and inode. Reading /proc/net/tcp walks every socket the host has:
//! with the TIME_WAIT sockets of a busy web server (47,000 measured after a benchmark) one
//! read took 0.2 s.

#![allow(
    unsafe_code,
    reason = "a netlink socket: libc calls on buffers this module owns"
)]

use std::net::SocketAddr;

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const TCP_LISTEN: u8 = 10;
/// `struct nlmsghdr`.
const HEADER: usize = 16;
/// `struct inet_diag_req_v2`: family, protocol, ext, pad, states, then `inet_diag_sockid`.
const REQUEST: usize = 56;
/// `struct inet_diag_msg` up to `idiag_uid` and `idiag_inode`.
const MESSAGE: usize = 72;

/// One TCP socket as the kernel lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpSocket {
    /// This side (an IPv4-mapped IPv6 address is given as IPv4).
    pub local: SocketAddr,
    /// The other side.
    pub remote: SocketAddr,
    /// The owner.
    pub uid: u32,
    /// The socket's inode (`socket:[N]` in /proc/PID/fd).
    pub inode: u64,
}

/// TCP's `ESTABLISHED` state.
pub const ESTABLISHED: u8 = 1;
/// TCP's `LISTEN` state.
pub const LISTEN: u8 = TCP_LISTEN;

/// Every TCP socket of IPv4 and IPv6 in `state`; None when the kernel cannot be asked.
pub fn tcp_sockets(state: u8) -> Option<Vec<TcpSocket>> {
    let mut all = dump(libc::AF_INET as u8, state)?;
    all.extend(dump(libc::AF_INET6 as u8, state)?);
    Some(all)
}

/// The uid owning the TCP socket listening on exactly `addr` (None when there is none); None
/// outside when the kernel cannot be asked.
pub fn tcp_listener_uid(addr: SocketAddr) -> Option<Option<u32>> {
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let listening = dump(family as u8, LISTEN)?;
    Some(
        listening
            .into_iter()
            .find(|s| s.local == addr)
            .map(|s| s.uid),
    )
}

/// The TCP socket whose own side is `local` and other side `remote`, looked up by the kernel
/// (one socket, no dump: a socket opened or closed meanwhile cannot make it skip this one),
/// with its state; None inside when there is none, None outside when the kernel cannot be
/// asked. A socket closed into TIME_WAIT has no owner (the kernel reports uid 0 and no inode).
pub fn tcp_socket(local: SocketAddr, remote: SocketAddr) -> Option<Option<(TcpSocket, u8)>> {
    let family = match (local, remote) {
        (SocketAddr::V4(_), SocketAddr::V4(_)) => libc::AF_INET,
        (SocketAddr::V6(_), SocketAddr::V6(_)) => libc::AF_INET6,
        _ => return Some(None),
    };
    let mut req = request(family as u8, 0, u32::MAX);
    let id = HEADER + 8;
    req[id..id + 2].copy_from_slice(&local.port().to_be_bytes());
    req[id + 2..id + 4].copy_from_slice(&remote.port().to_be_bytes());
    for (at, ip) in [(id + 4, local.ip()), (id + 20, remote.ip())] {
        match ip {
            std::net::IpAddr::V4(v4) => req[at..at + 4].copy_from_slice(&v4.octets()),
            std::net::IpAddr::V6(v6) => req[at..at + 16].copy_from_slice(&v6.octets()),
        }
    }
    // No cookie: any socket with those ends.
    req[id + 40..id + 48].fill(0xff);
    let reply = ask_one(&req)?;
    let len = u32::from_ne_bytes(reply.get(0..4)?.try_into().ok()?) as usize;
    let kind = u16::from_ne_bytes(reply.get(4..6)?.try_into().ok()?);
    if kind == NLMSG_ERROR {
        let errno = i32::from_ne_bytes(reply.get(HEADER..HEADER + 4)?.try_into().ok()?);
        return (errno == -libc::ENOENT).then_some(None);
    }
    let m = reply.get(HEADER..len)?;
    Some(Some((parse(m)?, *m.get(1)?)))
}

/// An `inet_diag_req_v2` for `family`'s TCP sockets in the states of `states`, after its
/// netlink header (`flags`: a dump or one socket).
fn request(family: u8, flags: u16, states: u32) -> Vec<u8> {
    let mut req = vec![0u8; HEADER + REQUEST];
    let len = (HEADER + REQUEST) as u32;
    req[0..4].copy_from_slice(&len.to_ne_bytes());
    req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req[6..8].copy_from_slice(&(NLM_F_REQUEST | flags).to_ne_bytes());
    req[HEADER] = family;
    req[HEADER + 1] = libc::IPPROTO_TCP as u8;
    req[HEADER + 4..HEADER + 8].copy_from_slice(&states.to_ne_bytes());
    req
}

/// One `inet_diag_msg`: its ends, owner and inode.
fn parse(m: &[u8]) -> Option<TcpSocket> {
    if m.len() < MESSAGE {
        return None;
    }
    let addr = |ip: &[u8], port: [u8; 2]| -> Option<SocketAddr> {
        let port = u16::from_be_bytes(port);
        let ip = if m[0] == libc::AF_INET as u8 {
            std::net::IpAddr::from(<[u8; 4]>::try_from(&ip[..4]).ok()?)
        } else {
            let v6 = std::net::Ipv6Addr::from(<[u8; 16]>::try_from(ip).ok()?);
            v6.to_ipv4_mapped()
                .map_or(std::net::IpAddr::V6(v6), std::net::IpAddr::V4)
        };
        Some(SocketAddr::new(ip, port))
    };
    Some(TcpSocket {
        local: addr(&m[8..24], [m[4], m[5]])?,
        remote: addr(&m[24..40], [m[6], m[7]])?,
        uid: u32::from_ne_bytes(m[64..68].try_into().ok()?),
        inode: u64::from(u32::from_ne_bytes(m[68..72].try_into().ok()?)),
    })
}

fn dump(family: u8, state: u8) -> Option<Vec<TcpSocket>> {
    let replies = ask(&request(family, NLM_F_DUMP, 1u32 << state))?;
    let mut found = Vec::new();
    let mut at = 0;
    while at + HEADER <= replies.len() {
        let len = u32::from_ne_bytes(replies[at..at + 4].try_into().ok()?) as usize;
        let kind = u16::from_ne_bytes(replies[at + 4..at + 6].try_into().ok()?);
        if len < HEADER || at + len > replies.len() || kind == NLMSG_ERROR {
            return None;
        }
        if kind == NLMSG_DONE {
            break;
        }
        let m = &replies[at + HEADER..at + len];
        if m.len() >= MESSAGE && m[1] == state {
            found.push(parse(m)?);
        }
        // Messages are padded to 4 bytes.
        at += (len + 3) & !3;
    }
    Some(found)
}

/// Sends `req` on a fresh NETLINK_SOCK_DIAG socket; every reply until the dump's end.
fn ask(req: &[u8]) -> Option<Vec<u8>> {
    with_socket(|fd| exchange(fd, req))
}

/// Sends `req` (one socket, not a dump) and returns the one reply.
fn ask_one(req: &[u8]) -> Option<Vec<u8>> {
    with_socket(|fd| {
        // SAFETY: `req` is a live buffer of `req.len()` bytes.
        let sent = unsafe { libc::send(fd, req.as_ptr().cast(), req.len(), 0) };
        if usize::try_from(sent).ok()? != req.len() {
            return None;
        }
        let mut buf = vec![0u8; 8 * 1024];
        // SAFETY: `buf` is a live buffer of `buf.len()` bytes.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        buf.truncate(usize::try_from(n).ok().filter(|&n| n >= HEADER)?);
        Some(buf)
    })
}

/// `talk` on a fresh NETLINK_SOCK_DIAG socket that gives up on a kernel silent for a second.
fn with_socket(talk: impl FnOnce(libc::c_int) -> Option<Vec<u8>>) -> Option<Vec<u8>> {
    // SAFETY: plain integers; the descriptor is closed below on every path.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return None;
    }
    let limit = libc::timeval {
        tv_sec: 1,
        tv_usec: 0,
    };
    // SAFETY: `limit` is a live timeval of the size given.
    let set = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            std::ptr::from_ref(&limit).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    let out = if set == 0 { talk(fd) } else { None };
    // SAFETY: `fd` is the socket opened above, closed once.
    unsafe { libc::close(fd) };
    out
}

fn exchange(fd: libc::c_int, req: &[u8]) -> Option<Vec<u8>> {
    // SAFETY: `req` is a live buffer of `req.len()` bytes.
    let sent = unsafe { libc::send(fd, req.as_ptr().cast(), req.len(), 0) };
    if usize::try_from(sent).ok()? != req.len() {
        return None;
    }
    let mut all = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    // A dump of listening sockets is a few packets, one of a busy host's established ones a
    // few hundred; bounded all the same. A dump cut short is no answer (the caller falls back),
    // never a partial list read as the whole.
    for _ in 0..4096 {
        // SAFETY: `buf` is a live buffer of `buf.len()` bytes.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        let n = usize::try_from(n).ok()?;
        if n == 0 {
            return None;
        }
        let chunk = &buf[..n];
        all.extend_from_slice(chunk);
        if ends_dump(chunk) {
            return Some(all);
        }
    }
    None
}

/// True when a packet of replies holds the dump's end (or an error).
fn ends_dump(packet: &[u8]) -> bool {
    let mut at = 0;
    while at + HEADER <= packet.len() {
        let len = u32::from_ne_bytes([packet[at], packet[at + 1], packet[at + 2], packet[at + 3]])
            as usize;
        let kind = u16::from_ne_bytes([packet[at + 4], packet[at + 5]]);
        if kind == NLMSG_DONE || kind == NLMSG_ERROR || len < HEADER {
            return true;
        }
        at += (len + 3) & !3;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_owner_of_a_listener_and_nothing_for_a_port_nobody_listens_on() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        assert_eq!(tcp_listener_uid(addr), Some(Some(crate::sys::uid())));
        let c = std::net::TcpStream::connect(addr).unwrap();
        let (local, remote) = (c.local_addr().unwrap(), c.peer_addr().unwrap());
        let open = tcp_sockets(ESTABLISHED).unwrap();
        assert!(
            open.iter()
                .any(|s| s.local == local && s.remote == remote && s.inode > 0),
            "{open:?}"
        );
        let (_accepted, _) = l.accept().unwrap();
        // Either end of that connection, looked up by its two addresses.
        let (mine, state) = tcp_socket(local, remote).unwrap().unwrap();
        assert_eq!((mine.remote, state), (remote, ESTABLISHED));
        let (theirs, _) = tcp_socket(remote, local).unwrap().unwrap();
        assert_eq!(theirs.uid, crate::sys::uid());
        assert!(theirs.inode > 0 && theirs.inode != mine.inode);
        let nobody = SocketAddr::from(([127, 0, 0, 1], 9));
        assert_eq!(tcp_socket(local, nobody), Some(None));
        drop(l);
        // Nobody listens there: the kernel answers, and says so.
        assert_eq!(tcp_listener_uid(addr), Some(None));
        let l6 = std::net::TcpListener::bind("[::1]:0");
        if let Ok(l6) = l6 {
            assert_eq!(
                tcp_listener_uid(l6.local_addr().unwrap()),
                Some(Some(crate::sys::uid()))
            );
        }
    }
}
