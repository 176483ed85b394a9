//! A live canary is watched: while it waits (an operator's pause, a timed pause, between
//! analysis runs, held, or stuck on a failed router call), the router is read back every
//! `canary.watch`, and what it serves is compared with manent's record. A new difference counts
//! only if the router still differs when read again a moment later (a file caught mid-write
//! does not), and then what that second read shows is the drift:
//! logged with both states, published for the inbox, the console and notifications, then
//! corrected (`on_drift: correct`, the default: manent's routing is set again) or held for the
//! operator (`on_drift: hold`). After a restart the routing is read back first and set again
//! only when the router serves something else — never a blind double apply.
//!
//! None of this is a durable step: reading and re-asserting change nothing the canary decides,
//! and a hold goes through the mailbox, as an operator's pause would.

use super::slots::{traffic_router, with_plugin};
use super::{Flight, router};
use crate::config::OnDrift;
use crate::deploy::canary_status::Actual;
use crate::deploy::command::{self, OperatorCommand};
use crate::deploy::run::{Run, json};
use crate::operator::Operator;
use crate::plugin::{Routing, RoutingState};
use crate::workflow::StepError;

use crate::deploy::canary_status::{Drift, SlotFigures, TRAFFIC_POINTS, TrafficPoint};

impl Flight {
    /// Reads the router back and deals with drift.
    pub(super) async fn watch(&mut self, run: &Run<'_>) {
        let Some(expected) = run.routing.clone() else {
            return;
        };
        let Some((state, diff)) = read_twice_if_new(run, &expected, &self.drift).await else {
            return;
        };
        if diff.is_empty() {
            if !self.drift.is_empty() {
                self.drift.clear();
                run.env
                    .log
                    .for_deployment(run.ctx.id())
                    .info("the router serves manent's routing again");
                let drift = Drift {
                    action: "over".into(),
                    over: true,
                    ..self.drift(&expected, &state, Vec::new())
                };
                publish_drift(run, &drift).await;
            }
            publish(run, actual(&state, Vec::new(), None)).await;
            return;
        }
        let log = run.env.log.for_deployment(run.ctx.id());
        let first = diff != self.drift;
        if self.drift.is_empty() {
            self.drift_since = crate::sys::now_ms();
        }
        if first {
            log.warn(&format!(
                "drift on {}: manent set {}; the router serves {}: {}",
                run.spec.subject(),
                expected.describe(),
                state.routing.as_ref().map_or_else(
                    || "what it cannot say".to_owned(),
                    |r| if state.foreign.is_some() {
                        r.shares_of(&expected)
                    } else {
                        r.describe()
                    }
                ),
                diff.join("; ")
            ));
        }
        let action = match self.plan.on_drift {
            OnDrift::Correct => correct(run, &expected).await,
            OnDrift::Hold => self.hold(run, &diff, first).await,
        };
        if first || self.plan.on_drift == OnDrift::Correct {
            log.warn(&format!("drift: {action}"));
        }
        self.drift.clone_from(&diff);
        let drift = Drift {
            action: action.clone(),
            ..self.drift(&expected, &state, diff.clone())
        };
        publish_drift(run, &drift).await;
        publish(run, actual(&state, diff, Some(action))).await;
    }

    /// `on_drift: hold`: the steps stop where they are (a pause through the mailbox, journaled
    /// as manent's) and the router is left to the operator.
    async fn hold(&mut self, run: &Run<'_>, diff: &[String], first: bool) -> String {
        if !first || self.status.held {
            return "held: the router is left to you".into();
        }
        let manent = Operator {
            name: "manent".into(),
            client: None,
        };
        let why = format!("router drift: {}", diff.join("; "));
        match command::send(
            run.env.db.as_ref(),
            &manent,
            run.ctx.id(),
            &OperatorCommand::Pause,
            Some(&why),
        )
        .await
        {
            Ok(_) => "held: the steps wait and the router is left to you (`manent weight` sets \
                      it again, `resume` goes on)"
                .into(),
            // At an operator's pause nothing moves anyway.
            Err(_) => "held: the router is left to you".into(),
        }
    }

    /// The drift from `expected` that `state` shows, since when this watcher saw it begin.
    fn drift(&self, expected: &Routing, state: &RoutingState, differences: Vec<String>) -> Drift {
        Drift {
            at: self.drift_since,
            expected: expected.clone(),
            served: state.routing.clone(),
            differences,
            action: String::new(),
            over: false,
        }
    }

    /// After a restart, once the replay has caught up: the router is read back, and manent's
    /// routing set again only if it serves something else (a router that lost it, or drifted
    /// while no engine watched).
    pub(super) async fn reassert_after_restart(&mut self, run: &Run<'_>) {
        if self.reasserted || !run.ctx.resumed() || run.ctx.replaying() {
            return;
        }
        self.reasserted = true;
        let Some(expected) = run.routing.clone() else {
            return;
        };
        let log = run.env.log.for_deployment(run.ctx.id());
        let state = match read(run, &expected).await {
            Ok(s) => s,
            Err(e) => {
                log.warn(&format!("canary resumed: cannot read the router back: {e}"));
                publish(run, error_read(&e)).await;
                return;
            }
        };
        let diff = expected.differences(&state);
        if diff.is_empty() {
            log.info(&format!(
                "canary resumed: the router serves the recorded routing ({})",
                expected.describe()
            ));
            publish(run, actual(&state, Vec::new(), None)).await;
            return;
        }
        log.warn(&format!(
            "canary resumed: the router serves something else than recorded ({}); setting {} \
             again",
            diff.join("; "),
            expected.describe()
        ));
        let action = correct(run, &expected).await;
        log.info(&format!("canary resumed: {action}"));
        let after = read(run, &expected).await.unwrap_or(state);
        let left = expected.differences(&after);
        publish(run, actual(&after, left, Some(action))).await;
    }
}

/// How long a new difference must last to be drift: a router file caught while someone
/// writes it reads as drift for an instant.
const CONFIRM_AFTER: std::time::Duration = std::time::Duration::from_millis(300);

/// The router's state and how it differs from `expected`; a difference not seen at the last
/// read is read again after [`CONFIRM_AFTER`], and the second read is the one that counts.
/// None when the router cannot be read (said as the published read's error).
async fn read_twice_if_new(
    run: &Run<'_>,
    expected: &Routing,
    last: &[String],
) -> Option<(RoutingState, Vec<String>)> {
    let mut confirmed = false;
    loop {
        let state = match read(run, expected).await {
            Ok(s) => s,
            Err(e) => {
                publish(run, error_read(&e)).await;
                return None;
            }
        };
        let diff = expected.differences(&state);
        if diff.is_empty() || diff == last || confirmed {
            return Some((state, diff));
        }
        confirmed = true;
        tokio::time::sleep(CONFIRM_AFTER).await;
    }
}

/// How long a read the watch makes may take: a plugin gone silent is said (the read's error is
/// published) and the wait goes on taking commands, rather than stall behind the step timeout.
pub(super) const WATCH_CALL: std::time::Duration = std::time::Duration::from_secs(15);

/// `call`, within [`WATCH_CALL`].
pub(super) async fn bounded<T>(
    call: impl std::future::Future<Output = Result<T, StepError>>,
) -> Result<T, StepError> {
    // Boxed: the canary's wait loop is one large future, and a debug build's thread stack is not.
    tokio::time::timeout(WATCH_CALL, Box::pin(call))
        .await
        .map_err(|_| {
            StepError::Retryable(format!(
                "the plugin did not answer within {}s (is it hung?)",
                WATCH_CALL.as_secs()
            ))
        })?
}

/// The router's state, read back outside the checkpoint log.
async fn read(run: &Run<'_>, expected: &Routing) -> Result<RoutingState, StepError> {
    let expected = expected.clone();
    bounded(with_plugin(run, |h, req| async move {
        router::read_back(traffic_router(&h)?, &req, &expected)
            .await
            .map_err(StepError::from)
    }))
    .await
}

/// Sets manent's routing again (the router renders the whole of it) and reads it back.
async fn correct(run: &Run<'_>, expected: &Routing) -> String {
    let weight = if expected.retired { 0 } else { expected.weight };
    let exp = expected.clone();
    // Not bounded as reads are: a change cut off midway would leave the router half-set.
    let set = with_plugin(run, |h, req| async move {
        let router = traffic_router(&h)?;
        router
            .set_candidate_weight(&req, weight)
            .await
            .map_err(StepError::from)?;
        router::read_back(router, &req, &exp)
            .await
            .map_err(StepError::from)
    })
    .await;
    match set {
        Ok(state) => {
            let left = expected.differences(&state);
            if left.is_empty() {
                format!("corrected: the router serves {} again", expected.describe())
            } else {
                format!(
                    "correcting it did not take: the router still differs ({})",
                    left.join("; ")
                )
            }
        }
        Err(e) => format!("correcting it failed: {e}"),
    }
}

fn actual(state: &RoutingState, drift: Vec<String>, action: Option<String>) -> Actual {
    Actual {
        weight: state
            .routing
            .as_ref()
            .map(|r| if r.retired { 0 } else { r.weight }),
        error: None,
        at: crate::sys::now_ms(),
        served: state.routing.clone(),
        foreign: state.foreign.clone(),
        drift,
        action,
        by_engine: true,
    }
}

fn error_read(e: &StepError) -> Actual {
    Actual {
        error: Some(e.to_string()),
        at: crate::sys::now_ms(),
        by_engine: true,
        ..Actual::default()
    }
}

async fn publish(run: &Run<'_>, a: Actual) {
    if let Some(w) = a.weight {
        crate::telemetry::metrics::get()
            .canary_actual((&run.spec.application, &run.spec.environment), w);
    }
    let _ = run.ctx.publish(&[("canary_actual", json(&a))]).await;
}

impl Flight {
    /// Reads what the router saw of both slots over the last `window` and publishes the series
    /// (a router that cannot say is not asked again in this run).
    pub(super) async fn sample_traffic(&mut self, run: &Run<'_>, window: std::time::Duration) {
        // At most every 2s, however often the router is watched: a chart needs no more.
        let due = self
            .traffic
            .back()
            .is_none_or(|p| crate::sys::now_ms() - p.at >= 2_000);
        if self.no_traffic || !due {
            return;
        }
        let Some((candidate, stable)) = run
            .routing
            .as_ref()
            .map(|r| (r.candidate.slot.clone(), r.stable.slot.clone()))
        else {
            return;
        };
        let window = self.status.traffic_window(window);
        let read = bounded(with_plugin(run, |h, req| async move {
            match traffic_router(&h)?.traffic(&req, window).await {
                Ok(t) => Ok(Some(t)),
                Err(crate::plugin::PluginError::Unimplemented(_)) => Ok(None),
                Err(e) => Err(StepError::from(e)),
            }
        }))
        .await;
        let t = match read {
            Ok(Some(t)) => t,
            Ok(None) => {
                self.no_traffic = true;
                return;
            }
            // A read that failed leaves a gap; the analysis says why when it runs.
            Err(_) => return,
        };
        self.traffic.push_back(TrafficPoint {
            at: crate::sys::now_ms(),
            window_ms: t.window_ms,
            candidate: SlotFigures::of(&t, &candidate),
            stable: SlotFigures::of(&t, &stable),
        });
        while self.traffic.len() > TRAFFIC_POINTS {
            self.traffic.pop_front();
        }
        let points: Vec<&TrafficPoint> = self.traffic.iter().collect();
        let _ = run.ctx.publish(&[("canary_traffic", json(&points))]).await;
    }

    /// Publishes a read the canary made itself (right after a change).
    pub(super) async fn published_read(&self, run: &Run<'_>, state: &RoutingState) {
        let diff = self.record(run).differences(state);
        publish(run, actual(state, diff, None)).await;
    }
}

/// What a live canary's router serves, read by a command while no engine runs (`status`):
/// the plugin is started for the one read, and stopped after it.
pub async fn read_without_engine(
    config: &crate::config::Config,
    store: &dyn crate::workflow::Store,
    id: &str,
) -> Result<Actual, String> {
    let state = store
        .state(id, crate::deploy::view::NOT_VIEWED)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no deployment with id {id}"))?;
    let input: crate::deploy::DeployInput =
        serde_json::from_str(&state.row.inputs).map_err(|e| e.to_string())?;
    let spec = input.spec;
    let status: super::CanaryStatus = state
        .events
        .get("canary")
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default();
    let expected = status
        .routing
        .ok_or_else(|| "the canary has not prepared its slots yet".to_owned())?;
    let plan = crate::deploy::plan::compute(&spec)?;
    let registry =
        crate::plugin::Registry::new(config, std::sync::Arc::new(crate::plugin::logger::Discard));
    let read = async {
        let h = registry
            .get(&spec.plugin)
            .await
            .map_err(|e| e.to_string())?;
        let mut req = crate::deploy::steps::request(
            &spec,
            id,
            crate::deploy::steps::Call {
                targets: plan.request_targets(),
                parallelism: 1,
                secrets: crate::plugin::Secrets::none(),
                step: None,
                processes: &crate::plugin::Processes::none(),
            },
        );
        req.traffic = status.slots.clone();
        req.routing = Some(expected.clone());
        let router = traffic_router(&h).map_err(|e| e.to_string())?;
        router::read_back(router, &req, &expected)
            .await
            .map_err(|e| e.to_string())
    };
    let limit = spec.step_timeout.min(std::time::Duration::from_secs(15));
    let read = tokio::time::timeout(limit, read)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {}s", limit.as_secs())));
    registry.shutdown().await;
    let state = read?;
    let diff = expected.differences(&state);
    Ok(Actual {
        by_engine: false,
        ..actual(&state, diff, None)
    })
}

async fn publish_drift(run: &Run<'_>, drift: &Drift) {
    let _ = run.ctx.publish(&[("canary_drift", json(drift))]).await;
}
