//! The request and result types of the plugin contract: what manent sends a `Deployer` and what
//! it gets back. They mirror `proto/manent/plugin/v1/deployer.proto`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::error::PluginError;
use super::secrets::Secrets;
use crate::moniker::Moniker;

pub use crate::config::Artifact;

/// One target of a deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// Address the plugin acts on (host name, directory, cluster).
    pub host: String,
    /// Stable identity.
    pub moniker: Moniker,
    /// Free labels from the descriptor.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

impl Target {
    /// The target's name (the moniker's last part).
    pub fn name(&self) -> &str {
        self.moniker.name()
    }
}

/// How a target ended up after a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetStatus {
    /// The new release is live.
    Deployed,
    /// The call failed on this target.
    Failed,
    /// Never started (an earlier target failed, or the deploy stopped).
    Skipped,
    /// Already at the requested release: nothing to do.
    Unchanged,
    /// The previous release is live again.
    RolledBack,
}

impl TargetStatus {
    /// The wire and display name.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetStatus::Deployed => "deployed",
            TargetStatus::Failed => "failed",
            TargetStatus::Skipped => "skipped",
            TargetStatus::Unchanged => "unchanged",
            TargetStatus::RolledBack => "rolled_back",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "deployed" => TargetStatus::Deployed,
            "failed" => TargetStatus::Failed,
            "skipped" => TargetStatus::Skipped,
            "unchanged" => TargetStatus::Unchanged,
            "rolled_back" => TargetStatus::RolledBack,
            _ => return None,
        })
    }
}

/// One target's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetResult {
    /// The target's host.
    pub host: String,
    /// What happened.
    pub status: TargetStatus,
    /// A line for the operator.
    #[serde(default)]
    pub message: String,
    /// Time spent on the target.
    #[serde(default)]
    pub duration_ms: u64,
}

impl TargetResult {
    /// A result with a status and no message.
    pub fn new(status: TargetStatus) -> Self {
        TargetResult {
            host: String::new(),
            status,
            message: String::new(),
            duration_ms: 0,
        }
    }

    /// Sets the message.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }
}

/// A release a target can be switched to (rollback's destination).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Release {
    /// The version.
    pub version: String,
    /// The artifact it was made from.
    pub artifact: Artifact,
    /// The deployment that made it live.
    #[serde(default)]
    pub deployment_id: String,
}

/// What a target reports as live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetRelease {
    /// The target's host.
    pub host: String,
    /// The live version; empty when the plugin cannot tell.
    pub version: String,
}

/// Everything a call is about. One request per call; the secrets in it work only during the
/// call.
#[derive(Debug, Clone)]
pub struct Request {
    /// `dep-…`
    pub deployment_id: String,
    /// Application (the moniker's module).
    pub application: String,
    /// Environment (the moniker's namespace).
    pub environment: String,
    /// What to deploy.
    pub artifact: Artifact,
    /// The targets of this call, in plan order.
    pub targets: Vec<Target>,
    /// `deploy.params` from the descriptor.
    pub params: serde_json::Value,
    /// Secrets, readable only while the call runs.
    pub secrets: Secrets,
    /// Targets the plugin may work on at once (1 unless it declares `parallel_targets`).
    pub parallelism: u32,
    /// Canary state from `PrepareSlots`, carried in every later call.
    pub traffic: Option<serde_json::Value>,
    /// Stable across retries and restarts of the step: `{deployment}/{step}`.
    pub idempotency_key: String,
    /// Attempt number of the step, from 1.
    pub attempt: u32,
    /// Where the engine records the processes a built-in starts for this call (an external
    /// plugin's side records nothing: its host tracks the plugin's own process).
    pub processes: super::processes::Processes,
}

/// A Deploy, DryRun or Rollback call's result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeployResult {
    /// The plugin's name.
    pub plugin: String,
    /// One result per target, in request order.
    pub targets: Vec<TargetResult>,
    /// The release now live (a version), if the plugin reports one.
    #[serde(default)]
    pub release: String,
}

impl DeployResult {
    /// What [`for_each_target`](crate::plugin::for_each_target) or
    /// [`for_all_targets`](crate::plugin::for_all_targets) returned, as a call's result: the
    /// first error if a target failed, else every target's result with `release` live.
    pub fn of(
        plugin: &str,
        release: &str,
        (targets, err): (Vec<TargetResult>, Option<PluginError>),
    ) -> Result<DeployResult, PluginError> {
        match err {
            Some(e) => Err(e),
            None => Ok(DeployResult {
                plugin: plugin.to_owned(),
                targets,
                release: release.to_owned(),
            }),
        }
    }
}
