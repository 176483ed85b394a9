//! The deploy workflows (DESIGN §6): deploy (plan → validate → batches → releases, rolling back
//! on failure when `atomic`), rollback to the previous release, and dry-run. They are durable
//! workflows: every plugin call is a step, every target its own step with its own retries.

mod glue;
pub mod plan;
pub mod rollback;
pub mod steps;
pub mod submit;
pub mod view;
pub mod workflow;

use std::sync::Arc;

use futures::FutureExt;
use serde::{Deserialize, Serialize};

use crate::config::EnvSpec;
use crate::plugin::{Logger, Registry};
use crate::workflow::{RunOutcome, Store, WorkflowDef};

/// What the deploy workflows need while they run.
pub struct DeployEnv {
    /// Plugins by name.
    pub registry: Arc<Registry>,
    /// The system database (release history).
    pub store: Arc<dyn Store>,
    /// The engine's own log.
    pub log: Logger,
}

impl DeployEnv {
    /// The environment's plugin (started on first use).
    pub async fn plugin(
        &self,
        spec: &crate::config::EnvSpec,
    ) -> Result<Arc<crate::plugin::PluginHandle>, crate::workflow::StepError> {
        Ok(self.registry.get(&spec.plugin).await?)
    }
}

impl std::fmt::Debug for DeployEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeployEnv").finish_non_exhaustive()
    }
}

/// Workflow kind of a deploy (and a dry-run).
pub const DEPLOY: &str = "deploy";
/// Workflow kind of a rollback.
pub const ROLLBACK: &str = "rollback";
/// Definition version of both (B.8): bump it when durable steps change order or names.
pub const VERSION: u32 = 1;

/// A deploy's inputs, stored with the workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeployInput {
    /// What to deploy where, resolved when it was started.
    pub spec: EnvSpec,
    /// Only plan and ask the plugin what it would do.
    #[serde(default)]
    pub dry_run: bool,
    /// Who started it.
    pub operator: String,
}

/// A rollback's inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RollbackInput {
    /// Which application and environment.
    pub spec: EnvSpec,
    /// Who started it.
    pub operator: String,
}

/// One target's line in a deployment's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetReport {
    /// Moniker.
    pub moniker: String,
    /// Batch, from 1.
    pub batch: u32,
    /// `deployed`, `failed`, `skipped`, `unchanged`, `rolled_back`.
    pub status: String,
    /// Attempts made.
    pub attempts: u32,
    /// Last message.
    pub message: String,
    /// Time on the target.
    pub duration_ms: u64,
}

/// A finished deployment's outcome (the workflow's output or error document).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// `deploy`, `dry_run` or `rollback`.
    pub kind: String,
    /// `deployed`, `failed`, `rolled_back`, `validated`, `planned`.
    pub result: String,
    /// Version deployed (or rolled back from).
    pub version: String,
    /// One line for the operator.
    pub message: String,
    /// Per target.
    pub targets: Vec<TargetReport>,
    /// Targets rolled back after a failure (`atomic`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rolled_back: Vec<TargetReport>,
}

impl Report {
    /// A `kind` deployment's report before anything happened: failed until it is not.
    fn new(kind: &str, version: &str) -> Report {
        Report {
            kind: kind.to_owned(),
            result: "failed".into(),
            version: version.to_owned(),
            message: String::new(),
            targets: Vec::new(),
            rolled_back: Vec::new(),
        }
    }

    /// The outcome of a deployment whose stored inputs cannot be read.
    fn bad_inputs(kind: &str, e: &serde_json::Error) -> RunOutcome {
        let mut r = Report::new(kind, "");
        r.message = format!("the deployment's stored inputs do not decode: {e}");
        r.outcome(false)
    }

    fn outcome(self, ok: bool) -> RunOutcome {
        let v = serde_json::to_value(&self).unwrap_or(serde_json::Value::Null);
        if ok {
            RunOutcome::Success(v)
        } else {
            RunOutcome::Failure(v)
        }
    }
}

/// The workflow definitions to register with the runtime.
pub fn definitions(env: Arc<DeployEnv>) -> Vec<WorkflowDef> {
    let deploy_env = env.clone();
    vec![
        WorkflowDef {
            name: DEPLOY.into(),
            version: VERSION,
            run: Arc::new(move |ctx, inputs| {
                workflow::run(deploy_env.clone(), ctx, inputs).boxed()
            }),
        },
        WorkflowDef {
            name: ROLLBACK.into(),
            version: VERSION,
            run: Arc::new(move |ctx, inputs| rollback::run(env.clone(), ctx, inputs).boxed()),
        },
    ]
}
