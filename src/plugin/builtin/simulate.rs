//! `simulate`: a simulated fleet for the demo, tests and benchmarks. It touches nothing: each
//! "deploy" waits a latency drawn from the configured range, may fail (transiently or
//! permanently) at the configured rate, and logs a few lines. It also simulates a canary's
//! slots, traffic router, testers and scale (in memory: a restarted plugin forgets its weights,
//! which is what the engine re-asserts). Everything it says is labelled as simulated.
//! Randomness is seeded per target and attempt, so a run is reproducible.

mod canary;

use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;

use crate::config::values::Dur;
use crate::plugin::contract::{
    Deployer, DryRunner, ParallelDeployer, ReleaseInspector, Rollbacker, SlotDeployer, SlotScaler,
    TesterRouter, TrafficRouter,
};
use crate::plugin::error::PluginError;
use crate::plugin::logger::Logger;
use crate::plugin::targets::{for_all_targets, for_each_target};
use crate::plugin::types::{
    DeployResult, Pool, Release, Request, Routing, RoutingState, SlotTraffic, Target,
    TargetRelease, TargetResult, TargetStatus, Traffic, TrafficInterval, TrafficWindow,
};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    /// Latency per target, `{min: 50ms, max: 2s}` or one duration.
    #[serde(default)]
    latency: Option<Latency>,
    /// Fraction of attempts that fail, 0 to 1.
    #[serde(default)]
    failure_rate: Option<f64>,
    /// Fraction of failures that are permanent (not retried).
    #[serde(default)]
    permanent_share: Option<f64>,
    /// Targets whose every attempt fails permanently.
    #[serde(default)]
    fail_targets: Option<BTreeSet<String>>,
    /// Targets whose first `flaky_attempts` attempts fail transiently.
    #[serde(default)]
    flaky_targets: Option<BTreeSet<String>>,
    /// How many attempts of a flaky target fail (default 1).
    #[serde(default)]
    flaky_attempts: Option<u32>,
    /// Log lines per target.
    #[serde(default)]
    log_lines: Option<u32>,
    /// Seed for reproducible runs.
    #[serde(default)]
    seed: Option<u64>,
    /// A file that gets one line per call (`<call> <idempotency key> <attempt> <detail>`):
    /// what the crash tests read to see which calls ran.
    #[serde(default)]
    ledger: Option<String>,
    /// Requests through the simulated router, for router analysis and the console's charts.
    #[serde(default)]
    traffic: Option<SimTraffic>,
}

/// `traffic: {rate: 200, stable: {error_rate: 0.001, p99: 40ms}, candidate: {…, burst: …}}`
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct SimTraffic {
    /// Requests a second through the router, split by the weight.
    #[serde(default = "default_rate")]
    rate: f64,
    #[serde(default)]
    stable: SlotSim,
    #[serde(default)]
    candidate: SlotSim,
}

fn default_rate() -> f64 {
    100.0
}

/// How one slot answers.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct SlotSim {
    /// Fraction of its requests answered 5xx, 0 to 1.
    #[serde(default)]
    error_rate: f64,
    /// Its p99 latency.
    #[serde(default = "default_p99")]
    p99: Dur,
    /// A spell of errors, from `after` the candidate first took traffic, `lasting` so long.
    #[serde(default)]
    burst: Option<Burst>,
}

impl Default for SlotSim {
    fn default() -> Self {
        SlotSim {
            error_rate: 0.0,
            p99: default_p99(),
            burst: None,
        }
    }
}

fn default_p99() -> Dur {
    Dur(Duration::from_millis(40))
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct Burst {
    after: Dur,
    lasting: Dur,
    error_rate: f64,
}

#[derive(Debug, Clone, Copy)]
enum Latency {
    Fixed(Dur),
    Range { min: Dur, max: Dur },
}

/// `100ms` or `{min: 50ms, max: 2s}`, with an error that says so for anything else (serde's own
/// for an untagged enum names only the type).
impl<'de> Deserialize<'de> for Latency {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Range {
            min: Dur,
            max: Dur,
        }
        let v = serde_json::Value::deserialize(d)?;
        let shape = "latency: write one duration (`latency: 100ms`) or a range \
                     (`latency: {min: 50ms, max: 2s}`)";
        let e = |why: String| serde::de::Error::custom(format!("{shape}: {why}"));
        match v {
            serde_json::Value::String(_) => Dur::deserialize(v)
                .map(Latency::Fixed)
                .map_err(|x| e(x.to_string())),
            serde_json::Value::Object(_) => Range::deserialize(v)
                .map(|r| Latency::Range {
                    min: r.min,
                    max: r.max,
                })
                .map_err(|x| e(x.to_string())),
            other => Err(e(format!("not {other}"))),
        }
    }
}

impl Settings {
    /// `over`'s fields win over `self`'s.
    fn merged(&self, over: &Settings) -> Settings {
        Settings {
            latency: over.latency.or(self.latency),
            failure_rate: over.failure_rate.or(self.failure_rate),
            permanent_share: over.permanent_share.or(self.permanent_share),
            fail_targets: over
                .fail_targets
                .clone()
                .or_else(|| self.fail_targets.clone()),
            flaky_targets: over
                .flaky_targets
                .clone()
                .or_else(|| self.flaky_targets.clone()),
            flaky_attempts: over.flaky_attempts.or(self.flaky_attempts),
            log_lines: over.log_lines.or(self.log_lines),
            seed: over.seed.or(self.seed),
            ledger: over.ledger.clone().or_else(|| self.ledger.clone()),
            traffic: over.traffic.or(self.traffic),
        }
    }
}

/// The `simulate` factory. Options in `manent.yml` are defaults; `deploy.params` override them.
pub fn factory(options: &serde_json::Value, log: Logger) -> Result<Arc<dyn Deployer>, PluginError> {
    let defaults = parse(options, "options")?;
    Ok(Arc::new(Simulate {
        defaults,
        log,
        fleet: Mutex::new(HashMap::new()),
        routers: Mutex::new(HashMap::new()),
        live_since: Mutex::new(HashMap::new()),
        done: Mutex::default(),
    }))
}

fn parse(v: &serde_json::Value, what: &str) -> Result<Settings, PluginError> {
    if v.is_null() {
        return Ok(Settings::default());
    }
    let s: Settings = serde_json::from_value(v.clone())
        .map_err(|e| PluginError::Permanent(format!("simulate {what}: {e}")))?;
    for (name, rate) in [
        ("failure_rate", s.failure_rate),
        ("permanent_share", s.permanent_share),
    ] {
        if rate.is_some_and(|r| !(0.0..=1.0).contains(&r)) {
            return Err(PluginError::Permanent(format!(
                "simulate {what}: {name} must be between 0 and 1"
            )));
        }
    }
    if let Some(t) = &s.traffic {
        let rates = [
            ("traffic.stable.error_rate", Some(t.stable.error_rate)),
            ("traffic.candidate.error_rate", Some(t.candidate.error_rate)),
            (
                "traffic.stable.burst.error_rate",
                t.stable.burst.map(|b| b.error_rate),
            ),
            (
                "traffic.candidate.burst.error_rate",
                t.candidate.burst.map(|b| b.error_rate),
            ),
        ];
        for (name, rate) in rates {
            if rate.is_some_and(|r| !(0.0..=1.0).contains(&r)) {
                return Err(PluginError::Permanent(format!(
                    "simulate {what}: {name} must be between 0 and 1"
                )));
            }
        }
        if !(t.rate.is_finite() && (0.0..=100_000.0).contains(&t.rate)) {
            return Err(PluginError::Permanent(format!(
                "simulate {what}: traffic.rate must be 0 to 100000 requests a second"
            )));
        }
    }
    if let Some(Latency::Range { min, max }) = s.latency
        && min.0 > max.0
    {
        return Err(PluginError::Permanent(format!(
            "simulate {what}: latency min ({}) is above max ({})",
            humantime::format_duration(min.0),
            humantime::format_duration(max.0)
        )));
    }
    Ok(s)
}

struct Simulate {
    defaults: Settings,
    log: Logger,
    /// What each simulated target runs, by moniker.
    fleet: Mutex<HashMap<String, String>>,
    /// Each environment's simulated router (`application/environment`): what it serves.
    routers: Mutex<HashMap<String, Routing>>,
    /// When each environment's candidate first took traffic (epoch ms), for `burst`.
    live_since: Mutex<HashMap<String, i64>>,
    /// The idempotency keys (and monikers) whose deploy is done: the same key again finds it.
    done: Mutex<std::collections::HashSet<(String, String)>>,
}

enum Fate {
    Succeed,
    Transient,
    Permanent,
}

impl Simulate {
    fn settings(&self, req: &Request) -> Result<Settings, PluginError> {
        Ok(self.defaults.merged(&parse(&req.params, "params")?))
    }

    fn rng(s: &Settings, req: &Request, t: &Target) -> fastrand::Rng {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            s.seed.unwrap_or(0),
            &req.idempotency_key,
            req.attempt,
            t.moniker.to_string(),
        )
            .hash(&mut h);
        fastrand::Rng::with_seed(h.finish())
    }

    fn fate(s: &Settings, req: &Request, t: &Target, rng: &mut fastrand::Rng) -> Fate {
        if s.fail_targets
            .as_ref()
            .is_some_and(|f| f.contains(t.name()))
        {
            return Fate::Permanent;
        }
        if s.flaky_targets
            .as_ref()
            .is_some_and(|f| f.contains(t.name()))
            && req.attempt <= s.flaky_attempts.unwrap_or(1)
        {
            return Fate::Transient;
        }
        if rng.f64() < s.failure_rate.unwrap_or(0.0) {
            if rng.f64() < s.permanent_share.unwrap_or(0.0) {
                Fate::Permanent
            } else {
                Fate::Transient
            }
        } else {
            Fate::Succeed
        }
    }

    fn latency(s: &Settings, rng: &mut fastrand::Rng) -> Duration {
        match s.latency {
            None => Duration::ZERO,
            Some(Latency::Fixed(Dur(d))) => d,
            Some(Latency::Range {
                min: Dur(min),
                max: Dur(max),
            }) => {
                let span = max.saturating_sub(min).as_secs_f64();
                min + Duration::from_secs_f64(span * rng.f64())
            }
        }
    }

    async fn work(&self, req: &Request, t: &Target, verb: &str) -> Result<Duration, PluginError> {
        let s = self.settings(req)?;
        let mut rng = Simulate::rng(&s, req, t);
        let latency = Simulate::latency(&s, &mut rng);
        let fate = Simulate::fate(&s, req, t, &mut rng);
        let log = self.log.for_deployment(&req.deployment_id).for_target(t);
        let lines = s.log_lines.unwrap_or(3);
        let steps = [
            "fetching the artifact",
            "switching the release",
            "checking health",
        ];
        for i in 0..lines {
            let what = steps[usize::try_from(i).unwrap_or(0) % steps.len()];
            log.info(&format!(
                "simulated {verb} on {}: {what} ({}/{lines})",
                t.host,
                i + 1
            ));
            if !latency.is_zero() {
                tokio::time::sleep(latency / lines.max(1)).await;
            }
        }
        if lines == 0 && !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        match fate {
            Fate::Succeed => Ok(latency),
            Fate::Transient => {
                log.warn(&format!(
                    "simulated transient failure on {} (attempt {})",
                    t.host, req.attempt
                ));
                Err(PluginError::Failed(format!(
                    "simulated transient failure on {}",
                    t.host
                )))
            }
            Fate::Permanent => {
                log.error(&format!("simulated permanent failure on {}", t.host));
                Err(PluginError::Permanent(format!(
                    "simulated permanent failure on {}",
                    t.host
                )))
            }
        }
    }

    /// Appends `call detail` to the ledger, if one is configured.
    fn ledger(&self, req: &Request, call: &str, detail: &str) {
        let Ok(s) = self.settings(req) else { return };
        let Some(path) = s.ledger else { return };
        let line = format!(
            "{call} {} {} {detail}\n",
            if req.idempotency_key.is_empty() {
                "-"
            } else {
                &req.idempotency_key
            },
            req.attempt
        );
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = std::io::Write::write_all(&mut f, line.as_bytes());
        }
    }

    /// Serves manent's routing from the request (the only source a router renders from), with
    /// the call's change applied; without one (an older host), what it serves now.
    fn route(&self, req: &Request, change: impl FnOnce(&mut Routing)) -> Routing {
        let key = format!("{}/{}", req.application, req.environment);
        let Ok(mut routers) = self.routers.lock() else {
            return Routing::default();
        };
        let mut r = req
            .routing
            .clone()
            .or_else(|| routers.get(&key).cloned())
            .unwrap_or_default();
        change(&mut r);
        routers.insert(key, r.clone());
        r
    }

    /// What the simulated router serves (nothing set since the plugin started: everything on
    /// the slot the fleet says is live).
    fn served(&self, req: &Request) -> Routing {
        let key = format!("{}/{}", req.application, req.environment);
        if let Some(r) = self.routers.lock().ok().and_then(|r| r.get(&key).cloned()) {
            return r;
        }
        Routing {
            stable: Pool {
                slot: self.live_slot(req),
                ..Pool::default()
            },
            retired: true,
            ..Routing::default()
        }
    }

    /// The slot the fleet serves this application from (`blue` before any promotion).
    fn live_slot(&self, req: &Request) -> String {
        self.fleet
            .lock()
            .ok()
            .and_then(|f| {
                req.targets
                    .first()
                    .and_then(|t| f.get(&format!("{}#slot", t.moniker)).cloned())
            })
            .unwrap_or_else(|| "blue".into())
    }

    /// (stable, candidate) slots: manent's record, else PrepareSlots' state.
    fn slots(req: &Request) -> (String, String) {
        if let Some(r) = &req.routing
            && !r.candidate.slot.is_empty()
        {
            return (r.stable.slot.clone(), r.candidate.slot.clone());
        }
        let get = |k: &str| {
            req.traffic
                .as_ref()
                .and_then(|t| t.get(k))
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        (
            get("stable").unwrap_or_else(|| "blue".into()),
            get("candidate").unwrap_or_else(|| "green".into()),
        )
    }

    fn set_live(&self, t: &Target, version: &str) {
        if let Ok(mut f) = self.fleet.lock() {
            f.insert(t.moniker.to_string(), version.to_owned());
        }
    }
}

#[async_trait]
impl Deployer for Simulate {
    async fn validate(&self, req: &Request) -> Result<(), PluginError> {
        self.settings(req).map(|_| ())
    }

    async fn deploy(&self, req: &Request) -> Result<DeployResult, PluginError> {
        let outcome = for_each_target(req, |t| async move {
            let key = (req.idempotency_key.clone(), t.moniker.to_string());
            if self.done.lock().is_ok_and(|d| d.contains(&key)) {
                return Ok(
                    TargetResult::new(TargetStatus::Unchanged).with_message(format!(
                        "{} deployed already under this step's key",
                        req.artifact.version
                    )),
                );
            }
            let took = self.work(req, &t, "deploy").await?;
            self.set_live(&t, &req.artifact.version);
            if let Ok(mut d) = self.done.lock() {
                d.insert(key);
            }
            Ok(
                TargetResult::new(TargetStatus::Deployed).with_message(format!(
                    "simulated deploy of {} ({} ms simulated latency)",
                    req.artifact.version,
                    took.as_millis()
                )),
            )
        })
        .await;
        DeployResult::of("simulate", &req.artifact.version, outcome)
    }

    fn dry_runner(&self) -> Option<&dyn DryRunner> {
        Some(self)
    }

    fn release_inspector(&self) -> Option<&dyn ReleaseInspector> {
        Some(self)
    }

    fn rollbacker(&self) -> Option<&dyn Rollbacker> {
        Some(self)
    }

    fn parallel_deployer(&self) -> Option<&dyn ParallelDeployer> {
        Some(self)
    }

    fn slot_deployer(&self) -> Option<&dyn SlotDeployer> {
        Some(self)
    }

    fn traffic_router(&self) -> Option<&dyn TrafficRouter> {
        Some(self)
    }

    fn tester_router(&self) -> Option<&dyn TesterRouter> {
        Some(self)
    }

    fn slot_scaler(&self) -> Option<&dyn SlotScaler> {
        Some(self)
    }
}

impl ParallelDeployer for Simulate {
    fn parallel_targets(&self) -> bool {
        true
    }
}

#[async_trait]
impl DryRunner for Simulate {
    async fn dry_run(&self, req: &Request) -> Result<DeployResult, PluginError> {
        let (targets, _) = for_all_targets(req, |t| async move {
            Ok(
                TargetResult::new(TargetStatus::Unchanged).with_message(format!(
                    "simulated: would deploy {} to {}",
                    req.artifact.version, t.host
                )),
            )
        })
        .await;
        Ok(DeployResult {
            plugin: "simulate".into(),
            targets,
            release: String::new(),
        })
    }
}

#[async_trait]
impl ReleaseInspector for Simulate {
    async fn current_release(&self, req: &Request) -> Result<Vec<TargetRelease>, PluginError> {
        let fleet = self
            .fleet
            .lock()
            .map_err(|_| PluginError::failed("simulated fleet poisoned"))?;
        Ok(req
            .targets
            .iter()
            .map(|t| TargetRelease {
                host: t.host.clone(),
                version: fleet
                    .get(&t.moniker.to_string())
                    .cloned()
                    .unwrap_or_default(),
            })
            .collect())
    }
}

#[async_trait]
impl Rollbacker for Simulate {
    async fn rollback(&self, req: &Request, to: &Release) -> Result<DeployResult, PluginError> {
        let outcome = for_all_targets(req, |t| async move {
            self.work(req, &t, "rollback").await?;
            self.set_live(&t, &to.version);
            Ok(TargetResult::new(TargetStatus::RolledBack)
                .with_message(format!("simulated rollback to {}", to.version)))
        })
        .await;
        DeployResult::of("simulate", &to.version, outcome)
    }
}
