//! The rollback workflow: each target goes back to the release live before its current one
//! (manent's records), after the plugin says what it sees live. Rolls back every target it can,
//! even after one fails.

use std::sync::Arc;

use super::steps::{self, TargetDone};
use super::workflow::{failed, target_report};
use super::{DeployEnv, Report, RollbackInput, TargetReport};
use crate::plugin::{OnError, Secrets, Target, TargetRelease};
use crate::workflow::{Interrupt, RunOutcome, StepError, StepResult, WfCtx};

/// Runs a rollback from its stored inputs.
pub async fn run(env: Arc<DeployEnv>, ctx: WfCtx, inputs: String) -> Result<RunOutcome, Interrupt> {
    let input: RollbackInput = match serde_json::from_str(&inputs) {
        Ok(i) => i,
        Err(e) => return Ok(Report::bad_inputs("rollback", &e)),
    };
    let spec = &input.spec;
    let mut report = Report::new("rollback", "");
    ctx.set_event("phase", &"planning").await?;
    let plan = match steps::plan_targets(&ctx, spec).await? {
        Ok(p) => p,
        Err(f) => return failed(&ctx, report, f.to_string()).await,
    };
    ctx.set_event("plan", &plan).await?;
    let info = match steps::configure(&env, &ctx, spec).await? {
        Ok(i) => i,
        Err(f) => return failed(&ctx, report, f.to_string()).await,
    };
    if !info.capabilities.can_roll_back() {
        let msg = format!(
            "plugin {} cannot roll back: it announces [{}], and rollback needs current_release \
             and rollback",
            spec.plugin, info.capabilities
        );
        return failed(&ctx, report, msg).await;
    }
    let par = steps::parallelism(spec, &info);
    let live = match steps::live(&env, &ctx, spec).await? {
        Ok(l) => l,
        Err(f) => return failed(&ctx, report, f.to_string()).await,
    };
    ctx.set_event("phase", &"inspecting").await?;
    let seen = match current(&env, &ctx, spec, &plan, par).await? {
        Ok(s) => s,
        Err(f) => return failed(&ctx, report, f.to_string()).await,
    };
    let log = env.log.for_deployment(ctx.id());
    for ((_, t), tr) in plan.targets().zip(&seen) {
        let recorded = live
            .get(&t.moniker.to_string())
            .and_then(|l| l.current.as_ref());
        if let Some(rec) = recorded
            && !tr.version.is_empty()
            && tr.version != rec.version
        {
            log.warn(&format!(
                "{} runs {} but manent recorded {}; rolling back to the release before the recorded one",
                t.name, tr.version, rec.version
            ));
        }
    }
    let can: Vec<bool> = plan
        .targets()
        .map(|(_, t)| {
            live.get(&t.moniker.to_string())
                .is_some_and(|l| l.previous.is_some())
        })
        .collect();
    if !can.iter().any(|c| *c) {
        let msg = format!(
            "nothing to roll back: manent has no earlier release recorded for any target of {}",
            spec.subject()
        );
        return failed(&ctx, report, msg).await;
    }
    report.version = live
        .values()
        .find_map(|l| l.current.as_ref().map(|c| c.version.clone()))
        .unwrap_or_default();
    let policy = steps::target_policy(spec);
    let n = plan.batches.len();
    let mut ok = true;
    for batch in &plan.batches {
        ctx.set_event("phase", &format!("rolling back batch {}/{n}", batch.index))
            .await?;
        let mut eligible = batch.clone();
        eligible.targets.retain(|t| {
            live.get(&t.moniker.to_string())
                .is_some_and(|l| l.previous.is_some())
        });
        let results = steps::run_batch(
            &ctx,
            "rollback",
            &eligible,
            par,
            OnError::Continue,
            &policy,
            |t, info| {
                let (env, ctx) = (&env, &ctx);
                let l = live
                    .get(&t.moniker.to_string())
                    .cloned()
                    .unwrap_or_default();
                async move {
                    let h = env.plugin(spec).await?;
                    steps::rollback_target(env, spec, ctx.id(), &h, t, &l, info).await
                }
            },
        )
        .await?;
        for t in &batch.targets {
            let r: Option<&StepResult<TargetDone>> = results
                .iter()
                .find(|(p, _)| p.name == t.name)
                .and_then(|(_, r)| r.as_ref());
            let m = t.moniker.to_string();
            let line = match r {
                Some(r) => target_report(batch.index, &m, Some(r)),
                None => TargetReport {
                    moniker: m,
                    batch: batch.index,
                    status: "unchanged".into(),
                    attempts: 0,
                    message: "no earlier release recorded".into(),
                    duration_ms: 0,
                },
            };
            ok &= line.status != "failed";
            report.targets.push(line);
        }
    }
    report.result = if ok {
        "rolled_back".into()
    } else {
        "failed".into()
    };
    report.message = if ok {
        format!("{} rolled back", spec.subject())
    } else {
        format!(
            "some targets of {} could not be rolled back",
            spec.subject()
        )
    };
    ctx.set_event("phase", &if ok { "done" } else { "failed" })
        .await?;
    Ok(report.outcome(ok))
}

/// Step `current_release`: what the plugin sees live on each target.
async fn current(
    env: &DeployEnv,
    ctx: &WfCtx,
    spec: &crate::config::EnvSpec,
    plan: &super::plan::Plan,
    par: u32,
) -> Result<StepResult<Vec<TargetRelease>>, Interrupt> {
    let targets: Vec<Target> = plan.request_targets();
    let policy = steps::target_policy(spec);
    ctx.step("current_release", &policy, |info| {
        let targets = targets.clone();
        async move {
            let h = env.plugin(spec).await?;
            let ri = h.deployer.release_inspector().ok_or_else(|| {
                StepError::Permanent(format!(
                    "plugin {} cannot tell the current release",
                    spec.plugin
                ))
            })?;
            let (secrets, _open): (Secrets, _) = steps::secrets(env, spec);
            let req = steps::request(spec, ctx.id(), targets, par, secrets, Some(&info));
            ri.current_release(&req).await.map_err(StepError::from)
        }
    })
    .await
}
