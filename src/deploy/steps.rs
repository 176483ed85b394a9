//! The bodies of the deploy workflows' steps: the request a plugin gets, the secrets open for
//! one call, and one target's deploy or rollback with the release record that commits with it.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::DeployEnv;
use super::plan::PlannedTarget;
use super::records::{ReleaseRecord, RolledBack};
use super::releases::{Live, Move};
use super::state::TargetState;
use crate::config::EnvSpec;
use crate::plugin::{
    Capabilities, Capability, PluginHandle, Processes, Request, Secrets, Target, TargetStatus,
};
use crate::workflow::store::Effect;
use crate::workflow::{RetryPolicy, StepError, StepInfo};

/// What Configure told us about the plugin, recorded before any target is touched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginInfo {
    /// `builtin:exec` or a binary's path.
    pub origin: String,
    /// Announced capabilities.
    pub capabilities: Capabilities,
}

/// One target step's recorded result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetDone {
    /// Where the target is now.
    pub status: TargetState,
    /// What the plugin (or the operator) said.
    pub message: String,
    /// Time the call took.
    pub duration_ms: u64,
    /// The attempt that succeeded.
    pub attempt: u32,
    /// The version now live.
    pub version: String,
}

/// The retry policy of target steps.
pub fn target_policy(spec: &EnvSpec) -> RetryPolicy {
    RetryPolicy {
        max_retries: spec.max_retries,
        base: spec.backoff_base,
        factor: 2.0,
        max_interval: spec.backoff_max,
        timeout: Some(spec.step_timeout),
    }
}

/// Policy of the engine's own steps (no plugin involved): a crash during one spends an attempt
/// of the persisted budget, so they have room for a few.
pub fn internal() -> RetryPolicy {
    RetryPolicy {
        max_retries: 5,
        base: std::time::Duration::from_millis(100),
        ..RetryPolicy::default()
    }
}

/// Parallelism to use with a plugin: what the descriptor asks, if the plugin can take it.
pub fn parallelism(spec: &EnvSpec, info: &PluginInfo) -> u32 {
    if info.capabilities.has(Capability::ParallelTargets) {
        spec.parallelism.max(1)
    } else {
        1
    }
}

/// What a plugin call carries besides the application's spec: its targets and how many at once,
/// its secrets (none unless opened for it), the step it is made in (its idempotency key and
/// attempt), and where the processes a built-in starts for it are recorded.
pub struct Call<'a> {
    /// The targets.
    pub targets: Vec<Target>,
    /// How many at once.
    pub parallelism: u32,
    /// Its secrets.
    pub secrets: Secrets,
    /// The step it is made in, if any.
    pub step: Option<&'a StepInfo>,
    /// Where a built-in records its processes.
    pub processes: &'a Processes,
}

/// The request of `call` in deployment `workflow_id`.
pub fn request(spec: &EnvSpec, workflow_id: &str, call: Call<'_>) -> Request {
    let Call {
        targets,
        parallelism,
        secrets,
        step: info,
        processes,
    } = call;
    Request {
        deployment_id: workflow_id.to_owned(),
        application: spec.application.clone(),
        environment: spec.environment.clone(),
        artifact: spec.artifact.clone(),
        targets,
        params: spec.params.clone(),
        secrets,
        parallelism,
        traffic: None,
        routing: None,
        idempotency_key: info.map(|i| i.idempotency_key.clone()).unwrap_or_default(),
        attempt: info.map_or(1, |i| i.attempt),
        processes: processes.clone(),
    }
}

/// The request of a step on one target, with its secrets open for the call (while the guard
/// lives).
fn target_request(
    env: &DeployEnv,
    spec: &EnvSpec,
    wf: &str,
    t: &PlannedTarget,
    info: &StepInfo,
) -> (Request, Option<crate::plugin::secrets::SecretsGuard>) {
    let (secrets, open) = secrets(env, spec);
    let req = request(
        spec,
        wf,
        Call {
            targets: vec![Target::from(t)],
            parallelism: 1,
            secrets,
            step: Some(info),
            processes: &env.processes,
        },
    );
    (req, open)
}

/// Opens the application's secrets for one call.
pub fn secrets(
    env: &DeployEnv,
    spec: &EnvSpec,
) -> (Secrets, Option<crate::plugin::secrets::SecretsGuard>) {
    if spec.secrets.is_empty() {
        // Nothing to read: an external plugin's call then needs no brokered Secrets service.
        return (Secrets::none(), None);
    }
    let source = env
        .registry
        .secrets_for(&spec.secrets, &spec.descriptor.display().to_string());
    let (s, g) = Secrets::for_call(source);
    (s, Some(g))
}

/// What a plugin's error on one target is prefixed with: the plugin, and the target unless the
/// message names it already.
fn context(plugin: &PluginHandle, t: &PlannedTarget, e: &crate::plugin::PluginError) -> String {
    if e.to_string().contains(t.name.as_str()) {
        plugin.name.clone()
    } else {
        format!("{} on {}", plugin.name, t.name)
    }
}

/// The plugin's answer for target `t` of a one-target call, its error named with the plugin and
/// the target.
fn this_target(
    plugin: &PluginHandle,
    t: &PlannedTarget,
    result: Result<crate::plugin::DeployResult, crate::plugin::PluginError>,
) -> Result<crate::plugin::TargetResult, StepError> {
    let result = result.map_err(|e| {
        let what = context(plugin, t, &e);
        StepError::from(e.context(what))
    })?;
    result
        .targets
        .into_iter()
        .find(|r| r.host == t.host)
        .ok_or_else(|| {
            StepError::Retryable(format!("{} returned no result for {}", plugin.name, t.name))
        })
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// A target's step: what every target step works with — the engine's environment, the
/// deployment's spec and id, the plugin, the target.
#[derive(Clone, Copy)]
pub struct TargetStep<'a> {
    /// The engine's environment.
    pub env: &'a DeployEnv,
    /// The deployment's spec.
    pub spec: &'a EnvSpec,
    /// The deployment's id.
    pub wf: &'a str,
    /// The plugin it deploys with.
    pub plugin: &'a PluginHandle,
    /// The target.
    pub t: &'a PlannedTarget,
}

/// What manent knew of a target as a deploy began: its live release, and whether one of this
/// very version recorded by another deployment is deployed again all the same (`--force`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Before<'a> {
    /// Its live release and the one before, from the release records.
    pub live: Option<&'a Live>,
    /// Run it even when another deployment recorded this version done on it.
    pub redo: bool,
}

/// One target's deploy: the plugin's Deploy on that target, secrets open for the call. The
/// release is recorded in the same transaction as the step — unless the target already ran
/// this version, so a redeploy never becomes the "previous" release a rollback goes to. A
/// target another deployment recorded done on this version (and artifact) is not deployed
/// again: it is `unchanged`, naming that deployment — read back from the plugin first when it
/// can tell its current release, and deployed after all when what it reads is something else.
pub async fn deploy_target(
    step: TargetStep<'_>,
    before: Before<'_>,
    info: StepInfo,
) -> Result<(TargetDone, Vec<Effect>), StepError> {
    let TargetStep { spec, plugin, .. } = step;
    let started = Instant::now();
    let done = match done_elsewhere(step, before, &info).await {
        Some(done) => Ok((done, Vec::new())),
        None => deploy_call(step, before.live, info).await,
    };
    let status = match &done {
        Ok((d, _)) if d.status == TargetState::Unchanged => "unchanged",
        Ok(_) => "deployed",
        Err(_) => "failed",
    };
    crate::telemetry::metrics::get().target_deployed(
        crate::telemetry::metrics::TargetLabels {
            application: spec.application.clone(),
            environment: spec.environment.clone(),
            plugin: plugin.name.clone(),
            status: status.into(),
        },
        started.elapsed().as_secs_f64(),
    );
    done
}

async fn deploy_call(
    step: TargetStep<'_>,
    before: Option<&Live>,
    info: StepInfo,
) -> Result<(TargetDone, Vec<Effect>), StepError> {
    let TargetStep {
        env,
        spec,
        wf,
        plugin,
        t,
    } = step;
    let (req, _open) = target_request(env, spec, wf, t, &info);
    let started = Instant::now();
    if info.after_cut_off
        && let Some(done) = reconcile(step, &req, before, &info).await
    {
        return Ok(done);
    }
    let r = this_target(plugin, t, plugin.deployer.deploy(&req).await)?;
    match r.status {
        TargetStatus::Deployed | TargetStatus::Unchanged => {
            let version = &spec.artifact.version;
            let done = TargetDone {
                status: r.status.into(),
                message: r.message,
                duration_ms: elapsed_ms(started),
                attempt: info.attempt,
                version: version.clone(),
            };
            Ok(live_now(spec, wf, t, before, done))
        }
        other => Err(StepError::Retryable(format!(
            "{} reported {} for {}: {}",
            plugin.name,
            other.as_str(),
            t.name,
            r.message
        ))),
    }
}

/// The release of this version another deployment recorded done on `t`, when the deploy is
/// not forced and its artifact is the same (a digest both pinned must match).
fn recorded_elsewhere<'a>(
    spec: &EnvSpec,
    wf: &str,
    before: Before<'a>,
) -> Option<&'a ReleaseRecord> {
    if before.redo {
        return None;
    }
    let c = before.live?.current.as_deref()?;
    if c.version != spec.artifact.version || c.deployment_id == wf {
        return None;
    }
    let theirs = serde_json::from_str::<crate::config::Artifact>(&c.artifact)
        .map(|a| a.sha256)
        .unwrap_or_default();
    let ours = &spec.artifact.sha256;
    let same = theirs.is_empty() || ours.is_empty() || theirs.eq_ignore_ascii_case(ours);
    same.then_some(c)
}

/// `t` as another deployment left it on this version: `unchanged`, naming it, without a call —
/// when the plugin can tell its current release, only if that reads the version too. `None`:
/// deploy it.
async fn done_elsewhere(
    step: TargetStep<'_>,
    before: Before<'_>,
    info: &StepInfo,
) -> Option<TargetDone> {
    let TargetStep {
        env,
        spec,
        wf,
        plugin,
        t,
    } = step;
    let rec = recorded_elsewhere(spec, wf, before)?;
    let version = &spec.artifact.version;
    let log = env.log.for_deployment(wf);
    let by = format!(
        "{version} deployed by {} at {}",
        rec.deployment_id,
        crate::format::time(rec.recorded_at)
    );
    let seen = match plugin.deployer.release_inspector() {
        None => format!(
            "not read back: plugin {} cannot tell its current release",
            plugin.name
        ),
        Some(ri) => {
            let (req, _open) = target_request(env, spec, wf, t, info);
            match ri.current_release(&req).await {
                Ok(seen) => match seen.iter().find(|r| r.host == t.host) {
                    Some(live) if &live.version == version => {
                        format!("{} reads {version} live", plugin.name)
                    }
                    other => {
                        let now = other.map_or("", |r| r.version.as_str());
                        log.info(&format!(
                            "{}: recorded as {by}, but {} reads {} live: deploying it",
                            t.name,
                            plugin.name,
                            if now.is_empty() { "nothing" } else { now }
                        ));
                        return None;
                    }
                },
                Err(e) => {
                    log.warn(&format!(
                        "{}: recorded as {by}; current_release failed ({e}): deploying it",
                        t.name
                    ));
                    return None;
                }
            }
        }
    };
    let message = format!("{by}; {seen} (`--force` deploys it again)");
    log.info(&format!("{}: unchanged: {message}", t.name));
    Some(TargetDone {
        status: TargetState::Unchanged,
        message,
        duration_ms: 0,
        attempt: info.attempt,
        version: version.clone(),
    })
}

/// A target whose earlier call a crash cut off is in an unknown state: when the plugin can tell
/// its current release and it is already the version being deployed, the call finished before
/// the crash and is recorded as deployed without running again (an unknown target becomes a
/// known one: design/plugin-contract.md "Targets"). `None`: run the call again, with the same key.
async fn reconcile(
    step: TargetStep<'_>,
    req: &crate::plugin::Request,
    before: Option<&Live>,
    info: &StepInfo,
) -> Option<(TargetDone, Vec<Effect>)> {
    let TargetStep {
        env,
        spec,
        wf,
        plugin,
        t,
    } = step;
    let log = env.log.for_deployment(wf);
    let version = &spec.artifact.version;
    if before
        .and_then(|l| l.current.as_ref())
        .is_some_and(|c| &c.version == version)
    {
        // It ran this version before the deploy: seeing it live proves nothing of the call.
        log.info(&format!(
            "{}: a crash cut its call off; it ran {version} already, so only running the call \
             again (with the same idempotency key) tells",
            t.name
        ));
        return None;
    }
    let Some(ri) = plugin.deployer.release_inspector() else {
        log.info(&format!(
            "{}: a crash cut its call off and plugin {} cannot tell its current release: \
             running it again with the same idempotency key",
            t.name, plugin.name
        ));
        return None;
    };
    let seen = match ri.current_release(req).await {
        Ok(seen) => seen,
        Err(e) => {
            log.warn(&format!(
                "{}: a crash cut its call off and current_release failed ({e}): running it \
                 again with the same idempotency key",
                t.name
            ));
            return None;
        }
    };
    let live = seen.iter().find(|r| r.host == t.host)?;
    if &live.version != version {
        log.info(&format!(
            "{}: a crash cut its call off; {} reports {} live, not {version}: running it again \
             with the same idempotency key",
            t.name,
            plugin.name,
            if live.version.is_empty() {
                "nothing"
            } else {
                &live.version
            }
        ));
        return None;
    }
    log.info(&format!(
        "{}: a crash cut its call off after {} had finished it ({version} is live): recorded as \
         deployed without running it again",
        t.name, plugin.name
    ));
    let done = TargetDone {
        status: TargetState::Deployed,
        message: format!(
            "reconciled: {version} was live (current_release) after its call was cut off"
        ),
        duration_ms: 0,
        attempt: info.attempt,
        version: version.clone(),
    };
    Some(live_now(spec, wf, t, before, done))
}

/// A target now live on the version deployed, and its release recorded with the step —
/// unless it ran this version already, so a redeploy never becomes the "previous" release a
/// rollback goes to.
fn live_now(
    spec: &EnvSpec,
    wf: &str,
    t: &PlannedTarget,
    before: Option<&Live>,
    done: TargetDone,
) -> (TargetDone, Vec<Effect>) {
    let already = before
        .and_then(|l| l.current.as_ref())
        .is_some_and(|c| c.version == spec.artifact.version);
    let effects = if already {
        Vec::new()
    } else {
        vec![release_record(spec, wf, t).effect()]
    };
    (done, effects)
}

/// A canary's slots as every later call carries them: PrepareSlots' state and manent's routing.
#[derive(Debug, Clone, Default)]
pub struct Slots {
    /// PrepareSlots' state.
    pub traffic: Option<serde_json::Value>,
    /// manent's routing.
    pub routing: Option<crate::plugin::Routing>,
}

/// One target's share of a canary's candidate: DeployCandidate on that target, the slots'
/// state sent along. No release is recorded: the candidate is not live until it is promoted.
pub async fn candidate_target(
    step: TargetStep<'_>,
    slots_state: Slots,
    info: StepInfo,
) -> Result<(TargetDone, Vec<Effect>), StepError> {
    let TargetStep {
        env,
        spec,
        wf,
        plugin,
        t,
    } = step;
    let slots = plugin
        .deployer
        .slot_deployer()
        .ok_or_else(|| StepError::Permanent(format!("plugin {} has no slots", plugin.name)))?;
    let (mut req, _open) = target_request(env, spec, wf, t, &info);
    req.traffic = slots_state.traffic;
    req.routing = slots_state.routing;
    let started = Instant::now();
    let r = this_target(plugin, t, slots.deploy_candidate(&req).await)?;
    match r.status {
        TargetStatus::Deployed | TargetStatus::Unchanged => Ok((
            TargetDone {
                status: TargetState::Candidate,
                message: r.message,
                duration_ms: elapsed_ms(started),
                attempt: info.attempt,
                version: spec.artifact.version.clone(),
            },
            Vec::new(),
        )),
        other => Err(StepError::Retryable(format!(
            "{} reported {} for {}'s candidate: {}",
            plugin.name,
            other.as_str(),
            t.name,
            r.message
        ))),
    }
}

/// The release records of a promoted canary: every target whose live version changes.
pub fn promoted_releases(
    spec: &EnvSpec,
    wf: &str,
    targets: &[PlannedTarget],
    before: &BTreeMap<String, Live>,
) -> Vec<Effect> {
    targets
        .iter()
        .filter(|t| {
            before
                .get(&t.moniker.to_string())
                .and_then(|l| l.current.as_ref())
                .is_none_or(|c| c.version != spec.artifact.version)
        })
        .map(|t| release_record(spec, wf, t).effect())
        .collect()
}

fn release_record(spec: &EnvSpec, wf: &str, t: &PlannedTarget) -> ReleaseRecord {
    ReleaseRecord {
        id: 0,
        moniker: t.moniker.to_string(),
        subject: spec.subject(),
        version: spec.artifact.version.clone(),
        artifact: serde_json::to_string(&spec.artifact).unwrap_or_default(),
        deployment_id: wf.to_owned(),
        recorded_at: crate::sys::now_ms(),
        rolled_back_by: None,
    }
}

/// One target's rollback along `mv`: the releases after `mv.to` are marked rolled back in the
/// same transaction as the step, so `mv.to` is live again.
pub async fn rollback_target(
    step: TargetStep<'_>,
    mv: &Move,
    info: StepInfo,
) -> Result<(TargetDone, Vec<Effect>), StepError> {
    let TargetStep {
        env,
        spec,
        wf,
        plugin,
        t,
    } = step;
    let rb = plugin
        .deployer
        .rollbacker()
        .ok_or_else(|| StepError::Permanent(format!("plugin {} cannot roll back", plugin.name)))?;
    let (req, _open) = target_request(env, spec, wf, t, &info);
    let started = Instant::now();
    let result = rb.rollback(&req, &mv.to.release()).await.map_err(|e| {
        let what = context(plugin, t, &e);
        StepError::from(e.context(what))
    })?;
    let r = result.targets.into_iter().find(|r| r.host == t.host);
    if let Some(r) = &r
        && r.status == TargetStatus::Failed
    {
        return Err(StepError::Retryable(format!(
            "{} failed to roll back {}: {}",
            plugin.name, t.name, r.message
        )));
    }
    let done = TargetDone {
        status: TargetState::RolledBack,
        message: r
            .map(|r| r.message)
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| {
                format!("rolled back from {} to {}", mv.from.version, mv.to.version)
            }),
        duration_ms: elapsed_ms(started),
        attempt: info.attempt,
        version: mv.to.version.clone(),
    };
    let effect = RolledBack {
        moniker: t.moniker.to_string(),
        to: Some(mv.to.id),
        by: wf.to_owned(),
    }
    .effect();
    Ok((done, vec![effect]))
}

/// The moves an undo makes: every target this deploy changed goes back to what was live before
/// it. Targets new to manent (nothing was live) have nowhere to go.
pub fn undo_moves(
    changed: &[&PlannedTarget],
    before: &BTreeMap<String, Live>,
    spec: &EnvSpec,
    wf: &str,
) -> Vec<Move> {
    changed
        .iter()
        .filter_map(|t| {
            let previous = before.get(&t.moniker.to_string())?.current.clone()?;
            Some(Move {
                target: t.name.clone(),
                from: release_record(spec, wf, t),
                to: *previous,
            })
        })
        .collect()
}

/// A target that failed for good is an error-level line of the deployment's log, tagged with
/// the target (`L` error, `manent logs --level error` and the JSON log find it).
pub(super) fn failed_line(
    env: &DeployEnv,
    id: &str,
    t: &PlannedTarget,
    f: &crate::workflow::StepFailure,
) {
    let target = crate::plugin::Target {
        host: t.host.clone(),
        moniker: t.moniker.clone(),
        labels: t.labels.clone(),
    };
    env.log
        .for_deployment(id)
        .for_target(&target)
        .error(&format!("{} failed: {f}", t.name));
}
