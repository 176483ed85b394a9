//! `manent inbox`: what waits for an operator — decisions, drift, locks, set-aside notifications.

use std::path::Path;

use serde::Serialize;

use super::print_locks;
use crate::cli::exit;
use crate::cli::output::{self, Out, existing_store};

#[derive(Serialize)]
struct Inbox {
    items: Vec<crate::deploy::inbox::Item>,
    locks: Vec<crate::deploy::records::Lock>,
}

/// `manent inbox`: what waits on a human, most urgent first, and the locks in force.
pub async fn inbox(config_path: &Path, json: bool, out: &mut Out) -> u8 {
    let Some(config) = output::load_settings(config_path, out) else {
        return exit::BAD_INPUT;
    };
    let store = match existing_store(&config).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            if json {
                out.json(&Inbox {
                    items: Vec::new(),
                    locks: Vec::new(),
                });
            } else {
                out.line("nothing waits on you (no deployments yet)");
            }
            return exit::OK;
        }
        Err(e) => return output::db_error(&output::database_shown(&config), &e, out),
    };
    let now = crate::sys::now_ms();
    let loaded =
        match crate::deploy::view::summaries(&*store, crate::deploy::view::Listed::Recent(500))
            .await
        {
            Ok(v) => store.locks(now).await.map(|l| (v, l)),
            Err(e) => Err(e),
        };
    let (views, locks) = match loaded {
        Ok(x) => x,
        Err(e) => return output::db_error(&output::database_shown(&config), &e, out),
    };
    // What no engine runs is said so (a live canary unwatched), not read from its records.
    let engine_running = output::engine_running(&config, &*store).await;
    let views: Vec<_> = views
        .into_iter()
        .map(|v| v.honest(engine_running))
        .collect();
    let mut items = crate::deploy::inbox::items(&views, &locks, now);
    match store.parked(100).await {
        Ok(p) => items.extend(crate::deploy::inbox::parked_items(&p)),
        Err(e) => return output::db_error(&output::database_shown(&config), &e, out),
    }
    if json {
        out.json(&Inbox { items, locks });
        return exit::OK;
    }
    if items.is_empty() {
        out.line("nothing waits on you");
    }
    for i in &items {
        out.line(format!(
            "{:<7} {:<22} {:<26} {}",
            i.waiting.as_str(),
            i.subject,
            i.deployment.as_deref().unwrap_or("-"),
            i.what
        ));
        out.line(format!("{:<7} {:<22} {:<26} → {}", "", "", "", i.verbs));
    }
    print_locks(&locks, out);
    exit::OK
}
