//! The plugin contract (design/plugin-contract.md): the `Deployer` trait and its optional capabilities, the
//! request and result types, `Permanent`, `for_each_target` / `for_all_targets`, `Secrets`,
//! `Factory`, the logger, the registry that hands the engine a plugin by name, and what blue/green
//! router plugins share (`slots`).

pub mod builtin;
pub mod contract;
pub mod error;
pub mod external;
pub mod lines;
pub mod logger;
pub mod processes;
pub mod registry;
pub mod secrets;
pub mod slots;
pub mod targets;
pub mod types;

pub use contract::{
    Capabilities, Capability, Deployer, DryRunner, Factory, ParallelDeployer, ReleaseInspector,
    Rollbacker, SlotDeployer, SlotScaler, TesterRouter, TrafficRouter,
};
pub use error::{Permanent, PluginError};
pub use logger::{Level, LogLine, LogSink, Logger};
pub use processes::Processes;
pub use registry::{PluginHandle, Registry};
pub use secrets::{SecretSource, Secrets};
pub use targets::{OnError, fan_out, for_all_targets, for_each_target};
pub use types::{
    Artifact, DeployResult, Pool, Release, Request, Routing, RoutingState, SlotTraffic, Target,
    TargetRelease, TargetResult, TargetStatus, Traffic, TrafficInterval, TrafficWindow,
};

/// What configuration needs to know of plugins: the built-ins, and where undeclared ones are
/// found.
pub fn catalog() -> crate::config::Catalog {
    crate::config::Catalog {
        builtins: builtin::NAMES,
        discover: external::activation::discover,
    }
}
