//! The run every deploy flow goes through: begin (plan, record it, start the plugin and record
//! its capabilities), whole-plan plugin calls, targets fanned out batch by batch with the
//! operator's commands read at each boundary, guided failure (retry, skip, abort), and one way
//! to end. A step that fails for good ends the workflow through `?` ([`Stop`]); each phase is
//! published with the commands the workflow takes there, so nothing is accepted and ignored.

mod commands;
mod tally;

pub use tally::Tally;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use serde::Serialize;

use super::plan::{self, Batch, Plan, PlannedTarget};
use super::releases::{self, Live};
use super::state::{Action, Ending, Kind, Phase, StepName, TargetState, Topic};
use super::steps::{self, PluginInfo, TargetDone};
use super::{DeployEnv, Report, TargetReport};
use crate::config::{EnvSpec, Strategy};
use crate::plugin::{OnError, PluginHandle, Request, Secrets, fan_out};
use crate::workflow::store::{ACCEPTS, Effect, Message};
use crate::workflow::{Interrupt, RetryPolicy, StepError, StepInfo, StepResult, WfCtx};

/// Why a workflow stops early.
#[derive(Debug)]
pub enum Stop {
    /// The engine stops it (cancel, shutdown, fencing): nothing is recorded as its end.
    Interrupt(Interrupt),
    /// It failed: the message says why.
    Failed(String),
    /// An operator aborted it: what it changed goes back.
    Abort(String),
}

impl From<Interrupt> for Stop {
    fn from(i: Interrupt) -> Self {
        Stop::Interrupt(i)
    }
}

/// A step's recorded failure ends the workflow, with `what` failed and why.
pub trait OrFail<T> {
    /// The value, or [`Stop::Failed`].
    fn or_fail(self) -> Result<T, Stop>;
}

impl<T> OrFail<T> for StepResult<T> {
    fn or_fail(self) -> Result<T, Stop> {
        self.map_err(|f| Stop::Failed(f.to_string()))
    }
}

/// One deployment as it runs.
pub struct Run<'a> {
    /// Plugins and the database.
    pub env: &'a DeployEnv,
    /// The durable context.
    pub ctx: &'a WfCtx,
    /// What runs where.
    pub spec: &'a EnvSpec,
    /// Deploy, dry-run or rollback.
    pub kind: Kind,
    /// Targets in batches.
    pub plan: Plan,
    /// What the plugin announced.
    pub info: PluginInfo,
    /// Targets at once.
    pub par: u32,
    /// Each target's latest line, and the targets an operator left out.
    pub tally: Tally,
    /// A canary's slots (PrepareSlots' state), sent in every later call.
    pub traffic: Option<serde_json::Value>,
    /// A canary's routing as manent records it, sent with every slot and router call.
    pub routing: Option<crate::plugin::Routing>,
    /// The operator commands the flow takes in a phase: each flow passes its own (a canary's
    /// promote, revert, weight and back); [`Run::batch_commands`] unless it says otherwise.
    pub commands: fn(&Run<'_>, &Phase) -> Vec<Topic>,
}

/// How a fan-out of targets is driven.
#[derive(Debug, Clone, Copy)]
pub struct FanOut {
    /// What the target steps do.
    pub action: Action,
    /// Stop starting targets after a failure (a deploy), or go on (a rollback).
    pub on_error: OnError,
    /// On failure, wait for an operator's retry, skip or abort; otherwise fail.
    pub guided: bool,
}

impl<'a> Run<'a> {
    /// Plans (step `plan`), publishes the plan, starts the plugin and records what it can do
    /// (step `plugin.configure`). Nothing is touched yet.
    pub async fn begin(
        env: &'a DeployEnv,
        ctx: &'a WfCtx,
        spec: &'a EnvSpec,
        kind: Kind,
    ) -> Result<Run<'a>, Stop> {
        let plan = Run::plan(env, ctx, spec, kind).await?;
        // Starting a plugin may take its whole start_timeout: no step timeout on top.
        let policy = RetryPolicy {
            timeout: None,
            ..steps::target_policy(spec)
        };
        let info = ctx
            .step(StepName::Configure, &policy, |_| async {
                let h = env.plugin(spec).await?;
                Ok(PluginInfo {
                    origin: h.origin.clone(),
                    capabilities: h.capabilities.clone(),
                })
            })
            .await?
            .or_fail()?;
        Ok(Run::new(env, ctx, spec, kind, plan, info))
    }

    /// Plans (step `plan`) and publishes the plan, without starting the plugin: what runs only
    /// hooks (`manent test`) needs nothing of it.
    pub async fn begin_without_plugin(
        env: &'a DeployEnv,
        ctx: &'a WfCtx,
        spec: &'a EnvSpec,
        kind: Kind,
    ) -> Result<Run<'a>, Stop> {
        let plan = Run::plan(env, ctx, spec, kind).await?;
        let info = PluginInfo {
            origin: String::new(),
            capabilities: crate::plugin::Capabilities::default(),
        };
        // One at a time: no target is touched.
        Ok(Run {
            par: 1,
            ..Run::new(env, ctx, spec, kind, plan, info)
        })
    }

    /// Phase `Planning`, then step `plan` (the batches; a kind that deploys a version needs
    /// one), published as event `plan`. An engine that shares its database with a group
    /// refuses there what its own configuration does not say ([`super::vouch`]).
    async fn plan(env: &DeployEnv, ctx: &WfCtx, spec: &EnvSpec, kind: Kind) -> Result<Plan, Stop> {
        ctx.set_events(&[
            ("phase", json(&Phase::Planning)),
            (ACCEPTS, json(&[] as &[Topic])),
        ])
        .await?;
        // At every start, a replay's included: not a step whose record could stand in for it
        // (whoever can write the database could write that record too).
        if let Some(own) = env.own_config.clone() {
            // Reads and parses files: off the runtime's threads.
            let submitted = spec.clone();
            let vouched =
                tokio::task::spawn_blocking(move || super::vouch::vouch(&own, &submitted))
                    .await
                    .map_err(|e| Stop::Failed(e.to_string()))?;
            vouched.map_err(Stop::Failed)?;
        }
        let needs_version = !matches!(kind, Kind::Rollback | Kind::Test);
        let plan = ctx
            .step(StepName::Plan, &steps::internal(), |_| async {
                if needs_version && spec.artifact.version.is_empty() {
                    return Err(StepError::Permanent(format!(
                        "{}: artifact.version is empty; set it or pass --version",
                        spec.descriptor.display()
                    )));
                }
                plan::compute(spec).map_err(StepError::Permanent)
            })
            .await?
            .or_fail()?;
        ctx.set_event("plan", &plan).await?;
        Ok(plan)
    }

    /// A run of `plan` with the plugin `info` describes, as many targets at once as both allow.
    fn new(
        env: &'a DeployEnv,
        ctx: &'a WfCtx,
        spec: &'a EnvSpec,
        kind: Kind,
        plan: Plan,
        info: PluginInfo,
    ) -> Run<'a> {
        let par = steps::parallelism(spec, &info);
        Run {
            env,
            ctx,
            spec,
            kind,
            plan,
            info,
            par,
            tally: Tally::default(),
            traffic: None,
            routing: None,
            commands: |run, phase| run.batch_commands(phase),
        }
    }

    /// The phase of working on batch `batch` of `of` (a canary deploys its candidate).
    pub fn batch_phase(&self, batch: u32, of: u32) -> Phase {
        if self.kind == Kind::Canary {
            Phase::Candidate { batch, of }
        } else {
            Phase::Batch { batch, of }
        }
    }

    /// Publishes where the deployment is and the commands it takes there.
    pub async fn phase(&self, phase: Phase) -> Result<(), Stop> {
        let accepts = self.accepts(&phase);
        self.ctx
            .set_events(&[("phase", json(&phase)), (ACCEPTS, json(&accepts))])
            .await?;
        Ok(())
    }

    /// What was live on each moniker before this run changed anything (step `releases.before`):
    /// the hooks' variables, a rollback's destinations, a canary's stable side.
    pub async fn releases_before(&self) -> Result<BTreeMap<String, Live>, Stop> {
        let (env, spec) = (self.env, self.spec);
        self.ctx
            .step(StepName::ReleasesBefore, &steps::internal(), |_| async {
                let rows = env
                    .db
                    .releases(&spec.subject())
                    .await
                    .map_err(|e| StepError::Retryable(e.to_string()))?;
                Ok(releases::live(rows))
            })
            .await?
            .or_fail()
    }

    /// What every target runs now, as the plugin says (`CurrentRelease`, one durable step), by
    /// target name: `None` when the plugin cannot tell (no `current_release`); an empty
    /// version where it cannot tell for a target.
    pub async fn current_releases(&self) -> Result<Option<BTreeMap<String, String>>, Stop> {
        if !self
            .info
            .capabilities
            .has(crate::plugin::Capability::CurrentRelease)
        {
            return Ok(None);
        }
        let plugin = self.spec.plugin.clone();
        let seen: Vec<crate::plugin::TargetRelease> = self
            .plugin_step(
                StepName::CurrentRelease,
                &steps::target_policy(self.spec),
                true,
                |h, req| {
                    let plugin = plugin.clone();
                    async move {
                        let ri = h.deployer.release_inspector().ok_or_else(|| {
                            StepError::Permanent(format!(
                                "plugin {plugin} cannot tell the current release"
                            ))
                        })?;
                        ri.current_release(&req).await.map_err(StepError::from)
                    }
                },
            )
            .await?;
        Ok(Some(
            self.plan
                .targets()
                .zip(seen)
                .map(|((_, t), r)| (t.name.clone(), r.version))
                .collect(),
        ))
    }

    /// The operator commands taken in `phase`, as the flow says ([`Run::commands`]).
    pub fn accepts(&self, phase: &Phase) -> Vec<Topic> {
        (self.commands)(self, phase)
    }

    /// The commands a run of batches takes in `phase`: pause only before a next batch, abort
    /// only when what changed can go back.
    pub fn batch_commands(&self, phase: &Phase) -> Vec<Topic> {
        let abort = (self.kind == Kind::Deploy && self.info.capabilities.can_roll_back())
            .then_some(Topic::Abort);
        let mut out: Vec<Topic> = match phase {
            Phase::Batch { batch, of } => {
                let pause = (batch < of).then_some(Topic::Pause);
                pause.into_iter().chain([Topic::Skip]).collect()
            }
            Phase::Waiting { .. } => vec![Topic::Pause],
            Phase::Paused { .. } => vec![Topic::Resume, Topic::Skip],
            Phase::AwaitingDecision { .. } => vec![Topic::Retry, Topic::Skip],
            _ => return Vec::new(),
        };
        out.extend(abort);
        out
    }

    /// A plugin call on the whole plan, as one durable step: `secrets` open for the call.
    pub async fn plugin_step<T, F, Fut>(
        &self,
        name: StepName,
        policy: &RetryPolicy,
        with_secrets: bool,
        call: F,
    ) -> Result<T, Stop>
    where
        T: Serialize + serde::de::DeserializeOwned,
        F: Fn(Arc<PluginHandle>, Request) -> Fut,
        Fut: Future<Output = Result<T, StepError>>,
    {
        let call = &call;
        self.plugin_step_with(name, policy, with_secrets, |h, req| async move {
            call(h, req).await.map(|v| (v, Vec::new()))
        })
        .await
    }

    /// [`Run::plugin_step`] whose call also returns what commits with it (a release record).
    pub async fn plugin_step_with<T, F, Fut>(
        &self,
        name: StepName,
        policy: &RetryPolicy,
        with_secrets: bool,
        call: F,
    ) -> Result<T, Stop>
    where
        T: Serialize + serde::de::DeserializeOwned,
        F: Fn(Arc<PluginHandle>, Request) -> Fut,
        Fut: Future<Output = Result<(T, Vec<Effect>), StepError>>,
    {
        let (env, spec, ctx, call) = (self.env, self.spec, self.ctx, &call);
        let targets = self.plan.request_targets();
        let par = self.par;
        let (traffic, routing) = (&self.traffic, &self.routing);
        let id = ctx.reserve(1)[0];
        ctx.step_at(id, name.into(), policy, |info| {
            let targets = targets.clone();
            async move {
                let h = env.plugin(spec).await?;
                let (secrets, _open) = if with_secrets {
                    steps::secrets(env, spec)
                } else {
                    (Secrets::none(), None)
                };
                let mut req = steps::request(
                    spec,
                    ctx.id(),
                    steps::Call {
                        targets,
                        parallelism: par,
                        secrets,
                        step: Some(&info),
                        processes: &env.processes,
                    },
                );
                req.traffic.clone_from(traffic);
                req.routing.clone_from(routing);
                call(h, req).await
            }
        })
        .await?
        .or_fail()
    }

    /// Step `validate`: the plugin checks the whole request, without secrets, within the
    /// validation time limit; a refusal fails the deployment before anything is touched.
    pub async fn validate(&self) -> Result<(), Stop> {
        self.phase(Phase::Validating).await?;
        if let Some(why) = &self.spec.chosen {
            self.env.log.for_deployment(self.ctx.id()).info(&format!(
                "plugin {} chosen from deploy.plugins: {why}",
                self.spec.plugin
            ));
        }
        let policy = RetryPolicy {
            timeout: Some(self.spec.validate_timeout),
            ..steps::target_policy(self.spec)
        };
        let plugin = self.spec.plugin.clone();
        let spec = self.spec;
        self.plugin_step(StepName::Validate, &policy, false, |h, req| {
            let plugin = plugin.clone();
            async move {
                // The build is still what was digested when the deployment was asked for.
                super::artifact::verify(spec).map_err(StepError::Permanent)?;
                h.deployer.validate(&req).await.map_err(|e| {
                    StepError::from(e.context(format!("{plugin} rejected the deploy")))
                })
            }
        })
        .await
    }

    /// Runs `body` on every target the plan and `eligible` allow, batch by batch. Between
    /// batches the operator's pause, skip and abort are read; with `guided`, failed targets
    /// wait for a retry, a skip or an abort instead of failing the deployment.
    pub async fn batches<F, Fut>(
        &mut self,
        how: FanOut,
        eligible: impl Fn(&PlannedTarget) -> bool,
        body: F,
    ) -> Result<(), Stop>
    where
        F: Fn(PlannedTarget, StepInfo) -> Fut,
        Fut: Future<Output = Result<(TargetDone, Vec<Effect>), StepError>>,
    {
        let batches = self.plan.batches.clone();
        let of = u32::try_from(batches.len()).unwrap_or(u32::MAX);
        for batch in &batches {
            self.between_batches(batch.index, of).await?;
            self.phase(self.batch_phase(batch.index, of)).await?;
            let mut todo: Vec<&PlannedTarget> = batch
                .targets
                .iter()
                .filter(|t| eligible(t) && !self.tally.skipped.contains(&t.name))
                .collect();
            // Failed targets awaiting a decision, and targets that wait for them.
            let mut open: Vec<&PlannedTarget> = Vec::new();
            let mut waiting: Vec<&PlannedTarget> = Vec::new();
            let mut round = 1;
            loop {
                if todo.is_empty() {
                    if open.is_empty() {
                        break;
                    }
                    if !how.guided {
                        return Err(Stop::Failed(self.tally.first_failure(&open)));
                    }
                    todo = self.decide(batch.index, &open).await?;
                    open.retain(|t| !todo.contains(t) && !self.tally.skipped.contains(&t.name));
                    if open.is_empty() {
                        todo.append(&mut waiting);
                    }
                    todo.retain(|t| !self.tally.skipped.contains(&t.name));
                    continue;
                }
                // A round read back from the record failed before: said then, not again.
                let replayed = self.ctx.replaying();
                let results = self.round(how, batch, round, &todo, &body).await?;
                round += 1;
                let mut unstarted = Vec::new();
                for (t, r) in std::mem::take(&mut todo).into_iter().zip(results) {
                    match r {
                        Some(r) => {
                            if let Err(f) = &r {
                                if !replayed {
                                    super::steps::failed_line(self.env, self.ctx.id(), t, f);
                                }
                                open.push(t);
                            }
                            self.tally.record(batch.index, t, &r);
                        }
                        None => unstarted.push(t),
                    }
                }
                if unstarted.is_empty() {
                    continue;
                }
                if open.is_empty() {
                    // Nothing failed, yet targets did not start: an interrupting command
                    // (abort) waits. Without one, they start in the next round.
                    self.take(&[Topic::Abort, Topic::Revert], batch.index)
                        .await?;
                    todo = unstarted;
                } else {
                    waiting.extend(unstarted);
                }
            }
            if let Strategy::Rolling {
                interval: Some(d), ..
            } = self.spec.strategy
                && batch.index < of
            {
                self.phase(Phase::Waiting {
                    before: batch.index + 1,
                    of,
                })
                .await?;
                if let Some(msg) = self
                    .ctx
                    .recv(&[Topic::Pause.as_str(), Topic::Abort.as_str()], Some(d))
                    .await?
                {
                    self.apply(&msg, batch.index + 1, of).await?;
                }
            }
        }
        Ok(())
    }

    /// One round of a batch: `todo`'s steps, reserved in order, `par` at a time. A replay starts
    /// exactly the targets the first run started once the round had ended (a failure stopped
    /// it, or later steps are recorded); `None` marks a target that did not start.
    async fn round<F, Fut>(
        &self,
        how: FanOut,
        batch: &Batch,
        round: u32,
        todo: &[&PlannedTarget],
        body: &F,
    ) -> Result<Vec<Option<StepResult<TargetDone>>>, Interrupt>
    where
        F: Fn(PlannedTarget, StepInfo) -> Fut,
        Fut: Future<Output = Result<(TargetDone, Vec<Effect>), StepError>>,
    {
        let ctx = self.ctx;
        let ids = ctx.reserve(u32::try_from(todo.len()).unwrap_or(u32::MAX));
        let ended = ids.last().is_some_and(|last| ctx.started_beyond(*last))
            || (how.on_error == OnError::Stop && ids.iter().any(|id| ctx.recorded_failure(*id)));
        let items: Vec<(u32, &PlannedTarget)> = ids
            .into_iter()
            .zip(todo.iter().copied())
            .filter(|(id, _)| !ended || ctx.was_started(*id))
            .collect();
        let policy = steps::target_policy(self.spec);
        let policy = &policy;
        let results = fan_out(
            items.iter().copied(),
            usize::try_from(self.par).unwrap_or(1),
            how.on_error,
            |(id, _)| ctx.was_started(*id),
            |(id, t)| {
                let name = StepName::target(how.action, batch.index, round, &t.name);
                async move {
                    let r = ctx
                        .fan_out_step_at(id, name.into(), policy, |info| body(t.clone(), info))
                        .await;
                    (t, r)
                }
            },
            |(_, r)| !matches!(r, Ok(Ok(_))),
        )
        .await;
        let mut by_name: BTreeMap<&str, StepResult<TargetDone>> = BTreeMap::new();
        for (t, r) in results.into_iter().flatten() {
            match r {
                Ok(r) => {
                    by_name.insert(&t.name, r);
                }
                Err(Interrupt::Interrupted) => {}
                Err(other) => return Err(other),
            }
        }
        Ok(todo
            .iter()
            .map(|t| by_name.remove(t.name.as_str()))
            .collect())
    }

    /// Rolls back, last batch first, each target along its move with `body` (an undo: no
    /// guided failure, every target is tried). Returns the lines of the targets it tried.
    pub async fn undo<F, Fut>(
        &mut self,
        moves: &[super::releases::Move],
        body: F,
    ) -> Result<Vec<TargetReport>, Stop>
    where
        F: Fn(PlannedTarget, super::releases::Move, StepInfo) -> Fut,
        Fut: Future<Output = Result<(TargetDone, Vec<Effect>), StepError>>,
    {
        self.phase(Phase::Undoing).await?;
        let how = FanOut {
            action: Action::Rollback,
            on_error: OnError::Continue,
            guided: false,
        };
        let mut out = Vec::new();
        let batches = self.plan.batches.clone();
        let body = |t: PlannedTarget, info: StepInfo| {
            let mv = moves.iter().find(|m| m.target == t.name).cloned();
            let body = &body;
            async move {
                let mv = mv.ok_or_else(|| {
                    StepError::Permanent(format!("{} has nothing to go back to", t.name))
                })?;
                body(t, mv, info).await
            }
        };
        for batch in batches.iter().rev() {
            let todo: Vec<&PlannedTarget> = batch
                .targets
                .iter()
                .filter(|t| moves.iter().any(|m| m.target == t.name))
                .collect();
            if todo.is_empty() {
                continue;
            }
            let results = self.round(how, batch, 1, &todo, &body).await?;
            for (t, r) in todo.iter().zip(results) {
                let line = match &r {
                    Some(Ok(d)) => tally::done_line(batch.index, t, d),
                    Some(Err(f)) => {
                        let mut l = tally::failure_line(batch.index, t, f);
                        l.status = TargetState::RollbackFailed;
                        l
                    }
                    None => continue,
                };
                out.push(line);
            }
        }
        Ok(out)
    }

    /// The report of a deployment that ends now, as `ending`, with `message`.
    pub fn report(&self, ending: Ending, message: String, unstarted: &str) -> Report {
        let mut r = Report::new(self.kind, &self.spec.artifact.version);
        r.ending = ending;
        r.message = message;
        r.targets = self.tally.lines(&self.plan, unstarted);
        r.skipped = u32::try_from(self.tally.skipped.len()).unwrap_or(u32::MAX);
        r
    }

    /// Ends the deployment: the last phase is published, the report is the outcome.
    pub async fn end(&self, report: Report) -> Result<Report, Interrupt> {
        end(self.ctx, report).await
    }
}

/// How a flow ends when its run cannot begin ([`Run::begin`]'s error): an interruption goes up;
/// a plan or plugin that fails ends it with a `kind` report for `version` saying why.
pub async fn not_begun(
    ctx: &WfCtx,
    kind: Kind,
    version: &str,
    stop: Stop,
) -> Result<Report, Interrupt> {
    match stop {
        Stop::Interrupt(i) => Err(i),
        Stop::Failed(why) | Stop::Abort(why) => {
            let mut r = Report::new(kind, version);
            r.message = why;
            end(ctx, r).await
        }
    }
}

/// Publishes the last phase of a deployment that ends with `report`.
pub async fn end(ctx: &WfCtx, report: Report) -> Result<Report, Interrupt> {
    // A canary an operator (or its analysis) reverted ended as meant: it is done, not failed.
    let phase = if report.ok() || report.ending == Ending::Reverted {
        Phase::Done
    } else {
        Phase::Failed
    };
    ctx.set_events(&[("phase", json(&phase)), (ACCEPTS, json(&[] as &[Topic]))])
        .await?;
    Ok(report)
}

/// Who sent a command.
pub fn by(msg: &Message) -> String {
    msg.sender.clone().unwrap_or_else(|| "an operator".into())
}

/// `v` as JSON (null if it does not encode).
pub fn json<T: Serialize + ?Sized>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}
