//! A router's access log as the source of a canary's traffic figures: the file read
//! incrementally and folded per second and per server, so a window's figures are a sum over at
//! most an hour of seconds (bounded memory, whatever the request rate). The routers differ only
//! in how one line reads ([`Format`]): nginx's JSON `log_format`, HAProxy's `log-format`.
//!
//! **Whose request it was.** A slot is reused release after release, so a server's address
//! says nothing of the release behind it. Two things keep another release's requests out:
//! every window starts no earlier than the candidate began serving ([`TrafficWindow`]), and a
//! line may carry the releases the router's configuration routed to when it served it
//! (`blue=1.0.0 green=2.0.0`, a literal of the rendered file): a try at a server counts for a
//! pool only when that line's configuration had the pool's release in its slot, so the last
//! requests of an old configuration's workers after a reload are not the new release's.
//!
//! Every try is read: the client's response came from the last one, and the ones before failed
//! and were retried elsewhere — a candidate's refused connections show only there. Rotation is
//! followed: when the path names another file, the old one is read to its end (and once more
//! at the next read, as the router's workers reopen after its master) before the new one is
//! read from its start; a file that shrank (copied and truncated) is read again from its start.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::plugin::{Pool, Routing, SlotTraffic, Traffic, TrafficInterval, TrafficWindow};

/// The longest window kept, in seconds.
pub const MAX_WINDOW_S: i64 = 3600;

/// One try at a server, as a line records it.
#[derive(Debug, Clone, Copy)]
pub struct Try<'a> {
    /// The server, as the format names it (nginx: its address; HAProxy: its name).
    pub server: &'a str,
    /// Its status (`None`: none, or not a number).
    pub status: Option<u16>,
    /// How long it took, ms (`None`: the router did not say).
    pub ms: Option<u32>,
}

/// One request, as a line records it.
#[derive(Debug, Clone)]
pub struct Logged<'a> {
    /// Its epoch second.
    pub second: i64,
    /// The releases the configuration that served it routed to, `slot=version` apart by
    /// spaces; empty when the line does not say.
    pub releases: &'a str,
    /// Every try, in order: the last one answered.
    pub tries: &'a [Try<'a>],
}

/// How one line of a router's access log reads.
pub trait Format: Send + Sync + 'static {
    /// Reads `line` and hands the request to `fold`; false when it is not a line of this
    /// format. A request no server answered (the router answered it itself) has no try.
    fn read(&self, line: &[u8], fold: &mut dyn FnMut(&Logged<'_>)) -> bool;

    /// Whether `server` (as [`Try::server`] names it) is one of `pool`'s.
    fn in_pool(&self, server: &str, pool: &Pool) -> bool {
        pool.addresses.iter().any(|a| a == server)
    }
}

/// The release `slot` held in `releases` (`blue=1.0.0 green=2.0.0`).
fn release_of<'a>(releases: &'a str, slot: &str) -> Option<&'a str> {
    releases.split_ascii_whitespace().find_map(|pair| {
        let (s, v) = pair.split_once('=')?;
        (s == slot).then_some(v)
    })
}

/// Whether a try logged under `releases` was `pool`'s release: an untagged line cannot say
/// otherwise (the window's start keeps other releases out), a tagged one must name it.
fn of_release(releases: &str, pool: &Pool) -> bool {
    releases.is_empty() || release_of(releases, &pool.slot) == Some(pool.version.as_str())
}

/// One server's figures in one second.
#[derive(Debug, Default, Clone)]
struct Tally {
    requests: u64,
    responses: [u64; 4],
    retried_away: u64,
    /// Response time (ms) → requests.
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

/// Figures of one second: by server and the releases tag of the line (indexes in `servers`
/// and `tags`: no string is built per request).
type Second = HashMap<(u32, u32), Tally>;

/// Names seen, each once, by index (a log names few servers and few configurations).
#[derive(Debug, Default)]
struct Names {
    names: Vec<String>,
    index: HashMap<String, u32>,
}

/// Up to this many names are looked up by comparing them (cheaper than hashing each time).
const SCANNED: usize = 16;

impl Names {
    fn id(&mut self, name: &str) -> u32 {
        if self.names.len() <= SCANNED {
            if let Some(i) = self.names.iter().position(|n| n == name) {
                return u32::try_from(i).unwrap_or(u32::MAX);
            }
        } else if let Some(i) = self.index.get(name) {
            return *i;
        }
        let i = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push(name.to_owned());
        self.index.insert(name.to_owned(), i);
        i
    }
}

/// A router's access log, read so far.
#[derive(Debug)]
pub struct Reader<F> {
    format: F,
    path: PathBuf,
    /// The file being read.
    file: Option<Open>,
    /// The file the path named before a rotation, read once more before it is let go.
    previous: Option<Open>,
    /// Epoch second → figures.
    seconds: BTreeMap<i64, Second>,
    /// The servers seen, and the releases tags (a configuration's lines all carry the same).
    servers: Names,
    tags: Names,
    /// Seconds before this one are out of every window: not kept.
    cutoff: i64,
    /// Lines that are not the format's (counted, not fatal).
    pub unreadable: u64,
}

impl<F: Format> Reader<F> {
    pub fn new(format: F, path: &Path) -> Self {
        Reader {
            format,
            path: path.to_owned(),
            file: None,
            previous: None,
            seconds: BTreeMap::new(),
            servers: Names::default(),
            tags: Names::default(),
            cutoff: 0,
            unreadable: 0,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads what the router wrote since the last call. An error only when the file exists
    /// and cannot be read.
    pub fn poll(&mut self) -> std::io::Result<()> {
        self.cutoff = crate::sys::now_ms() / 1000 - MAX_WINDOW_S;
        if let Some(mut old) = self.previous.take() {
            self.drain(&mut old)?;
        }
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            // Not there (yet, or between a rename and the router's reopen): nothing new.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        if let Some(mut old) = self.file.take_if(|o| o.inode != meta.ino()) {
            // Rotated: the rest of the old file first (its own unfinished line with it), and
            // once more next time — the workers reopen after their master.
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
        self.seconds = self.seconds.split_off(&self.cutoff);
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
        let (seconds, cutoff) = (&mut self.seconds, self.cutoff);
        let names = (&mut self.servers, &mut self.tags);
        let read = self.format.read(line, &mut |l| {
            fold(seconds, (&mut *names.0, &mut *names.1), cutoff, l)
        });
        if !read {
            self.unreadable += 1;
        }
    }

    /// The figures of `routing`'s two slots over `window` before `now_ms`: each pool's
    /// servers' tries, on lines whose configuration had the pool's release in its slot.
    pub fn traffic(
        &self,
        routing: &Routing,
        now_ms: i64,
        window: TrafficWindow,
        source: String,
    ) -> Traffic {
        let longest = TrafficWindow {
            window: window
                .window
                .min(std::time::Duration::from_secs(MAX_WINDOW_S.unsigned_abs())),
            ..window
        };
        let from_ms = longest.from_ms(now_ms).min(now_ms);
        let from_s = from_ms.div_euclid(1000);
        let now_s = now_ms.div_euclid(1000);
        // About twenty intervals to a window, oldest first.
        let step = ((now_s - from_s + 1) / 20).max(1);
        let slots = [&routing.stable, &routing.candidate]
            .into_iter()
            .filter(|p| !p.slot.is_empty())
            .map(|pool| {
                let tags: Vec<bool> = self
                    .tags
                    .names
                    .iter()
                    .map(|t| of_release(t, pool))
                    .collect();
                let servers: Vec<bool> = self
                    .servers
                    .names
                    .iter()
                    .map(|s| self.format.in_pool(s, pool))
                    .collect();
                let mut sum = Tally::default();
                let mut intervals = Vec::new();
                let mut from = from_s;
                while from <= now_s {
                    let mut part = Tally::default();
                    for bucket in self.seconds.range(from..from + step).map(|(_, b)| b) {
                        for ((server, tag), t) in bucket {
                            let at = |v: &[bool], i: u32| {
                                usize::try_from(i).is_ok_and(|i| v.get(i).copied().unwrap_or(false))
                            };
                            if at(&tags, *tag) && at(&servers, *server) {
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
                    no_latency: false,
                }
            })
            .collect();
        Traffic {
            slots,
            from_ms,
            window_ms: u64::try_from(now_ms - from_ms).unwrap_or(0),
            source,
            since_ms: None,
        }
    }
}

/// Adds one request to its second.
fn fold(
    seconds: &mut BTreeMap<i64, Second>,
    (servers, tags): (&mut Names, &mut Names),
    cutoff: i64,
    l: &Logged,
) {
    if l.second < cutoff || l.tries.is_empty() {
        // Out of every window (a long log read from its start keeps nothing of it), or the
        // router answered it itself: no slot served it.
        return;
    }
    let tag = tags.id(l.releases);
    let bucket = seconds.entry(l.second).or_default();
    let last = l.tries.len() - 1;
    for (i, t) in l.tries.iter().enumerate() {
        let tally = bucket.entry((servers.id(t.server), tag)).or_default();
        if i < last {
            tally.retried_away += 1;
            continue;
        }
        tally.requests += 1;
        if let Some(class) = t
            .status
            .and_then(|s| (s / 100).checked_sub(2))
            .filter(|c| *c < 4)
        {
            tally.responses[usize::from(class)] += 1;
        }
        if let Some(ms) = t.ms {
            *tally.latency.entry(ms).or_default() += 1;
        }
    }
}

/// Opens the access log for reading, refusing what cannot be trusted to be the router's log:
/// not a regular file (a FIFO would block the read for ever; it is opened without waiting and
/// checked on the open handle), or a file anyone on the host can write (another local user
/// could make a failing candidate look healthy).
fn open_log(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file: point `access_log:` at the file the router writes",
            path.display()
        )));
    }
    if meta.permissions().mode() & 0o002 != 0 {
        return Err(std::io::Error::other(format!(
            "{} can be written by any user of this host, so what it says of the traffic cannot \
             be trusted: `chmod o-w` it",
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

/// Releases as a line carries them: `slot=version` for each slot of the routing, apart by
/// spaces (what a router renders into its configuration); `blue=` when the release in a slot
/// is not recorded. Versions and slots are checked names, so the text needs no quoting in a
/// configuration file or a JSON string.
pub fn releases_tag(routing: &Routing) -> String {
    let mut parts = Vec::new();
    for pool in [&routing.stable, &routing.candidate] {
        if !pool.slot.is_empty() {
            parts.push(format!("{}={}", pool.slot, pool.version));
        }
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::Pool;
    use std::io::Write as _;

    /// A line format for the tests: `second releases status ms server[,server…]` (`-` for no
    /// releases).
    struct Plain;

    impl Format for Plain {
        fn read(&self, line: &[u8], fold: &mut dyn FnMut(&Logged<'_>)) -> bool {
            let Ok(text) = std::str::from_utf8(line) else {
                return false;
            };
            let f: Vec<&str> = text.split(' ').collect();
            let [second, releases, status, ms, servers] = f[..] else {
                return false;
            };
            let Ok(second) = second.parse() else {
                return false;
            };
            let servers: Vec<&str> = servers.split(',').filter(|s| !s.is_empty()).collect();
            let tries: Vec<Try<'_>> = servers
                .iter()
                .enumerate()
                .map(|(i, s)| Try {
                    server: s,
                    status: if i + 1 == servers.len() {
                        status.parse().ok()
                    } else {
                        Some(502)
                    },
                    ms: ms.parse().ok(),
                })
                .collect();
            let releases = releases.replace('+', " ");
            fold(&Logged {
                second,
                releases: if releases == "-" { "" } else { &releases },
                tries: &tries,
            });
            true
        }
    }

    fn routing(stable: &str, candidate: &str) -> Routing {
        Routing {
            stable: Pool {
                slot: "blue".into(),
                version: stable.into(),
                addresses: vec!["s1".into()],
            },
            candidate: Pool {
                slot: "green".into(),
                version: candidate.into(),
                addresses: vec!["c1".into()],
            },
            weight: 50,
            testers: false,
            scale: 100,
            retired: false,
        }
    }

    fn reader(lines: &str) -> Reader<Plain> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        std::fs::write(&path, lines).unwrap();
        let mut r = Reader::new(Plain, &path);
        r.poll().unwrap();
        r
    }

    #[test]
    fn a_try_counts_for_the_release_its_configuration_routed_to() {
        let now = crate::sys::now_ms() / 1000;
        let mut text = String::new();
        // The slot green held 1.5.0 (slow, failing) until the new configuration gave it 2.0.0.
        for _ in 0..100 {
            text.push_str(&format!("{now} blue=1.0.0+green=1.5.0 500 300 c1\n"));
        }
        for _ in 0..10 {
            text.push_str(&format!("{now} blue=1.0.0+green=2.0.0 200 2 c1\n"));
            text.push_str(&format!("{now} blue=1.0.0+green=2.0.0 200 3 s1\n"));
        }
        // A try at the candidate retried on stable, under the new configuration.
        text.push_str(&format!("{now} blue=1.0.0+green=2.0.0 200 3 c1,s1\n"));
        // The router answered itself; a line of another format.
        text.push_str(&format!("{now} - 204 0 \n"));
        text.push_str("not a line\n");
        let r = reader(&text);
        let t = r.traffic(
            &routing("1.0.0", "2.0.0"),
            (now + 1) * 1000,
            TrafficWindow::last(std::time::Duration::from_secs(60)),
            "test".into(),
        );
        let c = t.slot("green");
        assert_eq!((c.requests, c.responses[3], c.p99_ms), (10, 0, Some(2)));
        assert_eq!(c.retried_away, 1);
        assert_eq!(t.slot("blue").requests, 11);
        assert_eq!(r.unreadable, 1);
        // The release before, in the same slot: its own 100 requests.
        let before = r.traffic(
            &routing("1.0.0", "1.5.0"),
            (now + 1) * 1000,
            TrafficWindow::last(std::time::Duration::from_secs(60)),
            "test".into(),
        );
        assert_eq!(before.slot("green").requests, 100);
        assert_eq!(before.slot("green").responses[3], 100);
    }

    #[test]
    fn a_window_never_starts_before_the_candidate_began_serving() {
        let now = crate::sys::now_ms() / 1000;
        let mut text = String::new();
        // Untagged lines (HAProxy's): only the time tells them apart.
        for s in 0..30 {
            let (status, ms) = if s < 20 { (500, 300) } else { (200, 2) };
            text.push_str(&format!("{} - {status} {ms} c1\n", now - 30 + s));
        }
        let r = reader(&text);
        let since = (now - 10) * 1000;
        let w = TrafficWindow {
            window: std::time::Duration::from_secs(60),
            since_ms: Some(since),
        };
        let t = r.traffic(
            &routing("1.0.0", "2.0.0"),
            (now + 1) * 1000,
            w,
            "test".into(),
        );
        let c = t.slot("green");
        assert_eq!((c.requests, c.responses[3], c.p99_ms), (10, 0, Some(2)));
        assert_eq!(t.from_ms, since);
        assert_eq!(t.window_ms, 11_000, "the span read, not the window asked");
        // Not serving yet: nothing.
        let w = TrafficWindow {
            since_ms: Some((now + 1) * 1000),
            ..w
        };
        let t = r.traffic(
            &routing("1.0.0", "2.0.0"),
            (now + 1) * 1000,
            w,
            "test".into(),
        );
        assert_eq!(t.slot("green").requests, 0);
        assert_eq!(t.slot("green").p99_ms, None);
    }

    #[test]
    fn a_rotated_or_truncated_log_loses_no_line_and_counts_none_twice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        let now = crate::sys::now_ms() / 1000;
        let ok = format!("{now} - 200 10 s1\n");
        let mut f = std::fs::File::create(&path).unwrap();
        for _ in 0..10 {
            f.write_all(ok.as_bytes()).unwrap();
        }
        // Half a line: counted once it ends.
        f.write_all(&ok.as_bytes()[..5]).unwrap();
        let mut r = Reader::new(Plain, &path);
        r.poll().unwrap();
        f.write_all(&ok.as_bytes()[5..]).unwrap();
        // Renamed; the router still writes to the old file until it reopens, then to a new one.
        std::fs::rename(&path, dir.path().join("access.log.1")).unwrap();
        f.write_all(ok.as_bytes()).unwrap();
        let mut g = std::fs::File::create(&path).unwrap();
        g.write_all(ok.as_bytes()).unwrap();
        g.write_all(ok.as_bytes()).unwrap();
        r.poll().unwrap();
        // A worker that reopened late wrote one more line to the old file.
        f.write_all(ok.as_bytes()).unwrap();
        r.poll().unwrap();
        let count = |r: &Reader<Plain>| {
            r.traffic(
                &routing("1.0.0", "2.0.0"),
                (now + 1) * 1000,
                TrafficWindow::last(std::time::Duration::from_secs(60)),
                String::new(),
            )
            .slot("blue")
            .requests
        };
        assert_eq!(count(&r), 15);
        // Copied and truncated: read again from its start.
        drop(g);
        std::fs::write(&path, ok.as_bytes()).unwrap();
        r.poll().unwrap();
        assert_eq!(count(&r), 16);
        // Truncated and grown back past where it was read, with lines of another second.
        let other = format!("{} - 200 20 s1\n", now - 1);
        std::fs::write(&path, other.repeat(3)).unwrap();
        r.poll().unwrap();
        assert_eq!((count(&r), r.unreadable), (19, 0));
    }

    #[test]
    fn lines_older_than_any_window_are_not_kept() {
        let now = crate::sys::now_ms() / 1000;
        let mut text = String::new();
        for s in 0..500 {
            text.push_str(&format!("{} - 200 10 s1\n", now - 7200 - s));
        }
        text.push_str(&format!("{now} - 200 10 s1\n"));
        assert_eq!(reader(&text).seconds.len(), 1, "only the last hour is kept");
    }

    #[test]
    fn a_fifo_or_a_log_anyone_can_write_is_refused_at_once() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("access.log");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let err = Reader::new(Plain, &fifo).poll().unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
        let open = dir.path().join("open.log");
        std::fs::write(&open, "").unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = Reader::new(Plain, &open).poll().unwrap_err().to_string();
        assert!(err.contains("any user of this host"), "{err}");
    }

    #[test]
    fn the_releases_tag_names_each_slot_with_a_release() {
        let r = routing("1.0.0", "2.0.0");
        assert_eq!(releases_tag(&r), "blue=1.0.0 green=2.0.0");
        // A release manent has no record of is named empty, and still counts for its pool.
        let unknown = routing("", "2.0.0");
        assert_eq!(releases_tag(&unknown), "blue= green=2.0.0");
        assert!(of_release("blue= green=2.0.0", &unknown.stable));
        assert!(of_release("blue=1.0.0 green=2.0.0", &r.candidate));
        assert!(!of_release("blue=1.0.0 green=1.5.0", &r.candidate));
        assert!(
            !of_release("blue=1.0.0", &r.candidate),
            "no release in its slot"
        );
        assert!(of_release("", &r.candidate), "an untagged line");
    }
}
