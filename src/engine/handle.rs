//! The engine as a console sees it: `Command`s in (never awaited), the latest `Snapshot` out (a
//! `watch`: a burst of changes costs one redraw), and every `LogLine` on a `broadcast` (a slow
//! reader counts what it dropped). Behind it runs either an engine in this process, or — when
//! another process holds the database — an attachment that reads the database and acts through
//! the workflows' mailboxes.

mod descriptors;
mod life;
mod publish;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{broadcast, mpsc, watch};

use self::publish::{apps_of, line_of};
use super::Engine;
use super::attach::Opened;
use super::request::{Asked, Request, Requests};
use crate::config::Config;
use crate::deploy::command::OperatorCommand;
use crate::deploy::plan::Plan;
use crate::deploy::records::{Db, JournalEntry};
use crate::deploy::releases::Transitions;
use crate::deploy::submit::Submitted;
use crate::deploy::view::DeploymentView;
use crate::operator::Operator;
use crate::plugin::{Level, LogLine};

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
    /// Run an environment's `test` hooks against what is live, or against the candidate of
    /// canary `candidate` (through its testers' route).
    Test {
        application: String,
        environment: String,
        reason: Option<String>,
        candidate: Option<String>,
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
    /// The console quits leaving these live canaries with no engine, on purpose: journaled
    /// by the console as it quits (its engine stops right after), not by the engine's task.
    LeaveUnwatched {
        ids: Vec<String>,
        reason: Option<String>,
    },
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
    /// The plugin, as said before a deploy (with `deploy.plugins`, the list it chooses from).
    pub plugin: String,
    /// Version the descriptor names.
    pub version: String,
    /// `all`, `rolling 2`.
    pub strategy: String,
    /// Targets.
    pub targets: usize,
    /// Whether its live releases were read: `live`, `live_by_target`, `rollback` and
    /// `versions` are empty until then (the first screen comes before them).
    #[serde(default)]
    pub live_read: bool,
    /// Versions live on its monikers now.
    pub live: Vec<String>,
    /// Target names by batch, as a deploy would run them.
    pub batches: Vec<Vec<String>>,
    /// The version live on each target, by target name.
    pub live_by_target: std::collections::BTreeMap<String, String>,
    /// Where a rollback would take its targets (empty: nothing to roll back to).
    pub rollback: Transitions,
    /// The targets a rollback would leave where they are (no earlier release), by name.
    #[serde(default)]
    pub rollback_stays: Vec<String>,
    /// Versions recorded in its history, newest first (the version picker offers them).
    pub versions: Vec<String>,
    /// Its `test` hooks, in the order they run.
    #[serde(default)]
    pub tests: Vec<String>,
    /// The deploy lock on it, if any.
    #[serde(default)]
    pub lock: Option<crate::deploy::records::Lock>,
    /// Its descriptor's file name (`web.yml`).
    #[serde(default)]
    pub file: String,
    /// Its descriptor file as read (changes when the file is read again after an edit).
    #[serde(default)]
    pub read: u64,
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
    /// The deployment it is about, when it is about one.
    pub about: Option<String>,
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
    /// What became of the engine this console attached to, when it went away or went silent
    /// (`the engine of pid 4242 went away: this console runs the engine now`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_note: Option<String>,
    /// Deployments this console submitted that no engine has claimed yet.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unclaimed: Vec<String>,
    /// Notifications set aside (a receiver refused them or they failed too often).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parked: Vec<crate::deploy::records::Parked>,
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
///
/// A configuration loaded without its descriptors ([`Config::load_settings`]) has them read on
/// a blocking thread while the engine opens its database: the engine needs none, and at
/// 100,000 targets the YAML costs as long as the database's check.
pub async fn open(config: Config, operator: Operator) -> Result<EngineHandle, super::EngineError> {
    // The files' marks are taken before they are read: a file edited meanwhile is read again.
    let descriptors = (!config.descriptors_read).then(|| {
        let mut full = config.clone();
        tokio::task::spawn_blocking(move || {
            let marks = descriptors::Marks::of(&full.apps_dir);
            full.load_descriptors();
            (full, marks)
        })
    });
    let mut attached_to = None;
    let (engine, store, mode): (Option<Engine>, Arc<dyn Db>, EngineMode) =
        match super::attach::open_or_attach(&config).await? {
            Opened::Here(e) => {
                let store = e.store().clone();
                (Some(*e), store, EngineMode::InProcess)
            }
            Opened::Attached { store, holder } => {
                if let crate::workflow::LeaseError::Held { pid, .. } = &holder {
                    attached_to = pid.parse().ok();
                }
                (
                    None,
                    store,
                    EngineMode::Attached {
                        holder: holder_of(&holder),
                    },
                )
            }
        };
    let (config, marks) = match descriptors {
        Some(read) => match read.await {
            Ok(read) => read,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        },
        None => {
            let marks = descriptors::Marks::of(&config.apps_dir);
            (config, marks)
        }
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
    let tail_logs = engine.is_none() || config.postgres.is_some();
    let stop = Arc::new(tokio::sync::Notify::new());
    let (history, _) = broadcast::channel(8);
    let (apps, plans) = apps_of(&config, &marks).into_iter().unzip();
    let problems = config.problems.iter().map(ToString::to_string).collect();
    let mut actor = Actor {
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
        plans,
        problems,
        finished: HashMap::new(),
        shown: std::collections::HashSet::new(),
        releases_read: None,
        tail_logs,
        events: None,
        attached_to,
        engine_note: None,
        submitted: Vec::new(),
        next_check: tokio::time::Instant::now(),
        marks,
    };
    // A descriptor that does not load leaves its application out of every list: said, not
    // silently missing.
    for p in actor.problems.clone() {
        actor.notice(
            Level::Warn,
            format!("descriptor left out: {p} (`manent validate` lists every problem)"),
        );
    }
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
    /// Each of `apps`' plans, in its order (None: its plan does not compute).
    plans: Vec<Option<Plan>>,
    problems: Vec<String>,
    /// Finished deployments never change: read once (a summary, or whole once shown).
    finished: HashMap<String, (DeploymentView, publish::Depth)>,
    /// Deployments the console has shown on their own screen: read whole (every target,
    /// attempt and hook); the others only as lists read them, so a console opens as fast with
    /// a deployment of 100,000 targets in its history as with one of ten.
    shown: std::collections::HashSet<String>,
    /// The deployments (id, last update) `apps`' live releases were read at: with none live
    /// and none changed, releases have not moved (each is recorded by a deployment), and a
    /// fleet's 100,000 releases are not read again every refresh.
    releases_read: Option<Vec<(String, i64)>>,
    /// Log lines arrive through the database (attached, on a shared database, or since this
    /// console took the engine over): one order, no line twice.
    tail_logs: bool,
    /// The in-process engine's workflow events.
    events: Option<broadcast::Receiver<crate::workflow::RuntimeEvent>>,
    /// Attached: the pid of the engine that holds the database (None: one that was starting).
    attached_to: Option<u32>,
    /// What became of the engine this console attached to.
    engine_note: Option<String>,
    /// Deployments this console submitted while attached, until an engine claims them: the id,
    /// until when (epoch ms) a claim is expected, and whether the console said it did not come.
    submitted: Vec<(String, i64, bool)>,
    /// When to look at the engine this console is attached to next.
    next_check: tokio::time::Instant,
    /// The descriptor files as they were when read.
    marks: descriptors::Marks,
}

/// When the actor publishes between its ticks.
#[derive(Default)]
struct Pace {
    /// When the last publish ended, and what it took.
    last: Option<(tokio::time::Instant, Duration)>,
    /// A publish asked for, and when it may run.
    due: Option<tokio::time::Instant>,
}

impl Pace {
    /// The least time between two publishes asked for by events.
    const GAP: Duration = Duration::from_millis(20);

    /// Asks for a publish as soon as the pace allows.
    fn soon(&mut self) {
        if self.due.is_none() {
            self.due = Some(Self::next(self.last, tokio::time::Instant::now()));
        }
    }

    /// When a publish asked for at `now` may run, after the `last` one (its end, its cost).
    fn next(
        last: Option<(tokio::time::Instant, Duration)>,
        now: tokio::time::Instant,
    ) -> tokio::time::Instant {
        last.map_or(now, |(end, took)| {
            (end + (took * 3).max(Self::GAP)).max(now)
        })
    }

    /// Resolves when a publish asked for may run (never when none is).
    async fn due(&self) {
        match self.due {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    }

    /// Runs `publish`, timed; what it returned.
    async fn publish(&mut self, publish: impl std::future::Future<Output = bool>) -> bool {
        let start = tokio::time::Instant::now();
        let more = publish.await;
        let end = tokio::time::Instant::now();
        self.last = Some((end, end - start));
        self.due = None;
        more
    }
}

impl Actor {
    async fn run(
        mut self,
        mut commands: mpsc::Receiver<Command>,
        stop: Arc<tokio::sync::Notify>,
    ) -> Option<Engine> {
        self.events = self.engine.as_ref().map(Engine::events);
        self.log_cursor = self.store.last_log_id().await.unwrap_or(0);
        self.history_until = self.log_cursor;
        let mut dirty = true;
        let mut last_version = -1i64;
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        // Every publish is paced: a command handled or an engine event publishes soon, not at
        // the next tick, after a gap of three times what the last publish took (at least
        // 20 ms), so a large fleet's reads take at most a quarter of a core.
        let mut pace = Pace::default();
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
                    Some(c) => { self.handle(c).await; dirty = true; pace.soon(); }
                    None => break,
                },
                ev = recv_event(&mut self.events) => {
                    if ev { dirty = true; pace.soon(); } else { self.events = None; }
                },
                () = pace.due(), if dirty => {
                    // The first screen goes out before the live releases: read them next.
                    dirty = pace.publish(self.publish()).await;
                    if dirty {
                        pace.soon();
                    }
                },
                _ = tick.tick() => {
                    // The engine this console attached to may go away: follow it (take the
                    // database over, or attach to whoever did), and watch what was handed to it.
                    if tokio::time::Instant::now() >= self.next_check {
                        self.next_check = tokio::time::Instant::now() + life::CHECK;
                        dirty |= self.follow_engine().await;
                        dirty |= self.watch_claims().await;
                        dirty |= self.reread_descriptors().await;
                    }
                    if self.tail_logs {
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
                        pace.soon();
                    }
                }
            }
        }
        self.engine
    }

    fn notice(&mut self, level: Level, text: String) {
        self.notice_about(level, None, text);
    }

    /// A notice about deployment `about`.
    fn notice_about(&mut self, level: Level, about: Option<&str>, text: String) {
        self.notices.push(Notice {
            id: self.next_notice,
            at: crate::sys::now_ms(),
            level,
            text,
            about: about.map(str::to_owned),
        });
        self.next_notice += 1;
        if self.notices.len() > 20 {
            self.notices.remove(0);
        }
    }

    async fn handle(&mut self, cmd: Command) {
        let about = match &cmd {
            Command::Operator { id, .. } => Some(id.clone()),
            _ => None,
        };
        // What an application's file says is read when it is used.
        if matches!(
            cmd,
            Command::Deploy { .. } | Command::Rollback { .. } | Command::Test { .. }
        ) {
            self.reread_descriptors().await;
        }
        let outcome = match cmd {
            Command::Deploy {
                application,
                environment,
                version,
                dry_run,
                reason,
                force,
            } => {
                let request = if dry_run {
                    Request::DryRun
                } else {
                    Request::Deploy
                };
                self.submit(
                    &application,
                    &environment,
                    version,
                    (request, force),
                    reason,
                )
                .await
            }
            Command::Rollback {
                application,
                environment,
                reason,
                force,
            } => {
                self.submit(
                    &application,
                    &environment,
                    None,
                    (Request::Rollback, force),
                    reason,
                )
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
                candidate,
            } => {
                self.test(&application, &environment, reason, candidate)
                    .await
            }
            Command::LoadLogs { id } => {
                self.shown.insert(id.clone());
                self.load_logs(id).await;
                Ok(String::new())
            }
            Command::Refresh | Command::LeaveUnwatched { .. } => Ok(String::new()),
        };
        match outcome {
            Ok(text) if text.is_empty() => {}
            Ok(text) => self.notice_about(Level::Info, about.as_deref(), text),
            Err(text) => self.notice_about(Level::Error, about.as_deref(), text),
        }
    }

    fn requests(&self) -> Requests<'_> {
        Requests::new(
            &self.config,
            self.store.as_ref(),
            &self.operator,
            self.engine.as_ref(),
        )
    }

    async fn operate(
        &mut self,
        id: &str,
        cmd: &OperatorCommand,
        reason: Option<&str>,
    ) -> Result<String, String> {
        let acted = self
            .requests()
            .operate(id, cmd, reason)
            .await
            .map_err(|e| e.to_string())?;
        Ok(acted.message)
    }

    async fn submit(
        &mut self,
        application: &str,
        environment: &str,
        version: Option<String>,
        (request, force): (Request<'_>, bool),
        reason: Option<String>,
    ) -> Result<String, String> {
        let mut spec = self
            .config
            .environment(application, environment)
            .map_err(|e| e.to_string())?;
        crate::deploy::artifact::with_version(&mut spec, version.as_deref(), None)?;
        let asked = Asked {
            reason: reason.as_deref(),
            force,
        };
        let submitted = self
            .requests()
            .start(&spec, request, asked)
            .await
            .map_err(|e| e.to_string())?;
        let id = submitted.id().to_owned();
        let already = self.running(&id).await;
        self.hand_over(&id).await?;
        let what = request.kind().as_str();
        Ok(match submitted {
            Submitted::Started(id) => {
                format!("{id}: {what} of {application} to {environment} started")
            }
            Submitted::Resuming(id) if already => format!(
                "{id}: this very {what} of {application} to {environment} is already in \
                 progress: nothing new was started (steer it, or cancel it first)"
            ),
            Submitted::Resuming(id) => {
                format!("{id}: the same {what} was interrupted; resuming it")
            }
            Submitted::Retrying(id) => {
                format!("{id}: the same {what} failed on targets; retrying them")
            }
        })
    }

    /// True when `id` runs now (here, or — attached — in the engine it was handed to).
    async fn running(&self, id: &str) -> bool {
        match &self.engine {
            Some(e) => e.runs(id),
            None => self
                .store
                .workflow(id)
                .await
                .ok()
                .flatten()
                .is_some_and(|r| r.status == crate::workflow::store::WorkflowStatus::Pending),
        }
    }

    /// Starts what this console submitted: here, or — attached — it is watched until the
    /// engine claims it ([`life::CLAIM_BOUND_MS`]).
    async fn hand_over(&mut self, id: &str) -> Result<(), String> {
        match &self.engine {
            Some(e) => {
                e.run(id).await.map_err(|e| e.to_string())?;
                let queued = self
                    .store
                    .workflow(id)
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|r| r.status == crate::workflow::store::WorkflowStatus::Enqueued);
                if queued && !e.runs(id) {
                    return Err(format!(
                        "{id} was recorded but this console's engine did not start it (it is \
                         stopping, or the deployment needs another manent version: see E); \
                         `manent resume {id}` starts it"
                    ));
                }
            }
            None => self.submitted.push((
                id.to_owned(),
                crate::sys::now_ms() + life::CLAIM_BOUND_MS,
                false,
            )),
        }
        Ok(())
    }

    async fn test(
        &mut self,
        application: &str,
        environment: &str,
        reason: Option<String>,
        candidate: Option<String>,
    ) -> Result<String, String> {
        let spec = self
            .config
            .environment(application, environment)
            .map_err(|e| e.to_string())?;
        let asked = Asked {
            reason: reason.as_deref(),
            force: false,
        };
        let request = Request::Test {
            candidate: candidate.as_deref(),
        };
        let submitted = self
            .requests()
            .start(&spec, request, asked)
            .await
            .map_err(|e| e.to_string())?;
        let id = submitted.id().to_owned();
        self.hand_over(&id).await?;
        let against = match &candidate {
            Some(c) => format!("the candidate of {c}"),
            None => "what is live".to_owned(),
        };
        Ok(format!(
            "{id}: the test hooks of {application} in {environment} started against {against}"
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_publish_asked_for_runs_at_once_then_after_three_times_the_last_ones_cost() {
        let now = tokio::time::Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(Pace::next(None, now), now, "the first runs at once");
        // One that took 50 ms and ended 10 ms ago: 150 ms after its end.
        assert_eq!(Pace::next(Some((now - ms(10), ms(50))), now), now + ms(140));
        // A cheap one: the floor of 20 ms.
        assert_eq!(Pace::next(Some((now, ms(1))), now), now + Pace::GAP);
        // Long since: at once.
        assert_eq!(Pace::next(Some((now - ms(500), ms(50))), now), now);
    }
}
