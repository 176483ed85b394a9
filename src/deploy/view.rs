//! A deployment as an operator sees it, read back from the database alone: its state, phase and
//! the commands it takes, and each target's state, attempts and last message. The headless
//! commands print it; the console renders it.

use serde::Serialize;

use super::Report;
use super::releases::Transitions;
use super::state::{Action, DeploymentState, Doing, Kind, Phase, TargetState, Topic};
use crate::workflow::store::AttemptOutcome;
/// A deployment's workflow status, as its view carries it.
pub use crate::workflow::store::WorkflowStatus;

mod read;

pub use self::read::{Listed, NOT_VIEWED, load, of_row, state_of, summaries, summary_of_row};

/// One attempt at a target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptView {
    /// 1-based, within its round.
    pub attempt: u32,
    /// 1 for the first run of the target, 2 after an operator's first retry, …
    pub round: u32,
    /// What it did.
    pub action: Action,
    /// Epoch ms.
    pub started_at: i64,
    /// Epoch ms; None while it runs.
    pub ended_at: Option<i64>,
    /// How it ended.
    pub outcome: Option<AttemptOutcome>,
    /// Its error.
    pub error: Option<String>,
    /// The idempotency key the plugin saw.
    pub key: String,
}

/// One target's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetView {
    /// Moniker.
    pub moniker: String,
    /// Name.
    pub name: String,
    /// Batch, from 1.
    pub batch: u32,
    /// Where it is.
    pub state: TargetState,
    /// Current or last attempt.
    pub attempt: u32,
    /// Time on the target, once done.
    pub duration_ms: Option<u64>,
    /// Last message or error.
    pub message: String,
    /// Every attempt, oldest first.
    pub attempts: Vec<AttemptView>,
}

/// A canary as an operator sees it: its plan, where it is, and the weight the plugin reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CanaryView {
    /// The steps, the slider's step and the confirmation threshold.
    pub plan: crate::config::Canary,
    /// Where it is (weights, testers, scale, analysis, decisions).
    pub status: super::canary_status::CanaryStatus,
    /// The router as last read back while the canary is live.
    pub actual: Option<super::canary_status::Actual>,
    /// The last drift episode: when it began, the two states, what was done.
    pub drift: Option<super::canary_status::Drift>,
    /// What the router saw of both slots, per watch interval, newest last (empty: nothing
    /// read yet, or a router that cannot say).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub traffic: Vec<super::canary_status::TrafficPoint>,
    /// The background analysis' runs so far and its last one (`canary.analysis`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<super::canary_status::BackgroundStatus>,
}

impl CanaryView {
    /// The weight the plugin reports, freshest first (measured while waiting, else right after
    /// it was set).
    pub fn actual_weight(&self) -> Option<u32> {
        self.actual
            .as_ref()
            .and_then(|a| a.weight)
            .or(self.status.actual)
    }

    /// True when the last read of the router could not say what it serves — it failed, or
    /// nginx did not answer for manent's file: what an earlier one said is not what the router
    /// serves now.
    pub fn unread(&self) -> bool {
        self.actual.as_ref().is_some_and(|a| a.weight.is_none())
    }

    /// True when the router was last read serving something else than manent set.
    pub fn drift(&self) -> bool {
        self.actual.as_ref().is_some_and(|a| !a.drift.is_empty())
            || self
                .actual_weight()
                .is_some_and(|a| a != self.status.weight && !self.retired())
    }

    /// The candidate is out of every pool (reverted or promoted).
    pub fn retired(&self) -> bool {
        self.status.routing.as_ref().is_some_and(|r| r.retired)
    }

    /// What the router was read to serve, in the operator's words: a failed router call in
    /// full, drift and what was done about it, a configuration manent did not write, a read
    /// made while no engine runs. Empty when there is nothing to say beyond the weight.
    pub fn router_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(e) = &self.status.router_error {
            out.push(format!("the router failed: {e}"));
        }
        let Some(a) = &self.actual else {
            return out;
        };
        // A file manent did not write is said in manent's slots: its own notion of stable
        // and candidate need not be manent's.
        let recorded = self.status.routing.clone().unwrap_or_default();
        let served = a
            .served
            .as_ref()
            .map(|s| {
                if a.foreign.is_some() {
                    s.shares_of(&recorded)
                } else {
                    s.describe()
                }
            })
            .or_else(|| a.weight.map(|w| format!("candidate {w}%")));
        if !a.by_engine {
            out.push(match (&served, &a.error) {
                (Some(s), _) => format!(
                    "no engine is running: last recorded candidate {}%; the router serves {s} (read now)",
                    self.status.weight
                ),
                (None, Some(e)) => format!(
                    "no engine is running: last recorded candidate {}%; the router cannot be read: {e}",
                    self.status.weight
                ),
                (None, None) => format!(
                    "no engine is running: last recorded candidate {}%; the router cannot say what it serves",
                    self.status.weight
                ),
            });
        } else if let Some(e) = &a.error {
            out.push(format!("the router could not be read: {e}"));
        }
        if !a.drift.is_empty() {
            let action = a
                .action
                .as_ref()
                .map(|x| format!(" — {x}"))
                .unwrap_or_default();
            out.push(format!("drift: {}{action}", a.drift.join("; ")));
        }
        out
    }

    /// The step the canary is at (from 1), if it is at one.
    pub fn current(&self) -> Option<&crate::config::CanaryStep> {
        let i = usize::try_from(self.status.step).ok()?.checked_sub(1)?;
        self.plan.steps.get(i)
    }
}

/// A deployment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeploymentView {
    /// `dep-…`
    pub id: String,
    /// Deploy, dry-run or rollback.
    pub kind: Kind,
    /// The engine's lifecycle state.
    pub status: WorkflowStatus,
    /// The state an operator reads.
    pub state: DeploymentState,
    /// Application.
    pub application: String,
    /// Environment.
    pub environment: String,
    /// Production environment.
    pub production: bool,
    /// Version deployed; for a rollback, where it goes (`2.4.0 → 2.3.0`).
    pub version: String,
    /// A rollback's (or an abort's) version changes.
    pub transitions: Transitions,
    /// Plugin.
    pub plugin: String,
    /// Dry-run.
    pub dry_run: bool,
    /// Who started it.
    pub operator: String,
    /// What it is doing now.
    pub phase: Option<Phase>,
    /// When it got there (epoch ms).
    pub phase_at: Option<i64>,
    /// The operator commands it takes now.
    pub accepts: Vec<Topic>,
    /// Number of batches.
    pub batches: u32,
    /// Targets in plan order.
    pub targets: Vec<TargetView>,
    /// The outcome, once finished.
    pub report: Option<Report>,
    /// Operator commands not yet taken (`pause`, `skip`, …).
    pub pending_commands: Vec<String>,
    /// Runs so far that did not stop cleanly, plus this one (more than 1: it was resumed after
    /// a crash).
    pub runs: u32,
    /// Epoch ms.
    pub created_at: i64,
    /// Epoch ms.
    pub completed_at: Option<i64>,
    /// A canary's plan and where it is.
    pub canary: Option<CanaryView>,
    /// Its hooks, in the order they run (the events this kind of deployment runs).
    pub hooks: Vec<HookView>,
    /// The names of its per-target hooks (`pre-target`, `post-target`): they run inside each
    /// target's step, so a target's line says how they went, not a hook row.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_target_hooks: Vec<String>,
    /// Submitted, then parked unstarted: its submitter went away before any engine claimed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub never_started: Option<crate::workflow::store::Submitter>,
    /// A summary's (a list's) count of its targets, which it does not hold: from the report's
    /// head, once the deployment has ended. A whole view counts its `targets`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_counts: Option<super::TargetCounts>,
    /// Read as a list reads it: no target, attempt or hook was read.
    #[serde(skip)]
    pub summary: bool,
    /// A live canary no engine runs: nothing judges its candidate or watches its router.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unwatched: bool,
}

/// Where a hook is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HookState {
    /// Not run yet.
    Pending,
    /// An attempt runs.
    Running,
    /// An attempt failed; the next one waits for its backoff.
    Retrying,
    /// Ready.
    Passed,
    /// Failed for good.
    Failed,
}

impl HookState {
    /// The word on screen.
    pub fn as_str(self) -> &'static str {
        match self {
            HookState::Pending => "pending",
            HookState::Running => "running",
            HookState::Retrying => "retrying",
            HookState::Passed => "passed",
            HookState::Failed => "failed",
        }
    }
}

/// One hook at one event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HookView {
    /// When.
    pub event: crate::config::Event,
    /// Its name.
    pub name: String,
    /// `command`, `http`, `wait`.
    pub kind: String,
    /// Its weight.
    pub weight: i32,
    /// `<env>::<app>::hook::<name>`.
    pub moniker: String,
    /// Where it is.
    pub state: HookState,
    /// Current or last attempt.
    pub attempt: u32,
    /// Time its last attempt took, once done.
    pub duration_ms: Option<u64>,
    /// What made it ready, or why it failed.
    pub message: String,
    /// The last lines of its output.
    pub output: String,
    /// What its delete policy did: `hook-succeeded: exit 0`.
    pub deletes: Vec<String>,
}

impl TargetView {
    /// Finished without error.
    pub fn is_done(&self) -> bool {
        self.state.is_done()
    }
}

impl DeploymentView {
    /// `application/environment`, as releases and the journal name it.
    pub fn subject(&self) -> String {
        format!("{}/{}", self.application, self.environment)
    }

    /// Targets finished without error.
    pub fn done(&self) -> usize {
        self.targets.iter().filter(|t| t.is_done()).count()
    }

    /// A deployment that ended with its targets taken back (rolled back, aborted, reverted):
    /// how many of its read targets are on its version now — none, usually — and how many
    /// were taken back. `None` for any other, or one whose targets are not read.
    pub fn undone(&self) -> Option<(usize, usize)> {
        use DeploymentState as S;
        if !matches!(self.state, S::RolledBack | S::Aborted | S::Reverted)
            || self.targets.is_empty()
        {
            return None;
        }
        let on = self
            .targets
            .iter()
            .filter(|t| matches!(t.state, TargetState::Deployed | TargetState::Unchanged))
            .count();
        let back = self
            .targets
            .iter()
            .filter(|t| matches!(t.state, TargetState::RolledBack | TargetState::Reverted))
            .count();
        Some((on, back))
    }

    /// Targets done, of all: counted, or a summary's counts from its report.
    pub fn counts(&self) -> super::TargetCounts {
        match self.target_counts {
            Some(c) if self.targets.is_empty() => c,
            _ => super::TargetCounts {
                done: self.done(),
                total: self.targets.len(),
            },
        }
    }

    /// What a list read of the deployment, not the whole of it (its targets and hooks unread).
    pub fn is_summary(&self) -> bool {
        self.summary
    }

    /// The first target that failed, for a failed deployment's headline.
    pub fn first_failure(&self) -> Option<&TargetView> {
        self.targets.iter().find(|t| t.state.is_failed())
    }

    /// Why it failed, in one line: the report's message, else the first failed target's.
    pub fn failure(&self) -> Option<String> {
        if let Some(r) = self.report.as_ref().filter(|r| !r.ok()) {
            return Some(r.message.clone());
        }
        self.first_failure()
            .map(|t| format!("{} failed: {}", t.name, t.message))
    }

    /// The failure an operator should read first, for a deployment that failed (and waits for
    /// a decision, or rolled back).
    pub fn headline_failure(&self) -> Option<String> {
        let failed = match self.state {
            DeploymentState::Failed | DeploymentState::FailedAwaiting => true,
            DeploymentState::RolledBack => self.kind != Kind::Rollback,
            _ => false,
        };
        if !failed {
            return None;
        }
        self.first_failure()
            .map(|t| format!("{} failed: {}", t.name, t.message))
            .or_else(|| self.failure())
    }

    /// A canary reverted by its own analysis (or its failed candidate), not by an operator.
    pub fn reverted_automatically(&self) -> bool {
        self.state == DeploymentState::Reverted
            && self.canary.as_ref().is_some_and(|c| {
                c.status
                    .decisions
                    .iter()
                    .rev()
                    .find(|d| d.action == "revert")
                    .is_some_and(|d| d.by == "analysis" || d.by == "manent")
            })
    }

    /// True when it takes `topic` now.
    pub fn takes(&self, topic: Topic) -> bool {
        self.accepts.contains(&topic)
    }

    /// The state when no engine runs it (a live deployment is then interrupted).
    /// The view as it stands when `engine_running` says whether any engine runs deployments:
    /// with none, a live deployment is interrupted and a call it had under way cut off, so
    /// that target's state is unknown (not running).
    pub fn honest(mut self, engine_running: bool) -> DeploymentView {
        self.unwatched = !engine_running && self.needs_judge();
        let state = self.state_with(engine_running);
        if state == DeploymentState::Interrupted && self.state != state {
            for t in &mut self.targets {
                if t.state == TargetState::Running {
                    t.state = TargetState::Unknown;
                    t.message = "no engine runs it: the call was cut off; `manent resume` \
                                 reconciles it"
                        .into();
                }
            }
        }
        self.state = state;
        self
    }

    /// A live canary: its candidate is in a pool, so an engine must judge it (its analysis)
    /// and watch its router while it waits, whatever it waits for.
    pub fn needs_judge(&self) -> bool {
        self.status.is_live()
            && self
                .canary
                .as_ref()
                .and_then(|c| c.status.routing.as_ref())
                .is_some_and(|r| !r.retired && !r.candidate.slot.is_empty())
    }

    /// A canary that waits for a decision after its router failed.
    pub fn router_failed(&self) -> bool {
        matches!(
            self.phase,
            Some(Phase::Canary {
                doing: Doing::RouterFailed { .. },
                ..
            })
        )
    }

    /// The deployment's state when `engine_running` says whether any engine runs.
    pub fn state_with(&self, engine_running: bool) -> DeploymentState {
        match self.state {
            DeploymentState::Running | DeploymentState::Queued | DeploymentState::Cancelling
                if !engine_running =>
            {
                if self.status == WorkflowStatus::Cancelled {
                    DeploymentState::Cancelled
                } else {
                    DeploymentState::Interrupted
                }
            }
            s => s,
        }
    }
}
