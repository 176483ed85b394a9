//! The traffic nginx observed, from its own access log: the JSON `log_format` the plugin
//! renders (`NAME_canary`) beside the upstreams, which the operator's `access_log` uses, read
//! by the shared reader (`manent::plugin::slots::access_log`).
//!
//! Each rendering's format carries, as a literal, the releases its upstreams route to
//! (`"releases":"blue=1.0.0 green=2.0.0"`): nginx loads the format and the upstreams from the
//! same file, so a line says which release the configuration that served it had in each slot,
//! and old workers finishing requests after a reload cannot lend the new release the old one's
//! figures. `$upstream_addr` lists every server a request tried (`", "` between tries, `" : "`
//! across an internal redirect) with `$upstream_status` and `$upstream_response_time` beside
//! them.

use std::borrow::Cow;

use manent::plugin::Routing;
use manent::plugin::slots::access_log::{self, Format, Logged, Try};
use serde::Deserialize;

/// The `log_format` the plugin renders for `routing` (`escape=json` makes every variable a JSON
/// string; the releases are checked names, safe as they are).
pub fn log_format(upstream: &str, routing: &Routing) -> String {
    format!(
        "log_format {upstream}_canary escape=json '{{\"msec\":\"$msec\",\"status\":\"$status\",\
         \"upstream_addr\":\"$upstream_addr\",\"upstream_status\":\"$upstream_status\",\
         \"upstream_response_time\":\"$upstream_response_time\",\"releases\":\"{}\"}}';",
        access_log::releases_tag(routing)
    )
}

/// nginx's lines, in the plugin's format.
#[derive(Debug, Clone, Copy)]
pub struct Nginx;

/// The access log, read so far.
pub type Reader = access_log::Reader<Nginx>;

/// An access log line in the plugin's format.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    msec: Cow<'a, str>,
    #[serde(borrow, default)]
    status: Cow<'a, str>,
    #[serde(borrow, default)]
    upstream_addr: Cow<'a, str>,
    #[serde(borrow, default)]
    upstream_status: Cow<'a, str>,
    #[serde(borrow, default)]
    upstream_response_time: Cow<'a, str>,
    /// Absent from a format pasted before releases were logged.
    #[serde(borrow, default)]
    releases: Cow<'a, str>,
}

impl Format for Nginx {
    fn read(&self, line: &[u8], fold: &mut dyn FnMut(&Logged<'_>)) -> bool {
        let Ok(l) = serde_json::from_slice::<Line<'_>>(line) else {
            return false;
        };
        let Some(second) = l
            .msec
            .split_once('.')
            .map_or(l.msec.as_ref(), |(s, _)| s)
            .parse::<i64>()
            .ok()
        else {
            return false;
        };
        let statuses = tries(&l.upstream_status);
        let times = tries(&l.upstream_response_time);
        let addrs = tries(&l.upstream_addr);
        let last = addrs.len().saturating_sub(1);
        let try_at = |i: usize| Try {
            server: addrs[i],
            status: statuses
                .get(i)
                .and_then(|s| s.parse::<u16>().ok())
                .or_else(|| (i == last).then(|| l.status.parse().ok()).flatten()),
            ms: times.get(i).and_then(|s| millis(s)),
        };
        // Most requests try one server or two: no allocation for them (a busy log is read at
        // a few hundred thousand lines a second).
        let mut few = [Try {
            server: "",
            status: None,
            ms: None,
        }; 4];
        let many: Vec<Try<'_>>;
        let tries: &[Try<'_>] = if addrs.len() <= few.len() {
            for (i, slot) in few.iter_mut().enumerate().take(addrs.len()) {
                *slot = try_at(i);
            }
            &few[..addrs.len()]
        } else {
            many = (0..addrs.len()).map(try_at).collect();
            &many
        };
        fold(&Logged {
            second,
            releases: &l.releases,
            tries,
        });
        true
    }
}

/// The tries a multi-value upstream field lists, in order (`", "` between tries, `" : "`
/// across an internal redirect); none for `""` or `-`.
fn tries(field: &str) -> Vec<&str> {
    field
        .split(" : ")
        .flat_map(|part| part.split(", "))
        .map(str::trim)
        .filter(|s| !s.is_empty() && *s != "-")
        .collect()
}

/// `0.015` (seconds, ms resolution) → 15.
fn millis(s: &str) -> Option<u32> {
    let secs: f64 = s.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| (secs * 1000.0).round() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use manent::plugin::{Pool, TrafficWindow};

    fn routing(candidate: &str) -> Routing {
        Routing {
            stable: Pool {
                slot: "blue".into(),
                version: "1.0.0".into(),
                addresses: vec!["127.0.0.1:1001".into()],
            },
            candidate: Pool {
                slot: "green".into(),
                version: candidate.into(),
                addresses: vec!["127.0.0.1:2001".into()],
            },
            weight: 50,
            testers: false,
            scale: 100,
            retired: false,
        }
    }

    fn line(at_s: i64, status: &str, addr: &str, ustatus: &str, time: &str, rel: &str) -> String {
        format!(
            "{{\"msec\":\"{at_s}.250\",\"status\":\"{status}\",\"upstream_addr\":\"{addr}\",\
             \"upstream_status\":\"{ustatus}\",\"upstream_response_time\":\"{time}\",\
             \"releases\":\"{rel}\"}}\n"
        )
    }

    #[test]
    fn every_try_is_attributed_to_its_release_and_the_last_one_answers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.json");
        let now = manent::sys::now_ms() / 1000;
        let (new, old) = ("blue=1.0.0 green=2.0.0", "blue=1.0.0 green=1.5.0");
        let mut text = String::new();
        for i in 0..100 {
            let (st, t) = if i % 20 == 0 {
                ("500", "0.030")
            } else {
                ("200", "0.010")
            };
            text.push_str(&line(now, st, "127.0.0.1:2001", st, t, new));
            text.push_str(&line(now, "200", "127.0.0.1:1001", "200", "0.012", new));
            // An old worker's request to the release before in the same slot.
            text.push_str(&line(now, "500", "127.0.0.1:2001", "500", "0.300", old));
        }
        // A refused try at the candidate, retried on stable: the client got a 200.
        text.push_str(&line(
            now,
            "200",
            "127.0.0.1:2001, 127.0.0.1:1001",
            "502, 200",
            "0.000, 0.011",
            new,
        ));
        // nginx answered itself; a line of another format.
        text.push_str(&line(now, "204", "", "", "", new));
        text.push_str("not json\n");
        std::fs::write(&path, text).unwrap();
        let mut r = Reader::new(Nginx, &path);
        r.poll().unwrap();
        let t = r.traffic(
            &routing("2.0.0"),
            (now + 1) * 1000,
            TrafficWindow::last(std::time::Duration::from_secs(60)),
            "nginx".into(),
        );
        let (stable, candidate) = (t.slot("blue"), t.slot("green"));
        assert_eq!(candidate.requests, 100);
        assert_eq!(candidate.responses, [95, 0, 0, 5]);
        assert_eq!(candidate.retried_away, 1);
        assert_eq!(
            (candidate.p50_ms, candidate.p95_ms, candidate.p99_ms),
            (Some(10), Some(10), Some(30))
        );
        // Stable's release was 1.0.0 under both configurations.
        assert_eq!(stable.requests, 101);
        assert_eq!(stable.p99_ms, Some(12));
        assert_eq!(r.unreadable, 1);
    }

    #[test]
    fn a_line_from_a_format_without_releases_counts_by_address() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.json");
        let now = manent::sys::now_ms() / 1000;
        let old_format =
            "{\"msec\":\"NOW.1\",\"status\":\"200\",\"upstream_addr\":\"127.0.0.1:2001\",\
                          \"upstream_status\":\"200\",\"upstream_response_time\":\"0.004\"}\n"
                .replace("NOW", &now.to_string());
        std::fs::write(&path, old_format.repeat(3)).unwrap();
        let mut r = Reader::new(Nginx, &path);
        r.poll().unwrap();
        let t = r.traffic(
            &routing("2.0.0"),
            (now + 1) * 1000,
            TrafficWindow::last(std::time::Duration::from_secs(60)),
            "nginx".into(),
        );
        assert_eq!(t.slot("green").requests, 3);
    }

    #[test]
    fn the_log_format_is_one_json_object_per_line_naming_the_releases() {
        let f = log_format("web", &routing("2.0.0"));
        assert!(f.starts_with("log_format web_canary escape=json '{"), "{f}");
        assert!(
            f.contains("$upstream_addr")
                && f.ends_with("\"releases\":\"blue=1.0.0 green=2.0.0\"}';"),
            "{f}"
        );
    }
}
