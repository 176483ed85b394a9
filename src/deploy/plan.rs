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
