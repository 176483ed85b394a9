//! A deployment among the others of its application and environment: the one that superseded
//! it (resuming it would undo that one), and the unfinished deploy of a version a new deploy
//! of the same version would leave behind.

use super::records::Db;
use super::state::Kind;
use crate::config::EnvSpec;
use crate::workflow::StoreError;
use crate::workflow::store::{WorkflowQuery, WorkflowRow, WorkflowStatus};

/// The newest deployment of `subject` started after deployment `id` (made at `created_at`) that
/// finished and moved its releases (a deploy, canary or rollback that succeeded): resuming `id`
/// would undo it.
pub async fn superseded_by(
    db: &dyn Db,
    subject: &str,
    id: &str,
    created_at: i64,
) -> Result<Option<WorkflowRow>, StoreError> {
    let rows = db
        .workflows(WorkflowQuery {
            subject: Some(subject.to_owned()),
            live_only: false,
            limit: 200,
            heads: true,
        })
        .await?;
    Ok(rows.into_iter().find(|r| {
        r.id != id
            && r.created_at > created_at
            && r.status == WorkflowStatus::Success
            && moves_releases(r)
    }))
}

/// A deploy of this version that stopped short, which a new deploy of it would otherwise
/// leave behind: said, with how to continue it instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfinished {
    /// Its id.
    pub id: String,
    /// How it stopped: `dead-lettered after crashed runs`, `failed`, `cancelled`.
    pub how: &'static str,
    /// Targets it recorded done.
    pub done: usize,
}

impl std::fmt::Display for Unfinished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let id = &self.id;
        match self.done {
            0 => write!(
                f,
                "{id} deployed this version before and {} with no target done. To continue \
                 {id} itself instead: `manent resume {id}`",
                self.how
            ),
            n => write!(
                f,
                "{id} deployed this version before and {} with {} done: {} as {} (unchanged) \
                 and the rest are deployed. To continue {id} itself instead: `manent resume \
                 {id}`",
                self.how,
                super::plan::count(n, "target"),
                if n == 1 { "it stays" } else { "they stay" },
                if n == 1 { "it is" } else { "they are" },
            ),
        }
    }
}

/// The newest deploy of `spec`'s subject, when it is of `spec`'s version and stopped short
/// (dead-lettered, failed or cancelled) and nothing moved the subject's releases since.
pub async fn unfinished_same(
    db: &dyn Db,
    spec: &EnvSpec,
) -> Result<Option<Unfinished>, StoreError> {
    let rows = db
        .workflows(WorkflowQuery {
            subject: Some(spec.subject()),
            live_only: false,
            limit: 50,
            heads: true,
        })
        .await?;
    let Some(last) = rows.into_iter().find(moves_releases) else {
        return Ok(None);
    };
    let how = match last.status {
        WorkflowStatus::MaxRecoveryAttemptsExceeded => "was dead-lettered after crashed runs",
        WorkflowStatus::Error => "failed",
        WorkflowStatus::Cancelled => "was cancelled",
        _ => return Ok(None),
    };
    let same = changes_releases(&last.name)
        && serde_json::from_str::<serde_json::Value>(&last.inputs)
            .is_ok_and(|i| i["spec"]["artifact"]["version"] == *spec.artifact.version);
    if !same {
        return Ok(None);
    }
    let done = db
        .releases(&spec.subject())
        .await?
        .iter()
        .filter(|r| r.deployment_id == last.id && r.rolled_back_by.is_none())
        .count();
    Ok(Some(Unfinished {
        id: last.id,
        how,
        done,
    }))
}

/// A deploy, canary or rollback — not a dry run, which moves nothing. A list's row holds its
/// inputs' head (no targets): read as JSON, not as a spec.
fn moves_releases(r: &WorkflowRow) -> bool {
    let dry =
        || serde_json::from_str::<serde_json::Value>(&r.inputs).is_ok_and(|i| i["dry_run"] == true);
    (changes_releases(&r.name) && !dry()) || r.name == Kind::Rollback.workflow()
}

/// A deploy's or a canary's workflow: one that puts a version on targets.
pub(super) fn changes_releases(workflow: &str) -> bool {
    matches!(
        Kind::of_workflow(workflow, false),
        Some(Kind::Deploy | Kind::Canary)
    )
}
