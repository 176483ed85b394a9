//! The request and result types of the plugin contract: what manent sends a `Deployer` and what
//! it gets back. They mirror `proto/manent/plugin/v1/deployer.proto`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::error::PluginError;
use super::secrets::Secrets;
use crate::moniker::Moniker;

pub use crate::config::Artifact;

/// One target of a deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// Address the plugin acts on (host name, directory, cluster).
    pub host: String,
    /// Stable identity.
    pub moniker: Moniker,
    /// Free labels from the descriptor.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

impl Target {
    /// The target's name (the moniker's last part).
    pub fn name(&self) -> &str {
        self.moniker.name()
    }
}

/// How a target ended up after a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetStatus {
    /// The new release is live.
    Deployed,
    /// The call failed on this target.
    Failed,
    /// Never started (an earlier target failed, or the deploy stopped).
    Skipped,
    /// Already at the requested release: nothing to do.
    Unchanged,
    /// The previous release is live again.
    RolledBack,
}

impl TargetStatus {
    /// The wire and display name.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetStatus::Deployed => "deployed",
            TargetStatus::Failed => "failed",
            TargetStatus::Skipped => "skipped",
            TargetStatus::Unchanged => "unchanged",
            TargetStatus::RolledBack => "rolled_back",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "deployed" => TargetStatus::Deployed,
            "failed" => TargetStatus::Failed,
            "skipped" => TargetStatus::Skipped,
            "unchanged" => TargetStatus::Unchanged,
            "rolled_back" => TargetStatus::RolledBack,
            _ => return None,
        })
    }
}

/// One target's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetResult {
    /// The target's host.
    pub host: String,
    /// What happened.
    pub status: TargetStatus,
    /// A line for the operator.
    #[serde(default)]
    pub message: String,
    /// Time spent on the target.
    #[serde(default)]
    pub duration_ms: u64,
}

impl TargetResult {
    /// A result with a status and no message.
    pub fn new(status: TargetStatus) -> Self {
        TargetResult {
            host: String::new(),
            status,
            message: String::new(),
            duration_ms: 0,
        }
    }

    /// Sets the message.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }
}

/// A release a target can be switched to (rollback's destination).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Release {
    /// The version.
    pub version: String,
    /// The artifact it was made from.
    pub artifact: Artifact,
    /// The deployment that made it live.
    #[serde(default)]
    pub deployment_id: String,
}

/// What a target reports as live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetRelease {
    /// The target's host.
    pub host: String,
    /// The live version; empty when the plugin cannot tell.
    pub version: String,
}

/// Everything a call is about. One request per call; the secrets in it work only during the
/// call.
#[derive(Debug, Clone)]
pub struct Request {
    /// `dep-…`
    pub deployment_id: String,
    /// Application (the moniker's module).
    pub application: String,
    /// Environment (the moniker's namespace).
    pub environment: String,
    /// What to deploy.
    pub artifact: Artifact,
    /// The targets of this call, in plan order.
    pub targets: Vec<Target>,
    /// `deploy.params` from the descriptor.
    pub params: serde_json::Value,
    /// Secrets, readable only while the call runs.
    pub secrets: Secrets,
    /// Targets the plugin may work on at once (1 unless it declares `parallel_targets`).
    pub parallelism: u32,
    /// Canary state from `PrepareSlots`, carried in every later call.
    pub traffic: Option<serde_json::Value>,
    /// A canary's routing as manent records it, carried in every slot and router call: a
    /// router renders from this alone (with the call's own change applied).
    pub routing: Option<Routing>,
    /// Stable across retries and restarts of the step: `{deployment}/{step}`.
    pub idempotency_key: String,
    /// Attempt number of the step, from 1.
    pub attempt: u32,
    /// Where the engine records the processes a built-in starts for this call (an external
    /// plugin's side records nothing: its host tracks the plugin's own process).
    pub processes: super::processes::Processes,
}

/// One side of a canary's split: a slot, the release it holds, and its servers' addresses in
/// target order (a target's address in slot `S` is its label `S`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pool {
    /// The slot's name (`blue`, `green`); empty when unknown.
    pub slot: String,
    /// The release it holds; empty when unknown.
    #[serde(default)]
    pub version: String,
    /// Its servers' addresses; empty when the router does not tell.
    #[serde(default)]
    pub addresses: Vec<String>,
}

impl Pool {
    /// `slot` with each target's address in it (its label of that name), in target order.
    pub fn of(slot: &str, version: &str, targets: &[Target]) -> Pool {
        Pool {
            slot: slot.to_owned(),
            version: version.to_owned(),
            addresses: targets
                .iter()
                .filter_map(|t| t.labels.get(slot).cloned())
                .collect(),
        }
    }

    /// `green (2.0.0)`, or `green`.
    fn named(&self) -> String {
        match (self.slot.as_str(), self.version.as_str()) {
            ("", _) => "an unknown slot".to_owned(),
            (s, "") => s.to_owned(),
            (s, v) => format!("{s} ({v})"),
        }
    }
}

/// Where a canary's traffic goes: manent's record of it (sent with every router call, which
/// renders from it alone), or what a running router serves (read back by `routing_state`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Routing {
    /// The slot serving the release in production.
    pub stable: Pool,
    /// The candidate's slot.
    pub candidate: Pool,
    /// Percent of production requests on the candidate.
    pub weight: u32,
    /// Testers reach the candidate.
    #[serde(default)]
    pub testers: bool,
    /// Percent of the candidate's servers enabled.
    #[serde(default = "full")]
    pub scale: u32,
    /// The candidate is out of every pool (reverted; or promoted, and then it is `stable`).
    #[serde(default)]
    pub retired: bool,
}

fn full() -> u32 {
    100
}

impl Default for Routing {
    fn default() -> Self {
        Routing {
            stable: Pool::default(),
            candidate: Pool::default(),
            weight: 0,
            testers: false,
            scale: 100,
            retired: false,
        }
    }
}

impl Routing {
    /// `candidate 10% / stable 90%, testers on (stable blue (1.0), candidate green (2.0))`.
    pub fn describe(&self) -> String {
        let split = if self.retired {
            format!(
                "everything on {} (the candidate is retired)",
                self.stable.named()
            )
        } else {
            format!(
                "candidate {}% / stable {}%, testers {}{}",
                self.weight,
                100 - self.weight.min(100),
                if self.testers { "on" } else { "off" },
                if self.scale < 100 {
                    format!(", scale {}%", self.scale)
                } else {
                    String::new()
                }
            )
        };
        format!(
            "{split} (stable {}, candidate {})",
            self.stable.named(),
            self.candidate.named()
        )
    }

    /// What this routing (a router's read-back) serves, in the slots of manent's `recorded`
    /// routing: a file manent did not write names its own stable and candidate, which need not
    /// be manent's (`candidate green 100% / stable blue 0%`, not "stable green").
    pub fn shares_of(&self, recorded: &Routing) -> String {
        let share = |slot: &str| -> u32 {
            let w = self.weight.min(100);
            if slot.is_empty() {
                0
            } else if self.retired || self.candidate.slot.is_empty() {
                if slot == self.stable.slot { 100 } else { 0 }
            } else if slot == self.candidate.slot {
                w
            } else if slot == self.stable.slot {
                100 - w
            } else {
                0
            }
        };
        let (c, s) = (&recorded.candidate.slot, &recorded.stable.slot);
        if c.is_empty() {
            return self.describe();
        }
        format!("candidate {c} {}% / stable {s} {}%", share(c), share(s))
    }

    /// How what a router serves differs from this record, one phrase each (empty: it matches).
    /// Versions are not compared (a router only knows what it was told); slots and addresses
    /// are, where the router reports them.
    pub fn differences(&self, served: &RoutingState) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(why) = &served.foreign {
            out.push(format!(
                "the router does not serve what manent wrote: {why}"
            ));
        }
        let Some(s) = &served.routing else {
            return out;
        };
        let effective = |r: &Routing| if r.retired { 0 } else { r.weight };
        if effective(s) != effective(self) {
            out.push(format!(
                "the candidate gets {}% (manent set {}%)",
                effective(s),
                effective(self)
            ));
        }
        if (s.testers && !s.retired) != (self.testers && !self.retired) {
            out.push(if self.testers && !self.retired {
                "testers do not reach the candidate (manent routes them)".to_owned()
            } else {
                "testers reach the candidate (manent does not route them)".to_owned()
            });
        }
        if !s.stable.slot.is_empty()
            && !self.stable.slot.is_empty()
            && s.stable.slot != self.stable.slot
        {
            out.push(format!(
                "production is served from {} (manent's stable slot is {})",
                s.stable.slot, self.stable.slot
            ));
        }
        let set = |p: &Pool| {
            let mut a = p.addresses.clone();
            a.sort();
            a
        };
        if !s.stable.addresses.is_empty()
            && !self.stable.addresses.is_empty()
            && set(&s.stable) != set(&self.stable)
        {
            out.push(format!(
                "the stable pool holds {} (manent's: {})",
                s.stable.addresses.join(", "),
                self.stable.addresses.join(", ")
            ));
        }
        if s.retired != self.retired && !self.retired {
            out.push("the candidate is out of every pool (manent keeps it in)".to_owned());
        } else if s.retired != self.retired {
            out.push(format!(
                "the candidate {} is still in a pool (manent retired it)",
                s.candidate.named()
            ));
        }
        out
    }
}

/// What `routing_state` reads from a running router.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutingState {
    /// What it serves (`None`: it cannot tell, and `foreign` says why).
    #[serde(default)]
    pub routing: Option<Routing>,
    /// It runs a configuration manent did not write: why, and where `routing` was read from
    /// instead (`None`: it is manent's, read back from the router itself).
    #[serde(default)]
    pub foreign: Option<String>,
}

/// What a `Traffic` call reads: the last `window`, never from before the candidate release
/// began serving on its slot (`since_ms`): what a slot served earlier was another release's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrafficWindow {
    /// How far back from now.
    pub window: std::time::Duration,
    /// When the candidate release began serving, epoch ms (`None`: not known).
    pub since_ms: Option<i64>,
}

impl TrafficWindow {
    /// The last `window`, with no start of the candidate known.
    pub fn last(window: std::time::Duration) -> Self {
        TrafficWindow {
            window,
            since_ms: None,
        }
    }

    /// Where the window starts when read at `now_ms`: `window` back, or when the candidate
    /// began serving if that is later.
    pub fn from_ms(&self, now_ms: i64) -> i64 {
        let back =
            now_ms.saturating_sub(i64::try_from(self.window.as_millis()).unwrap_or(i64::MAX));
        self.since_ms.map_or(back, |s| back.max(s))
    }

    /// `since_ms` on the wire (0: not known).
    pub fn since_wire(&self) -> i64 {
        self.since_ms.unwrap_or(0)
    }

    /// From the wire: `window_ms` and `since_ms` (0: not known).
    pub fn from_wire(window_ms: u64, since_ms: i64) -> Self {
        TrafficWindow {
            window: std::time::Duration::from_millis(window_ms),
            since_ms: (since_ms > 0).then_some(since_ms),
        }
    }
}

/// One slot's traffic over a window, as the router itself observed it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotTraffic {
    /// `blue`, `green`.
    pub slot: String,
    /// The release it holds.
    pub version: String,
    /// Responses clients got from this slot (from the last server each request tried).
    pub requests: u64,
    /// Responses by class: 2xx, 3xx, 4xx, 5xx.
    pub responses: [u64; 4],
    /// Attempts at this slot that failed and were retried elsewhere (unseen by clients).
    #[serde(default)]
    pub retried_away: u64,
    /// Upstream response time quantiles of `requests`, ms (`None`: no request, or the router
    /// measures no latency — see `no_latency`): the median,
    #[serde(default)]
    pub p50_ms: Option<u32>,
    /// the 95th percentile,
    #[serde(default)]
    pub p95_ms: Option<u32>,
    /// and the 99th.
    #[serde(default)]
    pub p99_ms: Option<u32>,
    /// The window cut in equal intervals, oldest first (empty: the router keeps no finer
    /// record): what a comparison with the other slot ranks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<TrafficInterval>,
    /// The router measures no latency (HAProxy's counters): a latency limit cannot be judged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_latency: bool,
}

/// One interval of a slot's traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrafficInterval {
    /// Its start, epoch ms.
    pub from_ms: i64,
    /// Requests answered, and how many with 5xx.
    pub requests: u64,
    /// 5xx responses.
    pub errors: u64,
    /// The p99 of their upstream response time, ms (`None`: no request).
    #[serde(default)]
    pub p99_ms: Option<u32>,
}

impl SlotTraffic {
    /// 5xx responses per request, 0–1 (`None` without a request).
    pub fn error_rate(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.responses[3] as f64 / self.requests as f64)
    }

    /// What failed at this slot per try: its 5xx responses and the tries it failed that were
    /// retried elsewhere (a refused connection the client never saw), 0–1.
    pub fn failure_rate(&self) -> Option<f64> {
        let tries = self.requests + self.retried_away;
        (tries > 0).then(|| (self.responses[3] + self.retried_away) as f64 / tries as f64)
    }
}

/// The traffic a router observed per slot over a window (`TrafficRouter::traffic`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Traffic {
    /// One per slot that took traffic or holds a pool.
    pub slots: Vec<SlotTraffic>,
    /// The window read: its start (epoch ms),
    pub from_ms: i64,
    /// and its length.
    pub window_ms: u64,
    /// Where the figures come from.
    pub source: String,
    /// When the candidate began serving, as the engine asked (not on the wire): a window that
    /// starts there was cut at it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<i64>,
}

impl Traffic {
    /// The window starts where the candidate began serving (a router's base reading may be
    /// a moment before it).
    pub fn cut_at_since(&self) -> bool {
        self.since_ms.is_some_and(|s| self.from_ms >= s - 2_500)
    }

    /// Slot `slot`'s figures (zeros when it took no traffic).
    pub fn slot(&self, slot: &str) -> SlotTraffic {
        self.slots
            .iter()
            .find(|s| s.slot == slot)
            .cloned()
            .unwrap_or_else(|| SlotTraffic {
                slot: slot.to_owned(),
                ..SlotTraffic::default()
            })
    }
}

/// A Deploy, DryRun or Rollback call's result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeployResult {
    /// The plugin's name.
    pub plugin: String,
    /// One result per target, in request order.
    pub targets: Vec<TargetResult>,
    /// The release now live (a version), if the plugin reports one.
    #[serde(default)]
    pub release: String,
}

impl DeployResult {
    /// What [`for_each_target`](crate::plugin::for_each_target) or
    /// [`for_all_targets`](crate::plugin::for_all_targets) returned, as a call's result: the
    /// first error if a target failed, else every target's result with `release` live.
    pub fn of(
        plugin: &str,
        release: &str,
        (targets, err): (Vec<TargetResult>, Option<PluginError>),
    ) -> Result<DeployResult, PluginError> {
        match err {
            Some(e) => Err(e),
            None => Ok(DeployResult {
                plugin: plugin.to_owned(),
                targets,
                release: release.to_owned(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(slot: &str, version: &str) -> Pool {
        Pool {
            slot: slot.into(),
            version: version.into(),
            addresses: Vec::new(),
        }
    }

    #[test]
    fn a_foreign_routing_is_said_in_manents_slots() {
        let recorded = Routing {
            stable: pool("blue", "1.0.0"),
            candidate: pool("green", "2.0.0"),
            weight: 10,
            testers: false,
            scale: 100,
            retired: false,
        };
        // A hand-written file with everything on green reads as "stable green" in its own
        // terms: in manent's, the candidate takes everything.
        let all_green = Routing {
            stable: pool("green", ""),
            candidate: pool("blue", ""),
            weight: 0,
            ..recorded.clone()
        };
        assert_eq!(
            all_green.shares_of(&recorded),
            "candidate green 100% / stable blue 0%"
        );
        let retired = Routing {
            retired: true,
            ..recorded.clone()
        };
        assert_eq!(
            retired.shares_of(&recorded),
            "candidate green 0% / stable blue 100%"
        );
    }

    #[test]
    fn a_window_never_starts_before_the_candidate_served() {
        let w = TrafficWindow {
            window: std::time::Duration::from_secs(60),
            since_ms: Some(100_000),
        };
        assert_eq!(w.from_ms(130_000), 100_000);
        assert_eq!(w.from_ms(200_000), 140_000);
        assert_eq!(TrafficWindow::from_wire(60_000, 0).since_ms, None);
        assert_eq!(TrafficWindow::last(w.window).from_ms(130_000), 70_000);
    }
}
