//! The engine: holds the database lease, recovers interrupted deployments at start, runs
//! workflows, carries every log line to subscribers and to the database, and drains on
//! shutdown. The headless commands and the console drive it; it knows nothing of either.

pub mod handle;
pub mod notify;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc};

use crate::config::Config;
use crate::deploy::records::{self, Db, LogRecord};
use crate::deploy::{self, DeployEnv};
use crate::plugin::{LogLine, LogSink, Logger, Processes, Registry};
use crate::redact::redact;
use crate::workflow::retry::until_committed_each;
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
    /// The database refuses writes (a full disk, a read-only file) when the engine starts.
    #[error(
        "the database {path} refuses writes ({cause}); nothing was started: free space (or make \
         it writable) and run again"
    )]
    Unwritable { path: String, cause: String },
    /// The directory that records the processes the engine starts cannot be used.
    #[error("cannot record the engine's processes in {path}: {reason}")]
    Processes { path: String, reason: String },
    /// `metrics.listen` cannot be listened on (a taken port).
    #[error(transparent)]
    Metrics(#[from] crate::telemetry::metrics::ServeError),
    /// The JSON log file cannot be written.
    #[error(transparent)]
    LogFile(#[from] crate::telemetry::logfile::LogFileError),
}

/// How long a starting engine retries a database that refuses its first write.
const START_WRITES: Duration = Duration::from_secs(5);

/// Lines waiting for the database at most; past it (the database has fallen far behind a
/// flooding plugin) lines are still shown live but not stored, and the gap is recorded.
const STORE_QUEUE: usize = 100_000;

/// Every log line: to subscribers (lossy: a slow one counts what it missed) and, batched, to
/// the database. Neither ever makes the writer wait, and memory stays bounded.
pub struct LogHub {
    lines: broadcast::Sender<Arc<LogLine>>,
    to_store: mpsc::Sender<Arc<LogLine>>,
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
        crate::telemetry::logfile::write(&line);
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
}

impl LogHub {
    /// A hub whose lines are written to `store` in batches; the task ends when the hub drops.
    pub fn new(store: Arc<dyn Db>) -> (Arc<LogHub>, tokio::task::JoinHandle<()>) {
        LogHub::with_queue(store, STORE_QUEUE)
    }

    fn with_queue(store: Arc<dyn Db>, queue: usize) -> (Arc<LogHub>, tokio::task::JoinHandle<()>) {
        let (lines, _) = broadcast::channel(16_384);
        let (to_store, mut rx) = mpsc::channel::<Arc<LogLine>>(queue);
        let unstored = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let missed = unstored.clone();
        let writer = tokio::spawn(async move {
            let mut batch = Vec::new();
            while rx.recv_many(&mut batch, 2048).await > 0 {
                let mut rows: Vec<LogRecord> = batch.drain(..).map(|l| record(&l)).collect();
                let n = missed.swap(0, std::sync::atomic::Ordering::Relaxed);
                if n > 0 {
                    rows.push(record(&unstored_line(n)));
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
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<LogLine>> {
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
        moniker: None,
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

/// Renews this engine's lease on a shared database every third of it, and claims what engines
/// whose lease expired left behind. A renewal that fails (the database is unreachable) is
/// retried at the next beat; the runs' own writes wait for the database meanwhile.
fn spawn_heartbeat(
    runtime: Arc<Runtime>,
    store: Arc<dyn Db>,
    log: Logger,
    executor: &str,
    lease: Duration,
) -> tokio::task::JoinHandle<()> {
    let executor = executor.to_owned();
    let every = (lease / 3).max(Duration::from_millis(200));
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            match store.heartbeat(&executor).await {
                Ok(taken) => {
                    for id in taken {
                        // Said in the deployment's own log: whoever reads it later sees why
                        // another engine finished it.
                        let from = store
                            .workflow(&id)
                            .await
                            .ok()
                            .flatten()
                            .and_then(|w| w.executor_id)
                            .unwrap_or_else(|| "?".into());
                        log.for_deployment(&id).warn(&format!(
                            "engine {executor} takes this deployment over: engine {from} stopped \
                             renewing its lease; it resumes from its last completed step"
                        ));
                        if let Err(e) = runtime.claim_and_spawn(&id).await {
                            tracing::warn!(workflow = %id, error = %e, "could not claim a deployment taken over");
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "could not renew the engine's lease"),
            }
        }
    })
}

/// A log line as stored (already redacted by the hub).
fn record(l: &LogLine) -> LogRecord {
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

/// Keeps what the database refuses, while it does: `disk full at PATH: …, retry N`.
fn spawn_trouble_watch(
    mut events: broadcast::Receiver<RuntimeEvent>,
    trouble: Arc<std::sync::Mutex<Option<String>>>,
    db: String,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        use crate::workflow::StepEvent;
        loop {
            let event = match events.recv().await {
                Ok(e) => e,
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return,
            };
            let RuntimeEvent::Step { event, .. } = event else {
                continue;
            };
            let now = match event {
                StepEvent::StoreDegraded { error, retries } => Some(format!(
                    "the database {db} cannot commit ({error}); waiting, retry {retries} — nothing \
                     is recorded as failed"
                )),
                StepEvent::StoreRecovered => None,
                _ => continue,
            };
            if let Ok(mut t) = trouble.lock() {
                *t = now;
            }
        }
    })
}

/// Deletes log lines older than `retention`, at start and every hour.
fn spawn_pruner(store: Arc<dyn Db>, retention: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(3600));
        loop {
            every.tick().await;
            let keep = i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
            match store
                .prune_logs(crate::sys::now_ms().saturating_sub(keep))
                .await
            {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    lines = n,
                    "deleted log lines older than {} (engine.log_retention)",
                    humantime::format_duration(retention)
                ),
                Err(e) => tracing::warn!(error = %e, "old log lines could not be deleted"),
            }
        }
    })
}

/// A running engine.
pub struct Engine {
    config: Config,
    processes: Processes,
    store: Arc<dyn Db>,
    runtime: Arc<Runtime>,
    registry: Arc<Registry>,
    logs: Arc<LogHub>,
    log_writer: tokio::task::JoinHandle<()>,
    poller: tokio::task::JoinHandle<()>,
    heartbeat: Option<tokio::task::JoinHandle<()>>,
    pruner: tokio::task::JoinHandle<()>,
    watcher: tokio::task::JoinHandle<()>,
    trouble: Arc<std::sync::Mutex<Option<String>>>,
    recovered: Vec<String>,
    metrics: Option<tokio::task::JoinHandle<()>>,
    notifier: Option<notify::Notifier>,
    log_file: Option<crate::telemetry::logfile::Open>,
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
        // The JSON log file first: what recovery does below is in it.
        let log_file = config
            .log_file
            .as_ref()
            .map(crate::telemetry::logfile::open)
            .transpose()?;
        let store: Arc<dyn Db> = records::open_configured(config, true).await?;
        let metrics = match config.metrics_listen {
            Some(addr) => Some(crate::telemetry::metrics::serve(addr, store.clone()).await?),
            None => None,
        };
        let (executor, pid, host) = (
            &config.engine.executor_id,
            std::process::id(),
            crate::sys::hostname(),
        );
        // A database that refuses writes now (a full disk) is said at once, after a few
        // seconds of retries for a passing lock: nothing runs yet, so nothing waits on it.
        let refused = std::sync::Mutex::new(None::<StoreError>);
        let recorded = tokio::time::timeout(
            START_WRITES,
            until_committed_each(
                || store.record_lease(executor, pid, &host),
                |e, _| {
                    tracing::warn!(error = %e, "the database refused the engine's lease record; retrying");
                    if let Ok(mut r) = refused.lock() {
                        *r = Some(e.clone());
                    }
                },
            ),
        )
        .await;
        match recorded {
            Ok(r) => r?,
            Err(_) => {
                return Err(EngineError::Unwritable {
                    path: store.describe(),
                    cause: refused
                        .lock()
                        .ok()
                        .and_then(|r| r.as_ref().map(StoreError::cause))
                        .unwrap_or_default(),
                });
            }
        }
        // What a dead engine left running (its commands, its plugins) dies before anything
        // runs again: no step may run beside its own earlier attempt.
        let processes =
            Processes::beside(&config.database).map_err(|e| EngineError::Processes {
                path: config.database.display().to_string(),
                reason: e.to_string(),
            })?;
        let reaped = tokio::task::spawn_blocking({
            let p = processes.clone();
            move || p.reap()
        })
        .await
        .unwrap_or_default();
        // Secrets from the engine's environment are known before anything runs: a command that
        // is passed the variable itself (exec's `pass_env`) prints it redacted too.
        for source in config.secrets.values() {
            if let crate::config::SecretRef::Env(var) = source
                && let Ok(v) = std::env::var(var)
            {
                crate::redact::register_redaction(&v);
            }
        }
        let (logs, log_writer) = LogHub::new(store.clone());
        if !reaped.is_empty() {
            Logger::new(logs.clone(), "engine").warn(&format!(
                "killed {} process group(s) an engine that died had left running (pgid {}) \
                 before resuming its deployments",
                reaped.len(),
                reaped
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let registry = Arc::new(Registry::with_processes(
            config,
            logs.clone(),
            processes.clone(),
        ));
        let env = Arc::new(DeployEnv {
            registry: registry.clone(),
            db: store.clone(),
            log: Logger::new(logs.clone(), "engine"),
            processes: processes.clone(),
        });
        let kernel: Arc<dyn Store> = store.clone();
        let runtime = Runtime::new(
            kernel,
            config.engine.executor_id.clone(),
            deploy::definitions(env),
        );
        if log_file.is_some() {
            crate::telemetry::logfile::spawn_events(runtime.subscribe());
        }
        // Subscribed before recovery: what recovered runs do is heard of.
        let notifier = notify::Notifier::spawn(
            &config.notify,
            &config.secrets,
            store.clone(),
            runtime.subscribe(),
            Logger::new(logs.clone(), "engine"),
        );
        let trouble = Arc::new(std::sync::Mutex::new(None));
        let watcher = spawn_trouble_watch(runtime.subscribe(), trouble.clone(), store.describe());
        let recovered = match runtime.recover().await {
            Ok(r) => r,
            Err(e) => {
                // Nothing may outlive a failed start: the port is free again for the next one.
                if let Some(m) = &metrics {
                    m.abort();
                }
                if let Some(n) = notifier {
                    n.abort();
                }
                return Err(e.into());
            }
        };
        // Other processes' commands wake the engine at once; the poll is the fallback.
        store.listen();
        let poller = runtime.spawn_poller(Duration::from_millis(250));
        // On a shared database the lease is renewed, and what dead engines left is taken over.
        let heartbeat = config.postgres.is_some().then(|| {
            spawn_heartbeat(
                runtime.clone(),
                store.clone(),
                Logger::new(logs.clone(), "engine"),
                executor,
                config.engine.lease,
            )
        });
        let pruner = spawn_pruner(store.clone(), config.engine.log_retention);
        Ok(Engine {
            config: config.clone(),
            processes,
            store,
            runtime,
            registry,
            logs,
            log_writer,
            poller,
            heartbeat,
            pruner,
            watcher,
            trouble,
            recovered,
            metrics,
            notifier,
            log_file,
            _lease: lease,
        })
    }

    /// What the database refuses now, while deployments wait for it (disk full, I/O errors).
    pub fn store_trouble(&self) -> Option<String> {
        self.trouble.lock().ok().and_then(|t| t.clone())
    }

    /// Deployments an earlier, interrupted engine left and this one resumed at start.
    pub fn recovered(&self) -> &[String] {
        &self.recovered
    }

    /// The system database.
    pub fn store(&self) -> &Arc<dyn Db> {
        &self.store
    }

    /// After a first SIGINT/SIGTERM began a shutdown: a second one stops at once, taking down
    /// every command and plugin this engine started (so none runs on beside the retry the next
    /// start makes), and exits the process with `code`.
    pub fn exit_on_second_signal(&self, code: i32) {
        use tokio::signal::unix::{SignalKind, signal};
        let processes = self.processes.clone();
        tokio::spawn(async move {
            let (Ok(mut int), Ok(mut term)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) else {
                return;
            };
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            tracing::warn!("asked again to stop: killing the commands and plugins still running");
            processes.kill_live();
            std::process::exit(code);
        });
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Log lines from now on.
    pub fn logs(&self) -> broadcast::Receiver<Arc<LogLine>> {
        self.logs.subscribe()
    }

    /// The channel every log line passes through, for a subscriber that wants to know how many
    /// lines it missed when it falls behind.
    pub fn log_channel(&self) -> broadcast::Sender<Arc<LogLine>> {
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

    /// Deployments that go on by themselves (not waiting for an operator): what a worker
    /// would have to carry on.
    pub fn going(&self) -> Vec<String> {
        self.runtime.going()
    }

    /// Deployments running in this process.
    pub fn active(&self) -> Vec<String> {
        self.runtime.active()
    }

    /// True while deployment `id` runs in this process, or is being claimed by it.
    pub fn runs(&self, id: &str) -> bool {
        self.runtime.runs(id)
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
        if let Some(h) = &self.heartbeat {
            h.abort();
            // What this engine parked is another engine's to resume now, not after the lease.
            if let Err(e) = self.store.release(&self.config.engine.executor_id).await {
                tracing::warn!(error = %e, "could not release the engine's lease");
            }
        }
        self.pruner.abort();
        self.watcher.abort();
        // What the drain changed is notified (within a few seconds; the rest at the next start).
        if let Some(n) = self.notifier {
            n.finish().await;
        }
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
        if let Some(m) = self.metrics {
            m.abort();
        }
        // Flushes what the log file's writer still holds.
        drop(self.log_file);
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
