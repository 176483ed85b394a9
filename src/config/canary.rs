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
use super::values::Dur;

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
}

/// What a canary does when the router serves something else than manent set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Command { command } => {
                let first = command.lines().next().unwrap_or_default();
                write!(f, "`{first}`")
            }
            Check::Http(h) => write!(f, "GET {} expects {}", h.url, h.status),
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
#[derive(Deserialize)]
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
        Ok(Canary {
            steps: self.steps.0,
            slider_step,
            confirm_above,
            watch,
            on_drift: self.on_drift.unwrap_or_default(),
        })
    }
}

/// The step list, weights checked as they come.
struct Steps(Vec<CanaryStep>);

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
struct StepSpec {
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WeightTo {
    to: u32,
    #[serde(default)]
    down: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum WeightSpec {
    Plain(u32),
    To(WeightTo),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Deserialize)]
#[serde(untagged)]
enum PauseSpec {
    Operator(Empty),
    Timed(Dur),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnalysisSpec {
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    http: Option<HttpSpec>,
    #[serde(default)]
    count: Option<u32>,
    #[serde(default)]
    interval: Option<Dur>,
    #[serde(default)]
    failure_limit: Option<u32>,
    #[serde(default)]
    inconclusive_limit: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpSpec {
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
    fn resolve<E: de::Error>(self) -> Result<Analysis, E> {
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
                    "analysis needs a check: `command: \"…\"` (exit 0 passes, 1 fails) or \
                     `http: {url: …}`",
                ));
            }
        };
        let count = self.count.unwrap_or(1);
        if count == 0 {
            return Err(E::custom("analysis.count must be at least 1"));
        }
        let failure_limit = self.failure_limit.unwrap_or(1);
        if failure_limit == 0 || failure_limit > count {
            return Err(E::custom(format!(
                "analysis.failure_limit {failure_limit}: write 1 to count ({count})"
            )));
        }
        let inconclusive_limit = self.inconclusive_limit.unwrap_or(1);
        if inconclusive_limit == 0 {
            return Err(E::custom("analysis.inconclusive_limit must be at least 1"));
        }
        Ok(Analysis {
            check,
            count,
            interval: self.interval.map_or(Duration::from_secs(10), |d| d.0),
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
        ] {
            let err = parse(yaml).unwrap_err();
            assert!(err.contains(expected), "{yaml}: {err}");
        }
    }
}
