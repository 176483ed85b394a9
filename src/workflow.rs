//! The durable workflow engine, on SQLite or a shared PostgreSQL (design/durable-workflows.md,
//! `reference/durable-workflows.md` part B).
//!
//! A workflow is ordinary async Rust whose side effects happen in steps. Each finished step is
//! committed before the workflow moves on; a restart replays the recorded results and runs the
//! first step that has none. Knows nothing of deploys or of the console.

pub mod ctx;
pub mod error;
pub mod heads;
pub mod inputs_key;
pub mod lease;
pub mod postgres;
pub mod retry;
pub mod runtime;
pub mod schema;
pub mod shutdown;
pub mod sqlite;
pub mod store;

pub use ctx::{Observer, Shutdown, StepEvent, StepInfo, WfCtx};
pub use error::{FailureKind, Interrupt, StepError, StepFailure, StepResult, StoreError};
pub use inputs_key::InputsKey;
pub use lease::{Lease, LeaseError};
pub use postgres::PostgresStore;
pub use retry::RetryPolicy;
pub use runtime::{RunOutcome, Runtime, RuntimeEvent, WorkflowDef, WorkflowFn};
pub use schema::Synchronous;
pub use sqlite::SqliteStore;
pub use store::Store;
