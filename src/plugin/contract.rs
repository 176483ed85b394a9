//! The `Deployer` contract and its optional capabilities, as design/plugin-contract.md has them. Rust has no
//! interface assertions, so a deployer exposes each optional trait through an accessor that
//! returns `Some(self)` when it implements it; `Capabilities` is what Configure announces.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;

use super::error::PluginError;
use super::logger::Logger;
use super::types::{
    Artifact, DeployResult, Release, Request, RoutingState, TargetRelease, Traffic, TrafficWindow,
};

/// What every plugin implements.
#[async_trait]
pub trait Deployer: Send + Sync {
    /// Checks a request before anything is touched; an error fails the deploy permanently.
    /// Called without secrets, with a 30 s limit.
    async fn validate(&self, req: &Request) -> Result<(), PluginError>;

    /// Deploys the request's artifact to its targets.
    async fn deploy(&self, req: &Request) -> Result<DeployResult, PluginError>;

    /// Whether this plugin can deploy `artifact` (the selection policy asks).
    async fn supports(&self, _artifact: &Artifact) -> Result<bool, PluginError> {
        Ok(true)
    }

    /// `Some` when the plugin implements [`DryRunner`].
    fn dry_runner(&self) -> Option<&dyn DryRunner> {
        None
    }

    /// `Some` when the plugin implements [`ReleaseInspector`].
    fn release_inspector(&self) -> Option<&dyn ReleaseInspector> {
        None
    }

    /// `Some` when the plugin implements [`Rollbacker`].
    fn rollbacker(&self) -> Option<&dyn Rollbacker> {
        None
    }

    /// `Some` when the plugin implements [`SlotDeployer`].
    fn slot_deployer(&self) -> Option<&dyn SlotDeployer> {
        None
    }

    /// `Some` when the plugin implements [`TrafficRouter`].
    fn traffic_router(&self) -> Option<&dyn TrafficRouter> {
        None
    }

    /// `Some` when the plugin implements [`TesterRouter`].
    fn tester_router(&self) -> Option<&dyn TesterRouter> {
        None
    }

    /// `Some` when the plugin implements [`SlotScaler`].
    fn slot_scaler(&self) -> Option<&dyn SlotScaler> {
        None
    }

    /// `Some` when the plugin implements [`ParallelDeployer`].
    fn parallel_deployer(&self) -> Option<&dyn ParallelDeployer> {
        None
    }
}

/// Plans without changing anything.
#[async_trait]
pub trait DryRunner: Send + Sync {
    /// What `deploy` would do.
    async fn dry_run(&self, req: &Request) -> Result<DeployResult, PluginError>;
}

/// Tells what is live on each target.
#[async_trait]
pub trait ReleaseInspector: Send + Sync {
    /// The live release per target, in request order.
    async fn current_release(&self, req: &Request) -> Result<Vec<TargetRelease>, PluginError>;
}

/// Switches targets back to an earlier release.
#[async_trait]
pub trait Rollbacker: Send + Sync {
    /// Makes `to` live on the request's targets.
    async fn rollback(&self, req: &Request, to: &Release) -> Result<DeployResult, PluginError>;
}

/// Stable and candidate slots for percentage rollouts.
#[async_trait]
pub trait SlotDeployer: Send + Sync {
    /// Prepares the slots; the state returned travels in every later call (`Request.traffic`).
    async fn prepare_slots(&self, req: &Request) -> Result<serde_json::Value, PluginError>;
    /// Deploys the candidate slot.
    async fn deploy_candidate(&self, req: &Request) -> Result<DeployResult, PluginError>;
    /// Makes the candidate the stable release.
    async fn promote_candidate(&self, req: &Request) -> Result<(), PluginError>;
    /// Abandons the candidate.
    async fn revert_candidate(&self, req: &Request) -> Result<(), PluginError>;
    /// Removes the previous stable release after a promotion.
    async fn retire_previous(&self, req: &Request) -> Result<(), PluginError>;
}

/// Splits traffic between stable and candidate.
#[async_trait]
pub trait TrafficRouter: Send + Sync {
    /// Sends `weight` percent of traffic to the candidate.
    async fn set_candidate_weight(&self, req: &Request, weight: u32) -> Result<(), PluginError>;
    /// The candidate's weight as the running router serves it.
    async fn candidate_weight(&self, req: &Request) -> Result<u32, PluginError>;
    /// What the running router serves — weights, tester routing, pool membership — read back
    /// from the router itself, never from the plugin's own notes; a configuration manent did
    /// not write is reported as foreign. Optional: the engine falls back to `candidate_weight`.
    async fn routing_state(&self, _req: &Request) -> Result<RoutingState, PluginError> {
        Err(PluginError::Unimplemented(
            "this router does not implement RoutingState".into(),
        ))
    }
    /// The traffic the router itself observed per slot over `window` (requests, responses by
    /// class, latency quantiles) — never from before the candidate release began serving — for
    /// a canary's router analysis. Optional.
    async fn traffic(
        &self,
        _req: &Request,
        _window: TrafficWindow,
    ) -> Result<Traffic, PluginError> {
        Err(PluginError::Unimplemented(
            "this router does not report the traffic it observes (Traffic)".into(),
        ))
    }
}

/// Routes testers (by header or cookie) to the candidate.
#[async_trait]
pub trait TesterRouter: Send + Sync {
    /// Routes testers; returns how (e.g. the header to send).
    async fn route_testers(&self, req: &Request) -> Result<BTreeMap<String, String>, PluginError>;
}

/// Scales the candidate.
#[async_trait]
pub trait SlotScaler: Send + Sync {
    /// Scales the candidate to `percent` of the stable capacity.
    async fn scale_candidate(&self, req: &Request, percent: u32) -> Result<(), PluginError>;
}

/// Declares that targets of one request may be worked on at once.
pub trait ParallelDeployer: Send + Sync {
    /// True when the plugin handles `Request.parallelism` > 1.
    fn parallel_targets(&self) -> bool;
}

/// A plugin factory: the plugin's options from `manent.yml` and a logger in, a deployer out. The
/// same factory is compiled in as a built-in or served as an external binary.
pub type Factory = fn(&serde_json::Value, Logger) -> Result<Arc<dyn Deployer>, PluginError>;

/// An optional capability, as Configure names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Capability {
    /// `dry_run`
    DryRun,
    /// `current_release`
    CurrentRelease,
    /// `rollback`
    Rollback,
    /// `slots`
    Slots,
    /// `traffic_router`
    TrafficRouter,
    /// `testers`
    Testers,
    /// `scale`
    Scale,
    /// `parallel_targets`
    ParallelTargets,
}

impl Capability {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::DryRun => "dry_run",
            Capability::CurrentRelease => "current_release",
            Capability::Rollback => "rollback",
            Capability::Slots => "slots",
            Capability::TrafficRouter => "traffic_router",
            Capability::Testers => "testers",
            Capability::Scale => "scale",
            Capability::ParallelTargets => "parallel_targets",
        }
    }
}

/// `dry_run, rollback, …`
impl std::fmt::Display for Capabilities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, c) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(c)?;
        }
        Ok(())
    }
}

/// The capabilities a deployer has.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Capabilities(pub BTreeSet<String>);

impl Capabilities {
    /// What `d` implements.
    pub fn of(d: &dyn Deployer) -> Self {
        let mut set = BTreeSet::new();
        let mut add = |yes: bool, c: Capability| {
            if yes {
                set.insert(c.as_str().to_owned());
            }
        };
        add(d.dry_runner().is_some(), Capability::DryRun);
        add(d.release_inspector().is_some(), Capability::CurrentRelease);
        add(d.rollbacker().is_some(), Capability::Rollback);
        add(d.slot_deployer().is_some(), Capability::Slots);
        add(d.traffic_router().is_some(), Capability::TrafficRouter);
        add(d.tester_router().is_some(), Capability::Testers);
        add(d.slot_scaler().is_some(), Capability::Scale);
        add(
            d.parallel_deployer().is_some_and(|p| p.parallel_targets()),
            Capability::ParallelTargets,
        );
        Capabilities(set)
    }

    /// True when `c` is present.
    pub fn has(&self, c: Capability) -> bool {
        self.0.contains(c.as_str())
    }

    /// True when the plugin can roll back (it can both inspect and switch releases).
    pub fn can_roll_back(&self) -> bool {
        self.has(Capability::Rollback) && self.has(Capability::CurrentRelease)
    }
}
