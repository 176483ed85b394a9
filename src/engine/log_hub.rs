//! The log hub: every log line, redacted once, to its subscribers (lossy: a slow one counts
//! what it missed) and, batched, to the database (bounded: past a deployment's cap, or past
//! what a falling-behind database can take, lines are counted and the gap recorded).

use std::borrow::Cow;
use std::sync::Arc;

use tokio::sync::{broadcast, mpsc};

use crate::deploy::records::{Db, LogRecord};
use crate::plugin::{LogLine, LogSink};
use crate::redact::redact;

/// Lines waiting for the database at most; past it (the database has fallen far behind a
/// flooding plugin) lines are still shown live but not stored, and the gap is recorded.
pub(super) const STORE_QUEUE: usize = 100_000;

/// Every log line: to subscribers (lossy: a slow one counts what it missed) and, batched, to
/// the database. Neither ever makes the writer wait, and memory stays bounded; a plugin's
/// stderr reader asks [`LogSink::congested`] and waits while the database is behind but moving.
pub struct LogHub {
    lines: broadcast::Sender<Arc<LogLine>>,
    to_store: mpsc::Sender<Arc<LogLine>>,
    unstored: Arc<std::sync::atomic::AtomicU64>,
    /// When the database last took a batch ([`mono_ms`]).
    stored_at: Arc<std::sync::atomic::AtomicI64>,
}

/// A database that took nothing for this long is stuck, not slow: nobody waits for it.
const STUCK_MS: i64 = 1_000;

/// Milliseconds on a clock that never steps back (the wall clock may: a plugin must not wait
/// for as long as it was set back).
fn mono_ms() -> i64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let start = START.get_or_init(std::time::Instant::now);
    i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX)
}

impl LogSink for LogHub {
    fn log(&self, mut line: LogLine) {
        // Every line passes here, from built-ins and from plugins' stderr alike: secrets are cut
        // once, before anyone sees the line — the console, a follower, the database.
        if let Cow::Owned(m) = redact(&line.message) {
            line.message = m;
        }
        line.attrs.values_mut().for_each(redact_value);
        super::observe::log_line(&line);
        // Shared, not copied, with every reader and the database's writer.
        let line = Arc::new(line);
        if self.lines.receiver_count() > 0 {
            let _ = self.lines.send(line.clone());
        }
        if let Err(mpsc::error::TrySendError::Full(_)) = self.to_store.try_send(line) {
            self.unstored
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            crate::telemetry::metrics::get().log_lines_dropped("store", 1);
        }
    }

    fn congested(&self) -> bool {
        // Less than a tenth of the store's queue free, or of the JSON log's.
        (self.to_store.capacity() < self.to_store.max_capacity() / 10
            && mono_ms() - self.stored_at.load(std::sync::atomic::Ordering::Relaxed) < STUCK_MS)
            || crate::telemetry::logfile::congested()
    }
}

impl LogHub {
    /// A hub whose lines are written to `store` in batches, at most `cap` bytes of log per
    /// deployment; the task ends when the hub drops.
    pub fn new(store: Arc<dyn Db>, cap: u64) -> (Arc<LogHub>, tokio::task::JoinHandle<()>) {
        LogHub::with_queue(store, STORE_QUEUE, cap)
    }

    fn with_queue(
        store: Arc<dyn Db>,
        queue: usize,
        cap: u64,
    ) -> (Arc<LogHub>, tokio::task::JoinHandle<()>) {
        let (lines, _) = broadcast::channel(16_384);
        let (to_store, mut rx) = mpsc::channel::<Arc<LogLine>>(queue);
        let unstored = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let missed = unstored.clone();
        let stored_at = Arc::new(std::sync::atomic::AtomicI64::new(mono_ms()));
        let progress = stored_at.clone();
        let writer = tokio::spawn(async move {
            let mut batch = Vec::new();
            let mut caps = Caps::new(cap);
            while rx.recv_many(&mut batch, 2048).await > 0 {
                let mut rows: Vec<LogRecord> = Vec::with_capacity(batch.len());
                for l in batch.drain(..) {
                    match caps.admit(&l) {
                        Admit::Store => rows.push(record(&l)),
                        Admit::CapReached => {
                            rows.push(record(&l));
                            rows.push(record(&cap_line(&l, cap)));
                        }
                        Admit::Drop => {}
                    }
                }
                let n = missed.swap(0, std::sync::atomic::Ordering::Relaxed);
                if n > 0 {
                    rows.push(record(&unstored_line(n)));
                }
                if rows.is_empty() {
                    continue;
                }
                // A database that refuses writes for a while (an outage, a full disk) is
                // waited out, as deployments wait; what cannot be stored at all is a failure.
                let stored = crate::workflow::retry::until_committed(
                    || store.append_logs(rows.clone()),
                    |e| tracing::warn!(error = %e, "log lines wait for the database"),
                )
                .await;
                match stored {
                    Ok(()) => progress.store(mono_ms(), std::sync::atomic::Ordering::Relaxed),
                    Err(e) => log_path_failed(format!("log lines could not be stored: {e}")),
                }
            }
        });
        (
            Arc::new(LogHub {
                lines,
                to_store,
                unstored,
                stored_at,
            }),
            writer,
        )
    }

    /// Log lines from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<LogLine>> {
        self.lines.subscribe()
    }

    /// The channel itself, for a subscriber that wants to know how many lines it missed.
    pub fn channel(&self) -> broadcast::Sender<Arc<LogLine>> {
        self.lines.clone()
    }
}

/// What the log path lost, if it failed: said at the end of a command, which then exits
/// non-zero (the deploy may have succeeded; its record is not whole).
static LOG_PATH: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Records (and says at error level) that the log path failed; the first failure is kept.
pub(super) fn log_path_failed(why: String) {
    tracing::error!("{why}");
    if let Ok(mut f) = LOG_PATH.lock()
        && f.is_none()
    {
        *f = Some(why);
    }
}

/// How the log path failed in this process, if it did.
pub fn log_path_failure() -> Option<String> {
    LOG_PATH.lock().ok().and_then(|f| f.clone())
}

/// Per deployment, the log bytes stored so far: past the cap, lines are only shown live and
/// written to the JSON log.
pub(super) struct Caps {
    cap: u64,
    used: std::collections::HashMap<String, u64>,
}

enum Admit {
    Store,
    /// This line is the last one stored: the cut is said after it.
    CapReached,
    Drop,
}

impl Caps {
    fn new(cap: u64) -> Caps {
        Caps {
            cap,
            used: std::collections::HashMap::new(),
        }
    }

    fn admit(&mut self, l: &LogLine) -> Admit {
        let Some(id) = &l.deployment_id else {
            return Admit::Store;
        };
        let size = u64::try_from(l.message.len() + 64).unwrap_or(u64::MAX);
        let used = self.used.entry(id.clone()).or_insert(0);
        if *used > self.cap {
            crate::telemetry::metrics::get().log_lines_dropped("cap", 1);
            return Admit::Drop;
        }
        *used = used.saturating_add(size);
        if *used > self.cap {
            Admit::CapReached
        } else {
            Admit::Store
        }
    }
}

/// Said once in a deployment's stored log when it reaches the cap.
pub(super) fn cap_line(after: &LogLine, cap: u64) -> LogLine {
    let message = format!(
        "this deployment's log reached {} in the database (engine.log_cap): later lines are \
         not stored; they still reach the console and the JSON log",
        if cap >= 1 << 20 {
            format!("{} MB", cap >> 20)
        } else {
            format!("{cap} bytes")
        }
    );
    tracing::warn!(deployment = ?after.deployment_id, "{message}");
    LogLine {
        at: after.at,
        level: crate::plugin::Level::Warn,
        source: "manent".into(),
        deployment_id: after.deployment_id.clone(),
        target: None,
        moniker: None,
        message,
        attrs: Default::default(),
    }
}

/// The gap a flood left in the stored log.
pub(super) fn unstored_line(n: u64) -> LogLine {
    let message = format!(
        "{n} log lines were shown live but not stored: the database fell behind the plugins' \
         logging (more than {STORE_QUEUE} lines were waiting)"
    );
    tracing::warn!("{message}");
    LogLine {
        // A line's time is the wall clock's, shown and stored (mono_ms is only for pacing).
        at: crate::sys::now_ms(),
        level: crate::plugin::Level::Warn,
        source: "manent".into(),
        deployment_id: None,
        target: None,
        moniker: None,
        message,
        attrs: Default::default(),
    }
}

/// Secret values cut from every string inside `v`.
pub(super) fn redact_value(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) => {
            if let Cow::Owned(r) = redact(s) {
                *s = r;
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(redact_value),
        serde_json::Value::Object(o) => o.values_mut().for_each(redact_value),
        _ => {}
    }
}

/// A log line as stored (already redacted by the hub).
pub(super) fn record(l: &LogLine) -> LogRecord {
    let attrs = if l.attrs.is_empty() {
        None
    } else {
        serde_json::to_string(&l.attrs).ok()
    };
    LogRecord {
        id: 0,
        workflow_id: l.deployment_id.clone(),
        at: l.at,
        level: l.level.as_str().into(),
        source: l.source.clone(),
        target: l.target.clone(),
        message: l.message.clone(),
        attrs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deploy::records;
    use crate::plugin::Level;
    use crate::workflow::Synchronous;

    fn line(i: usize) -> LogLine {
        LogLine {
            at: 0,
            level: Level::Info,
            source: "flood".into(),
            deployment_id: None,
            target: None,
            moniker: None,
            message: format!("line {i}"),
            attrs: Default::default(),
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn secrets_are_cut_before_anyone_sees_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Db> =
            Arc::new(records::open(&dir.path().join("m.db"), Synchronous::Normal, true).unwrap());
        crate::redact::register_redaction("hub-s3cr3t-9f2");
        let (hub, writer) = LogHub::new(store.clone(), 256 << 20);
        let mut live = hub.subscribe();
        let mut l = line(0);
        l.message = "token=hub-s3cr3t-9f2 from a plugin's stderr".into();
        l.attrs.insert(
            "env".into(),
            serde_json::json!({"TOKEN": ["hub-s3cr3t-9f2"]}),
        );
        hub.log(l);
        let seen = live.recv().await.unwrap();
        assert_eq!(seen.message, "token=[redacted] from a plugin's stderr");
        assert_eq!(
            seen.attrs["env"],
            serde_json::json!({"TOKEN": ["[redacted]"]})
        );
        drop(hub);
        writer.await.unwrap();
        let stored = store.recent_logs(0, 10).await.unwrap();
        assert_eq!(stored[0].message, "token=[redacted] from a plugin's stderr");
        assert!(
            !stored[0]
                .attrs
                .as_deref()
                .unwrap()
                .contains("hub-s3cr3t-9f2")
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_database_that_falls_behind_costs_stored_lines_not_memory_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Db> =
            Arc::new(records::open(&dir.path().join("m.db"), Synchronous::Normal, true).unwrap());
        let (hub, writer) = LogHub::with_queue(store.clone(), 4, 256 << 20);
        let mut live = hub.subscribe();
        // The writer task cannot run until this test awaits: the queue fills at 4.
        for i in 0..10 {
            hub.log(line(i));
        }
        for i in 0..10 {
            assert_eq!(live.recv().await.unwrap().message, format!("line {i}"));
        }
        drop(hub);
        writer.await.unwrap();
        let stored: Vec<String> = store
            .recent_logs(0, 100)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.message)
            .collect();
        assert_eq!(stored[..4], ["line 0", "line 1", "line 2", "line 3"]);
        assert_eq!(stored.len(), 5, "{stored:?}");
        assert!(
            stored[4].starts_with("6 log lines were shown live but not stored"),
            "{stored:?}"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_full_queue_is_congestion_while_the_database_moves_and_not_once_it_is_stuck() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Db> =
            Arc::new(records::open(&dir.path().join("m.db"), Synchronous::Normal, true).unwrap());
        let (hub, writer) = LogHub::with_queue(store.clone(), 20, 256 << 20);
        assert!(!hub.congested());
        // The writer task cannot run until this test awaits: the queue fills.
        for i in 0..19 {
            hub.log(line(i));
        }
        assert!(
            hub.congested(),
            "19 of 20 queued, the database took a batch just now"
        );
        // A database that has taken nothing for longer than STUCK_MS holds nobody up.
        hub.stored_at.store(
            mono_ms() - STUCK_MS - 1,
            std::sync::atomic::Ordering::Relaxed,
        );
        assert!(!hub.congested());
        hub.stored_at
            .store(mono_ms(), std::sync::atomic::Ordering::Relaxed);
        // Once the writer drains the queue, the stderr readers go on.
        for _ in 0..200 {
            if !hub.congested() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert!(!hub.congested());
        drop(hub);
        writer.await.unwrap();
        assert_eq!(store.recent_logs(0, 100).await.unwrap().len(), 19);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_deployment_past_its_log_cap_keeps_what_came_first_and_says_where_it_cut() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Db> =
            Arc::new(records::open(&dir.path().join("m.db"), Synchronous::Normal, true).unwrap());
        // Each line counts its message and a fixed 64 bytes: 5 lines of ~70 fit in 350.
        let (hub, writer) = LogHub::with_queue(store.clone(), 1000, 350);
        for i in 0..50 {
            let mut l = line(i);
            l.deployment_id = Some("dep-1".into());
            hub.log(l);
        }
        // Lines of no deployment are not capped.
        hub.log(line(99));
        drop(hub);
        writer.await.unwrap();
        let stored: Vec<String> = store
            .logs("dep-1", 0, None, 100)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.message)
            .collect();
        assert_eq!(stored.len(), 7, "{stored:?}");
        assert_eq!(stored[5], "line 5");
        assert!(
            stored[6].contains("reached 350 bytes in the database (engine.log_cap)"),
            "{stored:?}"
        );
        assert!(
            store
                .recent_logs(0, 100)
                .await
                .unwrap()
                .iter()
                .any(|r| r.message == "line 99")
        );
    }
}
