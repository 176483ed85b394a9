//! `manent validate`: manent.yml and every descriptor, their secrets, and what each plugin
//! says of its configuration.

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use crate::cli::exit;
use crate::cli::output::{Out, print_errors};
use crate::config::{ConfigError, EnvSpec};
use crate::deploy::plan;
use crate::plugin::logger::Discard;
use crate::plugin::{Registry, Request, Secrets};

#[derive(Serialize)]
struct Validation {
    ok: bool,
    applications: usize,
    environments: usize,
    targets: usize,
    problems: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

/// What validate can tell of the secret sources: a `file:` that is not a readable regular file
/// is an error; an unset `env:` variable a warning (the engine that deploys may have it), which
/// becomes an error when a plugin asks for it. A value it can read that is shorter than 8
/// characters is refused (`engine.allow_short_secrets` lets a test fixture have one). No value
/// is shown.
fn check_secrets(config: &crate::config::Config) -> (Vec<ConfigError>, Vec<String>) {
    use crate::plugin::secrets::SHORT;
    let (mut problems, mut warnings) = (Vec::new(), Vec::new());
    let text = config.manent_text().unwrap_or_default();
    let at = |needle: &str| crate::config::locate_text(&text, needle);
    for (name, source) in &config.secrets {
        let value = match source {
            crate::config::SecretRef::Env(var) => match std::env::var(var) {
                Ok(v) => Some(v),
                Err(_) => {
                    warnings.push(format!(
                        "{}: secret `{name}`: the environment variable {var} is not set here; a \
                         deploy that reads it fails unless the engine's environment has it",
                        config.file.display()
                    ));
                    None
                }
            },
            crate::config::SecretRef::File(path) => {
                let read = crate::sys::files::read_regular(Path::new(path), 1 << 20)
                    .map_err(|e| e.to_string())
                    .and_then(|b| String::from_utf8(b).map_err(|_| "not valid UTF-8".to_owned()));
                match read {
                    Ok(v) => Some(v.trim_end_matches(['\n', '\r']).to_owned()),
                    Err(why) => {
                        problems.push(ConfigError::located(
                            &config.file,
                            at(&format!("file:{path}")),
                            format!("secrets.{name}: {path} cannot be read: {why}"),
                        ));
                        None
                    }
                }
            }
            crate::config::SecretRef::Literal(v) => Some(v.clone()),
        };
        if let Some(v) = value
            && v.chars().count() < SHORT
            && !config.engine.allow_short_secrets
        {
            problems.push(ConfigError {
                file: config.file.clone(),
                position: at(&format!("{name}:")),
                message: format!(
                    "secrets.{name}: its value is {} characters; a secret needs at least {SHORT} \
                     (a short one is guessed, and redacting it would hide ordinary words)",
                    v.chars().count()
                ),
                hint: Some(
                    "use a longer secret; a test fixture may set `engine: {allow_short_secrets: \
                     true}`"
                        .into(),
                ),
            });
        }
    }
    (problems, warnings)
}

/// `${secret:NAME}` in exec's `env:` (manent.yml) and `params.env` (the descriptor) is read
/// through the deploy's secrets: each NAME must be declared and listed under `deploy.secrets`.
fn check_exec_secret_refs(
    config: &crate::config::Config,
    registry: &Registry,
    spec: &EnvSpec,
    d: &crate::config::Descriptor,
) -> Vec<ConfigError> {
    let is_exec = registry
        .decl(&spec.plugin)
        .and_then(|decl| decl.builtin.as_deref())
        == Some("exec");
    if !is_exec {
        return Vec::new();
    }
    let env_of = |v: Option<&serde_json::Value>| -> Vec<(String, String)> {
        v.and_then(|v| v.get("env"))
            .and_then(|e| e.as_object())
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    };
    let options = registry.decl(&spec.plugin).map(|decl| decl.options.clone());
    let mut problems = Vec::new();
    let sources = [
        (
            "params.env",
            env_of(Some(&spec.params)),
            &d.file,
            d.text.clone(),
        ),
        (
            "plugins.exec.env",
            env_of(options.as_ref()),
            &config.file,
            config.manent_text().unwrap_or_default(),
        ),
    ];
    for (where_, env, file, text) in sources {
        for (k, v) in env {
            let names = match crate::config::values::secret_refs(&v) {
                Ok(n) => n,
                Err(e) => {
                    problems.push(ConfigError::located(
                        file,
                        crate::config::locate_text(&text, "${secret:"),
                        format!("{where_}.{k}: {e}"),
                    ));
                    continue;
                }
            };
            for name in names {
                let problem = if !config.secrets.contains_key(&name) {
                    Some((
                        format!("{where_}.{k} reads ${{secret:{name}}}, which is not declared"),
                        format!(
                            "declare it under `secrets:` in manent.yml, e.g. `{name}: env:{}`",
                            name.to_uppercase()
                        ),
                    ))
                } else if !spec.secrets.contains(&name) {
                    Some((
                        format!(
                            "{where_}.{k} reads ${{secret:{name}}}, which {} does not list \
                             under deploy.secrets (environment {})",
                            d.file.display(),
                            spec.environment
                        ),
                        format!(
                            "add `secrets: [{name}]` under `deploy:` in {}",
                            d.file.display()
                        ),
                    ))
                } else {
                    None
                };
                if let Some((message, hint)) = problem {
                    problems.push(ConfigError {
                        file: file.clone(),
                        position: crate::config::locate_text(&text, &format!("${{secret:{name}}}")),
                        message,
                        hint: Some(hint),
                    });
                }
            }
        }
    }
    problems
}

/// `manent validate`: every file, every environment's plan, and built-in plugins' own checks.
pub async fn validate(config_path: &Path, json: bool, out: &mut Out) -> u8 {
    let config = match crate::config::Config::load(config_path, &crate::plugin::catalog()) {
        Ok(c) => c,
        Err(e) => {
            if json {
                let problems = e.0.iter().map(ToString::to_string).collect();
                out.json(&Validation {
                    ok: false,
                    applications: 0,
                    environments: 0,
                    targets: 0,
                    problems,
                    warnings: Vec::new(),
                });
            } else {
                print_errors(&e, out);
            }
            return exit::BAD_INPUT;
        }
    };
    let mut problems: Vec<ConfigError> = config.problems.clone();
    let (secret_problems, warnings) = check_secrets(&config);
    problems.extend(secret_problems);
    let registry = Registry::new(&config, Arc::new(Discard));
    let (mut envs, mut targets) = (0, 0);
    for d in &config.descriptors {
        for env in d.spec.environments.keys() {
            let spec = match config.environment(&d.spec.application, env) {
                Ok(s) => s,
                Err(e) => {
                    problems.extend(e.0);
                    continue;
                }
            };
            envs += 1;
            targets += spec.targets.len();
            problems.extend(check_exec_secret_refs(&config, &registry, &spec, d));
            if let Err(e) = check_with_plugin(&registry, &spec).await {
                let at = config.locate_in(&d.file, &e, "params:");
                problems.push(ConfigError::located(
                    &d.file,
                    at,
                    format!("environments.{env}: {e}"),
                ));
            }
        }
    }
    // One broken file can surface once per environment; say it once.
    let mut seen = std::collections::BTreeSet::new();
    problems.retain(|p| seen.insert(p.to_string()));
    let ok = problems.is_empty();
    if json {
        out.json(&Validation {
            ok,
            applications: config.applications().len(),
            environments: envs,
            targets,
            problems: problems.iter().map(ToString::to_string).collect(),
            warnings,
        });
    } else {
        for w in &warnings {
            out.note(format!("warning: {w}"));
        }
        for p in &problems {
            out.note(format!("error: {p}"));
        }
        if ok {
            out.line(format!(
                "ok: {} ({} applications, {envs} environments, {targets} targets, {} plugins)",
                config.file.display(),
                config.applications().len(),
                registry.names().count()
            ));
        }
    }
    if ok { exit::OK } else { exit::BAD_INPUT }
}

/// Plans `spec` and, for built-in plugins, asks the plugin to validate it (no secrets, no
/// side effects). External plugins are never started by validation.
async fn check_with_plugin(registry: &Registry, spec: &EnvSpec) -> Result<(), String> {
    let plan = plan::compute(spec)?;
    let builtin = registry
        .decl(&spec.plugin)
        .is_some_and(|d| d.builtin.is_some());
    if !builtin {
        return Ok(());
    }
    let handle = registry
        .get(&spec.plugin)
        .await
        .map_err(|e| e.to_string())?;
    let targets = plan.request_targets();
    let req: Request = crate::deploy::steps::request(
        spec,
        "validate",
        crate::deploy::steps::Call {
            targets,
            parallelism: spec.parallelism,
            secrets: Secrets::none(),
            step: None,
            processes: &crate::plugin::Processes::none(),
        },
    );
    handle
        .deployer
        .validate(&req)
        .await
        .map_err(|e| e.to_string())
}
