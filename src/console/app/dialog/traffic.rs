//! The questions behind every key that changes a canary's production traffic — the slider's
//! weight, Space resuming held steps, promote, promote now, back, revert — and behind the
//! decisions a canary whose router failed waits for (retry the call, abandon it). Each names the
//! split before → after; promote says which lower steps it passes over (it never lowers the
//! candidate's traffic).

use super::asks::{operator, production_line};
use super::confirm::Confirm;
use crate::deploy::command::OperatorCommand;
use crate::deploy::flows::canary::ahead::{self, Next};
use crate::deploy::state::{Doing, Phase};
use crate::deploy::view::DeploymentView;

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

fn weight_now(d: &DeploymentView) -> u32 {
    d.canary.as_ref().map_or(0, |c| c.status.weight)
}

fn where_now(d: &DeploymentView) -> String {
    let weight = weight_now(d);
    match &d.phase {
        Some(p) => format!("now: {} ({p})", split(weight)),
        None => format!("now: {}", split(weight)),
    }
}

fn targets(d: &DeploymentView) -> String {
    crate::deploy::plan::count(d.targets.len(), "target")
}

/// Where the traffic goes when the steps go on from step index `from`, in words, with the
/// weight after it (None: it does not change before an operator acts again).
fn next_words(d: &DeploymentView, from: usize) -> (String, Option<u32>, Vec<String>) {
    let Some(c) = &d.canary else {
        return (String::new(), None, Vec::new());
    };
    let now = c.status.weight;
    let (next, passed) = ahead::ahead(&c.plan, &c.status, from);
    let mut notes = Vec::new();
    if !passed.is_empty() {
        let steps: Vec<String> = passed
            .iter()
            .map(|(s, w)| format!("step {s} (weight {w}%)"))
            .collect();
        notes.push(format!(
            "{} passed over: the candidate takes {now}%, set by hand, and promoting never \
             lowers its traffic",
            steps.join(", ")
        ));
    }
    let of = c.plan.steps.len();
    match next {
        Next::Weight { step, weight } => (
            format!("{} (step {step}/{of})", split(weight)),
            Some(weight),
            notes,
        ),
        Next::Gate { step } => (
            format!(
                "{} until step {step}/{of} (a pause until promoted)",
                split(now)
            ),
            None,
            notes,
        ),
        Next::Promoted => (
            "the candidate becomes the stable release (100%)".to_owned(),
            Some(100),
            notes,
        ),
    }
}

/// Set a canary's weight by hand: names the split before → after, the targets and the
/// environment; above `confirm_above` in production the environment's name is typed.
pub fn weight(d: &DeploymentView, weight: u32, now: i64) -> Confirm {
    let title = format!(
        "Set {}: {} → {} ({})?",
        canary_of(d),
        split(weight_now(d)),
        split(weight),
        targets(d)
    );
    let mut lines = vec![where_now(d)];
    if d.router_failed() {
        lines.push("the router failed its last call: this sets the weight again through it".into());
    }
    lines.push("the steps then hold at this weight until resume (Space) or promote (p)".into());
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

/// End the step a canary waits at: the split before → after, and any lower step passed over.
pub fn promote(d: &DeploymentView, now: i64) -> Confirm {
    let c = d.canary.as_ref();
    let (step, of) = c.map_or((0, 0), |c| (c.status.step, c.plan.steps.len()));
    let from = c.map_or(0, |c| ahead::after_promote(&c.status));
    let (after, _, notes) = next_words(d, from);
    let title = format!(
        "Promote {} past step {step}/{of}: {} → {after}?",
        canary_of(d),
        split(weight_now(d))
    );
    let mut lines = vec![where_now(d)];
    lines.extend(notes);
    if c.is_some_and(|c| from >= c.plan.steps.len()) {
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

/// Space on a held canary: its steps go on from where they were held.
pub fn resume_held(d: &DeploymentView, now: i64) -> Confirm {
    let from = d
        .canary
        .as_ref()
        .map_or(0, |c| ahead::after_resume(&c.status));
    let (after, _, notes) = next_words(d, from);
    let title = format!(
        "Resume the steps of {}: {} → {after}?",
        canary_of(d),
        split(weight_now(d))
    );
    let mut lines = vec![where_now(d)];
    lines.extend(notes);
    lines.push(
        "the automatic steps go on from where they were held (Space holds them again)".into(),
    );
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
    .buttons("Keep holding", "Resume steps")
}

/// Skip a canary's remaining steps: the candidate becomes the stable release.
pub fn promote_full(d: &DeploymentView, now: i64) -> Confirm {
    let title = format!(
        "Promote {} now, skipping its remaining steps: {} → the candidate everywhere (100%)?",
        canary_of(d),
        split(weight_now(d))
    );
    let mut lines = vec![
        where_now(d),
        format!(
            "the candidate becomes the stable release on {}; its releases are recorded",
            targets(d)
        ),
    ];
    lines.extend(pre_promote(d));
    Confirm::new(
        title,
        lines,
        operator(d, OperatorCommand::Promote { full: true }),
        d.production,
        now,
    )
    .buttons("Cancel", "Promote now")
    .typed_in_production(&d.environment)
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
    let title = format!(
        "Revert {}: {} → {}?",
        canary_of(d),
        split(weight_now(d)),
        split(0)
    );
    let mut lines = vec![
        where_now(d),
        format!(
            "the candidate leaves traffic; the stable release stays live on {}; the deployment \
             ends reverted",
            targets(d)
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
    let title = format!(
        "Back to the previous step's weight in {}: {} → {}?",
        canary_of(d),
        split(weight_now(d)),
        split(to)
    );
    let mut lines = vec![
        where_now(d),
        "then the steps hold until resume (Space)".to_owned(),
    ];
    if d.production {
        lines.push(production_line(&d.environment));
    }
    Confirm::new(
        title,
        lines,
        operator(d, OperatorCommand::Back),
        d.production,
        now,
    )
    .buttons("Cancel", "Go back")
}

/// What a canary whose router failed was doing: the call, the weight recorded, whether the
/// failed call was a revert.
pub fn router_failure(d: &DeploymentView) -> Option<(String, u32, bool)> {
    match &d.phase {
        Some(Phase::Canary {
            doing:
                Doing::RouterFailed {
                    call,
                    weight,
                    reverting,
                },
            ..
        }) => Some((call.clone(), *weight, *reverting)),
        _ => None,
    }
}

fn router_error(d: &DeploymentView) -> String {
    d.canary
        .as_ref()
        .and_then(|c| c.status.router_error.clone())
        .unwrap_or_else(|| "(the router gave no reason)".into())
}

/// `r` on a canary whose router failed: the failed call again.
pub fn retry_router(d: &DeploymentView, now: i64) -> Confirm {
    let (call, weight, reverting) = router_failure(d).unwrap_or_default();
    // `weight` is where the failed call left the canary, not where a weight call aims (the
    // call names that itself: "set weight 15%").
    let title = if reverting {
        format!(
            "Retry the router's failed call ({call}) on {}: {} → {}?",
            canary_of(d),
            split(weight),
            split(0)
        )
    } else {
        format!(
            "Retry the router's failed call ({call}) on {}?",
            canary_of(d)
        )
    };
    let mut lines = vec![
        format!("the router said: {}", router_error(d)),
        format!("now: {} (where the failed call left it)", split(weight)),
        "the call runs again and is read back; until the router answers, traffic stays where \
         it left it"
            .to_owned(),
    ];
    if d.production {
        lines.push(production_line(&d.environment));
    }
    let command = OperatorCommand::Retry {
        targets: Vec::new(),
    };
    Confirm::new(title, lines, operator(d, command), d.production, now).buttons("Cancel", "Retry")
}

/// `X` on a canary whose router failed: end it failed where its traffic is, with a reason; in
/// production the environment's name first.
pub fn abandon(d: &DeploymentView, now: i64) -> Confirm {
    let (call, weight, _) = router_failure(d).unwrap_or_default();
    let title = format!(
        "Abandon {} where its traffic is (the router failed {call})?",
        canary_of(d)
    );
    let lines = vec![
        format!("the router said: {}", router_error(d)),
        format!(
            "the canary ends failed and manent stops steering the router: it was recorded at \
             {}; read the router and fix it by hand — `manent revert {}` later takes the \
             candidate out of every pool",
            split(weight),
            d.id
        ),
        "a reason is required: it is journaled".to_owned(),
    ];
    Confirm::new(
        title,
        lines,
        operator(d, OperatorCommand::Abandon),
        d.production,
        now,
    )
    .buttons("Keep deciding", "Abandon")
    .reason_required()
    .typed_in_production(&d.environment)
}
