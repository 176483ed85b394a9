//! The integration suites, in one test binary so that `cargo test` links the library once and
//! runs every suite's tests on the same threads (a slow suite no longer leaves a core idle while
//! the next binary waits). Each suite is a module: `cargo test --test it crash::` runs one.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

mod support;

mod attribution;
mod canary;
mod cli;
mod config_mutation;
#[cfg(feature = "tui")]
mod console;
#[cfg(feature = "tui")]
mod console_e2e;
mod crash;
mod deploy;
mod docs;
mod external;
mod go_sdk;
mod hooks;
mod hostile;
mod hosts;
mod operations;
mod packaging;
mod plugin_kit;
mod postgres;
mod python_sdk;
mod records;
mod routers;
mod schema;
mod sdk_plugins;
mod traffic;
mod workflow_engine;
