//! The ssh client of this session, as the kernel knows it: the nearest `sshd` among this
//! process's ancestors and the address at the other end of its TCP connection (read from its
//! socket and the kernel's list of established TCP sockets). `SSH_CONNECTION` is only a variable anyone can set.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One established TCP connection: local and remote address and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// This side.
    pub local: (IpAddr, u16),
    /// The other side.
    pub remote: (IpAddr, u16),
}

/// The connection of this session's own sshd (the nearest ancestor named `sshd` or
/// `sshd-session`), when one is in the parent chain and its sockets can be read.
pub fn sshd_connections() -> Vec<Connection> {
    let chain = crate::sys::process::ancestry();
    let Some(sshd) = chain
        .iter()
        .skip(1)
        .find(|p| p.comm == "sshd" || p.comm == "sshd-session")
    else {
        return Vec::new();
    };
    let Ok(fds) = std::fs::read_dir(format!("/proc/{}/fd", sshd.pid)) else {
        return Vec::new();
    };
    let mut sockets: Vec<(u32, u64)> = fds
        .flatten()
        .filter_map(|e| {
            let fd = e.file_name().to_str()?.parse::<u32>().ok()?;
            let target = std::fs::read_link(e.path()).ok()?;
            let inode = target
                .to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()?;
            Some((fd, inode))
        })
        .collect();
    // The client's connection is the one sshd has held longest (its lowest descriptor);
    // forwarded ports come later.
    sockets.sort();
    // The kernel's list of established sockets (sock_diag); /proc/net/tcp{,6} — every socket
    // the host has, 0.2 s on a busy web server — only where netlink cannot be asked.
    let table: Vec<(u64, Connection)> =
        match crate::sys::sock_diag::tcp_sockets(crate::sys::sock_diag::ESTABLISHED) {
            Some(open) => open
                .into_iter()
                .map(|s| {
                    let end = |a: std::net::SocketAddr| (a.ip(), a.port());
                    (
                        s.inode,
                        Connection {
                            local: end(s.local),
                            remote: end(s.remote),
                        },
                    )
                })
                .collect(),
            None => ["/proc/net/tcp", "/proc/net/tcp6"]
                .iter()
                .filter_map(|t| std::fs::read_to_string(t).ok())
                .flat_map(|text| parse_table(&text))
                .collect(),
        };
    sockets
        .iter()
        .filter_map(|(_, inode)| {
            table
                .iter()
                .find(|(i, _)| i == inode)
                .map(|(_, c)| c.clone())
        })
        .collect()
}

/// `/proc/net/tcp{,6}`: the established connections (state 01), by socket inode.
fn parse_table(text: &str) -> Vec<(u64, Connection)> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.get(3) != Some(&"01") {
                return None;
            }
            Some((
                f.get(9)?.parse().ok()?,
                Connection {
                    local: endpoint(f.get(1)?)?,
                    remote: endpoint(f.get(2)?)?,
                },
            ))
        })
        .collect()
}

/// `0100007F:0016` (IPv4) or 32 hex digits (IPv6), each 32-bit word in host (little-endian)
/// order, and a port.
fn endpoint(s: &str) -> Option<(IpAddr, u16)> {
    let (addr, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        Some(
            u32::from_str_radix(addr.get(i * 8..i * 8 + 8)?, 16)
                .ok()?
                .to_le_bytes(),
        )
    };
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            let v6 = Ipv6Addr::from(b);
            v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
        }
        _ => return None,
    };
    Some((ip, port))
}

/// The client address to record: what the kernel says of this session's sshd (confirming
/// `SSH_CONNECTION` when it names the same connection), else `SSH_CONNECTION`'s address marked
/// as claimed, else none.
pub fn client(ssh_connection: Option<&str>, sshd: &[Connection]) -> Option<String> {
    let claimed: Option<Vec<&str>> =
        ssh_connection.map(|c| c.split_whitespace().collect::<Vec<_>>());
    let claim_ip = claimed.as_ref().and_then(|c| c.first().copied());
    let confirmed = claimed.as_ref().and_then(|c| {
        let ip: IpAddr = c.first()?.parse().ok()?;
        let port: u16 = c.get(1)?.parse().ok()?;
        sshd.iter()
            .find(|k| k.remote == (ip, port))
            .map(|k| k.remote.0.to_string())
    });
    confirmed
        .or_else(|| sshd.first().map(|k| k.remote.0.to_string()))
        .or_else(|| claim_ip.map(|ip| format!("{ip} (claimed)")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_kernels_connection_table() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
            0: 0100007F:0016 0900710C:D431 01 00000000:00000000 00:00000000 00000000     0        0 4242 1 0\n\
            1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 77 1 0\n";
        let t = parse_table(text);
        assert_eq!(t.len(), 1, "only established connections");
        assert_eq!(t[0].0, 4242);
        assert_eq!(t[0].1.local, ("127.0.0.1".parse().unwrap(), 22));
        assert_eq!(t[0].1.remote, ("12.113.0.9".parse().unwrap(), 0xD431));
        let mapped = endpoint("0000000000000000FFFF00000100007F:0016").unwrap();
        assert_eq!(mapped, ("127.0.0.1".parse().unwrap(), 22));
    }

    #[test]
    fn the_kernel_decides_and_an_unconfirmed_variable_is_a_claim() {
        let k = Connection {
            local: ("10.0.0.1".parse().unwrap(), 22),
            remote: ("198.51.100.7".parse().unwrap(), 50000),
        };
        let real = Some("198.51.100.7 50000 10.0.0.1 22");
        let forged = Some("203.0.113.9 1 10.0.0.1 22");
        assert_eq!(
            client(real, std::slice::from_ref(&k)).as_deref(),
            Some("198.51.100.7")
        );
        assert_eq!(
            client(forged, std::slice::from_ref(&k)).as_deref(),
            Some("198.51.100.7")
        );
        assert_eq!(
            client(forged, &[]).as_deref(),
            Some("203.0.113.9 (claimed)")
        );
        assert_eq!(client(None, &[]), None);
    }
}
