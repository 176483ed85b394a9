//! The canary workflow (design/architecture.md "Workflows"): plan → the plugin's capabilities → validate → which slot
//! serves production (manent's records, else the router's own read-back) → PrepareSlots →
//! DeployCandidate on every target (the same fan-out, parallelism, retries and guided failure
//! as a deploy) → RouteTesters → the steps (weights, pauses, scale, analysis) →
//! PromoteCandidate (the releases are recorded with it) → RetirePrevious. An operator promotes
//! (ends a pause, or skips the rest), reverts, sets a weight by hand or steps `back` (both hold
//! the automatic steps until `resume` or `promote`), and pauses. Every decision the canary
//! takes by itself (an analysis that fails reverts, one that cannot tell pauses) is journaled
//! with why.
//!
//! The router is told manent's routing with every call and read back after every change
//! ([`router`]); a change it does not serve waits for an operator rather than ending the
//! canary with traffic on the candidate, and `failed` is reached only once every request is
//! back on stable (read back) or an operator abandoned it with a reason. While the canary is
//! live the router is watched for drift ([`watch`]).
//!
//! Everything it decides comes from recorded steps and consumed commands, so a restart replays
//! to the same place.

pub mod ahead;
pub mod analysis;
mod background;
mod commands;
pub mod compare;
mod ending;
mod gate;
mod router;
mod slots;

use self::ending::Promoted;
pub mod watch;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use self::gate::ANALYSIS;
use self::router::{Change, Changed};
use crate::config::{Canary, CanaryStep, EnvSpec, Event};
pub use crate::deploy::canary_status::{Actual, AnalysisRun, CanaryStatus, Decision};
use crate::deploy::hooks;
use crate::deploy::releases::Live;
use crate::deploy::run::{self, FanOut, OrFail, Run, Stop, json};
use crate::deploy::state::{
    Action, CanaryCall, Doing, Ending, Kind, Phase, StepName, TargetState, Topic,
};
use crate::deploy::steps;
use crate::deploy::{DeployEnv, DeployInput, Report, outcome};
use crate::plugin::{Capability, OnError, Routing};
use crate::workflow::store::{ACCEPTS, Message};
use crate::workflow::{Interrupt, RunOutcome, StepError, WfCtx};

/// Why a target's candidate never ran, in a canary's report.
const NOT_STARTED: &str = "not started: the canary stopped before it";

/// The commands a canary takes where it is (design/architecture.md "Workflows").
pub fn accepts(phase: &Phase) -> Vec<Topic> {
    use Topic as T;
    match phase {
        Phase::Candidate { .. } => vec![T::Revert],
        Phase::AwaitingDecision { .. } => vec![T::Retry, T::Revert],
        Phase::Canary { doing, .. } => match doing {
            Doing::Pause => vec![T::Promote, T::Revert, T::Weight, T::Back],
            Doing::Held { .. } => vec![T::Resume, T::Promote, T::Revert, T::Weight, T::Back],
            Doing::RouterFailed { reverting, .. } => router::deciding(*reverting),
            _ => vec![T::Promote, T::Revert, T::Weight, T::Back, T::Pause],
        },
        _ => Vec::new(),
    }
}

/// Begins a canary's run, taking the canary's commands; Err is how the flow ends when it
/// cannot begin (an interruption, or a plan or plugin that fails).
async fn begin<'a>(
    env: &'a DeployEnv,
    ctx: &'a WfCtx,
    spec: &'a EnvSpec,
) -> Result<Run<'a>, Result<Report, Interrupt>> {
    match Run::begin(env, ctx, spec, Kind::Canary).await {
        Ok(mut run) => {
            run.commands = |_, phase| accepts(phase);
            Ok(run)
        }
        Err(stop) => Err(run::not_begun(ctx, Kind::Canary, &spec.artifact.version, stop).await),
    }
}

/// What a command does to the steps.
enum Next {
    /// The current step ends (a promote).
    EndStep,
    /// The remaining steps are skipped (a full promote).
    PromoteNow,
    /// The canary is reverted.
    Revert { by: String, why: String },
    /// The step stays (a weight, back, pause or resume changed what it holds).
    Stay,
}

/// How the steps ended.
enum Flow {
    /// Done, or promoted past: the candidate is promoted next.
    Promote,
    /// Reverted.
    Revert { by: String, why: String },
}

/// How an analysis ended.
enum Analysed {
    Passed,
    Revert(String),
    Pause(String),
    Command(Message),
}

/// Which slot serves production before PrepareSlots, and how manent knows.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Known {
    /// The slot (empty: nobody can say; the plugin chooses).
    stable: String,
    /// The release in it, when recorded.
    version: String,
    /// How it is known, for the log.
    said: String,
}

/// Runs a canary from its stored inputs.
pub async fn run(env: Arc<DeployEnv>, ctx: WfCtx, inputs: String) -> Result<RunOutcome, Interrupt> {
    let input: DeployInput = match serde_json::from_str(&inputs) {
        Ok(i) => i,
        Err(e) => return Ok(Report::bad_inputs(Kind::Canary, &e)),
    };
    match &input.revert_of {
        Some(of) => outcome(revert_left(&env, &ctx, &input.spec, of).await),
        None => outcome(canary(&env, &ctx, &input.spec).await),
    }
}

/// A canary run that only takes out of every pool the candidate canary `of` left in traffic
/// when an operator abandoned it: its recorded routing is told to the router, the revert read
/// back (waiting for a decision if the router fails again).
async fn revert_left(
    env: &DeployEnv,
    ctx: &WfCtx,
    spec: &EnvSpec,
    of: &str,
) -> Result<Report, Interrupt> {
    let mut run = match begin(env, ctx, spec).await {
        Ok(r) => r,
        Err(ended) => return ended,
    };
    let Some(plan) = spec.strategy.canary().cloned() else {
        let r = run.report(
            Ending::Failed,
            format!("{of} was not a canary"),
            NOT_STARTED,
        );
        return run.end(r).await;
    };
    let left: Result<(Routing, Option<serde_json::Value>), Stop> = ctx
        .step(
            StepName::Canary(CanaryCall::SlotsBefore),
            &steps::internal(),
            |_| async {
                let events = env
                    .db
                    .events(of)
                    .await
                    .map_err(|e| StepError::Retryable(e.to_string()))?;
                let status: CanaryStatus = events
                    .get("canary")
                    .and_then(|v| serde_json::from_str(v).ok())
                    .unwrap_or_default();
                let routing = status.routing.ok_or_else(|| {
                    StepError::Permanent(format!("{of} recorded no routing: nothing to revert"))
                })?;
                Ok((routing, status.slots))
            },
        )
        .await
        .map_err(Stop::Interrupt)
        .and_then(OrFail::or_fail);
    let (routing, slots) = match left {
        Ok(l) => l,
        Err(Stop::Interrupt(i)) => return Err(i),
        Err(Stop::Failed(why) | Stop::Abort(why)) => {
            let r = run.report(Ending::Failed, why, NOT_STARTED);
            return run.end(r).await;
        }
    };
    run.routing = Some(routing);
    run.traffic = slots;
    let mut flight = Flight::new(plan);
    flight.live = true;
    flight.status.routing.clone_from(&run.routing);
    let report = match flight.reverting(&mut run).await {
        Ok(()) => {
            let stable = flight.record(&run).stable.slot;
            let mut r = run.report(
                Ending::Reverted,
                format!(
                    "the candidate {of} left in traffic is out of every pool (the router serves \
                     {stable} only, read back)"
                ),
                NOT_STARTED,
            );
            for t in &mut r.targets {
                t.status = TargetState::Reverted;
                t.message = format!("{of}'s candidate out of every pool");
            }
            r
        }
        Err(Stop::Interrupt(i)) => return Err(i),
        Err(Stop::Failed(why) | Stop::Abort(why)) => run.report(Ending::Failed, why, NOT_STARTED),
    };
    run.end(report).await
}

async fn canary(env: &DeployEnv, ctx: &WfCtx, spec: &EnvSpec) -> Result<Report, Interrupt> {
    let mut run = match begin(env, ctx, spec).await {
        Ok(r) => r,
        Err(ended) => return ended,
    };
    let Some(plan) = spec.strategy.canary().cloned() else {
        let r = run.report(
            Ending::Failed,
            format!(
                "{} is not a canary (strategy {})",
                spec.subject(),
                spec.strategy.short()
            ),
            NOT_STARTED,
        );
        return run.end(r).await;
    };
    let mut flight = Flight::new(plan);
    let report = match flight.body(&mut run).await {
        Ok(r) => r,
        Err(Stop::Interrupt(i)) => return Err(i),
        Err(Stop::Failed(why) | Stop::Abort(why)) if flight.live && !flight.abandoned => {
            match flight.fail_safely(&mut run, why).await {
                Ok(r) => r,
                Err(Stop::Interrupt(i)) => return Err(i),
                Err(Stop::Failed(why) | Stop::Abort(why)) => {
                    run.report(Ending::Failed, why, NOT_STARTED)
                }
            }
        }
        Err(Stop::Failed(why) | Stop::Abort(why)) => run.report(Ending::Failed, why, NOT_STARTED),
    };
    run.end(report).await
}

/// A canary in flight: where it is in its steps and what it has set.
struct Flight {
    plan: Canary,
    status: CanaryStatus,
    /// The step to run next, from 0.
    pos: usize,
    /// Weight steps run so far: (step index, weight), for `back`.
    history: Vec<(usize, u32)>,
    /// This run has read the router back after a restart.
    reasserted: bool,
    /// The releases live before the canary, per moniker.
    before: BTreeMap<String, Live>,
    /// The candidate is in a pool (it may have traffic): a failure takes it out first.
    live: bool,
    /// An operator abandoned the canary where its traffic is.
    abandoned: bool,
    /// The drift last said (a drift is said once, not at every read).
    drift: Vec<String>,
    /// When the current drift episode began (epoch ms).
    drift_since: i64,
    /// The traffic the router saw, per watch interval, newest last (`canary_traffic`).
    traffic: std::collections::VecDeque<crate::deploy::canary_status::TrafficPoint>,
    /// The router does not report its traffic: not asked again.
    no_traffic: bool,
    /// The background analysis (`canary.analysis`) so far in this run.
    background: background::Background,
}

impl Flight {
    fn new(plan: Canary) -> Flight {
        Flight {
            plan,
            status: CanaryStatus::default(),
            pos: 0,
            history: Vec::new(),
            reasserted: false,
            before: BTreeMap::new(),
            live: false,
            abandoned: false,
            drift: Vec::new(),
            drift_since: 0,
            traffic: std::collections::VecDeque::new(),
            no_traffic: false,
            background: background::Background::default(),
        }
    }

    /// Publishes `Reverting` and takes the candidate out of every pool, read back.
    async fn reverting(&mut self, run: &mut Run<'_>) -> Result<(), Stop> {
        self.status.held = false;
        self.publish(run, Phase::Reverting).await?;
        if self.live {
            self.change(run, Change::Revert).await?;
        }
        Ok(())
    }

    async fn body(&mut self, run: &mut Run<'_>) -> Result<Report, Stop> {
        let (env, ctx, spec) = (run.env, run.ctx, run.spec);
        self.check_capabilities(run)?;
        run.validate().await?;
        self.before = run.releases_before().await?;
        let vars = hooks::Vars::before(&self.before);
        hooks::run_event(run, Event::PreDeploy, &vars)
            .await
            .map_err(|e| match e {
                Stop::Failed(why) => Stop::Failed(format!("{why}; nothing was touched")),
                other => other,
            })?;
        self.publish(run, Phase::Slots).await?;
        self.prepare(run).await?;
        self.warn_unmeasurable(run).await;
        // The candidate, target by target.
        let how = FanOut {
            action: Action::Candidate,
            on_error: OnError::Stop,
            guided: true,
        };
        let slots = steps::Slots {
            traffic: run.traffic.clone(),
            routing: run.routing.clone(),
        };
        let slots = &slots;
        let deployed = run
            .batches(
                how,
                |_| true,
                |t, info| {
                    let slots = slots.clone();
                    async move {
                        let h = env.plugin(spec).await?;
                        steps::candidate_target(
                            steps::TargetStep {
                                env,
                                spec,
                                wf: ctx.id(),
                                plugin: &h,
                                t: &t,
                            },
                            slots,
                            info,
                        )
                        .await
                    }
                },
            )
            .await;
        match deployed {
            Ok(()) => {}
            Err(Stop::Abort(by)) => {
                return self
                    .revert(run, &by, "reverted before it took traffic")
                    .await;
            }
            Err(Stop::Failed(why)) => {
                return self
                    .revert(run, "manent", &format!("the candidate failed: {why}"))
                    .await;
            }
            Err(other) => return Err(other),
        }
        // Testers reach the candidate before anyone else, where the plan does not say when.
        if !self.plan.uses("testers")
            && run.info.capabilities.has(Capability::Testers)
            && let Changed::Revert { by, why } = self.change(run, Change::Testers).await?
        {
            return self.revert(run, &by, &why).await;
        }
        loop {
            if let Flow::Revert { by, why } = self.steps(run).await? {
                return self.revert(run, &by, &why).await;
            }
            // Hooks before the promotion: one that fails takes the candidate out instead.
            match hooks::run_event(run, Event::PrePromote, &vars).await {
                Ok(_) => {}
                Err(Stop::Failed(why)) => {
                    return self
                        .revert(
                            run,
                            "manent",
                            &format!("{why}; the candidate was not promoted"),
                        )
                        .await;
                }
                Err(other) => return Err(other),
            }
            match self.promote(run).await? {
                Promoted::Report(mut report) => {
                    for event in [Event::PostPromote, Event::PostDeploy] {
                        match hooks::run_event(run, event, &vars).await {
                            Ok(ran) => report.message = ran.noted(report.message),
                            Err(Stop::Failed(why)) => {
                                report.ending = Ending::Failed;
                                report.message = hooks::after(report.message, &why);
                                break;
                            }
                            Err(other) => return Err(other),
                        }
                    }
                    return Ok(report);
                }
                // The promotion failed and an operator set a weight instead: held there.
                Promoted::Held => {}
                Promoted::Revert { by, why } => return self.revert(run, &by, &why).await,
            }
        }
    }

    /// The automatic steps, with the operator's commands between them, until they are done
    /// (or promoted past) or the canary is reverted.
    async fn steps(&mut self, run: &mut Run<'_>) -> Result<Flow, Stop> {
        let ctx = run.ctx;
        loop {
            self.reassert_after_restart(run).await;
            // Commands sent meanwhile, oldest first.
            if let Some(msg) = ctx.poll_mailbox(&topics(STEP_TOPICS)).await? {
                match self.command(run, &msg).await? {
                    Next::EndStep => self.pos += 1,
                    Next::PromoteNow => return Ok(Flow::Promote),
                    Next::Revert { by, why } => return Ok(Flow::Revert { by, why }),
                    Next::Stay => {}
                }
                continue;
            }
            if self.status.held {
                let weight = self.status.weight;
                self.publish(run, self.at(Doing::Held { weight })).await?;
                let msg = self
                    .wait(run, HELD_TOPICS, None)
                    .await?
                    .ok_or(Stop::Interrupt(Interrupt::ShuttingDown))?;
                match self.command(run, &msg).await? {
                    Next::EndStep => {
                        self.status.held = false;
                        self.pos += 1;
                    }
                    Next::PromoteNow => return Ok(Flow::Promote),
                    Next::Revert { by, why } => return Ok(Flow::Revert { by, why }),
                    Next::Stay => {}
                }
                continue;
            }
            let Some(step) = self.plan.steps.get(self.pos).cloned() else {
                return Ok(Flow::Promote);
            };
            self.status.step = u32::try_from(self.pos + 1).unwrap_or(u32::MAX);
            let next = match step {
                // Promote never lowers traffic: a step below a weight set by hand is passed.
                CanaryStep::Weight(w) if ahead::passed_over(w, &self.status) => Next::EndStep,
                CanaryStep::Weight(w) => {
                    self.publish(run, self.at(Doing::Weight { weight: w }))
                        .await?;
                    match self.change(run, Change::Weight(w)).await? {
                        Changed::Done => {
                            self.status.manual = false;
                            self.history.push((self.pos, w));
                            Next::EndStep
                        }
                        Changed::Manual => Next::Stay,
                        Changed::Revert { by, why } => Next::Revert { by, why },
                    }
                }
                CanaryStep::Scale(p) => {
                    self.publish(run, self.at(Doing::Scale { percent: p }))
                        .await?;
                    self.step_change(run, Change::Scale(p)).await?
                }
                CanaryStep::Testers => {
                    self.publish(run, self.at(Doing::Testers)).await?;
                    self.step_change(run, Change::Testers).await?
                }
                CanaryStep::Pause(None) => {
                    self.publish(run, self.at(Doing::Pause)).await?;
                    let msg = self
                        .wait(run, PAUSE_TOPICS, None)
                        .await?
                        .ok_or(Stop::Interrupt(Interrupt::ShuttingDown))?;
                    self.command(run, &msg).await?
                }
                CanaryStep::Pause(Some(d)) => {
                    let until = ctx
                        .step(
                            StepName::Canary(CanaryCall::Deadline),
                            &steps::internal(),
                            |_| async move {
                                Ok(crate::sys::now_ms().saturating_add(
                                    i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
                                ))
                            },
                        )
                        .await?
                        .or_fail()?;
                    self.publish(run, self.at(Doing::Timed { until })).await?;
                    let left = Duration::from_millis(
                        u64::try_from(until - crate::sys::now_ms()).unwrap_or(0),
                    );
                    match self.wait(run, STEP_TOPICS, Some(left)).await? {
                        None => Next::EndStep,
                        Some(m) => self.command(run, &m).await?,
                    }
                }
                CanaryStep::Analysis(a) => match self.analysis(run, &a).await? {
                    Analysed::Passed => Next::EndStep,
                    Analysed::Revert(why) => Next::Revert {
                        by: "analysis".into(),
                        why,
                    },
                    Analysed::Pause(why) => {
                        self.decide(run, "pause", "analysis", &why).await?;
                        self.status.held = true;
                        Next::Stay
                    }
                    Analysed::Command(m) => self.command(run, &m).await?,
                },
            };
            match next {
                Next::EndStep => self.pos += 1,
                Next::PromoteNow => return Ok(Flow::Promote),
                Next::Revert { by, why } => return Ok(Flow::Revert { by, why }),
                Next::Stay => {}
            }
        }
    }

    /// A step that changes the router: it ends once served.
    async fn step_change(&mut self, run: &mut Run<'_>, change: Change) -> Result<Next, Stop> {
        Ok(match self.change(run, change).await? {
            Changed::Done => Next::EndStep,
            Changed::Manual => Next::Stay,
            Changed::Revert { by, why } => Next::Revert { by, why },
        })
    }

    /// The plugin must have slots and a traffic router, and testers and scale when the steps
    /// use them: checked before any target is touched, failing for good if not.
    fn check_capabilities(&self, run: &Run<'_>) -> Result<(), Stop> {
        let caps = &run.info.capabilities;
        let mut missing = Vec::new();
        for (needed, c) in [
            (true, Capability::Slots),
            (true, Capability::TrafficRouter),
            (self.plan.uses("testers"), Capability::Testers),
            (self.plan.uses("scale"), Capability::Scale),
        ] {
            if needed && !caps.has(c) {
                missing.push(c.as_str());
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        Err(Stop::Failed(format!(
            "plugin {} cannot run this canary: it lacks {} (it announces [{}]); nothing was \
             touched",
            run.spec.plugin,
            missing.join(", "),
            caps
        )))
    }

    /// Phase `Canary` at the current step.
    fn at(&self, doing: Doing) -> Phase {
        Phase::Canary {
            step: u32::try_from(self.pos + 1).unwrap_or(u32::MAX),
            of: u32::try_from(self.plan.steps.len()).unwrap_or(u32::MAX),
            doing,
        }
    }

    /// Publishes the phase, the commands it takes there and the canary's status, as one step.
    async fn publish(&mut self, run: &Run<'_>, phase: Phase) -> Result<(), Stop> {
        self.status.can_go_back = !self.history.is_empty() || self.status.manual;
        self.status.back_to = if self.status.manual {
            Some(self.history.last().map_or(0, |l| l.1))
        } else if self.history.is_empty() {
            None
        } else {
            let n = self.history.len();
            Some(if n >= 2 { self.history[n - 2].1 } else { 0 })
        };
        if let Phase::Canary { step, .. } = phase {
            self.status.step = step;
        }
        let accepts = run.accepts(&phase);
        run.ctx
            .set_events(&[
                ("phase", json(&phase)),
                (ACCEPTS, json(&accepts)),
                ("canary", json(&self.status)),
            ])
            .await?;
        Ok(())
    }
}

/// Commands taken while automatic steps run (between them, in a timed pause, in analysis).
const STEP_TOPICS: &[Topic] = &[
    Topic::Promote,
    Topic::Revert,
    Topic::Abort,
    Topic::Weight,
    Topic::Back,
    Topic::Pause,
];
/// Commands taken at an operator's pause.
const PAUSE_TOPICS: &[Topic] = &[
    Topic::Promote,
    Topic::Revert,
    Topic::Abort,
    Topic::Weight,
    Topic::Back,
];
/// Commands taken while held.
const HELD_TOPICS: &[Topic] = &[
    Topic::Resume,
    Topic::Promote,
    Topic::Revert,
    Topic::Abort,
    Topic::Weight,
    Topic::Back,
];

fn topics(t: &[Topic]) -> Vec<&'static str> {
    t.iter().map(|t| t.as_str()).collect()
}

/// The header testers send (`X-Canary: 1`), from RouteTesters' details (`header`, and
/// `value` or a `Name: value` header).
pub fn tester_header(details: &BTreeMap<String, String>) -> Option<(String, String)> {
    let h = details.get("header")?;
    match (h.split_once(':'), details.get("value")) {
        (_, Some(v)) => Some((h.trim().to_owned(), v.trim().to_owned())),
        (Some((n, v)), None) => Some((n.trim().to_owned(), v.trim().to_owned())),
        (None, None) => Some((h.trim().to_owned(), "1".to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_testers_header_is_read_from_the_plugins_details() {
        let d = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
        };
        assert_eq!(
            tester_header(&d(&[("header", "X-Canary: 1")])),
            Some(("X-Canary".into(), "1".into()))
        );
        assert_eq!(
            tester_header(&d(&[("header", "X-Canary"), ("value", "yes")])),
            Some(("X-Canary".into(), "yes".into()))
        );
        assert_eq!(tester_header(&d(&[("cookie", "canary=1")])), None);
    }

    #[test]
    fn commands_are_taken_where_they_mean_something() {
        let at = |doing| Phase::Canary {
            step: 2,
            of: 5,
            doing,
        };
        assert!(accepts(&at(Doing::Pause)).contains(&Topic::Promote));
        assert!(!accepts(&at(Doing::Pause)).contains(&Topic::Resume));
        assert!(accepts(&at(Doing::Held { weight: 20 })).contains(&Topic::Resume));
        assert!(accepts(&at(Doing::Weight { weight: 20 })).contains(&Topic::Pause));
        assert_eq!(accepts(&Phase::Slots), Vec::<Topic>::new());
        assert_eq!(accepts(&Phase::Promoting), Vec::<Topic>::new());
        // A failed router call waits for a decision; a failed revert cannot be reverted.
        let stuck = |reverting| {
            accepts(&at(Doing::RouterFailed {
                call: "set weight 50%".into(),
                weight: 10,
                reverting,
            }))
        };
        assert_eq!(
            stuck(false),
            vec![Topic::Retry, Topic::Revert, Topic::Weight, Topic::Abandon]
        );
        assert_eq!(stuck(true), vec![Topic::Retry, Topic::Abandon]);
    }
}
