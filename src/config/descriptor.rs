//! Application descriptors (`apps/<app>.yml`): the application, its artifact, how it deploys,
//! and its environments with their targets. Environments may override any deploy setting.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::strategy::{Strategy, StrategySpec};
use super::values::{Dur, ParamsSpec, PluginRef, SecretName, VersionSpec};

/// A descriptor as written.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DescriptorFile {
    /// The application (the monikers' module).
    #[schemars(length(min = 1))]
    pub application: String,
    /// What is deployed; `--version` overrides the version.
    #[serde(default)]
    pub artifact: ArtifactSpec,
    /// How it is deployed.
    pub deploy: DeploySpec,
    /// `all`, `rolling`, or `rolling: {batch_size: N, interval: 30s}`.
    #[serde(default)]
    pub strategy: Option<StrategySpec>,
    /// Targets deployed at once within a batch (when the plugin declares parallel targets).
    #[serde(default)]
    pub parallelism: Option<u32>,
    /// Retries of a failed target step.
    #[serde(default)]
    pub max_retries: Option<u32>,
    /// Time limits.
    #[serde(default)]
    pub timeouts: Option<Timeouts>,
    /// Retry backoff.
    #[serde(default)]
    pub backoff: Option<Backoff>,
    /// Roll back every target touched if the deploy fails.
    #[serde(default)]
    pub atomic: Option<bool>,
    /// Environments by name (the monikers' namespace, e.g. `prod` or `prod/eu1`).
    pub environments: BTreeMap<String, EnvironmentSpec>,
    /// Lifecycle hooks.
    #[serde(default)]
    pub hooks: Option<super::hooks::HooksSpec>,
}

/// `artifact:`; an environment's block overrides field by field.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArtifactSpec {
    /// Kind (`tarball`, `directory`, `container`, …).
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    /// Name (default: the application).
    #[serde(default)]
    pub name: Option<String>,
    /// Version (letters, digits and `. _ + ~ -`).
    #[serde(default)]
    pub version: Option<VersionSpec>,
    /// Location.
    #[serde(default)]
    pub uri: Option<String>,
    /// Expected digest.
    #[serde(default)]
    pub sha256: Option<String>,
    /// A file of expected digests by version (`HEX  VERSION` a line, `#` comments), relative to
    /// the descriptor: what a `--version` other than `version:` is checked against.
    #[serde(default)]
    pub sha256s: Option<String>,
}

/// `deploy:`
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeploySpec {
    /// The plugin, by its name in `manent.yml` (or a built-in's).
    #[serde(default)]
    pub plugin: Option<PluginRef>,
    /// Or plugins to choose from, per deployment: the first whose `Supports` says it can
    /// deploy the artifact (an error or no answer counts as "no").
    #[serde(default)]
    pub plugins: Vec<PluginRef>,
    /// Parameters for the plugin (`DeployRequest.params_json`).
    #[serde(default)]
    pub params: Option<ParamsSpec>,
    /// Resource type in monikers (default: the plugin's name).
    #[serde(rename = "type", default)]
    pub resource_type: Option<String>,
    /// Secrets the plugin may read for this application (others are refused).
    #[serde(default)]
    pub secrets: Vec<SecretName>,
}

impl DeploySpec {
    /// The plugins it may deploy with, in the order they are asked.
    pub fn plugin_names(&self) -> Vec<String> {
        self.plugin
            .iter()
            .chain(&self.plugins)
            .map(|p| p.0.clone())
            .collect()
    }
}

/// The settings both levels carry; an environment's win over the descriptor's.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Batching.
    pub strategy: Option<Strategy>,
    /// Parallel targets.
    pub parallelism: Option<u32>,
    /// Retries.
    pub max_retries: Option<u32>,
    /// Time limits.
    pub timeouts: Option<Timeouts>,
    /// Backoff.
    pub backoff: Option<Backoff>,
    /// Atomic.
    pub atomic: Option<bool>,
}

macro_rules! settings_of {
    ($t:ty) => {
        impl $t {
            /// The deploy settings written at this level.
            pub fn settings(&self) -> Settings {
                Settings {
                    strategy: self.strategy.clone().map(|s| s.0),
                    parallelism: self.parallelism,
                    max_retries: self.max_retries,
                    timeouts: self.timeouts,
                    backoff: self.backoff,
                    atomic: self.atomic,
                }
            }
        }
    };
}

settings_of!(DescriptorFile);
settings_of!(EnvironmentSpec);

/// `timeouts:`
#[derive(Debug, Clone, Copy, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    /// Limit on one attempt of one target (default 30m).
    #[serde(default)]
    pub step: Option<Dur>,
    /// Limit on the plugin's Validate (default 30s).
    #[serde(default)]
    pub validate: Option<Dur>,
}

/// `backoff:`
#[derive(Debug, Clone, Copy, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Backoff {
    /// First retry delay (default 1s).
    #[serde(default)]
    pub base: Option<Dur>,
    /// Longest retry delay (default 60s).
    #[serde(default)]
    pub max: Option<Dur>,
}

/// One environment.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentSpec {
    /// Production: the console shows it in the danger colour and asks more before acting.
    /// Default: true for `prod`, `production` and names starting with `prod/` or `prod-`.
    #[serde(default)]
    pub production: Option<bool>,
    /// The targets, in order.
    pub targets: Vec<TargetSpec>,
    /// Overrides `deploy:`.
    #[serde(default)]
    pub deploy: Option<DeploySpec>,
    /// Overrides `artifact:` fields.
    #[serde(default)]
    pub artifact: Option<ArtifactSpec>,
    /// `all`, `rolling`, or `rolling: {batch_size: N, interval: 30s}`.
    #[serde(default)]
    pub strategy: Option<StrategySpec>,
    /// Targets deployed at once within a batch (when the plugin declares parallel targets).
    #[serde(default)]
    pub parallelism: Option<u32>,
    /// Retries of a failed target step.
    #[serde(default)]
    pub max_retries: Option<u32>,
    /// Time limits.
    #[serde(default)]
    pub timeouts: Option<Timeouts>,
    /// Retry backoff.
    #[serde(default)]
    pub backoff: Option<Backoff>,
    /// Roll back every target touched if the deploy fails.
    #[serde(default)]
    pub atomic: Option<bool>,
    /// Hooks: one of the same name replaces the application's; others are added.
    #[serde(default)]
    pub hooks: Option<super::hooks::HooksSpec>,
}

/// One target.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    /// Name, unique in the environment (the moniker's last part).
    pub name: String,
    /// Address for the plugin (default: the name).
    #[serde(default)]
    pub host: Option<String>,
    /// Free labels passed to the plugin.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}
