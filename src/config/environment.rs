//! One application's environment resolved into the [`EnvSpec`] a deployment runs from, and
//! the checks a descriptor passes before any of its environments can be deployed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use super::values::Artifact;
use super::{
    Config, ConfigError, ConfigErrors, Descriptor, EnvSpec, Strategy, TargetDef, descriptor, error,
    hooks, locate,
};
use crate::moniker::Moniker;

impl Config {
    /// Application names with a usable descriptor.
    pub fn applications(&self) -> BTreeSet<&str> {
        self.descriptors
            .iter()
            .map(|d| d.spec.application.as_str())
            .collect()
    }

    /// Resolves `application`'s `environment` into an [`EnvSpec`].
    pub fn environment(
        &self,
        application: &str,
        environment: &str,
    ) -> Result<EnvSpec, ConfigErrors> {
        let owners: Vec<&Descriptor> = self
            .descriptors
            .iter()
            .filter(|d| d.spec.application == application)
            .collect();
        let d = match owners.as_slice() {
            [] => return Err(self.unknown_application(application)),
            [one] => *one,
            [first, ..] => {
                let files: Vec<String> = owners
                    .iter()
                    .map(|d| d.file.display().to_string())
                    .collect();
                return Err(ConfigError::file(
                    &first.file,
                    format!(
                        "application `{application}` is described by {}",
                        files.join(" and ")
                    ),
                )
                .with_hint("keep one descriptor per application")
                .into());
            }
        };
        let Some(env) = d.spec.environments.get(environment) else {
            let names: Vec<&str> = d.spec.environments.keys().map(String::as_str).collect();
            let guess = error::nearest(environment, names.iter().copied())
                .map(|g| format!("did you mean `{g}`? "))
                .unwrap_or_default();
            return Err(ConfigError::file(
                &d.file,
                format!("application `{application}` has no environment `{environment}`"),
            )
            .with_hint(format!("{guess}environments: {}", names.join(", ")))
            .into());
        };
        Ok(resolve(d, environment, env))
    }

    fn unknown_application(&self, application: &str) -> ConfigErrors {
        // A descriptor that failed to parse may be the one asked for: show its problem.
        let broken: Vec<ConfigError> = self
            .problems
            .iter()
            .filter(|p| {
                p.file
                    .file_stem()
                    .is_some_and(|s| s.to_string_lossy() == application)
            })
            .cloned()
            .collect();
        if !broken.is_empty() {
            return ConfigErrors(broken);
        }
        let apps = self.applications();
        let guess = error::nearest(application, apps.iter().copied())
            .map(|g| format!("did you mean `{g}`? "))
            .unwrap_or_default();
        let list = if apps.is_empty() {
            format!("no descriptors in {}", self.apps_dir.display())
        } else {
            format!(
                "applications: {}",
                apps.into_iter().collect::<Vec<_>>().join(", ")
            )
        };
        ConfigError::file(&self.apps_dir, format!("no application `{application}`"))
            .with_hint(format!("{guess}{list}"))
            .into()
    }
}

fn is_production_name(env: &str) -> bool {
    env == "prod" || env == "production" || env.starts_with("prod/") || env.starts_with("prod-")
}

/// Where environment `name`'s key is written: bare, or quoted (a name with a space must be).
fn env_at(text: &str, name: &str) -> Option<(usize, usize)> {
    [
        format!("{name}:"),
        format!("\"{}\":", name.replace('\\', "\\\\").replace('"', "\\\"")),
        format!("'{}':", name.replace('\'', "''")),
    ]
    .iter()
    .find_map(|k| locate(text, k, 0))
}

pub(super) fn check_descriptor(d: &Descriptor) -> Vec<ConfigError> {
    let mut problems = Vec::new();
    let at = |needle: &str, nth: usize| locate(&d.text, needle, nth);
    // The application names every target's moniker: said once, at its key.
    if let Some(why) = Moniker::check_part(&d.spec.application, "application name") {
        problems.push(ConfigError {
            file: d.file.clone(),
            position: at("application:", 0),
            message: format!("application: {why}"),
            hint: None,
        });
        return problems;
    }
    let deploys = std::iter::once(("deploy", &d.spec.deploy)).chain(
        d.spec
            .environments
            .values()
            .filter_map(|e| e.deploy.as_ref().map(|dep| ("deploy", dep))),
    );
    for (key, deploy) in deploys {
        let message = match (&deploy.plugin, deploy.plugins.is_empty()) {
            (None, true) => {
                "deploy: name the plugin (`plugin: NAME`), or plugins to choose from \
                             (`plugins: [a, b]`)"
            }
            (Some(_), false) => {
                "deploy: `plugin:` and `plugins:` both given: name one plugin, \
                                 or the list to choose from"
            }
            _ => continue,
        };
        problems.push(ConfigError {
            file: d.file.clone(),
            position: at(&format!("{key}:"), 0),
            message: message.into(),
            hint: None,
        });
        return problems;
    }
    for (env_name, env) in &d.spec.environments {
        let resolved = resolve(d, env_name, env);
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for t in &env.targets {
            let n = seen.entry(t.name.as_str()).or_insert(0);
            *n += 1;
            if *n == 2 {
                problems.push(ConfigError {
                    file: d.file.clone(),
                    position: at(&format!("name: {}", t.name), 1),
                    message: format!(
                        "environments.{env_name}: target `{}` appears more than once",
                        t.name
                    ),
                    hint: Some("target names are unique within an environment".into()),
                });
            }
            if let Err(e) = resolved.moniker(&TargetDef {
                name: t.name.clone(),
                host: String::new(),
                labels: BTreeMap::new(),
            }) {
                let env_key = env_at(&d.text, env_name);
                let position = if e.to_string().contains("namespace") {
                    env_key
                } else {
                    at(&t.name, 0).or(env_key)
                };
                problems.push(ConfigError {
                    file: d.file.clone(),
                    position,
                    message: format!("environments.{env_name}: {e}"),
                    hint: None,
                });
            }
        }
        if env.targets.is_empty() {
            problems.push(ConfigError {
                file: d.file.clone(),
                position: env_at(&d.text, env_name),
                message: format!("environments.{env_name} has no targets"),
                hint: None,
            });
        }
        if matches!(resolved.strategy, Strategy::Canary(_))
            && let Some(h) = resolved
                .hooks
                .iter()
                .find(|h| h.events.iter().any(|e| e.per_target()))
        {
            problems.push(ConfigError {
                file: d.file.clone(),
                position: at(&format!("name: {}", h.name), 0).or(env_at(&d.text, env_name)),
                message: format!(
                    "environments.{env_name}: hook `{}` runs per target (pre-target or \
                     post-target), which a canary does not do: its candidate is judged by the \
                     canary's analysis steps",
                    h.name
                ),
                hint: Some(
                    "give it to a rolling or all-at-once environment, or check the candidate \
                     with an `analysis:` step"
                        .into(),
                ),
            });
        }
        if resolved.parallelism == 0 {
            problems.push(ConfigError {
                file: d.file.clone(),
                position: at("parallelism:", 0),
                message: format!("environments.{env_name}: parallelism must be at least 1"),
                hint: None,
            });
        }
    }
    problems
}

fn resolve(d: &Descriptor, env_name: &str, env: &descriptor::EnvironmentSpec) -> EnvSpec {
    let top = d.spec.settings();
    let mine = env.settings();
    let deploy = env.deploy.as_ref().unwrap_or(&d.spec.deploy);
    let a = &d.spec.artifact;
    let o = env.artifact.clone().unwrap_or_default();
    let pick = |own: &Option<String>, base: &Option<String>| own.clone().or_else(|| base.clone());
    let artifact = Artifact {
        kind: pick(&o.kind, &a.kind).unwrap_or_default(),
        name: pick(&o.name, &a.name).unwrap_or_else(|| d.spec.application.clone()),
        version: o
            .version
            .as_ref()
            .or(a.version.as_ref())
            .map(|v| v.0.clone())
            .unwrap_or_default(),
        uri: pick(&o.uri, &a.uri).unwrap_or_default(),
        sha256: pick(&o.sha256, &a.sha256).unwrap_or_default(),
    };
    let timeouts = mine.timeouts.or(top.timeouts).unwrap_or_default();
    let backoff = mine.backoff.or(top.backoff).unwrap_or_default();
    let params = deploy
        .params
        .as_ref()
        .and_then(|p| serde_json::to_value(&p.0).ok())
        .unwrap_or_else(|| serde_json::Value::Object(serde_json::Map::new()));
    EnvSpec {
        application: d.spec.application.clone(),
        environment: env_name.to_owned(),
        production: env
            .production
            .unwrap_or_else(|| is_production_name(env_name)),
        descriptor: d.file.clone(),
        workdir: {
            let dir = d.file.parent().filter(|p| !p.as_os_str().is_empty());
            std::path::absolute(dir.unwrap_or(Path::new("."))).unwrap_or_default()
        },
        digests: pick(&o.sha256s, &a.sha256s).map(|f| {
            let dir = d.file.parent().filter(|p| !p.as_os_str().is_empty());
            std::path::absolute(dir.unwrap_or(Path::new(".")).join(f)).unwrap_or_default()
        }),
        artifact,
        // With `plugins:`, the first until a deployment chooses (`deploy::select`); its
        // monikers keep the first's name whichever is chosen.
        plugin: deploy.plugin_names().first().cloned().unwrap_or_default(),
        plugins: if deploy.plugins.is_empty() {
            Vec::new()
        } else {
            deploy.plugin_names()
        },
        chosen: None,
        resource_type: deploy
            .resource_type
            .clone()
            .unwrap_or_else(|| deploy.plugin_names().first().cloned().unwrap_or_default()),
        params,
        secrets: deploy.secrets.iter().map(|s| s.0.clone()).collect(),
        strategy: mine.strategy.or(top.strategy).unwrap_or(Strategy::All),
        parallelism: mine.parallelism.or(top.parallelism).unwrap_or(1),
        max_retries: mine.max_retries.or(top.max_retries).unwrap_or(2),
        step_timeout: timeouts.step.map_or(Duration::from_secs(30 * 60), |d| d.0),
        validate_timeout: timeouts.validate.map_or(Duration::from_secs(30), |d| d.0),
        backoff_base: backoff.base.map_or(Duration::from_secs(1), |d| d.0),
        backoff_max: backoff.max.map_or(Duration::from_secs(60), |d| d.0),
        atomic: mine.atomic.or(top.atomic).unwrap_or(false),
        targets: env
            .targets
            .iter()
            .map(|t| TargetDef {
                name: t.name.clone(),
                host: t.host.clone().unwrap_or_else(|| t.name.clone()),
                labels: t.labels.clone(),
            })
            .collect(),
        hooks: hooks::merged(
            d.spec.hooks.as_ref().map_or(&[], |h| h.0.as_slice()),
            env.hooks.as_ref().map(|h| h.0.as_slice()),
        ),
    }
}
