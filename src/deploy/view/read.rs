//! Reading a deployment back from the database: its inputs' head, its step history, its events
//! and its report, into a [`DeploymentView`] — in full, or as a list reads it.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

use super::{AttemptView, CanaryView, DeploymentView, HookState, HookView, TargetView};
use crate::config::EnvSpec;
use crate::deploy::Report;
use crate::deploy::plan::PlannedHook;
use crate::deploy::releases::Transitions;
use crate::deploy::state::{
    Action, DeploymentState, Doing, Ending, Kind, Phase, StepName, TargetState, Topic,
};
use crate::deploy::steps::TargetDone;
use crate::workflow::store::{AttemptOutcome, History, Store, WorkflowRow, WorkflowStatus};
use crate::workflow::{StepFailure, StoreError};

#[derive(Deserialize)]
struct Inputs {
    spec: EnvSpec,
}

/// What a list needs of a deployment's inputs, read without building its targets (a spec of
/// 100,000 targets is skipped over, not built).
#[derive(Deserialize)]
struct InputsHead {
    spec: SpecHead,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    operator: String,
}

#[derive(Deserialize)]
struct SpecHead {
    application: String,
    environment: String,
    #[serde(default)]
    production: bool,
    artifact: ArtifactHead,
    plugin: String,
    strategy: crate::config::Strategy,
    #[serde(default)]
    atomic: bool,
}

#[derive(Deserialize)]
struct ArtifactHead {
    #[serde(default)]
    version: String,
}

/// What a list needs of a deployment's outcome, without its per-target lines.
#[derive(Deserialize)]
struct ReportHead {
    kind: Kind,
    #[serde(rename = "result")]
    ending: Ending,
    version: String,
    #[serde(default)]
    transitions: Transitions,
    message: String,
    #[serde(default)]
    skipped: u32,
    /// Written beside the lines since lists stopped reading them (older reports lack it).
    #[serde(default)]
    target_counts: Option<crate::deploy::TargetCounts>,
}

impl From<ReportHead> for Report {
    fn from(h: ReportHead) -> Report {
        Report {
            kind: h.kind,
            ending: h.ending,
            version: h.version,
            transitions: h.transitions,
            message: h.message,
            targets: Vec::new(),
            rolled_back: Vec::new(),
            skipped: h.skipped,
        }
    }
}

/// How much of a deployment to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Depth {
    /// Every target, attempt and hook.
    Full,
    /// What a list shows: state, phase, version, canary — no targets or hooks.
    Summary,
}

/// A deployment's inputs as far as `depth` needs them: the whole spec, or its head.
struct Head {
    application: String,
    environment: String,
    production: bool,
    version: String,
    plugin: String,
    strategy: Option<crate::config::Strategy>,
    atomic: bool,
    dry_run: bool,
    operator: String,
}

impl Head {
    /// The head of `inputs`, read without building its targets (a spec of 100,000 targets is
    /// megabytes; a view takes its targets from the plan).
    fn read(inputs: &str) -> Option<Head> {
        let i: InputsHead = serde_json::from_str(inputs).ok()?;
        Some(Head {
            application: i.spec.application,
            environment: i.spec.environment,
            production: i.spec.production,
            version: i.spec.artifact.version,
            plugin: i.spec.plugin,
            strategy: Some(i.spec.strategy),
            atomic: i.spec.atomic,
            dry_run: i.dry_run,
            operator: i.operator,
        })
    }
}

/// What a view reads of a plan: its targets' names and monikers by batch, and its hooks (a
/// plan's targets also carry a host, labels and a parsed moniker: at 100,000 targets its 22 MB
/// were the largest thing a view held).
#[derive(Deserialize)]
struct ViewPlan {
    batches: Vec<ViewBatch>,
    #[serde(default)]
    hooks: Vec<PlannedHook>,
}

/// A batch as a view reads it.
#[derive(Deserialize)]
struct ViewBatch {
    index: u32,
    targets: Vec<ViewTarget>,
}

/// A planned target as a view reads it.
#[derive(Deserialize)]
struct ViewTarget {
    name: String,
    /// As written (`Moniker`'s text).
    moniker: String,
}

/// The steps a view never reads (it reads the plan from its event, and targets' and hooks'
/// steps): at 100,000 targets the plan and the releases before a deploy are tens of megabytes.
pub const NOT_VIEWED: &[&str] = &["plan", "engine.set_event", "releases.before"];

/// Loads deployment `id`, read at one moment; None if there is none.
pub async fn load(store: &dyn Store, id: &str) -> Result<Option<DeploymentView>, StoreError> {
    Ok(store.state(id, NOT_VIEWED).await?.map(|s| {
        let phase_at = s.event_times.get("phase").copied();
        let mut v = build(
            s.row,
            s.events,
            s.history,
            s.pending.into_iter().map(|m| m.topic).collect(),
            Depth::Full,
        );
        v.phase_at = phase_at;
        v
    }))
}

/// The deployment of a row a listing found, read again as a whole at one moment.
pub async fn of_row(store: &dyn Store, row: WorkflowRow) -> Result<DeploymentView, StoreError> {
    load(store, &row.id)
        .await?
        .ok_or(StoreError::NotFound(row.id))
}

/// Which deployments a list shows.
#[derive(Debug, Clone, Copy)]
pub enum Listed<'a> {
    /// The most recent (live first), at most this many.
    Recent(u32),
    /// Those of one application in one environment (`app/env`), most recent first.
    Of(&'a str, u32),
}

/// The deployments `which` names, as a list shows them ([`summary_of_row`]): the headless
/// commands' `status`, `history` and `inbox`. Only heads of a lineage (what a resume or retry
/// continued is shown as the one deployment it is).
pub async fn summaries(
    store: &dyn Store,
    which: Listed<'_>,
) -> Result<Vec<DeploymentView>, StoreError> {
    let (subject, limit) = match which {
        Listed::Recent(limit) => (None, limit),
        Listed::Of(subject, limit) => (Some(subject.to_owned()), limit),
    };
    let rows = store
        .workflows(crate::workflow::store::WorkflowQuery {
            subject,
            live_only: false,
            limit,
            heads: true,
        })
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        out.push(summary_of_row(store, r).await?);
    }
    Ok(out)
}

/// What a list shows of the deployment of a row (state, phase, version, canary, when), read
/// from the row and its events alone: no target, attempt or hook is read, so a list costs the
/// same whatever its deployments' sizes. Its `targets` and `hooks` are empty.
pub async fn summary_of_row(
    store: &dyn Store,
    row: WorkflowRow,
) -> Result<DeploymentView, StoreError> {
    let events = store.events_except(&row.id, &["plan"]).await?;
    Ok(build(
        row,
        events,
        History::default(),
        Vec::new(),
        Depth::Summary,
    ))
}

fn event<T: serde::de::DeserializeOwned>(
    events: &BTreeMap<String, String>,
    key: &str,
) -> Option<T> {
    events.get(key).and_then(|v| serde_json::from_str(v).ok())
}

/// What one target step left behind, by step id.
struct Latest<'a> {
    id: u32,
    action: Action,
    record: Option<&'a crate::workflow::store::StepRecord>,
}

/// A deployment's view from what the store holds of it. Each large document (the spec, the
/// plan, the report, the steps) is let go once read: at 100,000 targets each is megabytes.
fn build(
    mut row: WorkflowRow,
    mut events: BTreeMap<String, String>,
    history: History,
    pending_commands: Vec<String>,
    depth: Depth,
) -> DeploymentView {
    let inputs = Head::read(&row.inputs);
    let kind = Kind::of_workflow(&row.name, inputs.as_ref().is_some_and(|i| i.dry_run))
        .unwrap_or(Kind::Deploy);
    let plan: Option<ViewPlan> = match depth {
        Depth::Full => events
            .remove("plan")
            .and_then(|p| serde_json::from_str(&p).ok()),
        Depth::Summary => None,
    };
    let phase: Option<Phase> = event(&events, "phase");
    let live = row.status.is_live();
    let accepts: Vec<Topic> = if live {
        event(&events, crate::workflow::store::ACCEPTS).unwrap_or_default()
    } else {
        Vec::new()
    };
    let mut targets = match (kind, depth) {
        // A test run touches no target; a list reads none.
        (Kind::Test, _) | (_, Depth::Summary) => Vec::new(),
        _ => targets_of(plan.as_ref(), &row.inputs),
    };
    row.inputs = String::new();
    let head = inputs.as_ref();
    let names = step_names(&history);
    let hooks = plan
        .as_ref()
        .map(|p| hook_views(p, kind, head.is_some_and(|h| h.atomic), &history, &names))
        .unwrap_or_default();
    let mut per_target_hooks: Vec<String> = Vec::new();
    for h in plan.iter().flat_map(|p| &p.hooks) {
        if h.event.per_target() && !per_target_hooks.contains(&h.name) {
            per_target_hooks.push(h.name.clone());
        }
    }
    // The plan's targets are in `targets` now; the plan itself goes before the attempts come.
    let batches = plan.map_or(0, |p| u32::try_from(p.batches.len()).unwrap_or(u32::MAX));
    // A cancelled deployment's attempt in flight is still finishing (cancel stops at the next
    // step boundary).
    let finishing = live || row.status == WorkflowStatus::Cancelled;
    drop(names);
    apply_steps(&mut targets, &history, &row.id, finishing);
    drop(history);
    let outcome = row.output.take().or(row.error.take());
    let mut target_counts = None;
    let report: Option<Report> = outcome.as_deref().and_then(|o| match depth {
        Depth::Full => serde_json::from_str(o).ok(),
        Depth::Summary => serde_json::from_str::<ReportHead>(o).ok().map(|h| {
            target_counts = h.target_counts;
            Report::from(h)
        }),
    });
    drop(outcome);
    if let Some(r) = &report {
        apply_report(&mut targets, r, kind == Kind::Canary);
    }
    let transitions: Transitions = report
        .as_ref()
        .filter(|r| !r.transitions.is_empty())
        .map(|r| r.transitions.clone())
        .or_else(|| event(&events, "transitions"))
        .unwrap_or_default();
    let version = match kind {
        Kind::Rollback => transitions.short(),
        _ => head.map(|h| h.version.clone()).unwrap_or_default(),
    };
    let state = state_of(row.status, phase.as_ref(), report.as_ref(), &targets);
    let canary = head
        .and_then(|h| h.strategy.as_ref())
        .and_then(|s| s.canary())
        .filter(|_| kind == Kind::Canary)
        .map(|plan| CanaryView {
            plan: plan.clone(),
            status: event(&events, "canary").unwrap_or_default(),
            actual: event(&events, "canary_actual"),
            drift: event(&events, "canary_drift"),
            traffic: event(&events, "canary_traffic").unwrap_or_default(),
            background: event(&events, "canary_background"),
        });
    DeploymentView {
        id: row.id,
        kind,
        status: row.status,
        state,
        application: head.map(|h| h.application.clone()).unwrap_or_default(),
        environment: head.map(|h| h.environment.clone()).unwrap_or_default(),
        production: head.is_some_and(|h| h.production),
        version,
        transitions,
        plugin: head.map(|h| h.plugin.clone()).unwrap_or_default(),
        dry_run: kind == Kind::DryRun,
        operator: inputs.map(|i| i.operator).unwrap_or_default(),
        phase,
        phase_at: None,
        accepts,
        batches,
        targets,
        report,
        pending_commands,
        runs: row.recovery_attempts,
        created_at: row.created_at,
        completed_at: row.completed_at,
        canary,
        hooks,
        per_target_hooks,
        never_started: event(&events, crate::workflow::store::NEVER_STARTED),
        target_counts,
        summary: depth == Depth::Summary,
        unwatched: false,
    }
}

/// Every target, pending: the plan's, or before a plan is made the spec's in `inputs`.
fn targets_of(plan: Option<&ViewPlan>, inputs: &str) -> Vec<TargetView> {
    if let Some(plan) = plan {
        return plan
            .batches
            .iter()
            .flat_map(|b| b.targets.iter().map(move |t| (b.index, t)))
            .map(|(batch, t)| pending(t.moniker.clone(), &t.name, batch))
            .collect();
    }
    let Ok(Inputs { spec }) = serde_json::from_str::<Inputs>(inputs) else {
        return Vec::new();
    };
    spec.targets
        .iter()
        .map(|t| {
            let m = spec.moniker(t).map(|m| m.to_string()).unwrap_or_default();
            pending(m, &t.name, 0)
        })
        .collect()
}

/// What each step of `history` is, by id.
///
/// Hooks' steps only: a target's step is read from its own record's name as it is applied (a
/// map of 100,000 targets' step names cost 20 MB).
fn step_names(history: &History) -> BTreeMap<u32, StepName> {
    history
        .steps
        .iter()
        .map(|s| (s.function_id, &s.function_name))
        .chain(
            history
                .attempts
                .iter()
                .map(|a| (a.function_id, &a.function_name)),
        )
        .filter(|(_, n)| n.starts_with("hook"))
        .filter_map(|(id, n)| n.parse().ok().map(|n| (id, n)))
        .filter(|(_, n)| matches!(n, StepName::Hook { .. } | StepName::HookDelete { .. }))
        .collect()
}

/// Each target as its attempts and latest step (the highest id: a retry's round, an undo's
/// rollback) left it.
fn apply_steps(targets: &mut [TargetView], history: &History, id: &str, finishing: bool) {
    let index: HashMap<&str, usize> = targets
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i))
        .collect();
    let target_of = |name: &str| match name.parse::<StepName>() {
        Ok(StepName::Target {
            action,
            round,
            target,
            ..
        }) => index.get(target.as_str()).map(|&i| (i, action, round)),
        _ => None,
    };
    let mut latest: BTreeMap<usize, Latest<'_>> = BTreeMap::new();
    let mut attempts: Vec<(usize, AttemptView)> = Vec::new();
    for a in &history.attempts {
        let Some((i, action, round)) = target_of(&a.function_name) else {
            continue;
        };
        attempts.push((
            i,
            AttemptView {
                attempt: a.attempt,
                round,
                action,
                started_at: a.started_at,
                ended_at: a.ended_at,
                outcome: a.outcome,
                error: a.error.clone(),
                key: format!("{id}/{}", a.function_id),
            },
        ));
        let l = latest.entry(i).or_insert(Latest {
            id: a.function_id,
            action,
            record: None,
        });
        if a.function_id >= l.id {
            *l = Latest {
                id: a.function_id,
                action,
                record: None,
            };
        }
    }
    for s in &history.steps {
        let Some((i, action, _)) = target_of(&s.function_name) else {
            continue;
        };
        if latest.get(&i).is_none_or(|l| s.function_id >= l.id) {
            latest.insert(
                i,
                Latest {
                    id: s.function_id,
                    action,
                    record: Some(s),
                },
            );
        }
    }
    drop(index);
    // Most targets make one attempt: each list is as long as it needs to be.
    for (i, a) in attempts {
        targets[i].attempts.reserve_exact(1);
        targets[i].attempts.push(a);
    }
    for (i, l) in latest {
        apply_latest(&mut targets[i], &l, id, finishing);
    }
}

/// What target `t`'s latest step says of it.
fn apply_latest(t: &mut TargetView, l: &Latest<'_>, id: &str, finishing: bool) {
    let key = format!("{id}/{}", l.id);
    let last_attempt = t.attempts.iter().rev().find(|a| a.key == key).cloned();
    match l.record {
        Some(rec) => {
            if let Some(out) = rec
                .output
                .as_deref()
                .and_then(|o| serde_json::from_str::<TargetDone>(o).ok())
            {
                t.state = out.status;
                t.attempt = out.attempt;
                t.duration_ms = Some(out.duration_ms);
                t.message = out.message;
                // A skip is the operator's word, not a try: the target's tries and time are
                // those it made before (none for one skipped before it ran).
                if t.state == TargetState::Skipped {
                    let tried: Vec<&AttemptView> =
                        t.attempts.iter().filter(|a| a.key != key).collect();
                    t.attempt = u32::try_from(tried.len()).unwrap_or(u32::MAX);
                    t.duration_ms = (!tried.is_empty()).then(|| {
                        tried
                            .iter()
                            .filter_map(|a| u64::try_from(a.ended_at? - a.started_at).ok())
                            .sum()
                    });
                }
            } else if let Some(f) = rec
                .error
                .as_deref()
                .and_then(|e| serde_json::from_str::<StepFailure>(e).ok())
            {
                t.state = if l.action == Action::Rollback {
                    TargetState::RollbackFailed
                } else {
                    TargetState::Failed
                };
                t.attempt = last_attempt.as_ref().map_or(f.attempts, |a| a.attempt);
                t.message = f.to_string();
            }
        }
        None => {
            let Some(a) = last_attempt else { return };
            t.attempt = a.attempt;
            // An interrupted attempt ran when an engine stopped.
            match (a.ended_at, a.outcome) {
                (None, _) if finishing => t.state = TargetState::Running,
                (None, _) | (_, Some(AttemptOutcome::Interrupted)) => {
                    t.state = TargetState::Unknown;
                    t.message = a.error.unwrap_or_default();
                }
                (_, Some(AttemptOutcome::Retryable)) => {
                    t.state = TargetState::Retrying;
                    t.message = a.error.unwrap_or_default();
                }
                _ => {}
            }
        }
    }
}

/// Targets no step touched take the report's word: never started, a dry-run's answers; a
/// canary's candidates end promoted or reverted.
fn apply_report(targets: &mut [TargetView], r: &Report, canary: bool) {
    let mut by_moniker: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, t) in targets.iter().enumerate() {
        by_moniker.entry(t.moniker.as_str()).or_default().push(i);
    }
    let mut words: Vec<(usize, TargetState, &str)> = Vec::new();
    for line in &r.targets {
        let open = by_moniker.get_mut(line.moniker.as_str()).and_then(|found| {
            let at = found.iter().position(|&i| {
                let state = targets[i].state;
                state == TargetState::Pending || (canary && state == TargetState::Candidate)
            })?;
            Some(found.remove(at))
        });
        if let Some(i) = open {
            // A target no step touched was never started; an operator's skip is a step.
            // The state says "not started"; the message says why (a line printing both read
            // "not started: not started: …").
            let (state, message) = match line.status {
                TargetState::Skipped if line.message.starts_with("not started") => (
                    TargetState::NotStarted,
                    line.message
                        .trim_start_matches("not started")
                        .trim_start_matches(':')
                        .trim_start(),
                ),
                other => (other, line.message.as_str()),
            };
            words.push((i, state, message));
        }
    }
    drop(by_moniker);
    for (i, state, message) in words {
        targets[i].state = state;
        message.clone_into(&mut targets[i].message);
    }
}

/// The hooks a `kind` deployment runs, in order, with what the history says of each.
fn hook_views(
    plan: &ViewPlan,
    kind: Kind,
    atomic: bool,
    history: &History,
    names: &BTreeMap<u32, StepName>,
) -> Vec<HookView> {
    use crate::config::Event as E;
    let names: Vec<(u32, &StepName)> = names
        .iter()
        .filter(|(_, n)| matches!(n, StepName::Hook { .. } | StepName::HookDelete { .. }))
        .map(|(id, n)| (*id, n))
        .collect();
    let ran = |event: E| {
        names
            .iter()
            .any(|(_, n)| matches!(n, StepName::Hook { event: e, .. } if *e == event))
    };
    let events: Vec<E> = match kind {
        Kind::Deploy => {
            let mut v = vec![E::PreDeploy, E::PostDeploy];
            if atomic || ran(E::PreRollback) {
                v.extend([E::PreRollback, E::PostRollback]);
            }
            v
        }
        Kind::Rollback => vec![E::PreRollback, E::PostRollback],
        Kind::Canary => vec![E::PreDeploy, E::PrePromote, E::PostPromote, E::PostDeploy],
        Kind::Test => vec![E::Test],
        Kind::DryRun => Vec::new(),
    };
    let mut out = Vec::new();
    for event in events {
        for h in plan.hooks.iter().filter(|h| h.event == event) {
            let mut v = HookView {
                event,
                name: h.name.clone(),
                kind: h.kind.clone(),
                weight: h.weight,
                moniker: h.moniker.clone(),
                state: HookState::Pending,
                attempt: 0,
                duration_ms: None,
                message: String::new(),
                output: String::new(),
                deletes: Vec::new(),
            };
            let ids: Vec<u32> = names
                .iter()
                .filter(|(_, n)| matches!(n, StepName::Hook { event: e, name } if *e == event && *name == h.name))
                .map(|(id, _)| *id)
                .collect();
            if let Some(&id) = ids.iter().max() {
                let rec = history.steps.iter().find(|s| s.function_id == id);
                let last = history
                    .attempts
                    .iter()
                    .filter(|a| a.function_id == id)
                    .max_by_key(|a| a.attempt);
                match rec {
                    Some(r) => {
                        if let Some(run) = r.output.as_deref().and_then(|o| {
                            serde_json::from_str::<crate::deploy::hooks::HookRun>(o).ok()
                        }) {
                            v.state = HookState::Passed;
                            v.attempt = run.attempt;
                            v.duration_ms = Some(run.duration_ms);
                            v.message = run.message;
                            v.output = run.output;
                        } else if let Some(f) = r
                            .error
                            .as_deref()
                            .and_then(|e| serde_json::from_str::<StepFailure>(e).ok())
                        {
                            v.state = HookState::Failed;
                            v.attempt = f.attempts;
                            v.message = f.to_string();
                        }
                    }
                    None => {
                        if let Some(a) = last {
                            v.attempt = a.attempt;
                            v.state = match (a.ended_at, a.outcome) {
                                (None, _) => HookState::Running,
                                (_, Some(AttemptOutcome::Retryable)) => {
                                    v.message = a.error.clone().unwrap_or_default();
                                    HookState::Retrying
                                }
                                _ => HookState::Running,
                            };
                        }
                    }
                }
            }
            for (id, n) in &names {
                if let StepName::HookDelete {
                    policy,
                    event: e,
                    name,
                } = n
                    && *e == event
                    && *name == h.name
                    && let Some(d) = history
                        .steps
                        .iter()
                        .find(|s| s.function_id == *id)
                        .and_then(|s| s.output.as_deref())
                        .and_then(|o| {
                            serde_json::from_str::<crate::deploy::hooks::DeleteRun>(o).ok()
                        })
                {
                    let entry = format!("{}: {}", policy.as_str(), d.message);
                    if !v.deletes.contains(&entry) {
                        v.deletes.push(entry);
                    }
                }
            }
            out.push(v);
        }
    }
    out
}

fn pending(moniker: String, name: &str, batch: u32) -> TargetView {
    TargetView {
        moniker,
        name: name.to_owned(),
        batch,
        state: TargetState::Pending,
        attempt: 0,
        duration_ms: None,
        message: String::new(),
        attempts: Vec::new(),
    }
}

/// The state an operator reads, from the engine's status, the phase and the report.
pub fn state_of(
    status: WorkflowStatus,
    phase: Option<&Phase>,
    report: Option<&Report>,
    targets: &[TargetView],
) -> DeploymentState {
    use DeploymentState as D;
    match status {
        // A run that parked for an operator and was let go by its engine (handed to another,
        // which has not claimed it yet) still waits where it parked.
        WorkflowStatus::Enqueued | WorkflowStatus::Pending => match phase {
            Some(Phase::Paused { .. }) => D::Paused,
            Some(
                Phase::AwaitingDecision { .. }
                | Phase::Canary {
                    doing: Doing::RouterFailed { .. },
                    ..
                },
            ) => D::FailedAwaiting,
            Some(Phase::Canary {
                doing: Doing::Pause | Doing::Held { .. },
                ..
            }) => D::CanaryPaused,
            _ if status == WorkflowStatus::Enqueued => D::Queued,
            _ => D::Running,
        },
        WorkflowStatus::Cancelled if targets.iter().any(|t| t.state == TargetState::Running) => {
            D::Cancelling
        }
        WorkflowStatus::Cancelled => D::Cancelled,
        WorkflowStatus::MaxRecoveryAttemptsExceeded => D::DeadLettered,
        WorkflowStatus::Success | WorkflowStatus::Error => match report.map(|r| (r.ending, r)) {
            Some((Ending::Deployed, r)) if r.skipped > 0 => D::DeployedWithSkips,
            Some((Ending::Deployed, _)) => D::Deployed,
            Some((Ending::RolledBack, _)) => D::RolledBack,
            Some((Ending::Aborted, _)) => D::Aborted,
            Some((Ending::Reverted, _)) => D::Reverted,
            Some((Ending::Passed, _)) => D::Passed,
            Some((Ending::Planned | Ending::Validated, _)) => D::Planned,
            Some((Ending::Failed, _)) | None => D::Failed,
        },
    }
}

#[cfg(test)]
mod tests;
