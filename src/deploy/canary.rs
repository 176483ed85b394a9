//! The canary workflow (DESIGN §6): plan → the plugin's capabilities → validate → PrepareSlots
//! (its state travels in every later call) → DeployCandidate on every target (the same fan-out,
//! parallelism, retries and guided failure as a deploy) → RouteTesters → the steps (weights,
//! pauses, scale, analysis) → PromoteCandidate (the releases are recorded with it) →
//! RetirePrevious. An operator promotes (ends a pause, or skips the rest), reverts, sets a
//! weight by hand or steps `back` (both hold the automatic steps until `resume` or `promote`),
//! and pauses. Every decision the canary takes by itself (an analysis that fails reverts, one
//! that cannot tell pauses) is journaled with why.
//!
//! Everything it decides comes from recorded steps and consumed commands, so a restart replays
//! to the same place; there it re-asserts the recorded weight (SetCandidateWeight is
//! idempotent) before going on, and while it waits it measures the plugin's actual weight.

pub mod analysis;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use self::analysis::{Seen, Verdict};
use super::hooks;
use super::releases::{self, Live};
use super::spine::{self, FanOut, OrFail, Payload, Run, Stop, json};
use super::state::{Action, CanaryCall, Doing, Ending, Kind, Phase, StepName, TargetState, Topic};
use super::steps;
use super::{DeployEnv, DeployInput, Report, outcome};
use crate::config::{Analysis, Canary, CanaryStep, EnvSpec, Event};
use crate::operator::Operator;
use crate::plugin::{Capability, OnError, PluginHandle, Request};
use crate::workflow::store::{ACCEPTS, Message};
use crate::workflow::{Interrupt, RetryPolicy, RunOutcome, StepError, WfCtx};

/// Why a target's candidate never ran, in a canary's report.
const NOT_STARTED: &str = "not started: the canary stopped before it";
/// How often the actual weight is read while the canary waits.
const MEASURE_EVERY: Duration = Duration::from_secs(5);

/// What a canary publishes for consoles (event `canary`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanaryStatus {
    /// The step it is at, from 1; 0 before the steps; past the last once they are done.
    pub step: u32,
    /// Percentage of traffic sent to the candidate, as set.
    pub weight: u32,
    /// What the plugin reported right after the weight was set.
    #[serde(default)]
    pub actual: Option<u32>,
    /// The weight was set by an operator's hand, not by a step.
    #[serde(default)]
    pub manual: bool,
    /// Held by an operator: the automatic steps wait for `resume` or `promote`.
    #[serde(default)]
    pub held: bool,
    /// The candidate's scale, once set.
    #[serde(default)]
    pub scale: Option<u32>,
    /// What RouteTesters returned (the header or cookie that reaches the candidate).
    #[serde(default)]
    pub testers: BTreeMap<String, String>,
    /// Analysis runs, oldest first.
    #[serde(default)]
    pub runs: Vec<AnalysisRun>,
    /// Decisions and why, oldest first.
    #[serde(default)]
    pub decisions: Vec<Decision>,
    /// PrepareSlots' state.
    #[serde(default)]
    pub slots: Option<serde_json::Value>,
    /// A weight step before `back` can return to (the step weights set so far).
    #[serde(default)]
    pub can_go_back: bool,
    /// The weight `back` would go to.
    #[serde(default)]
    pub back_to: Option<u32>,
}

/// One run of an analysis check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnalysisRun {
    /// The canary step, from 1.
    pub step: u32,
    /// The run, from 1.
    pub run: u32,
    /// Runs in all.
    pub of: u32,
    /// What it saw.
    #[serde(flatten)]
    pub seen: Seen,
    /// Epoch ms.
    pub at: i64,
}

/// A decision: who took it (an operator, or the canary's analysis) and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// `revert`, `pause`, `promote`, `weight`, `back`, `resume`.
    pub action: String,
    /// An operator, or `analysis`.
    pub by: String,
    /// Why: the check, the value seen, the threshold, an excerpt.
    pub why: String,
    /// Epoch ms.
    pub at: i64,
}

/// The plugin's weight as measured while the canary waits (event `canary_actual`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actual {
    /// What CandidateWeight returned.
    pub weight: Option<u32>,
    /// Why it could not be read.
    #[serde(default)]
    pub error: Option<String>,
    /// Epoch ms.
    pub at: i64,
}

/// The weight set, and what the plugin reported right after.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct WeightSet {
    set: u32,
    actual: Option<u32>,
}

/// The commands a canary takes where it is (DESIGN §6).
pub fn accepts(phase: &Phase) -> Vec<Topic> {
    use Topic as T;
    match phase {
        Phase::Candidate { .. } => vec![T::Revert],
        Phase::AwaitingDecision { .. } => vec![T::Retry, T::Revert],
        Phase::Canary { doing, .. } => match doing {
            Doing::Pause => vec![T::Promote, T::Revert, T::Weight, T::Back],
            Doing::Held { .. } => vec![T::Resume, T::Promote, T::Revert, T::Weight, T::Back],
            _ => vec![T::Promote, T::Revert, T::Weight, T::Back, T::Pause],
        },
        _ => Vec::new(),
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

/// How an analysis ended.
enum Analysed {
    Passed,
    Revert(String),
    Pause(String),
    Command(Message),
}

/// Runs a canary from its stored inputs.
pub async fn run(env: Arc<DeployEnv>, ctx: WfCtx, inputs: String) -> Result<RunOutcome, Interrupt> {
    let input: DeployInput = match serde_json::from_str(&inputs) {
        Ok(i) => i,
        Err(e) => return Ok(Report::bad_inputs(Kind::Canary, &e)),
    };
    outcome(canary(&env, &ctx, &input.spec).await)
}

async fn canary(env: &DeployEnv, ctx: &WfCtx, spec: &EnvSpec) -> Result<Report, Interrupt> {
    let mut run = match Run::begin(env, ctx, spec, Kind::Canary).await {
        Ok(r) => r,
        Err(Stop::Interrupt(i)) => return Err(i),
        Err(Stop::Failed(why) | Stop::Abort(why)) => {
            let mut r = Report::new(Kind::Canary, &spec.artifact.version);
            r.message = why;
            return spine::end(ctx, r).await;
        }
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
    let mut flight = Flight {
        plan,
        status: CanaryStatus::default(),
        pos: 0,
        history: Vec::new(),
        reasserted: false,
    };
    let report = match flight.body(&mut run).await {
        Ok(r) => r,
        Err(Stop::Interrupt(i)) => return Err(i),
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
    /// This run has re-asserted the recorded weight after a restart.
    reasserted: bool,
}

impl Flight {
    async fn body(&mut self, run: &mut Run<'_>) -> Result<Report, Stop> {
        let (env, ctx, spec) = (run.env, run.ctx, run.spec);
        self.check_capabilities(run)?;
        run.validate().await?;
        let before: BTreeMap<String, Live> = ctx
            .step(StepName::ReleasesBefore, &steps::internal(), |_| async {
                let rows = env
                    .db
                    .releases(&spec.subject())
                    .await
                    .map_err(|e| StepError::Retryable(e.to_string()))?;
                Ok(releases::live(rows))
            })
            .await?
            .or_fail()?;
        let vars = hooks::Vars::before(&before);
        hooks::run_event(run, Event::PreDeploy, &vars)
            .await
            .map_err(|e| match e {
                Stop::Failed(why) => Stop::Failed(format!("{why}; nothing was touched")),
                other => other,
            })?;
        self.publish(run, Phase::Slots).await?;
        let slots = run
            .plugin_step(
                StepName::Canary(CanaryCall::Slots),
                &steps::target_policy(spec),
                true,
                |h, req| async move {
                    slot_deployer(&h)?
                        .prepare_slots(&req)
                        .await
                        .map_err(StepError::from)
                },
            )
            .await?;
        run.traffic = Some(slots.clone());
        self.status.slots = Some(slots);
        // The candidate, target by target.
        let how = FanOut {
            action: Action::Candidate,
            on_error: OnError::Stop,
            guided: true,
        };
        let traffic = run.traffic.clone();
        let traffic = &traffic;
        let deployed = run
            .batches(
                how,
                |_| true,
                |t, info| {
                    let traffic = traffic.clone();
                    async move {
                        let h = env.plugin(spec).await?;
                        steps::candidate_target(env, spec, ctx.id(), &h, &t, traffic, info).await
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
        if !self.plan.uses("testers") && run.info.capabilities.has(Capability::Testers) {
            self.route_testers(run).await?;
        }
        loop {
            self.reassert_after_restart(run).await;
            // Commands sent meanwhile, oldest first.
            if let Some(msg) = ctx.poll_mailbox(&topics(STEP_TOPICS)).await? {
                match self.command(run, &msg).await? {
                    Next::EndStep => self.pos += 1,
                    Next::PromoteNow => break,
                    Next::Revert { by, why } => return self.revert(run, &by, &why).await,
                    Next::Stay => {}
                }
                continue;
            }
            if self.status.held {
                let weight = self.status.weight;
                self.publish(run, self.at(Doing::Held { weight })).await?;
                let msg = self.wait(run, HELD_TOPICS, None).await?;
                match msg {
                    Some(m) => match self.command(run, &m).await? {
                        Next::EndStep => {
                            self.status.held = false;
                            self.pos += 1;
                        }
                        Next::PromoteNow => break,
                        Next::Revert { by, why } => return self.revert(run, &by, &why).await,
                        Next::Stay => {}
                    },
                    None => return Err(Stop::Interrupt(Interrupt::ShuttingDown)),
                }
                continue;
            }
            let Some(step) = self.plan.steps.get(self.pos).cloned() else {
                break;
            };
            self.status.step = u32::try_from(self.pos + 1).unwrap_or(u32::MAX);
            match step {
                CanaryStep::Weight(w) => {
                    self.publish(run, self.at(Doing::Weight { weight: w }))
                        .await?;
                    self.set_weight(run, w).await?;
                    self.status.manual = false;
                    self.history.push((self.pos, w));
                    self.pos += 1;
                }
                CanaryStep::Scale(p) => {
                    self.publish(run, self.at(Doing::Scale { percent: p }))
                        .await?;
                    run.plugin_step(
                        StepName::Canary(CanaryCall::Scale),
                        &steps::target_policy(spec),
                        true,
                        |h, req| async move {
                            let s = h.deployer.slot_scaler().ok_or_else(|| {
                                StepError::Permanent(format!("plugin {} cannot scale", h.name))
                            })?;
                            s.scale_candidate(&req, p).await.map_err(StepError::from)
                        },
                    )
                    .await?;
                    self.status.scale = Some(p);
                    self.pos += 1;
                }
                CanaryStep::Testers => {
                    self.publish(run, self.at(Doing::Testers)).await?;
                    self.route_testers(run).await?;
                    self.pos += 1;
                }
                CanaryStep::Pause(None) => {
                    self.publish(run, self.at(Doing::Pause)).await?;
                    let msg = self.wait(run, PAUSE_TOPICS, None).await?;
                    let Some(m) = msg else {
                        return Err(Stop::Interrupt(Interrupt::ShuttingDown));
                    };
                    match self.command(run, &m).await? {
                        Next::EndStep => self.pos += 1,
                        Next::PromoteNow => break,
                        Next::Revert { by, why } => return self.revert(run, &by, &why).await,
                        Next::Stay => {}
                    }
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
                        None => self.pos += 1,
                        Some(m) => match self.command(run, &m).await? {
                            Next::EndStep => self.pos += 1,
                            Next::PromoteNow => break,
                            Next::Revert { by, why } => return self.revert(run, &by, &why).await,
                            Next::Stay => {}
                        },
                    }
                }
                CanaryStep::Analysis(a) => match self.analysis(run, &a).await? {
                    Analysed::Passed => self.pos += 1,
                    Analysed::Revert(why) => return self.revert(run, "analysis", &why).await,
                    Analysed::Pause(why) => {
                        self.decide(run, "pause", "analysis", &why).await?;
                        self.status.held = true;
                    }
                    Analysed::Command(m) => match self.command(run, &m).await? {
                        Next::EndStep => self.pos += 1,
                        Next::PromoteNow => break,
                        Next::Revert { by, why } => return self.revert(run, &by, &why).await,
                        Next::Stay => {}
                    },
                },
            }
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
        let mut report = self.promote(run, &before).await?;
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
        Ok(report)
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

    /// SetCandidateWeight, then CandidateWeight read back, as one step.
    async fn set_weight(&mut self, run: &Run<'_>, weight: u32) -> Result<(), Stop> {
        let set: WeightSet = run
            .plugin_step(
                StepName::Canary(CanaryCall::Weight),
                &steps::target_policy(run.spec),
                true,
                |h, req| async move {
                    let router = traffic_router(&h)?;
                    router
                        .set_candidate_weight(&req, weight)
                        .await
                        .map_err(StepError::from)?;
                    let actual = router.candidate_weight(&req).await.ok();
                    Ok(WeightSet {
                        set: weight,
                        actual,
                    })
                },
            )
            .await?;
        self.status.weight = set.set;
        self.status.actual = set.actual;
        crate::telemetry::metrics::get().canary_weights(
            (&run.spec.application, &run.spec.environment),
            set.set,
            set.actual,
        );
        // What the router reported now replaces what was measured before.
        if !run.ctx.replaying() {
            publish_actual(run, set.actual, None).await;
        }
        Ok(())
    }

    async fn route_testers(&mut self, run: &Run<'_>) -> Result<(), Stop> {
        let details: BTreeMap<String, String> = run
            .plugin_step(
                StepName::Canary(CanaryCall::Testers),
                &steps::target_policy(run.spec),
                true,
                |h, req| async move {
                    let t = h.deployer.tester_router().ok_or_else(|| {
                        StepError::Permanent(format!("plugin {} cannot route testers", h.name))
                    })?;
                    t.route_testers(&req).await.map_err(StepError::from)
                },
            )
            .await?;
        self.status.testers = details;
        Ok(())
    }

    /// Applies an operator's command (or a decision) to the steps.
    async fn command(&mut self, run: &Run<'_>, msg: &Message) -> Result<Next, Stop> {
        let p = Payload::of(msg);
        let by = spine::by(msg);
        let why = p.reason.clone().unwrap_or_default();
        let topic = Topic::parse(&msg.topic);
        let action = topic.map_or("?", Topic::as_str);
        self.note(action, &by, &why, msg.created_at);
        Ok(match topic {
            Some(Topic::Promote) if p.full => Next::PromoteNow,
            Some(Topic::Promote) => {
                self.status.held = false;
                Next::EndStep
            }
            Some(Topic::Revert | Topic::Abort) => Next::Revert {
                by,
                why: if why.is_empty() {
                    "no reason given".into()
                } else {
                    why
                },
            },
            Some(Topic::Weight) => {
                let w = p.weight.unwrap_or(self.status.weight).min(100);
                self.set_weight(run, w).await?;
                self.status.manual = true;
                self.status.held = true;
                Next::Stay
            }
            Some(Topic::Back) => {
                self.back(run).await?;
                Next::Stay
            }
            Some(Topic::Pause) => {
                self.status.held = true;
                Next::Stay
            }
            Some(Topic::Resume) => {
                self.status.held = false;
                Next::Stay
            }
            _ => Next::Stay,
        })
    }

    /// Back to the previous step's weight (from a weight set by hand: the last step's), held;
    /// the steps go on from the weight step that is undone.
    async fn back(&mut self, run: &Run<'_>) -> Result<(), Stop> {
        let target = if self.status.manual {
            self.history.last().map_or(0, |l| l.1)
        } else {
            let undone = self.history.pop();
            if let Some((pos, _)) = undone {
                self.pos = pos;
            }
            self.history.last().map_or(0, |l| l.1)
        };
        self.set_weight(run, target).await?;
        self.status.manual = false;
        self.status.held = true;
        Ok(())
    }

    /// Records an operator's command, for the status (when it was sent: the same on replay).
    fn note(&mut self, action: &str, by: &str, why: &str, at: i64) {
        self.status.decisions.push(Decision {
            action: action.to_owned(),
            by: by.to_owned(),
            why: why.to_owned(),
            at,
        });
    }

    /// A decision the canary takes by itself (`by` its analysis, or manent when the candidate
    /// failed), journaled with why, as one step.
    async fn decide(
        &mut self,
        run: &Run<'_>,
        action: &str,
        by: &str,
        why: &str,
    ) -> Result<(), Stop> {
        let subject = run.spec.subject();
        let id = run.ctx.id().to_owned();
        let step = run.ctx.reserve(1)[0];
        let (subject, id) = (&subject, &id);
        let decided: Decision = run
            .ctx
            .step_at(
                step,
                StepName::Canary(CanaryCall::Decide).into(),
                &steps::internal(),
                |_| async move {
                    let automatic = Operator {
                        name: "manent".into(),
                        client: None,
                    };
                    let entry = automatic.journal(
                        action,
                        Some(id),
                        Some(subject),
                        Some(format!("{action} decided by {by}")),
                        Some(why),
                    );
                    Ok((
                        Decision {
                            action: action.to_owned(),
                            by: by.to_owned(),
                            why: why.to_owned(),
                            at: crate::sys::now_ms(),
                        },
                        vec![crate::workflow::store::Effect::Record(entry.record())],
                    ))
                },
            )
            .await?
            .or_fail()?;
        self.status.decisions.push(decided);
        Ok(())
    }

    /// Runs an analysis step: its check `count` times, `interval` apart, commands taken between.
    async fn analysis(&mut self, run: &Run<'_>, a: &Analysis) -> Result<Analysed, Stop> {
        let step = u32::try_from(self.pos + 1).unwrap_or(u32::MAX);
        let (mut failed, mut inconclusive) = (0, 0);
        for i in 1..=a.count {
            self.publish(
                run,
                self.at(Doing::Analysis {
                    run: i,
                    runs: a.count,
                }),
            )
            .await?;
            let live = !run.ctx.replaying();
            let seen = self.check(run, a).await?;
            if live {
                let log = run.env.log.for_deployment(run.ctx.id());
                let line = format!(
                    "analysis {i}/{} at step {step} {}: {}{}",
                    a.count,
                    seen.verdict.as_str(),
                    seen.value,
                    if seen.excerpt.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", seen.excerpt)
                    }
                );
                match seen.verdict {
                    Verdict::Pass => log.info(&line),
                    _ => log.warn(&line),
                }
            }
            let verdict = seen.verdict;
            let detail = format!(
                "{}{}",
                seen.value,
                if seen.excerpt.is_empty() {
                    String::new()
                } else {
                    format!(": {}", seen.excerpt)
                }
            );
            self.status.runs.push(AnalysisRun {
                step,
                run: i,
                of: a.count,
                seen,
                at: crate::sys::now_ms(),
            });
            match verdict {
                Verdict::Pass => {}
                Verdict::Fail => failed += 1,
                Verdict::Inconclusive => inconclusive += 1,
            }
            if failed >= a.failure_limit {
                return Ok(Analysed::Revert(format!(
                    "analysis at step {step} ({}) failed {failed} of {i} runs (limit {}); last: \
                     {detail}",
                    a.check, a.failure_limit
                )));
            }
            if inconclusive >= a.inconclusive_limit {
                return Ok(Analysed::Pause(format!(
                    "analysis at step {step} ({}) could not tell {inconclusive} of {i} runs \
                     (limit {}); last: {detail}; promote, revert or set a weight",
                    a.check, a.inconclusive_limit
                )));
            }
            if i < a.count
                && let Some(m) = self.wait(run, STEP_TOPICS, Some(a.interval)).await?
            {
                return Ok(Analysed::Command(m));
            }
        }
        Ok(Analysed::Passed)
    }

    /// One run of the analysis check, as a step (a check never fails its step: what went
    /// wrong is its verdict).
    async fn check(&self, run: &Run<'_>, a: &Analysis) -> Result<Seen, Stop> {
        let spec = run.spec;
        let env: BTreeMap<String, String> = [
            ("MANENT_DEPLOYMENT_ID", run.ctx.id().to_owned()),
            ("MANENT_APPLICATION", spec.application.clone()),
            ("MANENT_ENVIRONMENT", spec.environment.clone()),
            ("MANENT_VERSION", spec.artifact.version.clone()),
            ("MANENT_CANARY_WEIGHT", self.status.weight.to_string()),
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("HOME", std::env::var("HOME").unwrap_or_default()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let tester_header = tester_header(&self.status.testers);
        let limit = match &a.check {
            crate::config::Check::Http(h) => h.timeout + Duration::from_secs(1),
            crate::config::Check::Command { .. } => spec.step_timeout,
        };
        // A check never fails its step; its retries are for the attempts a crash cut off.
        let policy = RetryPolicy {
            max_retries: 3,
            timeout: Some(limit + Duration::from_secs(5)),
            ..steps::internal()
        };
        let processes = &run.env.processes;
        let (check, env, tester_header) = (&a.check, &env, &tester_header);
        let dir = run.spec.workdir.as_path();
        run.ctx
            .step(
                StepName::Canary(CanaryCall::Check),
                &policy,
                |_| async move {
                    let cx = analysis::Context {
                        env: env.clone(),
                        tester_header: tester_header.clone(),
                        processes,
                        dir,
                    };
                    Ok(analysis::run(check, &cx, limit).await)
                },
            )
            .await?
            .or_fail()
    }

    /// Waits for a command on `topics` (up to `timeout`), reading the plugin's actual weight
    /// meanwhile. `None` when the time is up.
    async fn wait(
        &mut self,
        run: &Run<'_>,
        topics_: &[Topic],
        timeout: Option<Duration>,
    ) -> Result<Option<Message>, Stop> {
        // A restart that resumes inside a wait re-asserts the weight before waiting again.
        self.reassert_after_restart(run).await;
        let t = topics(topics_);
        let recv = run.ctx.recv(&t, timeout);
        tokio::pin!(recv);
        // Only once the run is live: a replayed wait returns at once.
        let measuring = !run.ctx.replaying();
        loop {
            tokio::select! {
                r = &mut recv => {
                    let msg = r?;
                    if timeout.is_none() && msg.is_none() {
                        return Err(Stop::Interrupt(Interrupt::ShuttingDown));
                    }
                    return Ok(msg);
                }
                () = tokio::time::sleep(MEASURE_EVERY), if measuring => {
                    measure(run).await;
                }
            }
        }
    }

    /// After a restart, once the replay has caught up: the recorded weight is set again, in
    /// case the router lost it or drifted while no engine watched (not a step: it is
    /// idempotent and changes nothing the canary decides).
    async fn reassert_after_restart(&mut self, run: &Run<'_>) {
        if self.reasserted || !run.ctx.resumed() || run.ctx.replaying() {
            return;
        }
        self.reasserted = true;
        if self.history.is_empty() && !self.status.manual {
            return;
        }
        let weight = self.status.weight;
        let log = &run.env.log;
        match with_plugin(run, |h, req| async move {
            let router = traffic_router(&h)?;
            router
                .set_candidate_weight(&req, weight)
                .await
                .map_err(StepError::from)?;
            router.candidate_weight(&req).await.map_err(StepError::from)
        })
        .await
        {
            Ok(actual) => {
                log.for_deployment(run.ctx.id()).info(&format!(
                    "canary resumed: weight {weight}% set again; the router reports {actual}%"
                ));
                publish_actual(run, Some(actual), None).await;
            }
            Err(e) => {
                log.for_deployment(run.ctx.id()).warn(&format!(
                    "canary resumed: setting the weight {weight}% again failed: {e}"
                ));
            }
        }
    }

    /// Takes the candidate out of traffic and ends the canary, reverted.
    async fn revert(&mut self, run: &mut Run<'_>, by: &str, why: &str) -> Result<Report, Stop> {
        if by == "analysis" || by == "manent" {
            self.decide(run, "revert", by, why).await?;
        }
        self.status.held = false;
        self.publish(run, Phase::Reverting).await?;
        run.plugin_step(
            StepName::Canary(CanaryCall::Revert),
            &steps::target_policy(run.spec),
            true,
            |h, req| async move {
                slot_deployer(&h)?
                    .revert_candidate(&req)
                    .await
                    .map_err(StepError::from)
            },
        )
        .await?;
        self.status.weight = 0;
        self.status.actual = None;
        let message = if by == "analysis" || by == "manent" {
            format!("reverted automatically: {why}; the stable release stays live")
        } else {
            format!("reverted by {by} ({why}); the stable release stays live")
        };
        let mut report = run.report(Ending::Reverted, message, NOT_STARTED);
        for t in &mut report.targets {
            if t.status == TargetState::Candidate {
                t.status = TargetState::Reverted;
                t.message = "candidate taken out of traffic".into();
            }
        }
        self.publish(run, Phase::Done).await?;
        Ok(report)
    }

    /// PromoteCandidate (the releases commit with it), then RetirePrevious.
    async fn promote(
        &mut self,
        run: &mut Run<'_>,
        before: &BTreeMap<String, Live>,
    ) -> Result<Report, Stop> {
        self.status.held = false;
        self.status.step = u32::try_from(self.plan.steps.len() + 1).unwrap_or(u32::MAX);
        self.publish(run, Phase::Promoting).await?;
        let (spec, wf) = (run.spec, run.ctx.id().to_owned());
        let targets: Vec<_> = run.plan.targets().map(|(_, t)| t.clone()).collect();
        let (targets, wf) = (&targets, &wf);
        run.plugin_step_with(
            StepName::Canary(CanaryCall::Promote),
            &steps::target_policy(spec),
            true,
            |h, req| async move {
                slot_deployer(&h)?
                    .promote_candidate(&req)
                    .await
                    .map_err(StepError::from)?;
                Ok(((), steps::promoted_releases(spec, wf, targets, before)))
            },
        )
        .await?;
        self.status.weight = 100;
        run.plugin_step(
            StepName::Canary(CanaryCall::Retire),
            &steps::target_policy(spec),
            true,
            |h, req| async move {
                slot_deployer(&h)?
                    .retire_previous(&req)
                    .await
                    .map_err(StepError::from)
            },
        )
        .await?;
        let mut report = run.report(
            Ending::Deployed,
            format!(
                "{} promoted on {} of {}",
                spec.artifact.version,
                super::plan::count(targets.len(), "target"),
                spec.subject()
            ),
            NOT_STARTED,
        );
        for t in &mut report.targets {
            if t.status == TargetState::Candidate {
                t.status = TargetState::Deployed;
            }
        }
        self.publish(run, Phase::Done).await?;
        Ok(report)
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

fn slot_deployer(h: &PluginHandle) -> Result<&dyn crate::plugin::SlotDeployer, StepError> {
    h.deployer
        .slot_deployer()
        .ok_or_else(|| StepError::Permanent(format!("plugin {} has no slots", h.name)))
}

fn traffic_router(h: &PluginHandle) -> Result<&dyn crate::plugin::TrafficRouter, StepError> {
    h.deployer
        .traffic_router()
        .ok_or_else(|| StepError::Permanent(format!("plugin {} routes no traffic", h.name)))
}

/// A plugin call outside the checkpoint log (what the canary measures), with the slots' state.
async fn with_plugin<T, F, Fut>(run: &Run<'_>, call: F) -> Result<T, StepError>
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
        run.plan.request_targets(),
        run.par,
        secrets,
        None,
        &env.processes,
    );
    req.traffic.clone_from(&run.traffic);
    tokio::time::timeout(spec.step_timeout, call(h, req))
        .await
        .map_err(|_| StepError::Retryable("no answer within the step timeout".into()))?
}

/// Reads the plugin's actual weight and publishes it.
async fn measure(run: &Run<'_>) {
    let read = with_plugin(run, |h, req| async move {
        traffic_router(&h)?
            .candidate_weight(&req)
            .await
            .map_err(StepError::from)
    })
    .await;
    match read {
        Ok(w) => {
            crate::telemetry::metrics::get()
                .canary_actual((&run.spec.application, &run.spec.environment), w);
            publish_actual(run, Some(w), None).await;
        }
        Err(e) => publish_actual(run, None, Some(e.to_string())).await,
    }
}

async fn publish_actual(run: &Run<'_>, weight: Option<u32>, error: Option<String>) {
    let actual = Actual {
        weight,
        error,
        at: crate::sys::now_ms(),
    };
    let _ = run.ctx.publish(&[("canary_actual", json(&actual))]).await;
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
    }
}
