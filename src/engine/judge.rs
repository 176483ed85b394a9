//! A live canary always has a judge. While its candidate is in a pool, an engine judges it
//! (background analysis) and watches its router while it waits at a gate; an engine about to
//! go away — a console quitting or hung up, a command that finished, a SIGTERM — hands the
//! canaries it ran to a detached `manent worker --until-idle` unless another engine runs, and
//! says so. The worker stays while any canary it runs is live. A canary this engine did not run
//! is not taken up: one an operator left unwatched on purpose stays so until someone acts on it.

use std::path::Path;

use crate::config::Config;
use crate::deploy::records::Db;
use crate::deploy::view::{self, DeploymentView};

/// Whether an engine runs deployments now: on SQLite, the one that holds the file's lock; on a
/// shared PostgreSQL, any engine whose lease is fresh (it takes over what a dead one left).
pub async fn engine_running(config: &Config, store: &dyn Db) -> bool {
    if config.postgres.is_none() {
        return crate::workflow::Lease::is_held(&config.database);
    }
    let lease = config.engine.lease_ms();
    store
        .engines()
        .await
        .is_ok_and(|e| e.iter().any(|e| e.alive(lease)))
}

/// Which of the deployments `ids` are live canaries, as a list reads them.
pub async fn live_canaries(store: &dyn Db, ids: &[String]) -> Vec<DeploymentView> {
    let mut out = Vec::new();
    for id in ids {
        let Ok(Some(row)) = store.workflow(id).await else {
            continue;
        };
        if let Ok(v) = view::summary_of_row(store, row).await
            && v.needs_judge()
        {
            out.push(v);
        }
    }
    out
}

/// `web/prod canary of 2.0.0 at 15%`, for the operator.
pub fn named(v: &DeploymentView) -> String {
    let weight = v.canary.as_ref().map_or(0, |c| c.status.weight);
    format!("{} canary of {} at {weight}%", v.subject(), v.version)
}

/// Live canaries handed to a background worker.
#[derive(Debug, Clone)]
pub struct Handed {
    /// The worker's pid.
    pub pid: u32,
    /// What it judges now ([`named`]).
    pub canaries: Vec<String>,
}

/// After this process's engine stopped: of the deployments it ran (`ran`), the live canaries
/// go to a detached worker. `Ok(None)` when there are none, or another engine runs; `Err` says
/// why a worker could not be started (the canaries are unwatched: the caller says so, and the
/// command that fixes it).
pub async fn hand_over_unwatched(
    config: &Config,
    store: &dyn Db,
    ran: &[String],
) -> Result<Option<Handed>, (Vec<String>, String)> {
    if ran.is_empty() || engine_running(config, store).await {
        return Ok(None);
    }
    let canaries: Vec<String> = live_canaries(store, ran).await.iter().map(named).collect();
    if canaries.is_empty() {
        return Ok(None);
    }
    match spawn_worker(&config.file) {
        Ok(pid) => Ok(Some(Handed { pid, canaries })),
        Err(e) => Err((canaries, e.to_string())),
    }
}

/// What to say of a hand-over, one line (`None`: nothing was live).
pub fn said(handed: &Result<Option<Handed>, (Vec<String>, String)>) -> Option<String> {
    match handed {
        Ok(None) => None,
        Ok(Some(h)) => Some(format!(
            "manent: {} {} live: a background `manent worker` (pid {}) keeps judging {} and \
             watching the router (`manent status` shows it; `manent promote|revert ID` decides)",
            h.canaries.join(", "),
            if h.canaries.len() == 1 { "is" } else { "are" },
            h.pid,
            if h.canaries.len() == 1 { "it" } else { "them" }
        )),
        Err((canaries, why)) => Some(format!(
            "manent: {} UNWATCHED: no background worker could be started ({why}); nothing judges \
             the candidate or watches the router until `manent worker` runs",
            canaries.join(", ")
        )),
    }
}

/// A detached `manent worker --until-idle` on `config_file` (its own process group: a
/// terminal's hangup does not reach it).
pub fn spawn_worker(config_file: &Path) -> std::io::Result<u32> {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let exe = std::env::current_exe()?;
    let child = std::process::Command::new(exe)
        .arg("--config")
        .arg(config_file)
        .arg("worker")
        .arg("--until-idle")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    Ok(child.id())
}
