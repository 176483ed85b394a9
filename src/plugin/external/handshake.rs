//! go-plugin's handshake: the environment the host gives the plugin, and the one line the
//! plugin prints on stdout: `CORE|APP|NETWORK|ADDR|PROTOCOL|CERT[|MUX]`.

use std::net::SocketAddr;
use std::path::PathBuf;

use base64::Engine as _;

/// The magic cookie's variable: a UX check that the binary is started by manent.
pub const MAGIC_COOKIE_KEY: &str = "MANENT_PLUGIN";
/// The magic cookie's value.
pub const MAGIC_COOKIE_VALUE: &str = "d3c0ded-manent-plugin";
/// go-plugin's core protocol version.
pub const CORE_PROTOCOL_VERSION: u32 = 1;
/// manent's plugin protocol version (`proto/manent/plugin/v1`). Incompatible changes bump it.
pub const APP_PROTOCOL_VERSION: u32 = 1;

/// Protocol versions the host offers.
pub const ENV_PROTOCOL_VERSIONS: &str = "PLUGIN_PROTOCOL_VERSIONS";
/// The host's certificate, PEM (AutoMTLS).
pub const ENV_CLIENT_CERT: &str = "PLUGIN_CLIENT_CERT";
/// TCP port range (used on systems without Unix sockets).
pub const ENV_MIN_PORT: &str = "PLUGIN_MIN_PORT";
/// TCP port range.
pub const ENV_MAX_PORT: &str = "PLUGIN_MAX_PORT";
/// Where the plugin creates its socket.
pub const ENV_UNIX_SOCKET_DIR: &str = "PLUGIN_UNIX_SOCKET_DIR";
/// In manent's environment: the plugins (names, comma-separated, or `*`) to start waiting for a
/// debugger.
pub const ENV_DEBUG: &str = "MANENT_PLUGIN_DEBUG";
/// In a plugin's environment (`1`): wait for a debugger to attach before serving; the SDKs do.
pub const ENV_WAIT_FOR_DEBUGGER: &str = "MANENT_PLUGIN_WAIT_FOR_DEBUGGER";

/// Where the plugin listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addr {
    /// A Unix socket.
    Unix(PathBuf),
    /// A TCP address.
    Tcp(SocketAddr),
}

impl Addr {
    /// `(network, address)` as go-plugin writes them.
    pub fn parts(&self) -> (&'static str, String) {
        match self {
            Addr::Unix(p) => ("unix", p.display().to_string()),
            Addr::Tcp(a) => ("tcp", a.to_string()),
        }
    }

    /// Parses go-plugin's `(network, address)`.
    pub fn parse(network: &str, address: &str) -> Result<Self, String> {
        match network {
            "unix" => Ok(Addr::Unix(PathBuf::from(address))),
            "tcp" => address
                .parse()
                .map(Addr::Tcp)
                .map_err(|_| format!("bad tcp address `{address}`")),
            other => Err(format!("unknown address type `{other}`")),
        }
    }
}

/// A parsed handshake line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handshake {
    /// Core protocol version (must be 1).
    pub core: u32,
    /// Negotiated app protocol version.
    pub app: u32,
    /// Where to connect.
    pub addr: Addr,
    /// `grpc` or `netrpc`.
    pub protocol: String,
    /// The plugin's certificate, DER (AutoMTLS).
    pub cert: Option<Vec<u8>>,
}

impl Handshake {
    /// Parses the first stdout line of a plugin.
    pub fn parse(line: &str) -> Result<Self, String> {
        let line = line.trim();
        let fields: Vec<&str> = line.split('|').collect();
        if fields.len() < 4 {
            return Err("it is not a go-plugin handshake line".into());
        }
        let num = |s: &str, what: &str| {
            s.parse::<u32>()
                .map_err(|_| format!("the {what} version `{s}` is not a number"))
        };
        let core = num(fields[0], "core protocol")?;
        let app = num(fields[1], "plugin protocol")?;
        let addr = Addr::parse(fields[2], fields[3])?;
        let protocol = fields.get(4).map_or("netrpc", |p| *p).to_owned();
        let cert = match fields.get(5) {
            Some(c) if c.len() > 50 => Some(
                base64::engine::general_purpose::STANDARD_NO_PAD
                    .decode(c.trim_end_matches('='))
                    .map_err(|e| format!("its certificate does not decode: {e}"))?,
            ),
            _ => None,
        };
        Ok(Handshake {
            core,
            app,
            addr,
            protocol,
            cert,
        })
    }

    /// The line a plugin prints (without the 7th field: manent does not multiplex).
    pub fn line(&self) -> String {
        let (network, address) = self.addr.parts();
        let cert = self
            .cert
            .as_ref()
            .map(|c| base64::engine::general_purpose::STANDARD_NO_PAD.encode(c))
            .unwrap_or_default();
        format!(
            "{}|{}|{network}|{address}|{}|{cert}",
            self.core, self.app, self.protocol
        )
    }
}

/// The version a plugin picks from the host's offer: the highest it supports that the host
/// offered, else its lowest (and the host refuses it with a clear error).
pub fn negotiate(offered: Option<&str>, supported: &[u32]) -> u32 {
    let offered: Vec<u32> = offered
        .unwrap_or_default()
        .split(',')
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    let mut mine = supported.to_vec();
    mine.sort_unstable();
    mine.iter()
        .rev()
        .find(|v| offered.contains(v))
        .or_else(|| mine.first())
        .copied()
        .unwrap_or(APP_PROTOCOL_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_plugin_lines_with_and_without_certificates() {
        let h = Handshake::parse("1|3|unix|/tmp/plugin1948764962|grpc|\n").unwrap();
        assert_eq!((h.core, h.app, h.protocol.as_str()), (1, 3, "grpc"));
        assert_eq!(h.addr, Addr::Unix("/tmp/plugin1948764962".into()));
        assert_eq!(h.cert, None);
        let der = vec![7u8; 120];
        let line = Handshake {
            core: 1,
            app: 1,
            addr: Addr::Tcp("127.0.0.1:1234".parse().unwrap()),
            protocol: "grpc".into(),
            cert: Some(der.clone()),
        }
        .line();
        assert!(!line.contains('='), "no padding: {line}");
        let back = Handshake::parse(&format!("{line}|true")).unwrap();
        assert_eq!(back.cert, Some(der));
        assert_eq!(
            Handshake::parse("1|1|tcp|127.0.0.1:1").unwrap().protocol,
            "netrpc"
        );
        assert!(Handshake::parse("hello world").is_err());
        assert!(
            Handshake::parse("1|x|unix|/a|grpc")
                .unwrap_err()
                .contains("not a number")
        );
        assert!(
            Handshake::parse("1|1|pipe|/a|grpc")
                .unwrap_err()
                .contains("unknown address type")
        );
    }

    #[test]
    fn negotiates_the_highest_common_version_else_the_lowest_own() {
        assert_eq!(negotiate(Some("5,3"), &[1, 3, 4]), 3);
        assert_eq!(negotiate(Some("2"), &[1]), 1);
        assert_eq!(negotiate(None, &[2, 4]), 2);
    }
}
