//! A blue/green router plugin from the three things that differ between routers: how it makes
//! the router serve a routing (`apply`, all or nothing), how it reads back what the router
//! serves (`served`), and what it checks before a deploy (`check`). [`SlotRouter`] is the rest
//! of the contract around them — a plain deploy as a blue/green switch, PrepareSlots,
//! DeployCandidate, promote, revert, weights, testers and scale — each call rendering from
//! manent's routing with its own change applied, never from what the router said before.

use async_trait::async_trait;
use std::collections::BTreeMap;

use super::{
    deploy_candidate, enabled, named_stable, prepared, promoted, recorded, reverted, served_stable,
    tester_details,
};
use crate::plugin::{
    DeployResult, Deployer, Logger, ParallelDeployer, PluginError, Request, Routing, RoutingState,
    SlotDeployer, SlotScaler, TesterRouter, Traffic, TrafficRouter, TrafficWindow,
};

/// What a router plugin implements itself.
#[async_trait]
pub trait Router: Send + Sync + 'static {
    /// `nginx`, `haproxy`: in logs and errors.
    const NAME: &'static str;

    /// The header and the cookie that send a tester to the candidate (value `1`).
    fn testers(&self) -> (&str, &str);

    /// What PrepareSlots' state names besides the slots (`("upstream", "web")`).
    fn names(&self) -> (&'static str, String);

    /// Checks before a deploy, beyond the targets' labels: the router's set-up.
    async fn check(&self, req: &Request) -> Result<(), PluginError>;

    /// Makes the router serve `routing`, all or nothing; how it was done, for the log
    /// (`through the runtime API`, `by a checked reload …`).
    async fn apply(&self, routing: &Routing) -> Result<String, PluginError>;

    /// What the router serves, read back from it (foreign when manent did not write it).
    async fn served(&self, req: &Request) -> RoutingState;

    /// The traffic it observed per slot of `routing` over `window` (never from before the
    /// candidate began serving), each request counted for the release that served it. Optional.
    async fn traffic(
        &self,
        _routing: &Routing,
        _window: TrafficWindow,
    ) -> Result<Traffic, PluginError> {
        Err(PluginError::Unimplemented(format!(
            "the {} router does not report the traffic it observes",
            Self::NAME
        )))
    }
}

/// A router plugin: `R` behind the whole slot and router contract.
pub struct SlotRouter<R> {
    router: R,
    log: Logger,
}

impl<R: Router> SlotRouter<R> {
    pub fn new(router: R, log: Logger) -> Self {
        SlotRouter { router, log }
    }

    /// Slots for a new candidate: production stays on manent's stable slot (else the one the
    /// router serves it from), the candidate goes to the other, at 0%.
    async fn prepare(&self, req: &Request) -> Result<Routing, PluginError> {
        let stable = match named_stable(req) {
            Some(p) => p,
            None => served_stable(self.router.served(req).await, R::NAME)?,
        };
        let routing = prepared(req, &stable)?;
        self.router.apply(&routing).await?;
        Ok(routing)
    }

    async fn promote(&self, req: &Request, r: &Routing) -> Result<(), PluginError> {
        let promoted = promoted(r);
        let how = self.router.apply(&promoted).await?;
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "{}: {} is stable now, all traffic on it, {how}; {} is out of every pool",
            R::NAME,
            promoted.stable.slot,
            promoted.candidate.slot
        ));
        Ok(())
    }

    /// manent's routing with `change` applied, served: it, and how it was done.
    async fn change(
        &self,
        req: &Request,
        change: impl FnOnce(Routing) -> Routing + Send,
    ) -> Result<(Routing, String), PluginError> {
        let r = change(recorded(req)?);
        let how = self.router.apply(&r).await?;
        Ok((r, how))
    }
}

#[async_trait]
impl<R: Router> Deployer for SlotRouter<R> {
    async fn validate(&self, req: &Request) -> Result<(), PluginError> {
        super::check_targets(req, R::NAME)?;
        self.router.check(req).await
    }

    /// A plain deploy is a blue/green switch: the candidate everywhere, then promoted.
    async fn deploy(&self, req: &Request) -> Result<DeployResult, PluginError> {
        let routing = self.prepare(req).await?;
        let mut req = req.clone();
        req.routing = Some(routing.clone());
        let result = self.deploy_candidate(&req).await?;
        self.promote(&req, &routing).await?;
        Ok(result)
    }

    fn slot_deployer(&self) -> Option<&dyn SlotDeployer> {
        Some(self)
    }

    fn traffic_router(&self) -> Option<&dyn TrafficRouter> {
        Some(self)
    }

    fn tester_router(&self) -> Option<&dyn TesterRouter> {
        Some(self)
    }

    fn slot_scaler(&self) -> Option<&dyn SlotScaler> {
        Some(self)
    }

    fn parallel_deployer(&self) -> Option<&dyn ParallelDeployer> {
        Some(self)
    }
}

impl<R: Router> ParallelDeployer for SlotRouter<R> {
    fn parallel_targets(&self) -> bool {
        true
    }
}

#[async_trait]
impl<R: Router> SlotDeployer for SlotRouter<R> {
    async fn prepare_slots(&self, req: &Request) -> Result<serde_json::Value, PluginError> {
        let r = self.prepare(req).await?;
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "{}: {} serves production; the candidate goes to {}",
            R::NAME,
            r.stable.slot,
            r.candidate.slot
        ));
        let (key, name) = self.router.names();
        Ok(serde_json::json!({
            "stable": r.stable.slot,
            "candidate": r.candidate.slot,
            key: name,
        }))
    }

    async fn deploy_candidate(&self, req: &Request) -> Result<DeployResult, PluginError> {
        deploy_candidate(req, R::NAME, &self.log).await
    }

    async fn promote_candidate(&self, req: &Request) -> Result<(), PluginError> {
        let r = recorded(req)?;
        self.promote(req, &r).await
    }

    async fn revert_candidate(&self, req: &Request) -> Result<(), PluginError> {
        let (r, how) = self.change(req, |r| reverted(&r)).await?;
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "{}: the candidate ({}) is out of every pool, {how}; {} serves everything",
            R::NAME,
            r.candidate.slot,
            r.stable.slot
        ));
        Ok(())
    }

    async fn retire_previous(&self, req: &Request) -> Result<(), PluginError> {
        let r = recorded(req)?;
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "{}: {} takes no traffic and is in no pool; its files stay for a quick switch back",
            R::NAME,
            r.candidate.slot
        ));
        Ok(())
    }
}

#[async_trait]
impl<R: Router> TrafficRouter for SlotRouter<R> {
    async fn set_candidate_weight(&self, req: &Request, weight: u32) -> Result<(), PluginError> {
        if weight > 100 {
            return Err(PluginError::Permanent(format!(
                "weight {weight}: a percentage is 0 to 100"
            )));
        }
        let (_, how) = self.change(req, |r| Routing { weight, ..r }).await?;
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "{}: candidate {weight}% / stable {}%, served {how}",
            R::NAME,
            100 - weight
        ));
        Ok(())
    }

    async fn candidate_weight(&self, req: &Request) -> Result<u32, PluginError> {
        let s = self.router.served(req).await;
        match (s.routing, s.foreign) {
            (Some(r), None) => Ok(if r.retired { 0 } else { r.weight }),
            (_, Some(why)) => Err(PluginError::Failed(why)),
            (None, None) => Err(PluginError::Failed(format!("{} does not say", R::NAME))),
        }
    }

    async fn routing_state(&self, req: &Request) -> Result<RoutingState, PluginError> {
        Ok(self.router.served(req).await)
    }

    async fn traffic(&self, req: &Request, window: TrafficWindow) -> Result<Traffic, PluginError> {
        self.router.traffic(&recorded(req)?, window).await
    }
}

#[async_trait]
impl<R: Router> TesterRouter for SlotRouter<R> {
    async fn route_testers(&self, req: &Request) -> Result<BTreeMap<String, String>, PluginError> {
        self.change(req, |r| Routing { testers: true, ..r }).await?;
        let (header, cookie) = self.router.testers();
        Ok(tester_details(header, cookie))
    }
}

#[async_trait]
impl<R: Router> SlotScaler for SlotRouter<R> {
    async fn scale_candidate(&self, req: &Request, percent: u32) -> Result<(), PluginError> {
        let scale = percent.clamp(1, 100);
        let (r, how) = self.change(req, |r| Routing { scale, ..r }).await?;
        let n = r.candidate.addresses.len();
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "{}: the candidate runs on {} of {n} servers, {how}",
            R::NAME,
            enabled(n, r.scale)
        ));
        Ok(())
    }
}
