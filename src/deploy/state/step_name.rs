//! Durable step names: what a target step does ([`Action`]), a canary's plugin calls
//! ([`CanaryCall`]) and every step's name ([`StepName`]), written and parsed back one way.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What a target step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Deploy the release.
    Deploy,
    /// Go back to the previous release.
    Rollback,
    /// An operator left the target out (recorded, nothing runs).
    Skip,
    /// Deploy a canary's candidate beside the stable release.
    Candidate,
}

impl Action {
    fn as_str(self) -> &'static str {
        match self {
            Action::Deploy => "deploy",
            Action::Rollback => "rollback",
            Action::Skip => "skip",
            Action::Candidate => "candidate",
        }
    }
}

/// A canary's whole-plan plugin call (or its own bookkeeping), as a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CanaryCall {
    /// Which slot serves production: manent's records, else the router's own read-back.
    SlotsBefore,
    /// PrepareSlots.
    Slots,
    /// SetCandidateWeight (and CandidateWeight, read back).
    Weight,
    /// ScaleCandidate.
    Scale,
    /// RouteTesters.
    Testers,
    /// One run of an analysis check.
    Check,
    /// PromoteCandidate, with the releases recorded.
    Promote,
    /// When a timed pause ends (recorded, so a restart waits only what is left).
    Deadline,
    /// An automatic decision (revert, pause, promote) and why, journaled.
    Decide,
    /// RetirePrevious.
    Retire,
    /// RevertCandidate.
    Revert,
}

impl CanaryCall {
    const ALL: [CanaryCall; 11] = [
        CanaryCall::SlotsBefore,
        CanaryCall::Slots,
        CanaryCall::Weight,
        CanaryCall::Scale,
        CanaryCall::Testers,
        CanaryCall::Check,
        CanaryCall::Promote,
        CanaryCall::Deadline,
        CanaryCall::Decide,
        CanaryCall::Retire,
        CanaryCall::Revert,
    ];

    fn as_str(self) -> &'static str {
        match self {
            CanaryCall::SlotsBefore => "canary.slots_before",
            CanaryCall::Slots => "canary.slots",
            CanaryCall::Weight => "canary.weight",
            CanaryCall::Scale => "canary.scale",
            CanaryCall::Testers => "canary.testers",
            CanaryCall::Check => "canary.check",
            CanaryCall::Promote => "canary.promote",
            CanaryCall::Deadline => "canary.deadline",
            CanaryCall::Decide => "canary.decide",
            CanaryCall::Retire => "canary.retire",
            CanaryCall::Revert => "canary.revert",
        }
    }
}

/// A durable step's name: checked on replay, and read back by views.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StepName {
    /// Targets in batches.
    Plan,
    /// The plugin started and its capabilities recorded.
    Configure,
    /// The plugin checked the request.
    Validate,
    /// What manent recorded as live before anything changed.
    ReleasesBefore,
    /// What the plugin sees live.
    CurrentRelease,
    /// The plugin's dry-run.
    DryRun,
    /// A canary's call.
    Canary(CanaryCall),
    /// A hook run at an event: `hook:pre-deploy:migrate`.
    Hook {
        event: crate::config::Event,
        name: String,
    },
    /// A hook's `delete:` command, as a policy says: `hook-delete:hook-succeeded:pre-deploy:migrate`.
    HookDelete {
        policy: crate::config::DeletePolicy,
        event: crate::config::Event,
        name: String,
    },
    /// One target's work: `deploy:b2:web-1`, and `deploy:b2~2:web-1` for its second round
    /// (after an operator's retry).
    Target {
        action: Action,
        batch: u32,
        round: u32,
        target: String,
    },
}

impl StepName {
    /// A target step.
    pub fn target(action: Action, batch: u32, round: u32, target: &str) -> StepName {
        StepName::Target {
            action,
            batch,
            round,
            target: target.to_owned(),
        }
    }
}

impl fmt::Display for StepName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepName::Plan => f.write_str("plan"),
            StepName::Configure => f.write_str("plugin.configure"),
            StepName::Validate => f.write_str("validate"),
            StepName::ReleasesBefore => f.write_str("releases.before"),
            StepName::CurrentRelease => f.write_str("current_release"),
            StepName::DryRun => f.write_str("dry_run"),
            StepName::Canary(c) => f.write_str(c.as_str()),
            StepName::Hook { event, name } => write!(f, "hook:{}:{name}", event.as_str()),
            StepName::HookDelete {
                policy,
                event,
                name,
            } => write!(
                f,
                "hook-delete:{}:{}:{name}",
                policy.as_str(),
                event.as_str()
            ),
            StepName::Target {
                action,
                batch,
                round,
                target,
            } => {
                write!(f, "{}:b{batch}", action.as_str())?;
                if *round > 1 {
                    write!(f, "~{round}")?;
                }
                write!(f, ":{target}")
            }
        }
    }
}

impl From<StepName> for String {
    fn from(s: StepName) -> String {
        s.to_string()
    }
}

/// Not one of manent's step names (the engine's own steps, such as `engine.sleep`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAStepName;

impl FromStr for StepName {
    type Err = NotAStepName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "plan" => StepName::Plan,
            "plugin.configure" => StepName::Configure,
            "validate" => StepName::Validate,
            "releases.before" => StepName::ReleasesBefore,
            "current_release" => StepName::CurrentRelease,
            "dry_run" => StepName::DryRun,
            s if s.starts_with("hook:") => {
                let (event, name) = s["hook:".len()..].split_once(':').ok_or(NotAStepName)?;
                StepName::Hook {
                    event: crate::config::Event::parse(event).ok_or(NotAStepName)?,
                    name: name.to_owned(),
                }
            }
            s if s.starts_with("hook-delete:") => {
                let mut parts = s["hook-delete:".len()..].splitn(3, ':');
                let policy = match parts.next() {
                    Some("before-hook-creation") => crate::config::DeletePolicy::BeforeHookCreation,
                    Some("hook-succeeded") => crate::config::DeletePolicy::HookSucceeded,
                    Some("hook-failed") => crate::config::DeletePolicy::HookFailed,
                    _ => return Err(NotAStepName),
                };
                let event = parts
                    .next()
                    .and_then(crate::config::Event::parse)
                    .ok_or(NotAStepName)?;
                let name = parts.next().filter(|n| !n.is_empty()).ok_or(NotAStepName)?;
                StepName::HookDelete {
                    policy,
                    event,
                    name: name.to_owned(),
                }
            }
            s if s.starts_with("canary.") => CanaryCall::ALL
                .into_iter()
                .find(|c| c.as_str() == s)
                .map(StepName::Canary)
                .ok_or(NotAStepName)?,
            _ => {
                let mut parts = s.splitn(3, ':');
                let action = match parts.next() {
                    Some("deploy") => Action::Deploy,
                    Some("rollback") => Action::Rollback,
                    Some("skip") => Action::Skip,
                    Some("candidate") => Action::Candidate,
                    _ => return Err(NotAStepName),
                };
                let b = parts.next().and_then(|b| b.strip_prefix('b'));
                let (batch, round) = match b.map(|b| b.split_once('~').unwrap_or((b, "1"))) {
                    Some((batch, round)) => (batch.parse(), round.parse()),
                    None => return Err(NotAStepName),
                };
                let target = parts.next().filter(|t| !t.is_empty()).ok_or(NotAStepName)?;
                StepName::Target {
                    action,
                    batch: batch.map_err(|_| NotAStepName)?,
                    round: round.map_err(|_| NotAStepName)?,
                    target: target.to_owned(),
                }
            }
        })
    }
}
