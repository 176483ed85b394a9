//! The plan: targets in batches, each with its moniker. Pure, so `manent plan` shows exactly
//! what a deploy will do; a deploy records it as its first step.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::{EnvSpec, Strategy};
use crate::moniker::Moniker;
use crate::plugin::Target;

/// A target as planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedTarget {
    /// Name.
    pub name: String,
    /// Address.
    pub host: String,
    /// Identity.
    pub moniker: Moniker,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// Targets deployed together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// 1-based.
    pub index: u32,
    /// In plan order.
    pub targets: Vec<PlannedTarget>,
}

/// The whole plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// Batches in order.
    pub batches: Vec<Batch>,
    /// Every hook at every event, in the order it runs there (computed once, shown the same
    /// by `plan`, the console and `history`).
    #[serde(default)]
    pub hooks: Vec<PlannedHook>,
}

/// A hook at one event, in run order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedHook {
    /// When.
    pub event: crate::config::Event,
    /// Its name.
    pub name: String,
    /// `command`, `http`, `wait`.
    pub kind: String,
    /// Its weight.
    pub weight: i32,
    /// `<env>::<app>::hook::<name>`.
    pub moniker: String,
}

impl Plan {
    /// The hooks of `event`, in run order.
    pub fn hooks_at(&self, event: crate::config::Event) -> impl Iterator<Item = &PlannedHook> {
        self.hooks.iter().filter(move |h| h.event == event)
    }
}

impl From<&PlannedTarget> for Target {
    fn from(t: &PlannedTarget) -> Target {
        Target {
            host: t.host.clone(),
            moniker: t.moniker.clone(),
            labels: t.labels.clone(),
        }
    }
}

impl Plan {
    /// Every target, in order.
    pub fn targets(&self) -> impl Iterator<Item = (&Batch, &PlannedTarget)> {
        self.batches
            .iter()
            .flat_map(|b| b.targets.iter().map(move |t| (b, t)))
    }

    /// Every target as a plugin sees it, in order.
    pub fn request_targets(&self) -> Vec<Target> {
        self.targets().map(|(_, t)| Target::from(t)).collect()
    }

    /// Number of targets.
    pub fn len(&self) -> usize {
        self.batches.iter().map(|b| b.targets.len()).sum()
    }

    /// True with no targets.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Computes the plan of `spec`.
pub fn compute(spec: &EnvSpec) -> Result<Plan, String> {
    let mut planned = Vec::with_capacity(spec.targets.len());
    for t in &spec.targets {
        let moniker = spec.moniker(t).map_err(|e| e.to_string())?;
        planned.push(PlannedTarget {
            name: t.name.clone(),
            host: t.host.clone(),
            moniker,
            labels: t.labels.clone(),
        });
    }
    if planned.is_empty() {
        return Err(format!("{} has no targets", spec.subject()));
    }
    let size = match &spec.strategy {
        // A canary deploys its candidate to every target at once (parallelism still applies).
        Strategy::All | Strategy::Canary(_) => planned.len(),
        Strategy::Rolling { batch_size, .. } => usize::try_from(*batch_size).unwrap_or(1).max(1),
    };
    let batches = planned
        .chunks(size)
        .enumerate()
        .map(|(i, chunk)| Batch {
            index: u32::try_from(i + 1).unwrap_or(u32::MAX),
            targets: chunk.to_vec(),
        })
        .collect();
    let mut hooks = Vec::new();
    for event in crate::config::hooks::EVENTS {
        for h in crate::config::hooks::ordered(&spec.hooks, event) {
            let moniker = Moniker::new(&spec.environment, &spec.application, "hook", &h.name)
                .map_err(|e| format!("hook {}: {e}", h.name))?;
            hooks.push(PlannedHook {
                event,
                name: h.name.clone(),
                kind: h.kind.as_str().to_owned(),
                weight: h.weight,
                moniker: moniker.to_string(),
            });
        }
    }
    Ok(Plan { batches, hooks })
}

/// `1 target`, `5 targets`: a count with its noun (for nouns whose plural takes an `s`).
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// What a deploy of `version`, already live on every target, does (said before it starts, by
/// the command line and the console alike): a target recorded on it is not deployed again
/// unless `force`.
pub fn already_live(version: &str, force: bool) -> String {
    format!(
        "{version} is already live on every target: {}",
        if force {
            "this deploys it again (--force)"
        } else {
            "each target recorded on it stays unchanged where the plugin reads it back live \
             (`manent deploy --force` deploys it again)"
        }
    )
}

/// `1 target`, `6 targets in 1 batch`, `36 targets in 6 batches`.
///
/// ```
/// use manent::deploy::plan::size;
/// assert_eq!(size(1, 1), "1 target");
/// assert_eq!(size(6, 1), "6 targets in 1 batch");
/// assert_eq!(size(36, 6), "36 targets in 6 batches");
/// ```
pub fn size(targets: usize, batches: usize) -> String {
    if targets == 1 {
        count(1, "target")
    } else {
        let batches = if batches == 1 {
            "1 batch".to_owned()
        } else {
            format!("{batches} batches")
        };
        format!("{} in {batches}", count(targets, "target"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Event};

    /// `prod` of application `web` described by `body` (everything after the deploy).
    fn spec(body: &str) -> EnvSpec {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("apps")).unwrap();
        std::fs::write(
            dir.path().join("manent.yml"),
            "apps: apps\nplugins: {exec: {}}\n",
        )
        .unwrap();
        let descriptor = format!(
            "application: web\nartifact: {{version: \"1.0.0\"}}\ndeploy:\n  plugin: exec\n  \
             params: {{deploy: 'true'}}\n{body}"
        );
        std::fs::write(dir.path().join("apps/web.yml"), descriptor).unwrap();
        let config = Config::load(&dir.path().join("manent.yml"), &crate::plugin::catalog())
            .map_err(|e| e.to_string())
            .unwrap();
        config.environment("web", "prod").unwrap()
    }

    fn targets(n: usize) -> String {
        let list: Vec<String> = (1..=n).map(|i| format!("{{name: web-{i}}}")).collect();
        format!(
            "environments:\n  prod:\n    targets: [{}]\n",
            list.join(", ")
        )
    }

    fn batches(plan: &Plan) -> Vec<Vec<&str>> {
        plan.batches
            .iter()
            .map(|b| b.targets.iter().map(|t| t.name.as_str()).collect())
            .collect()
    }

    #[test]
    fn rolling_batches_keep_the_descriptor_s_order_and_the_last_batch_takes_the_rest() {
        let plan = compute(&spec(&format!(
            "strategy:\n  rolling: {{batch_size: 2}}\n{}",
            targets(5)
        )))
        .unwrap();
        assert_eq!(
            batches(&plan),
            [
                vec!["web-1", "web-2"],
                vec!["web-3", "web-4"],
                vec!["web-5"]
            ]
        );
        let indexes: Vec<u32> = plan.batches.iter().map(|b| b.index).collect();
        assert_eq!(indexes, [1, 2, 3], "batches count from 1");
        assert_eq!(plan.len(), 5);
        assert_eq!(
            plan.targets().next().unwrap().1.moniker.to_string(),
            "prod::web::exec::web-1"
        );
        assert_eq!(
            size(plan.len(), plan.batches.len()),
            "5 targets in 3 batches"
        );
    }

    #[test]
    fn all_at_once_and_a_canary_are_one_batch() {
        for strategy in ["all", "{canary: {steps: [{weight: 10}]}}"] {
            let plan = compute(&spec(&format!("strategy: {strategy}\n{}", targets(4)))).unwrap();
            assert_eq!(plan.batches.len(), 1, "{strategy}");
            assert_eq!(plan.len(), 4, "{strategy}");
        }
    }

    #[test]
    fn hooks_are_planned_per_event_by_weight_then_kind_then_name() {
        let hooks = "hooks:\n  \
            - {name: late, events: [pre-deploy], command: 'true', weight: 5}\n  \
            - {name: b-first, events: [pre-deploy], command: 'true', weight: -1}\n  \
            - {name: a-first, events: [pre-deploy], command: 'true', weight: -1}\n  \
            - {name: smoke, events: [post-deploy, test], command: 'true'}\n";
        let plan = compute(&spec(&format!("{hooks}{}", targets(1)))).unwrap();
        let at = |e: Event| -> Vec<&str> { plan.hooks_at(e).map(|h| h.name.as_str()).collect() };
        assert_eq!(at(Event::PreDeploy), ["a-first", "b-first", "late"]);
        assert_eq!(at(Event::PostDeploy), ["smoke"]);
        assert_eq!(at(Event::Test), ["smoke"]);
        let smoke = plan.hooks_at(Event::Test).next().unwrap();
        assert_eq!(smoke.moniker, "prod::web::hook::smoke");
        assert_eq!(smoke.kind, "command");
    }
}
