//! The engine: holds the database lease, recovers interrupted deployments at start, runs
//! workflows, carries every log line to subscribers and to the database, and drains on
//! shutdown. The headless commands and the console drive it; it knows nothing of either.

pub mod attach;
pub mod handle;
pub mod judge;
mod log_hub;
pub mod notify;
mod observe;
pub mod request;
mod watch;
pub mod watchdog;

use self::log_hub::LogHub;
use self::log_hub::log_path_failed;
pub use self::log_hub::log_path_failure;
use self::watch::{spawn_heartbeat, spawn_lost_watch, spawn_pruner, spawn_trouble_watch};
/// What the engine's runtime says as it runs ([`Engine::events`]).
pub use crate::workflow::RuntimeEvent;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

use crate::config::Config;
use crate::deploy::records::{self, Db};
use crate::deploy::{self, DeployEnv};
use crate::plugin::{LogLine, Logger, Processes, Registry};
use crate::workflow::retry::until_committed_each;
use crate::workflow::store::Store;
use crate::workflow::{Lease, LeaseError, Runtime, StoreError};

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
    /// On a shared database: the process that kills its steps once its renewals stop.
    watchdog: Option<Arc<watchdog::Watchdog>>,
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
            Some(addr) => Some(
                crate::telemetry::metrics::serve(
                    addr,
                    Arc::new(observe::StoreCounts(store.clone())),
                )
                .await?,
            ),
            None => None,
        };
        record_lease(store.as_ref(), &config.engine.executor_id).await?;
        // What a dead engine left running (its commands, its plugins) dies before anything
        // runs again: no step may run beside its own earlier attempt.
        let processes = Processes::beside(&config.database, &trust)?;
        let said = reap(&processes).await?;
        preload_secrets(config).await;
        let (logs, log_writer) = LogHub::new(store.clone(), config.engine.log_cap);
        // Said on the terminal too: whoever starts the engine learns what it killed or spared.
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
            own_config: config
                .engine
                .shared_group
                .is_some()
                .then(|| config.file.clone()),
        });
        let kernel: Arc<dyn Store> = store.clone();
        let runtime = Runtime::new(
            kernel,
            config.engine.executor_id.clone(),
            deploy::definitions(env),
        );
        observe::spawn_events(runtime.subscribe(), log_file.is_some());
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
        // Its steps stop when its lease does, even if the engine itself cannot stop them (frozen,
        // swapped out): a watchdog process kills them once the renewals stop.
        let watchdog = match (config.postgres.is_some(), processes.dir()) {
            (true, Some(records)) => match watchdog::Watchdog::spawn(
                records,
                config.engine.shared_group.as_deref(),
                config.engine.lease,
            ) {
                Ok(w) => Some(Arc::new(w)),
                Err(e) => {
                    tracing::warn!(error = %e, "could not start the engine's watchdog: a frozen engine's steps would run on until it thaws");
                    None
                }
            },
            _ => None,
        };
        let heartbeat = config.postgres.is_some().then(|| {
            spawn_heartbeat(
                runtime.clone(),
                store.clone(),
                (processes.clone(), watchdog.clone()),
                Logger::new(logs.clone(), "engine"),
                &config.engine.executor_id,
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
            watchdog,
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

    /// The plugins this engine runs (started at first use).
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
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
        self.logs.channel()
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

    /// Live canaries running in this process: judged and watched while they wait, so never
    /// left without an engine.
    pub fn judged(&self) -> Vec<String> {
        self.runtime.judged()
    }

    /// Deployments running in this process.
    pub fn active(&self) -> Vec<String> {
        self.runtime.active()
    }

    /// True while deployment `id` runs in this process, or is being claimed by it — or this
    /// engine's lease lapsed (its runs wait for the renewal, or another engine's takeover).
    pub fn runs(&self, id: &str) -> bool {
        self.runtime.runs(id) || self.runtime.is_fenced()
    }

    /// Stops as SIGTERM asks (no step, retry or plugin start begins; steps in flight get the
    /// configured drain), flushes the logs, truncates the WAL and releases the lease. Returns
    /// how many runs had to be abandoned.
    pub async fn shutdown(self) -> usize {
        let (drain, hard) = (
            self.config.engine.drain_timeout,
            self.config.engine.hard_timeout,
        );
        self.shutdown_within(drain, hard).await
    }

    /// Shutdown as SIGTERM asks: no step, retry or plugin start begins; the steps in flight get
    /// at most `drain` to finish, then `hard` more; each deployment resumes at the next start.
    pub async fn shutdown_within(self, drain: Duration, hard: Duration) -> usize {
        self.close(drain, hard, true).await
    }

    /// Shutdown that lets deployments go on for at most `drain` until each finishes or waits for
    /// an operator (a console whose terminal went away; a command whose own deployment settled),
    /// then stops them at their next step boundary, waiting at most `hard`.
    pub async fn finish_within(self, drain: Duration, hard: Duration) -> usize {
        self.close(drain, hard, false).await
    }

    /// [`Engine::finish_within`] with the configured limits.
    pub async fn finish(self) -> usize {
        let (drain, hard) = (
            self.config.engine.drain_timeout,
            self.config.engine.hard_timeout,
        );
        self.finish_within(drain, hard).await
    }

    async fn close(mut self, drain: Duration, hard: Duration, stop: bool) -> usize {
        if stop {
            // No new attempt and no plugin start from now on: steps in flight finish (within
            // the drain), the rest resumes at the next start.
            self.registry.stop_starting();
        }
        let left = self.runtime.drain(drain, hard, stop).await;
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
        // What the drain changed is notified (what a receiver does not take at once waits in
        // the outbox for the next engine).
        if let Some(n) = self.notifier {
            for (receiver, n) in n.finish().await {
                tracing::warn!(
                    "{n} notification(s) for {receiver} wait in the outbox (it did not answer \
                     at once); the next engine to start sends them"
                );
            }
        }
        // Plugins stop only after the deployments using them have drained.
        self.registry.shutdown().await;
        if let Some(w) = self.watchdog.take() {
            w.stop();
        }
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

/// Records this engine's lease (executor, pid, host). A database that refuses writes now (a
/// full disk) is said at once, after a few seconds of retries for a passing lock: nothing runs
/// yet, so nothing waits on it.
async fn record_lease(store: &dyn Db, executor: &str) -> Result<(), EngineError> {
    let (pid, host) = (std::process::id(), crate::sys::hostname());
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
        Ok(r) => Ok(r?),
        Err(_) => Err(EngineError::Unwritable {
            path: store.describe(),
            cause: refused
                .lock()
                .ok()
                .and_then(|r| r.as_ref().map(StoreError::cause))
                .unwrap_or_default(),
        }),
    }
}

/// Kills what a dead engine left running; what to tell whoever starts the engine (what it
/// killed, and what it spared because it was not its own).
async fn reap(processes: &Processes) -> Result<Vec<String>, EngineError> {
    let reaped = tokio::task::spawn_blocking({
        let p = processes.clone();
        move || p.reap()
    })
    .await
    .unwrap_or_else(|_| Ok(Default::default()))?;
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
    Ok(said)
}

/// Every declared secret is known to redaction before anything runs, whatever a call later
/// reads: a command that prints a `file:` secret, or the variable exec passes through, shows
/// `[redacted]` in every sink (the log, the database, webhooks).
async fn preload_secrets(config: &Config) {
    let secrets = crate::plugin::secrets::ConfigSecrets::new(config.secrets.clone());
    let (warnings, notes) = secrets.preload().await;
    for w in warnings {
        tracing::warn!("{w}");
    }
    for n in notes {
        tracing::info!("{n}; a deployment that reads it fails until it can be read");
    }
}
