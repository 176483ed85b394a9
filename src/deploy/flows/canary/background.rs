//! Background analysis (`canary.analysis`, Argo Rollouts' background analysis): its check runs
//! every `interval` while the canary is live — at every wait: an operator's pause, a timed
//! pause, between an analysis step's runs, held by an operator — and `failure_limit` failures
//! revert the canary. A run is not a durable step (when it runs depends on the clock, which a
//! replay must not): it is published as it is seen, and a failure acts through the mailbox, as
//! an operator's `revert` would — sent by `analysis` with the check, the numbers and the limit,
//! so the journal, the decision and the exit code say the analysis reverted it. An
//! inconclusive run (too few requests) is shown and counted, never acted on alone.

use std::time::Duration;

use tokio::time::Instant;

use super::Flight;
use super::analysis::{Seen, Verdict};
use crate::deploy::canary_status::BackgroundStatus;
use crate::deploy::command::{self, OperatorCommand};
use crate::deploy::run::{Run, json};
use crate::operator::Operator;

/// What the background analysis has seen in this run.
#[derive(Debug, Default)]
pub struct Background {
    /// When its next run is due (`None`: not started; the first is due one interval after the
    /// candidate takes traffic).
    next: Option<Instant>,
    /// Runs, failures and inconclusive runs so far.
    runs: u32,
    failures: u32,
    inconclusive: u32,
    /// The revert it asked for (it asks once).
    reverting: bool,
}

impl Flight {
    /// The router confirmed the candidate serving at `at_ms` (epoch): analysis windows start
    /// there, and the background analysis' first run is one interval later.
    pub(super) fn began_serving(&mut self, run: &Run<'_>, at_ms: i64) {
        self.status.serving_since = Some(at_ms);
        if run.ctx.replaying() {
            return;
        }
        if let Some(a) = &self.plan.analysis {
            let ago = u64::try_from(crate::sys::now_ms() - at_ms).unwrap_or(0);
            let due = a.interval.saturating_sub(Duration::from_millis(ago));
            self.background.next = Some(Instant::now() + due);
        }
    }

    /// How long until the background analysis' next run, when it has one.
    pub(super) fn background_due(&mut self) -> Option<Duration> {
        let a = self.plan.analysis.as_ref()?;
        if self.background.reverting {
            return None;
        }
        let next = *self
            .background
            .next
            .get_or_insert_with(|| Instant::now() + a.interval);
        Some(next.saturating_duration_since(Instant::now()))
    }

    /// One run of the background analysis; at its failure limit, a revert sent by `analysis`.
    pub(super) async fn background_run(&mut self, run: &Run<'_>) {
        let Some(a) = self.plan.analysis.clone() else {
            return;
        };
        // Bounded as the watch's reads are: a silent plugin or server is an inconclusive run,
        // and the wait goes on taking commands.
        let limit = a.interval.max(super::watch::WATCH_CALL);
        let started = std::time::Instant::now();
        let seen = tokio::time::timeout(limit, Box::pin(self.run_check(run, &a)))
            .await
            .unwrap_or_else(|_| Seen {
                verdict: Verdict::Inconclusive,
                value: format!(
                    "no answer within {} (the plugin or the check is hung)",
                    humantime::format_duration(limit)
                ),
                excerpt: String::new(),
                duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                traffic: None,
            });
        let b = &mut self.background;
        b.next = Some(Instant::now() + a.interval);
        b.runs += 1;
        match seen.verdict {
            Verdict::Pass => {}
            Verdict::Fail => b.failures += 1,
            Verdict::Inconclusive => b.inconclusive += 1,
        }
        let log = run
            .env
            .log
            .for_deployment(run.ctx.id())
            .with_source(super::gate::ANALYSIS);
        let line = format!(
            "background analysis {} ({}): {}: {}",
            b.runs,
            a.check,
            seen.verdict.as_str(),
            seen.value
        );
        match seen.verdict {
            Verdict::Pass => log.info(&line),
            _ => log.warn(&line),
        }
        let status = BackgroundStatus {
            runs: b.runs,
            failures: b.failures,
            inconclusive: b.inconclusive,
            failure_limit: a.failure_limit,
            interval_ms: u64::try_from(a.interval.as_millis()).unwrap_or(u64::MAX),
            last: seen.clone(),
            at: crate::sys::now_ms(),
        };
        let _ = run
            .ctx
            .publish(&[("canary_background", json(&status))])
            .await;
        if b.failures < a.failure_limit || b.reverting {
            return;
        }
        let why = format!(
            "background analysis ({}) failed {} of {} runs (limit {}); last: {}",
            a.check, b.failures, b.runs, a.failure_limit, seen.value
        );
        let analysis = Operator {
            name: "analysis".into(),
            client: None,
        };
        match command::send(
            run.env.db.as_ref(),
            &analysis,
            run.ctx.id(),
            &OperatorCommand::Revert,
            Some(&why),
        )
        .await
        {
            Ok(_) => {
                self.background.reverting = true;
                log.warn(&format!("reverting: {why}"));
            }
            // Not taken now (it is already reverting, or ending): the next run asks again.
            Err(e) => log.warn(&format!("background analysis could not revert: {e}")),
        }
    }
}
