//! What a canary publishes for consoles and the CLI: where it is ([`CanaryStatus`], a durable
//! event), what the router was last read to serve ([`Actual`], measured while it waits), its
//! analysis runs ([`Seen`]) and the decisions taken, with why, and its drift episodes
//! ([`Drift`]). The read model reads them; nothing here runs a canary.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::plugin::Routing;

/// What a canary publishes for consoles (event `canary`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanaryStatus {
    /// The step it is at, from 1; 0 before the steps; past the last once they are done.
    pub step: u32,
    /// Percentage of traffic sent to the candidate, as set.
    pub weight: u32,
    /// What the router served right after the weight was set (read back).
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
    /// What RouteTesters returned (the header or cookie that reaches the candidate), while
    /// testers are routed.
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
    /// The routing manent recorded (slots, weight, testers, scale, retired): what the router
    /// is told and what its read-back is compared with.
    #[serde(default)]
    pub routing: Option<Routing>,
    /// A router call that failed, in full, while the canary waits for a decision.
    #[serde(default)]
    pub router_error: Option<String>,
    /// When the candidate release began serving on its slot (epoch ms): the router read back
    /// the first weight above 0, or testers routed to it. Analysis counts no request from
    /// before: the slot served another release until then.
    #[serde(default)]
    pub serving_since: Option<i64>,
}

impl CanaryStatus {
    /// Who holds the steps, and why: the last pause, weight or back (an operator, or manent
    /// for router drift under `on_drift: hold`). `None` while not held.
    pub fn held_by(&self) -> Option<&Decision> {
        if !self.held {
            return None;
        }
        self.decisions
            .iter()
            .rev()
            .find(|d| matches!(d.action.as_str(), "pause" | "weight" | "back"))
    }

    /// What an analysis of the router's traffic reads: the last `window`, never from before
    /// the candidate began serving — nothing at all while it has not (the slot's traffic until
    /// then was another release's).
    pub fn traffic_window(&self, window: std::time::Duration) -> crate::plugin::TrafficWindow {
        crate::plugin::TrafficWindow {
            window,
            since_ms: self.since(crate::sys::now_ms()),
        }
    }

    /// How long the candidate has served at `now_ms` (zero while it has not; `None` in records
    /// from before the moment was kept).
    pub fn serving_for(&self, now_ms: i64) -> Option<std::time::Duration> {
        self.since(now_ms)
            .map(|s| std::time::Duration::from_millis(u64::try_from(now_ms - s).unwrap_or(0)))
    }

    /// Where a window may start at `now_ms`: when the candidate began serving, or now while it
    /// has not.
    fn since(&self, now_ms: i64) -> Option<i64> {
        let serving = self.weight > 0 || !self.testers.is_empty();
        match self.serving_since {
            Some(at) => Some(at),
            // Records from before the moment was kept: the window alone.
            None if serving => None,
            None => Some(now_ms),
        }
    }
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
    /// `revert`, `pause`, `promote`, `weight`, `back`, `resume`, `abandon`.
    pub action: String,
    /// An operator, or `analysis`.
    pub by: String,
    /// Why: the check, the value seen, the threshold, an excerpt.
    pub why: String,
    /// Epoch ms.
    pub at: i64,
}

/// The router as last read back while the canary is live (event `canary_actual`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actual {
    /// The candidate's weight it serves (`None`: it could not say).
    pub weight: Option<u32>,
    /// Why it could not be read.
    #[serde(default)]
    pub error: Option<String>,
    /// Epoch ms.
    pub at: i64,
    /// What it serves, read back (`None`: it cannot say, or it has no read-back of the whole).
    #[serde(default)]
    pub served: Option<Routing>,
    /// It runs a configuration manent did not write: why.
    #[serde(default)]
    pub foreign: Option<String>,
    /// How it differs from manent's record, one phrase each (empty: it serves what manent set).
    #[serde(default)]
    pub drift: Vec<String>,
    /// What was done about the drift: `corrected`, `held`, or why correcting failed.
    #[serde(default)]
    pub action: Option<String>,
    /// The engine read it (`false`: read by a command while no engine runs).
    #[serde(default = "yes")]
    pub by_engine: bool,
}

fn yes() -> bool {
    true
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The check passed.
    Pass,
    /// The check failed: counts towards the failure limit (a revert).
    Fail,
    /// The check could not tell (a timeout, an unreachable URL, an odd exit code): counts
    /// towards the inconclusive limit (a pause for an operator).
    Inconclusive,
}

impl Verdict {
    /// `passed`, `failed`, `inconclusive`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "passed",
            Verdict::Fail => "failed",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// What one run saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    /// Its verdict.
    pub verdict: Verdict,
    /// The value that decided it: `status 404 (expected 200)`, `exit 1`.
    pub value: String,
    /// The end of the output or body, for the record.
    pub excerpt: String,
    /// How long it took.
    pub duration_ms: u64,
    /// What the router observed, for a router check: the numbers behind the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<crate::plugin::Traffic>,
}

/// What the background analysis (`canary.analysis`) has seen, published as event
/// `canary_background`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackgroundStatus {
    /// Runs so far, and how many failed or could not tell.
    pub runs: u32,
    pub failures: u32,
    pub inconclusive: u32,
    /// Failures that revert the canary.
    pub failure_limit: u32,
    /// Every how long it runs, ms.
    pub interval_ms: u64,
    /// The last run.
    pub last: Seen,
    /// When the last run ended, epoch ms.
    pub at: i64,
}

/// One slot's share of a [`TrafficPoint`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotFigures {
    /// Requests it answered.
    pub requests: u64,
    /// Of which 5xx.
    pub errors: u64,
    /// The p99 of their upstream response time, ms (`None`: no request).
    #[serde(default)]
    pub p99_ms: Option<u32>,
}

impl SlotFigures {
    /// Its figures in `t`'s slot `slot`.
    pub fn of(t: &crate::plugin::Traffic, slot: &str) -> SlotFigures {
        let s = t.slot(slot);
        SlotFigures {
            requests: s.requests,
            errors: s.responses[3],
            p99_ms: s.p99_ms,
        }
    }

    /// 5xx per request, 0–1 (`None` without a request).
    pub fn error_rate(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.errors as f64 / self.requests as f64)
    }
}

/// What the router saw of the candidate and the stable release over one watch interval, read
/// while the canary is live; the series (event `canary_traffic`, newest last, the last
/// [`TRAFFIC_POINTS`]) is what the console charts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrafficPoint {
    /// When it was read, epoch ms.
    pub at: i64,
    /// The window it covers, ms.
    pub window_ms: u64,
    /// The candidate's figures.
    pub candidate: SlotFigures,
    /// The stable release's.
    pub stable: SlotFigures,
}

/// Traffic points kept: ten minutes at the default `watch` of 5 s.
pub const TRAFFIC_POINTS: usize = 120;

/// One drift episode, published as event `canary_drift` (the inbox and notifications read it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drift {
    /// When it was seen, epoch ms.
    pub at: i64,
    /// manent's record.
    pub expected: Routing,
    /// What the router served (`None`: it could not say).
    pub served: Option<Routing>,
    /// How they differ.
    pub differences: Vec<String>,
    /// `corrected`, `held`, or why correcting failed.
    pub action: String,
    /// It is over: the router serves manent's routing again.
    #[serde(default)]
    pub over: bool,
}
