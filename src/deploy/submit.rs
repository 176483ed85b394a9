//! Starting deploys and rollbacks, in-process or for an engine running elsewhere: one live
//! deployment per application and environment; re-running an interrupted deploy resumes it.

use super::{DEPLOY, DeployInput, ROLLBACK, RollbackInput, VERSION};
use crate::config::EnvSpec;
use crate::operator::Operator;
use crate::workflow::StoreError;
use crate::workflow::store::{NewWorkflow, Started, Store, WorkflowRow};

/// What a submission did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submitted {
    /// A new deployment.
    Started(String),
    /// The same deploy was interrupted; it continues from its last checkpoint.
    Resuming(String),
}

impl Submitted {
    /// The deployment id.
    pub fn id(&self) -> &str {
        match self {
            Submitted::Started(id) | Submitted::Resuming(id) => id,
        }
    }
}

/// Why a submission was refused.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// Another deployment of the same application and environment is live.
    #[error(
        "{id} ({what}) is still in progress on {subject}: wait for it, stop it with \
         `manent cancel {id}`, or continue it with `manent resume {id}`"
    )]
    Busy {
        id: String,
        what: String,
        subject: String,
    },
    /// The database refused.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Who submits, why, and the engine's crash-loop limit.
#[derive(Debug, Clone)]
pub struct Submission<'a> {
    /// The operator.
    pub operator: &'a Operator,
    /// Their reason, journaled.
    pub reason: Option<&'a str>,
    /// Crashed runs before the deployment is dead-lettered.
    pub max_recovery_attempts: u32,
}

/// A fresh deployment id: `dep-YYYYMMDD-HHMMSS-xxxx` (UTC), sortable and easy to read aloud.
pub fn new_id() -> String {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let digits: String = now.chars().filter(char::is_ascii_digit).collect();
    let (date, time) = digits.split_at(8.min(digits.len()));
    format!("dep-{date}-{time}-{:04x}", fastrand::u16(..))
}

fn describe(row: &WorkflowRow) -> String {
    let input: Option<DeployInput> = serde_json::from_str(&row.inputs).ok();
    match input {
        Some(i) if row.name == DEPLOY => {
            format!("deploy of {} by {}", i.spec.artifact.version, i.operator)
        }
        _ => row.name.clone(),
    }
}

/// Submits a deploy. An identical deploy that is still live (interrupted by a crash, say) is
/// resumed instead of refused.
pub async fn deploy(
    store: &dyn Store,
    spec: &EnvSpec,
    dry_run: bool,
    sub: &Submission<'_>,
) -> Result<Submitted, SubmitError> {
    let input = DeployInput {
        spec: spec.clone(),
        dry_run,
        operator: sub.operator.display(),
    };
    let detail = format!(
        "{}{} to {} targets",
        if dry_run { "dry-run of " } else { "" },
        spec.artifact.version,
        spec.targets.len()
    );
    let same = |row: &WorkflowRow| {
        row.name == DEPLOY
            && serde_json::from_str::<DeployInput>(&row.inputs)
                .is_ok_and(|i| i.spec == input.spec && i.dry_run == input.dry_run)
    };
    let inputs = serde_json::to_string(&input).map_err(StoreError::from)?;
    submit(store, DEPLOY, inputs, spec, detail, sub, same).await
}

/// Submits a rollback of `spec`'s application and environment.
pub async fn rollback(
    store: &dyn Store,
    spec: &EnvSpec,
    sub: &Submission<'_>,
) -> Result<Submitted, SubmitError> {
    let input = RollbackInput {
        spec: spec.clone(),
        operator: sub.operator.display(),
    };
    let inputs = serde_json::to_string(&input).map_err(StoreError::from)?;
    let detail = format!("{} targets to their previous release", spec.targets.len());
    submit(store, ROLLBACK, inputs, spec, detail, sub, |_| false).await
}

async fn submit(
    store: &dyn Store,
    kind: &str,
    inputs: String,
    spec: &EnvSpec,
    detail: String,
    sub: &Submission<'_>,
    same: impl Fn(&WorkflowRow) -> bool,
) -> Result<Submitted, SubmitError> {
    let id = new_id();
    let subject = spec.subject();
    let journal = sub
        .operator
        .journal(kind, Some(&id), Some(&subject), Some(detail), sub.reason);
    let wf = NewWorkflow {
        id: id.clone(),
        name: kind.to_owned(),
        definition_version: VERSION,
        inputs,
        subject: Some(subject.clone()),
        dedup_key: Some(subject.clone()),
        max_recovery_attempts: sub.max_recovery_attempts,
        journal: Some(journal),
    };
    // A start is idempotent by id, so a commit whose acknowledgement was lost is retried safely.
    let started = crate::workflow::retry::until_committed(
        || store.start(wf.clone()),
        |e| {
            tracing::warn!(error = %e, "the database refused the new deployment; retrying");
        },
    )
    .await?;
    match started {
        Started::Created | Started::Existing(_) => Ok(Submitted::Started(id)),
        Started::Duplicate(live) if same(&live) => Ok(Submitted::Resuming(live.id)),
        Started::Duplicate(live) => Err(SubmitError::Busy {
            what: describe(&live),
            id: live.id,
            subject,
        }),
    }
}
