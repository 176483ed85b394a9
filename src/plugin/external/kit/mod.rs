//! The conformance kit (`manent plugin test`): starts a plugin binary exactly as the engine does
//! and checks the contract, one named check at a time — handshake, AutoMTLS, health,
//! Configure, the calls, errors, cancellation, stdout, logs, a secret, a crash, Shutdown. A
//! check of an optional call the plugin does not announce is skipped, never failed.
//!
//! Some checks need a call that is slow, fails a chosen way, logs at every level or reads a
//! secret: the kit asks for those through the conformance protocol the SDKs honour
//! (`sdk::conformance`). A plugin that does not honour it (one written on raw go-plugin) has
//! those checks skipped, and the rest still judged.

mod author;
mod calls;
mod live;
mod protocol;
mod start;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::handshake::Addr;
use super::host::{ExternalSpec, Host, Process, StartPhase};
use super::proto::v1;
use super::sdk::{self, conformance};
use super::{Remote, conn, tls};
use crate::config::Artifact;
use crate::moniker::Moniker;
use crate::plugin::contract::{Capability, Deployer};
use crate::plugin::error::PluginError;
use crate::plugin::logger::{Level, LogLine, LogSink};
use crate::plugin::processes::Processes;
use crate::plugin::secrets::{SecretSource, Secrets};
use crate::plugin::types::{DeployResult, Release, Request, Target};

/// How long a cancelled call may take to stop.
pub const CANCEL_BOUND: Duration = Duration::from_secs(2);
/// When the kit cancels its slow call.
const CANCEL_AFTER: Duration = Duration::from_millis(300);
/// The secret the kit offers through the broker.
const SECRET: &str = "conformance_token";

/// What to test, and the request the kit sends.
#[derive(Debug, Clone)]
pub struct KitSpec {
    /// The plugin binary.
    pub command: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its options (what `manent.yml` would give it), for Configure.
    pub options: serde_json::Value,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
    /// The artifact of the kit's deploys (its version is the first release).
    pub artifact: Artifact,
    /// The targets of the kit's calls.
    pub targets: Vec<Target>,
    /// `deploy.params` of the kit's calls.
    pub params: serde_json::Value,
    /// Params the plugin must refuse as permanent (`invalid:`); none given: empty params,
    /// which a plugin that needs none may accept.
    pub invalid: Option<serde_json::Value>,
    /// Params that make the plugin's Deploy take long (`slow:`): the kit cancels a Deploy with
    /// them and times how long the plugin's code runs on.
    pub slow: Option<serde_json::Value>,
    /// Why the plugin cannot tell that a key's work is done (`not_idempotent:`): the same key
    /// again is then not judged.
    pub not_idempotent: Option<String>,
    /// The limit on start and handshake.
    pub start_timeout: Duration,
    /// The limit on each call.
    pub call_timeout: Duration,
}

impl KitSpec {
    /// The kit's defaults for `command`: two targets (`conformance-1` and `-2`), an artifact
    /// `conformance` 1.0.0, no options and no params.
    pub fn new(command: PathBuf) -> Self {
        KitSpec {
            command,
            args: Vec::new(),
            options: serde_json::json!({}),
            env: BTreeMap::new(),
            artifact: Artifact {
                kind: "file".into(),
                name: "conformance".into(),
                version: "1.0.0".into(),
                ..Artifact::default()
            },
            targets: ["conformance-1", "conformance-2"]
                .into_iter()
                .filter_map(|n| target(n, n, BTreeMap::new()))
                .collect(),
            params: serde_json::json!({}),
            invalid: None,
            slow: None,
            not_idempotent: None,
            start_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(60),
        }
    }
}

/// A kit target named `name` at `host`.
pub fn target(name: &str, host: &str, labels: BTreeMap<String, String>) -> Option<Target> {
    Some(Target {
        host: host.to_owned(),
        moniker: Moniker::new("conformance", "kit", "target", name).ok()?,
        labels,
    })
}

/// A check's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The plugin does what the contract says.
    Pass,
    /// It does not: the detail says what and what to do.
    Fail,
    /// Not applicable (an optional call it lacks), or not reached.
    Skip,
}

/// One named check.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Its name (stable: scripts match on it).
    pub name: &'static str,
    /// Its outcome.
    pub outcome: Outcome,
    /// Why, in words.
    pub detail: String,
    /// How long it took (the start's phases: see the `start` check's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ms: Option<u64>,
}

/// Every check, in the order run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The binary tested.
    pub plugin: String,
    /// The checks.
    pub checks: Vec<Check>,
}

impl Report {
    /// How many checks had `outcome`.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.checks.iter().filter(|c| c.outcome == outcome).count()
    }
}

/// The plugin's log lines and the host's lines about it, as the kit saw them: the last
/// [`CAPTURED`] (a plugin flooding its stderr does not grow the kit without end).
#[derive(Default)]
struct Capture(Mutex<std::collections::VecDeque<LogLine>>);

/// Lines the kit keeps.
const CAPTURED: usize = 100_000;

impl LogSink for Capture {
    fn log(&self, line: LogLine) {
        if let Ok(mut lines) = self.0.lock() {
            if lines.len() == CAPTURED {
                lines.pop_front();
            }
            lines.push_back(line);
        }
    }
}

impl Capture {
    fn lines(&self) -> Vec<LogLine> {
        self.0
            .lock()
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }

    async fn wait_for(&self, message: &str, within: Duration) -> Option<(LogLine, Duration)> {
        self.wait_until(|l| l.message == message, within).await
    }

    /// The first line `matches` takes, waited for up to `within`, and how long it took.
    async fn wait_until(
        &self,
        matches: impl Fn(&LogLine) -> bool,
        within: Duration,
    ) -> Option<(LogLine, Duration)> {
        let start = Instant::now();
        loop {
            let found = self
                .0
                .lock()
                .ok()
                .and_then(|lines| lines.iter().find(|l| matches(l)).cloned());
            if let Some(l) = found {
                return Some((l, start.elapsed()));
            }
            if start.elapsed() >= within {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// The one secret the kit offers.
struct KitSecret(String);

#[async_trait]
impl SecretSource for KitSecret {
    async fn secret(&self, name: &str) -> Result<String, PluginError> {
        if name == SECRET {
            Ok(self.0.clone())
        } else {
            Err(PluginError::Permanent(format!(
                "the conformance kit offers only the secret `{SECRET}`, not `{name}`"
            )))
        }
    }
}

/// The secret the author's own Deploy is offered: any name it asks for reads this value, and
/// each read is counted.
struct AuthorSecret {
    value: String,
    reads: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl SecretSource for AuthorSecret {
    async fn secret(&self, _name: &str) -> Result<String, PluginError> {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(self.value.clone())
    }
}

/// The forms of `value` a careless plugin may log it in: as it is, base64, hex.
fn leaked_forms(value: &str) -> [String; 3] {
    use base64::Engine;
    [
        value.to_owned(),
        base64::engine::general_purpose::STANDARD.encode(value),
        value.bytes().map(|b| format!("{b:02x}")).collect(),
    ]
}

struct Kit {
    spec: KitSpec,
    /// The secret offered to every call with the kit file's params, open for the kit's run
    /// (the plugin reads it through the broker during a call only).
    author: Arc<AuthorSecret>,
    open: Secrets,
    _open: crate::plugin::secrets::SecretsGuard,
    /// The checks whose detail (an error, a target's message) carried the author's secret.
    leaked_in: Vec<&'static str>,
    host: Arc<Host>,
    capture: Arc<Capture>,
    checks: Vec<Check>,
    run: String,
    /// When the last check was recorded: the next one took the time since.
    last: Instant,
}

fn check(name: &'static str, outcome: Outcome, detail: impl Into<String>) -> Check {
    Check {
        name,
        outcome,
        detail: detail.into(),
        ms: None,
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The checks a start goes through, in order: a failed start names the first that failed.
const START: [&str; 5] = ["handshake", "protocol", "automtls", "health", "configure"];
/// The host's phase each of them is.
const START_PHASES: [StartPhase; 5] = [
    StartPhase::Handshake,
    StartPhase::Protocol,
    StartPhase::AutoMtls,
    StartPhase::Health,
    StartPhase::Configure,
];

/// Runs every check against `spec.command`.
pub async fn run(spec: KitSpec) -> Report {
    let capture = Arc::new(Capture::default());
    let name = spec
        .command
        .file_name()
        .map_or_else(|| "plugin".into(), |n| n.to_string_lossy().into_owned());
    let mut env = spec.env.clone();
    // The SDKs answer the kit's probes (a kit file may turn that off with `0`).
    env.entry(conformance::ENV.into())
        .or_insert_with(|| "1".into());
    let host = Arc::new(
        Host::new(
            ExternalSpec {
                name,
                command: spec.command.clone(),
                args: spec.args.clone(),
                sha256: None,
                env,
                start_timeout: spec.start_timeout,
                options: spec.options.clone(),
            },
            capture.clone(),
            Processes::default(),
        )
        // The kit judges what the plugin tags its lines with, not what the engine would guess.
        .keeps_untagged(),
    );
    let author = Arc::new(AuthorSecret {
        value: format!(
            "kit-secret-{:016x}{:08x}",
            fastrand::u64(..),
            fastrand::u32(..)
        ),
        reads: std::sync::atomic::AtomicUsize::new(0),
    });
    let (open, guard) = Secrets::for_call_unredacted(author.clone());
    let mut kit = Kit {
        author,
        open,
        _open: guard,
        leaked_in: Vec::new(),
        run: format!("dep-conformance-{:08x}", fastrand::u32(..)),
        spec,
        host,
        capture,
        checks: Vec::new(),
        last: Instant::now(),
    };
    let cookie = kit.cookie().await;
    kit.push(cookie);
    let started = Instant::now();
    match kit.host.process().await {
        Ok(p) => kit.started(&p, started.elapsed()).await,
        Err(e) => {
            let message = e.to_string();
            // The host says where its start stopped; Ready (a crash right after) is charged to
            // the last check.
            let failed = START_PHASES
                .iter()
                .position(|p| *p == kit.host.start_phase())
                .unwrap_or(START.len() - 1);
            for (i, name) in START.into_iter().enumerate() {
                kit.checks.push(match i.cmp(&failed) {
                    std::cmp::Ordering::Less => check(name, Outcome::Pass, "passed"),
                    std::cmp::Ordering::Equal if name == "configure" => check(
                        name,
                        Outcome::Fail,
                        format!(
                            "{message} (give the plugin its options under `options:` in the \
                             kit's file: manent plugin test --config FILE)"
                        ),
                    ),
                    std::cmp::Ordering::Equal => check(name, Outcome::Fail, message.clone()),
                    std::cmp::Ordering::Greater => {
                        check(name, Outcome::Skip, "not reached: the plugin did not start")
                    }
                });
            }
            kit.checks.push(check(
                "start",
                Outcome::Skip,
                "not reached: the plugin did not start",
            ));
            kit.host.shutdown().await;
            return kit.report();
        }
    }
    kit.report()
}

impl Kit {
    fn report(self) -> Report {
        Report {
            plugin: self.spec.command.display().to_string(),
            checks: self.checks,
        }
    }

    /// Records `c`, with the time it took (since the check before) unless it says its own; the
    /// start's phases share the `start` check's time.
    fn push(&mut self, mut c: Check) {
        // The author's secret never shows in the report: an error or a target's message that
        // carried it is said by `secret-leak`, and hidden here.
        let forms = leaked_forms(&self.author.value);
        if forms.iter().any(|f| c.detail.contains(f.as_str())) {
            // `call-logs` quotes a log line: `secret-leak` finds that in the lines themselves.
            if c.name != "call-logs" {
                self.leaked_in.push(c.name);
            }
            c.detail = forms
                .iter()
                .fold(c.detail, |d, f| d.replace(f.as_str(), "[the secret]"));
        }
        let now = Instant::now();
        if c.ms.is_none() && !START.contains(&c.name) {
            c.ms = Some(ms(now.duration_since(self.last)));
        }
        self.last = now;
        self.checks.push(c);
    }

    fn request(
        &self,
        key: &str,
        attempt: u32,
        version: &str,
        probe: Option<serde_json::Value>,
    ) -> Request {
        let mut params = self.spec.params.clone();
        // The kit file's params may name a secret the plugin reads: offered to every call with
        // them, never to the conformance protocol's.
        let mut secrets = self.open.clone();
        if let Some(probe) = probe {
            params = serde_json::json!({ conformance::KEY: probe });
            secrets = Secrets::none();
        }
        Request {
            deployment_id: self.run.clone(),
            application: "kit".into(),
            environment: "conformance".into(),
            artifact: Artifact {
                version: version.to_owned(),
                ..self.spec.artifact.clone()
            },
            targets: self.spec.targets.clone(),
            params,
            secrets,
            parallelism: 1,
            traffic: None,
            routing: None,
            idempotency_key: format!("{}/{key}", self.run),
            attempt,
            processes: Processes::default(),
        }
    }

    async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, PluginError>>,
    ) -> Result<T, PluginError> {
        tokio::time::timeout(self.spec.call_timeout, Box::pin(call))
            .await
            .unwrap_or_else(|_| {
                Err(PluginError::Failed(format!(
                    "no answer within {} (the kit's --call-timeout)",
                    humantime::format_duration(self.spec.call_timeout)
                )))
            })
    }

    /// True when the plugin's process has exited (a call's error was its death).
    async fn died(&self, p: &Process) -> bool {
        p.crashed().await.is_some()
    }

    /// One result per target of the request, none for another host; the statuses, in words.
    fn answers_every_target(&self, r: &DeployResult) -> Result<String, String> {
        let asked: Vec<&str> = self.spec.targets.iter().map(|t| t.host.as_str()).collect();
        if let Some(stray) = r.targets.iter().find(|t| !asked.contains(&t.host.as_str())) {
            return Err(format!(
                "answered for host {:?}, which the request did not name (it named {asked:?})",
                stray.host
            ));
        }
        if r.targets.len() != asked.len() {
            return Err(format!(
                "answered {} target results for {} targets: one per target, in request order",
                r.targets.len(),
                asked.len()
            ));
        }
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for t in &r.targets {
            *counts.entry(t.status.as_str()).or_default() += 1;
        }
        Ok(counts
            .iter()
            .map(|(s, n)| format!("{n} {s}"))
            .collect::<Vec<_>>()
            .join(", "))
    }
}

/// The optional calls and what announces each.
const KNOWN: [(&str, Capability); 8] = [
    ("DryRun", Capability::DryRun),
    ("CurrentRelease", Capability::CurrentRelease),
    ("Rollback", Capability::Rollback),
    ("PrepareSlots", Capability::Slots),
    ("SetCandidateWeight", Capability::TrafficRouter),
    ("RouteTesters", Capability::Testers),
    ("ScaleCandidate", Capability::Scale),
    ("", Capability::ParallelTargets),
];

const UNIMPLEMENTED_HERE: &str = "announced, but answers UNIMPLEMENTED for the kit's request \
     (give it params that enable the call with --config)";

const NOT_HONOURED: &str = "needs the conformance protocol, which this plugin does not honour \
     (manent's SDKs do: docs/plugins.md)";

/// The idempotency key a line names (the SDKs' `call ended` line does).
fn key_of(l: &LogLine) -> Option<&str> {
    l.attrs.get("idempotency_key").and_then(|v| v.as_str())
}

fn kind(e: &PluginError) -> &'static str {
    match e {
        PluginError::Failed(_) => "retryable",
        PluginError::Permanent(_) => "permanent",
        PluginError::Unimplemented(_) => "not-implemented",
    }
}

fn outcome_kind<T>(r: &Result<T, PluginError>) -> String {
    match r {
        Ok(_) => "success".into(),
        Err(e) => format!("a {} error ({e})", kind(e)),
    }
}
