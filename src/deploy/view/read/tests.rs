//! The view's named parts, each on its own: targets, the report's word, the state.

use super::*;
use crate::deploy::TargetReport;

fn plan(batches: &[&[&str]]) -> ViewPlan {
    ViewPlan {
        batches: (1..)
            .zip(batches)
            .map(|(index, names)| ViewBatch {
                index,
                targets: names
                    .iter()
                    .map(|n| ViewTarget {
                        name: (*n).to_owned(),
                        moniker: format!("prod::web::exec::{n}"),
                    })
                    .collect(),
            })
            .collect(),
        hooks: Vec::new(),
    }
}

fn report(ending: Ending, lines: &[(&str, TargetState, &str)]) -> Report {
    let mut r = Report::new(Kind::Deploy, "2.0.0");
    r.ending = ending;
    r.targets = lines
        .iter()
        .map(|(n, status, message)| TargetReport {
            moniker: format!("prod::web::exec::{n}"),
            batch: 1,
            status: *status,
            attempts: 0,
            message: (*message).to_owned(),
            duration_ms: 0,
        })
        .collect();
    r
}

#[test]
fn every_planned_target_starts_pending_in_its_batch() {
    let targets = targets_of(Some(&plan(&[&["a", "b"], &["c"]])), "");
    let seen: Vec<(&str, u32, TargetState)> = targets
        .iter()
        .map(|t| (t.name.as_str(), t.batch, t.state))
        .collect();
    assert_eq!(
        seen,
        [
            ("a", 1, TargetState::Pending),
            ("b", 1, TargetState::Pending),
            ("c", 2, TargetState::Pending)
        ]
    );
    assert!(
        targets_of(None, "not json").is_empty(),
        "no plan, no inputs: no targets"
    );
}

#[test]
fn the_report_speaks_only_for_targets_no_step_touched() {
    let mut targets = targets_of(Some(&plan(&[&["a", "b", "c"]])), "");
    targets[0].state = TargetState::Deployed;
    targets[0].message = "deployed".into();
    let r = report(
        Ending::Failed,
        &[
            (
                "a",
                TargetState::Failed,
                "the report's word, not the step's",
            ),
            (
                "b",
                TargetState::Skipped,
                "not started: the deploy stopped first",
            ),
            ("c", TargetState::Skipped, "skipped by alice"),
        ],
    );
    apply_report(&mut targets, &r, false);
    let seen: Vec<(TargetState, &str)> = targets
        .iter()
        .map(|t| (t.state, t.message.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (TargetState::Deployed, "deployed"),
            (TargetState::NotStarted, "the deploy stopped first"),
            (TargetState::Skipped, "skipped by alice"),
        ]
    );
}

#[test]
fn the_state_an_operator_reads_comes_from_status_phase_and_report() {
    use DeploymentState as D;
    use WorkflowStatus as W;
    let awaiting = Phase::AwaitingDecision {
        batch: 1,
        failed: vec!["a".into()],
        canary: false,
    };
    let paused = Phase::Paused { before: 2, of: 3 };
    let running = Phase::Batch { batch: 1, of: 3 };
    assert_eq!(state_of(W::Enqueued, None, None, &[]), D::Queued);
    assert_eq!(state_of(W::Pending, Some(&running), None, &[]), D::Running);
    assert_eq!(state_of(W::Pending, Some(&paused), None, &[]), D::Paused);
    assert_eq!(
        state_of(W::Pending, Some(&awaiting), None, &[]),
        D::FailedAwaiting
    );
    assert_eq!(
        state_of(W::MaxRecoveryAttemptsExceeded, None, None, &[]),
        D::DeadLettered
    );
    let deployed = report(Ending::Deployed, &[]);
    assert_eq!(
        state_of(W::Success, None, Some(&deployed), &[]),
        D::Deployed
    );
    let mut skipped = deployed.clone();
    skipped.skipped = 1;
    assert_eq!(
        state_of(W::Success, None, Some(&skipped), &[]),
        D::DeployedWithSkips
    );
    let rolled_back = report(Ending::RolledBack, &[]);
    assert_eq!(
        state_of(W::Error, None, Some(&rolled_back), &[]),
        D::RolledBack
    );
    assert_eq!(
        state_of(W::Error, None, None, &[]),
        D::Failed,
        "no report: failed"
    );
    // Cancelled while a call still runs on a target: cancelling, until it returns.
    let mut targets = targets_of(Some(&plan(&[&["a"]])), "");
    assert_eq!(state_of(W::Cancelled, None, None, &targets), D::Cancelled);
    targets[0].state = TargetState::Running;
    assert_eq!(state_of(W::Cancelled, None, None, &targets), D::Cancelling);
}
