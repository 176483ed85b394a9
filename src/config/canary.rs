//! The canary strategy as written in a descriptor, checked while it is read (so every error has
//! its line and column):
//!
//! ```yaml
//! strategy:
//!   canary:
//!     slider_step: 5        # how far ←/→ move the console's pending weight
//!     confirm_above: 50     # in production, a weight above this needs the environment typed
//!     watch: 5s             # how often the running router is read back while the canary is live
//!     on_drift: correct     # or `hold`: what a router serving something else than manent set gets
//!     steps:
//!       - testers: {}       # RouteTesters: testers reach the candidate before anyone else
//!       - weight: 10
//!       - pause: {}         # until an operator promotes
//!       - analysis: {http: {url: "http://127.0.0.1:8080/health"}, count: 3, interval: 10s}
//!       - weight: 50
//!       - pause: 5m         # a durable timer
//!       - scale: 100
//! ```
//!
//! Weights rise unless a step says otherwise (`weight: {to: 5, down: true}`).

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::error::nearest;
use super::values::{Dur, Rate};

/// The kinds of step a canary takes.
pub const STEP_KINDS: &[&str] = &["weight", "pause", "scale", "testers", "analysis"];

/// A canary: its steps, and how the console's slider moves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Canary {
    /// In order.
    pub steps: Vec<CanaryStep>,
    /// Percentage points one press of ←/→ moves the pending weight.
    pub slider_step: u32,
    /// In production, a weight above this needs the environment's name typed.
    pub confirm_above: u32,
    /// How often the running router's state is read back while the canary is live.
    #[serde(default = "default_watch", with = "crate::duration_ms")]
    pub watch: Duration,
    /// What drift (the router serving something else than manent set) gets.
    #[serde(default)]
    pub on_drift: OnDrift,
    /// Background analysis (`canary.analysis`): its check runs every `interval` from the first
    /// weight to the end, at every step and wait (an operator's pause, a hold), and
    /// `failure_limit` failures revert the canary. Its `count` is 0: it runs until the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<Analysis>,
}

/// What a canary does when the router serves something else than manent set.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum OnDrift {
    /// Set manent's routing again, and say so.
    #[default]
    Correct,
    /// Hold the canary and leave the router to the operator.
    Hold,
}

fn default_watch() -> Duration {
    Duration::from_secs(5)
}

impl Canary {
    /// True when a step of kind `kind` is in the plan.
    pub fn uses(&self, kind: &str) -> bool {
        self.steps.iter().any(|s| s.kind() == kind)
    }
}

/// One step of a canary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CanaryStep {
    /// Send this percentage of traffic to the candidate.
    Weight(u32),
    /// Wait: for an operator (`None`), or this long (a durable timer).
    Pause(#[serde(default, with = "crate::duration_ms::option")] Option<Duration>),
    /// Run the candidate on this percentage of its servers.
    Scale(u32),
    /// Route testers to the candidate.
    Testers,
    /// Run a check several times; failures revert, an inconclusive result pauses.
    Analysis(Analysis),
}

impl CanaryStep {
    /// `weight`, `pause`, …
    pub fn kind(&self) -> &'static str {
        match self {
            CanaryStep::Weight(_) => "weight",
            CanaryStep::Pause(_) => "pause",
            CanaryStep::Scale(_) => "scale",
            CanaryStep::Testers => "testers",
            CanaryStep::Analysis(_) => "analysis",
        }
    }
}

impl fmt::Display for CanaryStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            CanaryStep::Weight(w) => format!("weight {w}%"),
            CanaryStep::Pause(None) => "pause until promoted".to_owned(),
            CanaryStep::Pause(Some(d)) => format!("pause {}", humantime::format_duration(*d)),
            CanaryStep::Scale(p) => format!("scale {p}%"),
            CanaryStep::Testers => "route testers".to_owned(),
            CanaryStep::Analysis(a) => format!("analysis: {}", a.check),
        };
        f.pad(&s)
    }
}

/// Argo-style analysis: `check` runs `count` times, `interval` apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Analysis {
    /// What is checked.
    pub check: Check,
    /// Runs.
    pub count: u32,
    /// Between runs.
    #[serde(with = "crate::duration_ms")]
    pub interval: Duration,
    /// Failures that revert the canary.
    pub failure_limit: u32,
    /// Inconclusive runs that pause it for an operator.
    pub inconclusive_limit: u32,
}

/// One check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// A shell command: exit 0 passes, 1 fails, anything else is inconclusive.
    Command {
        /// Run with `/bin/sh -c`.
        command: String,
    },
    /// An HTTP GET.
    Http(HttpCheck),
    /// The traffic the router itself observed the candidate take.
    Router(RouterCheck),
    /// A PromQL instant query whose value must stay within limits.
    Prometheus(PromCheck),
    /// The candidate's traffic against stable's over the same window.
    Compare(CompareCheck),
}

/// Kayenta's idea on the router's own record: the candidate's error rate or p99 per interval of
/// the window, ranked against stable's (Mann–Whitney), fails when it is higher by more than
/// `max_increase` — points of error rate, or a share of stable's p99 — and the test says the
/// difference is real. Too few requests or intervals is inconclusive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompareCheck {
    /// What is compared.
    pub metric: CompareMetric,
    /// The increase allowed, parts per million: of error rate (absolute), or of stable's p99.
    pub max_increase: u32,
    /// Fewer requests to either slot than this is inconclusive.
    pub min_requests: u64,
    /// How far back each run looks.
    #[serde(with = "crate::duration_ms")]
    pub window: Duration,
}

/// What a comparison ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CompareMetric {
    /// 5xx per request.
    ErrorRate,
    /// The 99th percentile of the upstream response time.
    P99,
}

impl fmt::Display for CompareCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, allowed) = match self.metric {
            CompareMetric::ErrorRate => {
                ("error rate", format!("+{} points", Rate(self.max_increase)))
            }
            CompareMetric::P99 => ("p99", format!("+{} of stable's", Rate(self.max_increase))),
        };
        write!(
            f,
            "{what} against stable over {}: at most {allowed}",
            humantime::format_duration(self.window)
        )
    }
}

/// A PromQL instant query (`{{slot}}`, `{{version}}`, `{{stable_slot}}`, `{{stable_version}}`,
/// `{{application}}`, `{{environment}}` and `{{deployment}}` replaced), judged by its value —
/// every series of it. No data (an empty result, NaN) is inconclusive, never a pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromCheck {
    /// The Prometheus server, `http://127.0.0.1:9090`.
    pub url: String,
    /// The query.
    pub query: String,
    /// The largest value that passes.
    #[serde(default)]
    pub max: Option<serde_json::Number>,
    /// The smallest value that passes.
    #[serde(default)]
    pub min: Option<serde_json::Number>,
    /// One query's time limit.
    #[serde(with = "crate::duration_ms")]
    pub timeout: Duration,
}

impl fmt::Display for PromCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut limits = Vec::new();
        if let Some(m) = &self.min {
            limits.push(format!("≥ {m}"));
        }
        if let Some(m) = &self.max {
            limits.push(format!("≤ {m}"));
        }
        write!(f, "prometheus `{}` {}", self.query, limits.join(", "))
    }
}

/// A judgement of the candidate's real traffic, from what the router observed over `window`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterCheck {
    /// The largest share of 5xx responses the candidate may give, parts per million.
    #[serde(default)]
    pub max_error_rate: Option<u32>,
    /// The slowest p99 of its upstream response time allowed.
    #[serde(default, with = "crate::duration_ms::option")]
    pub max_p99: Option<Duration>,
    /// Fewer requests to the candidate than this in the window is inconclusive, never a pass.
    pub min_requests: u64,
    /// How far back each run looks.
    #[serde(with = "crate::duration_ms")]
    pub window: Duration,
}

impl fmt::Display for RouterCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut limits = Vec::new();
        if let Some(r) = self.max_error_rate {
            limits.push(format!("5xx ≤ {}", Rate(r)));
        }
        if let Some(p) = self.max_p99 {
            limits.push(format!("p99 ≤ {}", humantime::format_duration(p)));
        }
        write!(
            f,
            "router traffic over {}: {}, at least {} requests",
            humantime::format_duration(self.window),
            limits.join(", "),
            self.min_requests
        )
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Command { command } => {
                let first = command.lines().next().unwrap_or_default();
                write!(f, "`{first}`")
            }
            Check::Http(h) => write!(f, "GET {} expects {}", h.url, h.status),
            Check::Router(r) => write!(f, "{r}"),
            Check::Prometheus(p) => write!(f, "{p}"),
            Check::Compare(c) => write!(f, "{c}"),
        }
    }
}

/// An HTTP probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpCheck {
    /// `http://` or `https://`.
    pub url: String,
    /// Headers sent, `Name: value`.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// Send the testers' header the plugin returned from RouteTesters (reach the candidate).
    #[serde(default)]
    pub tester: bool,
    /// The status that passes.
    pub status: u16,
    /// A regular expression the body must match to pass.
    #[serde(default)]
    pub body: Option<String>,
    /// One request's time limit.
    #[serde(with = "crate::duration_ms")]
    pub timeout: Duration,
}

/// `strategy: {canary: …}` as written.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CanarySpec {
    steps: Steps,
    #[serde(default)]
    slider_step: Option<u32>,
    #[serde(default)]
    confirm_above: Option<u32>,
    #[serde(default)]
    watch: Option<Dur>,
    #[serde(default)]
    on_drift: Option<OnDrift>,
    #[serde(default)]
    analysis: Option<AnalysisSpec>,
}

impl CanarySpec {
    /// The canary, its defaults filled in and its numbers checked.
    pub(crate) fn resolve<E: de::Error>(self) -> Result<Canary, E> {
        let slider_step = self.slider_step.unwrap_or(5);
        if !(1..=100).contains(&slider_step) {
            return Err(E::custom(format!(
                "slider_step {slider_step}: write 1 to 100 (percentage points per key press)"
            )));
        }
        let confirm_above = self.confirm_above.unwrap_or(50);
        if confirm_above > 100 {
            return Err(E::custom(format!(
                "confirm_above {confirm_above}: write a weight from 0 to 100"
            )));
        }
        if self.steps.0.is_empty() {
            return Err(E::custom(
                "a canary needs steps, e.g. `steps: [{weight: 10}, {pause: {}}, {weight: 50}]`",
            ));
        }
        let watch = self.watch.map_or_else(default_watch, |d| d.0);
        if watch < Duration::from_millis(200) {
            return Err(E::custom(format!(
                "watch {}: write 200ms or more (how often the router is read back)",
                humantime::format_duration(watch)
            )));
        }
        let analysis = match self.analysis {
            Some(a) => Some(a.background()?),
            None => None,
        };
        Ok(Canary {
            steps: self.steps.0,
            slider_step,
            confirm_above,
            watch,
            on_drift: self.on_drift.unwrap_or_default(),
            analysis,
        })
    }
}

/// The step list, weights checked as they come.
pub(super) struct Steps(Vec<CanaryStep>);

impl<'de> Deserialize<'de> for Steps {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Steps;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of steps, e.g. `[{weight: 10}, {pause: {}}]`")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Steps, A::Error> {
                let mut steps = Vec::new();
                LAST_WEIGHT.with(|l| l.set(0));
                while let Some(StepSpec { step }) = seq.next_element::<StepSpec>()? {
                    steps.push(step);
                }
                Ok(Steps(steps))
            }
        }
        d.deserialize_seq(V)
    }
}

thread_local! {
    /// The last weight of the step list being read: a weight step checks it rises while its
    /// own node is current, so the error points at that step.
    static LAST_WEIGHT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// One step as written: a map with one key.
pub(super) struct StepSpec {
    step: CanaryStep,
}

fn rising<E: de::Error>(w: u32, down: bool) -> Result<u32, E> {
    let last = LAST_WEIGHT.with(std::cell::Cell::get);
    if w < last && !down {
        return Err(E::custom(format!(
            "weight {w} after {last} sends less traffic to the candidate; write \
             `weight: {{to: {w}, down: true}}` if that is meant"
        )));
    }
    LAST_WEIGHT.with(|l| l.set(w));
    Ok(w)
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct WeightTo {
    to: u32,
    #[serde(default)]
    down: bool,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub(super) enum WeightSpec {
    Plain(u32),
    To(WeightTo),
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Empty {}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub(super) enum PauseSpec {
    Operator(Empty),
    Timed(Dur),
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AnalysisSpec {
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    http: Option<HttpSpec>,
    #[serde(default)]
    router: Option<RouterSpec>,
    #[serde(default)]
    prometheus: Option<PromSpec>,
    #[serde(default)]
    compare: Option<CompareSpec>,
    #[serde(default)]
    count: Option<u32>,
    #[serde(default)]
    interval: Option<Dur>,
    #[serde(default)]
    failure_limit: Option<u32>,
    #[serde(default)]
    inconclusive_limit: Option<u32>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "AnalysisHttp")]
pub(super) struct HttpSpec {
    url: String,
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    tester: bool,
    #[serde(default)]
    status: Option<u16>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    timeout: Option<Dur>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RouterSpec {
    #[serde(default)]
    max_error_rate: Option<Rate>,
    #[serde(default)]
    max_p99: Option<Dur>,
    #[serde(default)]
    min_requests: Option<u64>,
    #[serde(default)]
    window: Option<Dur>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CompareSpec {
    metric: CompareMetric,
    #[serde(default)]
    against: Option<String>,
    max_increase: Rate,
    #[serde(default)]
    min_requests: Option<u64>,
    #[serde(default)]
    window: Option<Dur>,
}

impl CompareSpec {
    fn resolve<E: de::Error>(self) -> Result<CompareCheck, E> {
        if self.against.as_deref().is_some_and(|a| a != "stable") {
            return Err(E::custom(
                "analysis.compare.against: the candidate is compared with `stable`",
            ));
        }
        let window = self.window.map_or(Duration::from_secs(120), |d| d.0);
        if window < Duration::from_secs(10) || window > Duration::from_secs(3600) {
            return Err(E::custom(format!(
                "analysis.compare.window {}: write 10s to 1h (it is cut in about twenty intervals)",
                humantime::format_duration(window)
            )));
        }
        Ok(CompareCheck {
            metric: self.metric,
            max_increase: self.max_increase.0,
            min_requests: self.min_requests.unwrap_or(100).max(1),
            window,
        })
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PromSpec {
    url: String,
    query: String,
    #[serde(default)]
    max: Option<serde_json::Number>,
    #[serde(default)]
    min: Option<serde_json::Number>,
    #[serde(default)]
    timeout: Option<Dur>,
}

impl PromSpec {
    fn resolve<E: de::Error>(self) -> Result<PromCheck, E> {
        let lower = self.url.to_ascii_lowercase();
        if !(lower.starts_with("http://") || lower.starts_with("https://")) {
            return Err(E::custom(format!(
                "analysis.prometheus.url `{}`: write the server's http:// or https:// URL",
                self.url
            )));
        }
        if self.query.trim().is_empty() {
            return Err(E::custom("analysis.prometheus.query is empty"));
        }
        if self.max.is_none() && self.min.is_none() {
            return Err(E::custom(
                "analysis.prometheus needs a limit: `max: 0.01` and/or `min: …`",
            ));
        }
        Ok(PromCheck {
            url: self.url.trim_end_matches('/').to_owned(),
            query: self.query,
            max: self.max,
            min: self.min,
            timeout: self.timeout.map_or(Duration::from_secs(10), |d| d.0),
        })
    }
}

impl RouterSpec {
    fn resolve<E: de::Error>(self) -> Result<RouterCheck, E> {
        if self.max_error_rate.is_none() && self.max_p99.is_none() {
            return Err(E::custom(
                "analysis.router needs a limit: `max_error_rate: 1%` and/or `max_p99: 300ms`",
            ));
        }
        let window = self.window.map_or(Duration::from_secs(60), |d| d.0);
        if window < Duration::from_secs(1) || window > Duration::from_secs(3600) {
            return Err(E::custom(format!(
                "analysis.router.window {}: write 1s to 1h",
                humantime::format_duration(window)
            )));
        }
        Ok(RouterCheck {
            max_error_rate: self.max_error_rate.map(|r| r.0),
            max_p99: self.max_p99.map(|d| d.0),
            min_requests: self.min_requests.unwrap_or(100).max(1),
            window,
        })
    }
}

fn percent<E: de::Error>(what: &str, n: u32) -> Result<u32, E> {
    if n > 100 {
        Err(E::custom(format!(
            "{what} {n}: write a percentage from 0 to 100"
        )))
    } else {
        Ok(n)
    }
}

impl AnalysisSpec {
    /// `canary.analysis`: no `count` (it runs until the canary ends), `interval` 10s and
    /// `failure_limit` 1 unless given.
    fn background<E: de::Error>(self) -> Result<Analysis, E> {
        if self.count.is_some() || self.inconclusive_limit.is_some() {
            return Err(E::custom(
                "canary.analysis runs from the first weight to the end: it takes a check, \
                 `interval` and `failure_limit` (no `count` or `inconclusive_limit`)",
            ));
        }
        let limit = self.failure_limit.unwrap_or(1).max(1);
        let mut a = AnalysisSpec {
            count: Some(limit),
            ..self
        }
        .resolve()?;
        a.count = 0;
        Ok(a)
    }

    fn resolve<E: de::Error>(self) -> Result<Analysis, E> {
        let given = [
            self.command.is_some(),
            self.http.is_some(),
            self.router.is_some(),
            self.prometheus.is_some(),
            self.compare.is_some(),
        ];
        if given.iter().filter(|g| **g).count() > 1 {
            return Err(E::custom(
                "analysis: give one of `command`, `http`, `router`, `prometheus` or `compare` \
                 (one check per step)",
            ));
        }
        let measured = match (self.compare, self.prometheus, self.router) {
            (Some(c), ..) => Some(Check::Compare(c.resolve()?)),
            (_, Some(p), _) => Some(Check::Prometheus(p.resolve()?)),
            (.., Some(r)) => Some(Check::Router(r.resolve()?)),
            _ => None,
        };
        if let Some(check) = measured {
            return Self::counted(
                check,
                self.count,
                self.interval,
                self.failure_limit,
                self.inconclusive_limit,
            );
        }
        let check = match (self.command, self.http) {
            (Some(command), None) if !command.trim().is_empty() => Check::Command { command },
            (None, Some(h)) => {
                let lower = h.url.to_ascii_lowercase();
                if !(lower.starts_with("http://") || lower.starts_with("https://")) {
                    return Err(E::custom(format!(
                        "analysis.http.url `{}`: write an http:// or https:// URL",
                        h.url
                    )));
                }
                if let Some(b) = &h.body {
                    regex::Regex::new(b).map_err(|e| {
                        E::custom(format!(
                            "analysis.http.body is not a regular expression: {e}"
                        ))
                    })?;
                }
                let status = h.status.unwrap_or(200);
                if !(100..=599).contains(&status) {
                    return Err(E::custom(format!(
                        "analysis.http.status {status}: write an HTTP status (100 to 599)"
                    )));
                }
                Check::Http(HttpCheck {
                    url: h.url,
                    headers: h.headers.into_iter().collect(),
                    tester: h.tester,
                    status,
                    body: h.body,
                    timeout: h.timeout.map_or(Duration::from_secs(5), |d| d.0),
                })
            }
            (Some(_), Some(_)) => {
                return Err(E::custom(
                    "analysis: give `command` or `http`, not both (one check per step)",
                ));
            }
            _ => {
                return Err(E::custom(
                    "analysis needs a check: `command: \"…\"` (exit 0 passes, 1 fails), \
                     `http: {url: …}`, `router: {max_error_rate: 1%}` or `prometheus: {url: …, \
                     query: …, max: …}`",
                ));
            }
        };
        Self::counted(
            check,
            self.count,
            self.interval,
            self.failure_limit,
            self.inconclusive_limit,
        )
    }

    /// `check` with its runs, their interval and limits, defaults filled in.
    fn counted<E: de::Error>(
        check: Check,
        count: Option<u32>,
        interval: Option<Dur>,
        failure_limit: Option<u32>,
        inconclusive_limit: Option<u32>,
    ) -> Result<Analysis, E> {
        let count = count.unwrap_or(1);
        if count == 0 {
            return Err(E::custom("analysis.count must be at least 1"));
        }
        let failure_limit = failure_limit.unwrap_or(1);
        if failure_limit == 0 || failure_limit > count {
            return Err(E::custom(format!(
                "analysis.failure_limit {failure_limit}: write 1 to count ({count})"
            )));
        }
        let inconclusive_limit = inconclusive_limit.unwrap_or(1);
        if inconclusive_limit == 0 {
            return Err(E::custom("analysis.inconclusive_limit must be at least 1"));
        }
        Ok(Analysis {
            check,
            count,
            interval: interval.map_or(Duration::from_secs(10), |d| d.0),
            failure_limit,
            inconclusive_limit,
        })
    }
}

impl<'de> Deserialize<'de> for StepSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StepSpec;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a step: `weight: N`, `pause: {}`, `pause: 5m`, `scale: N`, `testers: {}` \
                     or `analysis: {…}`",
                )
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StepSpec, A::Error> {
                let key: String = map
                    .next_key()?
                    .ok_or_else(|| de::Error::custom("an empty step; write e.g. `weight: 10`"))?;
                let step = match key.as_str() {
                    "weight" => match map.next_value::<WeightSpec>().map_err(|_| {
                        de::Error::custom(
                            "weight: write a percentage (`weight: 25`) or `{to: 5, down: true}`",
                        )
                    })? {
                        WeightSpec::Plain(w) => {
                            CanaryStep::Weight(rising(percent("weight", w)?, false)?)
                        }
                        WeightSpec::To(t) => {
                            CanaryStep::Weight(rising(percent("weight", t.to)?, t.down)?)
                        }
                    },
                    "pause" => match map.next_value::<PauseSpec>().map_err(|_| {
                        de::Error::custom(
                            "pause: write `pause: {}` (until an operator promotes) or a \
                             duration (`pause: 5m`)",
                        )
                    })? {
                        PauseSpec::Operator(_) => CanaryStep::Pause(None),
                        PauseSpec::Timed(d) => CanaryStep::Pause(Some(d.0)),
                    },
                    "scale" => CanaryStep::Scale(percent("scale", map.next_value()?)?),
                    "testers" => {
                        map.next_value::<Empty>()
                            .map_err(|_| de::Error::custom("testers: write `testers: {}`"))?;
                        CanaryStep::Testers
                    }
                    "analysis" => {
                        CanaryStep::Analysis(map.next_value::<AnalysisSpec>()?.resolve()?)
                    }
                    other => {
                        let guess = nearest(other, STEP_KINDS.iter().copied())
                            .map(|g| format!("did you mean `{g}`? "))
                            .unwrap_or_default();
                        return Err(de::Error::custom(format!(
                            "unknown canary step `{other}` ({guess}steps: {})",
                            STEP_KINDS.join(", ")
                        )));
                    }
                };
                if let Some(extra) = map.next_key::<String>()? {
                    return Err(de::Error::custom(format!(
                        "a step does one thing; `{extra}` follows `{key}` (make it a step of \
                         its own)"
                    )));
                }
                Ok(StepSpec { step })
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<Canary, String> {
        yaml_serde::from_str::<CanarySpec>(yaml)
            .map_err(|e| e.to_string())
            .and_then(|s| s.resolve::<yaml_serde::Error>().map_err(|e| e.to_string()))
    }

    #[test]
    fn every_step_kind_reads_back() {
        let c = parse(
            "steps:\n  - testers: {}\n  - weight: 10\n  - pause: {}\n  - scale: 50\n  \
             - analysis: {command: 'curl -fs localhost', count: 3, interval: 1s, failure_limit: 2}\n  \
             - pause: 5m\n  - weight: {to: 5, down: true}\n  - weight: 100\n",
        )
        .unwrap();
        let kinds: Vec<&str> = c.steps.iter().map(CanaryStep::kind).collect();
        assert_eq!(
            kinds,
            [
                "testers", "weight", "pause", "scale", "analysis", "pause", "weight", "weight"
            ]
        );
        assert_eq!(c.steps[2], CanaryStep::Pause(None));
        assert_eq!(
            c.steps[5],
            CanaryStep::Pause(Some(Duration::from_secs(300)))
        );
        assert_eq!((c.slider_step, c.confirm_above), (5, 50));
        let stored = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Canary>(&stored).unwrap(), c);
    }

    #[test]
    fn a_router_analysis_reads_its_limits_and_defaults() {
        let c = parse(
            "steps:\n  - weight: 10\n  - analysis: {router: {max_error_rate: 0.5%, max_p99: 300ms}, \
             count: 3, interval: 30s}\n",
        )
        .unwrap();
        let CanaryStep::Analysis(a) = &c.steps[1] else {
            panic!("{:?}", c.steps[1])
        };
        let Check::Router(r) = &a.check else {
            panic!("{:?}", a.check)
        };
        assert_eq!(r.max_error_rate, Some(5_000));
        assert_eq!(r.max_p99, Some(Duration::from_millis(300)));
        assert_eq!((r.min_requests, r.window), (100, Duration::from_secs(60)));
        assert_eq!(
            a.check.to_string(),
            "router traffic over 1m: 5xx ≤ 0.5%, p99 ≤ 300ms, at least 100 requests"
        );
        let stored = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Canary>(&stored).unwrap(), c);
    }

    #[test]
    fn a_background_analysis_runs_until_the_end() {
        let c = parse(
            "analysis: {router: {max_error_rate: 2%}, interval: 15s, failure_limit: 3}\n\
             steps: [{weight: 10}, {pause: {}}]\n",
        )
        .unwrap();
        let a = c.analysis.as_ref().unwrap();
        assert_eq!((a.count, a.failure_limit), (0, 3));
        assert_eq!(a.interval, Duration::from_secs(15));
        assert!(matches!(a.check, Check::Router(_)));
        let stored = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Canary>(&stored).unwrap(), c);
        // A canary stored before background analysis existed still reads.
        let old = stored.replace(
            &format!(",\"analysis\":{}", serde_json::to_string(a).unwrap()),
            "",
        );
        assert_eq!(serde_json::from_str::<Canary>(&old).unwrap().analysis, None);
        let err =
            parse("analysis: {router: {max_error_rate: 2%}, count: 3}\nsteps: [{weight: 10}]\n")
                .unwrap_err();
        assert!(err.contains("no `count`"), "{err}");
    }

    #[test]
    fn rates_read_as_percentages_or_fractions() {
        use crate::config::values::{Rate, percent_text};
        assert_eq!(Rate::parse("1%"), Some(Rate(10_000)));
        assert_eq!(Rate::parse("0.25 %"), Some(Rate(2_500)));
        assert_eq!(Rate::parse("0.01"), Some(Rate(10_000)));
        assert_eq!(Rate::parse("120%"), None);
        assert_eq!(Rate::parse("-1%"), None);
        assert_eq!(Rate(10_000).to_string(), "1%");
        assert_eq!(percent_text(0.052), "5.2");
        assert_eq!(percent_text(0.00125), "0.125");
        assert_eq!(percent_text(0.0), "0");
        assert_eq!(percent_text(0.5), "50");
    }

    #[test]
    fn mistakes_are_said_plainly() {
        for (yaml, expected) in [
            ("steps: [{wieght: 10}]", "did you mean `weight`?"),
            (
                "steps: [{weight: 120}]",
                "weight 120: write a percentage from 0 to 100",
            ),
            (
                "steps: [{weight: 50}, {weight: 20}]",
                "weight: {to: 20, down: true}",
            ),
            ("steps: [{pause: soon}]", "pause: write `pause: {}`"),
            ("steps: [{weight: 10, pause: {}}]", "a step does one thing"),
            ("steps: []", "a canary needs steps"),
            ("steps: [{analysis: {count: 2}}]", "analysis needs a check"),
            (
                "steps: [{analysis: {http: {url: 'ftp://x'}}}]",
                "write an http:// or https:// URL",
            ),
            (
                "steps: [{analysis: {command: 'true', count: 2, failure_limit: 3}}]",
                "failure_limit 3: write 1 to count (2)",
            ),
            (
                "steps: [{analysis: {http: {url: 'http://x', body: '('}}}]",
                "not a regular expression",
            ),
            ("steps: [{weight: 10}]\nslider_step: 0", "slider_step 0"),
            (
                "steps: [{analysis: {router: {min_requests: 10}}}]",
                "analysis.router needs a limit",
            ),
            (
                "steps: [{analysis: {router: {max_error_rate: lots}}}]",
                "invalid rate `lots`",
            ),
            (
                "steps: [{analysis: {router: {max_error_rate: 1%, window: 2h}}}]",
                "window 2h: write 1s to 1h",
            ),
            (
                "steps: [{analysis: {command: 'true', router: {max_p99: 1s}}}]",
                "give one of `command`, `http`, `router`, `prometheus` or `compare`",
            ),
        ] {
            let err = parse(yaml).unwrap_err();
            assert!(err.contains(expected), "{yaml}: {err}");
        }
    }
}
