//! `manent plugins`: the plugins manent knows, where each comes from, and what it announces.

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use crate::cli::exit;
use crate::cli::output::{Out, load_config};
use crate::plugin::Registry;
use crate::plugin::logger::Discard;

#[derive(Serialize)]
struct PluginRow {
    name: String,
    kind: &'static str,
    path: String,
    sha256: String,
    capabilities: Option<Vec<String>>,
    problem: Option<String>,
}

/// `manent plugins [--probe]`: every plugin, where it comes from, whether its binary matches
/// its pin, and its capabilities (external ones only when `--probe` starts them).
pub async fn plugins(config_path: &Path, a: &crate::cli::PluginsArgs, out: &mut Out) -> u8 {
    let Some(config) = load_config(config_path, None, out) else {
        return exit::BAD_INPUT;
    };
    let registry = Registry::new(&config, Arc::new(Discard));
    let mut rows = Vec::new();
    // Declared and built in; found on the search path; and what descriptors name — a plugin
    // a deploy would use is listed (and probed) even if nothing declares it.
    let mut names: Vec<String> = registry.names().map(str::to_owned).collect();
    names.extend(crate::plugin::external::activation::discoverable(
        config.plugin_dir.as_deref(),
    ));
    for d in &config.descriptors {
        names.extend(d.spec.deploy.plugin_names());
        for env in d.spec.environments.values() {
            if let Some(deploy) = &env.deploy {
                names.extend(deploy.plugin_names());
            }
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    names.retain(|n| seen.insert(n.clone()));
    for name in names {
        let row = match registry.resolve(&name) {
            Some(crate::plugin::registry::Resolved::Builtin(b)) => {
                let caps = registry
                    .get(&name)
                    .await
                    .map(|h| h.capabilities.0.iter().cloned().collect());
                PluginRow {
                    name,
                    kind: "builtin",
                    path: format!("builtin:{b}"),
                    sha256: "-".into(),
                    problem: caps.as_ref().err().map(ToString::to_string),
                    capabilities: caps.ok(),
                }
            }
            Some(
                crate::plugin::registry::Resolved::External(spec)
                | crate::plugin::registry::Resolved::Discovered(spec),
            ) => {
                let pin = crate::plugin::external::activation::check(
                    &name,
                    &spec.command,
                    spec.sha256.as_deref(),
                );
                let (sha256, mut problem) = match &pin {
                    Ok(crate::plugin::external::activation::Pin::Verified) => {
                        ("verified".to_owned(), None)
                    }
                    Ok(crate::plugin::external::activation::Pin::Unpinned) => {
                        let sum = crate::plugin::external::activation::sha256_file(&spec.command)
                            .unwrap_or_else(|e| e.to_string());
                        (format!("not pinned ({sum})"), None)
                    }
                    Err(e) => ("-".to_owned(), Some(e.to_string())),
                };
                let mut capabilities = None;
                if a.probe && problem.is_none() {
                    match registry.get(&name).await {
                        Ok(h) => capabilities = Some(h.capabilities.0.iter().cloned().collect()),
                        Err(e) => problem = Some(e.to_string()),
                    }
                }
                PluginRow {
                    name,
                    kind: "external",
                    path: spec.command.display().to_string(),
                    sha256,
                    capabilities,
                    problem,
                }
            }
            None => PluginRow {
                problem: Some(format!(
                    "no plugin `{name}`: a descriptor uses it, but manent.yml does not declare \
                     it and no `manent-plugin-{name}` is on PATH or in plugin_dir"
                )),
                name,
                kind: "missing",
                path: "-".into(),
                sha256: "-".into(),
                capabilities: None,
            },
        };
        rows.push(row);
    }
    registry.shutdown().await;
    let ok = rows.iter().all(|r| r.problem.is_none());
    if a.json.json {
        out.json(&rows);
    } else {
        out.line(format!(
            "{:<16} {:<9} {:<50} {:<12} {}",
            "NAME", "KIND", "PATH", "SHA256", "CAPABILITIES"
        ));
        for r in &rows {
            let caps = match &r.capabilities {
                Some(c) => c.join(", "),
                None if r.kind == "external" => "(start it with --probe to ask)".into(),
                None => "-".into(),
            };
            let sha = if r.sha256.starts_with("not pinned") {
                "not pinned"
            } else {
                r.sha256.as_str()
            };
            out.line(format!(
                "{:<16} {:<9} {:<50} {:<12} {caps}",
                r.name, r.kind, r.path, sha
            ));
            if let Some(p) = &r.problem {
                out.line(format!("  error: {p}"));
            }
            // The sum to copy, on its own line: the table keeps its width.
            if let Some(sum) = r
                .sha256
                .strip_prefix("not pinned (")
                .and_then(|s| s.strip_suffix(')'))
            {
                out.line(format!(
                    "  pin it: sha256: {sum}  (under plugins.{}.external in manent.yml)",
                    r.name
                ));
            }
        }
    }
    if ok { exit::OK } else { exit::BAD_INPUT }
}
