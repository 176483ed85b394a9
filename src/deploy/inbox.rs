//! "Waiting on you": everything that waits on a human across applications and environments —
//! canaries paused at a gate, failed deployments awaiting a decision, deployments paused by an
//! operator or dead-lettered, and deploy locks about to expire. The console's home starts with
//! it; `manent inbox` lists the same.

use serde::Serialize;

use super::records::Lock;
use super::state::{DeploymentState, Doing, Phase};
use super::view::DeploymentView;
use crate::workflow::store::WorkflowStatus;

/// A lock expiring within this long is in the inbox (its owner may want to extend or lift it).
pub const LOCK_EXPIRING_MS: i64 = 30 * 60 * 1000;

/// What waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Waiting {
    /// Targets failed: retry, skip or abort.
    Decision,
    /// A canary at a gate: promote, revert, weight or back.
    Canary,
    /// A live canary's router serves something else than manent set.
    Drift,
    /// A live canary no engine runs: nothing judges its candidate or watches its router.
    Unwatched,
    /// Paused by an operator: resume or cancel.
    Paused,
    /// Dead-lettered after crashing runs: resume after a look at its log.
    DeadLettered,
    /// A deploy lock that expires soon.
    LockExpiring,
    /// A notification its receiver refused (or that failed too often), set aside.
    Notification,
    /// Submitted, never started: its submitter went away before any engine claimed it.
    NeverStarted,
}

impl Waiting {
    /// A short word for a column.
    pub fn as_str(self) -> &'static str {
        match self {
            Waiting::Decision => "decide",
            Waiting::Canary => "canary",
            Waiting::Drift => "drift",
            Waiting::Unwatched => "UNWATCHED",
            Waiting::Paused => "paused",
            Waiting::DeadLettered => "dead",
            Waiting::LockExpiring => "lock",
            Waiting::Notification => "notify",
            Waiting::NeverStarted => "queued",
        }
    }
}

/// One thing waiting on a human.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Item {
    /// What waits.
    pub waiting: Waiting,
    /// `application/environment`.
    pub subject: String,
    /// The deployment, when it is one.
    pub deployment: Option<String>,
    /// Since when (epoch ms): the deployment's start, or the lock's expiry.
    pub at: i64,
    /// One line: what and why.
    pub what: String,
    /// What moves it on.
    pub verbs: String,
}

/// The inbox, most urgent first: decisions, canaries, dead-lettered, paused, then locks.
pub fn items(deployments: &[DeploymentView], locks: &[Lock], now: i64) -> Vec<Item> {
    let mut out: Vec<Item> = deployments
        .iter()
        .filter(|d| !superseded(d, deployments))
        .flat_map(|d| {
            unwatched_of(d)
                .into_iter()
                .chain(item_of(d))
                .chain(drift_of(d))
        })
        .collect();
    out.extend(never_started(deployments));
    for l in locks {
        let Some(expires) = l.expires_at else {
            continue;
        };
        if expires <= now || expires - now > LOCK_EXPIRING_MS {
            continue;
        }
        out.push(Item {
            waiting: Waiting::LockExpiring,
            subject: l.subject.clone(),
            deployment: None,
            at: expires,
            what: format!(
                "lock expires in {}m: {} ({})",
                (expires - now + 59_999) / 60_000,
                l.owner(),
                l.reason
            ),
            verbs: format!(
                "manent lock {} --reason … --for …, or unlock",
                l.subject.replacen('/', " ", 1)
            ),
        });
    }
    out.sort_by_key(|i| (rank(i.waiting), i.at));
    out
}

/// A stopped deployment (dead-lettered, cancelled) that a newer deploy, canary or rollback of
/// its application and environment finished after: resuming it is refused, so nothing waits.
fn superseded(d: &DeploymentView, all: &[DeploymentView]) -> bool {
    use super::state::Kind;
    matches!(
        d.status,
        WorkflowStatus::MaxRecoveryAttemptsExceeded | WorkflowStatus::Cancelled
    ) && all.iter().any(|o| {
        o.subject() == d.subject()
            && o.created_at > d.created_at
            && o.status == WorkflowStatus::Success
            && matches!(o.kind, Kind::Deploy | Kind::Canary | Kind::Rollback)
    })
}

fn rank(w: Waiting) -> u8 {
    match w {
        Waiting::Unwatched => 0,
        Waiting::Decision => 1,
        Waiting::Drift => 2,
        Waiting::Canary => 3,
        Waiting::DeadLettered => 4,
        Waiting::Paused => 5,
        Waiting::NeverStarted => 6,
        Waiting::LockExpiring => 7,
        Waiting::Notification => 8,
    }
}

/// A live canary no engine runs (the view was read with [`DeploymentView::honest`]).
fn unwatched_of(d: &DeploymentView) -> Option<Item> {
    d.unwatched.then(|| Item {
        waiting: Waiting::Unwatched,
        subject: d.subject(),
        deployment: Some(d.id.clone()),
        at: d.phase_at.unwrap_or(d.created_at),
        what: format!(
            "canary of {} ({}) has no engine: nothing judges the candidate or watches the \
             router",
            d.version,
            weight_words(d)
        ),
        verbs: "manent worker (or in the background: manent worker --until-idle &)".into(),
    })
}

/// A canary's weight as manent set it, and what the router said at its last read — never a
/// weight from records as if it were served.
fn weight_words(d: &DeploymentView) -> String {
    let Some(c) = d.canary.as_ref() else {
        return String::new();
    };
    let set = format!("set {}%", c.status.weight);
    match (&c.actual, c.actual_weight()) {
        _ if d.unwatched => format!("{set}, router not read (no engine)"),
        (Some(_), _) if c.unread() => format!("{set}, router unread"),
        (Some(_), Some(a)) if !c.retired() => format!("{set}, router {a}%"),
        _ => set,
    }
}

/// Parked notifications, one item per receiver: how many wait, the newest one's deployment and
/// why, and the verb that sends them again (one id, or every parked one).
pub fn parked_items(parked: &[super::records::Parked]) -> Vec<Item> {
    let mut by_receiver: std::collections::BTreeMap<&str, Vec<&super::records::Parked>> =
        std::collections::BTreeMap::new();
    for p in parked {
        by_receiver.entry(&p.row.receiver).or_default().push(p);
    }
    by_receiver
        .into_iter()
        .filter_map(|(receiver, ps)| {
            let newest = *ps.iter().max_by_key(|p| (p.parked_at, p.row.id))?;
            let (what, verbs) = match ps.len() {
                1 => (
                    format!(
                        "the {} notification to {receiver} is parked after {} attempt(s): {}",
                        newest.row.event, newest.row.attempts, newest.error
                    ),
                    format!("manent notify retry {}", newest.row.id),
                ),
                n => (
                    format!(
                        "{n} notifications to {receiver} are parked, the newest ({}) after {} \
                         attempt(s): {}",
                        newest.row.event, newest.row.attempts, newest.error
                    ),
                    "manent notify list; manent notify retry --all".to_owned(),
                ),
            };
            Some(Item {
                waiting: Waiting::Notification,
                subject: receiver.to_owned(),
                deployment: Some(newest.row.workflow_id.clone()),
                at: newest.parked_at,
                what,
                verbs,
            })
        })
        .collect()
}

/// Submissions parked unstarted because their submitter went away before any engine claimed
/// them, while nothing newer of their application and environment was started.
fn never_started(deployments: &[DeploymentView]) -> Vec<Item> {
    deployments
        .iter()
        .filter_map(|d| {
            let s = d.never_started.as_ref()?;
            let newer = deployments
                .iter()
                .any(|o| o.subject() == d.subject() && o.created_at > d.created_at);
            (!newer && d.status == WorkflowStatus::Cancelled).then(|| Item {
                waiting: Waiting::NeverStarted,
                subject: d.subject(),
                deployment: Some(d.id.clone()),
                at: d.created_at,
                what: format!(
                    "{} of {} submitted by {}, never started: it went away before any engine \
                     claimed it",
                    d.kind,
                    d.version,
                    s.describe()
                ),
                verbs: format!("manent resume {} (starts it)", d.id),
            })
        })
        .collect()
}

/// A live canary whose router was last read serving something else than manent set.
fn drift_of(d: &DeploymentView) -> Option<Item> {
    if !d.status.is_live() {
        return None;
    }
    let a = d.canary.as_ref()?.actual.as_ref()?;
    if a.drift.is_empty() {
        return None;
    }
    let action = a
        .action
        .as_ref()
        .map(|x| format!("; {x}"))
        .unwrap_or_default();
    Some(Item {
        waiting: Waiting::Drift,
        subject: d.subject(),
        deployment: Some(d.id.clone()),
        at: a.at,
        what: format!(
            "router drift on the canary of {}: {}{action}",
            d.version,
            a.drift.join("; ")
        ),
        verbs: format!(
            "manent status {} (someone changed the router: find out who)",
            d.id
        ),
    })
}

fn item_of(d: &DeploymentView) -> Option<Item> {
    let (waiting, what, verbs) = if d.status == WorkflowStatus::MaxRecoveryAttemptsExceeded {
        (
            Waiting::DeadLettered,
            format!(
                "{} of {} stopped after {} crashed runs",
                d.kind, d.version, d.runs
            ),
            format!("manent logs {}, then manent resume {}", d.id, d.id),
        )
    } else {
        match d.state {
            DeploymentState::FailedAwaiting
                if let Some(Phase::Canary {
                    doing:
                        Doing::RouterFailed {
                            call,
                            weight,
                            reverting,
                        },
                    ..
                }) = &d.phase =>
            {
                let error = d
                    .canary
                    .as_ref()
                    .and_then(|c| c.status.router_error.clone())
                    .unwrap_or_default();
                (
                    Waiting::Decision,
                    format!(
                        "canary of {}: the router failed ({call}) with the candidate at \
                         {weight}%: {error}",
                        d.version
                    ),
                    if *reverting {
                        format!("manent retry|abandon {}", d.id)
                    } else {
                        format!("manent retry|revert|weight|abandon {}", d.id)
                    },
                )
            }
            DeploymentState::FailedAwaiting => {
                let failed = match &d.phase {
                    Some(Phase::AwaitingDecision { failed, .. }) => failed.join(", "),
                    _ => String::new(),
                };
                (
                    Waiting::Decision,
                    format!("{} of {}: failed on {failed}", d.kind, d.version),
                    format!("manent retry|skip|abort {}", d.id),
                )
            }
            DeploymentState::CanaryPaused => (
                Waiting::Canary,
                format!("canary of {} paused: {}", d.version, weight_words(d)),
                format!("manent promote|revert|weight|back {}", d.id),
            ),
            DeploymentState::Paused => (
                Waiting::Paused,
                format!("{} of {} paused by an operator", d.kind, d.version),
                format!("manent resume|cancel {}", d.id),
            ),
            _ => return None,
        }
    };
    Some(Item {
        waiting,
        subject: d.subject(),
        deployment: Some(d.id.clone()),
        at: d.created_at,
        what,
        verbs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deploy::records::{OutboxRow, Parked};

    fn parked(id: i64, receiver: &str, event: &str, at: i64) -> Parked {
        Parked {
            row: OutboxRow {
                id,
                receiver: receiver.into(),
                workflow_id: format!("dep-{id}"),
                mark: event.into(),
                event: event.into(),
                body: "{}".into(),
                attempts: 3,
                next_at: 0,
            },
            parked_at: at,
            error: format!("HTTP 400 ({id})"),
        }
    }

    #[test]
    fn parked_notifications_are_one_item_per_receiver_with_their_count() {
        let items = parked_items(&[
            parked(1, "chat", "started", 10),
            parked(2, "pager", "failed", 20),
            parked(3, "chat", "finished", 30),
            parked(4, "chat", "started", 25),
        ]);
        assert_eq!(items.len(), 2);
        let chat = items.iter().find(|i| i.subject == "chat").unwrap();
        assert!(
            chat.what.starts_with("3 notifications to chat are parked"),
            "{}",
            chat.what
        );
        assert!(chat.what.contains("newest (finished)") && chat.what.contains("(3)"));
        assert_eq!(chat.deployment.as_deref(), Some("dep-3"));
        assert_eq!(chat.at, 30);
        assert_eq!(chat.verbs, "manent notify list; manent notify retry --all");
        let pager = items.iter().find(|i| i.subject == "pager").unwrap();
        assert_eq!(pager.verbs, "manent notify retry 2");
        assert!(
            pager
                .what
                .starts_with("the failed notification to pager is parked")
        );
    }
}
