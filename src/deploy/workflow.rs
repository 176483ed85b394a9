//! The deploy workflow: plan → plugin capabilities → validate → batches (each target its own
//! step, up to `parallelism` at once) → done; on failure with `atomic`, the targets it changed
//! go back to their previous release. A dry-run stops after asking the plugin what it would do.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::plan::{Batch, Plan};
use super::steps::{self, Live, PluginInfo, TargetDone};
use super::{DeployEnv, DeployInput, Report, TargetReport};
use crate::config::{EnvSpec, Strategy};
use crate::plugin::{OnError, Release, Target, TargetStatus};
use crate::workflow::{Interrupt, RunOutcome, StepError, StepResult, WfCtx};

/// Runs a deploy (or dry-run) from its stored inputs.
pub async fn run(env: Arc<DeployEnv>, ctx: WfCtx, inputs: String) -> Result<RunOutcome, Interrupt> {
    let input: DeployInput = match serde_json::from_str(&inputs) {
        Ok(i) => i,
        Err(e) => return Ok(Report::bad_inputs("deploy", &e)),
    };
    let spec = &input.spec;
    let kind = if input.dry_run { "dry_run" } else { "deploy" };
    let mut report = Report::new(kind, &spec.artifact.version);
    ctx.set_event("phase", &"planning").await?;
    let plan = match steps::plan(&ctx, spec).await? {
        Ok(p) => p,
        Err(f) => return failed(&ctx, report, f.to_string()).await,
    };
    ctx.set_event("plan", &plan).await?;
    let info = match steps::configure(&env, &ctx, spec).await? {
        Ok(i) => i,
        Err(f) => return failed(&ctx, report, f.to_string()).await,
    };
    let par = steps::parallelism(spec, &info);
    ctx.set_event("phase", &"validating").await?;
    if let Err(f) = steps::validate(&env, &ctx, spec, &plan, par).await? {
        return failed(&ctx, report, f.to_string()).await;
    }
    if input.dry_run {
        return dry_run(&env, &ctx, spec, &plan, &info, par, report).await;
    }
    if spec.atomic && !info.capabilities.can_roll_back() {
        let msg = format!(
            "atomic: true needs a plugin that can roll back, and {} announces only [{}] (needs \
             current_release and rollback); nothing was touched",
            spec.plugin, info.capabilities
        );
        return failed(&ctx, report, msg).await;
    }
    let before = match steps::live(&env, &ctx, spec).await? {
        Ok(l) => l,
        Err(f) => return failed(&ctx, report, f.to_string()).await,
    };
    let policy = steps::target_policy(spec);
    let n = plan.batches.len();
    let mut failure: Option<String> = None;
    for batch in &plan.batches {
        if failure.is_some() {
            report.targets.extend(
                batch
                    .targets
                    .iter()
                    .map(|t| skipped(batch.index, &t.moniker.to_string())),
            );
            continue;
        }
        if ctx.poll_mailbox(&["pause"]).await?.is_some() {
            ctx.set_event("phase", &"paused").await?;
            ctx.recv(&["resume"], None).await?;
        }
        ctx.set_event("phase", &format!("batch {}/{n}", batch.index))
            .await?;
        let results = steps::run_batch(
            &ctx,
            "deploy",
            batch,
            par,
            OnError::Stop,
            &policy,
            |t, info| {
                let env = &env;
                let ctx = &ctx;
                async move {
                    let h = env.plugin(spec).await?;
                    steps::deploy_target(env, spec, ctx.id(), &h, t, info).await
                }
            },
        )
        .await?;
        for (t, r) in results {
            let line = target_report(batch.index, &t.moniker.to_string(), r.as_ref());
            if failure.is_none()
                && let Some(Err(f)) = &r
            {
                failure = Some(format!("{} failed: {f}", t.name));
            }
            report.targets.push(line);
        }
        if failure.is_none()
            && let Strategy::Rolling {
                interval: Some(d), ..
            } = spec.strategy
            && (batch.index as usize) < n
        {
            ctx.set_event("phase", &"waiting between batches").await?;
            ctx.sleep(d).await?;
        }
    }
    let Some(failure) = failure else {
        report.result = "deployed".into();
        report.message = format!(
            "{} deployed to {} targets of {}",
            spec.artifact.version,
            plan.len(),
            spec.subject()
        );
        ctx.set_event("phase", &"done").await?;
        return Ok(report.outcome(true));
    };
    report.message = failure;
    if spec.atomic {
        ctx.set_event("phase", &"rolling back").await?;
        report.rolled_back = undo(&env, &ctx, spec, &plan, &report.targets, &before, par).await?;
        report.result = "rolled_back".into();
        report
            .message
            .push_str("; the targets it changed were rolled back");
    }
    ctx.set_event("phase", &"failed").await?;
    Ok(report.outcome(false))
}

async fn dry_run(
    env: &DeployEnv,
    ctx: &WfCtx,
    spec: &EnvSpec,
    plan: &Plan,
    info: &PluginInfo,
    par: u32,
    mut report: Report,
) -> Result<RunOutcome, Interrupt> {
    if !info.capabilities.has(crate::plugin::Capability::DryRun) {
        report.result = "validated".into();
        report.message = format!(
            "{} has no dry-run: the plan is valid and the plugin accepted it; nothing else was asked",
            spec.plugin
        );
        report.targets = plan
            .targets()
            .map(|(b, t)| planned(b.index, &t.moniker.to_string()))
            .collect();
        ctx.set_event("phase", &"done").await?;
        return Ok(report.outcome(true));
    }
    let targets: Vec<Target> = plan.request_targets();
    let result = ctx
        .step("dry_run", &steps::target_policy(spec), |info| {
            let targets = targets.clone();
            async move {
                let h = env.plugin(spec).await?;
                let dr = h.deployer.dry_runner().ok_or_else(|| {
                    StepError::Permanent(format!("plugin {} has no dry-run", spec.plugin))
                })?;
                let (secrets, _open) = steps::secrets(env, spec);
                let req = steps::request(spec, ctx.id(), targets, par, secrets, Some(&info));
                dr.dry_run(&req).await.map_err(StepError::from)
            }
        })
        .await?;
    match result {
        Ok(r) => {
            report.targets = plan
                .targets()
                .zip(r.targets)
                .map(|((b, t), tr)| TargetReport {
                    moniker: t.moniker.to_string(),
                    batch: b.index,
                    status: tr.status.as_str().into(),
                    attempts: 1,
                    message: tr.message,
                    duration_ms: tr.duration_ms,
                })
                .collect();
            report.result = "planned".into();
            report.message = format!(
                "dry-run of {} on {}: nothing was changed",
                spec.artifact.version,
                spec.subject()
            );
            ctx.set_event("phase", &"done").await?;
            Ok(report.outcome(true))
        }
        Err(f) => failed(ctx, report, f.to_string()).await,
    }
}

/// Rolls back, last batch first, every target this deploy changed.
async fn undo(
    env: &DeployEnv,
    ctx: &WfCtx,
    spec: &EnvSpec,
    plan: &Plan,
    done: &[TargetReport],
    before: &BTreeMap<String, Live>,
    par: u32,
) -> Result<Vec<TargetReport>, Interrupt> {
    let deployed: Vec<&str> = done
        .iter()
        .filter(|t| t.status == "deployed")
        .map(|t| t.moniker.as_str())
        .collect();
    let policy = steps::target_policy(spec);
    let mut out = Vec::new();
    for batch in plan.batches.iter().rev() {
        let targets: Vec<_> = batch
            .targets
            .iter()
            .filter(|t| deployed.contains(&t.moniker.to_string().as_str()))
            .cloned()
            .collect();
        if targets.is_empty() {
            continue;
        }
        let undo_batch = Batch {
            index: batch.index,
            targets,
        };
        let results = steps::run_batch(
            ctx,
            "rollback",
            &undo_batch,
            par,
            OnError::Continue,
            &policy,
            |t, info| {
                let m = t.moniker.to_string();
                let live = Live {
                    current: Some(Release {
                        version: spec.artifact.version.clone(),
                        artifact: spec.artifact.clone(),
                        deployment_id: ctx.id().to_owned(),
                    }),
                    previous: before.get(&m).and_then(|l| l.current.clone()),
                };
                async move {
                    let h = env.plugin(spec).await?;
                    steps::rollback_target(env, spec, ctx.id(), &h, t, &live, info).await
                }
            },
        )
        .await?;
        for (t, r) in results {
            out.push(target_report(
                batch.index,
                &t.moniker.to_string(),
                r.as_ref(),
            ));
        }
    }
    Ok(out)
}

/// A target's report line from its step result.
pub fn target_report(
    batch: u32,
    moniker: &str,
    r: Option<&StepResult<TargetDone>>,
) -> TargetReport {
    match r {
        Some(Ok(d)) => TargetReport {
            moniker: moniker.to_owned(),
            batch,
            status: d.status.as_str().into(),
            attempts: d.attempt,
            message: d.message.clone(),
            duration_ms: d.duration_ms,
        },
        Some(Err(f)) => TargetReport {
            moniker: moniker.to_owned(),
            batch,
            status: TargetStatus::Failed.as_str().into(),
            attempts: f.attempts,
            message: f.to_string(),
            duration_ms: 0,
        },
        None => skipped(batch, moniker),
    }
}

fn skipped(batch: u32, moniker: &str) -> TargetReport {
    TargetReport {
        moniker: moniker.to_owned(),
        batch,
        status: TargetStatus::Skipped.as_str().into(),
        attempts: 0,
        message: "not started: an earlier target failed".into(),
        duration_ms: 0,
    }
}

fn planned(batch: u32, moniker: &str) -> TargetReport {
    TargetReport {
        moniker: moniker.to_owned(),
        batch,
        status: "planned".into(),
        attempts: 0,
        message: String::new(),
        duration_ms: 0,
    }
}

/// Ends the workflow as failed with `message`.
pub async fn failed(
    ctx: &WfCtx,
    mut report: Report,
    message: String,
) -> Result<RunOutcome, Interrupt> {
    report.message = message;
    ctx.set_event("phase", &"failed").await?;
    Ok(report.outcome(false))
}
