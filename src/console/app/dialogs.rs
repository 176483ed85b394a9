//! The console's questions: each confirmation names what it does, where, and to how many
//! targets, with buttons named by their effect (`Keep running` / `Cancel deploy`); and the
//! version picker behind `D`.

use super::Action;
use crate::deploy::command::OperatorCommand;
use crate::deploy::state::{TargetState, names};
use crate::deploy::view::{DeploymentView, TargetView};
use crate::engine::handle::{AppEnv, Command};

/// Which button has the focus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// The one that changes nothing (the default).
    Cancel,
    /// The one that acts.
    Confirm,
}

impl Choice {
    /// The other one.
    pub fn flip(self) -> Choice {
        match self {
            Choice::Cancel => Choice::Confirm,
            Choice::Confirm => Choice::Cancel,
        }
    }
}

/// A confirmation.
#[derive(Debug, Clone, PartialEq)]
pub struct Confirm {
    /// One line: what, where, how many.
    pub title: String,
    /// More lines.
    pub lines: Vec<String>,
    /// The command it sends.
    pub command: Command,
    /// The focused button.
    pub choice: Choice,
    /// The button that acts (`Deploy`, `Cancel deploy`, …).
    pub yes: String,
    /// The button that changes nothing (`Cancel`, `Keep running`).
    pub no: String,
    /// The environment name to type, in production.
    pub typed: Option<(String, String)>,
    /// An optional reason, for the journal.
    pub reason: String,
    /// When it opened (epoch ms).
    pub opened_at: i64,
    /// The environment is production.
    pub production: bool,
    /// A break-glass through a deploy lock: Enter needs a reason.
    pub needs_reason: bool,
}

impl Confirm {
    fn new(
        title: String,
        lines: Vec<String>,
        command: Command,
        production: bool,
        now: i64,
    ) -> Self {
        Confirm {
            title,
            lines,
            command,
            choice: Choice::Cancel,
            yes: "Confirm".into(),
            no: "Cancel".into(),
            typed: None,
            reason: String::new(),
            opened_at: now,
            production,
            needs_reason: false,
        }
    }

    fn buttons(mut self, no: &str, yes: &str) -> Self {
        self.no = no.to_owned();
        self.yes = yes.to_owned();
        self
    }

    fn typed_in(mut self, environment: &str) -> Self {
        self.typed = Some((environment.to_owned(), String::new()));
        self
    }

    /// The command, with the reason typed into the dialog.
    pub fn command_with_reason(&self) -> Command {
        let reason = Some(self.reason.trim().to_owned()).filter(|r| !r.is_empty());
        match self.command.clone() {
            Command::Deploy {
                application,
                environment,
                version,
                dry_run,
                force,
                ..
            } => Command::Deploy {
                application,
                environment,
                version,
                dry_run,
                reason,
                force,
            },
            Command::Rollback {
                application,
                environment,
                force,
                ..
            } => Command::Rollback {
                application,
                environment,
                reason,
                force,
            },
            Command::Operator { id, command, .. } => Command::Operator {
                id,
                command,
                reason,
            },
            Command::Test {
                application,
                environment,
                ..
            } => Command::Test {
                application,
                environment,
                reason,
            },
            other => other,
        }
    }
}

/// A dialog on a locked environment: the lock is named, and going through it is a typed
/// break-glass with a reason.
fn through_lock(mut c: Confirm, a: &AppEnv) -> Confirm {
    let Some(lock) = &a.lock else {
        return c;
    };
    let until = lock
        .expires_at
        .map(|e| format!(" until {}", crate::console::view::widgets::clock(e)))
        .unwrap_or_default();
    c.lines.push(format!(
        "LOCKED by {} since {}{until}: {}",
        lock.owner(),
        crate::console::view::widgets::clock(lock.since),
        lock.reason
    ));
    c.lines
        .push("going through the lock is a break-glass: it is journaled with your reason".into());
    c.needs_reason = true;
    match &mut c.command {
        Command::Deploy { force, .. } | Command::Rollback { force, .. } => *force = true,
        _ => {}
    }
    if c.typed.is_none() {
        c = c.typed_in(&a.environment);
    }
    c
}

fn production_line(environment: &str) -> String {
    format!("{} IS A PRODUCTION ENVIRONMENT", environment.to_uppercase())
}

/// Deploy `version` of `a`.
pub fn deploy(a: &AppEnv, version: String, now: i64) -> Confirm {
    let title = format!(
        "Deploy {} {version} to {}: {}?",
        a.application,
        a.environment,
        crate::deploy::plan::size(a.targets, a.batches.len())
    );
    let mut lines = vec![format!("strategy {}, plugin {}", a.strategy, a.plugin)];
    if !a.live.is_empty() {
        lines.push(format!("live now: {}", a.live.join(", ")));
    }
    let everywhere =
        !a.live_by_target.is_empty() && a.live_by_target.values().all(|v| *v == version);
    if everywhere {
        lines.push(format!(
            "{version} is already live on every target: this redeploys it"
        ));
    }
    if a.production {
        lines.push(production_line(&a.environment));
    }
    let command = Command::Deploy {
        application: a.application.clone(),
        environment: a.environment.clone(),
        version: Some(version),
        dry_run: false,
        reason: None,
        force: false,
    };
    let c = Confirm::new(title, lines, command, a.production, now).buttons("Cancel", "Deploy");
    through_lock(c, a)
}

/// Roll `a` back: where each target goes, from the records.
pub fn rollback(a: &AppEnv, now: i64) -> Confirm {
    let title = format!(
        "Roll back {} in {}: {}?",
        a.application, a.environment, a.rollback
    );
    let mut lines = Vec::new();
    let staying = a.targets.saturating_sub(a.rollback.targets());
    if staying > 0 {
        lines.push(format!(
            "{staying} targets have no earlier release with another version and stay"
        ));
    }
    if a.production {
        lines.push(format!(
            "{} is production: type its name to confirm",
            a.environment
        ));
    }
    let command = Command::Rollback {
        application: a.application.clone(),
        environment: a.environment.clone(),
        reason: None,
        force: false,
    };
    let c = Confirm::new(title, lines, command, a.production, now).buttons("Cancel", "Roll back");
    let c = if a.production {
        c.typed_in(&a.environment)
    } else {
        c
    };
    through_lock(c, a)
}

fn operator(d: &DeploymentView, command: OperatorCommand) -> Command {
    Command::Operator {
        id: d.id.clone(),
        command,
        reason: None,
    }
}

/// Cancel a running deployment.
pub fn cancel(d: &DeploymentView, now: i64) -> Confirm {
    let done = d.done();
    let title = format!(
        "Cancel {} of {} to {} ({} targets)?",
        d.kind,
        d.application,
        d.environment,
        d.targets.len()
    );
    let lines = vec![
        format!(
            "{done} of {} targets are done; targets being worked on now finish first",
            d.targets.len()
        ),
        format!("{} stops before its next step; resume continues it", d.id),
    ];
    let yes = format!("Cancel {}", d.kind);
    Confirm::new(
        title,
        lines,
        operator(d, OperatorCommand::Cancel),
        d.production,
        now,
    )
    .buttons("Keep running", &yes)
}

/// Start a stopped (cancelled, interrupted) deployment again.
pub fn resume(d: &DeploymentView, now: i64) -> Confirm {
    let left = d.targets.len() - d.done();
    let title = format!(
        "Resume {} of {} {} to {} ({})?",
        d.kind, d.application, d.version, d.environment, d.state
    );
    let mut lines = vec![format!(
        "it continues from its last checkpoint: {left} of {} targets left",
        d.targets.len()
    )];
    if d.production {
        lines.push(production_line(&d.environment));
    }
    Confirm::new(
        title,
        lines,
        operator(d, OperatorCommand::Resume),
        d.production,
        now,
    )
    .buttons("Cancel", "Resume")
}

/// Run failed targets again: `only` one, or every failed one.
pub fn retry(d: &DeploymentView, only: Option<String>, now: i64) -> Confirm {
    let failed: Vec<&TargetView> = d.targets.iter().filter(|t| t.state.is_failed()).collect();
    let targets: Vec<String> = match &only {
        Some(t) => vec![t.clone()],
        None => failed.iter().map(|t| t.name.clone()).collect(),
    };
    let title = format!(
        "Retry {} in {}/{}?",
        names(&targets),
        d.application,
        d.environment
    );
    let mut lines: Vec<String> = failed
        .iter()
        .filter(|t| targets.contains(&t.name))
        .take(3)
        .map(|t| format!("{}: {}", t.name, t.message))
        .collect();
    lines.push("new attempts, with new idempotency keys; the deployment then goes on".into());
    let command = OperatorCommand::Retry {
        targets: only.into_iter().collect(),
    };
    Confirm::new(title, lines, operator(d, command), d.production, now).buttons("Cancel", "Retry")
}

/// Leave target `t` out of the deployment.
pub fn skip(d: &DeploymentView, t: &TargetView, live: Option<String>, now: i64) -> Confirm {
    let title = format!(
        "Skip {} in {} of {} {} to {}?",
        t.name, d.kind, d.application, d.version, d.environment
    );
    let keeps = live.map_or_else(
        || "it keeps what it runs now".to_owned(),
        |v| format!("it keeps {v}"),
    );
    let mut lines = vec![format!(
        "{keeps}; the deployment ends \"deployed with skips\", never plain deployed"
    )];
    if t.state == TargetState::Failed {
        lines.push(format!("{}: {}", t.name, t.message));
    }
    let command = OperatorCommand::Skip {
        target: t.name.clone(),
    };
    Confirm::new(title, lines, operator(d, command), d.production, now).buttons("Cancel", "Skip")
}

/// Stop a deploy and roll back what it changed.
pub fn abort(d: &DeploymentView, now: i64) -> Confirm {
    let changed = d
        .targets
        .iter()
        .filter(|t| t.state == TargetState::Deployed)
        .count();
    let title = format!(
        "Abort the deploy of {} {} to {} and roll back the {changed} targets it changed?",
        d.application, d.version, d.environment
    );
    let mut lines = vec![
        "no new target starts; targets being worked on now finish first".to_owned(),
        "then each target it changed goes back to the release it had before (targets new to \
         manent stay)"
            .to_owned(),
    ];
    if d.production {
        lines.push(format!(
            "{} is production: type its name to confirm",
            d.environment
        ));
    }
    let c = Confirm::new(
        title,
        lines,
        operator(d, OperatorCommand::Abort),
        d.production,
        now,
    )
    .buttons("Keep going", "Abort");
    if d.production {
        c.typed_in(&d.environment)
    } else {
        c
    }
}

/// One version the picker offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionChoice {
    /// The version.
    pub version: String,
    /// Where it comes from, and whether it is live.
    pub note: String,
}

/// The version picker: the descriptor's version, the releases in history, or one typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versions {
    /// Application.
    pub application: String,
    /// Environment.
    pub environment: String,
    /// What it offers, the descriptor's first; the last row types another.
    pub choices: Vec<VersionChoice>,
    /// The highlighted row (`choices.len()`: "another version…").
    pub selected: usize,
    /// A version being typed.
    pub typing: Option<String>,
}

/// What a key did in the picker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Picked {
    /// A version to deploy.
    Version(String),
    /// The picker closed.
    Closed,
    /// Still choosing.
    Nothing,
}

impl Versions {
    /// The choices for `a`.
    pub fn of(a: &AppEnv) -> Versions {
        let note = |v: &str, from: &str| {
            let live = a.live_by_target.values().filter(|l| *l == v).count();
            match live {
                0 => from.to_owned(),
                n if n == a.targets => format!("{from}, live on every target"),
                n => format!("{from}, live on {n} of {} targets", a.targets),
            }
        };
        let mut choices = vec![VersionChoice {
            version: a.version.clone(),
            note: note(&a.version, "the descriptor's"),
        }];
        for v in a.versions.iter().filter(|v| **v != a.version) {
            choices.push(VersionChoice {
                version: v.clone(),
                note: note(v, "deployed before"),
            });
        }
        choices.retain(|c| !c.version.is_empty());
        Versions {
            application: a.application.clone(),
            environment: a.environment.clone(),
            choices,
            selected: 0,
            typing: None,
        }
    }

    /// Applies a key.
    pub fn update(&mut self, action: Action) -> Picked {
        if let Some(text) = &mut self.typing {
            match action {
                Action::Input(c) => text.push(c),
                Action::Backspace => {
                    text.pop();
                }
                Action::ClearInput => text.clear(),
                Action::Submit if !text.trim().is_empty() => {
                    return Picked::Version(text.trim().to_owned());
                }
                Action::Dismiss => self.typing = None,
                _ => {}
            }
            return Picked::Nothing;
        }
        let last = self.choices.len();
        match action {
            Action::Up => self.selected = self.selected.saturating_sub(1),
            Action::Down => self.selected = (self.selected + 1).min(last),
            Action::Top => self.selected = 0,
            Action::Bottom => self.selected = last,
            Action::Submit => match self.choices.get(self.selected) {
                Some(c) => return Picked::Version(c.version.clone()),
                None => self.typing = Some(String::new()),
            },
            Action::Dismiss => return Picked::Closed,
            _ => {}
        }
        Picked::Nothing
    }
}

/// Run the test hooks of `a` against what is live.
pub fn tests(a: &AppEnv, now: i64) -> Confirm {
    let title = format!(
        "Run the test hooks of {} in {} against what is live ({})?",
        a.application,
        a.environment,
        a.tests.join(", ")
    );
    let mut lines = vec![
        "every test hook runs, even after one fails; each is recorded with its output".to_owned(),
        "no target is touched".to_owned(),
    ];
    if a.production {
        lines.push(production_line(&a.environment));
    }
    let command = Command::Test {
        application: a.application.clone(),
        environment: a.environment.clone(),
        reason: None,
    };
    Confirm::new(title, lines, command, a.production, now).buttons("Cancel", "Run tests")
}

/// `stable 70% / candidate 30%`
pub fn split(weight: u32) -> String {
    format!(
        "stable {}% / candidate {}%",
        100 - weight.min(100),
        weight.min(100)
    )
}

fn canary_of(d: &DeploymentView) -> String {
    format!(
        "the canary of {} {} in {}",
        d.application, d.version, d.environment
    )
}

fn where_now(d: &DeploymentView) -> String {
    let weight = d.canary.as_ref().map_or(0, |c| c.status.weight);
    match &d.phase {
        Some(p) => format!("now: candidate {weight}% ({p})"),
        None => format!("now: candidate {weight}%"),
    }
}

/// Set a canary's weight by hand: names the split, the targets and the environment; above
/// `confirm_above` in production the environment's name is typed.
pub fn weight(d: &DeploymentView, weight: u32, now: i64) -> Confirm {
    let title = format!(
        "Set {}: {}, {}?",
        canary_of(d),
        split(weight),
        crate::deploy::plan::count(d.targets.len(), "target")
    );
    let mut lines = vec![
        where_now(d),
        "the steps then hold at this weight until resume (Space) or promote (p)".to_owned(),
    ];
    let above = d
        .canary
        .as_ref()
        .is_some_and(|c| weight > c.plan.confirm_above);
    let typed = d.production && above;
    if typed {
        lines.push(format!(
            "more than {}% in production: type {} to confirm",
            d.canary.as_ref().map_or(50, |c| c.plan.confirm_above),
            d.environment
        ));
    } else if d.production {
        lines.push(production_line(&d.environment));
    }
    let c = Confirm::new(
        title,
        lines,
        operator(d, OperatorCommand::Weight(weight)),
        d.production,
        now,
    )
    .buttons("Cancel", "Set weight");
    if typed { c.typed_in(&d.environment) } else { c }
}

/// End the step a canary waits at.
pub fn promote(d: &DeploymentView, now: i64) -> Confirm {
    let c = d.canary.as_ref();
    let (step, of) = c.map_or((0, 0), |c| (c.status.step, c.plan.steps.len()));
    let next = c
        .and_then(|c| c.plan.steps.get(usize::try_from(step).unwrap_or(0)))
        .map_or_else(
            || "then the candidate becomes the stable release".to_owned(),
            |s| format!("next: {s}"),
        );
    let last = c.is_some_and(|c| usize::try_from(step).unwrap_or(0) >= c.plan.steps.len());
    let title = format!("Promote {} past step {step}/{of}?", canary_of(d));
    let mut lines = vec![where_now(d), next];
    if last {
        lines.extend(pre_promote(d));
    }
    if d.production {
        lines.push(production_line(&d.environment));
    }
    Confirm::new(
        title,
        lines,
        operator(d, OperatorCommand::Promote { full: false }),
        d.production,
        now,
    )
    .buttons("Cancel", "Promote")
}

/// Skip a canary's remaining steps: the candidate becomes the stable release.
pub fn promote_full(d: &DeploymentView, now: i64) -> Confirm {
    let title = format!(
        "Promote {} now, skipping its remaining steps?",
        canary_of(d)
    );
    let mut lines = vec![
        where_now(d),
        format!(
            "the candidate becomes the stable release on {}; its releases are recorded",
            crate::deploy::plan::count(d.targets.len(), "target")
        ),
    ];
    lines.extend(pre_promote(d));
    if d.production {
        lines.push(format!(
            "{} is production: type its name to confirm",
            d.environment
        ));
    }
    let c = Confirm::new(
        title,
        lines,
        operator(d, OperatorCommand::Promote { full: true }),
        d.production,
        now,
    )
    .buttons("Cancel", "Promote now");
    if d.production {
        c.typed_in(&d.environment)
    } else {
        c
    }
}

/// What runs before a promotion, when the canary has `pre-promote` hooks.
fn pre_promote(d: &DeploymentView) -> Option<String> {
    let names: Vec<&str> = d
        .hooks
        .iter()
        .filter(|h| h.event == crate::config::Event::PrePromote)
        .map(|h| h.name.as_str())
        .collect();
    (!names.is_empty()).then(|| {
        format!(
            "first its pre-promote hooks run ({}); one that fails reverts the canary",
            names.join(", ")
        )
    })
}

/// Take a canary's candidate out of traffic.
pub fn revert(d: &DeploymentView, now: i64) -> Confirm {
    let title = format!("Revert {}?", canary_of(d));
    let mut lines = vec![
        where_now(d),
        format!(
            "the candidate leaves traffic; the stable release stays live on {}; the deployment \
             ends reverted",
            crate::deploy::plan::count(d.targets.len(), "target")
        ),
    ];
    if d.production {
        lines.push(production_line(&d.environment));
    }
    Confirm::new(
        title,
        lines,
        operator(d, OperatorCommand::Revert),
        d.production,
        now,
    )
    .buttons("Keep canary", "Revert")
}

/// Back to a canary's previous step's weight.
pub fn back(d: &DeploymentView, to: u32, now: i64) -> Confirm {
    let weight = d.canary.as_ref().map_or(0, |c| c.status.weight);
    let title = format!(
        "Back to the previous step's weight in {}: {weight}% → {to}%?",
        canary_of(d)
    );
    let lines = vec![format!(
        "{}, then the steps hold until resume (Space)",
        split(to)
    )];
    Confirm::new(
        title,
        lines,
        operator(d, OperatorCommand::Back),
        d.production,
        now,
    )
    .buttons("Cancel", "Go back")
}
