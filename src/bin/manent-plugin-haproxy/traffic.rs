//! The traffic HAProxy observed, from its own counters: `show stat BACKEND 4 -1` gives each
//! server's responses by class since the worker started. The plugin keeps a reading at every
//! Traffic call and before a change that gives the candidate traffic (an hour of them at
//! most), and reports a
//! window as the difference between now and the reading at its start, cut at the readings in
//! between. A window never starts before the candidate began serving: its slot's counters
//! until then were another release's, so the base is a reading taken at most a moment before
//! that (the one before the change that gave the candidate traffic), else the first one after
//! it — a shorter window, never another release's requests. A plugin with no reading yet takes
//! one, waits three seconds and reports those (the window says so); a canary's engine asks
//! every couple of seconds while it waits, which builds the history. A counter that went down
//! was reset by a reload: the new worker's count is taken whole. The reading before a change is
//! also kept in a file beside the plugin's (`NAME.counters.json`), so the next command's plugin
//! process — `manent promote` after `manent deploy` — has the base too. HAProxy's counters keep no
//! latency: the slots say `no_latency`, and an analysis with a p99 limit cannot judge (the
//! plugin's `access_log:` gives latency from HAProxy's own log instead).

use std::collections::{HashMap, VecDeque};

use manent::plugin::{Routing, SlotTraffic, Traffic, TrafficInterval, TrafficWindow};

/// Readings kept: an hour at one every two seconds.
const KEPT: usize = 1_800;
/// The longest window, ms.
const MAX_WINDOW_MS: i64 = 3_600_000;
/// How long before the candidate began serving a reading may be and still be its base: the
/// change that gave it traffic is read back (and confirmed) within this.
const SINCE_SLACK_MS: i64 = 2_000;

/// One server's responses by class (2xx, 3xx, 4xx, 5xx) and all of them (1xx and others too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counters {
    pub classes: [u64; 4],
    pub total: u64,
}

/// Counters by server address (`127.0.0.1:8081`) at one moment.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Reading {
    pub at_ms: i64,
    pub servers: HashMap<String, Counters>,
}

/// Parses `show stat … 4 -1` (CSV, its header line starting `# `): each server's address and
/// counters. Lines it cannot read are left out.
pub fn parse_stat(text: &str) -> HashMap<String, Counters> {
    let mut lines = text.lines();
    let Some(header) = lines.find_map(|l| l.strip_prefix("# ")) else {
        return HashMap::new();
    };
    let cols: Vec<&str> = header.split(',').collect();
    let at = |name: &str| cols.iter().position(|c| *c == name);
    let (Some(addr), Some(h1), Some(h2), Some(h3), Some(h4), Some(h5), Some(other)) = (
        at("addr"),
        at("hrsp_1xx"),
        at("hrsp_2xx"),
        at("hrsp_3xx"),
        at("hrsp_4xx"),
        at("hrsp_5xx"),
        at("hrsp_other"),
    ) else {
        return HashMap::new();
    };
    lines
        .filter(|l| !l.starts_with('#') && l.contains(','))
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            let address = (*f.get(addr)?).to_owned();
            (!address.is_empty()).then_some(())?;
            let classes = [n(h2), n(h3), n(h4), n(h5)];
            Some((
                address,
                Counters {
                    classes,
                    total: classes.iter().sum::<u64>() + n(h1) + n(other),
                },
            ))
        })
        .collect()
}

/// Keeps `r` in `path` (a new file beside it, renamed over it: never half-written, never
/// through a link planted there).
pub fn save(path: &std::path::Path, r: &Reading) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let mut f = tempfile::NamedTempFile::new_in(dir)?;
    f.write_all(&serde_json::to_vec(r).map_err(std::io::Error::other)?)?;
    f.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// The reading kept in `path`, if there is one it can trust (this user's or root's, writable
/// by no one else: a planted reading would move a window's base); why not, otherwise.
pub fn load(path: &std::path::Path) -> Result<Option<Reading>, String> {
    match manent::sys::files::read_trusted(path, 1 << 20) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(manent::sys::files::Irregular::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// The readings so far.
#[derive(Debug, Default)]
pub struct History {
    readings: VecDeque<Reading>,
}

impl History {
    /// No reading yet.
    pub fn is_empty(&self) -> bool {
        self.readings.is_empty()
    }

    /// The newest reading.
    pub fn newest(&self) -> Option<&Reading> {
        self.readings.back()
    }

    /// Keeps `r`, the newest.
    pub fn add(&mut self, r: Reading) {
        self.readings.push_back(r);
        while self.readings.len() > KEPT
            || self.readings.front().is_some_and(|f| {
                self.readings
                    .back()
                    .is_some_and(|b| b.at_ms - f.at_ms > MAX_WINDOW_MS + 60_000)
            })
        {
            self.readings.pop_front();
        }
    }

    /// The two slots' traffic over `window`, from the readings (the newest is now).
    pub fn traffic(&self, routing: &Routing, window: TrafficWindow, source: String) -> Traffic {
        let Some(now) = self.readings.back() else {
            return Traffic::default();
        };
        let longest = TrafficWindow {
            window: window.window.min(std::time::Duration::from_millis(
                MAX_WINDOW_MS.unsigned_abs(),
            )),
            ..window
        };
        let start = longest.from_ms(now.at_ms);
        // The base: the last reading at or before the window's start (else the oldest) — but
        // when the window starts where the candidate began serving, one taken at most a moment
        // before, else the first after (what the slot served earlier was another release's).
        let at_since = window.since_ms.is_some_and(|s| s == start);
        let before = self.readings.iter().rposition(|r| r.at_ms <= start);
        let first = match before {
            Some(i) if !at_since || start - self.readings[i].at_ms <= SINCE_SLACK_MS => i,
            _ if at_since => self
                .readings
                .iter()
                .position(|r| r.at_ms > start)
                .unwrap_or(self.readings.len() - 1),
            _ => 0,
        };
        let span: Vec<&Reading> = self.readings.range(first..).collect();
        let slots = [&routing.stable, &routing.candidate]
            .into_iter()
            .filter(|p| !p.slot.is_empty())
            .map(|pool| {
                let mut intervals = Vec::new();
                for pair in span.windows(2) {
                    let (a, b) = (pair[0], pair[1]);
                    let mut d = Counters::default();
                    for addr in &pool.addresses {
                        let after = b.servers.get(addr).copied().unwrap_or_default();
                        let before = a.servers.get(addr).copied().unwrap_or_default();
                        // A reload starts new counters: the new worker's are all new.
                        let base = if after.total < before.total {
                            Counters::default()
                        } else {
                            before
                        };
                        for i in 0..4 {
                            d.classes[i] += after.classes[i].saturating_sub(base.classes[i]);
                        }
                        d.total += after.total.saturating_sub(base.total);
                    }
                    intervals.push((a.at_ms, d));
                }
                let mut sum = Counters::default();
                for (_, d) in &intervals {
                    for i in 0..4 {
                        sum.classes[i] += d.classes[i];
                    }
                    sum.total += d.total;
                }
                SlotTraffic {
                    slot: pool.slot.clone(),
                    version: pool.version.clone(),
                    requests: sum.total,
                    responses: sum.classes,
                    retried_away: 0,
                    p50_ms: None,
                    p95_ms: None,
                    p99_ms: None,
                    intervals: intervals
                        .into_iter()
                        .map(|(from_ms, d)| TrafficInterval {
                            from_ms,
                            requests: d.total,
                            errors: d.classes[3],
                            p99_ms: None,
                        })
                        .collect(),
                    no_latency: true,
                }
            })
            .collect();
        let from_ms = span.first().map_or(now.at_ms, |r| r.at_ms);
        Traffic {
            slots,
            from_ms,
            window_ms: u64::try_from(now.at_ms - from_ms).unwrap_or(0),
            source,
            since_ms: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use manent::plugin::Pool;

    const STAT: &str = "# pxname,svname,qcur,addr,hrsp_1xx,hrsp_2xx,hrsp_3xx,hrsp_4xx,hrsp_5xx,hrsp_other,\n\
        web,blue1,0,127.0.0.1:8001,0,950,0,0,0,0,\n\
        web,green1,0,127.0.0.1:9001,0,95,0,0,5,0,\n";

    fn routing() -> Routing {
        let pool = |slot: &str, addr: &str| Pool {
            slot: slot.into(),
            version: "v".into(),
            addresses: vec![addr.into()],
        };
        Routing {
            stable: pool("blue", "127.0.0.1:8001"),
            candidate: pool("green", "127.0.0.1:9001"),
            weight: 10,
            testers: false,
            scale: 100,
            retired: false,
        }
    }

    #[test]
    fn a_window_is_the_difference_of_the_readings_and_a_reload_restarts_the_count() {
        let parsed = parse_stat(STAT);
        assert_eq!(parsed["127.0.0.1:9001"].classes, [95, 0, 0, 5]);
        let mut h = History::default();
        let zero: HashMap<String, Counters> = parsed
            .keys()
            .map(|k| (k.clone(), Counters::default()))
            .collect();
        h.add(Reading {
            at_ms: 0,
            servers: zero,
        });
        h.add(Reading {
            at_ms: 2_000,
            servers: parsed.clone(),
        });
        let t = h.traffic(&routing(), last(60_000), "stat".into());
        let c = t.slot("green");
        assert_eq!((c.requests, c.responses[3], c.p99_ms), (100, 5, None));
        assert!(c.no_latency, "counters keep no latency");
        assert_eq!(t.slot("blue").requests, 950);
        // A reload: the new worker counts from 0 (here 10 responses since).
        let reloaded = parse_stat(&STAT.replace("95,0,0,5", "10,0,0,0").replace("950", "90"));
        h.add(Reading {
            at_ms: 4_000,
            servers: reloaded,
        });
        let t = h.traffic(&routing(), last(60_000), "stat".into());
        assert_eq!(t.slot("green").requests, 110);
        assert_eq!(t.slot("green").intervals.len(), 2);
        // A window that starts after the first reading leaves it out.
        let t = h.traffic(&routing(), last(2_000), "stat".into());
        assert_eq!(t.slot("green").requests, 10);
    }

    fn last(ms: u64) -> TrafficWindow {
        TrafficWindow::last(std::time::Duration::from_millis(ms))
    }

    /// Counters of the candidate's slot at `at_ms`: `total` responses, `errors` of them 5xx.
    fn reading(at_ms: i64, total: u64, errors: u64) -> Reading {
        let stat = format!(
            "# pxname,svname,qcur,addr,hrsp_1xx,hrsp_2xx,hrsp_3xx,hrsp_4xx,hrsp_5xx,hrsp_other,\n\
             web,green1,0,127.0.0.1:9001,0,{},0,0,{errors},0,\n",
            total - errors
        );
        Reading {
            at_ms,
            servers: parse_stat(&stat),
        }
    }

    #[test]
    fn a_window_never_counts_what_the_slot_served_before_the_candidate() {
        let mut h = History::default();
        // The release before in the slot answered 1,000 requests, 50 of them 5xx.
        h.add(reading(0, 0, 0));
        h.add(reading(10_000, 1_000, 50));
        // The reading before the change that gave the candidate traffic, then 100 clean ones.
        h.add(reading(20_000, 1_000, 50));
        h.add(reading(30_000, 1_100, 50));
        let since = TrafficWindow {
            window: std::time::Duration::from_secs(60),
            since_ms: Some(20_500),
        };
        let t = h.traffic(&routing(), since, "stat".into());
        let c = t.slot("green");
        assert_eq!((c.requests, c.responses[3]), (100, 0));
        assert_eq!(t.from_ms, 20_000);
        // No reading a moment before it began serving (another process changed the weight):
        // from the first one after, never from the old release's.
        let mut h = History::default();
        h.add(reading(0, 0, 0));
        h.add(reading(25_000, 1_050, 50));
        h.add(reading(30_000, 1_100, 50));
        let t = h.traffic(&routing(), since, "stat".into());
        let c = t.slot("green");
        assert_eq!((c.requests, c.responses[3]), (50, 0));
        assert_eq!(t.from_ms, 25_000, "the window says it is shorter");
    }
}
