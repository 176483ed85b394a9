//! The engine as a console sees it: `Command`s in (never awaited), the latest `Snapshot` out (a
//! `watch`: a burst of changes costs one redraw), and every `LogLine` on a `broadcast` (a slow
//! reader counts what it dropped). Behind it runs either an engine in this process, or — when
//! another process holds the database — an attachment that reads the database and acts through
//! the workflows' mailboxes.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{broadcast, mpsc, watch};

use super::Engine;
use crate::config::Config;
use crate::deploy::command::{self, OperatorCommand};
use crate::deploy::records::{self, Db, JournalEntry, LogRecord};
use crate::deploy::releases::{self, Transitions};
use crate::deploy::submit::{self, Submission, Submitted};
use crate::deploy::view::{self, DeploymentView};
use crate::operator::Operator;
use crate::plugin::{Level, LogLine};
use crate::workflow::store::WorkflowQuery;

/// What an operator asks the engine to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Deploy (or dry-run) an application to an environment.
    Deploy {
        application: String,
        environment: String,
        version: Option<String>,
        dry_run: bool,
        reason: Option<String>,
        /// Through a deploy lock (a break-glass).
        force: bool,
    },
    /// Roll an environment back to its previous release.
    Rollback {
        application: String,
        environment: String,
        reason: Option<String>,
        /// Through a deploy lock (a break-glass).
        force: bool,
    },
    /// Run an environment's `test` hooks against what is live.
    Test {
        application: String,
        environment: String,
        reason: Option<String>,
    },
    /// An operator command on a deployment (pause, resume, cancel, retry, skip, abort).
    Operator {
        id: String,
        command: OperatorCommand,
        reason: Option<String>,
    },
    /// Send the log lines a deployment wrote before this console opened (on `history`).
    LoadLogs { id: String },
    /// Read the database again now.
    Refresh,
}

/// At most this many earlier lines of a deployment are sent (the newest ones).
const HISTORY_LINES: usize = 5_000;

/// A deployment's earlier log lines, oldest first.
pub type LogHistory = (String, Arc<Vec<LogLine>>);

/// Where the engine runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum EngineMode {
    /// In this process: this console started it.
    InProcess,
    /// In another process (another console or a worker); this console is attached to it.
    Attached { holder: String },
}

/// An application's environment, for the console's list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AppEnv {
    /// Application.
    pub application: String,
    /// Environment.
    pub environment: String,
    /// Production environment.
    pub production: bool,
    /// Plugin.
    pub plugin: String,
    /// Version the descriptor names.
    pub version: String,
    /// `all`, `rolling 2`.
    pub strategy: String,
    /// Targets.
    pub targets: usize,
    /// Versions live on its monikers now.
    pub live: Vec<String>,
    /// Target names by batch, as a deploy would run them.
    pub batches: Vec<Vec<String>>,
    /// The version live on each target, by target name.
    pub live_by_target: std::collections::BTreeMap<String, String>,
    /// Where a rollback would take its targets (empty: nothing to roll back to).
    pub rollback: Transitions,
    /// Versions recorded in its history, newest first (the version picker offers them).
    pub versions: Vec<String>,
    /// Its `test` hooks, in the order they run.
    #[serde(default)]
    pub tests: Vec<String>,
    /// The deploy lock on it, if any.
    #[serde(default)]
    pub lock: Option<crate::deploy::records::Lock>,
}

/// A line for the operator about something they did (or that went wrong doing it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notice {
    /// Increasing.
    pub id: u64,
    /// Epoch ms.
    pub at: i64,
    /// Severity.
    pub level: Level,
    /// The text.
    pub text: String,
}

/// Everything the console renders from.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Snapshot {
    /// Increases with every new snapshot.
    pub seq: u64,
    /// Where the engine runs (None before the first read).
    pub mode: Option<EngineMode>,
    /// The database.
    pub database: PathBuf,
    /// Who is at this console.
    pub operator: String,
    /// Applications and environments.
    pub apps: Vec<AppEnv>,
    /// Live deployments first, then the most recent.
    pub deployments: Vec<DeploymentView>,
    /// Recent operator actions, newest first.
    pub journal: Vec<JournalEntry>,
    /// Recent notices, newest last.
    pub notices: Vec<Notice>,
    /// Problems in the configuration (descriptors that do not load).
    pub problems: Vec<String>,
    /// What the database refuses now, while deployments wait for it (disk full, I/O errors).
    pub store_trouble: Option<String>,
    /// On a database several engines share: which engine runs each live deployment.
    pub owners: std::collections::BTreeMap<String, Owner>,
    /// On a database several engines share: this console's engine id and how many engines
    /// (this one included) are alive.
    pub shared: Option<(String, usize)>,
}

/// The engine that runs a deployment, on a database several engines share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Owner {
    /// Its `engine.executor_id`.
    pub engine: String,
    /// `pid 4242 on bastion-1`, and whether it is silent.
    pub detail: String,
    /// Its lease expired: another engine takes the deployment over.
    pub silent: bool,
}

/// The console's end of the engine.
#[derive(Debug)]
pub struct EngineHandle {
    /// Commands in.
    pub commands: mpsc::Sender<Command>,
    /// The latest snapshot.
    pub snapshot: watch::Receiver<Arc<Snapshot>>,
    /// Log lines.
    pub logs: broadcast::Sender<Arc<LogLine>>,
    /// Log lines written before the console opened, when it asks for them.
    pub history: broadcast::Sender<LogHistory>,
    task: tokio::task::JoinHandle<Option<Engine>>,
    stop: Arc<tokio::sync::Notify>,
}

impl EngineHandle {
    /// Stops the actor; returns the in-process engine (to shut down or keep running headless).
    pub async fn close(self) -> Option<Engine> {
        self.stop.notify_one();
        self.task.await.ok().flatten()
    }
}

/// Opens the engine for a console: in this process if the database is free, else attached to
/// the process that holds it.
pub async fn open(config: Config, operator: Operator) -> Result<EngineHandle, super::EngineError> {
    let (engine, store, mode): (Option<Engine>, Arc<dyn Db>, EngineMode) =
        match Engine::start(&config).await {
            Ok(e) => {
                let store = e.store().clone();
                (Some(e), store, EngineMode::InProcess)
            }
            Err(super::EngineError::Lease(
                l @ (crate::workflow::LeaseError::Held { .. }
                | crate::workflow::LeaseError::Starting { .. }),
            )) => {
                let store: Arc<dyn Db> = records::open_configured(&config, false).await?;
                (
                    None,
                    store,
                    EngineMode::Attached {
                        holder: holder_of(&l),
                    },
                )
            }
            Err(e) => return Err(e),
        };
    let (commands, rx) = mpsc::channel(64);
    let (snap_tx, snapshot) = watch::channel(Arc::new(Snapshot::default()));
    // In-process, the console reads the engine's own channel (so it learns how many lines it
    // missed if it falls behind); attached, lines tailed from the database.
    // On a shared database every engine's lines, this one's included, arrive through the
    // database: one order, no line twice.
    let logs = match &engine {
        Some(e) if config.postgres.is_none() => e.log_channel(),
        _ => broadcast::channel(65_536).0,
    };
    let stop = Arc::new(tokio::sync::Notify::new());
    let (history, _) = broadcast::channel(8);
    let apps = apps_of(&config);
    let problems = config.problems.iter().map(ToString::to_string).collect();
    let actor = Actor {
        config,
        operator,
        store,
        engine,
        mode,
        notices: Vec::new(),
        next_notice: 1,
        seq: 0,
        snap: snap_tx,
        logs: logs.clone(),
        log_cursor: 0,
        history_until: 0,
        history: history.clone(),
        apps,
        problems,
        finished: HashMap::new(),
    };
    let task = tokio::spawn(actor.run(rx, stop.clone()));
    Ok(EngineHandle {
        commands,
        snapshot,
        logs,
        history,
        task,
        stop,
    })
}

fn holder_of(e: &crate::workflow::LeaseError) -> String {
    match e {
        crate::workflow::LeaseError::Held { pid, host, .. } => format!("pid {pid} on {host}"),
        crate::workflow::LeaseError::Starting { .. } => "an engine that is starting".into(),
        other => other.to_string(),
    }
}

struct Actor {
    config: Config,
    operator: Operator,
    store: Arc<dyn Db>,
    engine: Option<Engine>,
    mode: EngineMode,
    notices: Vec<Notice>,
    next_notice: u64,
    seq: u64,
    snap: watch::Sender<Arc<Snapshot>>,
    logs: broadcast::Sender<Arc<LogLine>>,
    /// The newest stored log line when this console opened: later ones reach it live.
    log_cursor: i64,
    /// Lines up to here are history; later ones arrived live.
    history_until: i64,
    history: broadcast::Sender<LogHistory>,
    /// What the configuration says of each application and environment (it never changes
    /// while the console runs); `publish` adds the live releases.
    apps: Vec<AppEnv>,
    problems: Vec<String>,
    /// Finished deployments never change: read once.
    finished: HashMap<String, DeploymentView>,
}

impl Actor {
    async fn run(
        mut self,
        mut commands: mpsc::Receiver<Command>,
        stop: Arc<tokio::sync::Notify>,
    ) -> Option<Engine> {
        let mut events = self.engine.as_ref().map(Engine::events);
        self.log_cursor = self.store.last_log_id().await.unwrap_or(0);
        self.history_until = self.log_cursor;
        let mut dirty = true;
        let mut last_version = -1i64;
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        // On PostgreSQL another engine's commit wakes the console (LISTEN/NOTIFY) at once,
        // at most every 100 ms.
        let store = self.store.clone();
        let mut last_wake = tokio::time::Instant::now();
        loop {
            let changed = async {
                match store.changes() {
                    Some(n) => n.notified().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = stop.notified() => break,
                () = changed => {
                    if last_wake.elapsed() >= Duration::from_millis(100) {
                        last_wake = tokio::time::Instant::now();
                        tick.reset_immediately();
                    }
                },
                cmd = commands.recv() => match cmd {
                    Some(c) => { self.handle(c).await; dirty = true; }
                    None => break,
                },
                ev = recv_event(&mut events) => { if ev { dirty = true; } else { events = None; } },
                _ = tick.tick() => {
                    if self.engine.is_none() || self.config.postgres.is_some() {
                        self.poll_logs().await;
                        let v = self.store.data_version().await.unwrap_or(0);
                        if v != last_version {
                            last_version = v;
                            dirty = true;
                        }
                    }
                    // Other engines' steps notify nobody: on a shared database a tick reads
                    // while something is live (or the database was out of reach), and an
                    // unchanged snapshot is not redrawn.
                    if self.config.postgres.is_some() {
                        let snap = self.snap.borrow();
                        dirty |= snap.store_trouble.is_some()
                            || snap.deployments.iter().any(|d| d.status.is_live());
                    }
                    if dirty {
                        self.publish().await;
                        dirty = false;
                    }
                }
            }
        }
        self.engine
    }

    fn notice(&mut self, level: Level, text: String) {
        self.notices.push(Notice {
            id: self.next_notice,
            at: crate::sys::now_ms(),
            level,
            text,
        });
        self.next_notice += 1;
        if self.notices.len() > 20 {
            self.notices.remove(0);
        }
    }

    async fn handle(&mut self, cmd: Command) {
        let outcome = match cmd {
            Command::Deploy {
                application,
                environment,
                version,
                dry_run,
                reason,
                force,
            } => {
                let how = (Some(dry_run), force);
                self.submit(&application, &environment, version, how, reason)
                    .await
            }
            Command::Rollback {
                application,
                environment,
                reason,
                force,
            } => {
                self.submit(&application, &environment, None, (None, force), reason)
                    .await
            }
            Command::Operator {
                id,
                command,
                reason,
            } => self.operate(&id, &command, reason.as_deref()).await,
            Command::Test {
                application,
                environment,
                reason,
            } => self.test(&application, &environment, reason).await,
            Command::LoadLogs { id } => {
                self.load_logs(id).await;
                Ok(String::new())
            }
            Command::Refresh => Ok(String::new()),
        };
        match outcome {
            Ok(text) if text.is_empty() => {}
            Ok(text) => self.notice(Level::Info, text),
            Err(text) => self.notice(Level::Error, text),
        }
    }

    async fn operate(
        &mut self,
        id: &str,
        cmd: &OperatorCommand,
        reason: Option<&str>,
    ) -> Result<String, String> {
        let acted = command::send(self.store.as_ref(), &self.operator, id, cmd, reason)
            .await
            .map_err(|e| e.to_string())?;
        self.wake(id);
        if acted.requeued
            && let Some(e) = &self.engine
        {
            e.run(id).await.map_err(|e| e.to_string())?;
        }
        Ok(acted.message)
    }

    fn wake(&self, id: &str) {
        if let Some(e) = &self.engine {
            e.wake(id);
        }
    }

    async fn submit(
        &mut self,
        application: &str,
        environment: &str,
        version: Option<String>,
        (deploy, force): (Option<bool>, bool),
        reason: Option<String>,
    ) -> Result<String, String> {
        let mut spec = self
            .config
            .environment(application, environment)
            .map_err(|e| e.to_string())?;
        if let Some(v) = version {
            spec.artifact.version = v;
        }
        let mut sub = Submission::new(&self.operator, reason.as_deref(), &self.config.engine);
        sub.force = force;
        let submitted = match deploy {
            Some(dry_run) => submit::deploy(self.store.as_ref(), &spec, dry_run, &sub).await,
            None => submit::rollback(self.store.as_ref(), &spec, &sub).await,
        }
        .map_err(|e| e.to_string())?;
        if let Some(e) = &self.engine {
            e.run(submitted.id()).await.map_err(|e| e.to_string())?;
        }
        let what = match deploy {
            Some(true) => "dry-run",
            Some(false) => "deploy",
            None => "rollback",
        };
        Ok(match submitted {
            Submitted::Started(id) => {
                format!("{id}: {what} of {application} to {environment} started")
            }
            Submitted::Resuming(id) => {
                format!("{id}: the same {what} was interrupted; resuming it")
            }
            Submitted::Retrying(id) => {
                format!("{id}: the same {what} failed on targets; retrying them")
            }
        })
    }

    async fn test(
        &mut self,
        application: &str,
        environment: &str,
        reason: Option<String>,
    ) -> Result<String, String> {
        let spec = self
            .config
            .environment(application, environment)
            .map_err(|e| e.to_string())?;
        let sub = Submission::new(&self.operator, reason.as_deref(), &self.config.engine);
        let submitted = submit::test(self.store.as_ref(), &spec, &sub)
            .await
            .map_err(|e| e.to_string())?;
        if let Some(e) = &self.engine {
            e.run(submitted.id()).await.map_err(|e| e.to_string())?;
        }
        Ok(format!(
            "{}: the test hooks of {application} in {environment} started",
            submitted.id()
        ))
    }

    /// The lines `id` stored up to when this console opened (the last ones the pane holds).
    async fn load_logs(&mut self, id: String) {
        let mut lines: Vec<LogLine> = Vec::new();
        let mut after = 0;
        while let Ok(batch) = self.store.logs(&id, after, None, 5000).await {
            let n = batch.len();
            for l in batch {
                after = l.id;
                if l.id <= self.history_until {
                    lines.push(line_of(l));
                }
            }
            if n < 5000 || after > self.history_until {
                break;
            }
        }
        if lines.len() > HISTORY_LINES {
            lines.drain(..lines.len() - HISTORY_LINES);
        }
        let _ = self.history.send((id, Arc::new(lines)));
    }

    /// On a shared database (one read of the engines): who runs each live deployment, and
    /// this console's engine id with how many engines are alive. Nothing on SQLite, where one
    /// engine runs them all.
    async fn shared_view(
        &self,
        rows: &[(String, String)],
    ) -> (
        std::collections::BTreeMap<String, Owner>,
        Option<(String, usize)>,
    ) {
        let mut owners = std::collections::BTreeMap::new();
        if self.config.postgres.is_none() {
            return (owners, None);
        }
        let engines = self.store.engines().await.unwrap_or_default();
        let lease = self.config.engine.lease_ms();
        for (id, executor) in rows {
            let found = engines.iter().find(|e| &e.executor_id == executor);
            let silent = found.is_none_or(|e| !e.alive(lease));
            let detail = match found {
                Some(e) if !silent => format!("pid {} on {}", e.pid, e.host),
                Some(e) => format!(
                    "pid {} on {}, silent for {}s: another engine takes it over",
                    e.pid,
                    e.host,
                    e.age_ms / 1000
                ),
                None => "not registered".to_owned(),
            };
            owners.insert(
                id.clone(),
                Owner {
                    engine: executor.clone(),
                    detail,
                    silent,
                },
            );
        }
        let alive = engines.iter().filter(|e| e.alive(lease)).count();
        (
            owners,
            Some((self.config.engine.executor_id.clone(), alive)),
        )
    }

    /// Attached (or on a shared database): log lines arrive through the database.
    async fn poll_logs(&mut self) {
        let Ok(lines) = self.store.recent_logs(self.log_cursor, 5000).await else {
            return;
        };
        for l in lines {
            self.log_cursor = l.id;
            let _ = self.logs.send(Arc::new(line_of(l)));
        }
    }

    async fn publish(&mut self) {
        let rows = match self
            .store
            .workflows(WorkflowQuery {
                subject: None,
                live_only: false,
                limit: 30,
            })
            .await
        {
            Ok(rows) => rows,
            Err(e) => {
                // Not "no deployments": what it said last stays on screen, with why it is old.
                let trouble = Some(format!(
                    "the database cannot be read: {} — showing what it said last, retrying ({})",
                    e.cause(),
                    self.store.describe()
                ));
                let mut snap = (**self.snap.borrow()).clone();
                if snap.store_trouble != trouble {
                    snap.store_trouble = trouble;
                    self.seq += 1;
                    snap.seq = self.seq;
                    self.snap.send_replace(Arc::new(snap));
                }
                return;
            }
        };
        self.finished
            .retain(|id, _| rows.iter().any(|r| &r.id == id));
        let rows_owners: Vec<(String, String)> = rows
            .iter()
            .filter(|r| r.status == crate::workflow::store::WorkflowStatus::Pending)
            .filter_map(|r| Some((r.id.clone(), r.executor_id.clone()?)))
            .collect();
        let (owners, shared) = self.shared_view(&rows_owners).await;
        let mut deployments = Vec::with_capacity(rows.len());
        for r in rows {
            if let Some(v) = self.finished.get(&r.id) {
                deployments.push(v.clone());
                continue;
            }
            let terminal = r.status.is_terminal();
            if let Ok(v) = view::of_row(self.store.as_ref(), r).await {
                if terminal {
                    self.finished.insert(v.id.clone(), v.clone());
                }
                deployments.push(v);
            }
        }
        // Live ones first: they are what an operator acts on.
        deployments.sort_by_key(|d| (!d.status.is_live(), std::cmp::Reverse(d.created_at)));
        let journal = self
            .store
            .journal_entries(None, None, 50)
            .await
            .unwrap_or_default();
        let mut apps = self.apps.clone();
        // Read at every refresh, so an expired lock stops showing by itself.
        let locks = self
            .store
            .locks(crate::sys::now_ms())
            .await
            .unwrap_or_default();
        for a in &mut apps {
            let subject = format!("{}/{}", a.application, a.environment);
            a.lock = locks.iter().find(|l| l.subject == subject).cloned();
            let rows = self.store.releases(&subject).await.unwrap_or_default();
            let mut versions: Vec<String> = Vec::new();
            for r in rows.iter().rev() {
                if !versions.contains(&r.version) {
                    versions.push(r.version.clone());
                }
            }
            a.versions = versions;
            let live = releases::live(rows);
            a.live_by_target = live
                .iter()
                .filter_map(|(m, l)| {
                    let name = m.rsplit("::").next().unwrap_or(m).to_owned();
                    l.current.as_ref().map(|c| (name, c.version.clone()))
                })
                .collect();
            a.live = a.live_by_target.values().cloned().collect();
            a.live.sort();
            a.live.dedup();
            a.rollback = self
                .config
                .environment(&a.application, &a.environment)
                .ok()
                .and_then(|spec| crate::deploy::plan::compute(&spec).ok())
                .map(|plan| Transitions::of(&releases::moves(&plan, &live)))
                .unwrap_or_default();
        }
        let mut snap = Snapshot {
            seq: self.seq,
            mode: Some(self.mode.clone()),
            database: self.config.database.clone(),
            operator: self.operator.display(),
            apps,
            deployments,
            journal,
            notices: self.notices.clone(),
            problems: self.problems.clone(),
            store_trouble: self.engine.as_ref().and_then(Engine::store_trouble),
            owners,
            shared,
        };
        // Nothing new: no snapshot, so the console does not redraw.
        if **self.snap.borrow() == snap {
            return;
        }
        self.seq += 1;
        snap.seq = self.seq;
        self.snap.send_replace(Arc::new(snap));
    }
}

/// Each application and environment as the configuration describes it (no live releases yet).
fn apps_of(config: &Config) -> Vec<AppEnv> {
    let mut out = Vec::new();
    for d in &config.descriptors {
        for env in d.spec.environments.keys() {
            let Ok(spec) = config.environment(&d.spec.application, env) else {
                continue;
            };
            let batches = crate::deploy::plan::compute(&spec)
                .map(|p| {
                    p.batches
                        .iter()
                        .map(|b| b.targets.iter().map(|t| t.name.clone()).collect())
                        .collect()
                })
                .unwrap_or_default();
            out.push(AppEnv {
                application: spec.application.clone(),
                environment: spec.environment.clone(),
                production: spec.production,
                plugin: spec.plugin.clone(),
                version: spec.artifact.version.clone(),
                strategy: spec.strategy.short(),
                targets: spec.targets.len(),
                live: Vec::new(),
                batches,
                live_by_target: std::collections::BTreeMap::new(),
                rollback: Transitions::default(),
                versions: Vec::new(),
                tests: crate::config::hooks::ordered(&spec.hooks, crate::config::Event::Test)
                    .iter()
                    .map(|h| h.name.clone())
                    .collect(),
                lock: None,
            });
        }
    }
    out
}

/// A stored log line as a live one.
fn line_of(l: LogRecord) -> LogLine {
    LogLine {
        at: l.at,
        level: Level::parse(&l.level).unwrap_or(Level::Info),
        source: l.source,
        deployment_id: l.workflow_id,
        target: l.target,
        moniker: None,
        message: l.message,
        attrs: l
            .attrs
            .and_then(|a| serde_json::from_str(&a).ok())
            .unwrap_or_default(),
    }
}

async fn recv_event(rx: &mut Option<broadcast::Receiver<crate::workflow::RuntimeEvent>>) -> bool {
    match rx {
        Some(r) => match r.recv().await {
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => true,
            Err(broadcast::error::RecvError::Closed) => false,
        },
        None => std::future::pending().await,
    }
}
