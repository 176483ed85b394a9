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
use crate::workflow::store::{Store, TakenOver};
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
    /// One of the engine's files is not its user's alone (or the shared group's): nothing
    /// starts, and nothing is killed.
    #[error(transparent)]
    Refused(#[from] crate::sys::files::Refused),
    /// `engine.shared_group` cannot be used by this user.
    #[error("{0}")]
    Trust(String),
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
                if let Err(e) = stored {
                    log_path_failed(format!("log lines could not be stored: {e}"));
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

/// What the log path lost, if it failed: said at the end of a command, which then exits
/// non-zero (the deploy may have succeeded; its record is not whole).
static LOG_PATH: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Records (and says at error level) that the log path failed; the first failure is kept.
fn log_path_failed(why: String) {
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
struct Caps {
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
fn cap_line(after: &LogLine, cap: u64) -> LogLine {
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
    processes: Processes,
    log: Logger,
    executor: &str,
    lease: Duration,
) -> tokio::task::JoinHandle<()> {
    let executor = executor.to_owned();
    // Often enough that a lapse is seen within half a second (before the grace others give it
    // is over), and a dead engine is taken over within its lease and 2s.
    let every = (lease / 3).clamp(Duration::from_millis(200), Duration::from_millis(500));
    tokio::spawn(async move {
        let mut beat = Heartbeat::new(lease);
        loop {
            // After a failure, again at once: the database coming back is the first thing
            // an engine tells it.
            let pause = if beat.failing {
                Duration::from_millis(200)
            } else {
                every
            };
            tokio::time::sleep(pause).await;
            if beat.lapsed() && !beat.fenced {
                fence(&runtime, &processes, &log, lease);
                beat.fenced = true;
            }
            // A renewal that hangs (a frozen database) counts as failed: it must not hold off
            // the lapse check.
            let renewed =
                tokio::time::timeout(every, store.heartbeat(&executor, beat.may_take_over()))
                    .await
                    .unwrap_or_else(|_| Err(StoreError::Transient("no answer".into())));
            let taken = match renewed {
                Ok(taken) => taken,
                Err(e) => {
                    if !beat.failing {
                        tracing::warn!(error = %e, "could not renew the engine's lease; trying again");
                    }
                    beat.failed();
                    continue;
                }
            };
            let was_fenced = beat.renewed();
            if was_fenced {
                runtime.unfence();
                // Its lease is back: what no other engine took meanwhile is its own again.
                match store.reclaim_own(&executor).await {
                    Ok(ids) => {
                        for TakenOver { id, .. } in ids {
                            log.for_deployment(&id).warn(
                                "this engine renewed its lease: it takes its deployment back and \
                                 resumes from its last completed step",
                            );
                            let _ = runtime.claim_and_spawn(&id).await;
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "could not take its deployments back"),
                }
            }
            for TakenOver { id, from } in taken {
                // Said in the deployment's own log: whoever reads it later sees why another
                // engine finished it (who left it was read as it was taken).
                let why = from.map_or_else(
                    || "no engine had claimed it".to_owned(),
                    |f| format!("engine {f} stopped renewing its lease"),
                );
                log.for_deployment(&id).warn(&format!(
                    "engine {executor} takes this deployment over: {why}; it resumes from its \
                     last completed step"
                ));
                if let Err(e) = runtime.claim_and_spawn(&id).await {
                    tracing::warn!(workflow = %id, error = %e, "could not claim a deployment taken over");
                }
            }
        }
    })
}

/// What an engine's lease renewals have seen, by its own monotonic clock.
struct Heartbeat {
    lease: Duration,
    /// The last renewal that committed.
    last_ok: std::time::Instant,
    /// Connected (renewals committing) without a break since: an engine takes others'
    /// workflows over only after a whole lease of it — an outage both saw moves nothing.
    connected_since: Option<std::time::Instant>,
    failing: bool,
    /// Its runs were cut off after a lapse; not yet taken back.
    fenced: bool,
}

impl Heartbeat {
    fn new(lease: Duration) -> Heartbeat {
        let now = std::time::Instant::now();
        Heartbeat {
            lease,
            last_ok: now,
            connected_since: Some(now),
            failing: false,
            fenced: false,
        }
    }

    /// No renewal has committed for a whole lease: others may run this engine's workflows.
    fn lapsed(&self) -> bool {
        self.last_ok.elapsed() > self.lease
    }

    fn may_take_over(&self) -> bool {
        self.connected_since
            .is_some_and(|since| since.elapsed() >= self.lease)
    }

    fn failed(&mut self) {
        self.failing = true;
        self.connected_since = None;
    }

    /// A renewal committed; true when the engine had fenced itself and takes its runs back.
    fn renewed(&mut self) -> bool {
        let now = std::time::Instant::now();
        // A renewal after a lapse (a paused engine) starts a new connected stretch too.
        if self.failing || self.last_ok.elapsed() > self.lease {
            self.connected_since = Some(now);
        }
        self.last_ok = now;
        self.failing = false;
        std::mem::take(&mut self.fenced)
    }
}

/// This engine's lease lapsed: before anything else, every step process it started is killed
/// and every run cut off — another engine may be running them now.
fn fence(runtime: &Runtime, processes: &Processes, log: &Logger, lease: Duration) {
    processes.kill_live();
    let cut = runtime.fence();
    let said = format!(
        "this engine's lease lapsed (no renewal for over {}): its step processes were killed \
         and its runs stopped, so another engine can take them over without both running a \
         step; it takes back what nobody took once it renews",
        humantime::format_duration(lease)
    );
    tracing::error!("{said}");
    for id in cut {
        log.for_deployment(&id).error(&said);
    }
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

/// How often an engine checks that its database is still there (a commit checks too).
const LOST_CHECK: Duration = Duration::from_secs(2);

/// Checks that the database is still the one the engine opened; once it is not, stops every
/// run (nothing more can be recorded) and keeps why.
fn spawn_lost_watch(
    store: Arc<dyn Db>,
    runtime: Arc<Runtime>,
    lost: Arc<std::sync::Mutex<Option<String>>>,
    log: Logger,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(LOST_CHECK).await;
            let Some(why) = store.lost().await else {
                continue;
            };
            tracing::error!("{why}");
            log.error(&why);
            if let Ok(mut l) = lost.lock() {
                *l = Some(why);
            }
            runtime.stop_now();
            return;
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
    /// Why the database is gone, once it is: the engine has stopped its runs.
    lost: Arc<std::sync::Mutex<Option<String>>>,
    lost_watch: tokio::task::JoinHandle<()>,
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
        let trust = records::trust(config).map_err(EngineError::Trust)?;
        // On a shared PostgreSQL the local lock keeps one engine per configuration on this
        // host; its error names the database the operator knows.
        let lease =
            Lease::acquire(&config.database, &trust).map_err(|e| match &config.postgres {
                Some(pg) => e.naming(&format!(
                    "{} (this configuration, on this host)",
                    pg.shown()
                )),
                None => e,
            })?;
        // The JSON log file first: what recovery does below is in it.
        let log_file = config
            .log_file
            .as_ref()
            .map(|l| crate::telemetry::logfile::open(l, &trust))
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
        let processes = Processes::beside(&config.database, &trust)?;
        let reaped = tokio::task::spawn_blocking({
            let p = processes.clone();
            move || p.reap()
        })
        .await
        .unwrap_or_else(|_| Ok(Default::default()))?;
        // Every declared secret is known to redaction before anything runs, whatever a call
        // later reads: a command that prints a `file:` secret, or the variable exec passes
        // through, shows `[redacted]` in every sink (the log, the database, webhooks).
        let secrets = crate::plugin::secrets::ConfigSecrets::new(config.secrets.clone());
        let (warnings, notes) = secrets.preload().await;
        for w in warnings {
            tracing::warn!("{w}");
        }
        for n in notes {
            tracing::info!("{n}; a deployment that reads it fails until it can be read");
        }
        let (logs, log_writer) = LogHub::new(store.clone(), config.engine.log_cap);
        // Said on the terminal too: whoever starts the engine learns what it killed or spared.
        let mut said = reaped.spared;
        if !reaped.killed.is_empty() {
            said.push(format!(
                "killed {} process group(s) an engine that died had left running (pgid {}) \
                 before resuming its deployments",
                reaped.killed.len(),
                reaped
                    .killed
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        for line in &said {
            tracing::warn!("{line}");
            Logger::new(logs.clone(), "engine").warn(line);
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
                processes.clone(),
                Logger::new(logs.clone(), "engine"),
                executor,
                config.engine.lease,
            )
        });
        let pruner = spawn_pruner(store.clone(), config.engine.log_retention);
        let lost = Arc::new(std::sync::Mutex::new(None));
        let lost_watch = spawn_lost_watch(
            store.clone(),
            runtime.clone(),
            lost.clone(),
            Logger::new(logs.clone(), "engine"),
        );
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
            lost,
            lost_watch,
            recovered,
            metrics,
            notifier,
            log_file,
            _lease: lease,
        })
    }

    /// Why the database is gone (deleted, replaced, its schema dropped), once the engine has
    /// seen it: nothing more can be recorded, the runs are stopped, the command exits 6.
    pub fn lost(&self) -> Option<String> {
        self.lost.lock().ok().and_then(|l| l.clone())
    }

    /// [`Engine::lost`], asking the database now (a run that just stopped on a failed commit
    /// may be the first to know).
    pub async fn check_lost(&self) -> Option<String> {
        if let Some(why) = self.lost() {
            return Some(why);
        }
        let why = self.store.lost().await?;
        if let Ok(mut l) = self.lost.lock() {
            *l = Some(why.clone());
        }
        self.runtime.stop_now();
        Some(why)
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

    /// True while deployment `id` runs in this process, or is being claimed by it — or this
    /// engine stopped its runs after its lease lapsed and takes them back once it renews.
    pub fn runs(&self, id: &str) -> bool {
        self.runtime.runs(id) || self.runtime.is_fenced()
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
        self.lost_watch.abort();
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
        match tokio::time::timeout(Duration::from_secs(5), self.log_writer).await {
            Ok(Err(e)) => log_path_failed(format!("the log writer stopped: {e}")),
            Err(_) => log_path_failed(
                "the log writer did not finish storing lines within 5s of shutdown".into(),
            ),
            Ok(Ok(())) => {}
        }
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
