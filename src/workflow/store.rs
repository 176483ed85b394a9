//! The system database behind a small trait: workflow rows, the checkpoint log, the mailbox and
//! events. The layer above keeps its own records in the same database (a deploy's releases, the
//! operator journal); the kernel only carries them, as [`Record`]s, into the transactions they
//! must commit with. SQLite is the embedded implementation; PostgreSQL, with the same
//! semantics, is how several engines share one database.

mod claim;
mod mailbox;
mod recommit;
mod resume;
mod start;

pub use self::claim::{ClaimDecision, decide_claim};
pub use self::mailbox::{refusal, undeliverable};
pub use self::recommit::{StoredStep, recommit};
pub use self::resume::{Resume, decide_resume, resume_blocked};
pub use self::start::start_over;

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::error::StoreError;

/// A plain sha256 in hex: what rows from before inputs keys carry (see
/// [`super::inputs_key`]), and a short stable name for a file's path.
pub fn inputs_digest(inputs: &str) -> String {
    crate::format::sha256_hex(inputs)
}

/// The message of a failed checkpoint's last attempt, for its attempt row.
pub fn last_error(c: &Checkpoint) -> String {
    c.error
        .as_deref()
        .and_then(|e| serde_json::from_str::<serde_json::Value>(e).ok())
        .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
        .unwrap_or_default()
}

/// A workflow's lifecycle state (design/durable-workflows.md B.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WorkflowStatus {
    /// Waiting for an engine to claim it.
    Enqueued,
    /// Claimed by a run (or left by a crashed one until recovery).
    Pending,
    /// Finished; the workflow reached its end.
    Success,
    /// Finished with a failure.
    Error,
    /// Stopped by an operator at a step boundary; can be resumed.
    Cancelled,
    /// Dead-lettered after too many crashed runs; can be resumed.
    MaxRecoveryAttemptsExceeded,
}

impl WorkflowStatus {
    /// The column value.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowStatus::Enqueued => "ENQUEUED",
            WorkflowStatus::Pending => "PENDING",
            WorkflowStatus::Success => "SUCCESS",
            WorkflowStatus::Error => "ERROR",
            WorkflowStatus::Cancelled => "CANCELLED",
            WorkflowStatus::MaxRecoveryAttemptsExceeded => "MAX_RECOVERY_ATTEMPTS_EXCEEDED",
        }
    }

    /// Parses a column value.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ENQUEUED" => WorkflowStatus::Enqueued,
            "PENDING" => WorkflowStatus::Pending,
            "SUCCESS" => WorkflowStatus::Success,
            "ERROR" => WorkflowStatus::Error,
            "CANCELLED" => WorkflowStatus::Cancelled,
            "MAX_RECOVERY_ATTEMPTS_EXCEEDED" => WorkflowStatus::MaxRecoveryAttemptsExceeded,
            _ => return None,
        })
    }

    /// True for ENQUEUED and PENDING: the workflow still has work to do.
    pub fn is_live(self) -> bool {
        matches!(self, WorkflowStatus::Enqueued | WorkflowStatus::Pending)
    }

    /// True for SUCCESS and ERROR, which nothing changes any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, WorkflowStatus::Success | WorkflowStatus::Error)
    }
}

/// A workflow to insert, ENQUEUED.
#[derive(Debug, Clone)]
pub struct NewWorkflow {
    /// The id, also the idempotency key of the start (design/durable-workflows.md E7).
    pub id: String,
    /// The workflow kind (`deploy`, `rollback`, …).
    pub name: String,
    /// Version of the workflow code (design/durable-workflows.md B.8).
    pub definition_version: u32,
    /// JSON inputs, immutable.
    pub inputs: String,
    /// What it acts on, e.g. `web/prod`; history is queried by it.
    pub subject: Option<String>,
    /// At most one live workflow per dedup key.
    pub dedup_key: Option<String>,
    /// Crash-looping runs allowed before dead-lettering.
    pub max_recovery_attempts: u32,
    /// Records of the layer above written in the same transaction (the operator's action).
    pub records: Vec<Record>,
    /// The engine that will run it (the submitter's): on a database several engines share,
    /// the others leave it to that engine while its lease is fresh.
    pub executor: Option<String>,
    /// Events written with the start, in the same transaction (its [`SUBMITTER`]).
    pub events: Vec<(String, String)>,
}

/// The event that names the process that submitted a workflow ([`Submitter`]).
pub const SUBMITTER: &str = "submitter";

/// The event of a submission an engine found unclaimed after its submitter had gone: it was
/// parked (CANCELLED) rather than started, until an operator resumes it (JSON [`Submitter`]).
pub const NEVER_STARTED: &str = "never_started";

/// A submitter on another host counts as alive while an engine of that process renewed its
/// lease this recently (this host cannot see the process itself).
pub const REMOTE_SUBMITTER_MS: i64 = 30_000;

/// Who submitted a workflow, and from which process: a submission whose process is gone
/// before any engine claimed it never starts by itself (an operator resumes it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submitter {
    /// The operator, as shown.
    pub by: String,
    /// The submitting process.
    pub pid: u32,
    /// Its host.
    pub host: String,
    /// Its identity across pid reuse (boot and start time), where the host says.
    #[serde(default)]
    pub identity: Option<String>,
    /// Epoch ms of the submission.
    pub at: i64,
}

impl Submitter {
    /// This process, submitting for `by`.
    pub fn this_process(by: &str) -> Submitter {
        let pid = std::process::id();
        Submitter {
            by: by.to_owned(),
            pid,
            host: crate::sys::hostname(),
            identity: crate::sys::process_identity(pid),
            at: crate::sys::now_ms(),
        }
    }

    /// Whether the submitting process still runs, where this host can see it (`None`: it
    /// runs on another host; see [`Submitter::alive`]).
    pub fn alive_here(&self) -> Option<bool> {
        if self.host != crate::sys::hostname() {
            return None;
        }
        Some(match &self.identity {
            Some(id) => crate::sys::process_identity(self.pid).as_ref() == Some(id),
            None => crate::sys::process_alive(self.pid),
        })
    }

    /// Whether the submitting process still runs: on this host, by its identity; on another,
    /// by an engine of that process that renewed its lease within [`REMOTE_SUBMITTER_MS`].
    pub fn alive(&self, engines: &[EngineRow]) -> bool {
        self.alive_here().unwrap_or_else(|| {
            engines
                .iter()
                .any(|e| e.host == self.host && e.pid == self.pid && e.age_ms < REMOTE_SUBMITTER_MS)
        })
    }

    /// `alice (pid 4242 on bastion-1)`.
    pub fn describe(&self) -> String {
        format!("{} (pid {} on {})", self.by, self.pid, self.host)
    }
}

/// A stored workflow row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkflowRow {
    /// Workflow id.
    pub id: String,
    /// Workflow kind.
    pub name: String,
    /// Code version it started with.
    pub definition_version: u32,
    /// JSON inputs.
    pub inputs: String,
    /// Lifecycle state.
    pub status: WorkflowStatus,
    /// JSON output, once SUCCESS (or ERROR with details).
    pub output: Option<String>,
    /// JSON error, once ERROR.
    pub error: Option<String>,
    /// Engine that runs or ran it.
    pub executor_id: Option<String>,
    /// Token of the run that owns it.
    pub run_token: Option<String>,
    /// Runs claimed so far (crash loops dead-letter).
    pub recovery_attempts: u32,
    /// Limit of `recovery_attempts`.
    pub max_recovery_attempts: u32,
    /// What it acts on.
    pub subject: Option<String>,
    /// Epoch ms.
    pub created_at: i64,
    /// Epoch ms.
    pub updated_at: i64,
    /// Epoch ms of the current run's claim.
    pub started_at: Option<i64>,
    /// Epoch ms of the outcome or cancel.
    pub completed_at: Option<i64>,
}

#[cfg(test)]
impl WorkflowRow {
    /// A deploy workflow `id` in `status`, as a store's decisions are tested on.
    pub(crate) fn example(id: &str, status: WorkflowStatus) -> WorkflowRow {
        WorkflowRow {
            id: id.into(),
            name: "deploy".into(),
            definition_version: 1,
            inputs: "{}".into(),
            status,
            output: None,
            error: None,
            executor_id: Some("host-a".into()),
            run_token: None,
            recovery_attempts: 0,
            max_recovery_attempts: 5,
            subject: None,
            created_at: 0,
            updated_at: 0,
            started_at: None,
            completed_at: None,
        }
    }
}

/// What `start` found.
#[derive(Debug, Clone)]
pub enum Started {
    /// A new row was inserted.
    Created,
    /// The same id with the same inputs exists: the start is idempotent.
    Existing(WorkflowRow),
    /// Another live workflow holds the dedup key.
    Duplicate(WorkflowRow),
}

/// What a claim (ENQUEUED → PENDING) found.
#[derive(Debug, Clone)]
pub enum Claim {
    /// This run owns the workflow now.
    Claimed(WorkflowRow),
    /// Too many runs crashed: the workflow is dead-lettered.
    DeadLettered(WorkflowRow),
    /// Not ENQUEUED (someone else claimed it, or it finished).
    NotClaimable,
    /// Its stored inputs do not verify with the inputs key: it was written or changed outside
    /// manent, and is ended ERROR without running (the row after).
    Refused(Box<WorkflowRow>),
}

/// One completed step, as recorded (design/durable-workflows.md E1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepRecord {
    /// Deterministic step id (design/durable-workflows.md E5).
    pub function_id: u32,
    /// Step name, checked on replay.
    pub function_name: String,
    /// JSON output; None iff the step failed.
    pub output: Option<String>,
    /// JSON `StepFailure`.
    pub error: Option<String>,
    /// Attempts made.
    pub attempts: u32,
    /// Epoch ms.
    pub started_at: Option<i64>,
    /// Epoch ms.
    pub completed_at: Option<i64>,
}

/// How one attempt of a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// Succeeded.
    Ok,
    /// Failed; a retry may follow.
    Retryable,
    /// Failed for good.
    Permanent,
    /// The engine died during it.
    Interrupted,
}

impl AttemptOutcome {
    /// The column value.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Ok => "ok",
            AttemptOutcome::Retryable => "retryable",
            AttemptOutcome::Permanent => "permanent",
            AttemptOutcome::Interrupted => "interrupted",
        }
    }

    /// Parses a column value.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ok" => AttemptOutcome::Ok,
            "retryable" => AttemptOutcome::Retryable,
            "permanent" => AttemptOutcome::Permanent,
            "interrupted" => AttemptOutcome::Interrupted,
            _ => return None,
        })
    }
}

/// One attempt of a step (the persisted retry budget).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptRecord {
    /// Step id.
    pub function_id: u32,
    /// 1-based attempt number.
    pub attempt: u32,
    /// Step name.
    pub function_name: String,
    /// Epoch ms.
    pub started_at: i64,
    /// Epoch ms; None while running.
    pub ended_at: Option<i64>,
    /// None while running.
    pub outcome: Option<AttemptOutcome>,
    /// The attempt's error.
    pub error: Option<String>,
}

/// Everything replay needs: recorded steps and every attempt made so far.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Completed steps by id.
    pub steps: Vec<StepRecord>,
    /// Attempts, by step id then attempt.
    pub attempts: Vec<AttemptRecord>,
}

/// An attempt about to run.
#[derive(Debug, Clone)]
pub struct AttemptStart {
    /// Workflow id.
    pub workflow_id: String,
    /// The run that makes the attempt.
    pub run_token: String,
    /// Step id.
    pub function_id: u32,
    /// Step name.
    pub function_name: String,
    /// 1-based attempt number.
    pub attempt: u32,
    /// Epoch ms.
    pub started_at: i64,
    /// A first attempt that an operator's interrupting command (see [`Message::interrupts`])
    /// refuses: the step is one of a fan-out that stops starting new work.
    pub interruptible: bool,
}

/// An attempt that failed and will be retried (no checkpoint yet).
#[derive(Debug, Clone)]
pub struct AttemptEnd {
    /// Workflow id.
    pub workflow_id: String,
    /// Step id.
    pub function_id: u32,
    /// 1-based attempt number.
    pub attempt: u32,
    /// How it ended.
    pub outcome: AttemptOutcome,
    /// Its error.
    pub error: Option<String>,
    /// Epoch ms.
    pub ended_at: i64,
}

/// A finished step to commit, with the domain writes that must commit with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// Workflow id.
    pub workflow_id: String,
    /// The run that ran the step; another run's checkpoint is refused.
    pub run_token: String,
    /// Step id.
    pub function_id: u32,
    /// Step name.
    pub function_name: String,
    /// JSON output, or None with `error`.
    pub output: Option<String>,
    /// JSON `StepFailure`.
    pub error: Option<String>,
    /// Attempts made.
    pub attempts: u32,
    /// The attempt row to close, and how.
    pub close_attempt: Option<(u32, AttemptOutcome)>,
    /// Epoch ms.
    pub started_at: i64,
    /// Epoch ms.
    pub completed_at: i64,
    /// Writes that commit atomically with the step (exactly once).
    pub effects: Vec<Effect>,
}

/// A write committed in the same transaction as a checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Publish a workflow event (phase, progress) for consoles.
    Event { key: String, value: String },
    /// A record of the layer above (a release became live), exactly once with the step.
    Record(Record),
}

/// A write of the layer above the engine: the engine never reads it, it only commits it in the
/// same transaction as its own write (a checkpoint, a start, a delivered command). The store's
/// extension knows how to apply each `kind`.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// What it is (`release`, `journal`, …), for the extension.
    pub kind: String,
    /// Its content.
    pub body: serde_json::Value,
}

impl Record {
    /// Its body as `T`; a body that does not decode is an error naming its kind.
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> Result<T, StoreError> {
        T::deserialize(&self.body)
            .map_err(|e| StoreError::Sql(format!("a `{}` record does not decode: {e}", self.kind)))
    }
}

/// A workflow's end, written once by the owning run (design/durable-workflows.md E3).
#[derive(Debug, Clone)]
pub enum Outcome {
    /// JSON output.
    Success(String),
    /// JSON error.
    Error(String),
}

impl Outcome {
    /// Its row's status, output and error columns.
    pub fn columns(self) -> (WorkflowStatus, Option<String>, Option<String>) {
        match self {
            Outcome::Success(o) => (WorkflowStatus::Success, Some(o), None),
            Outcome::Error(e) => (WorkflowStatus::Error, None, Some(e)),
        }
    }
}

/// What `finish` did.
#[derive(Debug, Clone)]
pub enum Finished {
    /// This run wrote the outcome.
    Written,
    /// The run no longer owned the row; this is what is recorded.
    Adopted(Box<WorkflowRow>),
}

/// A message in a workflow's mailbox (operator → workflow).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Command id: the same id twice delivers once (design/durable-workflows.md E7).
    pub id: String,
    /// Workflow it is for.
    pub destination: String,
    /// `pause`, `resume`, `promote`, …
    pub topic: String,
    /// JSON payload.
    pub payload: String,
    /// Who sent it.
    pub sender: Option<String>,
    /// Epoch ms.
    pub created_at: i64,
    /// Until it is consumed, the workflow's fan-outs start no new step (an abort stops
    /// starting targets at once; the workflow reads the message at its next boundary).
    #[serde(default)]
    pub interrupts: bool,
}

/// The event in which a workflow lists the mailbox topics it takes where it is now (a JSON list).
/// `send` refuses other topics when asked to ([`SendRequest::guarded`]); consuming a command
/// empties it in the same transaction, until the workflow publishes what it takes next — so
/// nobody reads a stale list while the workflow acts on the command.
pub const ACCEPTS: &str = "accepts";

/// How long past an engine's lease another waits before taking its workflows over: the engine
/// itself notices within half a second that its lease lapsed and kills the step processes it
/// started (its fencing of side effects); the grace covers that, so a cut-off step never runs
/// on two engines at once.
pub const TAKEOVER_GRACE_MS: i64 = 1_000;

/// A command to deliver, with its validator.
#[derive(Debug, Clone)]
pub struct SendRequest {
    /// The message.
    pub message: Message,
    /// Reject unless the destination's [`ACCEPTS`] event includes the message's topic.
    pub guarded: bool,
    /// Records of the layer above, written in the same transaction if the command is delivered.
    pub records: Vec<Record>,
}

/// What `send` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// Stored, unconsumed until the workflow receives it.
    Delivered,
    /// The same command id was already delivered; nothing changed.
    Duplicate,
    /// The validator refused it, with the reason.
    Rejected(String),
}

/// A workflow an engine took over, and the engine that had it (read in the same transaction:
/// once re-enqueued, any engine may claim it at once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenOver {
    /// The workflow.
    pub id: String,
    /// The engine whose lease lapsed (None: no engine had claimed it).
    pub from: Option<String>,
}

/// Everything about one workflow, read at one moment (one read transaction): its row, events,
/// history and unconsumed commands agree with each other.
#[derive(Debug, Clone)]
pub struct WorkflowState {
    /// The row.
    pub row: WorkflowRow,
    /// Latest events.
    pub events: BTreeMap<String, String>,
    /// When each event was last set (epoch ms).
    pub event_times: BTreeMap<String, i64>,
    /// Steps and attempts.
    pub history: History,
    /// Commands not yet consumed.
    pub pending: Vec<Message>,
}

/// An engine that uses the database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EngineRow {
    /// Its id (`engine.executor_id`).
    pub executor_id: String,
    /// Its host.
    pub host: String,
    /// Its process id there.
    pub pid: u32,
    /// Epoch ms of its start.
    pub started_at: i64,
    /// Epoch ms of its last heartbeat, by the database's clock.
    pub heartbeat_at: i64,
    /// Milliseconds since then, by the database's clock when read.
    pub age_ms: i64,
}

impl EngineRow {
    /// Whether it runs: its lease is fresh, and — on this host — its process exists (an
    /// engine killed a moment ago leaves a fresh heartbeat behind).
    pub fn alive(&self, lease_ms: i64) -> bool {
        if self.age_ms >= lease_ms {
            return false;
        }
        self.host != crate::sys::hostname() || crate::sys::process_alive(self.pid)
    }
}

/// A filter over workflows.
#[derive(Debug, Clone, Default)]
pub struct WorkflowQuery {
    /// Only this subject.
    pub subject: Option<String>,
    /// Only live ones.
    pub live_only: bool,
    /// Newest first, at most this many.
    pub limit: u32,
    /// Only each row's head, for a list: its inputs without the spec's targets, its output and
    /// error without their per-target lines (at 100,000 targets these are megabytes each).
    /// Such a row is read, never verified, resumed or written back.
    pub heads: bool,
}

/// The system database.
#[async_trait]
pub trait Store: Send + Sync {
    /// Inserts an ENQUEUED workflow, idempotently by id (design/durable-workflows.md B.2).
    async fn start(&self, wf: NewWorkflow) -> Result<Started, StoreError>;
    /// CAS ENQUEUED → PENDING for `run_token`, dead-lettering crash loops.
    async fn claim(&self, id: &str, executor: &str, run_token: &str) -> Result<Claim, StoreError>;
    /// Recovery at the start of engine `executor` (design/durable-workflows.md B.5): closes open attempts as interrupted,
    /// re-enqueues PENDING rows, and returns every ENQUEUED id, oldest first. On a database
    /// several engines share, only the rows this engine's earlier run left and those of engines
    /// whose lease expired: the others are running elsewhere.
    async fn recover(&self, executor: &str) -> Result<Vec<String>, StoreError>;
    /// Renews `executor`'s lease and, with `take_over`, takes over the workflows of engines
    /// whose lease expired more than [`TAKEOVER_GRACE_MS`] ago (re-enqueued, their open
    /// attempts closed as interrupted); returns what it took over, for this engine to claim.
    /// One engine per database (SQLite's lock): nothing to do.
    async fn heartbeat(
        &self,
        executor: &str,
        take_over: bool,
    ) -> Result<Vec<TakenOver>, StoreError> {
        let _ = (executor, take_over);
        Ok(Vec::new())
    }
    /// Re-enqueues the PENDING workflows engine `executor` left (it stopped its own runs after
    /// its lease lapsed, and renewed it since); returns their ids, for it to claim again.
    async fn reclaim_own(&self, executor: &str) -> Result<Vec<TakenOver>, StoreError> {
        let _ = executor;
        Ok(Vec::new())
    }
    /// Engine `executor` stops cleanly: its lease ends now, so what it parked is taken over at
    /// once rather than after the lease. One engine per database: nothing to do.
    async fn release(&self, executor: &str) -> Result<(), StoreError> {
        let _ = executor;
        Ok(())
    }
    /// The engines sharing the database, with their last heartbeat (a single engine's
    /// database lists the one that recorded its lease last).
    async fn engines(&self) -> Result<Vec<EngineRow>, StoreError>;
    /// Where the database is, as it may be shown: a file's path, a URL without its password.
    fn describe(&self) -> String;
    /// An integrity check, before a read says "nothing here" (a damaged file can make a
    /// listing come back empty).
    async fn check(&self) -> Result<(), StoreError>;
    /// ENQUEUED ids `executor` may claim, oldest first: on a shared database, not those meant
    /// for another engine whose lease is fresh.
    async fn enqueued(&self, executor: &str) -> Result<Vec<String>, StoreError>;
    /// Recorded steps and attempts of a workflow.
    async fn history(&self, id: &str) -> Result<History, StoreError>;
    /// Records an attempt's start; fails with `Cancelled` or `Fenced` at a step boundary.
    async fn begin_attempt(&self, a: AttemptStart) -> Result<(), StoreError>;
    /// Records a failed attempt that will be retried.
    async fn end_attempt(&self, a: AttemptEnd) -> Result<(), StoreError>;
    /// Commits a finished step and its effects (design/durable-workflows.md B.3); a lost ack's retry is recognised.
    async fn checkpoint(&self, c: Checkpoint) -> Result<(), StoreError>;
    /// Consumes the oldest message on `topics` and records it as step `function_id`, in one
    /// transaction (design/durable-workflows.md E8). None when there is none.
    async fn consume(
        &self,
        workflow_id: &str,
        run_token: &str,
        function_id: u32,
        topics: &[String],
    ) -> Result<Option<Message>, StoreError>;
    /// Writes the outcome if this run still owns the PENDING row (design/durable-workflows.md E3).
    async fn finish(&self, id: &str, run_token: &str, out: Outcome)
    -> Result<Finished, StoreError>;
    /// The run stopped cleanly (the engine drained it at a boundary or a durable wait): its
    /// claim does not count as a crash towards `max_recovery_attempts` (a canary parked for
    /// days is resumed by many engines).
    async fn stopped(&self, id: &str, run_token: &str) -> Result<(), StoreError>;
    /// A submission nobody claimed whose submitter is gone: ENQUEUED and never claimed →
    /// CANCELLED, its [`SUBMITTER`] event replaced by [`NEVER_STARTED`] (so an operator's resume
    /// starts it like any other), in one transaction. False when it was not in that state any
    /// more (an engine claimed it meanwhile).
    async fn park_unclaimed(&self, id: &str) -> Result<bool, StoreError>;
    /// Operator cancel: live → CANCELLED, with `records` if it changed. Returns the row after.
    async fn cancel(&self, id: &str, records: Vec<Record>) -> Result<WorkflowRow, StoreError>;
    /// Operator resume: CANCELLED or dead-lettered → ENQUEUED, with `records`. Returns the row
    /// after.
    async fn resume(&self, id: &str, records: Vec<Record>) -> Result<WorkflowRow, StoreError>;
    /// Delivers an operator command to a workflow's mailbox.
    async fn send(&self, req: SendRequest) -> Result<Sent, StoreError>;
    /// Publishes events outside the checkpoint log (what a run measures while it waits: a
    /// canary's actual weight): the latest value only, never replayed, fenced by `run_token`.
    async fn publish(
        &self,
        workflow_id: &str,
        run_token: &str,
        events: Vec<(String, String)>,
    ) -> Result<(), StoreError>;
    /// Records which engine holds the lease, for display.
    async fn record_lease(&self, executor: &str, pid: u32, host: &str) -> Result<(), StoreError>;
    /// Changes whenever another connection commits (design/durable-workflows.md B.7 polling).
    async fn data_version(&self) -> Result<i64, StoreError>;
    /// Notified when another connection commits, where the database says so (PostgreSQL's
    /// LISTEN/NOTIFY): pollers wake at once rather than at their next poll.
    fn changes(&self) -> Option<&tokio::sync::Notify> {
        None
    }
    /// Why the database is gone, if it is (its file deleted or replaced, its schema dropped):
    /// checked periodically by an engine, which then stops.
    async fn lost(&self) -> Option<String> {
        None
    }
    /// The engine holding the database listens for other processes' commits (SQLite's wake
    /// socket; PostgreSQL listens already): false when it cannot, and then it only polls.
    fn listen(&self) -> bool {
        false
    }
    /// One workflow.
    async fn workflow(&self, id: &str) -> Result<Option<WorkflowRow>, StoreError>;
    /// Workflows, newest first.
    async fn workflows(&self, q: WorkflowQuery) -> Result<Vec<WorkflowRow>, StoreError>;
    /// A workflow's latest events.
    async fn events(&self, id: &str) -> Result<BTreeMap<String, String>, StoreError>;
    /// `id`'s events but those named in `skip` (a list leaves out the large ones: a plan of
    /// 100,000 targets is megabytes), never read from the database.
    async fn events_except(
        &self,
        id: &str,
        skip: &'static [&'static str],
    ) -> Result<BTreeMap<String, String>, StoreError>;
    /// A workflow's row, events, history and pending commands, read at one moment; the steps
    /// named in `skip_steps` are left out of the history (a view reads no plan or releases
    /// step: at 100,000 targets their outputs are tens of megabytes), never read.
    async fn state(
        &self,
        id: &str,
        skip_steps: &'static [&'static str],
    ) -> Result<Option<WorkflowState>, StoreError>;
    /// Unconsumed messages of a workflow.
    async fn pending_messages(&self, id: &str) -> Result<Vec<Message>, StoreError>;
    /// Clean shutdown: truncates the WAL.
    async fn close(&self) -> Result<(), StoreError>;
}
