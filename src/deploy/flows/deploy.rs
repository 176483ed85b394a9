//! The deploy workflow: plan → plugin capabilities → validate → releases live before → batches
//! (each target its own step, up to `parallelism` at once). A failed target waits for an
//! operator's retry, skip or abort (guided failure); with `atomic: true` the targets it changed
//! go back at once instead. An abort rolls back what the deploy changed. A dry-run stops after
//! asking the plugin what it would do.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::EnvSpec;
use crate::config::Event;
use crate::deploy::hooks;
use crate::deploy::plan::PlannedTarget;
use crate::deploy::releases::{Live, Transitions};
use crate::deploy::run::{self, FanOut, Run, Stop};
use crate::deploy::state::{Action, Ending, Kind, Phase, StepName, TargetState};
use crate::deploy::steps;
use crate::deploy::{DeployEnv, DeployInput, Report, TargetReport, outcome};
use crate::plugin::{Capability, OnError};
use crate::workflow::{Interrupt, RunOutcome, StepError, WfCtx};

/// Why a target never ran, in a failed deploy's report.
const NOT_STARTED: &str = "not started: the deploy stopped before it";

/// Runs a deploy (or dry-run) from its stored inputs.
pub async fn run(env: Arc<DeployEnv>, ctx: WfCtx, inputs: String) -> Result<RunOutcome, Interrupt> {
    let input: DeployInput = match serde_json::from_str(&inputs) {
        Ok(i) => i,
        Err(e) => return Ok(Report::bad_inputs(Kind::Deploy, &e)),
    };
    let kind = if input.dry_run {
        Kind::DryRun
    } else {
        Kind::Deploy
    };
    outcome(deploy(&env, &ctx, &input.spec, kind, input.force).await)
}

async fn deploy(
    env: &DeployEnv,
    ctx: &WfCtx,
    spec: &EnvSpec,
    kind: Kind,
    redo: bool,
) -> Result<Report, Interrupt> {
    let mut run = match Run::begin(env, ctx, spec, kind).await {
        Ok(r) => r,
        Err(stop) => return run::not_begun(ctx, kind, &spec.artifact.version, stop).await,
    };
    let report = match body(&mut run, redo).await {
        Ok(r) => r,
        Err(Stop::Interrupt(i)) => return Err(i),
        Err(Stop::Failed(why) | Stop::Abort(why)) => run.report(Ending::Failed, why, NOT_STARTED),
    };
    run.end(report).await
}

async fn body(run: &mut Run<'_>, redo: bool) -> Result<Report, Stop> {
    let (env, ctx, spec) = (run.env, run.ctx, run.spec);
    run.validate().await?;
    if run.kind == Kind::DryRun {
        return dry_run(run).await;
    }
    if spec.atomic && !run.info.capabilities.can_roll_back() {
        return Err(Stop::Failed(format!(
            "atomic: true needs a plugin that can roll back, and {} announces only [{}] (needs \
             current_release and rollback); nothing was touched",
            spec.plugin, run.info.capabilities
        )));
    }
    let before = run.releases_before().await?;
    let vars = hooks::Vars::before(&before);
    hooks::run_event(run, Event::PreDeploy, &vars)
        .await
        .map_err(|e| match e {
            Stop::Failed(why) => Stop::Failed(format!("{why}; no target was touched")),
            other => other,
        })?;
    let how = FanOut {
        action: Action::Deploy,
        on_error: OnError::Stop,
        guided: !spec.atomic,
    };
    let (before_ref, vars_ref) = (&before, &vars);
    let version = spec.artifact.version.as_str();
    let outcome = run
        .batches(
            how,
            |_| true,
            |t, info| {
                let live = steps::Before {
                    live: before_ref.get(&t.moniker.to_string()),
                    redo,
                };
                async move {
                    let deploy = async {
                        let h = env.plugin(spec).await?;
                        steps::deploy_target(
                            steps::TargetStep {
                                env,
                                spec,
                                wf: ctx.id(),
                                plugin: &h,
                                t: &t,
                            },
                            live,
                            info,
                        )
                        .await
                    };
                    super::gated((env, spec, ctx.id()), (&t, version), vars_ref, deploy).await
                }
            },
        )
        .await;
    let outcome = match outcome {
        Ok(()) => match hooks::run_event(run, Event::PostDeploy, &vars).await {
            Ok(ran) => {
                let mut r = deployed(run);
                r.message = ran.noted(r.message);
                return Ok(r);
            }
            Err(Stop::Failed(why)) => {
                let done = deployed(run).message;
                Err(Stop::Failed(hooks::after(done, &why)))
            }
            Err(other) => Err(other),
        },
        other => other,
    };
    match outcome {
        Ok(()) => Ok(deployed(run)),
        Err(Stop::Failed(why)) if spec.atomic => {
            let (lines, moved) = undo(run, &before, &vars).await?;
            let mut r = run.report(Ending::RolledBack, why, NOT_STARTED);
            r.message.push_str(&format!(
                "; the targets it changed were rolled back ({moved})"
            ));
            r.rolled_back = lines;
            Ok(r)
        }
        Err(Stop::Abort(by)) => {
            let (lines, moved) = undo(run, &before, &vars).await?;
            let where_now = read_back(run, &before).await?;
            let new = lines
                .iter()
                .filter(|l| l.status == TargetState::Deployed)
                .count();
            let what = match (moved.is_empty(), new) {
                (true, 0) => "no target had changed".to_owned(),
                (true, n) => format!(
                    "the {n} targets it deployed had no earlier release to go back to and stay \
                     on {}",
                    run.spec.artifact.version
                ),
                (false, 0) => format!("the targets it changed went back: {moved}"),
                (false, n) => format!(
                    "the targets it changed went back: {moved}; {n} new ones had nowhere to go"
                ),
            };
            let mut r = run.report(
                Ending::Aborted,
                format!("aborted by {by}; {what}{where_now}"),
                "not started: the deploy was aborted",
            );
            r.transitions = moved;
            r.rolled_back = lines;
            Ok(r)
        }
        Err(other) => Err(other),
    }
}

/// Rolls back every target this deploy changed (not the ones already on its version, nor the
/// ones new to manent, which have nothing to go back to), its rollback hooks around it.
async fn undo(
    run: &mut Run<'_>,
    before: &BTreeMap<String, Live>,
    vars: &hooks::Vars,
) -> Result<(Vec<TargetReport>, Transitions), Stop> {
    hooks::run_event(run, Event::PreRollback, vars)
        .await
        .map_err(|e| match e {
            Stop::Failed(why) => Stop::Failed(format!("{why}; nothing was rolled back")),
            other => other,
        })?;
    let version = &run.spec.artifact.version;
    // A target that failed (or was cut off) may have switched before it failed: the plugin
    // says what it runs, and one on the new version goes back too — never assumed unchanged.
    let touched_failed =
        run.tally.results.values().any(|r| {
            matches!(r.status, TargetState::Failed | TargetState::Unknown) && r.attempts > 0
        });
    let now = if touched_failed {
        match run.current_releases().await {
            Ok(now) => now,
            // Unreadable: those targets are said as such after the undo, not guessed.
            Err(Stop::Failed(_)) => None,
            Err(other) => return Err(other),
        }
    } else {
        None
    };
    let changed: Vec<PlannedTarget> = run
        .plan
        .targets()
        .filter(|(_, t)| {
            let result = run.tally.results.get(&t.name);
            let deployed = result.is_some_and(|r| r.status == TargetState::Deployed);
            let failed_on_new = result
                .is_some_and(|r| matches!(r.status, TargetState::Failed | TargetState::Unknown))
                && now
                    .as_ref()
                    .and_then(|n| n.get(&t.name))
                    .is_some_and(|v| v == version);
            let was = before
                .get(&t.moniker.to_string())
                .and_then(|l| l.current.as_ref())
                .map(|c| &c.version);
            (deployed || failed_on_new) && was != Some(version)
        })
        .map(|(_, t)| t.clone())
        .collect();
    let refs: Vec<&PlannedTarget> = changed.iter().collect();
    let moves = steps::undo_moves(&refs, before, run.spec, run.ctx.id());
    let (env, spec, ctx) = (run.env, run.spec, run.ctx);
    let mut lines = run
        .undo(&moves, |t, mv, info| async move {
            super::gated_rollback((env, spec, ctx.id()), &t, &mv, info, vars).await
        })
        .await?;
    hooks::run_event(run, Event::PostRollback, vars).await?;
    for (b, t) in run.plan.targets() {
        if changed.iter().any(|c| c.name == t.name) && !moves.iter().any(|m| m.target == t.name) {
            lines.push(TargetReport {
                moniker: t.moniker.to_string(),
                batch: b.index,
                status: TargetState::Deployed,
                attempts: 0,
                message: "new on this target: no earlier release to go back to".into(),
                duration_ms: 0,
            });
        }
    }
    Ok((lines, Transitions::of(&moves)))
}

/// Where every target the deploy touched is now, read back from the plugin after the undo
/// (`; now: web-1 2.0.0, web-2 2.0.0 (read back)`, or `2.0.0 on 40 targets` past a handful),
/// so an abort's words are the targets' own; empty when the plugin cannot tell.
async fn read_back(run: &Run<'_>, before: &BTreeMap<String, Live>) -> Result<String, Stop> {
    let touched = |name: &str| run.tally.results.get(name).is_some_and(|r| r.attempts > 0);
    if !run.plan.targets().any(|(_, t)| touched(&t.name)) {
        return Ok(String::new());
    }
    let now = match run.current_releases().await {
        Ok(Some(now)) => now,
        Ok(None) => return Ok(String::new()),
        Err(Stop::Failed(why)) => {
            return Ok(format!(
                "; where the targets are now could not be read back: {why}"
            ));
        }
        Err(other) => return Err(other),
    };
    let version = &run.spec.artifact.version;
    let (mut each, mut still) = (Vec::new(), Vec::new());
    let mut by_version: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, t) in run.plan.targets().filter(|(_, t)| touched(&t.name)) {
        let v = now.get(&t.name).map_or("", String::as_str);
        let v = if v.is_empty() { "?" } else { v };
        let was = before
            .get(&t.moniker.to_string())
            .and_then(|l| l.current.as_ref())
            .map(|c| c.version.as_str());
        if v == version && was.is_some_and(|w| w != version) {
            still.push(t.name.as_str());
        }
        each.push(format!("{} {v}", t.name));
        *by_version.entry(v).or_default() += 1;
    }
    // A handful by name; a fleet by version (the ones still on the new release are named).
    let said = if each.len() <= 10 {
        each.join(", ")
    } else {
        by_version
            .iter()
            .map(|(v, n)| format!("{v} on {}", crate::deploy::plan::count(*n, "target")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let warn = if still.is_empty() {
        String::new()
    } else {
        format!(
            "; still on {version}: {} (`manent rollback` takes {} back)",
            still.join(", "),
            if still.len() == 1 { "it" } else { "them" }
        )
    };
    Ok(format!("; now: {said} (read back){warn}"))
}

fn deployed(run: &Run<'_>) -> Report {
    let n = run.plan.len();
    let skipped = run.tally.skipped.len();
    let (version, subject) = (&run.spec.artifact.version, run.spec.subject());
    let message = if skipped == 0 {
        format!(
            "{version} deployed to {} of {subject}",
            crate::deploy::plan::count(n, "target")
        )
    } else {
        format!(
            "{version} deployed to {} of {n} targets of {subject}; {skipped} skipped by an \
             operator keep their release",
            n - skipped
        )
    };
    run.report(Ending::Deployed, message, NOT_STARTED)
}

async fn dry_run(run: &mut Run<'_>) -> Result<Report, Stop> {
    let spec = run.spec;
    if !run.info.capabilities.has(Capability::DryRun) {
        let mut r = run.report(
            Ending::Validated,
            format!(
                "{} has no dry-run: the plan is valid and the plugin accepted it; nothing else \
                 was asked",
                spec.plugin
            ),
            "",
        );
        for t in &mut r.targets {
            t.status = TargetState::Planned;
        }
        return Ok(r);
    }
    run.phase(Phase::Batch { batch: 1, of: 1 }).await?;
    let plugin = spec.plugin.clone();
    let answer = run
        .plugin_step(
            StepName::DryRun,
            &steps::target_policy(spec),
            true,
            |h, req| {
                let plugin = plugin.clone();
                async move {
                    let dr = h.deployer.dry_runner().ok_or_else(|| {
                        StepError::Permanent(format!("plugin {plugin} has no dry-run"))
                    })?;
                    dr.dry_run(&req).await.map_err(StepError::from)
                }
            },
        )
        .await?;
    let mut r = run.report(
        Ending::Planned,
        format!(
            "dry-run of {} on {}: nothing was changed",
            spec.artifact.version,
            spec.subject()
        ),
        "",
    );
    for (line, tr) in r.targets.iter_mut().zip(answer.targets) {
        line.status = TargetState::Planned;
        line.attempts = 1;
        line.message = tr.message;
        line.duration_ms = tr.duration_ms;
    }
    Ok(r)
}
