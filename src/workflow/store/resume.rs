//! What an operator's resume does, decided the same on every store: a cancelled or
//! dead-lettered workflow is enqueued again, one that is queued or running (an interrupted run
//! the next engine recovers included) is left as it is, a finished one is refused, and so is one whose application and environment another live workflow
//! holds. Each store reads the rows and writes the resume in its own SQL.

use super::{WorkflowRow, WorkflowStatus};
use crate::workflow::StoreError;

/// What a resume does to a workflow, from the row read before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// It is enqueued again (it was cancelled, or dead-lettered after crashed runs).
    Enqueue,
    /// It is queued or running already: nothing changes.
    AlreadyLive,
}

/// The resume of `before`; a finished workflow is refused.
pub fn decide_resume(before: &WorkflowRow) -> Result<Resume, StoreError> {
    match before.status {
        WorkflowStatus::Cancelled | WorkflowStatus::MaxRecoveryAttemptsExceeded => {
            Ok(Resume::Enqueue)
        }
        WorkflowStatus::Enqueued | WorkflowStatus::Pending => Ok(Resume::AlreadyLive),
        WorkflowStatus::Success | WorkflowStatus::Error => Err(StoreError::Conflict(format!(
            "{} already finished ({}); start a new deploy instead",
            before.id,
            before.status.as_str()
        ))),
    }
}

/// The refusal of resuming `id` while `live`, of the same application and environment, is in
/// progress.
pub fn resume_blocked(id: &str, live: &WorkflowRow) -> StoreError {
    StoreError::Conflict(format!(
        "cannot resume {id}: {} of the same application and environment is in progress; \
         wait for it or cancel it first",
        live.id
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_run_is_enqueued_a_live_one_left_and_a_finished_one_refused() {
        use WorkflowStatus as S;
        let decide = |s| decide_resume(&WorkflowRow::example("d-1", s)).map_err(|e| e.to_string());
        assert_eq!(decide(S::Cancelled), Ok(Resume::Enqueue));
        assert_eq!(decide(S::MaxRecoveryAttemptsExceeded), Ok(Resume::Enqueue));
        assert_eq!(decide(S::Enqueued), Ok(Resume::AlreadyLive));
        assert_eq!(decide(S::Pending), Ok(Resume::AlreadyLive));
        for s in [S::Success, S::Error] {
            let e = decide(s).unwrap_err();
            assert!(e.contains("d-1 already finished"), "{e}");
            assert!(e.contains("start a new deploy instead"), "{e}");
        }
        let live = WorkflowRow::example("d-2", S::Pending);
        let e = resume_blocked("d-1", &live).to_string();
        assert!(
            e.contains("cannot resume d-1: d-2 of the same application"),
            "{e}"
        );
    }
}
