//! The engine: holds the database lease, recovers interrupted deployments at start, runs
//! workflows, carries every log line to subscribers and to the database, and drains on
//! shutdown. The headless commands and the console drive it; it knows nothing of either.

pub mod handle;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc};

use crate::config::Config;
use crate::deploy::records::{self, Db, LogRecord};
use crate::deploy::{self, DeployEnv};
use crate::plugin::{LogLine, LogSink, Logger, Registry};
use crate::redact::redact;
use crate::workflow::retry::until_committed;
use crate::workflow::store::Store;
use crate::workflow::{Lease, LeaseError, Runtime, RuntimeEvent, StoreError};

/// Why the engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Another engine holds the database.
    #[error(transparent)]
    Lease(#[from] LeaseError),
    /// The database could not be opened or recovered.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Lines waiting for the database at most; past it (the database has fallen far behind a
/// flooding plugin) lines are still shown live but not stored, and the gap is recorded.
const STORE_QUEUE: usize = 100_000;

/// Every log line: to subscribers (lossy: a slow one counts what it missed) and, batched, to
/// the database. Neither ever makes the writer wait, and memory stays bounded.
pub struct LogHub {
    lines: broadcast::Sender<LogLine>,
    to_store: mpsc::Sender<LogLine>,
    unstored: Arc<std::sync::atomic::AtomicU64>,
}

impl LogSink for LogHub {
    fn log(&self, mut line: LogLine) {
        // Every line passes here, from built-ins and from plugins' stderr alike: secrets are cut
        // once, before anyone sees the line — the console, a follower, the database.
        if let Cow::Owned(m) = redact(&line.message) {
            line.message = m;
        }
        line.attrs.values_mut().for_each(redact_value);
        if self.lines.receiver_count() > 0 {
            let _ = self.lines.send(line.clone());
        }
        if let Err(mpsc::error::TrySendError::Full(_)) = self.to_store.try_send(line) {
            self.unstored
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl LogHub {
    /// A hub whose lines are written to `store` in batches; the task ends when the hub drops.
    pub fn new(store: Arc<dyn Db>) -> (Arc<LogHub>, tokio::task::JoinHandle<()>) {
        LogHub::with_queue(store, STORE_QUEUE)
    }

    fn with_queue(store: Arc<dyn Db>, queue: usize) -> (Arc<LogHub>, tokio::task::JoinHandle<()>) {
        let (lines, _) = broadcast::channel(16_384);
        let (to_store, mut rx) = mpsc::channel::<LogLine>(queue);
        let unstored = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let missed = unstored.clone();
        let writer = tokio::spawn(async move {
            let mut batch = Vec::new();
            while rx.recv_many(&mut batch, 2048).await > 0 {
                let mut rows: Vec<LogRecord> = batch.drain(..).map(record).collect();
                let n = missed.swap(0, std::sync::atomic::Ordering::Relaxed);
                if n > 0 {
                    rows.push(record(unstored_line(n)));
                }
                if let Err(e) = store.append_logs(rows).await {
                    tracing::warn!(error = %e, "log lines could not be stored");
                }
            }
        });
        (
            Arc::new(LogHub {
                lines,
                to_store,
                unstored,
            }),
            writer,
        )
    }

    /// Log lines from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<LogLine> {
        self.lines.subscribe()
    }
}

/// The gap a flood left in the stored log.
fn unstored_line(n: u64) -> LogLine {
    let message = format!(
        "{n} log lines were shown live but not stored: the database fell behind the plugins' \
         logging (more than {STORE_QUEUE} lines were waiting)"
    );
    tracing::warn!("{message}");
    LogLine {
        at: crate::sys::now_ms(),
        level: crate::plugin::Level::Warn,
        source: "manent".into(),
        deployment_id: None,
        target: None,
        message,
        attrs: Default::default(),
    }
}

/// Secret values cut from every string inside `v`.
fn redact_value(v: &mut serde_json::Value) {
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
fn record(l: LogLine) -> LogRecord {
    let attrs = if l.attrs.is_empty() {
        None
    } else {
        serde_json::to_string(&l.attrs).ok()
    };
    LogRecord {
        id: 0,
        workflow_id: l.deployment_id,
        at: l.at,
        level: l.level.as_str().into(),
        source: l.source,
        target: l.target,
        message: l.message,
        attrs,
    }
}

/// A running engine.
pub struct Engine {
    config: Config,
    store: Arc<dyn Db>,
    runtime: Arc<Runtime>,
    registry: Arc<Registry>,
    logs: Arc<LogHub>,
    log_writer: tokio::task::JoinHandle<()>,
    poller: tokio::task::JoinHandle<()>,
    recovered: Vec<String>,
    _lease: Lease,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("database", &self.config.database)
            .finish()
    }
}

impl Engine {
    /// Takes the lease on the configured database, opens it, and resumes what crashed runs
    /// left behind.
    pub async fn start(config: &Config) -> Result<Engine, EngineError> {
        let lease = Lease::acquire(&config.database)?;
        let store: Arc<dyn Db> = Arc::new(records::open(
            &config.database,
            config.engine.synchronous,
            true,
        )?);
        let (executor, pid, host) = (
            &config.engine.executor_id,
            std::process::id(),
            crate::sys::hostname(),
        );
        until_committed(|| store.record_lease(executor, pid, &host), |e| {
            tracing::warn!(error = %e, "the database refused the engine's lease record; retrying");
        })
        .await?;
        let (logs, log_writer) = LogHub::new(store.clone());
        let registry = Arc::new(Registry::new(config, logs.clone()));
        let env = Arc::new(DeployEnv {
            registry: registry.clone(),
            db: store.clone(),
            log: Logger::new(logs.clone(), "engine"),
        });
        let kernel: Arc<dyn Store> = store.clone();
        let runtime = Runtime::new(
            kernel,
            config.engine.executor_id.clone(),
            deploy::definitions(env),
        );
        let recovered = runtime.recover().await?;
        let poller = runtime.spawn_poller(Duration::from_millis(250));
        Ok(Engine {
            config: config.clone(),
            store,
            runtime,
            registry,
            logs,
            log_writer,
            poller,
            recovered,
            _lease: lease,
        })
    }

    /// Deployments an earlier, interrupted engine left and this one resumed at start.
    pub fn recovered(&self) -> &[String] {
        &self.recovered
    }

    /// The system database.
    pub fn store(&self) -> &Arc<dyn Db> {
        &self.store
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Log lines from now on.
    pub fn logs(&self) -> broadcast::Receiver<LogLine> {
        self.logs.subscribe()
    }

    /// The channel every log line passes through, for a subscriber that wants to know how many
    /// lines it missed when it falls behind.
    pub fn log_channel(&self) -> broadcast::Sender<LogLine> {
        self.logs.lines.clone()
    }

    /// Workflow events from now on.
    pub fn events(&self) -> broadcast::Receiver<RuntimeEvent> {
        self.runtime.subscribe()
    }

    /// Runs deployment `id` here if it is waiting to run (just submitted or resumed).
    pub async fn run(&self, id: &str) -> Result<(), StoreError> {
        self.runtime.claim_and_spawn(id).await.map(|_| ())
    }

    /// Wakes deployment `id` after a command was put in its mailbox.
    pub fn wake(&self, id: &str) {
        self.runtime.wake(id);
    }

    /// Waits until `id` finishes, or stops running here because the engine is draining.
    pub async fn wait(&self, id: &str) -> Result<crate::workflow::store::WorkflowRow, StoreError> {
        self.runtime.wait(id).await
    }

    /// Waits until `id` finishes or waits for an operator (a failed target's decision, a
    /// pause), or stops running here because the engine is draining.
    pub async fn settle(
        &self,
        id: &str,
    ) -> Result<crate::workflow::store::WorkflowRow, StoreError> {
        self.runtime.settle(id).await
    }

    /// Deployments that go on by themselves (not waiting for an operator).
    pub fn busy(&self) -> usize {
        self.runtime.busy()
    }

    /// Deployments running in this process.
    pub fn active(&self) -> Vec<String> {
        self.runtime.active()
    }

    /// Drains (B.11) with the configured limits, flushes the logs, truncates the WAL and
    /// releases the lease. Returns how many runs had to be abandoned.
    pub async fn shutdown(self) -> usize {
        let (drain, hard) = (
            self.config.engine.drain_timeout,
            self.config.engine.hard_timeout,
        );
        self.shutdown_within(drain, hard).await
    }

    /// Shutdown that waits at most `drain` for deployments to finish or park, then stops them at
    /// their next step boundary, waiting at most `hard` for the steps in flight. An operator's
    /// Ctrl-C on a deploy uses no drain: in-flight targets finish, nothing new starts.
    pub async fn shutdown_within(self, drain: Duration, hard: Duration) -> usize {
        let left = self.runtime.drain(drain, hard).await;
        self.poller.abort();
        // Plugins stop only after the deployments using them have drained.
        self.registry.shutdown().await;
        drop(self.registry);
        drop(self.runtime);
        // The log writer ends once every sender is gone.
        drop(self.logs);
        let _ = tokio::time::timeout(Duration::from_secs(5), self.log_writer).await;
        if left == 0
            && let Err(e) = self.store.close().await
        {
            tracing::warn!(error = %e, "the WAL could not be truncated at shutdown");
        }
        left
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::Level;
    use crate::workflow::Synchronous;

    fn line(i: usize) -> LogLine {
        LogLine {
            at: 0,
            level: Level::Info,
            source: "flood".into(),
            deployment_id: None,
            target: None,
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
        let (hub, writer) = LogHub::new(store.clone());
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
        let (hub, writer) = LogHub::with_queue(store.clone(), 4);
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
}
