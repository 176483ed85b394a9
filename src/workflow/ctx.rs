//! What a workflow is written against: durable steps with retries, ids pre-allocated for
//! parallel fan-out (design/durable-workflows.md E5), durable sleeps and mailbox waits (design/durable-workflows.md E8), and events for consoles.
//! Everything a step returns is committed before the workflow moves on (design/durable-workflows.md E1, E4).

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{Notify, watch};

use super::error::{FailureKind, Interrupt, StepError, StepFailure, StepResult, StoreError};
use super::retry::RetryPolicy;
pub use super::shutdown::Shutdown;
use super::store::{
    AttemptEnd, AttemptOutcome, AttemptRecord, AttemptStart, Checkpoint, Effect, History,
    StepRecord, Store,
};
use crate::failpoint;
use crate::redact::redact;
use crate::sys::now_ms;

mod waits;

/// What an attempt of a step knows about itself.
#[derive(Debug, Clone)]
pub struct StepInfo {
    /// The workflow (deployment) id.
    pub workflow_id: String,
    /// The step's deterministic id.
    pub function_id: u32,
    /// The step's name.
    pub name: String,
    /// 1-based attempt, counting attempts a crash interrupted.
    pub attempt: u32,
    /// `{workflow_id}/{function_id}`: the same for every attempt and restart (design/durable-workflows.md E2).
    pub idempotency_key: String,
    /// This attempt follows one a crash or a stop cut off: what that one did is unknown (the
    /// step may reconcile before acting again).
    pub after_cut_off: bool,
}

/// Progress of steps, for observers (the engine's snapshot, the CLI's stderr).
#[derive(Debug, Clone)]
pub enum StepEvent {
    /// An attempt started.
    Started {
        function_id: u32,
        name: String,
        attempt: u32,
    },
    /// An attempt failed and another follows after `delay`.
    Retrying {
        function_id: u32,
        name: String,
        attempt: u32,
        error: String,
        delay: Duration,
    },
    /// The step is complete (`replayed` when its result came from the log).
    Finished {
        function_id: u32,
        name: String,
        failure: Option<StepFailure>,
        replayed: bool,
    },
    /// The database refuses writes; the run waits and retries (design/durable-workflows.md E4).
    StoreDegraded {
        /// What the database said (`disk I/O error`), without the engine's wording around it.
        error: String,
        retries: u32,
    },
    /// The database takes writes again after refusing them.
    StoreRecovered,
    /// The workflow waits for an operator or a timer.
    Parked { waiting: bool },
    /// The run published events outside the checkpoint log (what a waiting canary measures):
    /// readers of the workflow read it again.
    Published,
}

/// Receives step events of every run.
pub trait Observer: Send + Sync {
    /// Called for each event of workflow `workflow_id`.
    fn step(&self, workflow_id: &str, event: StepEvent);
}

/// Shared between a run and the runtime that spawned it.
pub(crate) struct RunControl {
    pub shutdown: watch::Receiver<Shutdown>,
    /// True while the engine's lease has lapsed: no step attempt starts.
    pub fenced: watch::Receiver<bool>,
    /// This run's token: the workflow is still this run's while its row holds it.
    pub run_token: String,
    pub wake: Notify,
    pub parked: AtomicUsize,
    /// Of the parked waits, those only an operator ends (no timer).
    pub awaiting_operator: AtomicUsize,
    /// The topics such a wait takes (a command on one of them wakes it).
    pub awaiting_topics: Mutex<Vec<String>>,
    /// The run has work while it waits (a live canary's analysis and the router's watch): an
    /// engine about to go away hands it to another rather than leave it unwatched.
    pub judging: AtomicBool,
    pub changed: Arc<Notify>,
}

/// A running workflow's handle on its durable state. Cheap to clone into parallel branches.
#[derive(Clone)]
pub struct WfCtx {
    run: Arc<Run>,
}

impl std::fmt::Debug for WfCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WfCtx").field("id", &self.run.id).finish()
    }
}

struct Run {
    id: String,
    run_token: String,
    /// Steps were recorded before this run started: it resumes an earlier one.
    resumed: bool,
    store: Arc<dyn Store>,
    next_id: AtomicU32,
    steps: Mutex<HashMap<u32, StepRecord>>,
    attempts: Mutex<HashMap<u32, Vec<AttemptRecord>>>,
    control: Arc<RunControl>,
    observer: Arc<dyn Observer>,
}

const SLEEP: &str = "engine.sleep";
const RECV: &str = "engine.recv";
const SET_EVENT: &str = "engine.set_event";

impl WfCtx {
    pub(crate) fn new(
        id: String,
        run_token: String,
        store: Arc<dyn Store>,
        history: History,
        control: Arc<RunControl>,
        observer: Arc<dyn Observer>,
    ) -> Self {
        let steps: HashMap<u32, StepRecord> = history
            .steps
            .into_iter()
            .map(|s| (s.function_id, s))
            .collect();
        let resumed = !steps.is_empty();
        let mut attempts: HashMap<u32, Vec<AttemptRecord>> = HashMap::new();
        for a in history.attempts {
            attempts.entry(a.function_id).or_default().push(a);
        }
        WfCtx {
            run: Arc::new(Run {
                id,
                run_token,
                resumed,
                store,
                next_id: AtomicU32::new(0),
                steps: Mutex::new(steps),
                attempts: Mutex::new(attempts),
                control,
                observer,
            }),
        }
    }

    /// The workflow id.
    pub fn id(&self) -> &str {
        &self.run.id
    }

    /// Says whether the run has work while it waits for an operator (a live canary is judged
    /// and watched): such a run keeps a worker busy and is handed on, never left unwatched.
    pub fn set_judging(&self, judging: bool) {
        self.run.control.judging.store(judging, Ordering::SeqCst);
    }

    /// True when this run continues one that stopped (a crash, a shutdown): it replays what
    /// was recorded before doing anything new.
    pub fn resumed(&self) -> bool {
        self.run.resumed
    }

    /// True while the next step is recorded: the run is replaying, nothing it does now reaches
    /// the world.
    pub fn replaying(&self) -> bool {
        self.recorded(self.run.next_id.load(Ordering::SeqCst))
            .is_some()
    }

    /// Publishes events outside the checkpoint log: what the run measures while it waits (they
    /// are not replayed and take no step id, so they may happen any number of times).
    pub async fn publish(&self, events: &[(&str, serde_json::Value)]) -> Result<(), Interrupt> {
        let events = events
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.to_string()))
            .collect::<Vec<_>>();
        let store = &self.run.store;
        let (id, token) = (&self.run.id, &self.run.run_token);
        self.store_retry(|| store.publish(id, token, events.clone()))
            .await?;
        self.observe(StepEvent::Published);
        Ok(())
    }

    /// Allocates `n` consecutive step ids in program order, before any branch is spawned (design/durable-workflows.md E5).
    pub fn reserve(&self, n: u32) -> Vec<u32> {
        let first = self.run.next_id.fetch_add(n, Ordering::SeqCst);
        (first..first + n).collect()
    }

    fn next_id(&self) -> u32 {
        self.run.next_id.fetch_add(1, Ordering::SeqCst)
    }

    fn recorded(&self, id: u32) -> Option<StepRecord> {
        self.run.steps.lock().ok().and_then(|s| s.get(&id).cloned())
    }

    /// True when step `id` was attempted before (recorded or interrupted), so a replayed fan-out
    /// restarts exactly the targets the first run had started.
    pub fn was_started(&self, id: u32) -> bool {
        self.recorded(id).is_some()
            || self
                .run
                .attempts
                .lock()
                .is_ok_and(|a| a.get(&id).is_some_and(|v| !v.is_empty()))
    }

    /// True when step `id` is recorded as failed.
    pub fn recorded_failure(&self, id: u32) -> bool {
        self.recorded(id).is_some_and(|r| r.error.is_some())
    }

    /// True when any step after `id` was recorded or attempted: on replay, whatever came
    /// before it had ended (a fan-out that stopped starting steps must not start them now).
    pub fn started_beyond(&self, id: u32) -> bool {
        let steps = self
            .run
            .steps
            .lock()
            .is_ok_and(|s| s.keys().any(|k| *k > id));
        steps
            || self
                .run
                .attempts
                .lock()
                .is_ok_and(|a| a.iter().any(|(k, v)| *k > id && !v.is_empty()))
    }

    fn observe(&self, event: StepEvent) {
        self.run.observer.step(&self.run.id, event);
    }

    fn shutdown(&self) -> Shutdown {
        *self.run.control.shutdown.borrow()
    }

    /// Waits while the engine's lease has lapsed: another engine may own this workflow now, so
    /// nothing starts until the lease is renewed (and the run is cut off if it was taken). A
    /// hard shutdown ends the wait.
    async fn unfenced(&self) -> Result<(), Interrupt> {
        let mut fenced = self.run.control.fenced.clone();
        let mut shutdown = self.run.control.shutdown.clone();
        while *fenced.borrow_and_update() {
            tokio::select! {
                changed = fenced.changed() => {
                    if changed.is_err() {
                        return Err(Interrupt::ShuttingDown);
                    }
                }
                _ = shutdown.changed() => {
                    if matches!(*shutdown.borrow(), Shutdown::Stopping | Shutdown::Hard) {
                        return Err(Interrupt::ShuttingDown);
                    }
                }
            }
        }
        Ok(())
    }

    /// True while the engine's lease has lapsed.
    fn fenced(&self) -> bool {
        *self.run.control.fenced.borrow()
    }

    /// A step boundary: once the engine stops, no step or attempt starts; the run stops here
    /// and resumes at the next start.
    fn boundary(&self) -> Result<(), Interrupt> {
        if matches!(self.shutdown(), Shutdown::Stopping | Shutdown::Hard) {
            Err(Interrupt::ShuttingDown)
        } else {
            Ok(())
        }
    }

    /// Runs a durable step with its retry policy; see [`WfCtx::step_at`].
    pub async fn step<T, F, Fut>(
        &self,
        name: impl Into<String>,
        policy: &RetryPolicy,
        mut body: F,
    ) -> Result<StepResult<T>, Interrupt>
    where
        T: Serialize + DeserializeOwned,
        F: FnMut(StepInfo) -> Fut,
        Fut: Future<Output = Result<T, StepError>>,
    {
        let id = self.next_id();
        self.step_at(id, name.into(), policy, |info| {
            body(info).map(|r| r.map(|v| (v, Vec::new())))
        })
        .await
    }

    /// Runs step `id` (from [`WfCtx::reserve`] or the next id): replays its recorded result, or
    /// runs `body` until it succeeds, fails permanently or spends the budget, and commits the
    /// result together with the effects the body returned. `Err` means the run must stop.
    pub async fn step_at<T, F, Fut>(
        &self,
        id: u32,
        name: String,
        policy: &RetryPolicy,
        body: F,
    ) -> Result<StepResult<T>, Interrupt>
    where
        T: Serialize + DeserializeOwned,
        F: FnMut(StepInfo) -> Fut,
        Fut: Future<Output = Result<(T, Vec<Effect>), StepError>>,
    {
        self.run_step(id, name, policy, false, body).await
    }

    /// [`WfCtx::step_at`] for one step of a fan-out: while an operator's interrupting command
    /// waits, a step that has not started yet does not start (`Err(Interrupt::Interrupted)`);
    /// steps already under way go on. The fan-out reports such a step as never started.
    pub async fn fan_out_step_at<T, F, Fut>(
        &self,
        id: u32,
        name: String,
        policy: &RetryPolicy,
        body: F,
    ) -> Result<StepResult<T>, Interrupt>
    where
        T: Serialize + DeserializeOwned,
        F: FnMut(StepInfo) -> Fut,
        Fut: Future<Output = Result<(T, Vec<Effect>), StepError>>,
    {
        self.run_step(id, name, policy, true, body).await
    }

    async fn run_step<T, F, Fut>(
        &self,
        id: u32,
        name: String,
        policy: &RetryPolicy,
        interruptible: bool,
        mut body: F,
    ) -> Result<StepResult<T>, Interrupt>
    where
        T: Serialize + DeserializeOwned,
        F: FnMut(StepInfo) -> Fut,
        Fut: Future<Output = Result<(T, Vec<Effect>), StepError>>,
    {
        if let Some(rec) = self.recorded(id) {
            let result = self.replay(&rec, &name)?;
            let failure = result.as_ref().err().cloned();
            self.observe(StepEvent::Finished {
                function_id: id,
                name,
                failure,
                replayed: true,
            });
            return Ok(result);
        }
        self.boundary()?;
        let prior = self
            .run
            .attempts
            .lock()
            .map(|a| a.get(&id).cloned())
            .ok()
            .flatten();
        let prior = prior.unwrap_or_default();
        let mut errors: Vec<String> = prior.iter().filter_map(|a| a.error.clone()).collect();
        let mut attempt = prior.last().map_or(1, |a| a.attempt + 1);
        let mut after_cut_off = prior.last().is_some_and(|a| {
            a.ended_at.is_none()
                || a.outcome == Some(crate::workflow::store::AttemptOutcome::Interrupted)
        });
        let budget = policy.max_retries.saturating_add(1);
        loop {
            let started_at = now_ms();
            if attempt > budget {
                // Attempts that crashes interrupted spent the budget (a persisted budget, design/durable-workflows.md B.3).
                let failure = StepFailure {
                    kind: FailureKind::RetriesExhausted,
                    message: errors
                        .last()
                        .cloned()
                        .unwrap_or_else(|| "no attempt left".into()),
                    attempts: attempt - 1,
                    errors,
                };
                self.record(
                    StepAt::new(id, &name, started_at),
                    Err(failure.clone()),
                    None,
                    Vec::new(),
                )
                .await?;
                return Ok(Err(failure));
            }
            // A retry is an attempt like the first: none starts once the engine stops.
            self.boundary()?;
            let info = self
                .begin_attempt(
                    id,
                    &name,
                    (attempt, started_at),
                    interruptible,
                    after_cut_off,
                )
                .await?;
            after_cut_off = false;
            let result = run_attempt(body(info), policy.timeout).await;
            failpoint::hit("step.before_checkpoint", &name);
            let message = match result {
                Ok((value, effects)) => {
                    let output = serde_json::to_string(&value).map_err(|e| {
                        Interrupt::Store(format!("step output does not encode: {e}"))
                    })?;
                    let at = StepAt::new(id, &name, started_at);
                    self.record(at, Ok(output), Some(attempt), effects).await?;
                    failpoint::hit("step.after_checkpoint", &name);
                    self.observe(StepEvent::Finished {
                        function_id: id,
                        name,
                        failure: None,
                        replayed: false,
                    });
                    return Ok(Ok(value));
                }
                Err(StepError::Permanent(message)) => {
                    errors.push(message.clone());
                    let failure = StepFailure {
                        kind: FailureKind::Permanent,
                        message,
                        attempts: attempt,
                        errors,
                    };
                    return self.fail(id, name, failure, attempt, started_at).await;
                }
                Err(StepError::Retryable(message)) if self.fenced() => format!(
                    "the engine's lease lapsed during this attempt and its processes were \
                     killed: {message}"
                ),
                Err(StepError::Retryable(message)) => message,
            };
            let message = redact(&message).into_owned();
            if matches!(self.shutdown(), Shutdown::Stopping | Shutdown::Hard) {
                // Stopping: no retry now; this attempt ends interrupted, and the step runs
                // again when the deployment resumes.
                self.end_interrupted(id, attempt, message).await?;
                return Err(Interrupt::ShuttingDown);
            }
            errors.push(message.clone());
            if attempt >= budget {
                let failure = StepFailure {
                    kind: FailureKind::RetriesExhausted,
                    message,
                    attempts: attempt,
                    errors,
                };
                return self.fail(id, name, failure, attempt, started_at).await;
            }
            self.retry_later(id, &name, attempt, message, policy)
                .await?;
            attempt += 1;
        }
    }

    /// Records that attempt `attempt` of step `id` starts (durably, before its body runs) and
    /// what the body is told of itself.
    async fn begin_attempt(
        &self,
        id: u32,
        name: &str,
        (attempt, started_at): (u32, i64),
        interruptible: bool,
        after_cut_off: bool,
    ) -> Result<StepInfo, Interrupt> {
        // No side effect starts while another engine may own the workflow.
        self.unfenced().await?;
        let start = AttemptStart {
            workflow_id: self.run.id.clone(),
            run_token: self.run.run_token.clone(),
            function_id: id,
            function_name: name.to_owned(),
            attempt,
            started_at,
            interruptible,
        };
        self.store_retry(|| self.run.store.begin_attempt(start.clone()))
            .await?;
        // A lapse while the start was being written: the body waits for the lease too.
        self.unfenced().await?;
        failpoint::hit("step.started", name);
        self.observe(StepEvent::Started {
            function_id: id,
            name: name.to_owned(),
            attempt,
        });
        Ok(StepInfo {
            workflow_id: self.run.id.clone(),
            function_id: id,
            name: name.to_owned(),
            attempt,
            idempotency_key: format!("{}/{id}", self.run.id),
            after_cut_off,
        })
    }

    /// Ends attempt `attempt` of step `id` as interrupted by the engine's stop.
    async fn end_interrupted(
        &self,
        id: u32,
        attempt: u32,
        message: String,
    ) -> Result<(), Interrupt> {
        let end = AttemptEnd {
            workflow_id: self.run.id.clone(),
            function_id: id,
            attempt,
            outcome: AttemptOutcome::Interrupted,
            error: Some(format!("interrupted: the engine stopped ({message})")),
            ended_at: now_ms(),
        };
        self.store_retry(|| self.run.store.end_attempt(end.clone()))
            .await
    }

    /// Ends attempt `attempt` as retryable (durably, with its redacted error), says so, and
    /// waits the policy's backoff.
    async fn retry_later(
        &self,
        id: u32,
        name: &str,
        attempt: u32,
        message: String,
        policy: &RetryPolicy,
    ) -> Result<(), Interrupt> {
        let end = AttemptEnd {
            workflow_id: self.run.id.clone(),
            function_id: id,
            attempt,
            outcome: AttemptOutcome::Retryable,
            error: Some(message.clone()),
            ended_at: now_ms(),
        };
        self.store_retry(|| self.run.store.end_attempt(end.clone()))
            .await?;
        let delay = policy.delay(attempt);
        self.observe(StepEvent::Retrying {
            function_id: id,
            name: name.to_owned(),
            attempt,
            error: message,
            delay,
        });
        failpoint::hit("step.backoff", name);
        self.sleep_in_memory(delay).await
    }

    async fn fail<T>(
        &self,
        id: u32,
        name: String,
        failure: StepFailure,
        attempt: u32,
        started_at: i64,
    ) -> Result<StepResult<T>, Interrupt> {
        self.record(
            StepAt::new(id, &name, started_at),
            Err(failure.clone()),
            Some(attempt),
            Vec::new(),
        )
        .await?;
        failpoint::hit("step.after_checkpoint", &name);
        self.observe(StepEvent::Finished {
            function_id: id,
            name,
            failure: Some(failure.clone()),
            replayed: false,
        });
        Ok(Err(failure))
    }

    fn replay<T: DeserializeOwned>(
        &self,
        rec: &StepRecord,
        name: &str,
    ) -> Result<StepResult<T>, Interrupt> {
        if rec.function_name != name {
            return Err(Interrupt::NonDeterministic(format!(
                "workflow {} step {}: recorded as `{}` but the code now runs `{name}`; fork the \
                 deployment onto this version or run the manent that started it",
                self.run.id, rec.function_id, rec.function_name
            )));
        }
        let corrupt = |e: serde_json::Error| {
            Interrupt::Store(format!(
                "step {} ({name}) does not decode: {e}",
                rec.function_id
            ))
        };
        match (&rec.output, &rec.error) {
            (_, Some(err)) => Ok(Err(serde_json::from_str(err).map_err(corrupt)?)),
            (Some(out), None) => Ok(Ok(serde_json::from_str(out).map_err(corrupt)?)),
            (None, None) => Ok(Ok(serde_json::from_str("null").map_err(corrupt)?)),
        }
    }

    /// Commits a step result, blocking and retrying while the database refuses (design/durable-workflows.md E4).
    async fn record(
        &self,
        step: StepAt<'_>,
        result: Result<String, StepFailure>,
        attempt: Option<u32>,
        effects: Vec<Effect>,
    ) -> Result<(), Interrupt> {
        let StepAt {
            id,
            name,
            started_at,
        } = step;
        // Plugins echo what they were given; nothing secret may be recorded (design/architecture.md "Observability").
        let result = result
            .map(|out| redact(&out).into_owned())
            .map_err(|mut f| {
                f.message = redact(&f.message).into_owned();
                for e in &mut f.errors {
                    *e = redact(e).into_owned();
                }
                f
            });
        let (output, error, outcome) = match result {
            Ok(out) => (Some(out), None, AttemptOutcome::Ok),
            Err(f) => {
                let outcome = if f.is_permanent() {
                    AttemptOutcome::Permanent
                } else {
                    AttemptOutcome::Retryable
                };
                let json = serde_json::to_string(&f)
                    .map_err(|e| Interrupt::Store(format!("step failure does not encode: {e}")))?;
                (None, Some(json), outcome)
            }
        };
        let cp = Checkpoint {
            workflow_id: self.run.id.clone(),
            run_token: self.run.run_token.clone(),
            function_id: id,
            function_name: name.to_owned(),
            output,
            error,
            attempts: attempt.unwrap_or(1),
            close_attempt: attempt.map(|a| (a, outcome)),
            started_at,
            completed_at: now_ms(),
            effects,
        };
        self.store_retry(|| self.run.store.checkpoint(cp.clone()))
            .await?;
        let rec = StepRecord {
            function_id: id,
            function_name: cp.function_name,
            output: cp.output,
            error: cp.error,
            attempts: cp.attempts,
            started_at: Some(cp.started_at),
            completed_at: Some(cp.completed_at),
        };
        if let Ok(mut steps) = self.run.steps.lock() {
            steps.insert(id, rec);
        }
        Ok(())
    }

    /// Retries a database operation on transient faults with backoff (design/durable-workflows.md E4): the run blocks with
    /// its result in memory; a deploy is never failed for an engine I/O error. A hard shutdown
    /// still stops the wait (the run stays unfinished and resumes at the next start).
    async fn store_retry<R, F, Fut>(&self, op: F) -> Result<R, Interrupt>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<R, StoreError>>,
    {
        let alert = |e: &StoreError, retries: u32| {
            if retries == 1 {
                tracing::error!(workflow = %self.run.id, error = %e, "database write failed; the deployment waits and retries");
            }
            self.observe(StepEvent::StoreDegraded {
                error: e.cause(),
                retries,
            });
        };
        let recovered = || self.observe(StepEvent::StoreRecovered);
        let shutdown = self.run.control.shutdown.clone();
        match super::retry::until_committed_or_stopped(op, alert, recovered, shutdown).await {
            Some(r) => Ok(r?),
            None => Err(Interrupt::ShuttingDown),
        }
    }
}

/// One attempt: a panic in the body is a retryable failure (it must not crash the engine), and
/// exceeding the policy's timeout drops the body, which cancels what it was doing.
async fn run_attempt<T, Fut>(fut: Fut, timeout: Option<Duration>) -> Result<T, StepError>
where
    Fut: Future<Output = Result<T, StepError>>,
{
    let guarded = AssertUnwindSafe(fut).catch_unwind();
    let outcome = match timeout {
        Some(t) => match tokio::time::timeout(t, guarded).await {
            Ok(r) => r,
            Err(_) => {
                return Err(StepError::Retryable(format!(
                    "timed out after {}",
                    humantime::format_duration(t)
                )));
            }
        },
        None => guarded.await,
    };
    outcome.unwrap_or_else(|panic| {
        Err(StepError::Retryable(format!(
            "the step panicked: {}",
            panic_message(panic.as_ref())
        )))
    })
}

/// What a caught panic said.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "unknown panic".into())
}

/// Which step a result is recorded for: its function id, its name, when it started.
#[derive(Debug, Clone, Copy)]
struct StepAt<'a> {
    id: u32,
    name: &'a str,
    started_at: i64,
}

impl<'a> StepAt<'a> {
    fn new(id: u32, name: &'a str, started_at: i64) -> Self {
        StepAt {
            id,
            name,
            started_at,
        }
    }
}
