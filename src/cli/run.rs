//! Verbs that run or steer deployments: deploy, rollback, resume, cancel, pause, worker. They
//! run the engine in this process, or, when another process holds the database, hand the work
//! to it and follow along.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use super::output::{self, Out, load_config, open_store, resolve};
use super::{ControlArgs, DeployArgs, RollbackArgs, exit};
use crate::config::{Config, EnvSpec};
use crate::deploy::plan::Plan;
use crate::deploy::submit::{self, Submission, Submitted};
use crate::deploy::view::DeploymentView;
use crate::engine::{Engine, EngineError};
use crate::operator::Operator;
use crate::workflow::store::{Message, SendRequest, Sent, Store, WorkflowStatus};
use crate::workflow::{Lease, LeaseError};

/// Where deployments run: here, or in the engine that holds the database.
enum Runner {
    Local(Box<Engine>),
    Remote {
        store: Arc<dyn Store>,
        db: std::path::PathBuf,
    },
}

impl Runner {
    async fn start(config: &Config, out: &mut Out) -> Result<Runner, u8> {
        match Engine::start(config).await {
            Ok(engine) => {
                for id in engine.recovered() {
                    out.note(format!(
                        "manent: resuming {id}, which an earlier run left unfinished"
                    ));
                }
                Ok(Runner::Local(Box::new(engine)))
            }
            Err(EngineError::Lease(e @ LeaseError::Held { .. })) => {
                out.note(format!("manent: {e}"));
                out.note("manent: handing the work to that engine and following it here");
                match open_store(config) {
                    Ok(s) => Ok(Runner::Remote {
                        store: Arc::new(s),
                        db: config.database.clone(),
                    }),
                    Err(e) => {
                        out.error(e);
                        Err(exit::ENGINE)
                    }
                }
            }
            Err(e) => {
                out.error(e);
                Err(exit::ENGINE)
            }
        }
    }

    fn store(&self) -> &dyn Store {
        match self {
            Runner::Local(e) => e.store().as_ref(),
            Runner::Remote { store, .. } => store.as_ref(),
        }
    }

    async fn run(&self, id: &str) {
        if let Runner::Local(e) = self
            && let Err(err) = e.run(id).await
        {
            tracing::warn!(deployment = id, error = %err, "could not start");
        }
    }

    /// Stops the engine run here; `stopping` when the operator interrupted: then in-flight
    /// targets finish and nothing new starts, rather than waiting for whole deployments.
    async fn finish(self, stopping: bool) -> usize {
        match self {
            Runner::Local(e) if stopping => {
                let hard = e.config().engine.hard_timeout;
                e.shutdown_within(Duration::ZERO, hard).await
            }
            Runner::Local(e) => e.shutdown().await,
            Runner::Remote { .. } => 0,
        }
    }
}

/// Asks before acting; a production environment's name must be typed.
async fn confirm(action: &str, spec: &EnvSpec, plan: &Plan, out: &mut Out) -> Result<(), u8> {
    if !std::io::stdin().is_terminal() {
        out.error(format!(
            "refusing to {action} without confirmation: stdin is not a terminal; pass --yes"
        ));
        return Err(exit::BAD_INPUT);
    }
    let what = format!(
        "{action} {} {} to {} ({} targets in {} batches)",
        spec.application,
        spec.artifact.version,
        spec.environment,
        plan.len(),
        plan.batches.len()
    );
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
        a.version.as_deref(),
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
    if !a.yes
        && !a.dry_run
        && let Err(code) = confirm("deploy", &spec, &plan, out).await
    {
        return code;
    }
    let runner = match Runner::start(&config, out).await {
        Ok(r) => r,
        Err(code) => return code,
    };
    let operator = Operator::from_env();
    let sub = Submission {
        operator: &operator,
        reason: a.reason.as_deref(),
        max_recovery_attempts: config.engine.max_recovery_attempts,
    };
    let submitted = submit::deploy(runner.store(), &spec, a.dry_run, &sub).await;
    let what = format!(
        "{}{} {} to",
        if a.dry_run { "dry-run of " } else { "" },
        spec.application,
        spec.artifact.version
    );
    start_and_follow(
        runner,
        submitted,
        &what,
        &spec,
        &plan,
        a.verbose,
        a.json.json,
        out,
    )
    .await
}

/// `manent rollback`
pub async fn rollback(config_path: &Path, a: &RollbackArgs, out: &mut Out) -> u8 {
    let Some(config) = load_config(config_path, a.target.file.as_deref(), out) else {
        return exit::BAD_INPUT;
    };
    let Some((spec, plan)) = resolve(&config, &a.target.app, &a.target.env, None, out) else {
        return exit::BAD_INPUT;
    };
    if !a.yes
        && let Err(code) = confirm("roll back", &spec, &plan, out).await
    {
        return code;
    }
    let runner = match Runner::start(&config, out).await {
        Ok(r) => r,
        Err(code) => return code,
    };
    let operator = Operator::from_env();
    let sub = Submission {
        operator: &operator,
        reason: a.reason.as_deref(),
        max_recovery_attempts: config.engine.max_recovery_attempts,
    };
    let submitted = submit::rollback(runner.store(), &spec, &sub).await;
    let what = format!("rolling back {} in", spec.application);
    start_and_follow(
        runner,
        submitted,
        &what,
        &spec,
        &plan,
        a.verbose,
        a.json.json,
        out,
    )
    .await
}

#[allow(clippy::too_many_arguments, reason = "the verbs' shared tail")]
async fn start_and_follow(
    runner: Runner,
    submitted: Result<Submitted, submit::SubmitError>,
    what: &str,
    spec: &EnvSpec,
    plan: &Plan,
    verbose: bool,
    json: bool,
    out: &mut Out,
) -> u8 {
    let submitted = match submitted {
        Ok(s) => s,
        Err(e) => {
            out.error(e);
            runner.finish(false).await;
            return exit::BAD_INPUT;
        }
    };
    let id = submitted.id().to_owned();
    match &submitted {
        Submitted::Started(_) => out.note(format!(
            "manent: {id}: {what} {}: {} targets in {} batches",
            spec.environment,
            plan.len(),
            plan.batches.len()
        )),
        Submitted::Resuming(_) => out.note(format!(
            "manent: the same deploy was interrupted earlier; resuming {id} from its last checkpoint"
        )),
    }
    runner.run(&id).await;
    follow_to_end(runner, &id, verbose, json, out).await
}

enum Ending {
    Finished(Box<DeploymentView>),
    Stopped,
    Detached,
    EngineGone,
}

async fn follow_to_end(runner: Runner, id: &str, verbose: bool, json: bool, out: &mut Out) -> u8 {
    let ending = follow(&runner, id, verbose, out).await;
    let code = match &ending {
        Ending::Finished(v) => {
            summary(v, json, out);
            code_of(v)
        }
        Ending::Stopped => {
            out.note("manent: stopping: in-flight targets finish and are recorded (Ctrl-C again to quit at once)");
            exit::INTERRUPTED
        }
        Ending::Detached => {
            out.note(format!(
                "manent: {id} goes on in the other engine; `manent status {id}` shows it"
            ));
            exit::INTERRUPTED
        }
        Ending::EngineGone => {
            out.note(format!(
                "manent: the engine running {id} stopped before the end; `manent resume {id}` continues it"
            ));
            exit::INTERRUPTED
        }
    };
    if matches!(ending, Ending::Stopped) {
        tokio::spawn(async {
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(i32::from(exit::INTERRUPTED));
            }
        });
    }
    let left = runner.finish(matches!(ending, Ending::Stopped)).await;
    if left > 0 {
        out.note(format!(
            "manent: {left} deployment(s) were still running; they resume at the next start"
        ));
    }
    if matches!(ending, Ending::Stopped) {
        out.note(format!(
            "manent: {id} stopped; `manent resume {id}` continues it"
        ));
    }
    code
}

fn code_of(v: &DeploymentView) -> u8 {
    match v.status {
        WorkflowStatus::Success => exit::OK,
        WorkflowStatus::Error if v.report.as_ref().is_some_and(|r| r.result == "rolled_back") => {
            exit::ROLLED_BACK
        }
        WorkflowStatus::Error => exit::FAILED,
        WorkflowStatus::Cancelled => exit::CANCELLED,
        WorkflowStatus::MaxRecoveryAttemptsExceeded => exit::ENGINE,
        WorkflowStatus::Pending | WorkflowStatus::Enqueued => exit::INTERRUPTED,
    }
}

/// Prints progress on stderr until the deployment ends, the user stops it, or its engine goes.
async fn follow(runner: &Runner, id: &str, verbose: bool, out: &mut Out) -> Ending {
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return Ending::Detached;
    };
    let mut shown: HashMap<String, (String, u32)> = HashMap::new();
    let mut phase: Option<String> = None;
    let mut log_after = 0i64;
    // Lines that belong to no deployment (a plugin starting, restarting): only from now on.
    let engine_lines_after = runner.store().last_log_id().await.unwrap_or(0);
    loop {
        let store = runner.store();
        let view = crate::deploy::view::load(store, id).await.ok().flatten();
        if let Some(v) = &view {
            for t in &v.targets {
                let key = (t.state.clone(), t.attempt);
                if shown.get(&t.name) != Some(&key) && t.state != "pending" {
                    out.note(progress_line(v, t));
                    shown.insert(t.name.clone(), key);
                }
            }
            // Batches show in the target lines; the phases worth a line of their own are waits.
            if v.phase != phase {
                if let Some(p) = v.phase.as_deref().filter(|p| {
                    matches!(
                        *p,
                        "validating" | "paused" | "waiting between batches" | "rolling back"
                    )
                }) {
                    out.note(format!("  {p}"));
                }
                phase.clone_from(&v.phase);
            }
        }
        if let Ok(lines) = store
            .logs(id, log_after, Some(engine_lines_after), 1000)
            .await
        {
            for l in lines {
                log_after = l.id;
                if verbose || l.level == "warn" || l.level == "error" {
                    let who = l.target.map(|t| format!("{t}: ")).unwrap_or_default();
                    out.note(format!("    {} [{}] {who}{}", l.level, l.source, l.message));
                }
            }
        }
        if let Some(v) = view
            && !v.status.is_live()
        {
            return Ending::Finished(Box::new(v));
        }
        // The engine we handed the work to has gone if its lease is free.
        if let Runner::Remote { db, .. } = runner
            && !Lease::is_held(db)
        {
            return Ending::EngineGone;
        }
        if let Runner::Local(e) = runner
            && e.active().iter().all(|a| a != id)
            && view_status(store, id).await == Some(WorkflowStatus::Pending)
        {
            return Ending::EngineGone;
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = int.recv() => return stop_or_detach(runner),
            _ = term.recv() => return stop_or_detach(runner),
            // A dropped ssh session must not stop a deploy: keep going, quietly.
            _ = hup.recv() => {}
        }
    }
}

async fn view_status(store: &dyn Store, id: &str) -> Option<WorkflowStatus> {
    store.workflow(id).await.ok().flatten().map(|r| r.status)
}

fn stop_or_detach(runner: &Runner) -> Ending {
    match runner {
        Runner::Local(_) => Ending::Stopped,
        Runner::Remote { .. } => Ending::Detached,
    }
}

fn progress_line(v: &DeploymentView, t: &crate::deploy::view::TargetView) -> String {
    let batch = if v.batches > 0 {
        format!("[{}/{}] ", t.batch, v.batches)
    } else {
        String::new()
    };
    let detail = match t.state.as_str() {
        "running" => format!("running (attempt {})", t.attempt),
        "retrying" => format!("attempt {} failed, retrying: {}", t.attempt, t.message),
        "interrupted" => format!(
            "attempt {} interrupted by an engine stop; it runs again",
            t.attempt
        ),
        "failed" | "rollback_failed" => {
            format!("{} after {} attempt(s): {}", t.state, t.attempt, t.message)
        }
        "skipped" => format!("skipped: {}", t.message),
        state => {
            let took = t
                .duration_ms
                .map(|d| format!(" in {}", output::duration(d)))
                .unwrap_or_default();
            let msg = if t.message.is_empty() {
                String::new()
            } else {
                format!(": {}", t.message)
            };
            format!("{state}{took}{msg}")
        }
    };
    format!("  {batch}{}: {detail}", t.name)
}

fn summary(v: &DeploymentView, json: bool, out: &mut Out) {
    if json {
        out.json(v);
        return;
    }
    let mut counts: Vec<(String, usize)> = Vec::new();
    for t in &v.targets {
        match counts.iter_mut().find(|(s, _)| *s == t.state) {
            Some((_, n)) => *n += 1,
            None => counts.push((t.state.clone(), 1)),
        }
    }
    let counts: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    let (result, message) = v
        .report
        .as_ref()
        .map(|r| (r.result.clone(), r.message.clone()))
        .unwrap_or_else(|| (v.status.as_str().to_lowercase(), String::new()));
    let what = match v.kind.as_str() {
        "rollback" => format!("rollback of {} in {}", v.application, v.environment),
        _ if v.dry_run => format!(
            "dry-run of {} {} in {}",
            v.application, v.version, v.environment
        ),
        _ => format!(
            "deploy of {} {} to {}",
            v.application, v.version, v.environment
        ),
    };
    out.line(format!(
        "{}: {what}: {result} ({})",
        v.id,
        counts.join(", ")
    ));
    if !message.is_empty() {
        out.line(format!("  {message}"));
    }
    if v.dry_run {
        for t in &v.targets {
            out.line(format!("  {}: {}", t.moniker, t.message));
        }
    }
    for t in v.targets.iter().filter(|t| t.state.contains("failed")) {
        out.line(format!(
            "  {:<8} {}  ({} attempts) {}",
            t.state, t.moniker, t.attempt, t.message
        ));
    }
    if let Some(r) = &v.report {
        for t in r
            .targets
            .iter()
            .filter(|t| t.status == "unchanged" && v.kind == "rollback")
        {
            out.line(format!("  unchanged {}: {}", t.moniker, t.message));
        }
        for t in &r.rolled_back {
            out.line(format!(
                "  rolled back {}: {} {}",
                t.moniker, t.status, t.message
            ));
        }
    }
}

fn command_id() -> String {
    format!("cmd-{:016x}", fastrand::u64(..))
}

async fn send(
    store: &dyn Store,
    id: &str,
    topic: &str,
    allowed: Option<Vec<String>>,
    reason: Option<&str>,
    subject: &str,
) -> Result<Sent, String> {
    let op = Operator::from_env();
    let req = SendRequest {
        message: Message {
            id: command_id(),
            destination: id.to_owned(),
            topic: topic.to_owned(),
            payload: "{}".into(),
            sender: Some(op.display()),
            created_at: crate::sys::now_ms(),
        },
        require_event: allowed.map(|a| ("phase".to_owned(), a)),
        journal: Some(op.journal(topic, Some(id), Some(subject), None, reason)),
    };
    store.send(req).await.map_err(|e| e.to_string())
}

/// `manent cancel`
pub async fn cancel(config_path: &Path, a: &ControlArgs, out: &mut Out) -> u8 {
    let (_, store, v) = match output::open_deployment(config_path, &a.deployment, out).await {
        Ok(t) => t,
        Err(code) => return code,
    };
    if !v.status.is_live() {
        out.error(format!(
            "{} is not running (it is {}); nothing to cancel",
            v.id,
            v.status.as_str()
        ));
        return exit::BAD_INPUT;
    }
    let subject = v.subject();
    let op = Operator::from_env();
    let entry = op.journal(
        "cancel",
        Some(&v.id),
        Some(&subject),
        None,
        a.reason.as_deref(),
    );
    match store.cancel(&v.id, entry).await {
        Ok(_) => {
            out.line(format!(
                "{}: cancelled; it stops before its next step (targets being deployed now finish first). \
                 `manent resume {}` continues it",
                v.id, v.id
            ));
            exit::OK
        }
        Err(e) => {
            out.error(e);
            exit::ENGINE
        }
    }
}

/// `manent pause`
pub async fn pause(config_path: &Path, a: &ControlArgs, out: &mut Out) -> u8 {
    let (_, store, v) = match output::open_deployment(config_path, &a.deployment, out).await {
        Ok(t) => t,
        Err(code) => return code,
    };
    let subject = v.subject();
    match send(&store, &v.id, "pause", None, a.reason.as_deref(), &subject).await {
        Ok(Sent::Delivered | Sent::Duplicate) => {
            out.line(format!(
                "{}: pauses before its next batch; `manent resume {}` continues it",
                v.id, v.id
            ));
            exit::OK
        }
        Ok(Sent::Rejected(why)) => {
            out.error(why);
            exit::BAD_INPUT
        }
        Err(e) => {
            out.error(e);
            exit::ENGINE
        }
    }
}

/// `manent resume`: continues a paused, cancelled, dead-lettered or interrupted deployment.
pub async fn resume(config_path: &Path, a: &ControlArgs, out: &mut Out) -> u8 {
    let (config, store, v) = match output::open_deployment(config_path, &a.deployment, out).await {
        Ok(t) => t,
        Err(code) => return code,
    };
    let subject = v.subject();
    let entry = Operator::from_env().journal(
        "resume",
        Some(&v.id),
        Some(&subject),
        None,
        a.reason.as_deref(),
    );
    match v.status {
        WorkflowStatus::Success | WorkflowStatus::Error => {
            out.error(format!(
                "{} already finished ({}); start a new deploy instead",
                v.id,
                v.status.as_str()
            ));
            return exit::BAD_INPUT;
        }
        WorkflowStatus::Pending if v.phase.as_deref() == Some("paused") => {
            match send(
                &store,
                &v.id,
                "resume",
                Some(vec!["paused".into()]),
                a.reason.as_deref(),
                &subject,
            )
            .await
            {
                Ok(Sent::Delivered | Sent::Duplicate) => {
                    out.note(format!("manent: {} resumes", v.id))
                }
                Ok(Sent::Rejected(why)) => out.note(format!("manent: {why}")),
                Err(e) => {
                    out.error(e);
                    return exit::ENGINE;
                }
            }
        }
        WorkflowStatus::Pending | WorkflowStatus::Enqueued => {
            let _ = store.journal(entry).await;
        }
        WorkflowStatus::Cancelled | WorkflowStatus::MaxRecoveryAttemptsExceeded => {
            if let Err(e) = store.resume(&v.id, entry).await {
                out.error(e);
                return exit::BAD_INPUT;
            }
        }
    }
    drop(store);
    let runner = match Runner::start(&config, out).await {
        Ok(r) => r,
        Err(code) => return code,
    };
    runner.run(&v.id).await;
    follow_to_end(runner, &v.id, a.verbose, a.json.json, out).await
}

/// `manent worker`
pub async fn worker(config_path: &Path, until_idle: bool, out: &mut Out) -> u8 {
    let Some(config) = load_config(config_path, None, out) else {
        return exit::BAD_INPUT;
    };
    let engine = match Engine::start(&config).await {
        Ok(e) => e,
        Err(e) => {
            out.error(e);
            return exit::ENGINE;
        }
    };
    out.note(format!(
        "manent worker: engine pid {} on {}; resumed {} deployment(s); Ctrl-C or SIGTERM stops it",
        std::process::id(),
        config.database.display(),
        engine.recovered().len()
    ));
    let mut events = engine.events();
    let mut logs = engine.logs();
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return exit::ENGINE;
    };
    let mut idle_check = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = int.recv() => break,
            _ = term.recv() => break,
            _ = idle_check.tick(), if until_idle => {
                if engine.busy() == 0 {
                    out.note("manent worker: nothing left to do (every deployment finished or waits for an operator)");
                    break;
                }
            }
            ev = events.recv() => match ev {
                Ok(crate::workflow::RuntimeEvent::Claimed { workflow_id, name, .. }) => out.note(format!("manent worker: running {name} {workflow_id}")),
                Ok(crate::workflow::RuntimeEvent::Ended { workflow_id, status, reason }) => {
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
    out.note("manent worker: draining: waiting for running deployments to finish or pause");
    let left = engine.shutdown().await;
    if left > 0 {
        out.note(format!(
            "manent worker: {left} deployment(s) left running; they resume at the next start"
        ));
        return exit::INTERRUPTED;
    }
    exit::OK
}
