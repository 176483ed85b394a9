//! `manent history`: an application's deployments and releases, newest first.

use std::path::Path;

use serde::Serialize;

use crate::cli::output::{self, Out, existing_store, load_config, print_errors};
use crate::cli::{HistoryArgs, exit};
use crate::deploy::records::StoreError;
use crate::deploy::records::{JournalEntry, ReleaseRecord};
use crate::deploy::releases;
use crate::deploy::view::{self, DeploymentView};

#[derive(Serialize)]
struct HistoryOut {
    subject: String,
    deployments: Vec<DeploymentView>,
    releases: Vec<ReleaseRecord>,
    journal: Vec<JournalEntry>,
}

/// `manent history APP ENV`
pub async fn history(config_path: &Path, a: &HistoryArgs, out: &mut Out) -> u8 {
    // The descriptors are read only when the database has nothing of this subject, to say
    // whether it is configured at all (a typo) or has not been deployed yet.
    let Some(config) = output::load_settings(config_path, out) else {
        return exit::BAD_INPUT;
    };
    let unknown = |out: &mut Out| {
        let Some(full) = load_config(config_path, None, out) else {
            return Some(exit::BAD_INPUT);
        };
        if let Err(e) = full.environment(&a.app, &a.env) {
            print_errors(&e, out);
            return Some(exit::BAD_INPUT);
        }
        None
    };
    let subject = format!("{}/{}", a.app, a.env);
    let store = match existing_store(&config).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            if let Some(code) = unknown(out) {
                return code;
            }
            out.line(format!("no deployments of {subject} yet"));
            return exit::OK;
        }
        Err(e) => return output::db_error(&output::database_shown(&config), &e, out),
    };
    let read = async {
        let deployments = view::summaries(&*store, view::Listed::Of(&subject, a.limit)).await?;
        let releases = store.releases(&subject).await?;
        let journal = store
            .journal_entries(Some(&subject), None, u32::MAX)
            .await?;
        if deployments.is_empty() {
            output::verify(&*store).await?;
        }
        Ok::<_, StoreError>((deployments, releases, journal))
    };
    let (deployments, releases, journal) = match read.await {
        Ok(t) => t,
        Err(e) => return output::db_error(&output::database_shown(&config), &e, out),
    };
    if deployments.is_empty()
        && releases.is_empty()
        && let Some(code) = unknown(out)
    {
        return code;
    }
    if a.json.json {
        out.json(&HistoryOut {
            subject,
            deployments,
            releases,
            journal,
        });
        return exit::OK;
    }
    let engine_running = output::engine_running(&config, &*store).await;
    if deployments.is_empty() {
        out.line(format!("no deployments of {subject} yet"));
        return exit::OK;
    }
    out.line(format!("deployments of {subject}, newest first:"));
    for v in &deployments {
        out.line(format!(
            "  {}  {:<8} {:<16} {:<16} by {:<16} {}",
            output::time(v.created_at),
            v.kind,
            v.version,
            v.state_with(engine_running),
            v.operator,
            v.id
        ));
        let ran: Vec<String> = v
            .hooks
            .iter()
            .filter(|h| h.state != view::HookState::Pending)
            .map(|h| format!("{} {} {}", h.event, h.name, h.state.as_str()))
            .collect();
        if !ran.is_empty() {
            out.line(format!("      hooks: {}", ran.join(", ")));
        }
    }
    out.line("live releases:");
    for (m, l) in releases::live(releases) {
        let Some(r) = l.current else { continue };
        // Made live again by a rollback: since that rollback ended, and said so.
        let restored = l.restored_by.as_deref().and_then(|by| {
            deployments
                .iter()
                .find(|v| v.id == by)
                .map(|v| (by, v.completed_at.unwrap_or(v.created_at)))
        });
        match restored {
            Some((by, at)) => out.line(format!(
                "  {m:<40} {:<10} since {} (rolled back to by {by}; first {})",
                r.version,
                output::time(at),
                r.deployment_id
            )),
            None => out.line(format!(
                "  {m:<40} {:<10} since {} ({})",
                r.version,
                output::time(r.recorded_at),
                r.deployment_id
            )),
        }
    }
    out.line("operator actions, newest first:");
    for j in &journal {
        out.line(format!(
            "  {}  {:<9} {:<24} {}{}{}{}",
            output::time(j.at),
            j.action,
            j.workflow_id.as_deref().unwrap_or("-"),
            j.operator,
            j.client
                .as_deref()
                .map(|c| format!(" from {c}"))
                .unwrap_or_default(),
            j.detail
                .as_deref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default(),
            j.reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ));
    }
    exit::OK
}
