//! Lifecycle hooks run at their events (Helm's semantics, adapted): in weight, kind, name order,
//! serially, each ready before the next; each run a durable step with its moniker
//! (`<env>::<app>::hook::<name>`), retry budget and idempotency key. A hook's `delete:` command
//! runs as its delete policy says — before the hook runs again, after the event's hooks all
//! succeeded (in reverse order), after it failed (and then the earlier hooks that asked to be
//! deleted on success are deleted too) — each delete a step of its own. A failure fails what
//! the hook guards, unless it is a post-event hook that may `continue`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::plan::PlannedTarget;
use super::probe;
use super::run::{Run, Stop, json};
use super::state::{Phase, StepName};
use crate::config::hooks::{WaitCheck, ordered};
use crate::config::{DeletePolicy, Event, Hook, HookKind, OnFailure};
use crate::workflow::store::ACCEPTS;
use crate::workflow::{RetryPolicy, StepError, StepInfo};

/// One hook run, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookRun {
    /// What made it ready: `exit 0`, `status 200`, `ready after 3 polls`.
    pub message: String,
    /// The last lines of its output.
    pub output: String,
    /// Time the attempt that succeeded took.
    pub duration_ms: u64,
    /// The attempt that succeeded.
    pub attempt: u32,
}

/// One `delete:` run, as recorded (a delete never fails its step: what it said is kept).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteRun {
    /// It exited 0.
    pub ok: bool,
    /// `exit 0`, `exit 2`, …
    pub message: String,
    /// The last lines of its output.
    pub output: String,
}

/// What an event's hooks did.
#[derive(Debug, Clone, Default)]
pub struct Ran {
    /// Hooks that failed and were allowed to (`on_failure: continue`), with why.
    pub continued: Vec<String>,
}

/// Runs every `test` hook, whatever the others did: each `(name, passed)`.
pub async fn run_tests(run: &Run<'_>, vars: &Vars) -> Result<Vec<(String, bool)>, Stop> {
    let event = Event::Test;
    let hooks: Vec<Hook> = ordered(&run.spec.hooks, event)
        .into_iter()
        .cloned()
        .collect();
    let of = u32::try_from(hooks.len()).unwrap_or(u32::MAX);
    let mut out = Vec::new();
    for (i, h) in hooks.iter().enumerate() {
        let before = begin(run, event, h, (i, of), vars).await?;
        let passed = match before {
            Some(d) if !d.ok => false,
            _ => run_hook(run, event, h, vars).await?.is_ok(),
        };
        let policy = if passed {
            DeletePolicy::HookSucceeded
        } else {
            DeletePolicy::HookFailed
        };
        if h.deletes(policy) {
            delete(run, event, h, policy, vars).await?;
        }
        out.push((h.name.clone(), passed));
    }
    Ok(out)
}

/// The values a hook gets besides its own.
#[derive(Debug, Clone, Default)]
pub struct Vars {
    /// What was live before this deployment (its most common version).
    pub previous_version: String,
    /// A test run against a canary's candidate: the testers' header (`X-Canary`, `1`), which
    /// HTTP hooks send and commands get as `MANENT_TESTER_HEADER` and `MANENT_TESTER_VALUE`.
    pub testers: Option<(String, String)>,
}

impl Vars {
    /// From what manent recorded as live before the deployment.
    pub fn before(live: &BTreeMap<String, super::releases::Live>) -> Vars {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for l in live.values() {
            if let Some(c) = &l.current {
                *counts.entry(c.version.as_str()).or_default() += 1;
            }
        }
        let previous = counts
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .map(|(v, _)| v.to_owned())
            .unwrap_or_default();
        Vars {
            previous_version: previous,
            testers: None,
        }
    }
}

impl Ran {
    /// `message`, and the failures that were allowed to go on, if any.
    pub fn noted(&self, message: String) -> String {
        if self.continued.is_empty() {
            message
        } else {
            format!(
                "{message}; {} (on_failure: continue)",
                self.continued.join("; ")
            )
        }
    }
}

/// `message`, then what a post-event hook's failure adds to it.
pub fn after(message: String, failure: &str) -> String {
    format!("{message}; then {failure}")
}

/// Runs `event`'s hooks. `Err(Stop::Failed)` when one fails that may not `continue`; the
/// message says which, why, and what it means for the deployment.
pub async fn run_event(run: &Run<'_>, event: Event, vars: &Vars) -> Result<Ran, Stop> {
    let hooks: Vec<Hook> = ordered(&run.spec.hooks, event)
        .into_iter()
        .cloned()
        .collect();
    let mut ran = Ran::default();
    if hooks.is_empty() {
        return Ok(ran);
    }
    let of = u32::try_from(hooks.len()).unwrap_or(u32::MAX);
    let mut succeeded: Vec<&Hook> = Vec::new();
    for (i, h) in hooks.iter().enumerate() {
        let before = begin(run, event, h, (i, of), vars).await?;
        let result = match before {
            Some(d) if !d.ok => Err(format!(
                "its delete command, run before it ({}), failed: {}{}",
                DeletePolicy::BeforeHookCreation.as_str(),
                d.message,
                excerpt(&d.output)
            )),
            _ => run_hook(run, event, h, vars).await?.map(|_| ()),
        };
        match result {
            Ok(()) => succeeded.push(h),
            Err(why) => {
                if h.deletes(DeletePolicy::HookFailed) {
                    delete(run, event, h, DeletePolicy::HookFailed, vars).await?;
                }
                for earlier in succeeded
                    .iter()
                    .filter(|x| x.deletes(DeletePolicy::HookSucceeded))
                {
                    delete(run, event, earlier, DeletePolicy::HookSucceeded, vars).await?;
                }
                let said = format!("{event} hook {} failed: {why}", h.name);
                if h.on_failure == OnFailure::Continue {
                    run.env
                        .log
                        .for_deployment(run.ctx.id())
                        .warn(&format!("{said}; on_failure: continue, so it goes on"));
                    ran.continued.push(said);
                    continue;
                }
                return Err(Stop::Failed(said));
            }
        }
    }
    // All ready: the ones that asked to be deleted on success, in reverse order (Helm).
    for h in succeeded
        .iter()
        .rev()
        .filter(|h| h.deletes(DeletePolicy::HookSucceeded))
    {
        delete(run, event, h, DeletePolicy::HookSucceeded, vars).await?;
    }
    Ok(ran)
}

fn excerpt(output: &str) -> String {
    if output.trim().is_empty() {
        String::new()
    } else {
        format!(": {}", probe::tail(output.trim(), 300))
    }
}

/// Where a hook runs: its deployment, and for a per-target event (`pre-target`,
/// `post-target`) the target and the version it goes to.
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    /// The engine's services.
    pub env: &'a super::DeployEnv,
    /// The environment deployed.
    pub spec: &'a crate::config::EnvSpec,
    /// The deployment's id.
    pub id: &'a str,
    /// The target a per-target hook runs for, and the version it goes to there.
    pub target: Option<(&'a PlannedTarget, &'a str)>,
}

impl<'a> Scope<'a> {
    /// A deployment's hooks (not a target's).
    pub fn of(run: &'a Run<'_>) -> Scope<'a> {
        Scope {
            env: run.env,
            spec: run.spec,
            id: run.ctx.id(),
            target: None,
        }
    }

    fn log(&self, h: &Hook) -> crate::plugin::Logger {
        let log = self
            .env
            .log
            .with_source(format!("hook:{}", h.name))
            .for_deployment(self.id);
        match self.target {
            Some((t, _)) => log.for_target(&crate::plugin::Target::from(t)),
            None => log,
        }
    }

    /// `text` with `{{target}}` and `{{host}}` replaced by the target's name and address
    /// (shell-quoted in a command); a URL's must be a host name or address.
    fn fill(&self, text: &str, shell: bool) -> Result<String, StepError> {
        let Some((t, _)) = self.target else {
            return Ok(text.to_owned());
        };
        let mut out = text.to_owned();
        for (key, value) in [("{{target}}", &t.name), ("{{host}}", &t.host)] {
            if !out.contains(key) {
                continue;
            }
            let value = if shell {
                crate::plugin::builtin::sh_quote(value)
            } else if !value.is_empty()
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-_:[]".contains(c))
            {
                value.clone()
            } else {
                return Err(StepError::Permanent(format!(
                    "{key} of {} is `{value}`, which cannot go in a URL (a host name or \
                     address)",
                    t.name
                )));
            };
            out = out.replace(key, &value);
        }
        Ok(out)
    }
}

/// The environment a hook's command gets (secrets added by the caller, read during the call).
fn environment(
    scope: Scope<'_>,
    event: Event,
    h: &Hook,
    vars: &Vars,
    info: Option<&StepInfo>,
) -> BTreeMap<String, String> {
    let spec = scope.spec;
    let version = scope
        .target
        .map_or(spec.artifact.version.as_str(), |(_, v)| v);
    let mut env: BTreeMap<String, String> = [
        ("MANENT_APPLICATION", spec.application.clone()),
        ("MANENT_ENVIRONMENT", spec.environment.clone()),
        ("MANENT_VERSION", version.to_owned()),
        ("MANENT_PREVIOUS_VERSION", vars.previous_version.clone()),
        ("MANENT_DEPLOYMENT", scope.id.to_owned()),
        ("MANENT_EVENT", event.as_str().to_owned()),
        ("MANENT_HOOK", h.name.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    if let Some((t, _)) = scope.target {
        env.insert("MANENT_TARGET".into(), t.name.clone());
        env.insert("MANENT_TARGET_HOST".into(), t.host.clone());
    }
    for name in &h.pass_env {
        if let Ok(v) = std::env::var(name) {
            env.insert(name.clone(), v);
        }
    }
    if let Some((name, value)) = &vars.testers {
        env.insert("MANENT_TESTER_HEADER".into(), name.clone());
        env.insert("MANENT_TESTER_VALUE".into(), value.clone());
    }
    env.extend(h.env.clone());
    if let Some(i) = info {
        env.insert("MANENT_IDEMPOTENCY_KEY".into(), i.idempotency_key.clone());
        env.insert("MANENT_ATTEMPT".into(), i.attempt.to_string());
    }
    env
}

/// The hook's `env:` values with `${secret:NAME}` read through its own secrets.
async fn substitute_env(
    scope: Scope<'_>,
    h: &Hook,
    env: &mut BTreeMap<String, String>,
) -> Result<(), StepError> {
    if !h.env.values().any(|v| v.contains("${secret:")) {
        return Ok(());
    }
    let source = scope
        .env
        .registry
        .secrets_for(&h.secrets, &scope.spec.descriptor.display().to_string());
    for (k, v) in &h.env {
        let value = crate::plugin::secrets::substitute(v, source.as_ref())
            .await
            .map_err(|e| StepError::Permanent(format!("env.{k}: {e}")))?;
        env.insert(k.clone(), value);
    }
    Ok(())
}

/// Reads the hook's secrets for one attempt (by reference: the values go in its environment
/// only, and every value read is redacted wherever output goes).
async fn secrets(scope: Scope<'_>, h: &Hook) -> Result<Vec<(String, String)>, StepError> {
    if h.secrets.is_empty() {
        return Ok(Vec::new());
    }
    let source = scope
        .env
        .registry
        .secrets_for(&h.secrets, &scope.spec.descriptor.display().to_string());
    let (s, _open) = crate::plugin::Secrets::for_call(source);
    let mut out = Vec::new();
    for name in &h.secrets {
        let v = s
            .secret(name)
            .await
            .map_err(|e| StepError::Permanent(format!("secret {name}: {e}")))?;
        let var = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect::<String>();
        out.push((format!("MANENT_SECRET_{var}"), v));
    }
    Ok(out)
}

/// The hook's step: `Ok(Ok(run))` ready, `Ok(Err(why))` failed for good (its retries spent).
async fn run_hook(
    run: &Run<'_>,
    event: Event,
    h: &Hook,
    vars: &Vars,
) -> Result<Result<HookRun, String>, Stop> {
    let policy = RetryPolicy {
        max_retries: h.retries,
        base: Duration::from_secs(1),
        factor: 2.0,
        max_interval: Duration::from_secs(30),
        timeout: Some(h.timeout + Duration::from_secs(10)),
    };
    let name = StepName::Hook {
        event,
        name: h.name.clone(),
    };
    let scope = Scope::of(run);
    let r = run
        .ctx
        .step(name, &policy, |info| async move {
            let started = Instant::now();
            let (message, output) = attempt(scope, event, h, vars, Some(&info)).await?;
            Ok(HookRun {
                message,
                output,
                duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                attempt: info.attempt,
            })
        })
        .await?;
    Ok(r.map_err(|f| f.to_string()))
}

/// One attempt of hook `h` at `event`: what made it ready and its output, or why not.
async fn attempt(
    scope: Scope<'_>,
    event: Event,
    h: &Hook,
    vars: &Vars,
    info: Option<&StepInfo>,
) -> Result<(String, String), StepError> {
    let started = Instant::now();
    let log = scope.log(h);
    let mut env = environment(scope, event, h, vars, info);
    substitute_env(scope, h, &mut env).await?;
    env.extend(secrets(scope, h).await?);
    let ran = kind(scope, h, &env, &log).await;
    crate::telemetry::metrics::get().hook_ran(
        (&scope.spec.application, &scope.spec.environment),
        event.as_str(),
        &h.name,
        ran.is_ok(),
        started.elapsed().as_secs_f64(),
    );
    ran
}

/// A per-target gate: `event`'s hooks (`pre-target` or `post-target`) for the scope's target,
/// run inside that target's step, in order, each with its own retries. `Ok` carries what the
/// ones that failed and may `continue` said; `Err` fails the target (for good: the hook's
/// retries are spent) naming the hook and why.
pub async fn gate(scope: Scope<'_>, event: Event, vars: &Vars) -> Result<Vec<String>, StepError> {
    let mut continued = Vec::new();
    let Some((t, _)) = scope.target else {
        return Ok(continued);
    };
    for h in ordered(&scope.spec.hooks, event) {
        let log = scope.log(h);
        let mut tries = 0u32;
        let why = loop {
            match attempt(scope, event, h, vars, None).await {
                Ok((message, _)) => {
                    log.info(&format!("{event} hook {}: {message}", h.name));
                    break None;
                }
                Err(StepError::Retryable(why)) if tries < h.retries => {
                    tries += 1;
                    let wait = Duration::from_secs(1 << tries.min(5)).min(Duration::from_secs(30));
                    log.warn(&format!(
                        "{event} hook {} failed ({why}); trying again in {} ({tries} of {} \
                         retries)",
                        h.name,
                        humantime::format_duration(wait),
                        h.retries
                    ));
                    tokio::time::sleep(wait).await;
                }
                Err(StepError::Retryable(why) | StepError::Permanent(why)) => break Some(why),
            }
        };
        let Some(why) = why else {
            continue;
        };
        let said = format!("{event} hook {} failed on {}: {why}", h.name, t.name);
        if h.on_failure == OnFailure::Continue {
            log.warn(&format!("{said}; on_failure: continue, so it goes on"));
            continued.push(said);
            continue;
        }
        return Err(StepError::Permanent(said));
    }
    Ok(continued)
}

/// One target's call (`call`: a deploy or a rollback to the scope's version) between its
/// per-target gates: `pre-target` hooks before it (a failure leaves the target untouched),
/// `post-target` hooks after it (a failure fails the target: the plugin switched it, so an
/// abort or an atomic undo reads it back and takes it back). With its result, what the
/// post-target hooks that may `continue` said when they failed.
pub async fn around_target<T, F>(
    scope: Scope<'_>,
    vars: &Vars,
    call: F,
) -> Result<(T, Vec<String>), StepError>
where
    F: std::future::Future<Output = Result<T, StepError>>,
{
    let Some((t, version)) = scope.target else {
        return Ok((call.await?, Vec::new()));
    };
    let gated = |e: Event| !ordered(&scope.spec.hooks, e).is_empty();
    if !gated(Event::PreTarget) && !gated(Event::PostTarget) {
        return Ok((call.await?, Vec::new()));
    }
    let mut notes = gate(scope, Event::PreTarget, vars)
        .await
        .map_err(|e| match e {
            StepError::Permanent(why) => {
                StepError::Permanent(format!("{why}; {} was not touched", t.name))
            }
            other => other,
        })?;
    let done = call.await?;
    match gate(scope, Event::PostTarget, vars).await {
        Ok(more) => notes.extend(more),
        Err(StepError::Permanent(why) | StepError::Retryable(why)) => {
            return Err(StepError::Permanent(format!(
                "{version} went live on {}, then {why}",
                t.name
            )));
        }
    }
    Ok((done, notes))
}

/// Runs the hook's kind once: what made it ready and its output, or why not (retryable).
async fn kind(
    scope: Scope<'_>,
    h: &Hook,
    env: &BTreeMap<String, String>,
    log: &crate::plugin::Logger,
) -> Result<(String, String), StepError> {
    let processes = &scope.env.processes;
    let workdir = &scope.spec.workdir;
    match &h.kind {
        HookKind::Command { command } => {
            let command = scope.fill(command, true)?;
            let ran = probe::command(&command, workdir, env, processes, h.timeout, Some(log)).await;
            if ran.ok() {
                Ok((ran.describe(h.timeout), ran.tail))
            } else {
                Err(StepError::Retryable(format!(
                    "{}{}",
                    ran.describe(h.timeout),
                    excerpt(&ran.tail)
                )))
            }
        }
        HookKind::Http(x) => {
            // `${secret:NAME}` read now, through the hook's own secrets; what is logged and
            // said keeps the reference, not the value.
            let source = scope
                .env
                .registry
                .secrets_for(&h.secrets, &scope.spec.descriptor.display().to_string());
            let permanent = |e: crate::plugin::PluginError| StepError::Permanent(e.to_string());
            let url = scope.fill(&x.url, false)?;
            let url = crate::plugin::secrets::substitute(&url, source.as_ref())
                .await
                .map_err(permanent)?;
            let mut headers = Vec::with_capacity(x.headers.len());
            for (k, v) in &x.headers {
                let v = crate::plugin::secrets::substitute(v, source.as_ref())
                    .await
                    .map_err(permanent)?;
                crate::config::values::check_header_value(&v)
                    .map_err(|e| StepError::Permanent(format!("http.headers.{k}: {e}")))?;
                headers.push((k.clone(), v));
            }
            // Against a canary's candidate: the testers' header reaches it.
            if let (Some(n), Some(v)) = (
                env.get("MANENT_TESTER_HEADER"),
                env.get("MANENT_TESTER_VALUE"),
            ) {
                headers.push((n.clone(), v.clone()));
            }
            let (status, body) = probe::request(&x.method, &url, &headers, h.timeout)
                .await
                .map_err(StepError::Retryable)?;
            let body = String::from_utf8_lossy(&body).into_owned();
            let body = crate::redact::redact(body.trim()).into_owned();
            log.info(&format!("{} {} answered {status}", x.method, x.url));
            if status == x.status {
                Ok((format!("status {status}"), probe::tail(&body, 2000)))
            } else {
                Err(StepError::Retryable(format!(
                    "{} {} answered {status} (expected {}){}",
                    x.method,
                    x.url,
                    x.status,
                    excerpt(&body)
                )))
            }
        }
        HookKind::Wait(w) => {
            let deadline = Instant::now() + h.timeout;
            let mut polls = 0u32;
            let mut said: Option<String> = None;
            let check = match &w.check {
                WaitCheck::Url { url, status } => WaitCheck::Url {
                    url: scope.fill(url, false)?,
                    status: *status,
                },
                WaitCheck::Command { command } => WaitCheck::Command {
                    command: scope.fill(command, true)?,
                },
            };
            loop {
                polls += 1;
                let left = deadline.saturating_duration_since(Instant::now());
                let full = w.interval.max(Duration::from_secs(5));
                let each = left.min(full);
                let polled = Instant::now();
                let (ready, last) = match &check {
                    WaitCheck::Url { url, status } => {
                        match probe::request("GET", url, &[], each).await {
                            Ok((s, _)) if s == *status => (true, format!("status {s}")),
                            Ok((s, _)) => {
                                (false, format!("{url} answered {s} (expected {status})"))
                            }
                            Err(e) => (false, e),
                        }
                    }
                    WaitCheck::Command { command } => {
                        let ran =
                            probe::command(command, workdir, env, processes, each, None).await;
                        (
                            ran.ok(),
                            format!("{}{}", ran.describe(each), excerpt(&ran.tail)),
                        )
                    }
                };
                if ready {
                    log.info(&format!("ready after {polls} poll(s): {last}"));
                    return Ok((format!("ready after {polls} poll(s)"), last));
                }
                // A poll that ran out of the little time the deadline left it says less than
                // the answer before it.
                let cut_off = each < full && polled.elapsed() >= each;
                let last = match said.take() {
                    Some(before) if cut_off => before,
                    _ => last,
                };
                if Instant::now() + w.interval >= deadline {
                    return Err(StepError::Retryable(format!(
                        "not ready within {} ({polls} polls); last: {last}",
                        humantime::format_duration(h.timeout)
                    )));
                }
                log.debug(&format!(
                    "not ready yet ({last}); polling again in {}",
                    humantime::format_duration(w.interval)
                ));
                said = Some(last);
                tokio::time::sleep(w.interval).await;
            }
        }
    }
}

/// The hook's `delete:` command under `policy`, as a step of its own (never a failing one).
/// Hook `h`, number `i` (from 0) of `of` at `event`, is about to run: the phase says so, and its
/// `before-hook-creation` delete runs first (its result, if it has one).
async fn begin(
    run: &Run<'_>,
    event: Event,
    h: &Hook,
    (i, of): (usize, u32),
    vars: &Vars,
) -> Result<Option<DeleteRun>, Stop> {
    let phase = Phase::Hook {
        event,
        name: h.name.clone(),
        index: u32::try_from(i + 1).unwrap_or(u32::MAX),
        of,
    };
    run.ctx
        .set_events(&[("phase", json(&phase)), (ACCEPTS, json(&[] as &[()]))])
        .await?;
    if h.deletes(DeletePolicy::BeforeHookCreation) {
        delete(run, event, h, DeletePolicy::BeforeHookCreation, vars).await
    } else {
        Ok(None)
    }
}

async fn delete(
    run: &Run<'_>,
    event: Event,
    h: &Hook,
    policy: DeletePolicy,
    vars: &Vars,
) -> Result<Option<DeleteRun>, Stop> {
    let Some(command) = h.delete.clone() else {
        return Ok(None);
    };
    let name = StepName::HookDelete {
        policy,
        event,
        name: h.name.clone(),
    };
    let scope = Scope::of(run);
    let log = scope.log(h);
    let (log, command) = (&log, &command);
    let step_policy = RetryPolicy {
        max_retries: 3,
        timeout: Some(h.timeout + Duration::from_secs(10)),
        ..super::steps::internal()
    };
    let r = run
        .ctx
        .step(name, &step_policy, |info| async move {
            let mut env = environment(scope, event, h, vars, Some(&info));
            env.insert("MANENT_DELETE_POLICY".into(), policy.as_str().into());
            env.extend(secrets(scope, h).await?);
            log.info(&format!("delete ({})", policy.as_str()));
            let ran = probe::command(
                command,
                &run.spec.workdir,
                &env,
                &run.env.processes,
                h.timeout,
                Some(log),
            )
            .await;
            if !ran.ok() {
                log.warn(&format!(
                    "delete ({}) failed: {}",
                    policy.as_str(),
                    ran.describe(h.timeout)
                ));
            }
            Ok(DeleteRun {
                ok: ran.ok(),
                message: ran.describe(h.timeout),
                output: ran.tail,
            })
        })
        .await?;
    Ok(r.ok())
}
