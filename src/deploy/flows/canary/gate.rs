//! An analysis step: its check run `count` times, `interval` apart, with the commands sent
//! meanwhile taken between runs; every run is a durable step (a restart does not count a run
//! twice), and what it saw is published with the canary's status.

use std::collections::BTreeMap;
use std::time::Duration;

use super::analysis::{self, Seen, Verdict};
use super::slots::{traffic_router, with_plugin};
use super::{Analysed, Flight, STEP_TOPICS, tester_header};
use crate::config::Analysis;
use crate::deploy::canary_status::AnalysisRun;
use crate::deploy::run::{OrFail, Run, Stop};
use crate::deploy::state::{CanaryCall, Doing, StepName};
use crate::deploy::steps;
use crate::workflow::{RetryPolicy, StepError};

/// The source of the lines analysis runs log: a headless command prints them as they come,
/// whatever their level, and a console can filter them.
pub const ANALYSIS: &str = "analysis";

impl Flight {
    /// Runs an analysis step: its check `count` times, `interval` apart, commands taken between.
    pub(super) async fn analysis(&mut self, run: &Run<'_>, a: &Analysis) -> Result<Analysed, Stop> {
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
                let log = run
                    .env
                    .log
                    .for_deployment(run.ctx.id())
                    .with_source(ANALYSIS);
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
        // A check never fails its step; its retries are for the attempts a crash cut off.
        let policy = RetryPolicy {
            max_retries: 3,
            timeout: Some(limit(run, a) + Duration::from_secs(5)),
            ..steps::internal()
        };
        run.ctx
            .step(
                StepName::Canary(CanaryCall::Check),
                &policy,
                |_| async move { Ok(self.run_check(run, a).await) },
            )
            .await?
            .or_fail()
    }

    /// One run of `a`'s check, outside the checkpoint log (the step above records it; the
    /// background analysis acts on it through the mailbox).
    pub(super) async fn run_check(&self, run: &Run<'_>, a: &Analysis) -> Seen {
        match &a.check {
            crate::config::Check::Router(r) => {
                let window = self.status.traffic_window(r.window);
                return on_traffic(run, window, |t, c, s| analysis::judge(r, t, c, s)).await;
            }
            crate::config::Check::Compare(cmp) => {
                let window = self.status.traffic_window(cmp.window);
                return on_traffic(run, window, |t, c, s| super::compare::judge(cmp, t, c, s))
                    .await;
            }
            _ => {}
        }
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
        let routing = run.routing.clone().unwrap_or_default();
        let vars = BTreeMap::from([
            ("slot", routing.candidate.slot.clone()),
            ("version", spec.artifact.version.clone()),
            ("stable_slot", routing.stable.slot.clone()),
            ("stable_version", routing.stable.version.clone()),
            ("application", spec.application.clone()),
            ("environment", spec.environment.clone()),
            ("deployment", run.ctx.id().to_owned()),
        ]);
        let serving_for = self.status.serving_for(crate::sys::now_ms());
        let cx = analysis::Context {
            env,
            tester_header: tester_header(&self.status.testers),
            processes: &run.env.processes,
            dir: run.spec.workdir.as_path(),
            vars,
            serving_for,
        };
        analysis::run(&a.check, &cx, limit(run, a)).await
    }
}

impl Flight {
    /// Says before any traffic moves when a latency limit of this canary's analysis cannot be
    /// judged: the router reports no latency (HAProxy's counters). Its runs would be
    /// inconclusive (the canary waits for an operator at each), never passed; the operator
    /// learns it now, not at the gate. Asked once, of a window that holds nothing yet.
    pub(super) async fn warn_unmeasurable(&self, run: &Run<'_>) {
        if run.ctx.replaying() {
            return;
        }
        let latency = |c: &crate::config::Check| match c {
            crate::config::Check::Router(r) => r.max_p99.is_some(),
            crate::config::Check::Compare(c) => c.metric == crate::config::CompareMetric::P99,
            _ => false,
        };
        let mut checks: Vec<String> = self
            .plan
            .steps
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                crate::config::CanaryStep::Analysis(a) if latency(&a.check) => {
                    Some(format!("analysis at step {} ({})", i + 1, a.check))
                }
                _ => None,
            })
            .collect();
        if let Some(a) = self.plan.analysis.as_ref().filter(|a| latency(&a.check)) {
            checks.push(format!("background analysis ({})", a.check));
        }
        if checks.is_empty() {
            return;
        }
        // An empty window: only what the router can measure is asked (HAProxy's counters wait
        // for no second reading on it).
        let window = crate::plugin::TrafficWindow {
            window: Duration::ZERO,
            since_ms: Some(crate::sys::now_ms()),
        };
        let read = tokio::time::timeout(
            Duration::from_secs(10),
            with_plugin(run, |h, req| async move {
                traffic_router(&h)?
                    .traffic(&req, window)
                    .await
                    .map_err(StepError::from)
            }),
        )
        .await;
        let Ok(Ok(t)) = read else {
            return;
        };
        if t.slots.iter().any(|s| s.no_latency) {
            run.env
                .log
                .for_deployment(run.ctx.id())
                .with_source(ANALYSIS)
                .warn(&format!(
                    "{}: {}; every such run will be inconclusive and wait for you",
                    checks.join(", "),
                    analysis::unmeasured_latency(&t)
                ));
        }
    }
}

/// How long one run of `a`'s check may take.
fn limit(run: &Run<'_>, a: &Analysis) -> Duration {
    match &a.check {
        crate::config::Check::Http(h) => h.timeout + Duration::from_secs(1),
        crate::config::Check::Prometheus(p) => p.timeout + Duration::from_secs(1),
        crate::config::Check::Compare(_) => run.spec.step_timeout,
        crate::config::Check::Command { .. } | crate::config::Check::Router(_) => {
            run.spec.step_timeout
        }
    }
}

/// A run on the router's traffic: what it observed over `window`, judged.
async fn on_traffic(
    run: &Run<'_>,
    window: crate::plugin::TrafficWindow,
    judge: impl FnOnce(&crate::plugin::Traffic, &str, &str) -> (Verdict, String),
) -> Seen {
    let started = std::time::Instant::now();
    let (candidate, stable) = run.routing.as_ref().map_or(("", ""), |r| {
        (r.candidate.slot.as_str(), r.stable.slot.as_str())
    });
    let read = with_plugin(run, |h, req| async move {
        let name = h.name.clone();
        traffic_router(&h)?
            .traffic(&req, window)
            .await
            .map_err(|e| StepError::Permanent(format!("{name}: {e}")))
    })
    .await
    .map(|t| crate::plugin::Traffic {
        since_ms: window.since_ms,
        ..t
    })
    .map_err(|e| e.to_string());
    analysis::seen_of(read, (candidate, stable), started.elapsed(), judge)
}
