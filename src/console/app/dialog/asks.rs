//! The questions behind the keys that start or stop deployments: deploy, roll back, cancel,
//! resume, start a submission that never started, retry, skip, abort, run the test hooks. Each
//! names what it does, where, and to how many targets.

use super::confirm::Confirm;
use crate::deploy::command::OperatorCommand;
use crate::deploy::state::{TargetState, names};
use crate::deploy::view::{DeploymentView, TargetView};
use crate::engine::handle::{AppEnv, Command};

/// A dialog on a locked environment: the lock is named, and going through it is a typed
/// break-glass with a reason.
fn through_lock(mut c: Confirm, a: &AppEnv) -> Confirm {
    let Some(lock) = &a.lock else {
        return c;
    };
    let until = lock
        .expires_at
        .map(|e| format!(" until {}", crate::console::widgets::clock(e)))
        .unwrap_or_default();
    c.lines.push(format!(
        "LOCKED by {} since {}{until}: {}",
        lock.owner(),
        crate::console::widgets::clock(lock.since),
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

pub(super) fn production_line(environment: &str) -> String {
    format!("{} IS A PRODUCTION ENVIRONMENT", environment.to_uppercase())
}

/// Deploy `version` of `a`; `awaiting` is a deploy of it that failed and waits for a decision
/// (its id and version): the same version retries its failed targets, another replaces it.
pub fn deploy(a: &AppEnv, version: String, awaiting: Option<(&str, &str)>, now: i64) -> Confirm {
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
        lines.push(crate::deploy::plan::already_live(&version, false));
    }
    match awaiting {
        Some((id, v)) if v == version => lines.push(format!(
            "{id} deploys {v} already, failed and waits for a decision: this retries its \
             failed targets"
        )),
        Some((id, v)) => lines.push(format!(
            "{id} ({v}) failed and waits for a decision: this deploy cancels it and replaces it"
        )),
        None => {}
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
    if let Some(names) = crate::format::some_of(&a.rollback_stays, 5) {
        let (has, stay) = if a.rollback_stays.len() == 1 {
            ("has", "stays")
        } else {
            ("have", "stay")
        };
        lines.push(format!(
            "{names} {has} no earlier release with another version and {stay}"
        ));
    }
    let command = Command::Rollback {
        application: a.application.clone(),
        environment: a.environment.clone(),
        reason: None,
        force: false,
    };
    let c = Confirm::new(title, lines, command, a.production, now)
        .buttons("Cancel", "Roll back")
        .typed_in_production(&a.environment);
    through_lock(c, a)
}

pub(super) fn operator(d: &DeploymentView, command: OperatorCommand) -> Command {
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

/// Start a stopped (cancelled, interrupted) deployment again — or, one that never started
/// (its submitter went away before any engine claimed it), for the first time.
pub fn resume(d: &DeploymentView, now: i64) -> Confirm {
    let left = d.targets.len() - d.done();
    let (title, first) = match &d.never_started {
        Some(s) => (
            format!(
                "Start the {} of {} {} to {}, submitted by {} at {} and never started?",
                d.kind,
                d.application,
                d.version,
                d.environment,
                s.by,
                crate::console::widgets::clock(s.at)
            ),
            format!(
                "it never ran: its console (pid {} on {}) went away before any engine \
                 claimed it; starting it deploys from the beginning to {}",
                s.pid,
                s.host,
                crate::deploy::plan::count(d.targets.len(), "target")
            ),
        ),
        None => (
            format!(
                "Resume {} of {} {} to {} ({})?",
                d.kind, d.application, d.version, d.environment, d.state
            ),
            format!(
                "it continues from its last checkpoint: {left} of {} targets left",
                d.targets.len()
            ),
        ),
    };
    let mut lines = vec![first];
    if d.production {
        lines.push(production_line(&d.environment));
    }
    let yes = if d.never_started.is_some() {
        "Start it"
    } else {
        "Resume"
    };
    Confirm::new(
        title,
        lines,
        operator(d, OperatorCommand::Resume),
        d.production,
        now,
    )
    .buttons("Cancel", yes)
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
    // A failed target may have switched before it failed: the abort asks it, so it is named.
    let failed = d
        .targets
        .iter()
        .filter(|t| matches!(t.state, TargetState::Failed | TargetState::Unknown))
        .count();
    let title = format!(
        "Abort the deploy of {} {} to {} and roll back the {} it changed?",
        d.application,
        d.version,
        d.environment,
        crate::deploy::plan::count(changed, "target")
    );
    let mut lines = vec![
        "no new target starts; targets being worked on now finish first".to_owned(),
        "then each target it changed goes back to the release it had before (targets new to \
         manent stay)"
            .to_owned(),
    ];
    if failed > 0 {
        lines.push(format!(
            "{} that failed {} read back first and taken back too if {} switched",
            crate::deploy::plan::count(failed, "target"),
            if failed == 1 { "is" } else { "are" },
            if failed == 1 { "it" } else { "they" }
        ));
    }
    Confirm::new(
        title,
        lines,
        operator(d, OperatorCommand::Abort),
        d.production,
        now,
    )
    .buttons("Keep going", "Abort")
    .typed_in_production(&d.environment)
}

/// Run the test hooks of `a` against what is live, or against the candidate of canary
/// `candidate` (its id and version) through its testers' route.
pub fn tests(a: &AppEnv, candidate: Option<(&str, &str)>, now: i64) -> Confirm {
    let against = match candidate {
        Some((id, version)) => format!("the candidate {version} of {id}"),
        None => "what is live".to_owned(),
    };
    let title = format!(
        "Run the test hooks of {} in {} against {against} ({})?",
        a.application,
        a.environment,
        a.tests.join(", ")
    );
    let mut lines = vec![
        "every test hook runs, even after one fails; each is recorded with its output".to_owned(),
        "no target is touched".to_owned(),
    ];
    if candidate.is_some() {
        lines.push(
            "HTTP hooks send the testers' header; commands get MANENT_TESTER_HEADER and \
             MANENT_TESTER_VALUE"
                .to_owned(),
        );
    }
    if a.production {
        lines.push(production_line(&a.environment));
    }
    let command = Command::Test {
        application: a.application.clone(),
        environment: a.environment.clone(),
        reason: None,
        candidate: candidate.map(|(id, _)| id.to_owned()),
    };
    Confirm::new(title, lines, command, a.production, now).buttons("Cancel", "Run tests")
}
