//! `manent plugin test` (the conformance kit) and `manent plugin new` (a plugin project to
//! start from, in Rust, Go or Python).

mod new;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

pub use self::new::new;
use super::exit;
use super::output::Out;
use crate::config::values::Dur;
use crate::config::{Artifact, ConfigError};
use crate::plugin::external::kit::{self, KitSpec, Outcome};

/// The kit's `--config`: the request it sends, and how the plugin is started.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct KitFile {
    /// The plugin's options, as `manent.yml` would give them.
    #[serde(default)]
    options: Option<serde_json::Value>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    artifact: Option<Artifact>,
    #[serde(default)]
    targets: Vec<KitTarget>,
    #[serde(default)]
    params: Option<serde_json::Value>,
    #[serde(default)]
    invalid: Option<serde_json::Value>,
    #[serde(default)]
    slow: Option<serde_json::Value>,
    #[serde(default)]
    not_idempotent: Option<String>,
    #[serde(default)]
    start_timeout: Option<Dur>,
    #[serde(default)]
    call_timeout: Option<Dur>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KitTarget {
    name: String,
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

fn read_kit_file(path: &Path) -> Result<KitFile, String> {
    // As any configuration file: a regular file (a FIFO would block the kit for ever), at most
    // 4 MiB, UTF-8.
    let (text, meta) = crate::config::read(path).map_err(|e| e.to_string())?;
    crate::config::trust::check(path, &meta).map_err(|e| e.to_string())?;
    yaml_serde::from_str(&text).map_err(|e| {
        let mut why = ConfigError::from_yaml_in(path, &text, &e).to_string();
        if why.contains("unknown field `plugins`") || why.contains("unknown field `database`") {
            why.push_str(
                "\n  this looks like manent.yml: `plugin test --config FILE` takes the kit's file \
                 (`manent plugin test --help` shows its keys)",
            );
        }
        why
    })
}

fn spec(a: &crate::cli::PluginTestArgs, file: Option<&Path>) -> Result<KitSpec, String> {
    let mut spec = KitSpec::new(a.binary.clone());
    if let Some(path) = file {
        let f = read_kit_file(path)?;
        if let Some(o) = f.options {
            spec.options = o;
        }
        spec.args = f.args;
        spec.env = f.env;
        spec.invalid = f.invalid;
        spec.slow = f.slow;
        spec.not_idempotent = f.not_idempotent;
        if let Some(artifact) = f.artifact {
            if artifact.version.is_empty() {
                return Err(format!(
                    "{}: the artifact needs a version (the kit deploys it, then 2.0.0-conformance)",
                    path.display()
                ));
            }
            spec.artifact = artifact;
        }
        if !f.targets.is_empty() {
            spec.targets = f
                .targets
                .into_iter()
                .map(|t| {
                    let host = t.host.clone().unwrap_or_else(|| t.name.clone());
                    kit::target(&t.name, &host, t.labels).ok_or_else(|| {
                        format!(
                            "{}: target name {:?}: letters, digits, `.`, `_` and `-` only",
                            path.display(),
                            t.name
                        )
                    })
                })
                .collect::<Result<_, _>>()?;
        }
        if let Some(p) = f.params {
            spec.params = p;
        }
        if let Some(d) = f.start_timeout {
            spec.start_timeout = d.0;
        }
        if let Some(d) = f.call_timeout {
            spec.call_timeout = d.0;
        }
    }
    if let Some(d) = a.start_timeout {
        spec.start_timeout = d;
    }
    if let Some(d) = a.call_timeout {
        spec.call_timeout = d;
    }
    Ok(spec)
}

/// `manent plugin test BINARY`: every check, one line each; exit 0 when none failed, 1 when
/// one did, 2 on bad input.
pub async fn test(a: &crate::cli::PluginTestArgs, file: Option<&Path>, out: &mut Out) -> u8 {
    let spec = match spec(a, file) {
        Ok(s) => s,
        Err(e) => {
            out.error(e);
            return exit::BAD_INPUT;
        }
    };
    if !spec.command.is_file() {
        out.error(format!(
            "{}: no such file (give the path of the plugin's binary)",
            spec.command.display()
        ));
        return exit::BAD_INPUT;
    }
    if !a.json.json {
        out.note(format!(
            "testing {} against manent's plugin contract…",
            spec.command.display()
        ));
    }
    let report = kit::run(spec).await;
    let failed = report.count(Outcome::Fail);
    if a.json.json {
        out.json(&serde_json::json!({
            "plugin": report.plugin,
            "passed": report.count(Outcome::Pass),
            "failed": failed,
            "skipped": report.count(Outcome::Skip),
            "checks": report.checks,
        }));
    } else {
        let width = report
            .checks
            .iter()
            .map(|c| c.name.len())
            .max()
            .unwrap_or(0);
        for c in &report.checks {
            let mark = match c.outcome {
                Outcome::Pass => "pass",
                Outcome::Fail => "FAIL",
                Outcome::Skip => "skip",
            };
            out.line(format!(
                "{mark}  {:width$}  {}",
                c.name,
                super::output::printable(&c.detail)
            ));
        }
        out.line(format!(
            "{} passed, {failed} failed, {} skipped",
            report.count(Outcome::Pass),
            report.count(Outcome::Skip)
        ));
    }
    if failed == 0 { exit::OK } else { exit::FAILED }
}
