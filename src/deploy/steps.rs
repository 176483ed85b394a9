//! Steps the deploy workflows share: plan, plugin configuration, validation, the live releases
//! before anything changes, and one target's deploy or rollback, fanned out over a batch.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::DeployEnv;
use super::plan::{self, Batch, Plan, PlannedTarget};
use crate::config::EnvSpec;
use crate::plugin::{
    Capabilities, Capability, OnError, PluginHandle, Release, Request, Secrets, Target,
    TargetStatus, fan_out,
};
use crate::workflow::store::{Effect, ReleaseRecord};
use crate::workflow::{Interrupt, RetryPolicy, StepError, StepInfo, StepResult, WfCtx};

/// What Configure told us about the plugin, recorded before any target is touched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginInfo {
    /// `builtin:exec` or a binary's path.
    pub origin: String,
    /// Announced capabilities.
    pub capabilities: Capabilities,
}

/// A moniker's live release and the one before it, from manent's records.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Live {
    /// Live now.
    pub current: Option<Release>,
    /// Live before it (what a rollback restores).
    pub previous: Option<Release>,
}

/// One target step's recorded result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetDone {
    /// What the plugin reported.
    pub status: TargetStatus,
    /// Its message.
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
fn internal() -> RetryPolicy {
    RetryPolicy {
        max_retries: 5,
        base: std::time::Duration::from_millis(100),
        ..RetryPolicy::default()
    }
}

/// Step `plan` of a deploy: the version must be known.
pub async fn plan(ctx: &WfCtx, spec: &EnvSpec) -> Result<StepResult<Plan>, Interrupt> {
    ctx.step("plan", &internal(), |_| async {
        if spec.artifact.version.is_empty() {
            return Err(StepError::Permanent(format!(
                "{}: artifact.version is empty; set it or pass --version",
                spec.descriptor.display()
            )));
        }
        plan::compute(spec).map_err(StepError::Permanent)
    })
    .await
}

/// Step `plan` of a rollback: targets and batches only.
pub async fn plan_targets(ctx: &WfCtx, spec: &EnvSpec) -> Result<StepResult<Plan>, Interrupt> {
    ctx.step("plan", &internal(), |_| async {
        plan::compute(spec).map_err(StepError::Permanent)
    })
    .await
}

/// Step `plugin.configure`: starts the plugin if needed and records its capabilities.
pub async fn configure(
    env: &DeployEnv,
    ctx: &WfCtx,
    spec: &EnvSpec,
) -> Result<StepResult<PluginInfo>, Interrupt> {
    let policy = RetryPolicy {
        timeout: None,
        ..target_policy(spec)
    };
    ctx.step("plugin.configure", &policy, |_| async {
        let h = env.plugin(spec).await?;
        Ok(PluginInfo {
            origin: h.origin.clone(),
            capabilities: h.capabilities.clone(),
        })
    })
    .await
}

/// Parallelism to use with a plugin: what the descriptor asks, if the plugin can take it.
pub fn parallelism(spec: &EnvSpec, info: &PluginInfo) -> u32 {
    if info.capabilities.has(Capability::ParallelTargets) {
        spec.parallelism.max(1)
    } else {
        1
    }
}

/// A request for `targets`, without secrets unless given.
pub fn request(
    spec: &EnvSpec,
    workflow_id: &str,
    targets: Vec<Target>,
    parallelism: u32,
    secrets: Secrets,
    info: Option<&StepInfo>,
) -> Request {
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
        idempotency_key: info.map(|i| i.idempotency_key.clone()).unwrap_or_default(),
        attempt: info.map_or(1, |i| i.attempt),
    }
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

/// Step `validate`: the plugin checks the whole request, without secrets, within the
/// validation time limit.
pub async fn validate(
    env: &DeployEnv,
    ctx: &WfCtx,
    spec: &EnvSpec,
    plan: &Plan,
    par: u32,
) -> Result<StepResult<()>, Interrupt> {
    let policy = RetryPolicy {
        timeout: Some(spec.validate_timeout),
        ..target_policy(spec)
    };
    let targets = plan.request_targets();
    ctx.step("validate", &policy, |info| {
        let targets = targets.clone();
        async move {
            let h = env.plugin(spec).await?;
            let req = request(spec, ctx.id(), targets, par, Secrets::none(), Some(&info));
            h.deployer.validate(&req).await.map_err(|e| {
                StepError::from(e.context(format!("{} rejected the deploy", spec.plugin)))
            })
        }
    })
    .await
}

/// Step `releases.before`: what manent recorded as live on each moniker, before any change.
pub async fn live(
    env: &DeployEnv,
    ctx: &WfCtx,
    spec: &EnvSpec,
) -> Result<StepResult<BTreeMap<String, Live>>, Interrupt> {
    ctx.step("releases.before", &internal(), |_| async {
        let rows = env
            .store
            .releases(&spec.subject())
            .await
            .map_err(|e| StepError::Retryable(e.to_string()))?;
        let mut live: BTreeMap<String, Live> = BTreeMap::new();
        for r in rows.into_iter().filter(|r| r.rolled_back_by.is_none()) {
            let release = Release {
                version: r.version,
                artifact: serde_json::from_str(&r.artifact).unwrap_or_default(),
                deployment_id: r.deployment_id,
            };
            let entry = live.entry(r.moniker).or_default();
            entry.previous = entry.current.replace(release);
        }
        Ok(live)
    })
    .await
}

/// Results of a batch: per target, its step result (None: never started).
pub type BatchResults = Vec<(PlannedTarget, Option<StepResult<TargetDone>>)>;

/// Runs `body` as step `{action}:b{batch}:{target}` for each target of `batch`, `parallelism`
/// at a time. With `OnError::Stop`, nothing new starts after a failure; targets a crash
/// interrupted are always finished, and a replay starts exactly the targets the first run did.
pub async fn run_batch<'a, F, Fut>(
    ctx: &WfCtx,
    action: &str,
    batch: &'a Batch,
    parallelism: u32,
    on_error: OnError,
    policy: &RetryPolicy,
    body: F,
) -> Result<BatchResults, Interrupt>
where
    F: Fn(&'a PlannedTarget, StepInfo) -> Fut,
    Fut: Future<Output = Result<(TargetDone, Vec<Effect>), StepError>>,
{
    let ids = ctx.reserve(u32::try_from(batch.targets.len()).unwrap_or(u32::MAX));
    let failed_before = on_error == OnError::Stop && ids.iter().any(|id| ctx.recorded_failure(*id));
    let items: Vec<(u32, &PlannedTarget)> = ids
        .into_iter()
        .zip(&batch.targets)
        .filter(|(id, _)| !failed_before || ctx.was_started(*id))
        .collect();
    let body = &body;
    let results = fan_out(
        items.iter().copied(),
        usize::try_from(parallelism).unwrap_or(1),
        on_error,
        |(id, _)| ctx.was_started(*id),
        |(id, t)| {
            let name = format!("{action}:b{}:{}", batch.index, t.name);
            async move { (t, ctx.step_at(id, name, policy, |info| body(t, info)).await) }
        },
        |(_, r)| !matches!(r, Ok(Ok(_))),
    )
    .await;
    let mut by_name: BTreeMap<&str, StepResult<TargetDone>> = BTreeMap::new();
    for (t, r) in results.into_iter().flatten() {
        by_name.insert(&t.name, r?);
    }
    Ok(batch
        .targets
        .iter()
        .map(|t| (t.clone(), by_name.remove(t.name.as_str())))
        .collect())
}

fn release_record(spec: &EnvSpec, wf: &str, t: &PlannedTarget) -> ReleaseRecord {
    ReleaseRecord {
        moniker: t.moniker.to_string(),
        subject: spec.subject(),
        version: spec.artifact.version.clone(),
        artifact: serde_json::to_string(&spec.artifact).unwrap_or_default(),
        deployment_id: wf.to_owned(),
        recorded_at: crate::sys::now_ms(),
        rolled_back_by: None,
    }
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// One target's deploy: the plugin's Deploy on that target, secrets open for the call; the
/// release is recorded in the same transaction as the step.
pub async fn deploy_target(
    env: &DeployEnv,
    spec: &EnvSpec,
    wf: &str,
    plugin: &PluginHandle,
    t: &PlannedTarget,
    info: StepInfo,
) -> Result<(TargetDone, Vec<Effect>), StepError> {
    let (secrets, _open) = secrets(env, spec);
    let req = request(spec, wf, vec![Target::from(t)], 1, secrets, Some(&info));
    let started = Instant::now();
    let result = plugin
        .deployer
        .deploy(&req)
        .await
        .map_err(|e| StepError::from(e.context(format!("{} on {}", plugin.name, t.name))))?;
    let r = result
        .targets
        .into_iter()
        .find(|r| r.host == t.host)
        .ok_or_else(|| {
            StepError::Retryable(format!("{} returned no result for {}", plugin.name, t.name))
        })?;
    match r.status {
        TargetStatus::Deployed | TargetStatus::Unchanged => {
            let done = TargetDone {
                status: r.status,
                message: r.message,
                duration_ms: elapsed_ms(started),
                attempt: info.attempt,
                version: spec.artifact.version.clone(),
            };
            Ok((done, vec![Effect::Release(release_record(spec, wf, t))]))
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

/// One target's rollback to `to`: the moniker's release from `from` is marked rolled back in
/// the same transaction as the step.
pub async fn rollback_target(
    env: &DeployEnv,
    spec: &EnvSpec,
    wf: &str,
    plugin: &PluginHandle,
    t: &PlannedTarget,
    live: &Live,
    info: StepInfo,
) -> Result<(TargetDone, Vec<Effect>), StepError> {
    let (Some(from), Some(to)) = (&live.current, &live.previous) else {
        return Err(StepError::Permanent(format!(
            "{} has no earlier release recorded to roll back to",
            t.name
        )));
    };
    let rb = plugin
        .deployer
        .rollbacker()
        .ok_or_else(|| StepError::Permanent(format!("plugin {} cannot roll back", plugin.name)))?;
    let (secrets, _open) = secrets(env, spec);
    let req = request(spec, wf, vec![Target::from(t)], 1, secrets, Some(&info));
    let started = Instant::now();
    let result = rb
        .rollback(&req, to)
        .await
        .map_err(|e| StepError::from(e.context(format!("{} on {}", plugin.name, t.name))))?;
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
        status: TargetStatus::RolledBack,
        message: r
            .map(|r| r.message)
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| format!("rolled back from {} to {}", from.version, to.version)),
        duration_ms: elapsed_ms(started),
        attempt: info.attempt,
        version: to.version.clone(),
    };
    let effect = Effect::RolledBack {
        moniker: t.moniker.to_string(),
        deployment_id: from.deployment_id.clone(),
        by: wf.to_owned(),
    };
    Ok((done, vec![effect]))
}
