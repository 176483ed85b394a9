//! Every change of a canary's traffic goes through [`Flight::change`]: the router is told
//! manent's routing (it renders from that alone), the change is made as one durable step, and
//! the step reads back what the router serves — a change the router does not serve is a failed
//! step. A change that still fails after its retries never ends the canary while the candidate
//! may have traffic: it waits for an operator (`retry`, `revert`, `weight N`, or `abandon` with
//! a reason), the router's error in full in the status and the inbox.

use std::collections::BTreeMap;

use super::Flight;
use super::slots::{slot_deployer, traffic_router};
use crate::deploy::records::SlotRecord;
use crate::deploy::run::{self, Run, Stop};
use crate::deploy::state::{CanaryCall, Delivered, Doing, OperatorCommand, StepName, Topic};
use crate::deploy::steps;
use crate::plugin::{PluginError, Request, Routing, RoutingState, TrafficRouter};
use crate::workflow::{Interrupt, StepError};

/// A change of what the router serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    /// The candidate's share of production requests.
    Weight(u32),
    /// The share of the candidate's servers enabled.
    Scale(u32),
    /// Testers reach the candidate.
    Testers,
    /// The candidate becomes stable; the previous stable leaves every pool.
    Promote,
    /// The candidate leaves every pool; the stable release serves everything.
    Revert,
}

impl Change {
    /// `set weight 50%`, for the operator.
    pub(super) fn describe(self) -> String {
        match self {
            Change::Weight(w) => format!("set weight {w}%"),
            Change::Scale(p) => format!("scale {p}%"),
            Change::Testers => "route testers".into(),
            Change::Promote => "promote".into(),
            Change::Revert => "revert".into(),
        }
    }

    /// The routing once the router serves this change.
    pub(super) fn applied(self, r: &Routing) -> Routing {
        let mut r = r.clone();
        match self {
            Change::Weight(w) => r.weight = w,
            Change::Scale(p) => r.scale = p,
            Change::Testers => r.testers = true,
            Change::Promote => {
                std::mem::swap(&mut r.stable, &mut r.candidate);
                r.weight = 0;
                r.testers = false;
                r.scale = 100;
                r.retired = true;
            }
            Change::Revert => {
                r.weight = 0;
                r.testers = false;
                r.retired = true;
            }
        }
        r
    }

    fn step(self) -> StepName {
        StepName::Canary(match self {
            Change::Weight(_) => CanaryCall::Weight,
            Change::Scale(_) => CanaryCall::Scale,
            Change::Testers => CanaryCall::Testers,
            Change::Promote => CanaryCall::Promote,
            Change::Revert => CanaryCall::Revert,
        })
    }
}

/// How a change ended.
pub(super) enum Changed {
    /// The router serves it.
    Done,
    /// The change failed and an operator set a weight instead (the canary holds there).
    Manual,
    /// The change failed and an operator reverted the canary.
    Revert { by: String, why: String },
}

/// What a change step records: what the router read back, the testers' details, and when
/// the read-back confirmed it (epoch ms; 0 in records from before it was kept).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Made {
    read: RoutingState,
    #[serde(default)]
    testers: BTreeMap<String, String>,
    #[serde(default)]
    at_ms: i64,
}

/// Commands taken while a change waits for a decision.
const DECIDE: &[Topic] = &[
    Topic::Retry,
    Topic::Revert,
    Topic::Abort,
    Topic::Weight,
    Topic::Abandon,
];
/// …while a revert does (reverting is what the others would lead to).
const DECIDE_REVERTING: &[Topic] = &[Topic::Retry, Topic::Abandon];

/// The commands a canary whose router failed takes.
pub(super) fn deciding(reverting: bool) -> Vec<Topic> {
    let t = if reverting { DECIDE_REVERTING } else { DECIDE };
    t.iter().copied().filter(|t| *t != Topic::Abort).collect()
}

/// What the router serves, read back: its whole routing, or (a router without the read-back
/// call) the candidate's weight with the rest as `expected`.
pub(super) async fn read_back(
    router: &dyn TrafficRouter,
    req: &Request,
    expected: &Routing,
) -> Result<RoutingState, PluginError> {
    match router.routing_state(req).await {
        Err(PluginError::Unimplemented(_)) => {
            let w = router.candidate_weight(req).await?;
            Ok(RoutingState {
                routing: Some(Routing {
                    weight: w,
                    retired: expected.retired && w == 0,
                    ..expected.clone()
                }),
                foreign: None,
            })
        }
        other => other,
    }
}

/// Reads the router back and fails (retryably) unless it serves `expected`.
async fn verified(
    router: &dyn TrafficRouter,
    req: &Request,
    expected: &Routing,
    plugin: &str,
) -> Result<RoutingState, StepError> {
    let read = read_back(router, req, expected)
        .await
        .map_err(|e| StepError::from(e.context(format!("reading {plugin} back"))))?;
    let diff = expected.differences(&read);
    if diff.is_empty() {
        Ok(read)
    } else {
        Err(StepError::Retryable(format!(
            "{plugin} does not serve the change: {}",
            diff.join("; ")
        )))
    }
}

impl Flight {
    /// Makes `change`, read back from the router. While it fails, the canary waits for an
    /// operator: `retry`, `revert` (not while reverting), `weight N` (then it holds there) or
    /// `abandon` with a reason (the canary ends failed where its traffic is).
    pub(super) async fn change(
        &mut self,
        run: &mut Run<'_>,
        mut change: Change,
    ) -> Result<Changed, Stop> {
        let mut manual = false;
        loop {
            let why = match self.attempt(run, change).await {
                Ok(()) => {
                    return Ok(if manual {
                        Changed::Manual
                    } else {
                        Changed::Done
                    });
                }
                Err(Stop::Failed(why)) => why,
                Err(other) => return Err(other),
            };
            let reverting = change == Change::Revert;
            let id = run.ctx.id().to_owned();
            if !run.ctx.replaying() {
                run.env.log.for_deployment(&id).error(&format!(
                    "the router failed ({}): {why}; traffic stays where the router has it \
                     (candidate {}% as last set). Decide: `manent retry {id}`{} or `manent \
                     abandon {id} --reason …`",
                    change.describe(),
                    self.status.weight,
                    if reverting {
                        String::new()
                    } else {
                        format!(", `manent revert {id}`, `manent weight {id} N`")
                    }
                ));
            }
            self.status.router_error = Some(why.clone());
            let doing = Doing::RouterFailed {
                call: change.describe(),
                weight: self.status.weight,
                reverting,
            };
            self.publish(run, self.at(doing)).await?;
            let topics = if reverting { DECIDE_REVERTING } else { DECIDE };
            let msg = self
                .wait(run, topics, None)
                .await?
                .ok_or(Stop::Interrupt(Interrupt::ShuttingDown))?;
            self.status.router_error = None;
            let by = run::by(&msg);
            let delivered = Delivered::of(&msg);
            let reason = delivered.as_ref().map(Delivered::why).unwrap_or_default();
            self.note(
                Topic::parse(&msg.topic).map_or("?", Topic::as_str),
                &by,
                &reason,
                msg.created_at,
            );
            match delivered.map(|d| d.command) {
                Some(OperatorCommand::Revert | OperatorCommand::Abort) if !reverting => {
                    return Ok(Changed::Revert {
                        by,
                        why: if reason.is_empty() {
                            format!("after the router failed: {why}")
                        } else {
                            reason
                        },
                    });
                }
                Some(OperatorCommand::Weight(w)) if !reverting => {
                    change = Change::Weight(w.min(100));
                    manual = true;
                    self.status.manual = true;
                    self.status.held = true;
                }
                Some(OperatorCommand::Abandon) => {
                    self.abandoned = true;
                    return Err(Stop::Failed(format!(
                        "abandoned by {by} ({reason}) after the router failed ({}): {why}; \
                         traffic stays where the router has it",
                        change.describe()
                    )));
                }
                _ => {}
            }
        }
    }

    /// One try at `change`, as one durable step that includes the read-back.
    async fn attempt(&mut self, run: &mut Run<'_>, change: Change) -> Result<(), Stop> {
        let before = self.record(run);
        let expected = change.applied(&before);
        let (spec, wf) = (run.spec, run.ctx.id().to_owned());
        let targets: Vec<_> = run.plan.targets().map(|(_, t)| t.clone()).collect();
        let releases = &self.before;
        let (expected_ref, targets, wf_ref) = (&expected, &targets, &wf);
        let slots = self.slot_record(run, change, &expected);
        let made: Made = run
            .plugin_step_with(
                change.step(),
                &steps::target_policy(spec),
                true,
                |h, req| {
                    let slots = slots.clone();
                    async move {
                        let router = traffic_router(&h)?;
                        let mut testers = BTreeMap::new();
                        let mut effects = Vec::new();
                        match change {
                            Change::Weight(w) => router
                                .set_candidate_weight(&req, w)
                                .await
                                .map_err(StepError::from)?,
                            Change::Scale(p) => h
                                .deployer
                                .slot_scaler()
                                .ok_or_else(|| {
                                    StepError::Permanent(format!("plugin {} cannot scale", h.name))
                                })?
                                .scale_candidate(&req, p)
                                .await
                                .map_err(StepError::from)?,
                            Change::Testers => {
                                testers = h
                                    .deployer
                                    .tester_router()
                                    .ok_or_else(|| {
                                        StepError::Permanent(format!(
                                            "plugin {} cannot route testers",
                                            h.name
                                        ))
                                    })?
                                    .route_testers(&req)
                                    .await
                                    .map_err(StepError::from)?;
                            }
                            Change::Promote => {
                                slot_deployer(&h)?
                                    .promote_candidate(&req)
                                    .await
                                    .map_err(StepError::from)?;
                                effects = steps::promoted_releases(spec, wf_ref, targets, releases);
                            }
                            Change::Revert => slot_deployer(&h)?
                                .revert_candidate(&req)
                                .await
                                .map_err(StepError::from)?,
                        }
                        let read = verified(router, &req, expected_ref, &h.name).await?;
                        effects.extend(slots.map(|s| s.effect()));
                        let at_ms = crate::sys::now_ms();
                        Ok((
                            Made {
                                read,
                                testers,
                                at_ms,
                            },
                            effects,
                        ))
                    }
                },
            )
            .await?;
        match change {
            Change::Weight(w) => {
                self.status.weight = w;
                self.status.actual = made
                    .read
                    .routing
                    .as_ref()
                    .map(|r| if r.retired { 0 } else { r.weight });
                crate::telemetry::metrics::get().canary_weights(
                    (&spec.application, &spec.environment),
                    w,
                    self.status.actual,
                );
            }
            Change::Scale(p) => self.status.scale = Some(p),
            Change::Testers => self.status.testers = made.testers,
            Change::Promote => {
                self.status.weight = 100;
                self.status.testers.clear();
                self.live = false;
            }
            Change::Revert => {
                self.status.weight = 0;
                self.status.actual = None;
                self.status.testers.clear();
                self.live = false;
            }
        }
        let serves = matches!(change, Change::Weight(w) if w > 0) || change == Change::Testers;
        if serves && self.status.serving_since.is_none() && made.at_ms > 0 {
            self.began_serving(run, made.at_ms);
        }
        run.routing = Some(expected);
        self.status.routing.clone_from(&run.routing);
        if !run.ctx.replaying() {
            self.published_read(run, &made.read).await;
        }
        Ok(())
    }

    /// manent's record of which slot serves, as `change` leaves it (promote and revert change
    /// it; the rest do not).
    fn slot_record(&self, run: &Run<'_>, change: Change, after: &Routing) -> Option<SlotRecord> {
        if !matches!(change, Change::Promote | Change::Revert) {
            return None;
        }
        Some(SlotRecord {
            subject: run.spec.subject(),
            stable: after.stable.slot.clone(),
            stable_version: after.stable.version.clone(),
            candidate: after.candidate.slot.clone(),
            candidate_version: after.candidate.version.clone(),
            candidate_live: false,
            deployment_id: run.ctx.id().to_owned(),
            updated_at: crate::sys::now_ms(),
        })
    }

    /// manent's routing as recorded now.
    pub(super) fn record(&self, run: &Run<'_>) -> Routing {
        run.routing.clone().unwrap_or_default()
    }
}
