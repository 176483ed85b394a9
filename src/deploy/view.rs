//! A deployment as an operator sees it, read back from the database alone: status, phase, and
//! each target's state, attempt and last message. The headless commands print it; a console
//! attached to another process's engine renders it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Report;
use super::plan::Plan;
use super::steps::TargetDone;
use crate::config::EnvSpec;
use crate::workflow::store::{AttemptOutcome, Store, WorkflowRow, WorkflowStatus};
use crate::workflow::{StepFailure, StoreError};

/// One target's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetView {
    /// Moniker.
    pub moniker: String,
    /// Name.
    pub name: String,
    /// Batch, from 1.
    pub batch: u32,
    /// `pending`, `running`, `retrying`, `interrupted`, `deployed`, `unchanged`, `failed`,
    /// `skipped`, `rolled_back`.
    pub state: String,
    /// Current or last attempt.
    pub attempt: u32,
    /// Time on the target, once done.
    pub duration_ms: Option<u64>,
    /// Last message or error.
    pub message: String,
}

/// A deployment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeploymentView {
    /// `dep-…`
    pub id: String,
    /// `deploy` or `rollback`.
    pub kind: String,
    /// Lifecycle state.
    pub status: WorkflowStatus,
    /// Application.
    pub application: String,
    /// Environment.
    pub environment: String,
    /// Production environment.
    pub production: bool,
    /// Version deployed.
    pub version: String,
    /// Plugin.
    pub plugin: String,
    /// Dry-run.
    pub dry_run: bool,
    /// Who started it.
    pub operator: String,
    /// What it is doing now.
    pub phase: Option<String>,
    /// Number of batches.
    pub batches: u32,
    /// Targets in plan order.
    pub targets: Vec<TargetView>,
    /// The outcome, once finished.
    pub report: Option<Report>,
    /// Operator commands not yet taken (`pause`, `resume`, …).
    pub pending_commands: Vec<String>,
    /// Runs so far (more than 1: it was resumed after a crash or a stop).
    pub runs: u32,
    /// Epoch ms.
    pub created_at: i64,
    /// Epoch ms.
    pub completed_at: Option<i64>,
}

impl TargetView {
    /// Finished without error: deployed, already there, rolled back, or planned (a dry run).
    pub fn is_done(&self) -> bool {
        matches!(
            self.state.as_str(),
            "deployed" | "unchanged" | "rolled_back" | "planned"
        )
    }
}

impl DeploymentView {
    /// `application/environment`, as releases and the journal name it.
    pub fn subject(&self) -> String {
        format!("{}/{}", self.application, self.environment)
    }

    /// Targets finished without error.
    pub fn done(&self) -> usize {
        self.targets.iter().filter(|t| t.is_done()).count()
    }
}

#[derive(Deserialize)]
struct Inputs {
    spec: EnvSpec,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    operator: String,
}

/// Splits `deploy:b2:web-1` into (`deploy`, 2, `web-1`).
pub fn parse_step(name: &str) -> Option<(&str, u32, &str)> {
    let mut parts = name.splitn(3, ':');
    let action = parts.next()?;
    let batch = parts.next()?.strip_prefix('b')?.parse().ok()?;
    Some((action, batch, parts.next()?))
}

/// Loads deployment `id`; None if there is none.
pub async fn load(store: &dyn Store, id: &str) -> Result<Option<DeploymentView>, StoreError> {
    match store.workflow(id).await? {
        Some(row) => Ok(Some(of_row(store, row).await?)),
        None => Ok(None),
    }
}

/// The deployment of a row already read (a listing has it).
pub async fn of_row(store: &dyn Store, row: WorkflowRow) -> Result<DeploymentView, StoreError> {
    let events = store.events(&row.id).await?;
    let history = store.history(&row.id).await?;
    let pending = store.pending_messages(&row.id).await?;
    Ok(build(
        &row,
        &events,
        &history,
        pending.into_iter().map(|m| m.topic).collect(),
    ))
}

fn build(
    row: &WorkflowRow,
    events: &BTreeMap<String, String>,
    history: &crate::workflow::store::History,
    pending_commands: Vec<String>,
) -> DeploymentView {
    let inputs: Option<Inputs> = serde_json::from_str(&row.inputs).ok();
    let plan: Option<Plan> = events
        .get("plan")
        .and_then(|p| serde_json::from_str(p).ok());
    let phase: Option<String> = events
        .get("phase")
        .and_then(|p| serde_json::from_str(p).ok());
    let report: Option<Report> = row
        .output
        .as_deref()
        .or(row.error.as_deref())
        .and_then(|o| serde_json::from_str(o).ok());
    let mut targets: Vec<TargetView> = match (&plan, &inputs) {
        (Some(plan), _) => plan
            .targets()
            .map(|(b, t)| TargetView {
                moniker: t.moniker.to_string(),
                name: t.name.clone(),
                batch: b.index,
                state: "pending".into(),
                attempt: 0,
                duration_ms: None,
                message: String::new(),
            })
            .collect(),
        (None, Some(i)) => i
            .spec
            .targets
            .iter()
            .map(|t| TargetView {
                moniker: i.spec.moniker(t).map(|m| m.to_string()).unwrap_or_default(),
                name: t.name.clone(),
                batch: 0,
                state: "pending".into(),
                attempt: 0,
                duration_ms: None,
                message: String::new(),
            })
            .collect(),
        (None, None) => Vec::new(),
    };
    let index: BTreeMap<String, usize> = targets
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.clone(), i))
        .collect();
    let live = row.status == WorkflowStatus::Pending;
    // Attempts first (running, retrying), then recorded results override, in step order.
    for a in &history.attempts {
        let Some((_, _, name)) = parse_step(&a.function_name) else {
            continue;
        };
        let Some(&i) = index.get(name) else { continue };
        let t = &mut targets[i];
        t.attempt = a.attempt;
        match (a.ended_at, a.outcome) {
            (None, _) if live => t.state = "running".into(),
            (None, _) | (_, Some(AttemptOutcome::Interrupted)) => {
                t.state = "interrupted".into();
                t.message = a.error.clone().unwrap_or_default();
            }
            (_, Some(AttemptOutcome::Retryable)) => {
                t.state = "retrying".into();
                t.message = a.error.clone().unwrap_or_default();
            }
            _ => {}
        }
    }
    for s in &history.steps {
        let Some((action, _, name)) = parse_step(&s.function_name) else {
            continue;
        };
        let Some(&i) = index.get(name) else { continue };
        let t = &mut targets[i];
        if let Some(out) = s
            .output
            .as_deref()
            .and_then(|o| serde_json::from_str::<TargetDone>(o).ok())
        {
            t.state = out.status.as_str().into();
            t.attempt = out.attempt;
            t.duration_ms = Some(out.duration_ms);
            t.message = out.message;
        } else if let Some(f) = s
            .error
            .as_deref()
            .and_then(|e| serde_json::from_str::<StepFailure>(e).ok())
        {
            t.state = if action == "rollback" {
                "rollback_failed".into()
            } else {
                "failed".into()
            };
            t.attempt = f.attempts;
            t.message = f.to_string();
        }
    }
    if let Some(r) = &report {
        // Targets no step touched take the report's word: skipped ones, and a dry-run's answers.
        for line in &r.targets {
            if let Some(t) = targets
                .iter_mut()
                .find(|t| t.moniker == line.moniker && t.state == "pending")
            {
                t.state.clone_from(&line.status);
                t.message.clone_from(&line.message);
            }
        }
    }
    let spec = inputs.as_ref().map(|i| &i.spec);
    // A rollback's version is the one it rolled back from.
    let version = match (&report, row.name.as_str()) {
        (Some(r), "rollback") if !r.version.is_empty() => r.version.clone(),
        _ => spec.map(|s| s.artifact.version.clone()).unwrap_or_default(),
    };
    DeploymentView {
        id: row.id.clone(),
        kind: row.name.clone(),
        status: row.status,
        application: spec.map(|s| s.application.clone()).unwrap_or_default(),
        environment: spec.map(|s| s.environment.clone()).unwrap_or_default(),
        production: spec.is_some_and(|s| s.production),
        version,
        plugin: spec.map(|s| s.plugin.clone()).unwrap_or_default(),
        dry_run: inputs.as_ref().is_some_and(|i| i.dry_run),
        operator: inputs.map(|i| i.operator).unwrap_or_default(),
        phase,
        batches: plan.map_or(0, |p| u32::try_from(p.batches.len()).unwrap_or(u32::MAX)),
        targets,
        report,
        pending_commands,
        runs: row.recovery_attempts,
        created_at: row.created_at,
        completed_at: row.completed_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_target_step_names() {
        assert_eq!(parse_step("deploy:b2:web-1"), Some(("deploy", 2, "web-1")));
        assert_eq!(
            parse_step("rollback:b10:a:b"),
            Some(("rollback", 10, "a:b"))
        );
        assert_eq!(parse_step("validate"), None);
        assert_eq!(parse_step("engine.sleep"), None);
    }
}
