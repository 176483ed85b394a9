//! A canary's slots: which one serves production before it starts (manent's records, else the
//! router's read-back), PrepareSlots, and the plugin calls on slots and traffic.

use std::sync::Arc;

use super::{Flight, Known};
use crate::deploy::DeployEnv;
use crate::deploy::records::SlotRecord;
use crate::deploy::run::{Run, Stop};
use crate::deploy::state::{CanaryCall, StepName};
use crate::deploy::steps;
use crate::plugin::{PluginError, PluginHandle, Pool, Request, Routing};
use crate::workflow::StepError;

impl Flight {
    /// Which slot serves production (manent's records; without them, the router's read-back),
    /// then PrepareSlots with it: the candidate goes to the other slot, at 0%.
    pub(super) async fn prepare(&mut self, run: &mut Run<'_>) -> Result<(), Stop> {
        let (env, spec) = (run.env, run.spec);
        let subject = spec.subject();
        let subject = &subject;
        let known: Known = run
            .plugin_step(
                StepName::Canary(CanaryCall::SlotsBefore),
                &steps::target_policy(spec),
                true,
                |h, req| async move { slots_before(env, subject, &h, &req).await },
            )
            .await?;
        if !run.ctx.replaying() {
            env.log.for_deployment(run.ctx.id()).info(&known.said);
        }
        let targets = run.plan.request_targets();
        let version = if known.version.is_empty() {
            self.before
                .values()
                .find_map(|l| l.current.as_ref().map(|c| c.version.clone()))
                .unwrap_or_default()
        } else {
            known.version.clone()
        };
        let new = spec.artifact.version.clone();
        run.routing = Some(Routing {
            stable: Pool::of(&known.stable, &version, &targets),
            candidate: Pool {
                version: new.clone(),
                ..Pool::default()
            },
            ..Routing::default()
        });
        let (known_ref, version_ref, wf) = (&known, &version, run.ctx.id().to_owned());
        let wf = &wf;
        let slots: serde_json::Value = run
            .plugin_step_with(
                StepName::Canary(CanaryCall::Slots),
                &steps::target_policy(spec),
                true,
                |h, req| async move {
                    let state = slot_deployer(&h)?
                        .prepare_slots(&req)
                        .await
                        .map_err(StepError::from)?;
                    let (stable, candidate) = slot_names(&state, &known_ref.stable);
                    if !known_ref.stable.is_empty() && stable != known_ref.stable {
                        return Err(StepError::Permanent(format!(
                            "plugin {} put production on slot {stable}, but manent records \
                             {} as serving it: refusing to go on (check the router by hand)",
                            h.name, known_ref.stable
                        )));
                    }
                    let record = SlotRecord {
                        subject: spec.subject(),
                        stable,
                        stable_version: version_ref.clone(),
                        candidate,
                        candidate_version: req.artifact.version.clone(),
                        candidate_live: true,
                        deployment_id: wf.clone(),
                        updated_at: crate::sys::now_ms(),
                    };
                    Ok((state, vec![record.effect()]))
                },
            )
            .await?;
        let (stable, candidate) = slot_names(&slots, &known.stable);
        run.traffic = Some(slots.clone());
        run.routing = Some(Routing {
            stable: Pool::of(&stable, &version, &targets),
            candidate: Pool::of(&candidate, &new, &targets),
            ..Routing::default()
        });
        self.status.slots = Some(slots);
        self.status.routing.clone_from(&run.routing);
        self.live = true;
        Ok(())
    }
}

/// Step `canary.slots_before`: which slot serves production — manent's records, else what the
/// router itself serves (never a guess from a file's comment).
pub(super) async fn slots_before(
    env: &DeployEnv,
    subject: &str,
    h: &PluginHandle,
    req: &Request,
) -> Result<Known, StepError> {
    if let Some(rec) = env
        .db
        .slots(subject)
        .await
        .map_err(|e| StepError::Retryable(e.to_string()))?
    {
        return Ok(Known {
            said: format!(
                "manent's records: slot {} serves {subject} ({}, since {}); the candidate goes \
                 to the other",
                rec.stable, rec.stable_version, rec.deployment_id
            ),
            stable: rec.stable,
            version: rec.stable_version,
        });
    }
    match traffic_router(h)?.routing_state(req).await {
        Ok(s) => {
            let slot = s
                .routing
                .as_ref()
                .map(|r| r.stable.slot.clone())
                .unwrap_or_default();
            let foreign = s
                .foreign
                .map(|f| format!(" (foreign: {f})"))
                .unwrap_or_default();
            let said = if slot.is_empty() {
                format!(
                    "manent has no record of which slot serves {subject}, and the router cannot \
                     say{foreign}: plugin {} chooses",
                    h.name
                )
            } else {
                format!(
                    "manent has no record of which slot serves {subject}: the router serves it \
                     from {slot}{foreign}; the candidate goes to the other"
                )
            };
            Ok(Known {
                stable: slot,
                version: String::new(),
                said,
            })
        }
        Err(PluginError::Unimplemented(_)) => Ok(Known {
            stable: String::new(),
            version: String::new(),
            said: format!(
                "manent has no record of which slot serves {subject} and plugin {} has no \
                 read-back: it chooses",
                h.name
            ),
        }),
        Err(e) => Err(StepError::from(
            e.context("reading which slot serves production"),
        )),
    }
}

/// (stable, candidate) slot names from PrepareSlots' state (`stable`, `candidate`), else what
/// manent knew and generic names.
pub(super) fn slot_names(state: &serde_json::Value, known: &str) -> (String, String) {
    let get = |k: &str| state.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    let stable = get("stable")
        .or_else(|| (!known.is_empty()).then(|| known.to_owned()))
        .unwrap_or_else(|| "stable".into());
    let candidate = get("candidate").unwrap_or_else(|| "candidate".into());
    (stable, candidate)
}

pub(super) fn slot_deployer(
    h: &PluginHandle,
) -> Result<&dyn crate::plugin::SlotDeployer, StepError> {
    h.deployer
        .slot_deployer()
        .ok_or_else(|| StepError::Permanent(format!("plugin {} has no slots", h.name)))
}

pub(super) fn traffic_router(
    h: &PluginHandle,
) -> Result<&dyn crate::plugin::TrafficRouter, StepError> {
    h.deployer
        .traffic_router()
        .ok_or_else(|| StepError::Permanent(format!("plugin {} routes no traffic", h.name)))
}

/// A plugin call outside the checkpoint log (what the canary watches), with the slots' state
/// and manent's routing.
pub(super) async fn with_plugin<T, F, Fut>(run: &Run<'_>, call: F) -> Result<T, StepError>
where
    F: FnOnce(Arc<PluginHandle>, Request) -> Fut,
    Fut: std::future::Future<Output = Result<T, StepError>>,
{
    let (env, spec) = (run.env, run.spec);
    let h = env.plugin(spec).await?;
    let (secrets, _open) = steps::secrets(env, spec);
    let mut req = steps::request(
        spec,
        run.ctx.id(),
        steps::Call {
            targets: run.plan.request_targets(),
            parallelism: run.par,
            secrets,
            step: None,
            processes: &env.processes,
        },
    );
    req.traffic.clone_from(&run.traffic);
    req.routing.clone_from(&run.routing);
    tokio::time::timeout(spec.step_timeout, call(h, req))
        .await
        .map_err(|_| StepError::Retryable("no answer within the step timeout".into()))?
}
