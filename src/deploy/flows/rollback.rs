//! The rollback workflow: each target goes back to the newest earlier release whose version
//! differs from the live one (manent's records), after the plugin says what it sees live. Rolls
//! back every target it can, even after one fails; failed ones wait for an operator's retry or
//! skip.

use std::sync::Arc;

use crate::config::Event;
use crate::deploy::hooks;
use crate::deploy::releases::{self, Transitions};
use crate::deploy::run::{self, FanOut, Run, Stop};
use crate::deploy::state::{Action, Ending, Kind, Phase, TargetState};
use crate::deploy::{DeployEnv, Report, RollbackInput, outcome};
use crate::plugin::OnError;
use crate::workflow::{Interrupt, RunOutcome, StepError, WfCtx};

/// Runs a rollback from its stored inputs.
pub async fn run(env: Arc<DeployEnv>, ctx: WfCtx, inputs: String) -> Result<RunOutcome, Interrupt> {
    let input: RollbackInput = match serde_json::from_str(&inputs) {
        Ok(i) => i,
        Err(e) => return Ok(Report::bad_inputs(Kind::Rollback, &e)),
    };
    let spec = &input.spec;
    let mut run = match Run::begin(&env, &ctx, spec, Kind::Rollback).await {
        Ok(r) => r,
        Err(stop) => return outcome(run::not_begun(&ctx, Kind::Rollback, "", stop).await),
    };
    let report = match body(&mut run).await {
        Ok(r) => r,
        Err(Stop::Interrupt(i)) => return Err(i),
        Err(Stop::Failed(why) | Stop::Abort(why)) => {
            run.report(Ending::Failed, why, "not rolled back")
        }
    };
    outcome(run.end(report).await)
}

async fn body(run: &mut Run<'_>) -> Result<Report, Stop> {
    let (env, ctx, spec) = (run.env, run.ctx, run.spec);
    if !run.info.capabilities.can_roll_back() {
        return Err(Stop::Failed(format!(
            "plugin {} cannot roll back: it announces [{}], and rollback needs current_release \
             and rollback",
            spec.plugin, run.info.capabilities
        )));
    }
    let live = run.releases_before().await?;
    run.phase(Phase::Inspecting).await?;
    let seen = run.current_releases().await?.unwrap_or_default();
    let log = env.log.for_deployment(ctx.id());
    for (_, t) in run.plan.targets() {
        let recorded = live
            .get(&t.moniker.to_string())
            .and_then(|l| l.current.as_ref());
        if let (Some(rec), Some(now)) = (recorded, seen.get(&t.name))
            && !now.is_empty()
            && *now != rec.version
        {
            log.warn(&format!(
                "{} runs {now} but manent recorded {}; rolling back to the release before the \
                 recorded one",
                t.name, rec.version
            ));
        }
    }
    let moves = releases::moves(&run.plan, &live);
    if moves.is_empty() {
        return Err(Stop::Failed(format!(
            "nothing to roll back: no target of {} has an earlier release with another version",
            spec.subject()
        )));
    }
    let transitions = Transitions::of(&moves);
    ctx.set_event("transitions", &transitions).await?;
    let vars = hooks::Vars::before(&live);
    hooks::run_event(run, Event::PreRollback, &vars)
        .await
        .map_err(|e| match e {
            Stop::Failed(why) => Stop::Failed(format!("{why}; nothing was rolled back")),
            other => other,
        })?;
    let how = FanOut {
        action: Action::Rollback,
        on_error: OnError::Continue,
        guided: true,
    };
    let (moves_ref, vars_ref) = (&moves, &vars);
    run.batches(
        how,
        |t| moves_ref.iter().any(|m| m.target == t.name),
        |t, info| {
            let mv = moves_ref.iter().find(|m| m.target == t.name).cloned();
            async move {
                let mv = mv.ok_or_else(|| {
                    StepError::Permanent(format!("{} has nothing to roll back to", t.name))
                })?;
                super::gated_rollback((env, spec, ctx.id()), &t, &mv, info, vars_ref).await
            }
        },
    )
    .await?;
    let mut r = run.report(
        Ending::RolledBack,
        format!("{} rolled back: {transitions}", spec.subject()),
        "",
    );
    for line in &mut r.targets {
        if line.attempts == 0 && line.status == TargetState::Skipped && line.message.is_empty() {
            line.status = TargetState::Unchanged;
            line.message = "no earlier release with another version".into();
        }
    }
    if let Some(first) = transitions.0.first() {
        r.version.clone_from(&first.to);
    }
    r.transitions = transitions;
    match hooks::run_event(run, Event::PostRollback, &vars).await {
        Ok(ran) => r.message = ran.noted(r.message),
        Err(Stop::Failed(why)) => {
            r.ending = Ending::Failed;
            r.message = hooks::after(r.message, &why);
        }
        Err(other) => return Err(other),
    }
    Ok(r)
}
