//! Errors of the durable engine: store faults, recorded step failures, and the interrupts that
//! stop a run without writing its outcome.

use serde::{Deserialize, Serialize};

/// A failure of the system database, classified by what the engine must do about it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The write may succeed later (disk full, I/O error, lock timeout): block and retry (design/durable-workflows.md E4).
    #[error("the database could not commit ({0}); retrying")]
    Transient(String),
    /// The database file is damaged. The engine stops and never rewrites the file.
    #[error(
        "the database is corrupt ({0}); manent will not touch it: restore it from a backup \
         (`sqlite3 DB '.recover'` can salvage rows)"
    )]
    Corrupt(String),
    /// Any other SQL error: a bug or a schema this binary does not know.
    #[error("database error: {0}")]
    Sql(String),
    /// Another run owns this workflow now (a resume or re-claim fenced this one out).
    #[error("workflow {0} is owned by another run")]
    Fenced(String),
    /// The workflow was cancelled by an operator.
    #[error("workflow {0} was cancelled")]
    Cancelled(String),
    /// An operator's interrupting command waits: a fan-out starts no new step.
    #[error("workflow {0} has an interrupting command waiting")]
    Interrupted(String),
    /// A replayed step has another name than the recorded one.
    #[error(
        "workflow {workflow_id} step {function_id}: recorded as `{recorded}` but the code now \
         runs `{expected}` (non-deterministic replay)"
    )]
    NonDeterministic {
        workflow_id: String,
        function_id: u32,
        recorded: String,
        expected: String,
    },
    /// A request that contradicts what is stored.
    #[error("{0}")]
    Conflict(String),
    /// A new workflow's id is another's, with other inputs (a submission tries a new id).
    #[error("deployment id {id} is already used by another {kind} with different inputs")]
    IdInUse { id: String, kind: String },
    /// No such workflow.
    #[error("no deployment with id {0}")]
    NotFound(String),
    /// The database's directory or file could not be opened.
    #[error("cannot open the database {path}: {reason}")]
    Open { path: String, reason: String },
    /// The writer thread has stopped (the engine is shutting down).
    #[error("the database writer has stopped")]
    Closed,
    /// The database went away under the engine: its file was deleted or replaced, its schema
    /// dropped. Nothing more can be recorded: the engine stops (exit 6), never says "done".
    #[error("{0}")]
    Lost(String),
}

impl StoreError {
    /// True when retrying the same transaction later can succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Transient(_))
    }

    /// True when the database itself is gone (deleted, replaced, its schema dropped).
    pub fn is_lost(&self) -> bool {
        matches!(self, StoreError::Lost(_))
    }

    /// What the database said, for a line that has its own wording around it.
    pub fn cause(&self) -> String {
        match self {
            StoreError::Transient(c) | StoreError::Corrupt(c) | StoreError::Sql(c) => c.clone(),
            other => other.to_string(),
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        use rusqlite::ffi::ErrorCode;
        match err.sqlite_error_code() {
            Some(
                ErrorCode::DiskFull
                | ErrorCode::SystemIoFailure
                | ErrorCode::DatabaseBusy
                | ErrorCode::DatabaseLocked
                | ErrorCode::OutOfMemory
                | ErrorCode::CannotOpen,
            ) => StoreError::Transient(err.to_string()),
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => {
                StoreError::Corrupt(err.to_string())
            }
            _ => StoreError::Sql(err.to_string()),
        }
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(err: tokio_postgres::Error) -> Self {
        let Some(db) = err.as_db_error() else {
            // No answer from the server: the connection broke, timed out or was refused — or
            // this side could not encode a value, which retrying would not change.
            let mut source = std::error::Error::source(&err);
            let mut io = false;
            // What went wrong underneath (a TLS handshake's "invalid peer certificate…").
            let mut text = err.to_string();
            while let Some(s) = source {
                io |= s.is::<std::io::Error>();
                let said = s.to_string();
                if !text.contains(&said) {
                    text = format!("{text}: {said}");
                }
                source = s.source();
            }
            return if err.is_closed() || io || text.contains("timed out") {
                StoreError::Transient(format!("PostgreSQL: {text}"))
            } else {
                StoreError::Sql(format!("PostgreSQL: {text}"))
            };
        };
        let said = match db.constraint() {
            Some(c) => format!("PostgreSQL: {} (constraint {c})", db.message()),
            None => format!("PostgreSQL: {}", db.message()),
        };
        // A table manent made is gone (42P01, 3F000 a schema): dropped under the engine.
        if matches!(db.code().code(), "42P01" | "3F000") {
            return StoreError::Lost(format!(
                "manent's schema in the shared database is gone ({said}): it was dropped while \
                 the engine ran; nothing more can be recorded, the engine stops. Restore the \
                 database from a backup; `manent db check` says what is there"
            ));
        }
        match &db.code().code()[..2] {
            // Connection exceptions, insufficient resources, operator intervention (a server
            // shutting down), lock timeouts, serialization failures and deadlocks: later works.
            "08" | "53" | "57" | "55" | "40" => StoreError::Transient(said),
            _ => StoreError::Sql(said),
        }
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(err: serde_json::Error) -> Self {
        StoreError::Sql(format!("stored JSON does not decode: {err}"))
    }
}

/// The crash harness's failpoint before a commit (`store.commit`): an I/O error.
pub fn injected_before_commit() -> Result<(), StoreError> {
    use crate::failpoint::{Fault, hit};
    if hit("store.commit", "") == Some(Fault::IoError) {
        return Err(StoreError::Transient(
            "injected I/O error before commit".into(),
        ));
    }
    Ok(())
}

/// The crash harness's failpoint after a commit (`store.after_commit`): the commit is durable
/// but the caller is told otherwise — a lost acknowledgement.
pub fn injected_after_commit() -> Result<(), StoreError> {
    use crate::failpoint::{Fault, hit};
    if hit("store.after_commit", "") == Some(Fault::IoError) {
        return Err(StoreError::Transient(
            "injected I/O error after commit".into(),
        ));
    }
    Ok(())
}

/// Why a step body failed, as the body reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepError {
    /// A retry may succeed.
    Retryable(String),
    /// A retry would fail the same way: the step fails at once.
    Permanent(String),
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepError::Retryable(m) | StepError::Permanent(m) => f.write_str(m),
        }
    }
}

/// How a recorded step failure came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The body returned a permanent error: tried once.
    Permanent,
    /// Every attempt of the retry budget failed.
    RetriesExhausted,
}

/// A step's failure as it is recorded and replayed (design/durable-workflows.md E1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepFailure {
    /// Permanent or exhausted.
    pub kind: FailureKind,
    /// The last attempt's error.
    pub message: String,
    /// Attempts made, including those a crash interrupted.
    pub attempts: u32,
    /// Every attempt's error, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

impl StepFailure {
    /// True when no retry was or would be attempted.
    pub fn is_permanent(&self) -> bool {
        self.kind == FailureKind::Permanent
    }
}

impl std::fmt::Display for StepFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            FailureKind::Permanent => write!(f, "{} (permanent, not retried)", self.message),
            FailureKind::RetriesExhausted if self.attempts == 1 => {
                write!(f, "{} (failed its only attempt)", self.message)
            }
            FailureKind::RetriesExhausted => {
                write!(f, "{} (failed {} attempts)", self.message, self.attempts)
            }
        }
    }
}

/// A recorded step outcome: the value, or the failure to replay.
pub type StepResult<T> = Result<T, StepFailure>;

/// Why a run stops without writing its workflow's outcome.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Interrupt {
    /// An operator cancelled the workflow; it stopped at a step boundary.
    #[error("cancelled")]
    Cancelled,
    /// The engine is shutting down; the workflow stays PENDING and resumes at the next start.
    #[error("the engine is shutting down")]
    ShuttingDown,
    /// Another run owns the workflow.
    #[error("fenced out by another run")]
    Fenced,
    /// An interrupting operator command waits; the step (a fan-out's first attempt) did not
    /// start. Only fan-outs see it: they report the step as never started.
    #[error("an operator command interrupts the workflow")]
    Interrupted,
    /// Replay diverged from the recorded steps.
    #[error("{0}")]
    NonDeterministic(String),
    /// The database failed in a way retrying cannot fix.
    #[error("{0}")]
    Store(String),
}

impl From<StoreError> for Interrupt {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Cancelled(_) => Interrupt::Cancelled,
            StoreError::Fenced(_) => Interrupt::Fenced,
            StoreError::Interrupted(_) => Interrupt::Interrupted,
            e @ StoreError::NonDeterministic { .. } => Interrupt::NonDeterministic(e.to_string()),
            e => Interrupt::Store(e.to_string()),
        }
    }
}
