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
