//! A deploy's strategy — all at once, rolling batches, or a canary — as written in a
//! descriptor and checked while the YAML is read.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::values::Dur;

/// How targets are grouped into batches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Strategy {
    /// Every target in one batch.
    All,
    /// Batches of `batch_size`, one after the other, `interval` apart.
    Rolling {
        /// Targets per batch.
        batch_size: u32,
        /// Durable pause between batches.
        #[serde(default, with = "crate::duration_ms::option")]
        interval: Option<Duration>,
    },
    /// A canary: the candidate is deployed beside the stable release and takes traffic step by
    /// step (weights, pauses, analysis) until it is promoted or reverted.
    Canary(super::canary::Canary),
}

impl Strategy {
    /// `all`, `rolling 2`, `canary` — a table's word for it.
    pub fn short(&self) -> String {
        match self {
            Strategy::All => "all".into(),
            Strategy::Rolling { batch_size, .. } => format!("rolling {batch_size}"),
            Strategy::Canary(_) => "canary".into(),
        }
    }

    /// `rolling, 2 per batch, 30s apart`, `canary in 6 steps` — a plan's words for it.
    pub fn describe(&self) -> String {
        match self {
            Strategy::All => "all at once".to_owned(),
            Strategy::Rolling {
                batch_size,
                interval,
            } => format!(
                "rolling, {batch_size} per batch{}",
                interval
                    .map(|d| format!(", {} apart", humantime::format_duration(d)))
                    .unwrap_or_default()
            ),
            Strategy::Canary(c) => format!(
                "canary in {} step{}",
                c.steps.len(),
                if c.steps.len() == 1 { "" } else { "s" }
            ),
        }
    }

    /// The canary, if it is one.
    pub fn canary(&self) -> Option<&super::canary::Canary> {
        match self {
            Strategy::Canary(c) => Some(c),
            _ => None,
        }
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RollingSpec {
    #[schemars(range(min = 1))]
    batch_size: u32,
    #[serde(default)]
    interval: Option<Dur>,
}

const STRATEGIES: &[&str] = &["all", "rolling", "canary"];

/// A strategy as written in YAML: `all`, `rolling`, or `rolling: {batch_size: N}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrategySpec(pub Strategy);

impl<'de> Deserialize<'de> for StrategySpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Strategy;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "`all`, `rolling`, `rolling: {batch_size: N, interval: 30s}` or \
                     `canary: {steps: […]}`",
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Strategy, E> {
                match v {
                    "all" => Ok(Strategy::All),
                    "rolling" => Ok(Strategy::Rolling {
                        batch_size: 1,
                        interval: None,
                    }),
                    _ => Err(E::unknown_variant(v, STRATEGIES)),
                }
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Strategy, A::Error> {
                let key: String = map
                    .next_key()?
                    .ok_or_else(|| de::Error::custom("empty strategy"))?;
                let s = match key.as_str() {
                    "all" => {
                        map.next_value::<de::IgnoredAny>()?;
                        Strategy::All
                    }
                    "rolling" => {
                        let r: RollingSpec = map.next_value()?;
                        if r.batch_size == 0 {
                            return Err(de::Error::custom("batch_size must be at least 1"));
                        }
                        Strategy::Rolling {
                            batch_size: r.batch_size,
                            interval: r.interval.map(|d| d.0),
                        }
                    }
                    "canary" => {
                        let c: super::canary::CanarySpec = map.next_value()?;
                        Strategy::Canary(c.resolve()?)
                    }
                    other => return Err(de::Error::unknown_variant(other, STRATEGIES)),
                };
                if let Some(extra) = map.next_key::<String>()? {
                    return Err(de::Error::custom(format!(
                        "a strategy has one kind; `{extra}` follows `{key}`"
                    )));
                }
                Ok(s)
            }
        }
        d.deserialize_any(V).map(StrategySpec)
    }
}
