//! The words deployments are described in, as types shared by the engine, the CLI and the
//! console: what a deployment is doing ([`Phase`]), which operator commands it takes there
//! ([`Topic`]), each target's state ([`TargetState`]), the one-word state an operator reads
//! ([`DeploymentState`]), how it ended ([`Ending`]) and its durable step names ([`StepName`]).

use std::fmt;

use serde::{Deserialize, Serialize};

mod operator_command;
mod step_name;

pub use self::operator_command::{Delivered, OperatorCommand};
pub use self::step_name::{Action, CanaryCall, NotAStepName, StepName};

/// A workflow kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A deploy.
    Deploy,
    /// A dry-run: plan, validate, ask the plugin; change nothing.
    DryRun,
    /// A rollback to the previous release.
    Rollback,
    /// A canary: the candidate beside the stable release, traffic moved step by step.
    Canary,
    /// The `test` hooks, run on demand against what is live.
    Test,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 5] = [
        Kind::Deploy,
        Kind::DryRun,
        Kind::Rollback,
        Kind::Canary,
        Kind::Test,
    ];

    /// The name of the durable workflow that runs it: a dry-run is a deploy's workflow told
    /// to change nothing (its inputs say so).
    pub fn workflow(self) -> &'static str {
        match self {
            Kind::Deploy | Kind::DryRun => "deploy",
            Kind::Rollback => "rollback",
            Kind::Canary => "canary",
            Kind::Test => "test",
        }
    }

    /// The kind a stored workflow named `name` is, given whether its inputs ask for a dry-run;
    /// None for a workflow no deploy kind runs.
    pub fn of_workflow(name: &str, dry_run: bool) -> Option<Kind> {
        match name {
            "deploy" if dry_run => Some(Kind::DryRun),
            _ => Kind::ALL
                .into_iter()
                .find(|k| *k != Kind::DryRun && k.workflow() == name),
        }
    }

    /// `deploy`, `dry-run`, `rollback`, `canary`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Deploy => "deploy",
            Kind::DryRun => "dry-run",
            Kind::Rollback => "rollback",
            Kind::Canary => "canary",
            Kind::Test => "test",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, so tables can align it with `{:<10}`.
        f.pad(self.as_str())
    }
}

/// What a deployment is doing, published as its `phase` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// Computing the plan, starting the plugin.
    Planning,
    /// The plugin checks the request.
    Validating,
    /// Asking the plugin what is live (a rollback).
    Inspecting,
    /// Working on batch `batch` of `of`.
    Batch { batch: u32, of: u32 },
    /// Paused by an operator before batch `before`.
    Paused { before: u32, of: u32 },
    /// The strategy's pause before batch `before`.
    Waiting { before: u32, of: u32 },
    /// Targets failed: waiting for an operator to retry, skip or abort (a canary's candidate:
    /// retry or revert).
    AwaitingDecision {
        batch: u32,
        failed: Vec<String>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        canary: bool,
    },
    /// Rolling back what the deployment changed (`atomic`, or an operator's abort).
    Undoing,
    /// Hook `index` of `of` of `event` runs (`name`).
    Hook {
        event: crate::config::Event,
        name: String,
        index: u32,
        of: u32,
    },
    /// A canary's slots are being prepared.
    Slots,
    /// A canary's candidate is being deployed, batch `batch` of `of`.
    Candidate { batch: u32, of: u32 },
    /// A canary at step `step` of `of`, doing `doing`.
    Canary {
        step: u32,
        of: u32,
        #[serde(flatten)]
        doing: Doing,
    },
    /// The candidate becomes the stable release.
    Promoting,
    /// The candidate is taken out of traffic.
    Reverting,
    /// Finished.
    Done,
    /// Finished with a failure.
    Failed,
}

impl Phase {
    /// True while the deployment waits for an operator.
    pub fn waits_for_operator(&self) -> bool {
        matches!(
            self,
            Phase::Paused { .. }
                | Phase::AwaitingDecision { .. }
                | Phase::Canary {
                    doing: Doing::Pause | Doing::Held { .. } | Doing::RouterFailed { .. },
                    ..
                }
        )
    }
}

/// What a canary does at its current step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "doing", rename_all = "snake_case")]
pub enum Doing {
    /// Setting the candidate's weight.
    Weight { weight: u32 },
    /// Scaling the candidate.
    Scale { percent: u32 },
    /// Routing testers to the candidate.
    Testers,
    /// Running analysis: run `run` of `runs`.
    Analysis { run: u32, runs: u32 },
    /// Waiting for an operator to promote (a `pause: {}` step).
    Pause,
    /// A timed pause, until epoch ms `until`.
    Timed { until: i64 },
    /// Held by an operator at `weight` (a weight set by hand, `back`, `pause`): the automatic
    /// steps wait for `resume` or `promote`.
    Held { weight: u32 },
    /// A router call failed (`call`: what it was doing); traffic stays where the router
    /// left it (`weight` as recorded) until an operator retries, reverts, sets a weight or
    /// abandons the canary.
    RouterFailed {
        call: String,
        weight: u32,
        /// The failed call was a revert (then `revert` and `weight` are not offered).
        #[serde(default)]
        reverting: bool,
    },
}

impl fmt::Display for Doing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Doing::Weight { weight } => format!("weight {weight}%"),
            Doing::Scale { percent } => format!("scale {percent}%"),
            Doing::Testers => "routing testers".to_owned(),
            Doing::Analysis { run, runs } => format!("analysis {run}/{runs}"),
            Doing::Pause => "paused until promoted".to_owned(),
            Doing::Timed { until } => {
                let t = std::time::UNIX_EPOCH
                    + std::time::Duration::from_millis(u64::try_from(*until).unwrap_or(0));
                let at = humantime::format_rfc3339_seconds(t).to_string();
                format!("paused until {}", at.get(11..19).unwrap_or(&at))
            }
            Doing::Held { weight } => format!("held at {weight}%"),
            Doing::RouterFailed { call, weight, .. } => {
                format!("the router failed ({call}) at {weight}%: decide")
            }
        };
        f.pad(&s)
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Phase::Planning => "planning".to_owned(),
            Phase::Validating => "validating".to_owned(),
            Phase::Inspecting => "inspecting".to_owned(),
            Phase::Batch { batch, of } => format!("batch {batch}/{of}"),
            Phase::Paused { before, of } => format!("paused before batch {before}/{of}"),
            Phase::Waiting { before, of } => format!("waiting before batch {before}/{of}"),
            Phase::AwaitingDecision {
                failed,
                canary: false,
                ..
            } => format!("{} failed: retry, skip or abort", names(failed)),
            Phase::AwaitingDecision { failed, .. } => {
                format!("{} failed: retry or revert", names(failed))
            }
            Phase::Undoing => "rolling back".to_owned(),
            Phase::Hook {
                event,
                name,
                index,
                of,
            } => format!("{event} hook {index}/{of}: {name}"),
            Phase::Slots => "preparing slots".to_owned(),
            Phase::Candidate { batch, of } if *of > 1 => {
                format!("deploying the candidate, batch {batch}/{of}")
            }
            Phase::Candidate { .. } => "deploying the candidate".to_owned(),
            Phase::Canary { step, of, doing } => format!("step {step}/{of}: {doing}"),
            Phase::Promoting => "promoting".to_owned(),
            Phase::Reverting => "reverting".to_owned(),
            Phase::Done => "done".to_owned(),
            Phase::Failed => "failed".to_owned(),
        };
        f.pad(&s)
    }
}

/// `web-1`, `web-1 and web-2`, `web-1, web-2 and 3 more`.
pub fn names(list: &[String]) -> String {
    match list {
        [] => "nothing".into(),
        [one] => one.clone(),
        [a, b] => format!("{a} and {b}"),
        [a, b, rest @ ..] => format!("{a}, {b} and {} more", rest.len()),
    }
}

/// An operator command a workflow reads from its mailbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Topic {
    /// Stop before the next batch.
    Pause,
    /// Continue after a pause.
    Resume,
    /// Run failed targets again.
    Retry,
    /// Leave a target out of the deployment.
    Skip,
    /// Stop and roll back what the deployment changed.
    Abort,
    /// A canary: end the current pause (or, `full`, skip the remaining steps).
    Promote,
    /// A canary: take the candidate out of traffic and end.
    Revert,
    /// A canary: set the candidate's weight by hand and hold.
    Weight,
    /// A canary: go back to the previous step's weight and hold.
    Back,
    /// A canary whose router failed: end it failed where traffic is, with a typed reason.
    Abandon,
}

impl Topic {
    /// Every topic.
    pub const ALL: [Topic; 10] = [
        Topic::Pause,
        Topic::Resume,
        Topic::Retry,
        Topic::Skip,
        Topic::Abort,
        Topic::Promote,
        Topic::Revert,
        Topic::Weight,
        Topic::Back,
        Topic::Abandon,
    ];

    /// The mailbox topic.
    pub fn as_str(self) -> &'static str {
        match self {
            Topic::Pause => "pause",
            Topic::Resume => "resume",
            Topic::Retry => "retry",
            Topic::Skip => "skip",
            Topic::Abort => "abort",
            Topic::Promote => "promote",
            Topic::Revert => "revert",
            Topic::Weight => "weight",
            Topic::Back => "back",
            Topic::Abandon => "abandon",
        }
    }

    /// Parses a mailbox topic.
    pub fn parse(s: &str) -> Option<Topic> {
        Topic::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl fmt::Display for Topic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, so tables can align it with `{:<10}`.
        f.pad(self.as_str())
    }
}

/// A target's state in a deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetState {
    /// Not started yet.
    Pending,
    /// An attempt runs.
    Running,
    /// An attempt failed; the next one waits for its backoff.
    Retrying,
    /// A crash or an engine stop cut its call off: whether it changed the target is unknown
    /// until the plugin's current_release says (or the call runs again with the same key).
    Unknown,
    /// The new release is live.
    Deployed,
    /// Already at the release: nothing changed.
    Unchanged,
    /// Failed.
    Failed,
    /// Left out by an operator (it keeps its release).
    Skipped,
    /// Never started: the deployment stopped before it (a failure, an abort, a cancel).
    NotStarted,
    /// Back on its previous release.
    RolledBack,
    /// Its rollback failed.
    RollbackFailed,
    /// A dry-run's answer.
    Planned,
    /// A canary's candidate is deployed on it, beside the stable release.
    Candidate,
    /// A canary's candidate was taken out of traffic: the stable release stays.
    Reverted,
}

impl TargetState {
    /// The word on screen.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetState::Pending => "pending",
            TargetState::Running => "running",
            TargetState::Retrying => "retrying",
            TargetState::Unknown => "unknown",
            TargetState::Deployed => "deployed",
            TargetState::Unchanged => "unchanged",
            TargetState::Failed => "failed",
            TargetState::Skipped => "skipped",
            TargetState::NotStarted => "not started",
            TargetState::RolledBack => "rolled back",
            TargetState::RollbackFailed => "rollback failed",
            TargetState::Planned => "planned",
            TargetState::Candidate => "candidate",
            TargetState::Reverted => "reverted",
        }
    }

    /// Finished without error.
    pub fn is_done(self) -> bool {
        matches!(
            self,
            TargetState::Deployed
                | TargetState::Unchanged
                | TargetState::RolledBack
                | TargetState::Planned
                | TargetState::Candidate
                | TargetState::Reverted
        )
    }

    /// Failed, deploying or rolling back.
    pub fn is_failed(self) -> bool {
        matches!(self, TargetState::Failed | TargetState::RollbackFailed)
    }

    /// Being worked on now.
    pub fn is_active(self) -> bool {
        matches!(
            self,
            TargetState::Running | TargetState::Retrying | TargetState::Unknown
        )
    }
}

impl fmt::Display for TargetState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, so tables can align it with `{:<10}`.
        f.pad(self.as_str())
    }
}

impl From<crate::plugin::TargetStatus> for TargetState {
    fn from(s: crate::plugin::TargetStatus) -> Self {
        use crate::plugin::TargetStatus as S;
        match s {
            S::Deployed => TargetState::Deployed,
            S::Failed => TargetState::Failed,
            S::Skipped => TargetState::Skipped,
            S::Unchanged => TargetState::Unchanged,
            S::RolledBack => TargetState::RolledBack,
        }
    }
}

/// How a finished deployment ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// Every target is on the release (some may have been skipped by an operator).
    Deployed,
    /// Failed.
    Failed,
    /// Failed, and the targets it changed went back (`atomic`); or a rollback that finished.
    RolledBack,
    /// Stopped by an operator and the targets it changed went back.
    Aborted,
    /// A canary whose candidate was taken out of traffic (by an operator, or by its analysis);
    /// the stable release stayed live.
    Reverted,
    /// Every test hook passed.
    Passed,
    /// A dry-run the plugin answered.
    Planned,
    /// A dry-run of a plugin without one: the plan is valid, nothing else was asked.
    Validated,
}

/// The one state an operator reads for a deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeploymentState {
    /// Waiting for an engine to start it.
    Queued,
    /// Working.
    Running,
    /// Cancelled while targets still finish.
    Cancelling,
    /// Paused by an operator.
    Paused,
    /// Targets failed; waiting for retry, skip or abort.
    FailedAwaiting,
    /// A canary waits for an operator: promote, revert, weight or back.
    CanaryPaused,
    /// Every target deployed.
    Deployed,
    /// Deployed except the targets an operator skipped.
    DeployedWithSkips,
    /// Failed.
    Failed,
    /// Failed and rolled back (`atomic`), or a rollback that finished.
    RolledBack,
    /// Aborted by an operator and rolled back.
    Aborted,
    /// A canary reverted: the stable release stayed live.
    Reverted,
    /// Its test hooks passed.
    Passed,
    /// Cancelled.
    Cancelled,
    /// No engine runs it; the next start resumes it.
    Interrupted,
    /// Stopped after crashed runs in a row (dead-lettered): nothing resumes it by itself;
    /// `manent resume` runs it again from its last checkpoint.
    DeadLettered,
    /// A dry-run's answer, or a validated plan.
    Planned,
}

impl DeploymentState {
    /// The word on screen.
    pub fn as_str(self) -> &'static str {
        match self {
            DeploymentState::Queued => "queued",
            DeploymentState::Running => "running",
            DeploymentState::Cancelling => "cancelling",
            DeploymentState::Paused => "paused",
            DeploymentState::FailedAwaiting => "failed: decide",
            DeploymentState::CanaryPaused => "canary paused",
            DeploymentState::Deployed => "deployed",
            DeploymentState::DeployedWithSkips => "deployed, skips",
            DeploymentState::Failed => "failed",
            DeploymentState::RolledBack => "rolled back",
            DeploymentState::Aborted => "aborted",
            DeploymentState::Reverted => "reverted",
            DeploymentState::Passed => "passed",
            DeploymentState::Cancelled => "cancelled",
            DeploymentState::Interrupted => "interrupted",
            DeploymentState::DeadLettered => "dead-lettered",
            DeploymentState::Planned => "planned",
        }
    }

    /// Parked until an operator acts: nothing runs meanwhile.
    pub fn is_waiting(self) -> bool {
        matches!(
            self,
            DeploymentState::Paused
                | DeploymentState::FailedAwaiting
                | DeploymentState::CanaryPaused
        )
    }

    /// Still has work to do or waits for someone.
    pub fn is_live(self) -> bool {
        matches!(
            self,
            DeploymentState::Queued
                | DeploymentState::Running
                | DeploymentState::Cancelling
                | DeploymentState::Paused
                | DeploymentState::FailedAwaiting
                | DeploymentState::CanaryPaused
        )
    }
}

impl fmt::Display for DeploymentState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, so tables can align it with `{:<10}`.
        f.pad(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_read_back_from_its_workflow() {
        for k in Kind::ALL {
            assert_eq!(
                Kind::of_workflow(k.workflow(), k == Kind::DryRun),
                Some(k),
                "{k}"
            );
        }
        assert_eq!(Kind::of_workflow("deploy", false), Some(Kind::Deploy));
        assert_eq!(Kind::of_workflow("something-else", false), None);
    }

    #[test]
    fn step_names_read_back_as_written() {
        for name in [
            StepName::Plan,
            StepName::Configure,
            StepName::Validate,
            StepName::ReleasesBefore,
            StepName::CurrentRelease,
            StepName::DryRun,
            StepName::target(Action::Deploy, 2, 1, "web-1"),
            StepName::target(Action::Rollback, 10, 3, "a:b"),
            StepName::target(Action::Skip, 1, 2, "web#2"),
            StepName::target(Action::Candidate, 1, 1, "web-1"),
            StepName::Canary(CanaryCall::Weight),
            StepName::Canary(CanaryCall::Revert),
            StepName::Hook {
                event: crate::config::Event::PreDeploy,
                name: "db:migrate".into(),
            },
            StepName::HookDelete {
                policy: crate::config::DeletePolicy::HookSucceeded,
                event: crate::config::Event::Test,
                name: "smoke".into(),
            },
        ] {
            assert_eq!(name.to_string().parse::<StepName>(), Ok(name.clone()));
        }
        assert_eq!(
            StepName::target(Action::Deploy, 2, 1, "web-1").to_string(),
            "deploy:b2:web-1",
            "the first round keeps the name deployments recorded before rounds existed"
        );
        assert_eq!("engine.sleep".parse::<StepName>(), Err(NotAStepName));
        assert_eq!("deploy:b2".parse::<StepName>(), Err(NotAStepName));
        assert_eq!("deploy:bx:web".parse::<StepName>(), Err(NotAStepName));
    }

    #[test]
    fn phases_and_states_keep_their_stored_words() {
        let p = Phase::Batch { batch: 2, of: 6 };
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, r#"{"phase":"batch","batch":2,"of":6}"#);
        assert_eq!(serde_json::from_str::<Phase>(&json).unwrap(), p);
        assert_eq!(p.to_string(), "batch 2/6");
        let c = Phase::Canary {
            step: 2,
            of: 5,
            doing: Doing::Held { weight: 25 },
        };
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(
            json,
            r#"{"phase":"canary","step":2,"of":5,"doing":"held","weight":25}"#
        );
        assert_eq!(serde_json::from_str::<Phase>(&json).unwrap(), c);
        // Every canary phase reads back (a field of `Doing` named like one of `Canary` would
        // not: the flattened JSON would hold it twice).
        for doing in [
            Doing::Weight { weight: 10 },
            Doing::Scale { percent: 50 },
            Doing::Testers,
            Doing::Analysis { run: 1, runs: 3 },
            Doing::Pause,
            Doing::Timed {
                until: 1_700_000_000_000,
            },
            Doing::Held { weight: 5 },
        ] {
            let p = Phase::Canary {
                step: 1,
                of: 2,
                doing,
            };
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(serde_json::from_str::<Phase>(&json).ok(), Some(p), "{json}");
        }
        assert_eq!(
            serde_json::to_string(&TargetState::RolledBack).unwrap(),
            r#""rolled_back""#,
            "stored reports used this word"
        );
        assert_eq!(Topic::parse("abort"), Some(Topic::Abort));
        assert_eq!(
            names(&["a".into(), "b".into(), "c".into()]),
            "a, b and 1 more"
        );
    }
}
