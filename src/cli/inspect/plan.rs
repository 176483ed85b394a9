//! `manent plan`: the batches, hooks and changes a deploy would make, without making them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::cli::output::{self, Out, existing_store, load_config};
use crate::cli::{PlanArgs, exit};
use crate::deploy::plan;
use crate::deploy::releases;

#[derive(Serialize)]
struct PlanOut<'a> {
    application: &'a str,
    environment: &'a str,
    production: bool,
    version: &'a str,
    plugin: &'a str,
    /// Why `plugin` was chosen from `deploy.plugins`.
    #[serde(skip_serializing_if = "Option::is_none")]
    chosen: Option<&'a str>,
    strategy: &'a crate::config::Strategy,
    parallelism: u32,
    batches: Vec<BatchOut>,
    hooks: &'a [crate::deploy::plan::PlannedHook],
}

#[derive(Serialize)]
struct BatchOut {
    index: u32,
    targets: Vec<TargetOut>,
}

#[derive(Serialize)]
struct TargetOut {
    moniker: String,
    host: String,
    live: Option<String>,
}

/// `manent plan`
pub async fn plan(config_path: &Path, a: &PlanArgs, out: &mut Out) -> u8 {
    let Some(config) = load_config(config_path, a.target.file.as_deref(), out) else {
        return exit::BAD_INPUT;
    };
    let Some((spec, p)) = output::resolve(
        &config,
        &a.target.app,
        &a.target.env,
        (a.version.as_deref(), a.uri.as_deref()),
        out,
    ) else {
        return exit::BAD_INPUT;
    };
    // With `deploy.plugins`, the plugin a deploy now would choose, and why.
    let spec = if spec.plugins.is_empty() {
        spec
    } else {
        let registry = crate::plugin::Registry::new(
            &config,
            std::sync::Arc::new(crate::plugin::logger::Discard),
        );
        let chosen = crate::deploy::select::choose(&registry, &spec).await;
        registry.shutdown().await;
        match chosen {
            Ok(s) => s,
            Err(e) => {
                out.error(e);
                return exit::BAD_INPUT;
            }
        }
    };
    let live = match existing_store(&config).await {
        Ok(Some(store)) => match store.releases(&spec.subject()).await {
            Ok(rows) => releases::live_versions(rows),
            Err(e) => return output::db_error(&output::database_shown(&config), &e, out),
        },
        Ok(None) => BTreeMap::new(),
        Err(e) => return output::db_error(&output::database_shown(&config), &e, out),
    };
    let batches = p
        .batches
        .iter()
        .map(|b| BatchOut {
            index: b.index,
            targets: b
                .targets
                .iter()
                .map(|t| TargetOut {
                    moniker: t.moniker.to_string(),
                    host: t.host.clone(),
                    live: live.get(&t.moniker.to_string()).cloned(),
                })
                .collect(),
        })
        .collect::<Vec<_>>();
    if a.json.json {
        out.json(&PlanOut {
            application: &spec.application,
            environment: &spec.environment,
            production: spec.production,
            version: &spec.artifact.version,
            plugin: &spec.plugin,
            chosen: spec.chosen.as_deref(),
            strategy: &spec.strategy,
            parallelism: spec.parallelism,
            batches,
            hooks: &p.hooks,
        });
        return exit::OK;
    }
    let strategy = spec.strategy.describe();
    out.line(format!(
        "{} {} → {}{} ({}): {}, {strategy}, plugin {}, parallelism {}{}",
        spec.application,
        if spec.artifact.version.is_empty() {
            "(no version)"
        } else {
            &spec.artifact.version
        },
        spec.environment,
        if spec.production { " [production]" } else { "" },
        spec.descriptor.display(),
        plan::size(p.len(), p.batches.len()),
        spec.plugin,
        spec.parallelism,
        if spec.atomic { ", atomic" } else { "" },
    ));
    for b in &batches {
        out.line(format!("batch {}", b.index));
        for t in &b.targets {
            let change = match &t.live {
                Some(v) if *v == spec.artifact.version => format!("{v} (unchanged)"),
                Some(v) => format!("{v} → {}", spec.artifact.version),
                None => format!("new → {}", spec.artifact.version),
            };
            out.line(format!("  {:<40} {:<20} {change}", t.moniker, t.host));
        }
    }
    if let Some(why) = &spec.chosen {
        out.line(format!(
            "plugin {} chosen from deploy.plugins: {why}",
            spec.plugin
        ));
    }
    print_hooks_plan(&p, out);
    exit::OK
}

/// The hooks at each event, in the order they run (weight, kind, name).
fn print_hooks_plan(p: &crate::deploy::plan::Plan, out: &mut Out) {
    if p.hooks.is_empty() {
        return;
    }
    out.line("hooks, in the order they run at each event:");
    for event in crate::config::hooks::EVENTS {
        let at: Vec<_> = p.hooks_at(event).collect();
        if at.is_empty() {
            continue;
        }
        if event.per_target() {
            out.line(format!("  {event} (on each target, inside its step)"));
        } else {
            out.line(format!("  {event}"));
        }
        for (i, h) in at.iter().enumerate() {
            out.line(format!(
                "    {}. {:<24} {:<8} weight {:<6} {}",
                i + 1,
                h.name,
                h.kind,
                h.weight,
                h.moniker
            ));
        }
    }
}
