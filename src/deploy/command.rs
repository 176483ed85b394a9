//! Operator commands on a running deployment, typed, and the one sender the console and the
//! CLI both use. A command is checked against what the deployment takes where it is now (its
//! published phase and commands); a refusal says why and journals nothing. An accepted command
//! is journaled in the same transaction that delivers it.

use super::records::{Db, JournalEntry};
use super::state::Delivered;
pub use super::state::OperatorCommand;
use super::state::{DeploymentState, Kind, Phase, TargetState, Topic, names};
use super::view::{self, DeploymentView};
use crate::operator::Operator;
use crate::workflow::StoreError;
use crate::workflow::store::{Message, SendRequest, Sent, WorkflowStatus};

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acted {
    /// One line for the operator.
    pub message: String,
    /// The deployment must be started again by an engine (it was stopped and is queued now).
    pub requeued: bool,
}

/// Why a command was not taken.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// No such deployment.
    #[error("no deployment with id {0} (see `manent status`)")]
    NotFound(String),
    /// The deployment does not take this command where it is now; nothing was journaled.
    #[error("{0}")]
    Refused(String),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Sends `cmd` to deployment `id` for `operator`, with their reason.
pub async fn send(
    db: &dyn Db,
    operator: &Operator,
    id: &str,
    cmd: &OperatorCommand,
    reason: Option<&str>,
) -> Result<Acted, CommandError> {
    let v = view::load(db, id)
        .await?
        .ok_or_else(|| CommandError::NotFound(id.to_owned()))?;
    // A canary is aborted by reverting it: the candidate leaves traffic, nothing rolls back.
    let cmd = &match cmd {
        OperatorCommand::Abort if v.kind == Kind::Canary => OperatorCommand::Revert,
        other => other.clone(),
    };
    check_canary(&v, cmd)?;
    if *cmd == OperatorCommand::Abandon && reason.is_none_or(|r| r.trim().is_empty()) {
        return Err(CommandError::Refused(format!(
            "abandoning {} ends it failed with its traffic where the router has it: say why \
             with --reason \"…\" (or `manent revert {}` takes the candidate out first)",
            v.id, v.id
        )));
    }
    let journal = JournalEntry::by(
        operator,
        cmd.action(),
        Some(&v.id),
        Some(&v.subject()),
        cmd.detail(),
        reason,
    )
    .record();
    let stopped = matches!(
        v.status,
        WorkflowStatus::Cancelled | WorkflowStatus::MaxRecoveryAttemptsExceeded
    );
    if stopped
        && let Some(newer) =
            super::lineage::superseded_by(db, &v.subject(), &v.id, v.created_at).await?
    {
        let version = |inputs: &str| {
            serde_json::from_str::<serde_json::Value>(inputs)
                .ok()
                .and_then(|i| i["spec"]["artifact"]["version"].as_str().map(str::to_owned))
                .unwrap_or_default()
        };
        // The view has this one's version; the newer one's is in its inputs' head.
        let (mine, theirs) = (v.version.clone(), version(&newer.inputs));
        let when = crate::format::time(newer.completed_at.unwrap_or(newer.updated_at));
        let why = if newer.name == v.kind.workflow() && mine == theirs {
            format!(
                "{} deployed {mine} since (finished {when}): nothing is left for {} to do",
                newer.id, v.id
            )
        } else {
            // A rollback's inputs name the descriptor's version, not where it went: not said.
            let what = if newer.name == Kind::Rollback.workflow() {
                "a rollback".to_owned()
            } else {
                format!("{} of {theirs}", newer.name)
            };
            format!(
                "{} ({what}) finished since, at {when}: continuing {} would take its targets \
                 back to {mine}; start a new deploy of {mine} if that is what you want",
                newer.id, v.id
            )
        };
        return Err(CommandError::Refused(format!(
            "{} was superseded: {why}",
            v.id
        )));
    }
    match cmd {
        OperatorCommand::Cancel => {
            if !v.status.is_live() {
                return Err(refused(&v, "cancel"));
            }
            db.cancel(&v.id, vec![journal]).await?;
            Ok(Acted {
                message: format!(
                    "{}: cancelled: it stops before its next step (targets being worked on \
                     finish first); `manent resume {}` continues it",
                    v.id, v.id
                ),
                requeued: false,
            })
        }
        OperatorCommand::Resume if stopped => {
            db.resume(&v.id, vec![journal]).await?;
            Ok(Acted {
                message: format!("{}: resumes from its last checkpoint", v.id),
                requeued: true,
            })
        }
        OperatorCommand::Retry { .. } | OperatorCommand::Abort if stopped => {
            check_targets(&v, cmd)?;
            // A stopped deployment goes on from its checkpoint; the command waits for the
            // point where it applies (an abort stops it starting targets at once).
            let awaiting = matches!(v.phase, Some(Phase::AwaitingDecision { .. }));
            if matches!(cmd, OperatorCommand::Retry { .. }) && !awaiting {
                db.resume(&v.id, vec![journal]).await?;
            } else {
                db.resume(&v.id, Vec::new()).await?;
                deliver(db, operator, &v, delivered(cmd, reason), journal, false).await?;
            }
            Ok(Acted {
                message: format!("{}: {}; it continues from its last checkpoint", v.id, cmd),
                requeued: true,
            })
        }
        _ => {
            let topic = cmd.topic().unwrap_or(Topic::Resume);
            if !v.takes(topic) {
                return Err(refused(&v, topic.as_str()));
            }
            check_targets(&v, cmd)?;
            deliver(db, operator, &v, delivered(cmd, reason), journal, true).await?;
            Ok(Acted {
                message: accepted(&v, cmd),
                requeued: false,
            })
        }
    }
}

/// Sends `payload` to deployment `v` as `operator`, with its journal entry; `guard`: only while
/// the deployment still takes the command's topic.
async fn deliver(
    db: &dyn Db,
    operator: &Operator,
    v: &DeploymentView,
    payload: Delivered,
    journal: crate::workflow::store::Record,
    guard: bool,
) -> Result<(), CommandError> {
    let topic = payload.command.topic().unwrap_or(Topic::Resume);
    let req = SendRequest {
        message: Message {
            id: format!("cmd-{:016x}", fastrand::u64(..)),
            destination: v.id.clone(),
            topic: topic.as_str().to_owned(),
            payload: payload.payload(),
            sender: Some(operator.display()),
            created_at: crate::sys::now_ms(),
            interrupts: topic == Topic::Abort,
        },
        guarded: guard,
        records: vec![journal],
    };
    match db.send(req).await? {
        Sent::Delivered | Sent::Duplicate => Ok(()),
        Sent::Rejected(why) => Err(CommandError::Refused(why)),
    }
}

fn delivered(cmd: &OperatorCommand, reason: Option<&str>) -> Delivered {
    Delivered {
        command: cmd.clone(),
        reason: reason.map(str::to_owned),
    }
}

/// A canary's own commands go to canaries only, a weight is a percentage, and `back` needs a
/// weight to go back from.
fn check_canary(v: &DeploymentView, cmd: &OperatorCommand) -> Result<(), CommandError> {
    let canary_only = matches!(
        cmd,
        OperatorCommand::Promote { .. }
            | OperatorCommand::Revert
            | OperatorCommand::Weight(_)
            | OperatorCommand::Back
            | OperatorCommand::Abandon
    );
    if canary_only && v.kind != Kind::Canary {
        return Err(CommandError::Refused(format!(
            "{} is a {}, not a canary: `{}` moves a canary's traffic{}",
            v.id,
            v.kind,
            cmd.action(),
            if v.kind == Kind::Deploy {
                " (a deploy is stopped with `cancel` or `abort`)"
            } else {
                ""
            }
        )));
    }
    match cmd {
        OperatorCommand::Weight(w) if *w > 100 => Err(CommandError::Refused(format!(
            "weight {w}: give a percentage from 0 to 100"
        ))),
        OperatorCommand::Back
            if v.canary
                .as_ref()
                .is_some_and(|c| !c.status.can_go_back && v.takes(Topic::Back)) =>
        {
            Err(CommandError::Refused(format!(
                "{} has set no weight yet: there is nothing to go back to",
                v.id
            )))
        }
        _ => Ok(()),
    }
}

/// A retry names failed targets; a skip names one that has not deployed yet and is not being
/// deployed now.
fn check_targets(v: &DeploymentView, cmd: &OperatorCommand) -> Result<(), CommandError> {
    let find = |name: &str| {
        v.targets
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| CommandError::Refused(format!("{} has no target `{name}`", v.id)))
    };
    match cmd {
        OperatorCommand::Retry { targets } => {
            for name in targets {
                let t = find(name)?;
                if !t.state.is_failed() {
                    return Err(CommandError::Refused(format!(
                        "{name} is {} in {}: only failed targets are retried",
                        t.state, v.id
                    )));
                }
            }
            Ok(())
        }
        OperatorCommand::Skip { target } => {
            let t = find(target)?;
            let current = match v.phase {
                Some(Phase::Batch { batch, .. }) => Some(batch),
                _ => None,
            };
            if t.state.is_done() {
                Err(CommandError::Refused(format!(
                    "{target} is already {} in {}; nothing to skip",
                    t.state, v.id
                )))
            } else if t.state.is_active() {
                Err(CommandError::Refused(format!(
                    "{target} is being worked on now in {}; it cannot be left out half-way \
                     (cancel the deployment to stop at the next step)",
                    v.id
                )))
            } else if t.state == TargetState::Pending && current == Some(t.batch) {
                Err(CommandError::Refused(format!(
                    "{target} is in the batch running now and starts as soon as a slot frees; \
                     pause the deployment before its batch to leave it out"
                )))
            } else {
                Ok(())
            }
        }
        _ => Ok(()),
    }
}

/// Why `topic` is not taken now, in the operator's words (the console says it before sending).
pub fn why_not(v: &DeploymentView, topic: &str) -> String {
    match refused(v, topic) {
        CommandError::Refused(why) => why,
        other => other.to_string(),
    }
}

fn refused(v: &DeploymentView, topic: &str) -> CommandError {
    let state = v.state;
    let why = match (topic, state, &v.phase) {
        (t, DeploymentState::DeadLettered, _) if t != "resume" => format!(
            "{} stopped after crashing runs (dead-lettered): `manent resume {}` runs it again \
             from its last checkpoint, then `{t}` applies",
            v.id, v.id
        ),
        (_, s, _) if !s.is_live() && s != DeploymentState::Cancelled => {
            format!("{} has finished ({s}); start a new deploy instead", v.id)
        }
        ("cancel", _, _) => format!("{} is not running (it is {state}); nothing to cancel", v.id),
        ("pause", _, Some(Phase::Batch { batch, of })) if batch == of => format!(
            "{} is in its last batch ({batch}/{of}): there is no next batch to pause before; \
             `cancel` stops it at its next step",
            v.id
        ),
        ("pause", DeploymentState::Paused, _) => format!("{} is already paused", v.id),
        ("resume", DeploymentState::Running, _) => {
            format!("{} is running; nothing to resume", v.id)
        }
        ("abort", _, _) if v.kind == super::state::Kind::Rollback => format!(
            "{} is a rollback: there is nothing to roll back to; `cancel` stops it",
            v.id
        ),
        (_, _, Some(p)) if v.accepts.is_empty() && p.waits_for_operator() => format!(
            "{} is acting on the last command it received; try again in a moment",
            v.id
        ),
        ("abort", _, _) if v.accepts.is_empty() => format!(
            "{} is {}: it takes no command there (`cancel` stops it at its next step)",
            v.id,
            v.phase
                .as_ref()
                .map_or_else(|| state.to_string(), ToString::to_string)
        ),
        ("abort", _, _) => format!(
            "{}'s plugin {} cannot roll back, so an abort cannot undo what it changed; \
             `cancel` stops it",
            v.id, v.plugin
        ),
        ("retry", _, _) => format!(
            "{} has no failed target waiting for a decision (it is {state})",
            v.id
        ),
        (
            _,
            _,
            Some(Phase::Canary {
                doing: super::state::Doing::RouterFailed { call, .. },
                ..
            }),
        ) => format!(
            "{} waits for a decision after the router failed ({call}): it takes {} there, not \
             `{topic}`",
            v.id,
            v.accepts
                .iter()
                .map(|t| t.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (_, DeploymentState::FailedAwaiting, _) => format!(
            "{} waits for a decision on its failed targets: retry, skip or abort",
            v.id
        ),
        _ => {
            let takes: Vec<&str> = v.accepts.iter().map(|t| t.as_str()).collect();
            let now = v
                .phase
                .as_ref()
                .map_or_else(|| state.to_string(), ToString::to_string);
            if takes.is_empty() {
                format!("{} is {now}: it takes no `{topic}` there", v.id)
            } else {
                format!(
                    "{} is {now}: it takes {} there, not `{topic}`",
                    v.id,
                    takes.join(", ")
                )
            }
        }
    };
    CommandError::Refused(why)
}

fn accepted(v: &DeploymentView, cmd: &OperatorCommand) -> String {
    match cmd {
        OperatorCommand::Pause => format!(
            "{}: pauses before its next batch; `manent resume {}` continues it",
            v.id, v.id
        ),
        OperatorCommand::Resume => format!("{}: resumes", v.id),
        // A canary whose router failed: the router's call is what is retried.
        OperatorCommand::Retry { .. } if v.router_failed() => {
            format!("{}: retrying the router's failed call", v.id)
        }
        OperatorCommand::Retry { targets } if targets.is_empty() => {
            format!("{}: retrying every failed target", v.id)
        }
        OperatorCommand::Retry { targets } => format!("{}: retrying {}", v.id, names(targets)),
        OperatorCommand::Skip { target } => {
            format!("{}: {target} is left out and keeps its release", v.id)
        }
        OperatorCommand::Abort => format!(
            "{}: aborting: no new target starts; what it changed rolls back",
            v.id
        ),
        OperatorCommand::Cancel => format!("{}: cancelled", v.id),
        OperatorCommand::Promote { full: false } => {
            format!("{}: promoted past this step; the next one runs", v.id)
        }
        OperatorCommand::Promote { full: true } => format!(
            "{}: promoting: the remaining steps are skipped and the candidate becomes the \
             stable release",
            v.id
        ),
        OperatorCommand::Revert => format!(
            "{}: reverting: the candidate leaves traffic; the stable release stays",
            v.id
        ),
        OperatorCommand::Weight(w) => format!(
            "{}: setting candidate {w}% / stable {}% (said once the router serves it); the \
             steps hold until resume or promote",
            v.id,
            100 - (*w).min(100)
        ),
        OperatorCommand::Back => format!(
            "{}: back to the previous step's weight; the steps hold until resume",
            v.id
        ),
        OperatorCommand::Abandon => format!(
            "{}: abandoned: it ends failed and its traffic stays where the router has it \
             (`manent status {}` reads the router)",
            v.id, v.id
        ),
    }
}
