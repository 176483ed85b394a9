//! The claim decision, the same on every store: whose a workflow is after a claiming update,
//! or whether it is dead-lettered. Each store writes what it decides in its own SQL.

use super::{WorkflowRow, WorkflowStatus};

/// What a claim attempt comes to, decided the same on every store from the row read after its
/// `UPDATE … WHERE status = 'ENQUEUED'` (`took`: that update changed the row). Each store then
/// writes what the decision needs (a dead letter) in its own SQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimDecision {
    /// This run holds it: taken now, or by this very run before (a retry after a lost
    /// acknowledgement finds its own claim).
    Claimed,
    /// Someone else holds it, or it has ended.
    NotClaimable,
    /// Taken, but more runs of it crashed than it may have: it is dead-lettered.
    DeadLetter,
}

/// The claim decision for `row`, read after the claiming update (`took`: the update changed
/// it), by the run holding `run_token`.
pub fn decide_claim(took: bool, row: &WorkflowRow, run_token: &str) -> ClaimDecision {
    if !took {
        let ours =
            row.status == WorkflowStatus::Pending && row.run_token.as_deref() == Some(run_token);
        return if ours {
            ClaimDecision::Claimed
        } else {
            ClaimDecision::NotClaimable
        };
    }
    if row.recovery_attempts > row.max_recovery_attempts {
        ClaimDecision::DeadLetter
    } else {
        ClaimDecision::Claimed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(status: WorkflowStatus, token: Option<&str>, attempts: u32) -> WorkflowRow {
        let mut row = WorkflowRow::example("d-1", status);
        row.run_token = token.map(str::to_owned);
        row.recovery_attempts = attempts;
        row
    }

    #[test]
    fn a_claim_is_this_runs_another_runs_or_a_dead_letter() {
        use ClaimDecision as D;
        use WorkflowStatus::{Pending, Success};
        // Taken now, within the crash budget.
        assert_eq!(
            decide_claim(true, &row(Pending, Some("r1"), 1), "r1"),
            D::Claimed
        );
        assert_eq!(
            decide_claim(true, &row(Pending, Some("r1"), 5), "r1"),
            D::Claimed
        );
        // Taken now, but one run more than it may have: dead-lettered.
        assert_eq!(
            decide_claim(true, &row(Pending, Some("r1"), 6), "r1"),
            D::DeadLetter
        );
        // Not taken now: a retry after a lost acknowledgement finds its own claim...
        assert_eq!(
            decide_claim(false, &row(Pending, Some("r1"), 6), "r1"),
            D::Claimed
        );
        // ...but another run's claim, or an ended workflow, is nobody's to take.
        assert_eq!(
            decide_claim(false, &row(Pending, Some("r2"), 1), "r1"),
            D::NotClaimable
        );
        assert_eq!(
            decide_claim(false, &row(Success, Some("r1"), 1), "r1"),
            D::NotClaimable
        );
        assert_eq!(
            decide_claim(false, &row(Pending, None, 1), "r1"),
            D::NotClaimable
        );
    }
}
