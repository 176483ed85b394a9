//! An external plugin seen through the `Deployer` contract: each call goes over gRPC to the
//! shared process (started or restarted as needed), with the call's secrets brokered for its
//! duration. The optional capabilities are those the plugin announced at Configure.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::conn::H2;
use super::host::{Host, Process};
use super::proto::v1::deployer_client::DeployerClient;
use super::proto::{self, v1};
use crate::plugin::contract::{
    Capabilities, Capability, Deployer, DryRunner, ParallelDeployer, ReleaseInspector, Rollbacker,
    SlotDeployer, SlotScaler, TesterRouter, TrafficRouter,
};
use crate::plugin::error::PluginError;
use crate::plugin::types::{
    Artifact, DeployResult, Release, Request, RoutingState, TargetRelease, Traffic, TrafficWindow,
};

/// Validate's limit (30 seconds: design/plugin-contract.md "Calls"), also sent to the plugin as its deadline.
const VALIDATE_TIMEOUT: Duration = Duration::from_secs(30);

/// An external plugin behind the contract.
pub struct Remote {
    host: Arc<Host>,
    capabilities: Capabilities,
}

impl Remote {
    /// A plugin whose process `host` runs, with the capabilities it announced.
    pub fn new(host: Arc<Host>, capabilities: Capabilities) -> Self {
        Remote { host, capabilities }
    }

    fn name(&self) -> &str {
        self.host.name()
    }

    /// Runs one call; a broken connection to a process that died is reported as a crash, which
    /// the step's retry answers by starting the plugin again.
    async fn call<T, F, Fut>(
        &self,
        call: &str,
        req: Option<&Request>,
        f: F,
    ) -> Result<T, PluginError>
    where
        F: FnOnce(DeployerClient<H2>, u32) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let _in_call = req.and_then(|r| self.host.in_call(r));
        let p: Arc<Process> = self.host.process().await?;
        let brokered = match req {
            Some(r) => p.broker.serve(&r.secrets).await?,
            None => None,
        };
        let id = brokered.as_ref().map_or(0, |b| b.id);
        let result = f(p.deployer.clone(), id).await;
        drop(brokered);
        match result {
            Ok(r) => Ok(r.into_inner()),
            Err(status) => match p.crashed().await {
                Some(how)
                    if !matches!(
                        status.code(),
                        tonic::Code::Aborted | tonic::Code::Unimplemented
                    ) =>
                {
                    Err(PluginError::Failed(format!(
                        "plugin {} crashed during {call} ({how}); the step's retry starts it \
                         again. Its last stderr lines:\n    {}",
                        self.name(),
                        p.stderr_tail()
                    )))
                }
                _ => Err(proto::status_to_error(self.name(), call, &status)),
            },
        }
    }
}

#[async_trait]
impl Deployer for Remote {
    async fn validate(&self, req: &Request) -> Result<(), PluginError> {
        // No secrets go with Validate, but its lines are the deployment's all the same.
        let _in_call = self.host.in_call(req);
        self.call("Validate", None, |mut c, _| async move {
            let mut r = tonic::Request::new(proto::request_to_wire(req, 0));
            r.set_timeout(VALIDATE_TIMEOUT);
            c.validate(r).await
        })
        .await
        .map(|_| ())
    }

    async fn deploy(&self, req: &Request) -> Result<DeployResult, PluginError> {
        self.call("Deploy", Some(req), |mut c, id| async move {
            c.deploy(proto::request_to_wire(req, id)).await
        })
        .await
        .map(proto::result_from_wire)
    }

    async fn supports(&self, artifact: &Artifact) -> Result<bool, PluginError> {
        // An error — UNIMPLEMENTED included — is the caller's to count as "not supported"
        // (the selection policy does, and says which).
        let r = self
            .call("Supports", None, |mut c, _| async move {
                c.supports(v1::SupportsRequest {
                    artifact: Some(artifact.into()),
                })
                .await
            })
            .await;
        r.map(|r| r.supported)
    }

    fn dry_runner(&self) -> Option<&dyn DryRunner> {
        self.capabilities
            .has(Capability::DryRun)
            .then_some(self as &dyn DryRunner)
    }

    fn release_inspector(&self) -> Option<&dyn ReleaseInspector> {
        self.capabilities
            .has(Capability::CurrentRelease)
            .then_some(self as &dyn ReleaseInspector)
    }

    fn rollbacker(&self) -> Option<&dyn Rollbacker> {
        self.capabilities
            .has(Capability::Rollback)
            .then_some(self as &dyn Rollbacker)
    }

    fn slot_deployer(&self) -> Option<&dyn SlotDeployer> {
        self.capabilities
            .has(Capability::Slots)
            .then_some(self as &dyn SlotDeployer)
    }

    fn traffic_router(&self) -> Option<&dyn TrafficRouter> {
        self.capabilities
            .has(Capability::TrafficRouter)
            .then_some(self as &dyn TrafficRouter)
    }

    fn tester_router(&self) -> Option<&dyn TesterRouter> {
        self.capabilities
            .has(Capability::Testers)
            .then_some(self as &dyn TesterRouter)
    }

    fn slot_scaler(&self) -> Option<&dyn SlotScaler> {
        self.capabilities
            .has(Capability::Scale)
            .then_some(self as &dyn SlotScaler)
    }

    fn parallel_deployer(&self) -> Option<&dyn ParallelDeployer> {
        Some(self)
    }
}

impl ParallelDeployer for Remote {
    fn parallel_targets(&self) -> bool {
        self.capabilities.has(Capability::ParallelTargets)
    }
}

#[async_trait]
impl DryRunner for Remote {
    async fn dry_run(&self, req: &Request) -> Result<DeployResult, PluginError> {
        self.call("DryRun", Some(req), |mut c, id| async move {
            c.dry_run(proto::request_to_wire(req, id)).await
        })
        .await
        .map(proto::result_from_wire)
    }
}

#[async_trait]
impl ReleaseInspector for Remote {
    async fn current_release(&self, req: &Request) -> Result<Vec<TargetRelease>, PluginError> {
        self.call("CurrentRelease", Some(req), |mut c, id| async move {
            c.current_release(proto::request_to_wire(req, id)).await
        })
        .await
        .map(proto::releases_from_wire)
    }
}

#[async_trait]
impl Rollbacker for Remote {
    async fn rollback(&self, req: &Request, to: &Release) -> Result<DeployResult, PluginError> {
        self.call("Rollback", Some(req), |mut c, id| async move {
            c.rollback(v1::RollbackRequest {
                request: Some(proto::request_to_wire(req, id)),
                to: Some(proto::release_to_wire(to)),
            })
            .await
        })
        .await
        .map(proto::result_from_wire)
    }
}

#[async_trait]
impl SlotDeployer for Remote {
    async fn prepare_slots(&self, req: &Request) -> Result<serde_json::Value, PluginError> {
        let r = self
            .call("PrepareSlots", Some(req), |mut c, id| async move {
                c.prepare_slots(proto::request_to_wire(req, id)).await
            })
            .await?;
        if r.state_json.is_empty() {
            return Ok(serde_json::Value::Null);
        }
        serde_json::from_slice(&r.state_json).map_err(|e| {
            PluginError::Permanent(format!(
                "plugin {}: PrepareSlots state is not JSON: {e}",
                self.name()
            ))
        })
    }

    async fn deploy_candidate(&self, req: &Request) -> Result<DeployResult, PluginError> {
        self.call("DeployCandidate", Some(req), |mut c, id| async move {
            c.deploy_candidate(proto::request_to_wire(req, id)).await
        })
        .await
        .map(proto::result_from_wire)
    }

    async fn promote_candidate(&self, req: &Request) -> Result<(), PluginError> {
        self.call("PromoteCandidate", Some(req), |mut c, id| async move {
            c.promote_candidate(proto::request_to_wire(req, id)).await
        })
        .await
        .map(|_| ())
    }

    async fn revert_candidate(&self, req: &Request) -> Result<(), PluginError> {
        self.call("RevertCandidate", Some(req), |mut c, id| async move {
            c.revert_candidate(proto::request_to_wire(req, id)).await
        })
        .await
        .map(|_| ())
    }

    async fn retire_previous(&self, req: &Request) -> Result<(), PluginError> {
        self.call("RetirePrevious", Some(req), |mut c, id| async move {
            c.retire_previous(proto::request_to_wire(req, id)).await
        })
        .await
        .map(|_| ())
    }
}

#[async_trait]
impl TrafficRouter for Remote {
    async fn set_candidate_weight(&self, req: &Request, weight: u32) -> Result<(), PluginError> {
        self.call("SetCandidateWeight", Some(req), |mut c, id| async move {
            c.set_candidate_weight(v1::WeightRequest {
                request: Some(proto::request_to_wire(req, id)),
                weight,
            })
            .await
        })
        .await
        .map(|_| ())
    }

    async fn candidate_weight(&self, req: &Request) -> Result<u32, PluginError> {
        self.call("CandidateWeight", Some(req), |mut c, id| async move {
            c.candidate_weight(proto::request_to_wire(req, id)).await
        })
        .await
        .map(|r| r.weight)
    }

    async fn routing_state(&self, req: &Request) -> Result<RoutingState, PluginError> {
        self.call("RoutingState", Some(req), |mut c, id| async move {
            c.routing_state(proto::request_to_wire(req, id)).await
        })
        .await
        .map(proto::routing_state_from_wire)
    }

    async fn traffic(&self, req: &Request, window: TrafficWindow) -> Result<Traffic, PluginError> {
        let window_ms = u64::try_from(window.window.as_millis()).unwrap_or(u64::MAX);
        self.call("Traffic", Some(req), |mut c, id| async move {
            c.traffic(v1::TrafficRequest {
                request: Some(proto::request_to_wire(req, id)),
                window_ms,
                since_ms: window.since_wire(),
            })
            .await
        })
        .await
        .map(proto::traffic_from_wire)
    }
}

#[async_trait]
impl TesterRouter for Remote {
    async fn route_testers(&self, req: &Request) -> Result<BTreeMap<String, String>, PluginError> {
        self.call("RouteTesters", Some(req), |mut c, id| async move {
            c.route_testers(proto::request_to_wire(req, id)).await
        })
        .await
        .map(|r| r.details.into_iter().collect())
    }
}

#[async_trait]
impl SlotScaler for Remote {
    async fn scale_candidate(&self, req: &Request, percent: u32) -> Result<(), PluginError> {
        self.call("ScaleCandidate", Some(req), |mut c, id| async move {
            c.scale_candidate(v1::WeightRequest {
                request: Some(proto::request_to_wire(req, id)),
                weight: percent,
            })
            .await
        })
        .await
        .map(|_| ())
    }
}
