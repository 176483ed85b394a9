//! `manent notify list` and `manent notify retry`: the notifications set aside because their
//! receiver refused them (an HTTP 4xx) or they failed too often — each with why — and sending
//! them again. Later notifications never wait behind a parked one.

use std::path::Path;

use super::exit;
use super::output::{self, Out, database_shown, load_config};

/// `manent notify list`
pub async fn list(config_path: &Path, json: bool, out: &mut Out) -> u8 {
    let Some(config) = load_config(config_path, None, out) else {
        return exit::BAD_INPUT;
    };
    let store = match output::existing_store(&config).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            if json {
                out.json(&Vec::<()>::new());
            } else {
                out.line("no notification is parked (no deployments yet)");
            }
            return exit::OK;
        }
        Err(e) => return output::db_error(&database_shown(&config), &e, out),
    };
    let parked = match store.parked(1000).await {
        Ok(p) => p,
        Err(e) => return output::db_error(&database_shown(&config), &e, out),
    };
    if json {
        out.json(&parked);
        return exit::OK;
    }
    if parked.is_empty() {
        out.line("no notification is parked");
        return exit::OK;
    }
    out.line(format!(
        "{:<6} {:<12} {:<14} {:<26} {:<20} {}",
        "ID", "RECEIVER", "EVENT", "DEPLOYMENT", "PARKED", "WHY"
    ));
    for p in &parked {
        out.line(format!(
            "{:<6} {:<12} {:<14} {:<26} {:<20} {} ({} attempt(s))",
            p.row.id,
            p.row.receiver,
            p.row.event,
            p.row.workflow_id,
            output::time(p.parked_at),
            p.error,
            p.row.attempts
        ));
    }
    out.line("`manent notify retry ID` (or `--all`) sends it again");
    exit::OK
}

/// `manent notify retry ID|--all`
pub async fn retry(config_path: &Path, id: Option<i64>, out: &mut Out) -> u8 {
    let Some(config) = load_config(config_path, None, out) else {
        return exit::BAD_INPUT;
    };
    let store = match output::open_store(&config).await {
        Ok(s) => s,
        Err(e) => return output::db_error(&database_shown(&config), &e, out),
    };
    match store.unpark(id, crate::sys::now_ms()).await {
        Ok(0) => {
            out.error(match id {
                Some(id) => format!("no parked notification {id} (see `manent notify list`)"),
                None => "no notification is parked".to_owned(),
            });
            exit::BAD_INPUT
        }
        Ok(n) => {
            out.line(format!(
                "{n} notification(s) go to their receiver again (an engine sends them)"
            ));
            exit::OK
        }
        Err(e) => output::db_error(&database_shown(&config), &e, out),
    }
}
