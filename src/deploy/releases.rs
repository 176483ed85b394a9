//! What is live on each moniker and what a rollback goes back to: per moniker, the newest
//! earlier release whose version differs from the live one (a redeploy of the live version is
//! no "previous"). The CLI's and the console's confirmations, the refusal of a rollback with
//! nothing to go back to, and the rollback workflow itself all read it from here.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::plan::Plan;
use super::records::ReleaseRecord;
use crate::plugin::Release;

/// A moniker's live release and the one a rollback would restore (boxed: a fleet's map of
/// 100,000 monikers keeps two pointers a moniker in its nodes, not two records — 58 MB of
/// half-full B-tree nodes down to 6).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Live {
    /// Live now.
    pub current: Option<Box<ReleaseRecord>>,
    /// The newest earlier release with another version: what a rollback restores.
    pub previous: Option<Box<ReleaseRecord>>,
    /// The rollback (its deployment's id) that made `current` live again, when one did: it
    /// is live since then, not since it was first recorded.
    #[serde(default)]
    pub restored_by: Option<String>,
}

/// Per moniker, from a subject's release history (oldest first).
///
/// One pass that keeps two records a moniker (a list of every release per moniker cost 100 MB
/// at 100,000 targets): a newer release with another version makes the current one the
/// previous; one with the same version keeps the previous it had.
pub fn live(rows: Vec<ReleaseRecord>) -> BTreeMap<String, Live> {
    let mut by_moniker: BTreeMap<String, Live> = BTreeMap::new();
    for r in rows {
        let live = match by_moniker.get_mut(&r.moniker) {
            Some(l) => l,
            None => by_moniker.entry(r.moniker.clone()).or_default(),
        };
        // A release taken back made the one before live again, from then on.
        if let Some(by) = r.rolled_back_by {
            if live.current.is_some() {
                live.restored_by = Some(by);
            }
            continue;
        }
        match live.current.take() {
            Some(c) if c.version != r.version => live.previous = Some(c),
            _ => {}
        }
        live.current = Some(Box::new(r));
        live.restored_by = None;
    }
    by_moniker.retain(|_, l| l.current.is_some() || l.previous.is_some());
    by_moniker
}

/// The version live on each moniker.
pub fn live_versions(rows: Vec<ReleaseRecord>) -> BTreeMap<String, String> {
    live(rows)
        .into_iter()
        .filter_map(|(m, l)| l.current.map(|c| (m, c.version)))
        .collect()
}

impl ReleaseRecord {
    /// As a plugin's rollback destination.
    pub fn release(&self) -> Release {
        Release {
            version: self.version.clone(),
            artifact: serde_json::from_str(&self.artifact).unwrap_or_default(),
            deployment_id: self.deployment_id.clone(),
        }
    }
}

/// One target's way back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Move {
    /// The target.
    pub target: String,
    /// Live now.
    pub from: ReleaseRecord,
    /// Live after the rollback.
    pub to: ReleaseRecord,
}

/// Where a rollback takes each target of `plan`; targets with nothing earlier are left out.
pub fn moves(plan: &Plan, live: &BTreeMap<String, Live>) -> Vec<Move> {
    moving(plan, live)
        .map(|(target, from, to)| Move {
            target: target.to_owned(),
            from: from.clone(),
            to: to.clone(),
        })
        .collect()
}

/// Each of `plan`'s targets with a way back: its name, the release live now and the one a
/// rollback restores.
fn moving<'a>(
    plan: &'a Plan,
    live: &'a BTreeMap<String, Live>,
) -> impl Iterator<Item = (&'a str, &'a ReleaseRecord, &'a ReleaseRecord)> {
    plan.targets().filter_map(|(_, t)| {
        let l = live.get(&t.moniker.to_string())?;
        Some((
            t.name.as_str(),
            l.current.as_deref()?,
            l.previous.as_deref()?,
        ))
    })
}

/// The targets of `plan` a rollback leaves where they are (no earlier release with another
/// version), by name, in the plan's order.
pub fn staying_in_rollback(plan: &Plan, live: &BTreeMap<String, Live>) -> Vec<String> {
    let moving: std::collections::BTreeSet<&str> = moving(plan, live).map(|(n, _, _)| n).collect();
    plan.targets()
        .map(|(_, t)| t.name.as_str())
        .filter(|n| !moving.contains(n))
        .map(str::to_owned)
        .collect()
}

/// Version changes counted: `36 targets: 2.4.0 → 2.3.0`, grouped when targets differ.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transitions(pub Vec<Transition>);

/// `n` targets going from `from` to `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// Version now.
    pub from: String,
    /// Version after.
    pub to: String,
    /// Targets.
    pub targets: usize,
}

impl Transitions {
    /// Counted from moves, most targets first.
    pub fn of(moves: &[Move]) -> Self {
        Self::count(
            moves
                .iter()
                .map(|m| (m.from.version.as_str(), m.to.version.as_str())),
        )
    }

    /// What a rollback of `plan`'s targets would move, as [`moves`] finds it, counted without
    /// a `Move` (two release records) for each of a fleet's targets.
    pub fn of_rollback(plan: &Plan, live: &BTreeMap<String, Live>) -> Self {
        Self::count(
            moving(plan, live).map(|(_, from, to)| (from.version.as_str(), to.version.as_str())),
        )
    }

    fn count<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> Self {
        let mut counts: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for pair in pairs {
            *counts.entry(pair).or_default() += 1;
        }
        let mut out: Vec<Transition> = counts
            .into_iter()
            .map(|((from, to), targets)| Transition {
                from: from.to_owned(),
                to: to.to_owned(),
                targets,
            })
            .collect();
        out.sort_by(|a, b| b.targets.cmp(&a.targets).then(a.from.cmp(&b.from)));
        Transitions(out)
    }

    /// True when nothing moves.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Targets that move.
    pub fn targets(&self) -> usize {
        self.0.iter().map(|t| t.targets).sum()
    }

    /// `2.4.0 → 2.3.0`, or `2.4.0 → 2.3.0 (+2 more)` when targets differ.
    pub fn short(&self) -> String {
        match self.0.as_slice() {
            [] => String::new(),
            [one] => format!("{} → {}", one.from, one.to),
            [first, rest @ ..] => format!("{} → {} (+{} more)", first.from, first.to, rest.len()),
        }
    }
}

impl fmt::Display for Transitions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            let what = if t.targets == 1 { "target" } else { "targets" };
            write!(f, "{} {what}: {} → {}", t.targets, t.from, t.to)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(id: i64, moniker: &str, version: &str, by: Option<&str>) -> ReleaseRecord {
        ReleaseRecord {
            id,
            moniker: moniker.into(),
            subject: "shop/prod".into(),
            version: version.into(),
            artifact: "{}".into(),
            deployment_id: format!("dep-{id}"),
            recorded_at: id,
            rolled_back_by: by.map(Into::into),
        }
    }

    #[test]
    fn previous_is_the_newest_earlier_release_with_another_version() {
        // Databases written before redeploys stopped recording a release hold 2.4.0 twice.
        let l = live(vec![
            rel(1, "m", "2.3.0", None),
            rel(2, "m", "2.4.0", None),
            rel(3, "m", "2.4.0", None),
        ]);
        assert_eq!(l["m"].current.as_ref().unwrap().id, 3);
        assert_eq!(l["m"].previous.as_ref().unwrap().version, "2.3.0");
        let l = live(vec![
            rel(1, "m", "2.2.0", None),
            rel(2, "m", "2.3.0", Some("dep-rb")),
            rel(3, "m", "2.4.0", None),
        ]);
        assert_eq!(
            l["m"].previous.as_ref().unwrap().version,
            "2.2.0",
            "a release a rollback took down is not gone back to"
        );
        let l = live(vec![rel(1, "m", "2.4.0", None), rel(2, "m", "2.4.0", None)]);
        assert_eq!(l["m"].previous, None, "nothing else was ever live");
        let l = live(vec![
            rel(1, "m", "2.3.0", None),
            rel(2, "m", "2.4.0", None),
            rel(3, "m", "2.4.0", None),
            rel(4, "m", "2.5.0", None),
            rel(5, "n", "1.0.0", None),
            rel(6, "n", "0.9.0", None),
        ]);
        assert_eq!(l["m"].previous.as_ref().unwrap().id, 3, "the newest 2.4.0");
        assert_eq!(l["n"].current.as_ref().unwrap().version, "0.9.0");
        assert_eq!(l["n"].previous.as_ref().unwrap().version, "1.0.0");
    }

    #[test]
    fn transitions_group_and_read_as_a_sentence() {
        let mv = |t: &str, from: &str, to: &str| Move {
            target: t.into(),
            from: rel(2, t, from, None),
            to: rel(1, t, to, None),
        };
        let t = Transitions::of(&[
            mv("a", "2.4.0", "2.3.0"),
            mv("b", "2.4.0", "2.3.0"),
            mv("c", "2.3.0", "2.2.0"),
        ]);
        assert_eq!(
            t.to_string(),
            "2 targets: 2.4.0 → 2.3.0, 1 target: 2.3.0 → 2.2.0"
        );
        assert_eq!(t.short(), "2.4.0 → 2.3.0 (+1 more)");
        assert_eq!(t.targets(), 3);
    }
}
