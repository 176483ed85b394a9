//! The deploy workflows (design/architecture.md "Workflows"): deploy (plan → validate → batches → releases, guided
//! failure or an atomic undo on failure), rollback to the previous release, dry-run, canary and
//! test. They are durable workflows ([`flows`]) over one run ([`run`]): every plugin call is a
//! step, every target its own step with its own retries, and the operator's commands
//! ([`command`]) are typed.

pub mod artifact;
pub mod canary_status;
pub mod command;
pub mod flows;
pub mod hooks;
pub mod ids;
pub mod inbox;
pub mod lineage;
pub mod plan;
mod plugin_errors;
pub mod probe;
pub mod records;
pub mod releases;
pub mod run;
pub mod select;
pub mod state;
pub mod steps;
pub mod submit;
pub mod view;
pub mod vouch;

use std::sync::Arc;

use futures::FutureExt;
use serde::{Deserialize, Serialize};

use self::records::Db;
use self::releases::Transitions;
use self::state::{Ending, Kind, TargetState};
use crate::config::EnvSpec;
use crate::plugin::{Logger, Registry};
use crate::workflow::{Interrupt, RunOutcome, WorkflowDef};

/// What the deploy workflows need while they run.
pub struct DeployEnv {
    /// Plugins by name.
    pub registry: Arc<Registry>,
    /// The system database (release history).
    pub db: Arc<dyn Db>,
    /// The engine's own log.
    pub log: Logger,
    /// Where the processes started for deployments are recorded.
    pub processes: crate::plugin::Processes,
    /// This engine's own `manent.yml` when it shares its database with a group: a deployment
    /// then runs only what that configuration says ([`vouch`]).
    pub own_config: Option<std::path::PathBuf>,
}

impl DeployEnv {
    /// The environment's plugin (started on first use).
    pub async fn plugin(
        &self,
        spec: &EnvSpec,
    ) -> Result<Arc<crate::plugin::PluginHandle>, crate::workflow::StepError> {
        Ok(self.registry.get(&spec.plugin).await?)
    }
}

impl std::fmt::Debug for DeployEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeployEnv").finish_non_exhaustive()
    }
}

/// Definition version of both (design/durable-workflows.md B.8): bump it when durable steps change order or names.
/// 2: phases with the commands they take, guided failure, operator aborts.
pub const VERSION: u32 = 2;

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
    /// Deploy every target, even one another deployment recorded done on this version
    /// (`--force`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
    /// A canary run only to take the candidate that canary `revert_of` left in traffic (it
    /// was abandoned) out of every pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revert_of: Option<String>,
    /// A test run against a canary's candidate: that canary's tester routing (`header` →
    /// `X-Canary: 1`), which the test hooks send to reach it.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub testers: std::collections::BTreeMap<String, String>,
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
    /// Where it ended.
    pub status: TargetState,
    /// Attempts made.
    pub attempts: u32,
    /// Last message.
    pub message: String,
    /// Time on the target.
    pub duration_ms: u64,
}

/// How many of a deployment's targets are done, of how many: a list's progress without the
/// targets themselves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetCounts {
    /// Done (deployed, unchanged, rolled back, planned, candidate or reverted).
    pub done: usize,
    /// Every target.
    pub total: usize,
}

/// A finished deployment's outcome (the workflow's output or error document).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Deploy, dry-run or rollback.
    pub kind: Kind,
    /// How it ended.
    #[serde(rename = "result")]
    pub ending: Ending,
    /// Version deployed (a rollback: the version it went back to).
    pub version: String,
    /// Versions moved, for a rollback or an undo (`36 targets: 2.4.0 → 2.3.0`).
    #[serde(default, skip_serializing_if = "Transitions::is_empty")]
    pub transitions: Transitions,
    /// One line for the operator.
    pub message: String,
    /// Per target.
    pub targets: Vec<TargetReport>,
    /// Targets rolled back after a failure (`atomic`) or an abort.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rolled_back: Vec<TargetReport>,
    /// Targets an operator left out.
    #[serde(default)]
    pub skipped: u32,
}

impl Report {
    /// A `kind` deployment's report before anything happened: failed until it is not.
    pub fn new(kind: Kind, version: &str) -> Report {
        Report {
            kind,
            ending: Ending::Failed,
            version: version.to_owned(),
            transitions: Transitions::default(),
            message: String::new(),
            targets: Vec::new(),
            rolled_back: Vec::new(),
            skipped: 0,
        }
    }

    /// True when it ended as it meant to.
    pub fn ok(&self) -> bool {
        match self.kind {
            Kind::Rollback => self.ending == Ending::RolledBack,
            Kind::Test => self.ending == Ending::Passed,
            _ => matches!(
                self.ending,
                Ending::Deployed | Ending::Planned | Ending::Validated
            ),
        }
    }

    /// The outcome of a deployment whose stored inputs cannot be read.
    fn bad_inputs(kind: Kind, e: &serde_json::Error) -> RunOutcome {
        let mut r = Report::new(kind, "");
        r.message = format!("the deployment's stored inputs do not decode: {e}");
        r.outcome()
    }

    fn outcome(self) -> RunOutcome {
        let ok = self.ok();
        let mut v = serde_json::to_value(&self).unwrap_or(serde_json::Value::Null);
        // Beside the lines, how many there are and how many are done: a list reads the head
        // alone (`WorkflowQuery::heads`), and shows `98/100` without the 100 lines.
        if let serde_json::Value::Object(m) = &mut v
            && let Ok(counts) = serde_json::to_value(TargetCounts {
                done: self.targets.iter().filter(|t| t.status.is_done()).count(),
                total: self.targets.len(),
            })
        {
            m.insert("target_counts".into(), counts);
        }
        if ok {
            RunOutcome::Success(v)
        } else {
            RunOutcome::Failure(v)
        }
    }
}

/// A workflow's end from its body: the report, or the interrupt that stops it unrecorded.
fn outcome(r: Result<Report, Interrupt>) -> Result<RunOutcome, Interrupt> {
    r.map(Report::outcome)
}

/// The workflow definitions to register with the runtime.
pub fn definitions(env: Arc<DeployEnv>) -> Vec<WorkflowDef> {
    let deploy_env = env.clone();
    let canary_env = env.clone();
    let test_env = env.clone();
    vec![
        WorkflowDef {
            name: Kind::Test.workflow().into(),
            version: VERSION,
            run: Arc::new(move |ctx, inputs| {
                flows::test::run(test_env.clone(), ctx, inputs).boxed()
            }),
        },
        WorkflowDef {
            name: Kind::Canary.workflow().into(),
            version: VERSION,
            run: Arc::new(move |ctx, inputs| {
                flows::canary::run(canary_env.clone(), ctx, inputs).boxed()
            }),
        },
        WorkflowDef {
            name: Kind::Deploy.workflow().into(),
            version: VERSION,
            run: Arc::new(move |ctx, inputs| {
                flows::deploy::run(deploy_env.clone(), ctx, inputs).boxed()
            }),
        },
        WorkflowDef {
            name: Kind::Rollback.workflow().into(),
            version: VERSION,
            run: Arc::new(move |ctx, inputs| {
                flows::rollback::run(env.clone(), ctx, inputs).boxed()
            }),
        },
    ]
}
