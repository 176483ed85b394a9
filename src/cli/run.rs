//! Verbs that start deployments — deploy, rollback — and the engine alone (worker). They run
//! the engine in this process, or, when another process holds the database, hand the work to
//! it and follow along.

use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use super::follow::{self, Expect, Runner};
use super::output::{Out, db_error, load_config, open_store, resolve};
use super::{DeployArgs, RollbackArgs, exit};
use crate::config::EnvSpec;
use crate::deploy::plan::Plan;
use crate::deploy::releases::Transitions;
use crate::deploy::submit::{self, Submitted};
use crate::deploy::view::WorkflowStatus;
use crate::engine::Engine;
use crate::engine::request::{Asked, Request, Requests};
use crate::operator::Operator;

/// Asks before acting; a production environment's name must be typed.
async fn confirm(what: &str, spec: &EnvSpec, out: &mut Out) -> Result<(), u8> {
    if !std::io::stdin().is_terminal() {
        out.error(format!(
            "refusing to {what} without confirmation: stdin is not a terminal; pass --yes"
        ));
        return Err(exit::BAD_INPUT);
    }
    let (prompt, expected) = if spec.production {
        (
            format!(
                "{what}\n{} is a production environment: type its name to continue: ",
                spec.environment
            ),
            spec.environment.clone(),
        )
    } else {
        (format!("{what}? [y/N] "), "y".to_owned())
    };
    out.note(prompt.trim_end());
    let answer = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await
    .ok()
    .and_then(Result::ok)
    .unwrap_or_default();
    let answer = answer.trim();
    if answer == expected || (!spec.production && answer.eq_ignore_ascii_case("yes")) {
        Ok(())
    } else {
        out.note("manent: not confirmed; nothing was done");
        Err(exit::CANCELLED)
    }
}

/// `manent deploy`
pub async fn deploy(config_path: &Path, a: &DeployArgs, out: &mut Out) -> u8 {
    let Some(config) = load_config(config_path, a.target.file.as_deref(), out) else {
        return exit::BAD_INPUT;
    };
    let Some((spec, plan)) = resolve(
        &config,
        &a.target.app,
        &a.target.env,
        (a.version.as_deref(), a.uri.as_deref()),
        out,
    ) else {
        return exit::BAD_INPUT;
    };
    if spec.artifact.version.is_empty() {
        out.error(format!(
            "no version to deploy: set artifact.version in {} or pass --version",
            spec.descriptor.display()
        ));
        return exit::BAD_INPUT;
    }
    if !a.dry_run
        && let Err(code) = refuse_if_locked(&config, &spec, a.force, a.reason.as_deref(), out).await
    {
        return code;
    }
    if !a.dry_run {
        let mut what = format!(
            "deploy {} {} to {} ({})",
            spec.application,
            spec.artifact.version,
            spec.environment,
            crate::deploy::plan::size(plan.len(), plan.batches.len())
        );
        if let Ok(store) = open_store(&config).await {
            let live = crate::deploy::releases::live_versions(
                crate::deploy::records::Records::releases(&*store, &spec.subject())
                    .await
                    .unwrap_or_default(),
            );
            if !live.is_empty() && live.values().all(|v| *v == spec.artifact.version) {
                what.push('\n');
                what.push_str(&crate::deploy::plan::already_live(
                    &spec.artifact.version,
                    a.force,
                ));
            }
            // A deploy of this version that stopped short: said before anything starts.
            if !a.force
                && let Ok(Some(u)) = crate::deploy::lineage::unfinished_same(&*store, &spec).await
            {
                if a.yes {
                    out.note(format!("manent: {u}"));
                } else {
                    what.push_str(&format!("\n{u}"));
                }
            }
        }
        if !a.yes
            && let Err(code) = confirm(&what, &spec, out).await
        {
            return code;
        }
    }
    let runner = match Runner::start(&config, out).await {
        Ok(r) => r,
        Err(code) => return code,
    };
    let operator = Operator::from_env();
    let request = if a.dry_run {
        Request::DryRun
    } else {
        Request::Deploy
    };
    let asked = Asked {
        reason: a.reason.as_deref(),
        force: a.force,
    };
    let submitted = runner
        .requests(&config, &operator)
        .start(&spec, request, asked)
        .await;
    let what = format!(
        "{}{} {} to",
        if a.dry_run { "dry-run of " } else { "" },
        spec.application,
        spec.artifact.version
    );
    let started = Started {
        what: &what,
        spec: &spec,
        plan: &plan,
    };
    let how = How {
        verbose: a.verbose,
        json: a.json.json,
        wait: a.wait,
    };
    start_and_follow(runner, submitted, &started, how, out).await
}

/// `manent test`: runs the application's `test` hooks against what is live, and follows them.
pub async fn test(config_path: &Path, a: &super::TestArgs, out: &mut Out) -> u8 {
    let Some(config) = load_config(config_path, a.target.file.as_deref(), out) else {
        return exit::BAD_INPUT;
    };
    let Some((spec, plan)) = resolve(&config, &a.target.app, &a.target.env, (None, None), out)
    else {
        return exit::BAD_INPUT;
    };
    let names: Vec<&str> = plan
        .hooks_at(crate::config::Event::Test)
        .map(|h| h.name.as_str())
        .collect();
    if names.is_empty() {
        out.error(format!(
            "{} has no test hooks: give a hook `events: [test]` in {}",
            spec.subject(),
            spec.descriptor.display()
        ));
        return exit::BAD_INPUT;
    }
    if !a.yes {
        let what = format!(
            "run the test hooks of {} in {} ({})",
            spec.application,
            spec.environment,
            names.join(", ")
        );
        if let Err(code) = confirm(&what, &spec, out).await {
            return code;
        }
    }
    let runner = match Runner::start(&config, out).await {
        Ok(r) => r,
        Err(code) => return code,
    };
    let operator = Operator::from_env();
    let asked = Asked {
        reason: a.reason.as_deref(),
        force: false,
    };
    let request = Request::Test {
        candidate: a.candidate.as_deref(),
    };
    let submitted = match runner
        .requests(&config, &operator)
        .start(&spec, request, asked)
        .await
    {
        Ok(s) => s,
        Err(e) => {
            out.error(e);
            runner.finish(false, None, out).await;
            return exit::BAD_INPUT;
        }
    };
    let id = submitted.id().to_owned();
    out.note(format!(
        "manent: {id}: the test hooks of {} in {}: {}",
        spec.application,
        spec.environment,
        names.join(", ")
    ));
    follow::to_end(runner, &id, a.verbose, a.json.json, Expect::End, out).await
}

/// `manent rollback`
pub async fn rollback(config_path: &Path, a: &RollbackArgs, out: &mut Out) -> u8 {
    let Some(config) = load_config(config_path, a.target.file.as_deref(), out) else {
        return exit::BAD_INPUT;
    };
    let Some((spec, plan)) = resolve(&config, &a.target.app, &a.target.env, (None, None), out)
    else {
        return exit::BAD_INPUT;
    };
    // Where each target goes, from the records: nothing to go back to is refused here.
    let moves = match open_store(&config).await {
        Ok(store) => submit::rollback_moves(&*store, &spec).await,
        Err(e) => return db_error(&super::output::database_shown(&config), &e, out),
    };
    let moves = match moves {
        Ok(m) => m,
        Err(e @ submit::SubmitError::NothingToRollBack(_)) => {
            out.error(e);
            return exit::BAD_INPUT;
        }
        Err(e) => {
            out.error(e);
            return exit::ENGINE;
        }
    };
    let transitions = Transitions::of(&moves);
    if let Err(code) = refuse_if_locked(&config, &spec, a.force, a.reason.as_deref(), out).await {
        return code;
    }
    if !a.yes {
        let what = format!(
            "roll back {} in {}: {transitions}",
            spec.application, spec.environment
        );
        if let Err(code) = confirm(&what, &spec, out).await {
            return code;
        }
    }
    let runner = match Runner::start(&config, out).await {
        Ok(r) => r,
        Err(code) => return code,
    };
    let operator = Operator::from_env();
    let asked = Asked {
        reason: a.reason.as_deref(),
        force: a.force,
    };
    let submitted = runner
        .requests(&config, &operator)
        .start(&spec, Request::Rollback, asked)
        .await;
    let what = format!("rolling back {} ({transitions}) in", spec.application);
    let started = Started {
        what: &what,
        spec: &spec,
        plan: &plan,
    };
    let how = How {
        verbose: a.verbose,
        json: a.json.json,
        wait: false,
    };
    start_and_follow(runner, submitted, &started, how, out).await
}

/// Refuses (exit 2) before any question when the environment is locked and this is not a
/// break-glass with a reason; a break-glass is said aloud.
async fn refuse_if_locked(
    config: &crate::config::Config,
    spec: &EnvSpec,
    force: bool,
    reason: Option<&str>,
    out: &mut Out,
) -> Result<(), u8> {
    let Ok(Some(store)) = super::output::existing_store(config).await else {
        return Ok(());
    };
    let operator = Operator::from_env();
    let asked = Asked { reason, force };
    let requests = Requests::new(config, &*store, &operator, None);
    match requests.through_lock(spec, "deploy", asked).await {
        Ok(forced) if forced.is_empty() => Ok(()),
        Ok(_) => {
            out.note(format!(
                "manent: {} is locked; going through the lock (a break-glass, journaled)",
                spec.subject()
            ));
            Ok(())
        }
        Err(e @ (submit::SubmitError::Locked(_) | submit::SubmitError::BadInput(_))) => {
            out.error(e);
            Err(exit::BAD_INPUT)
        }
        Err(_) => Ok(()),
    }
}

/// What was asked to start, as the first line says it: `what` ("1.2.0 of web to"), the
/// environment's spec and the plan.
struct Started<'a> {
    what: &'a str,
    spec: &'a EnvSpec,
    plan: &'a Plan,
}

/// How a command follows what it started: every line or the summary, JSON, and to the very end
/// (`--wait`: through a canary's analysis and promotion) or until it settles.
#[derive(Debug, Clone, Copy)]
struct How {
    verbose: bool,
    json: bool,
    wait: bool,
}

/// Says what was submitted, runs it, and follows it to its end.
async fn start_and_follow(
    runner: Runner,
    submitted: Result<Submitted, submit::SubmitError>,
    started: &Started<'_>,
    how: How,
    out: &mut Out,
) -> u8 {
    let &Started { what, spec, plan } = started;
    let How {
        verbose,
        json,
        wait,
    } = how;
    let submitted = match submitted {
        Ok(s) => s,
        Err(e) => {
            out.error(e);
            runner.finish(false, None, out).await;
            return exit::BAD_INPUT;
        }
    };
    let id = submitted.id().to_owned();
    match &submitted {
        Submitted::Started(_) => out.note(format!(
            "manent: {id}: {what} {}: {}",
            spec.environment,
            crate::deploy::plan::size(plan.len(), plan.batches.len())
        )),
        Submitted::Resuming(_) => out.note(format!(
            "manent: the same deploy was interrupted earlier; resuming {id} from its last checkpoint"
        )),
        Submitted::Retrying(_) => out.note(format!(
            "manent: the same deploy failed on targets and waited for a decision; retrying them in {id}"
        )),
    }
    let expect = if wait { Expect::Finish } else { Expect::End };
    follow::to_end(runner, &id, verbose, json, expect, out).await
}

/// `manent worker`
pub async fn worker(config_path: &Path, until_idle: bool, out: &mut Out) -> u8 {
    let Some(config) = load_config(config_path, None, out) else {
        return exit::BAD_INPUT;
    };
    // Taken before the engine starts: Ctrl-C or SIGTERM while it starts (waiting on a
    // database) ends it with a word instead of the default silent death; what the start had
    // recorded is left as after a kill (the lease lapses, the next engine reconciles).
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return exit::ENGINE;
    };
    let started = tokio::select! {
        started = Engine::start(&config) => Some(started),
        _ = int.recv() => None,
        _ = term.recv() => None,
    };
    let engine = match started {
        Some(Ok(e)) => e,
        Some(Err(e)) => {
            out.error(e);
            return exit::ENGINE;
        }
        None => {
            out.note("manent worker: stopped before the engine had started; nothing ran");
            return exit::INTERRUPTED;
        }
    };
    out.note(format!(
        "manent worker: engine pid {} on {}; resumed {} deployment(s); Ctrl-C or SIGTERM stops it",
        std::process::id(),
        super::output::database_shown(&config),
        engine.recovered().len()
    ));
    let mut events = engine.events();
    let mut logs = engine.logs();
    let mut idle_check = tokio::time::interval(Duration::from_secs(1));
    // Under systemd (`Type=notify`): ready once the engine holds its lease and runs, alive for
    // its watchdog while it still holds it.
    let systemd = super::notify_systemd::Notifier::from_env();
    let mut alive = tokio::time::interval(
        systemd
            .as_ref()
            .and_then(|n| n.watchdog)
            .unwrap_or(Duration::from_secs(3600)),
    );
    if let Some(n) = &systemd {
        n.say(&format!(
            "READY=1\nSTATUS=engine pid {} on {}; resumed {} deployment(s)",
            std::process::id(),
            super::output::database_shown(&config),
            engine.recovered().len()
        ));
    }
    loop {
        tokio::select! {
            _ = int.recv() => break,
            _ = term.recv() => break,
            _ = alive.tick(), if systemd.as_ref().is_some_and(|n| n.watchdog.is_some()) => {
                // Only an engine that still holds its lease says it is alive.
                if engine.lost().is_none()
                    && let Some(n) = &systemd
                {
                    n.say("WATCHDOG=1");
                }
            }
            _ = idle_check.tick() => {
                if let Some(why) = engine.lost() {
                    out.error(format!("manent worker: {why}"));
                    engine.shutdown_within(Duration::ZERO, Duration::from_secs(2)).await;
                    return exit::ENGINE;
                }
                if until_idle && engine.busy() == 0 {
                    out.note("manent worker: nothing left to do (every deployment finished or waits for an operator)");
                    break;
                }
            }
            ev = events.recv() => match ev {
                Ok(crate::engine::RuntimeEvent::Claimed { workflow_id, name, .. }) => out.note(format!("manent worker: running {name} {workflow_id}")),
                Ok(crate::engine::RuntimeEvent::Ended { workflow_id, status, reason }) => {
                    let s = status.map_or("unfinished", WorkflowStatus::as_str);
                    out.note(format!("manent worker: {workflow_id} {s} ({reason})"));
                }
                _ => {}
            },
            line = logs.recv() => if let Ok(l) = line && l.level >= crate::plugin::Level::Warn {
                out.note(format!("    {} [{}] {}", l.level.as_str(), l.source, l.message));
            },
        }
    }
    out.note("manent worker: stopping: steps in flight finish (up to engine.drain_timeout), nothing new starts (again to stop at once)");
    if let Some(n) = &systemd {
        n.say("STOPPING=1\nSTATUS=draining: steps in flight finish, nothing new starts");
    }
    engine.exit_on_second_signal(i32::from(exit::INTERRUPTED));
    let (store, ran) = (engine.store().clone(), engine.active());
    let left = engine.shutdown().await;
    // Stopped at a step boundary (the steps in flight finished): said, for whoever resumes.
    let mut stopped = Vec::new();
    for id in &ran {
        if let Ok(Some(row)) = store.workflow(id).await
            && row.status.is_live()
        {
            stopped.push(id.clone());
        }
    }
    if !stopped.is_empty() {
        out.note(format!(
            "manent worker: stopped {} at a step boundary; the next engine resumes {}",
            stopped.join(", "),
            if stopped.len() == 1 { "it" } else { "them" }
        ));
    }
    if left > 0 {
        out.note(format!(
            "manent worker: {left} deployment(s) left running; they resume at the next start"
        ));
        return exit::INTERRUPTED;
    }
    exit::OK
}
