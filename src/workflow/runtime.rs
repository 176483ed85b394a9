//! Runs workflows: claims ENQUEUED rows with a compare-and-set, recovers at start (design/durable-workflows.md B.5), keeps at
//! most one live run per id (design/durable-workflows.md E6), notices other processes' writes by polling `data_version`
//! (design/durable-workflows.md B.7), and drains on shutdown (design/durable-workflows.md B.11).

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::{Notify, broadcast, watch};

use super::ctx::{Observer, RunControl, Shutdown, StepEvent, WfCtx};
use super::error::{Interrupt, StoreError};
use super::retry::until_committed_or_stopped;
use super::store::{
    Claim, Finished, NewWorkflow, Outcome, Started, Store, WorkflowRow, WorkflowStatus,
};
use crate::failpoint;
use crate::redact::redact;

/// How a workflow's code ended.
#[derive(Debug, Clone)]
pub enum RunOutcome {
    /// It reached its end: SUCCESS with this output.
    Success(serde_json::Value),
    /// It failed: ERROR with this error document.
    Failure(serde_json::Value),
}

/// A workflow function: inputs (JSON) in, outcome out.
pub type WorkflowFn =
    Arc<dyn Fn(WfCtx, String) -> BoxFuture<'static, Result<RunOutcome, Interrupt>> + Send + Sync>;

/// A registered workflow kind.
#[derive(Clone)]
pub struct WorkflowDef {
    /// Kind, stored in `workflow_status.name`.
    pub name: String,
    /// Newest definition version this binary runs (design/durable-workflows.md B.8).
    pub version: u32,
    /// The code.
    pub run: WorkflowFn,
}

/// What the runtime reports to observers.
#[derive(Debug, Clone)]
pub enum RuntimeEvent {
    /// A step event of a workflow.
    Step {
        workflow_id: String,
        event: StepEvent,
    },
    /// A run claimed the workflow and started (or resumed) it.
    Claimed {
        workflow_id: String,
        name: String,
        recovery_attempt: u32,
    },
    /// The run ended; `status` is what it recorded (None: left PENDING or CANCELLED stays).
    Ended {
        workflow_id: String,
        status: Option<WorkflowStatus>,
        reason: String,
    },
    /// Too many runs of the workflow crashed; it waits for an operator's resume.
    DeadLettered { workflow_id: String },
}

impl RuntimeEvent {
    /// The workflow it is about.
    pub fn workflow_id(&self) -> &str {
        match self {
            RuntimeEvent::Step { workflow_id, .. }
            | RuntimeEvent::Claimed { workflow_id, .. }
            | RuntimeEvent::Ended { workflow_id, .. }
            | RuntimeEvent::DeadLettered { workflow_id } => workflow_id,
        }
    }
}

struct Broadcast(broadcast::Sender<RuntimeEvent>);

impl Observer for Broadcast {
    fn step(&self, workflow_id: &str, event: StepEvent) {
        let _ = self.0.send(RuntimeEvent::Step {
            workflow_id: workflow_id.to_owned(),
            event,
        });
    }
}

/// The workflow runtime of one engine.
pub struct Runtime {
    store: Arc<dyn Store>,
    executor_id: String,
    defs: HashMap<String, WorkflowDef>,
    active: Mutex<HashMap<String, Arc<RunControl>>>,
    /// Workflows this runtime is claiming now (a claim whose commit is being retried is not
    /// yet a run, but no other claim here may start beside it).
    claiming: Mutex<std::collections::HashSet<String>>,
    shutdown: watch::Sender<Shutdown>,
    changed: Arc<Notify>,
    events: broadcast::Sender<RuntimeEvent>,
    observer: Arc<dyn Observer>,
    accepting: AtomicBool,
    reclaim: Mutex<Vec<String>>,
    /// Each run's task, to cut it off when another engine took its workflow over.
    tasks: Mutex<HashMap<String, tokio::task::AbortHandle>>,
    /// Its lease lapsed and is not renewed yet: no run starts a step attempt.
    fenced: watch::Sender<bool>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("executor_id", &self.executor_id)
            .finish()
    }
}

impl Runtime {
    /// A runtime that runs `defs` on `store`.
    pub fn new(store: Arc<dyn Store>, executor_id: String, defs: Vec<WorkflowDef>) -> Arc<Self> {
        let (events, _) = broadcast::channel(8192);
        let (shutdown, _) = watch::channel(Shutdown::Running);
        Arc::new(Runtime {
            store,
            executor_id,
            defs: defs.into_iter().map(|d| (d.name.clone(), d)).collect(),
            active: Mutex::new(HashMap::new()),
            claiming: Mutex::new(std::collections::HashSet::new()),
            shutdown,
            changed: Arc::new(Notify::new()),
            observer: Arc::new(Broadcast(events.clone())),
            events,
            accepting: AtomicBool::new(true),
            reclaim: Mutex::new(Vec::new()),
            tasks: Mutex::new(HashMap::new()),
            fenced: watch::channel(false).0,
        })
    }

    /// Events of every run from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<RuntimeEvent> {
        self.events.subscribe()
    }

    /// Runs that keep an engine busy: those that go on by themselves (not waiting for an
    /// operator; a run in a durable sleep is busy: its timer ends the wait), and those with
    /// work while they wait (a live canary, judged and watched).
    pub fn busy(&self) -> usize {
        self.active
            .lock()
            .map(|a| {
                a.values()
                    .filter(|c| {
                        c.awaiting_operator.load(Ordering::SeqCst) == 0
                            || c.judging.load(Ordering::SeqCst)
                    })
                    .count()
            })
            .unwrap_or(0)
    }

    /// Ids of the runs with work while they wait (live canaries: [`WfCtx::set_judging`]).
    pub fn judged(&self) -> Vec<String> {
        self.active
            .lock()
            .map(|a| {
                a.iter()
                    .filter(|(_, c)| c.judging.load(Ordering::SeqCst))
                    .map(|(id, _)| id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The topics `id`'s run waits on, when only an operator's command will move it on.
    fn awaited_topics(&self, id: &str) -> Option<Vec<String>> {
        let active = self.active.lock().ok()?;
        let c = active.get(id)?;
        if c.awaiting_operator.load(Ordering::SeqCst) == 0 {
            return None;
        }
        c.awaiting_topics.lock().ok().map(|t| t.clone())
    }

    /// Ids of the runs that go on by themselves ([`Runtime::busy`]'s).
    pub fn going(&self) -> Vec<String> {
        self.active
            .lock()
            .map(|a| {
                a.iter()
                    .filter(|(_, c)| c.awaiting_operator.load(Ordering::SeqCst) == 0)
                    .map(|(id, _)| id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Ids of workflows running in this process.
    pub fn active(&self) -> Vec<String> {
        self.active
            .lock()
            .map(|a| a.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Recovery (design/durable-workflows.md B.5): re-enqueues what crashed runs left PENDING and claims everything ENQUEUED.
    /// Returns the ids it started.
    pub async fn recover(self: &Arc<Self>) -> Result<Vec<String>, StoreError> {
        let ids = self
            .committed("", || self.store.recover(&self.executor_id))
            .await?;
        let mut started = Vec::new();
        for id in ids {
            if self.claim_and_spawn(&id).await? {
                started.push(id);
            }
        }
        Ok(started)
    }

    /// Inserts a workflow and starts it here. Idempotent by id.
    pub async fn submit(self: &Arc<Self>, wf: NewWorkflow) -> Result<Started, StoreError> {
        let id = wf.id.clone();
        let started = self.store.start(wf).await?;
        if matches!(started, Started::Created | Started::Existing(_)) {
            self.claim_and_spawn(&id).await?;
        }
        Ok(started)
    }

    /// Claims `id` if it is ENQUEUED and not already running here, and runs it. True if started.
    pub async fn claim_and_spawn(self: &Arc<Self>, id: &str) -> Result<bool, StoreError> {
        if !self.accepting.load(Ordering::SeqCst) || self.is_active(id) {
            return Ok(false);
        }
        let Some(row) = self.store.workflow(id).await? else {
            return Ok(false);
        };
        if row.status != WorkflowStatus::Enqueued {
            return Ok(false);
        }
        let Some(def) = self.defs.get(&row.name).cloned() else {
            tracing::warn!(workflow = id, kind = %row.name, "this manent does not know the workflow kind; left for another version");
            return Ok(false);
        };
        if row.definition_version != def.version {
            // Its recorded steps follow another version's code: replaying them here would
            // diverge. Leave it for the manent that started it (or an operator's cancel).
            let which = if row.definition_version > def.version {
                "a newer"
            } else {
                "an older"
            };
            tracing::warn!(
                workflow = id,
                version = row.definition_version,
                "started by {which} manent (definition version {} here {}): left ENQUEUED; \
                 finish it with that manent, or `manent cancel {id}`",
                row.definition_version,
                def.version
            );
            return Ok(false);
        }
        if self.unwatched(id).await? {
            return Ok(false);
        }
        let token = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
        if let Ok(mut c) = self.claiming.lock()
            && !c.insert(id.to_owned())
        {
            return Ok(false);
        }
        let claim = self
            .committed(id, || self.store.claim(id, &self.executor_id, &token))
            .await;
        // Active before it stops being claimed: never neither.
        if let Ok(Claim::Claimed(row)) = &claim {
            self.start_run(def, row.clone(), token);
        }
        if let Ok(mut c) = self.claiming.lock() {
            c.remove(id);
        }
        match claim? {
            Claim::Claimed(_) => Ok(true),
            Claim::DeadLettered(row) => {
                tracing::error!(
                    workflow = id,
                    runs = row.recovery_attempts,
                    "every recent run of this deployment crashed the engine; it is dead-lettered \
                     (MAX_RECOVERY_ATTEMPTS_EXCEEDED) until an operator runs `manent resume {id}`"
                );
                let _ = self.events.send(RuntimeEvent::DeadLettered {
                    workflow_id: id.to_owned(),
                });
                Ok(false)
            }
            Claim::NotClaimable => Ok(false),
            Claim::Refused(row) => {
                let why = row
                    .error
                    .as_deref()
                    .and_then(|e| serde_json::from_str::<serde_json::Value>(e).ok())
                    .and_then(|e| e["message"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                tracing::error!(workflow = id, "{why}");
                let _ = self.events.send(RuntimeEvent::Ended {
                    workflow_id: id.to_owned(),
                    status: Some(WorkflowStatus::Error),
                    reason: why,
                });
                Ok(false)
            }
        }
    }

    /// A submission no engine claimed while its submitter watched it: the submitter went away
    /// (a console closed, a dropped ssh session, a killed command), so nobody may be there to
    /// see it start. It is parked (CANCELLED, `never_started`) and only an operator's resume
    /// starts it. True when `id` is such a submission (parked now, or by another engine).
    async fn unwatched(&self, id: &str) -> Result<bool, StoreError> {
        let events = self.store.events(id).await?;
        let Some(submitter) = events
            .get(super::store::SUBMITTER)
            .and_then(|v| serde_json::from_str::<super::store::Submitter>(v).ok())
        else {
            return Ok(false);
        };
        let engines = match submitter.alive_here() {
            Some(true) => return Ok(false),
            Some(false) => Vec::new(),
            None => self.store.engines().await?,
        };
        if submitter.alive(&engines) {
            return Ok(false);
        }
        if self.committed(id, || self.store.park_unclaimed(id)).await? {
            tracing::warn!(
                workflow = id,
                "submitted by {} and never started: its submitter went away before any engine \
                 claimed it, so it waits for an operator (`manent resume {id}` starts it)",
                submitter.describe()
            );
            let _ = self.events.send(RuntimeEvent::Ended {
                workflow_id: id.to_owned(),
                status: Some(WorkflowStatus::Cancelled),
                reason: "never started: its submitter went away before any engine claimed it"
                    .into(),
            });
        }
        Ok(true)
    }

    /// Starts the run of a workflow this runtime just claimed.
    fn start_run(self: &Arc<Self>, def: WorkflowDef, row: WorkflowRow, token: String) {
        let id = row.id.clone();
        let id = id.as_str();
        let control = Arc::new(RunControl {
            shutdown: self.shutdown.subscribe(),
            fenced: self.fenced.subscribe(),
            run_token: token.clone(),
            wake: Notify::new(),
            parked: AtomicUsize::new(0),
            awaiting_operator: AtomicUsize::new(0),
            awaiting_topics: Mutex::new(Vec::new()),
            judging: AtomicBool::new(false),
            changed: self.changed.clone(),
        });
        if let Ok(mut active) = self.active.lock() {
            active.insert(id.to_owned(), control.clone());
        }
        let _ = self.events.send(RuntimeEvent::Claimed {
            workflow_id: id.to_owned(),
            name: row.name.clone(),
            recovery_attempt: row.recovery_attempts,
        });
        let rt = self.clone();
        let task = tokio::spawn(async move { rt.run(def, row, token, control).await });
        if let Ok(mut tasks) = self.tasks.lock() {
            tasks.insert(id.to_owned(), task.abort_handle());
        }
    }

    /// True while this engine has fenced itself (its lease lapsed) and not yet renewed it.
    pub fn is_fenced(&self) -> bool {
        *self.fenced.borrow()
    }

    /// Fencing: this engine's lease lapsed, so other engines may run its workflows now. No run
    /// starts another step attempt until the lease is renewed (the engine has killed the step
    /// processes it started); a run waiting on the database keeps waiting, so a step that
    /// finished is not thrown away: once the lease is back [`Runtime::after_lapse`] lets each
    /// run go on that no other engine took. Returns the ids running.
    pub fn fence(&self) -> Vec<String> {
        self.fenced.send_replace(true);
        self.tasks
            .lock()
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The lease is renewed after a lapse: each run whose workflow still holds its run token
    /// (no engine took it over meanwhile) goes on where it was, a step it finished meanwhile
    /// committed as it was; each other run is cut off, its workflow now another's. Returns the
    /// ids kept and the ids cut.
    pub async fn after_lapse(&self) -> (Vec<String>, Vec<String>) {
        let runs: Vec<(String, String)> = self
            .active
            .lock()
            .map(|a| {
                a.iter()
                    .map(|(id, c)| (id.clone(), c.run_token.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let (mut kept, mut cut) = (Vec::new(), Vec::new());
        for (id, token) in runs {
            let ours = match self.store.workflow(&id).await {
                // Its token still there: no engine took it (an operator's cancel meanwhile is
                // the run's own to meet at its next step).
                Ok(Some(row)) => row.run_token.as_deref() == Some(token.as_str()),
                Ok(None) => false,
                // Unread: kept; its next write is checked against its token all the same.
                Err(_) => true,
            };
            if ours {
                kept.push(id);
            } else {
                cut.push(id);
            }
        }
        for id in &cut {
            let task = self.tasks.lock().ok().and_then(|mut t| t.remove(id));
            if let Some(task) = task {
                task.abort();
            }
            if let Ok(mut active) = self.active.lock() {
                active.remove(id);
            }
            let _ = self.events.send(RuntimeEvent::Ended {
                workflow_id: id.clone(),
                status: None,
                reason: "another engine took it over while this engine's lease had lapsed".into(),
            });
        }
        self.changed.notify_waiters();
        self.fenced.send_replace(false);
        (kept, cut)
    }

    fn is_active(&self, id: &str) -> bool {
        self.active.lock().is_ok_and(|a| a.contains_key(id)) || self.is_claiming(id)
    }

    fn is_claiming(&self, id: &str) -> bool {
        self.claiming.lock().is_ok_and(|c| c.contains(id))
    }

    /// True while workflow `id` runs here or is being claimed here.
    pub fn runs(&self, id: &str) -> bool {
        self.is_active(id)
    }

    async fn run(
        self: Arc<Self>,
        def: WorkflowDef,
        row: WorkflowRow,
        token: String,
        control: Arc<RunControl>,
    ) {
        let id = row.id.clone();
        let (status, reason) = match self.load_history(&id).await {
            Ok(history) => {
                let ctx = WfCtx::new(
                    id.clone(),
                    token.clone(),
                    self.store.clone(),
                    history,
                    control,
                    self.observer.clone(),
                );
                let result = AssertUnwindSafe((def.run)(ctx, row.inputs.clone()))
                    .catch_unwind()
                    .await;
                self.conclude(&id, &token, result).await
            }
            Err(e) => (None, format!("could not read the checkpoint log: {e}")),
        };
        if let Ok(mut active) = self.active.lock() {
            active.remove(&id);
        }
        if let Ok(mut tasks) = self.tasks.lock() {
            tasks.remove(&id);
        }
        self.changed.notify_waiters();
        let _ = self.events.send(RuntimeEvent::Ended {
            workflow_id: id.clone(),
            status,
            reason,
        });
        // Resumed by an operator while this run was finishing its last step: the poller runs it
        // again (claiming from here would make this future recursive).
        if let Ok(Some(r)) = self.store.workflow(&id).await
            && r.status == WorkflowStatus::Enqueued
            && let Ok(mut again) = self.reclaim.lock()
        {
            again.push(id);
        }
    }

    /// A database operation the engine needs, retried while the database refuses it (a full
    /// disk), saying so as `workflow`'s StoreDegraded events (what the CLI and console show); a
    /// hard shutdown gives up on one that keeps being refused.
    async fn committed<R, F, Fut>(&self, workflow: &str, op: F) -> Result<R, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<R, StoreError>>,
    {
        let alert = |e: &StoreError, retries: u32| {
            if retries == 1 {
                tracing::error!(error = %e, "database write failed; the engine waits and retries");
            }
            self.observer.step(
                workflow,
                StepEvent::StoreDegraded {
                    error: e.cause(),
                    retries,
                },
            );
        };
        let recovered = || self.observer.step(workflow, StepEvent::StoreRecovered);
        let shutdown = self.shutdown.subscribe();
        until_committed_or_stopped(op, alert, recovered, shutdown)
            .await
            .unwrap_or_else(|| {
                Err(StoreError::Transient(
                    "stopped while the database refused writes".into(),
                ))
            })
    }

    async fn load_history(&self, id: &str) -> Result<super::store::History, StoreError> {
        self.committed(id, || self.store.history(id)).await
    }

    async fn conclude(
        &self,
        id: &str,
        token: &str,
        result: std::thread::Result<Result<RunOutcome, Interrupt>>,
    ) -> (Option<WorkflowStatus>, String) {
        let outcome = match result {
            // Outcomes quote plugins' messages; nothing secret may be recorded.
            Ok(Ok(RunOutcome::Success(v))) => Outcome::Success(redact(&v.to_string()).into_owned()),
            Ok(Ok(RunOutcome::Failure(v))) => Outcome::Error(redact(&v.to_string()).into_owned()),
            Ok(Err(Interrupt::NonDeterministic(msg))) => Outcome::Error(
                serde_json::json!({"kind": "non_deterministic", "message": msg}).to_string(),
            ),
            Ok(Err(Interrupt::Cancelled)) => {
                return (
                    Some(WorkflowStatus::Cancelled),
                    "cancelled at a step boundary".into(),
                );
            }
            Ok(Err(Interrupt::ShuttingDown)) => {
                // Stopped at a boundary or a durable wait: not a crash. (A failure to say so
                // only counts this run against the crash limit.)
                let _ = self.store.stopped(id, token).await;
                return (
                    None,
                    "the engine stopped; it resumes at the next start".into(),
                );
            }
            Ok(Err(Interrupt::Fenced)) => return (None, "another run owns it".into()),
            Ok(Err(Interrupt::Interrupted)) => {
                tracing::error!(
                    workflow = id,
                    "an interrupting command escaped its fan-out (a manent bug); the deployment stays PENDING"
                );
                return (None, "an interrupting command escaped its fan-out".into());
            }
            Ok(Err(Interrupt::Store(msg))) => {
                tracing::error!(workflow = id, error = %msg, "the database failed; the deployment stays PENDING");
                return (None, msg);
            }
            Err(panic) => {
                let what = super::ctx::panic_message(panic.as_ref());
                tracing::error!(workflow = id, panic = %what, "workflow code panicked (a manent bug); it stays PENDING and resumes at the next start");
                return (None, format!("workflow code panicked: {what}"));
            }
        };
        let wanted = match &outcome {
            Outcome::Success(_) => WorkflowStatus::Success,
            Outcome::Error(_) => WorkflowStatus::Error,
        };
        failpoint::hit("workflow.before_outcome", id);
        let finished = self
            .committed(id, || self.store.finish(id, token, outcome.clone()))
            .await;
        failpoint::hit("workflow.after_outcome", id);
        match finished {
            Ok(Finished::Written) => (Some(wanted), "finished".into()),
            Ok(Finished::Adopted(row)) => {
                (Some(row.status), "another run recorded the outcome".into())
            }
            Err(e) => (None, format!("could not record the outcome: {e}")),
        }
    }

    /// Wakes a run so it re-reads its mailbox and status (after an in-process command).
    pub fn wake(&self, id: &str) {
        if let Ok(active) = self.active.lock()
            && let Some(c) = active.get(id)
        {
            c.wake.notify_waiters();
        }
    }

    fn wake_all(&self) {
        if let Ok(active) = self.active.lock() {
            for c in active.values() {
                c.wake.notify_waiters();
            }
        }
    }

    /// Watches the database for other processes' writes (new deployments, cancels, operator
    /// commands) until shutdown begins.
    pub fn spawn_poller(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let rt = self.clone();
        tokio::spawn(async move {
            let mut shutdown = rt.shutdown.subscribe();
            let mut last = rt.store.data_version().await.unwrap_or(0);
            let store = rt.store.clone();
            // Registered before each round's work, so a change during the work is not missed.
            let listen = || {
                let mut n = Box::pin(async {
                    match store.changes() {
                        Some(n) => n.notified().await,
                        None => std::future::pending().await,
                    }
                });
                // Polled once: the `notified()` inside is now registered.
                let waker = futures::task::noop_waker();
                let _ = n.as_mut().poll(&mut std::task::Context::from_waker(&waker));
                n
            };
            let mut changed = listen();
            loop {
                tokio::select! {
                    () = tokio::time::sleep(every) => {}
                    () = &mut changed => {}
                    _ = shutdown.wait_for(|s| *s != Shutdown::Running) => return,
                }
                changed = listen();
                let again = rt
                    .reclaim
                    .lock()
                    .map(|mut v| std::mem::take(&mut *v))
                    .unwrap_or_default();
                for id in again {
                    let _ = rt.claim_and_spawn(&id).await;
                }
                let Ok(now) = rt.store.data_version().await else {
                    continue;
                };
                if now == last {
                    continue;
                }
                last = now;
                rt.wake_all();
                if let Ok(ids) = rt.store.enqueued(&rt.executor_id).await {
                    for id in ids {
                        if let Err(e) = rt.claim_and_spawn(&id).await {
                            tracing::warn!(workflow = %id, error = %e, "could not claim");
                        }
                    }
                }
            }
        })
    }

    /// Waits until workflow `id` is no longer live and its run here (if any) has ended, or until
    /// the engine is draining and nobody here runs it any more. Returns its row then.
    pub async fn wait(&self, id: &str) -> Result<WorkflowRow, StoreError> {
        self.wait_until(id, false).await
    }

    /// [`Runtime::wait`], or until its run here waits for an operator.
    pub async fn settle(&self, id: &str) -> Result<WorkflowRow, StoreError> {
        self.wait_until(id, true).await
    }

    async fn wait_until(&self, id: &str, or_awaiting: bool) -> Result<WorkflowRow, StoreError> {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let row = self
                .store
                .workflow(id)
                .await?
                .ok_or_else(|| StoreError::NotFound(id.into()))?;
            let stopping = *self.shutdown.borrow() != Shutdown::Running;
            // A cancelled workflow's run may still be finishing its in-flight step: wait for it.
            let running_here = self.is_active(id);
            if (!row.status.is_live() || stopping) && !running_here {
                return Ok(row);
            }
            // Waiting for an operator: no command in the mailbox would wake it, and it says what
            // it takes (consuming a command empties that until the workflow is ready again).
            if or_awaiting
                && row.status.is_live()
                && let Some(topics) = self.awaited_topics(id)
                && let Some(state) = self.store.state(id, &[]).await?
            {
                let woken = state.pending.iter().any(|m| topics.contains(&m.topic));
                let acting = state
                    .events
                    .get(super::store::ACCEPTS)
                    .is_some_and(|a| a == "[]");
                if !woken && !acting {
                    return Ok(state.row);
                }
            }
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
        }
    }

    /// Shutdown: stop claiming; wait up to `drain` for runs to finish or park (parked runs
    /// leave at once) — with `stop`, runs start no step or attempt meanwhile, so only the steps
    /// in flight finish; then stop runs at their next step boundary and wait up to `hard`.
    /// Returns how many runs were still going (abandoned, as if the process crashed).
    pub async fn drain(&self, drain: Duration, hard: Duration, stop: bool) -> usize {
        self.accepting.store(false, Ordering::SeqCst);
        // A hard stop asked already (the database was lost) is not made a drain again.
        self.shutdown.send_if_modified(|s| {
            let running = *s == Shutdown::Running;
            if running {
                *s = if stop {
                    Shutdown::Stopping
                } else {
                    Shutdown::Draining
                };
            }
            running
        });
        // A hard stop asked during the drain ends it: what the engine can no longer record
        // must not be waited for as long as a drain allows.
        let mut state = self.shutdown.subscribe();
        let drained = tokio::select! {
            idle = self.wait_idle(drain) => idle,
            _ = state.wait_for(|s| *s == Shutdown::Hard) => false,
        };
        if drained {
            return 0;
        }
        if *state.borrow() == Shutdown::Hard {
            tracing::warn!(runs = ?self.active(), "stopping now (the engine can no longer record): runs stop at their next step boundary");
        } else if drain.is_zero() {
            tracing::info!(runs = ?self.active(), "stopping now: runs stop at their next step boundary; steps in flight finish");
        } else {
            tracing::warn!(runs = ?self.active(), "drain timed out after {}; stopping runs at their next step boundary", humantime::format_duration(drain));
        }
        self.shutdown.send_replace(Shutdown::Hard);
        if self.wait_idle(hard).await {
            return 0;
        }
        self.active().len()
    }

    /// Stops every run at its next step boundary (a hard stop, without a drain): what the
    /// engine can no longer record must not go on.
    pub fn stop_now(&self) {
        self.accepting.store(false, Ordering::SeqCst);
        self.shutdown.send_replace(Shutdown::Hard);
    }

    async fn wait_idle(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.active.lock().map(|a| a.is_empty()).unwrap_or(true) {
                return true;
            }
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep(Duration::from_millis(200)) => {}
                () = tokio::time::sleep_until(deadline) => return false,
            }
        }
    }
}
