//! The traffic nginx observed, from its own access log: the file the plugin renders a JSON
//! `log_format` for (`NAME_canary`) and the operator points an `access_log` at, read
//! incrementally and folded per second and per upstream address, so a window's figures are a
//! sum over at most an hour of seconds (bounded memory, whatever the request rate).
//!
//! Attribution reads every server a request tried: `$upstream_addr` lists them (`", "` between
//! tries, `" : "` across an internal redirect) with `$upstream_status` and
//! `$upstream_response_time` beside them; the client's response came from the last one, and
//! the ones before failed and were retried elsewhere — a candidate's refused connections show
//! only there. Rotation is followed: when the path names another file, the old one is read to
//! its end (and once more at the next read, as nginx's workers reopen after its master) before
//! the new one is read from its start; a file that shrank (copied and truncated) is read again
//! from its start.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use manent::plugin::{Routing, SlotTraffic, Traffic, TrafficInterval};
use serde::Deserialize;

/// The longest window kept, in seconds.
pub const MAX_WINDOW_S: i64 = 3600;

/// The `log_format` the plugin renders (`escape=json` makes every field a JSON string).
pub fn log_format(upstream: &str) -> String {
    format!(
        "log_format {upstream}_canary escape=json '{{\"msec\":\"$msec\",\"status\":\"$status\",\
         \"upstream_addr\":\"$upstream_addr\",\"upstream_status\":\"$upstream_status\",\
         \"upstream_response_time\":\"$upstream_response_time\"}}';"
    )
}

/// One address's figures in one second.
#[derive(Debug, Default, Clone)]
struct Tally {
    requests: u64,
    responses: [u64; 4],
    retried_away: u64,
    /// Upstream response time (ms, nginx's resolution) → requests.
    latency: BTreeMap<u32, u64>,
}

impl Tally {
    fn add(&mut self, t: &Tally) {
        self.requests += t.requests;
        for (a, b) in self.responses.iter_mut().zip(t.responses) {
            *a += b;
        }
        self.retried_away += t.retried_away;
        for (ms, n) in &t.latency {
            *self.latency.entry(*ms).or_default() += n;
        }
    }
}

/// A file being read: its inode, how far, its first bytes (a file copied and truncated, then
/// written past where it was read, starts with other bytes), and the line not ended yet.
#[derive(Debug)]
struct Open {
    file: File,
    inode: u64,
    offset: u64,
    head: Vec<u8>,
    partial: Vec<u8>,
    /// Bytes up to the first newline are the end of a line begun before the read started.
    mid_line: bool,
}

/// Bytes of the file's start kept to recognise it.
const HEAD: usize = 64;
/// At most this much of a log is read when the plugin first opens it (the end of it): an hour
/// at 700 requests/s. A busy log's earlier lines are not read.
const FIRST_READ: u64 = 512 << 20;

/// The access log, read so far.
#[derive(Debug)]
pub struct Reader {
    path: PathBuf,
    /// The file being read.
    file: Option<Open>,
    /// The file the path named before a rotation, read once more before it is let go.
    previous: Option<Open>,
    /// Epoch second → address → figures.
    seconds: BTreeMap<i64, HashMap<String, Tally>>,
    /// Seconds before this one are out of every window: not kept.
    cutoff: i64,
    /// Lines that are not the plugin's format (counted, not fatal).
    pub unreadable: u64,
}

impl Reader {
    pub fn new(path: &Path) -> Self {
        Reader {
            path: path.to_owned(),
            file: None,
            previous: None,
            seconds: BTreeMap::new(),
            cutoff: 0,
            unreadable: 0,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads what nginx wrote since the last call. An error only when the file exists and
    /// cannot be read.
    pub fn poll(&mut self) -> std::io::Result<()> {
        self.cutoff = manent::sys::now_ms() / 1000 - MAX_WINDOW_S;
        if let Some(mut old) = self.previous.take() {
            self.drain(&mut old)?;
        }
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            // Not there (yet, or between a rename and nginx's reopen): nothing new.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        if let Some(mut old) = self.file.take_if(|o| o.inode != meta.ino()) {
            // Rotated: the rest of the old file first (its own unfinished line with it), and
            // once more next time — nginx's workers reopen after its master.
            self.drain(&mut old)?;
            self.previous = Some(old);
        }
        let mut open = match self.file.take() {
            Some(o) => o,
            None => {
                let file = open_log(&self.path)?;
                let start = meta.len().saturating_sub(FIRST_READ);
                Open {
                    file,
                    inode: meta.ino(),
                    offset: start,
                    head: Vec::new(),
                    partial: Vec::new(),
                    mid_line: start > 0,
                }
            }
        };
        let head = read_head(&mut open.file)?;
        let same_start = head.starts_with(&open.head) || open.head.starts_with(&head);
        if meta.len() < open.offset || !same_start {
            // Truncated (copytruncate), whether or not it grew back since: from its start.
            open.offset = 0;
            open.partial.clear();
            open.mid_line = false;
        }
        open.head = head;
        open.file.seek(SeekFrom::Start(open.offset))?;
        let read = self.drain(&mut open)?;
        open.offset += read;
        self.file = Some(open);
        self.forget_before(self.cutoff);
        Ok(())
    }

    /// Reads `o` to its end, folding every whole line; the bytes read.
    fn drain(&mut self, o: &mut Open) -> std::io::Result<u64> {
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        loop {
            let n = o.file.read(&mut buf)?;
            if n == 0 {
                return Ok(total);
            }
            total += n as u64;
            let mut chunk = &buf[..n];
            while let Some(end) = chunk.iter().position(|b| *b == b'\n') {
                if std::mem::take(&mut o.mid_line) {
                    // The tail of a line begun before the first read: not a line.
                } else if o.partial.is_empty() {
                    self.fold_line(&chunk[..end]);
                } else {
                    let mut line = std::mem::take(&mut o.partial);
                    line.extend_from_slice(&chunk[..end]);
                    self.fold_line(&line);
                }
                chunk = &chunk[end + 1..];
            }
            if !o.mid_line {
                o.partial.extend_from_slice(chunk);
            }
        }
    }

    fn fold_line(&mut self, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        match serde_json::from_slice::<Line<'_>>(line) {
            Ok(l) => self.fold(&l),
            Err(_) => self.unreadable += 1,
        }
    }

    /// Adds one request.
    fn fold(&mut self, l: &Line<'_>) {
        let Some(second) = l
            .msec
            .split_once('.')
            .map_or(l.msec.as_ref(), |(s, _)| s)
            .parse::<i64>()
            .ok()
        else {
            self.unreadable += 1;
            return;
        };
        if second < self.cutoff {
            // Out of every window: a long log read from its start keeps nothing of it.
            return;
        }
        let addrs = tries(&l.upstream_addr);
        if addrs.is_empty() {
            // nginx answered it itself: no slot served it.
            return;
        }
        let statuses = tries(&l.upstream_status);
        let times = tries(&l.upstream_response_time);
        let bucket = self.seconds.entry(second).or_default();
        let last = addrs.len() - 1;
        for (i, addr) in addrs.iter().enumerate() {
            let t = bucket.entry((*addr).to_owned()).or_default();
            if i < last {
                t.retried_away += 1;
                continue;
            }
            t.requests += 1;
            let status = statuses
                .get(i)
                .and_then(|s| s.parse::<u16>().ok())
                .or_else(|| l.status.parse().ok())
                .unwrap_or(0);
            if let Some(class) = (status / 100).checked_sub(2).filter(|c| *c < 4) {
                t.responses[usize::from(class)] += 1;
            }
            if let Some(ms) = times.get(i).and_then(|s| millis(s)) {
                *t.latency.entry(ms).or_default() += 1;
            }
        }
    }

    fn forget_before(&mut self, second: i64) {
        self.seconds = self.seconds.split_off(&second);
    }

    /// The figures of `routing`'s two slots over the last `window_ms` before `now_ms`.
    pub fn traffic(&self, routing: &Routing, now_ms: i64, window_ms: u64) -> Traffic {
        let window_ms = window_ms.min(u64::try_from(MAX_WINDOW_S).unwrap_or(0) * 1000);
        let from_ms = now_ms - i64::try_from(window_ms).unwrap_or(0);
        let from_s = from_ms.div_euclid(1000);
        let slots = [&routing.stable, &routing.candidate]
            .into_iter()
            .filter(|p| !p.slot.is_empty())
            .map(|pool| {
                // About twenty intervals to a window, oldest first.
                let window_s = i64::try_from(window_ms / 1000).unwrap_or(0).max(1);
                let step = (window_s / 20).max(1);
                let now_s = now_ms.div_euclid(1000);
                let mut sum = Tally::default();
                let mut intervals = Vec::new();
                let mut from = from_s;
                while from <= now_s {
                    let mut part = Tally::default();
                    for bucket in self.seconds.range(from..from + step).map(|(_, b)| b) {
                        for addr in &pool.addresses {
                            if let Some(t) = bucket.get(addr) {
                                part.add(t);
                            }
                        }
                    }
                    intervals.push(TrafficInterval {
                        from_ms: from * 1000,
                        requests: part.requests,
                        errors: part.responses[3],
                        p99_ms: quantile(&part.latency, 0.99),
                    });
                    sum.add(&part);
                    from += step;
                }
                let q = |p: f64| quantile(&sum.latency, p);
                SlotTraffic {
                    slot: pool.slot.clone(),
                    version: pool.version.clone(),
                    requests: sum.requests,
                    responses: sum.responses,
                    retried_away: sum.retried_away,
                    p50_ms: q(0.50),
                    p95_ms: q(0.95),
                    p99_ms: q(0.99),
                    intervals,
                }
            })
            .collect();
        Traffic {
            slots,
            from_ms,
            window_ms,
            source: format!("nginx access log {}", self.path.display()),
        }
    }
}

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
}

/// Opens the access log for reading, refusing what cannot be trusted to be nginx's log: not a
/// regular file (a FIFO would block the read for ever; it is opened without waiting and
/// checked on the open handle), or a file anyone on the host can write (another local user
/// could make a failing candidate look healthy).
fn open_log(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file: point `access_log:` at the file nginx writes",
            path.display()
        )));
    }
    if meta.permissions().mode() & 0o002 != 0 {
        return Err(std::io::Error::other(format!(
            "{} can be written by any user of this host, so what it says of the traffic cannot \
             be trusted: `chmod o-w` it (nginx writes it 0644)",
            path.display()
        )));
    }
    Ok(file)
}

/// The first bytes of `file` (its position is set again by the caller).
fn read_head(file: &mut File) -> std::io::Result<Vec<u8>> {
    file.seek(SeekFrom::Start(0))?;
    let mut head = Vec::with_capacity(HEAD);
    file.take(HEAD as u64).read_to_end(&mut head)?;
    Ok(head)
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

/// The nearest-rank `p` quantile of a histogram.
fn quantile(hist: &BTreeMap<u32, u64>, p: f64) -> Option<u32> {
    let total: u64 = hist.values().sum();
    if total == 0 {
        return None;
    }
    let rank = ((p * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    for (ms, n) in hist {
        seen += n;
        if seen >= rank {
            return Some(*ms);
        }
    }
    hist.keys().next_back().copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use manent::plugin::Pool;
    use std::io::Write as _;

    fn routing() -> Routing {
        Routing {
            stable: Pool {
                slot: "blue".into(),
                version: "1.0.0".into(),
                addresses: vec!["127.0.0.1:1001".into()],
            },
            candidate: Pool {
                slot: "green".into(),
                version: "2.0.0".into(),
                addresses: vec!["127.0.0.1:2001".into()],
            },
            weight: 50,
            testers: false,
            scale: 100,
            retired: false,
        }
    }

    fn line(at_s: i64, status: &str, addr: &str, ustatus: &str, time: &str) -> String {
        format!(
            "{{\"msec\":\"{at_s}.250\",\"status\":\"{status}\",\"upstream_addr\":\"{addr}\",\
             \"upstream_status\":\"{ustatus}\",\"upstream_response_time\":\"{time}\"}}\n"
        )
    }

    #[test]
    fn every_try_is_attributed_and_the_last_one_answers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.json");
        let now = manent::sys::now_ms() / 1000;
        let mut text = String::new();
        for i in 0..100 {
            let (st, t) = if i % 20 == 0 {
                ("500", "0.030")
            } else {
                ("200", "0.010")
            };
            text.push_str(&line(now, st, "127.0.0.1:2001", st, t));
            text.push_str(&line(now, "200", "127.0.0.1:1001", "200", "0.012"));
        }
        // A refused try at the candidate, retried on stable: the client got a 200.
        text.push_str(&line(
            now,
            "200",
            "127.0.0.1:2001, 127.0.0.1:1001",
            "502, 200",
            "0.000, 0.011",
        ));
        // nginx answered itself; a line of another format.
        text.push_str(&line(now, "204", "", "", ""));
        text.push_str("not json\n");
        std::fs::write(&path, text).unwrap();
        let mut r = Reader::new(&path);
        r.poll().unwrap();
        let t = r.traffic(&routing(), (now + 1) * 1000, 60_000);
        let (stable, candidate) = (t.slot("blue"), t.slot("green"));
        assert_eq!(candidate.requests, 100);
        assert_eq!(candidate.responses, [95, 0, 0, 5]);
        assert_eq!(candidate.retried_away, 1);
        assert_eq!(candidate.error_rate(), Some(0.05));
        assert_eq!(
            (candidate.p50_ms, candidate.p95_ms, candidate.p99_ms),
            (Some(10), Some(10), Some(30))
        );
        assert_eq!(stable.requests, 101);
        assert_eq!(stable.responses[0], 101);
        assert_eq!(stable.p99_ms, Some(12));
        assert_eq!(r.unreadable, 1);
        // Outside the window: nothing.
        let later = r.traffic(&routing(), (now + 120) * 1000, 60_000);
        assert_eq!(later.slot("green").requests, 0);
        assert_eq!(later.slot("green").p99_ms, None);
    }

    #[test]
    fn a_rotated_or_truncated_log_loses_no_line_and_counts_none_twice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.json");
        let now = manent::sys::now_ms() / 1000;
        let ok = line(now, "200", "127.0.0.1:1001", "200", "0.010");
        let mut f = std::fs::File::create(&path).unwrap();
        for _ in 0..10 {
            f.write_all(ok.as_bytes()).unwrap();
        }
        // Half a line: counted once it ends.
        f.write_all(&ok.as_bytes()[..20]).unwrap();
        let mut r = Reader::new(&path);
        r.poll().unwrap();
        f.write_all(&ok.as_bytes()[20..]).unwrap();
        // Renamed; nginx still writes to the old file until it reopens, then to a new one.
        std::fs::rename(&path, dir.path().join("access.json.1")).unwrap();
        f.write_all(ok.as_bytes()).unwrap();
        let mut g = std::fs::File::create(&path).unwrap();
        g.write_all(ok.as_bytes()).unwrap();
        g.write_all(ok.as_bytes()).unwrap();
        r.poll().unwrap();
        // A worker that reopened late wrote one more line to the old file.
        f.write_all(ok.as_bytes()).unwrap();
        r.poll().unwrap();
        let count = |r: &Reader| {
            r.traffic(&routing(), (now + 1) * 1000, 60_000)
                .slot("blue")
                .requests
        };
        assert_eq!(count(&r), 15);
        // Copied and truncated: read again from its start.
        drop(g);
        std::fs::write(&path, ok.as_bytes()).unwrap();
        r.poll().unwrap();
        assert_eq!(count(&r), 16);
        assert_eq!(r.unreadable, 0);
    }

    #[test]
    fn a_log_truncated_and_grown_back_past_where_it_was_read_is_read_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.json");
        let now = manent::sys::now_ms() / 1000;
        let ok = line(now, "200", "127.0.0.1:1001", "200", "0.010");
        // Lines of another second: they start otherwise (their `msec`).
        let other = line(now - 1, "200", "127.0.0.1:1001", "200", "0.020");
        std::fs::write(&path, ok.repeat(2)).unwrap();
        let mut r = Reader::new(&path);
        r.poll().unwrap();
        // Copied away and truncated, then three lines (more bytes than were read) before the
        // next read: all three counted, none lost, nothing half-read.
        std::fs::write(&path, other.repeat(3)).unwrap();
        r.poll().unwrap();
        let t = r.traffic(&routing(), (now + 1) * 1000, 60_000).slot("blue");
        assert_eq!((t.requests, r.unreadable), (5, 0));
        assert_eq!(t.p99_ms, Some(20));
    }

    #[test]
    fn lines_older_than_any_window_are_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.json");
        let now = manent::sys::now_ms() / 1000;
        let mut text = String::new();
        for s in 0..500 {
            text.push_str(&line(
                now - 7200 - s,
                "200",
                "127.0.0.1:1001",
                "200",
                "0.010",
            ));
        }
        text.push_str(&line(now, "200", "127.0.0.1:1001", "200", "0.010"));
        std::fs::write(&path, text).unwrap();
        let mut r = Reader::new(&path);
        r.poll().unwrap();
        assert_eq!(r.seconds.len(), 1, "only the last hour is kept");
    }

    #[test]
    fn a_fifo_or_a_log_anyone_can_write_is_refused_at_once() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("access.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let err = Reader::new(&fifo).poll().unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
        let open = dir.path().join("open.json");
        std::fs::write(&open, "").unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = Reader::new(&open).poll().unwrap_err().to_string();
        assert!(err.contains("any user of this host"), "{err}");
    }

    #[test]
    fn the_log_format_is_one_json_object_per_line() {
        let f = log_format("web");
        assert!(f.starts_with("log_format web_canary escape=json '{"), "{f}");
        assert!(f.contains("$upstream_addr") && f.ends_with("}';"), "{f}");
    }
}
