//! manent: a deploy engine with a terminal console.
//!
//! Deploys are durable workflows on SQLite or a shared PostgreSQL ([`workflow`]); the work is
//! done by plugins ([`plugin`]) that implement the `Deployer` contract, compiled in or spoken to
//! over go-plugin's gRPC protocol. [`engine`] is the handle the console and the headless
//! commands drive. Layers point one way (`layers.rs` checks it).

pub mod cli;
pub mod config;
#[cfg(feature = "tui")]
pub mod console;
pub mod demo;
pub mod deploy;
pub mod duration_ms;
pub mod engine;
pub mod failpoint;
pub mod format;
pub mod moniker;
pub mod operator;
pub mod plugin;
pub mod redact;
pub mod sys;
pub mod telemetry;
pub mod workflow;

#[cfg(test)]
mod layers;
