//! What a run's report is made of: each target's latest line, and the targets an operator
//! left out. Pure bookkeeping, so the lines a report gives are tested without running a
//! workflow.

use std::collections::{BTreeMap, BTreeSet};

use crate::deploy::TargetReport;
use crate::deploy::plan::{Plan, PlannedTarget};
use crate::deploy::state::TargetState;
use crate::deploy::steps::TargetDone;
use crate::workflow::{StepFailure, StepResult};

/// Each target's latest line, by name, and the targets an operator skipped.
#[derive(Debug, Default)]
pub struct Tally {
    /// Each target's latest result, by name.
    pub results: BTreeMap<String, TargetReport>,
    /// Targets an operator left out.
    pub skipped: BTreeSet<String>,
}

impl Tally {
    /// A target's result replaces its earlier one (a retry's outcome is the one reported).
    pub fn record(&mut self, batch: u32, t: &PlannedTarget, r: &StepResult<TargetDone>) {
        let line = match r {
            Ok(done) => done_line(batch, t, done),
            Err(f) => failure_line(batch, t, f),
        };
        self.results.insert(t.name.clone(), line);
    }

    /// Every target's line, in plan order; `unstarted` says why a target never ran.
    pub fn lines(&self, plan: &Plan, unstarted: &str) -> Vec<TargetReport> {
        plan.targets()
            .map(|(b, t)| {
                self.results
                    .get(&t.name)
                    .cloned()
                    .unwrap_or_else(|| TargetReport {
                        moniker: t.moniker.to_string(),
                        batch: b.index,
                        status: TargetState::Skipped,
                        attempts: 0,
                        message: unstarted.to_owned(),
                        duration_ms: 0,
                    })
            })
            .collect()
    }

    /// `web-3 failed: …`, for the first of `failed`.
    pub fn first_failure(&self, failed: &[&PlannedTarget]) -> String {
        let Some(f) = failed.first() else {
            return "a target failed".into();
        };
        let why = self
            .results
            .get(&f.name)
            .map(|r| r.message.as_str())
            .unwrap_or_default();
        format!("{} failed: {why}", f.name)
    }
}

/// The line of a target whose step returned.
pub(super) fn done_line(batch: u32, t: &PlannedTarget, done: &TargetDone) -> TargetReport {
    TargetReport {
        moniker: t.moniker.to_string(),
        batch,
        status: done.status,
        attempts: done.attempt,
        message: done.message.clone(),
        duration_ms: done.duration_ms,
    }
}

/// The line of a target whose step failed for good.
pub(super) fn failure_line(batch: u32, t: &PlannedTarget, f: &StepFailure) -> TargetReport {
    TargetReport {
        moniker: t.moniker.to_string(),
        batch,
        status: TargetState::Failed,
        attempts: f.attempts,
        message: f.to_string(),
        duration_ms: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deploy::plan::Batch;
    use crate::moniker::Moniker;
    use crate::workflow::FailureKind;

    fn target(name: &str) -> PlannedTarget {
        PlannedTarget {
            name: name.to_owned(),
            host: String::new(),
            moniker: Moniker::new("prod", "web", "exec", name).unwrap(),
            labels: BTreeMap::new(),
        }
    }

    fn plan(batches: &[&[&str]]) -> Plan {
        Plan {
            batches: (1..)
                .zip(batches)
                .map(|(index, names)| Batch {
                    index,
                    targets: names.iter().map(|n| target(n)).collect(),
                })
                .collect(),
            hooks: Vec::new(),
        }
    }

    fn deployed(attempt: u32) -> StepResult<TargetDone> {
        Ok(TargetDone {
            status: TargetState::Deployed,
            message: format!("deployed on attempt {attempt}"),
            duration_ms: 7,
            attempt,
            version: "2.0.0".into(),
        })
    }

    fn failed(attempts: u32) -> StepResult<TargetDone> {
        Err(StepFailure {
            kind: FailureKind::RetriesExhausted,
            message: "connection refused".into(),
            attempts,
            errors: Vec::new(),
        })
    }

    #[test]
    fn lines_follow_the_plan_and_a_target_never_run_says_why() {
        let plan = plan(&[&["a", "b"], &["c"]]);
        let mut tally = Tally::default();
        tally.record(1, &target("b"), &deployed(1));
        tally.record(1, &target("a"), &failed(3));
        let lines = tally.lines(&plan, "not started: a target failed first");
        let seen: Vec<(&str, u32, TargetState, u32, &str)> = lines
            .iter()
            .map(|l| {
                let m = l.moniker.as_str();
                (m, l.batch, l.status, l.attempts, l.message.as_str())
            })
            .collect();
        assert_eq!(
            seen,
            [
                (
                    "prod::web::exec::a",
                    1,
                    TargetState::Failed,
                    3,
                    "connection refused (failed 3 attempts)"
                ),
                (
                    "prod::web::exec::b",
                    1,
                    TargetState::Deployed,
                    1,
                    "deployed on attempt 1"
                ),
                (
                    "prod::web::exec::c",
                    2,
                    TargetState::Skipped,
                    0,
                    "not started: a target failed first"
                ),
            ]
        );
        assert_eq!(lines[1].duration_ms, 7);
    }

    #[test]
    fn a_retry_s_outcome_replaces_the_failure_and_the_first_failure_names_its_target() {
        let mut tally = Tally::default();
        let (a, b) = (target("a"), target("b"));
        tally.record(1, &a, &failed(1));
        tally.record(1, &b, &failed(2));
        assert_eq!(
            tally.first_failure(&[&a, &b]),
            "a failed: connection refused (failed its only attempt)"
        );
        tally.record(1, &a, &deployed(2));
        assert_eq!(tally.results["a"].status, TargetState::Deployed);
        assert_eq!(tally.results["a"].attempts, 2);
        assert_eq!(
            tally.first_failure(&[&b]),
            "b failed: connection refused (failed 2 attempts)"
        );
        assert_eq!(tally.first_failure(&[]), "a target failed");
    }
}
