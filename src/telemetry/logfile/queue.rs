//! The JSON log's bounded queue and its writer thread. A line is queued without waiting; one
//! that finds the queue full is counted (and the metric `manent_log_lines_dropped{sink="file"}`
//! with it), and the thread writes "N lines were dropped between T1 and T2" into the file
//! before the next line it writes, so a gap is never silent. Readers of a flooding command's
//! output ask [`Sender::congested`] and wait while the queue is nearly full and the thread
//! writing, so a flood is slowed before anything is dropped; a disk that takes nothing for a
//! second is stuck, not slow, and nobody waits for it.
//!
//! Closing drains the queue for at most [`DRAIN`], then says what it could not write.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant};

/// Lines queued at most.
pub const QUEUE: usize = 64_000;

/// Bytes queued at most: lines may be up to 16 KiB each, so the count alone does not bound the
/// memory.
pub const QUEUE_BYTES: usize = 64 << 20;

/// How long closing waits for the queue to be written.
pub const DRAIN: Duration = Duration::from_secs(5);

/// A thread that wrote nothing for this long is stuck: nobody waits for it.
const STUCK: Duration = Duration::from_secs(1);

enum Msg {
    /// A line, and the lines dropped just before it (said in the file before it).
    Line(Vec<u8>, Gap),
    Close,
}

/// Lines dropped in a row, between two epoch-ms times.
#[derive(Debug, Clone, Copy, Default)]
struct Gap {
    n: u64,
    first: i64,
    last: i64,
}

/// What the queue and its thread share.
#[derive(Debug)]
struct Shared {
    queued: AtomicUsize,
    queued_bytes: AtomicUsize,
    dropped: AtomicU64,
    /// Epoch ms of the first and last line dropped since the last notice.
    first_drop: AtomicI64,
    last_drop: AtomicI64,
    /// Dropped in all, and written in all.
    dropped_total: AtomicU64,
    /// Milliseconds since `start` of the thread's last write.
    wrote_at: AtomicI64,
    start: Instant,
    /// Closing gave up: the thread stops at its next line.
    abandon: AtomicBool,
}

impl Shared {
    /// One more line dropped now.
    fn dropped_now(&self) {
        let now = crate::sys::now_ms();
        let _ = self
            .first_drop
            .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
        self.last_drop.store(now, Ordering::Relaxed);
        self.dropped.fetch_add(1, Ordering::Relaxed);
        self.dropped_total.fetch_add(1, Ordering::Relaxed);
        crate::telemetry::metrics::get().log_lines_dropped("file", 1);
    }

    /// The lines dropped since the last gap taken (read first: nothing to take is the usual
    /// case, and costs no write).
    fn take_gap(&self) -> Gap {
        if self.dropped.load(Ordering::Relaxed) == 0 {
            return Gap::default();
        }
        let n = self.dropped.swap(0, Ordering::Relaxed);
        if n == 0 {
            return Gap::default();
        }
        let last = self.last_drop.load(Ordering::Relaxed);
        // A drop between the two swaps left no first time: the gap starts at its last.
        let first = match self.first_drop.swap(0, Ordering::Relaxed) {
            0 => last,
            f => f,
        };
        Gap { n, first, last }
    }

    /// A gap taken whose line could not be queued: it is the next one's.
    fn put_gap(&self, gap: Gap) {
        if gap.n == 0 {
            return;
        }
        self.dropped.fetch_add(gap.n, Ordering::Relaxed);
        let _ =
            self.first_drop
                .compare_exchange(0, gap.first, Ordering::Relaxed, Ordering::Relaxed);
        self.first_drop.fetch_min(gap.first, Ordering::Relaxed);
    }

    fn since_start(&self) -> i64 {
        i64::try_from(self.start.elapsed().as_millis()).unwrap_or(i64::MAX)
    }
}

/// Queues lines for the file; cheap to clone.
#[derive(Clone, Debug)]
pub struct Sender {
    tx: SyncSender<Msg>,
    shared: Arc<Shared>,
}

impl Sender {
    /// Queues one whole line (with its newline); never waits. The lines dropped since the
    /// last one queued go with it, so the file says so exactly where they are missing.
    pub fn line(&self, text: Vec<u8>) {
        let s = &self.shared;
        let len = text.len();
        if s.queued_bytes.load(Ordering::Relaxed).saturating_add(len) > QUEUE_BYTES {
            s.dropped_now();
            return;
        }
        let gap = s.take_gap();
        s.queued.fetch_add(1, Ordering::Relaxed);
        s.queued_bytes.fetch_add(len, Ordering::Relaxed);
        if let Err(TrySendError::Full(m) | TrySendError::Disconnected(m)) =
            self.tx.try_send(Msg::Line(text, gap))
        {
            s.queued.fetch_sub(1, Ordering::Relaxed);
            s.queued_bytes.fetch_sub(len, Ordering::Relaxed);
            if let Msg::Line(_, gap) = m {
                s.put_gap(gap);
            }
            s.dropped_now();
        }
    }

    /// Nine tenths of the queue are taken and the thread wrote within the last second.
    pub fn congested(&self) -> bool {
        let s = &self.shared;
        (s.queued.load(Ordering::Relaxed) > QUEUE / 10 * 9
            || s.queued_bytes.load(Ordering::Relaxed) > QUEUE_BYTES / 10 * 9)
            && s.since_start() - s.wrote_at.load(Ordering::Relaxed)
                < i64::try_from(STUCK.as_millis()).unwrap_or(i64::MAX)
    }
}

/// The writer thread, to close.
#[derive(Debug)]
pub struct Writer {
    tx: SyncSender<Msg>,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
    dir: String,
}

impl Writer {
    /// Starts the thread writing to `out` (the files in `dir`).
    pub fn start<W: Write + Send + 'static>(
        out: W,
        dir: &Path,
    ) -> std::io::Result<(Sender, Writer)> {
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
        let shared = Arc::new(Shared {
            queued: AtomicUsize::new(0),
            queued_bytes: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            first_drop: AtomicI64::new(0),
            last_drop: AtomicI64::new(0),
            dropped_total: AtomicU64::new(0),
            wrote_at: AtomicI64::new(0),
            start: Instant::now(),
            abandon: AtomicBool::new(false),
        });
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("manent-log-file".into())
            .spawn(move || run(out, &rx, &thread_shared))?;
        Ok((
            Sender {
                tx: tx.clone(),
                shared: shared.clone(),
            },
            Writer {
                tx,
                shared,
                thread: Some(thread),
                dir: dir.display().to_string(),
            },
        ))
    }

    /// Writes what is queued (for at most [`DRAIN`]) and stops the thread; what was lost.
    pub fn close(mut self) -> Closed {
        let deadline = Instant::now() + DRAIN;
        let mut msg = Msg::Close;
        // The close goes behind every line queued; a full queue is waited on, up to the end.
        loop {
            match self.tx.try_send(msg) {
                Ok(()) => break,
                Err(TrySendError::Full(m)) if Instant::now() < deadline => {
                    msg = m;
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(_) => break,
            }
        }
        if let Some(thread) = self.thread.take() {
            while !thread.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
            if thread.is_finished() {
                let _ = thread.join();
            } else {
                self.shared.abandon.store(true, Ordering::Relaxed);
            }
        }
        Closed {
            dropped: self.shared.dropped_total.load(Ordering::Relaxed),
            unwritten: self.shared.queued.load(Ordering::Relaxed),
            dir: std::mem::take(&mut self.dir),
        }
    }
}

/// What closing the file left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed {
    /// Lines dropped while the file was open (each gap said in the file itself).
    pub dropped: u64,
    /// Lines still queued when the drain gave up.
    pub unwritten: usize,
    dir: String,
}

impl Closed {
    /// One line for stderr, when anything was lost.
    pub fn said(&self) -> Option<String> {
        match (self.dropped, self.unwritten) {
            (0, 0) => None,
            (d, 0) => Some(format!(
                "the JSON log in {} dropped {d} line(s) while its disk fell behind (each gap is \
                 said in the file)",
                self.dir
            )),
            (d, u) => Some(format!(
                "the JSON log in {} could not write its last {u} line(s) within {}s of exit{}",
                self.dir,
                DRAIN.as_secs(),
                if d > 0 {
                    format!(", and dropped {d} earlier (each gap is said in the file)")
                } else {
                    String::new()
                }
            )),
        }
    }
}

fn run<W: Write>(mut out: W, rx: &Receiver<Msg>, s: &Shared) {
    loop {
        let msg = match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => {
                // Lines dropped with none queued after them: the gap is at the end, for now.
                notice(&mut out, s.take_gap());
                let _ = out.flush();
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let Msg::Line(text, gap) = msg else {
            break;
        };
        if s.abandon.load(Ordering::Relaxed) {
            return;
        }
        notice(&mut out, gap);
        let _ = out.write_all(&text);
        s.queued.fetch_sub(1, Ordering::Relaxed);
        s.queued_bytes.fetch_sub(text.len(), Ordering::Relaxed);
        s.wrote_at.store(s.since_start(), Ordering::Relaxed);
    }
    notice(&mut out, s.take_gap());
    let _ = out.flush();
}

/// Says a gap in the file, where its lines would have been.
fn notice<W: Write>(out: &mut W, gap: Gap) {
    if gap.n == 0 {
        return;
    }
    let at = |ms: i64| {
        humantime::format_rfc3339_millis(
            std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0)),
        )
        .to_string()
    };
    let line = serde_json::json!({
        "timestamp": at(gap.last),
        "level": "warn",
        "kind": "engine",
        "source": "engine",
        "message": format!(
            "{} log line(s) were dropped between {} and {}: the JSON log's queue was full \
             (its disk fell behind)",
            gap.n,
            at(gap.first),
            at(gap.last)
        ),
        "dropped": gap.n,
    });
    if let Ok(mut text) = serde_json::to_vec(&line) {
        text.push(b'\n');
        let _ = out.write_all(&text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose every write waits until the test lets it go.
    struct Gated {
        gate: Arc<std::sync::Mutex<()>>,
        out: Arc<std::sync::Mutex<Vec<u8>>>,
    }

    impl Write for Gated {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let _open = self
                .gate
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            self.out
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    #[allow(clippy::unwrap_used, reason = "test code")]
    fn a_full_queue_counts_what_it_drops_and_the_file_says_so_where_they_were() {
        let gate = Arc::new(std::sync::Mutex::new(()));
        let out = Arc::new(std::sync::Mutex::new(Vec::new()));
        let held = gate.lock().unwrap();
        let (tx, w) = Writer::start(
            Gated {
                gate: gate.clone(),
                out: out.clone(),
            },
            Path::new("/logs"),
        )
        .unwrap();
        // The thread takes one line and waits at the gate; the queue takes QUEUE more.
        let total = QUEUE + 100;
        for i in 0..total {
            tx.line(format!("{{\"n\":{i}}}\n").into_bytes());
        }
        let dropped = tx.shared.dropped_total.load(Ordering::Relaxed);
        assert!((99..=100).contains(&dropped), "{dropped}");
        drop(held);
        // Once the thread has room again, a line goes through.
        while tx.shared.queued.load(Ordering::Relaxed) >= QUEUE {
            std::thread::sleep(Duration::from_millis(1));
        }
        tx.line(b"{\"n\":\"after\"}\n".to_vec());
        let closed = w.close();
        assert_eq!(closed.dropped, dropped);
        assert_eq!(closed.unwritten, 0);
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), total - usize::try_from(dropped).unwrap() + 2);
        let notice = lines[lines.len() - 2];
        assert!(
            notice.contains(&format!("\"dropped\":{dropped}"))
                && notice.contains("were dropped between"),
            "{notice}"
        );
        assert_eq!(lines[lines.len() - 1], "{\"n\":\"after\"}");
        assert!(
            closed
                .said()
                .unwrap()
                .contains(&format!("dropped {dropped} line(s)"))
        );
    }

    #[test]
    #[allow(clippy::unwrap_used, reason = "test code")]
    fn closing_drains_the_queue_and_says_what_a_stuck_disk_kept() {
        let (tx, w) = Writer::start(Vec::new(), Path::new("/logs")).unwrap();
        for i in 0..1000 {
            tx.line(format!("{i}\n").into_bytes());
        }
        let closed = w.close();
        assert_eq!((closed.dropped, closed.unwritten), (0, 0));
        assert_eq!(closed.said(), None);
        let stuck = Closed {
            dropped: 0,
            unwritten: 12,
            dir: "/logs".into(),
        };
        assert!(
            stuck
                .said()
                .unwrap()
                .contains("could not write its last 12 line(s)")
        );
    }
}
