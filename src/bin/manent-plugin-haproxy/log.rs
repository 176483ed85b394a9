//! The traffic HAProxy observed, from its own log: with `access_log:` set, the plugin reads
//! each request's server, status and timings from a file of lines in the `log-format` below
//! (however they get there: Debian's rsyslog writing `/var/log/haproxy.log`, or `log stdout`
//! of a worker whose output goes to a file), through the shared access-log reader — so a
//! `max_p99` limit is judged on HAProxy too. The JSON object may follow a syslog prefix; lines
//! of other backends and other formats in the same file are left out (counted as unreadable
//! only when they are not the plugin's object at all).
//!
//! Each line names the releases the backend's configuration routed to (the file sets one
//! variable per slot), so a request counts for the release that served it, as on nginx.
//!
//! The latency is the server's: `%Tr` (until the response's headers) plus `%Td` (its body),
//! what nginx's `$upstream_response_time` measures. A request with no server response (`%Tr`
//! is -1) has a status but no latency.

use manent::plugin::Pool;
use manent::plugin::slots::access_log::{self, Format, Logged, Try};
use serde::Deserialize;

/// The `log-format` to put in the frontend that sends requests to the backend (and `log` to
/// where the file is written): one JSON object, after anything the log's transport prefixes.
pub const LOG_FORMAT: &str = r#"{"manent":1,"at":"%Ts.%ms","backend":"%b","server":"%s","status":%ST,"tr":%Tr,"td":%Td,"releases":"blue=%[var(txn.manent_blue)] green=%[var(txn.manent_green)]"}"#;

/// HAProxy's lines for one backend.
#[derive(Debug, Clone)]
pub struct Haproxy {
    pub backend: String,
}

/// The log, read so far.
pub type Reader = access_log::Reader<Haproxy>;

#[derive(Deserialize)]
struct Line<'a> {
    manent: u32,
    #[serde(borrow)]
    at: &'a str,
    #[serde(borrow)]
    backend: &'a str,
    #[serde(borrow)]
    server: &'a str,
    status: i64,
    tr: i64,
    td: i64,
    /// The releases the backend's configuration routed to (`blue=1.0.0 green=-`: `-` where
    /// it had none); absent from a format pasted before they were logged.
    #[serde(borrow, default)]
    releases: std::borrow::Cow<'a, str>,
}

/// Where the plugin's object starts in a line (after a syslog prefix, say).
const MARK: &[u8] = br#"{"manent":"#;

impl Format for Haproxy {
    fn read(&self, line: &[u8], fold: &mut dyn FnMut(&Logged<'_>)) -> bool {
        let Some(start) = memchr::memmem::find(line, MARK) else {
            return false;
        };
        let mut values =
            serde_json::Deserializer::from_slice(&line[start..]).into_iter::<Line<'_>>();
        let Some(Ok(l)) = values.next() else {
            return false;
        };
        let Some(second) =
            l.at.split_once('.')
                .map_or(l.at, |(s, _)| s)
                .parse::<i64>()
                .ok()
                .filter(|_| l.manent == 1)
        else {
            return false;
        };
        if l.backend != self.backend {
            // Another backend's request: not this application's, and not unreadable.
            return true;
        }
        // `<NOSRV>`: HAProxy answered it itself (no server was usable).
        let served = !l.server.starts_with('<');
        let releases = l
            .releases
            .split_ascii_whitespace()
            .map(|pair| {
                pair.strip_suffix("=-")
                    .map_or(pair.to_owned(), |s| format!("{s}="))
            })
            .collect::<Vec<_>>()
            .join(" ");
        let tries = [Try {
            server: l.server,
            status: u16::try_from(l.status).ok(),
            ms: (l.tr >= 0).then(|| u32::try_from(l.tr + l.td.max(0)).unwrap_or(u32::MAX)),
        }];
        fold(&Logged {
            second,
            releases: &releases,
            tries: if served { &tries } else { &[] },
        });
        true
    }

    /// Servers are named by slot and place (`green2`): a slot's are its pool's.
    fn in_pool(&self, server: &str, pool: &Pool) -> bool {
        crate::render::slot_of(server).is_some_and(|(slot, _)| slot == pool.slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use manent::plugin::{Routing, TrafficWindow};

    #[test]
    fn lines_of_the_documented_format_are_read_behind_a_syslog_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("haproxy.log");
        let now = manent::sys::now_ms() / 1000;
        let line = |server: &str, status: i64, tr: i64, backend: &str| {
            LOG_FORMAT
                .replace("%Ts.%ms", &format!("{now}.120"))
                .replace("%b", backend)
                .replace("%s", server)
                .replace("%ST", &status.to_string())
                .replace("%Tr", &tr.to_string())
                .replace("%Td", "1")
                .replace("%[var(txn.manent_blue)]", "v")
                .replace("%[var(txn.manent_green)]", "v")
        };
        let mut text = String::new();
        for i in 0..20 {
            let status = if i == 0 { 500 } else { 200 };
            text.push_str(&format!(
                "Dec  6 18:00:00 bastion haproxy[812]: {}\n",
                line("green1", status, 300, "web")
            ));
            text.push_str(&format!("{}\n", line("blue1", 200, 4, "web")));
        }
        // Another backend's; HAProxy answering itself; not the plugin's format.
        text.push_str(&format!("{}\n", line("green1", 200, 1, "other")));
        text.push_str(&format!("{}\n", line("<NOSRV>", 503, -1, "web")));
        text.push_str("Dec  6 18:00:00 bastion haproxy[812]: Proxy web started.\n");
        std::fs::write(&path, text).unwrap();
        let mut r = Reader::new(
            Haproxy {
                backend: "web".into(),
            },
            &path,
        );
        r.poll().unwrap();
        let pool = |slot: &str| Pool {
            slot: slot.into(),
            version: "v".into(),
            addresses: vec!["127.0.0.1:1".into()],
        };
        let routing = Routing {
            stable: pool("blue"),
            candidate: pool("green"),
            weight: 50,
            testers: false,
            scale: 100,
            retired: false,
        };
        let t = r.traffic(
            &routing,
            (now + 1) * 1000,
            TrafficWindow::last(std::time::Duration::from_secs(60)),
            "log".into(),
        );
        let c = t.slot("green");
        assert_eq!((c.requests, c.responses[3], c.p99_ms), (20, 1, Some(301)));
        assert!(!c.no_latency);
        assert_eq!(t.slot("blue").p50_ms, Some(5));
        assert_eq!(r.unreadable, 1);
    }
}
