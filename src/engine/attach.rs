//! The one front door to the engine: it runs here when the database is free, or this process
//! attaches to the engine that holds it (and reads and writes the database beside it). The
//! headless commands and the console both open the engine this way, then only present what
//! it does.

use std::sync::Arc;

use super::{Engine, EngineError};
use crate::config::Config;
use crate::deploy::records::{self, Db};
use crate::workflow::LeaseError;

/// How the engine was opened.
pub enum Opened {
    /// It runs in this process.
    Here(Box<Engine>),
    /// Another engine holds the database (or is starting on it): its store, opened beside it,
    /// and who holds it.
    Attached {
        /// The database.
        store: Arc<dyn Db>,
        /// Who holds it.
        holder: LeaseError,
    },
}

/// Starts the engine here, or attaches to the one that holds the database; any other failure
/// to start is the error.
pub async fn open_or_attach(config: &Config) -> Result<Opened, EngineError> {
    match Engine::start(config).await {
        Ok(e) => Ok(Opened::Here(Box::new(e))),
        Err(EngineError::Lease(
            holder @ (LeaseError::Held { .. } | LeaseError::Starting { .. }),
        )) => Ok(Opened::Attached {
            store: records::open_configured(config, false).await?,
            holder,
        }),
        Err(e) => Err(e),
    }
}

/// Another engine, as a deployment's owner (on a shared database).
pub use crate::workflow::store::EngineRow as Owner;

/// Who holds the database, in words: `the engine of pid 42 on bastion-1`.
pub fn holder_named(holder: &LeaseError) -> String {
    match holder {
        LeaseError::Held { pid, host, .. } => format!("the engine of pid {pid} on {host}"),
        LeaseError::Starting { .. } => "an engine that is starting".to_owned(),
        other => other.to_string(),
    }
}

/// Whether an engine holds the SQLite database at `db` now (the one attached to may have gone).
pub fn is_held(db: &std::path::Path) -> bool {
    crate::workflow::Lease::is_held(db)
}

/// The engine other than this one that owns deployment `id` (last ran it), on a shared
/// database; only a live one when `alive`.
pub async fn owner_elsewhere(
    store: &dyn Db,
    id: &str,
    config: &Config,
    alive: bool,
) -> Option<Owner> {
    config.postgres.as_ref()?;
    let owner = store.workflow(id).await.ok()??.executor_id?;
    if owner == config.engine.executor_id {
        return None;
    }
    let lease = config.engine.lease_ms();
    store
        .engines()
        .await
        .ok()?
        .into_iter()
        .find(|e| e.executor_id == owner && (!alive || e.alive(lease)))
}
