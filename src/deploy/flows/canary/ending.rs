//! How a canary ends: reverted (the candidate out of every pool, read back), failed safely, or
//! promoted.

use super::router::{Change, Changed};
use super::slots::slot_deployer;
use super::{Flight, NOT_STARTED};
use crate::deploy::Report;
use crate::deploy::run::{Run, Stop};
use crate::deploy::state::{CanaryCall, Ending, Phase, StepName, TargetState};
use crate::deploy::steps;
use crate::workflow::StepError;

impl Flight {
    /// Takes the candidate out of every pool (read back) and ends the canary, reverted.
    pub(super) async fn revert(
        &mut self,
        run: &mut Run<'_>,
        by: &str,
        why: &str,
    ) -> Result<Report, Stop> {
        // A revert the analysis sent through the mailbox (background analysis) is recorded
        // and journaled already, as its command: one decision, one journal line.
        let recorded = self
            .status
            .decisions
            .last()
            .is_some_and(|d| d.action == "revert" && d.by == by && d.why == why);
        if (by == "analysis" || by == "manent") && !recorded {
            self.decide(run, "revert", by, why).await?;
        }
        self.reverting(run).await?;
        let stable = self.record(run).stable.slot;
        let message = if by == "analysis" || by == "manent" {
            format!("reverted automatically: {why}; the stable release stays live")
        } else {
            format!("reverted by {by} ({why}); the stable release stays live")
        };
        let message = if stable.is_empty() {
            message
        } else {
            format!("{message} (the router serves {stable} only, read back)")
        };
        let mut report = run.report(Ending::Reverted, message, NOT_STARTED);
        for t in &mut report.targets {
            if t.status == TargetState::Candidate {
                t.status = TargetState::Reverted;
                t.message = "candidate out of every pool".into();
            }
        }
        self.publish(run, Phase::Done).await?;
        Ok(report)
    }

    /// A failure while the candidate may have traffic: it leaves every pool first (read back),
    /// and only then does the canary end failed. A revert that fails waits for an operator.
    pub(super) async fn fail_safely(
        &mut self,
        run: &mut Run<'_>,
        why: String,
    ) -> Result<Report, Stop> {
        self.reverting(run).await?;
        let stable = self.record(run).stable.slot;
        let mut report = run.report(
            Ending::Failed,
            format!("{why}; the candidate was taken out of traffic (the router serves {stable} only, read back)"),
            NOT_STARTED,
        );
        for t in &mut report.targets {
            if t.status == TargetState::Candidate {
                t.status = TargetState::Reverted;
                t.message = "candidate out of every pool".into();
            }
        }
        Ok(report)
    }

    /// PromoteCandidate (the releases commit with it), then RetirePrevious.
    pub(super) async fn promote(&mut self, run: &mut Run<'_>) -> Result<Promoted, Stop> {
        self.status.held = false;
        self.status.step = u32::try_from(self.plan.steps.len() + 1).unwrap_or(u32::MAX);
        self.publish(run, Phase::Promoting).await?;
        match self.change(run, Change::Promote).await? {
            Changed::Done => {}
            Changed::Manual => return Ok(Promoted::Held),
            Changed::Revert { by, why } => return Ok(Promoted::Revert { by, why }),
        }
        let spec = run.spec;
        run.plugin_step(
            StepName::Canary(CanaryCall::Retire),
            &steps::target_policy(spec),
            true,
            |h, req| async move {
                slot_deployer(&h)?
                    .retire_previous(&req)
                    .await
                    .map_err(StepError::from)
            },
        )
        .await?;
        let n = run.plan.targets().count();
        let mut report = run.report(
            Ending::Deployed,
            format!(
                "{} promoted on {} of {}",
                spec.artifact.version,
                crate::deploy::plan::count(n, "target"),
                spec.subject()
            ),
            NOT_STARTED,
        );
        for t in &mut report.targets {
            if t.status == TargetState::Candidate {
                t.status = TargetState::Deployed;
            }
        }
        self.publish(run, Phase::Done).await?;
        Ok(Promoted::Report(report))
    }
}

/// How a promotion ended.
pub(super) enum Promoted {
    Report(Report),
    Held,
    Revert { by: String, why: String },
}
