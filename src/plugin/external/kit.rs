//! The conformance kit (`manent plugin test`): starts a plugin binary exactly as the engine does
//! and checks the contract, one named check at a time — handshake, AutoMTLS, health,
//! Configure, the calls, errors, cancellation, stdout, logs, a secret, a crash, Shutdown. A
//! check of an optional call the plugin does not announce is skipped, never failed.
//!
//! Some checks need a call that is slow, fails a chosen way, logs at every level or reads a
//! secret: the kit asks for those through the conformance protocol the SDKs honour
//! (`sdk::conformance`). A plugin that does not honour it (one written on raw go-plugin) has
//! those checks skipped, and the rest still judged.

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
use super::sdk::conformance;
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

    fn find(&self, message: &str) -> Option<LogLine> {
        let lines = self.0.lock().ok()?;
        lines.iter().find(|l| l.message == message).cloned()
    }

    async fn wait_for(&self, message: &str, within: Duration) -> Option<(LogLine, Duration)> {
        let start = Instant::now();
        loop {
            if let Some(l) = self.find(message) {
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
    let host = Arc::new(Host::new(
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
    ));
    let mut kit = Kit {
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
        let now = Instant::now();
        if c.ms.is_none() && !START.contains(&c.name) {
            c.ms = Some(ms(now.duration_since(self.last)));
        }
        self.last = now;
        self.checks.push(c);
    }

    /// Run by hand (no magic cookie), a plugin says so and exits, printing nothing on stdout.
    async fn cookie(&self) -> Check {
        let mut cmd = tokio::process::Command::new(&self.spec.command);
        cmd.args(&self.spec.args)
            .env_clear()
            .envs(std::env::var("PATH").map(|p| ("PATH", p)))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        crate::sys::die_with_parent(&mut cmd);
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                return check(
                    "cookie",
                    Outcome::Fail,
                    format!("cannot start {}: {e}", self.spec.command.display()),
                );
            }
        };
        let pid = child.id().unwrap_or(0);
        match tokio::time::timeout(Duration::from_secs(5), child.wait_with_output()).await {
            Err(_) => {
                crate::sys::kill_group(pid);
                check(
                    "cookie",
                    Outcome::Fail,
                    "run without manent's magic cookie (MANENT_PLUGIN) it was still running after \
                     5s: a plugin run by hand must say it is a plugin and exit",
                )
            }
            Ok(Err(e)) => check("cookie", Outcome::Fail, format!("cannot wait for it: {e}")),
            Ok(Ok(out)) if !out.stdout.is_empty() => check(
                "cookie",
                Outcome::Fail,
                format!(
                    "run without the magic cookie it printed {:?} on stdout: a host would take \
                     that for a handshake",
                    String::from_utf8_lossy(&out.stdout[..out.stdout.len().min(80)])
                ),
            ),
            Ok(Ok(out)) if out.status.success() => check(
                "cookie",
                Outcome::Fail,
                "run without the magic cookie it exited 0: it should refuse (exit non-zero)",
            ),
            Ok(Ok(out)) => check(
                "cookie",
                Outcome::Pass,
                format!(
                    "refuses to run without the magic cookie ({}; nothing on stdout)",
                    out.status
                ),
            ),
        }
    }

    async fn started(&mut self, p: &Arc<Process>, took: Duration) {
        let shake = &p.handshake;
        let (network, address) = shake.addr.parts();
        self.push(check(
            "handshake",
            Outcome::Pass,
            format!("handshake line on stdout; serves on {network}:{address}"),
        ));
        self.push(check(
            "protocol",
            Outcome::Pass,
            format!(
                "go-plugin core protocol {}, plugin protocol {}, {}",
                shake.core, shake.app, shake.protocol
            ),
        ));
        let mtls = self.mtls(p).await;
        self.push(mtls);
        self.push(check("health", Outcome::Pass, "`plugin` is SERVING"));
        let unknown: Vec<&String> = p
            .capabilities
            .0
            .iter()
            .filter(|c| !KNOWN.iter().any(|(_, k)| k.as_str() == c.as_str()))
            .collect();
        self.push(if unknown.is_empty() {
            check(
                "configure",
                Outcome::Pass,
                format!("capabilities: [{}]", p.capabilities),
            )
        } else {
            check(
                "configure",
                Outcome::Fail,
                format!(
                    "announces capabilities manent does not know: {unknown:?} (known: {})",
                    KNOWN.map(|(_, c)| c.as_str()).join(", ")
                ),
            )
        });
        let mut start = check(
            "start",
            Outcome::Pass,
            format!(
                "ready in {} ms (spawn to Configure answered; the limit is {})",
                ms(took),
                humantime::format_duration(self.spec.start_timeout)
            ),
        );
        start.ms = Some(ms(took));
        self.push(start);
        self.calls(p).await;
    }

    /// Only the host's certificate is served: another client certificate and plaintext are
    /// refused.
    async fn mtls(&self, p: &Process) -> Check {
        let Some(cert) = p.handshake.cert.clone() else {
            return check("automtls", Outcome::Fail, "no certificate in its handshake");
        };
        let plugin_cert = rustls::pki_types::CertificateDer::from(cert);
        let stranger = match tls::Identity::generate()
            .map_err(|e| e.to_string())
            .and_then(|id| tls::client_config(&id, &plugin_cert).map_err(|e| e.to_string()))
        {
            Ok(c) => c,
            Err(e) => return check("automtls", Outcome::Fail, format!("kit error: {e}")),
        };
        let foreign = async {
            let channel = conn::h2(p.handshake.addr.clone(), stranger, &|_| {}).await?;
            let mut health =
                tonic_health::pb::health_client::HealthClient::with_origin(channel, conn::origin());
            health
                .check(tonic_health::pb::HealthCheckRequest {
                    service: "plugin".into(),
                })
                .await
                .map_err(std::io::Error::other)?;
            Ok::<(), std::io::Error>(())
        };
        let foreign = tokio::time::timeout(Duration::from_secs(5), foreign).await;
        if let Ok(Ok(())) = foreign {
            return check(
                "automtls",
                Outcome::Fail,
                "it answered a client whose certificate is not the host's (PLUGIN_CLIENT_CERT): \
                 another local user could drive it",
            );
        }
        match plaintext(&p.handshake.addr).await {
            Ok(true) => check(
                "automtls",
                Outcome::Fail,
                "it speaks HTTP/2 without TLS to anyone who connects",
            ),
            Ok(false) => check(
                "automtls",
                Outcome::Pass,
                "mutual TLS with the host's certificate; another certificate and plaintext refused",
            ),
            Err(e) => check(
                "automtls",
                Outcome::Fail,
                format!("cannot check plaintext: {e}"),
            ),
        }
    }

    fn request(
        &self,
        key: &str,
        attempt: u32,
        version: &str,
        probe: Option<serde_json::Value>,
    ) -> Request {
        let mut params = self.spec.params.clone();
        if let Some(probe) = probe {
            params = serde_json::json!({ conformance::KEY: probe });
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
            secrets: Secrets::none(),
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

    async fn calls(&mut self, p: &Arc<Process>) {
        let remote = Remote::new(self.host.clone(), p.capabilities.clone());
        let announced = |c: Capability| p.capabilities.has(c);
        let supports = self.supports(p).await;
        self.push(supports);
        let unannounced = self.unannounced(p).await;
        self.push(unannounced);
        let version = self.spec.artifact.version.clone();

        // Validate: the kit's own request, then one it must refuse.
        let plain = self.request("validate", 1, &version, None);
        let c = match self.bounded(remote.validate(&plain)).await {
            Ok(()) => check("validate", Outcome::Pass, "accepts the kit's request"),
            Err(e) if self.died(p).await => check(
                "validate",
                Outcome::Fail,
                format!("the plugin died answering Validate: {e}"),
            ),
            Err(e) => check(
                "validate",
                Outcome::Pass,
                format!(
                    "answers the kit's request with a refusal: {e} (give the kit a request it \
                     accepts with --config)"
                ),
            ),
        };
        self.push(c);
        let bad = self.request(
            "refuse",
            1,
            &version,
            Some(serde_json::json!({"refuse": "the kit sent a request to refuse"})),
        );
        let mut honours = false;
        let c = match self.bounded(remote.validate(&bad)).await {
            Err(PluginError::Permanent(m)) if m.contains("conformance:") => {
                honours = true;
                check(
                    "validate-refuses",
                    Outcome::Pass,
                    "a request it refuses fails at once, as permanent (not retried)",
                )
            }
            Err(PluginError::Failed(m)) if m.contains("conformance:") => {
                honours = true;
                check(
                    "validate-refuses",
                    Outcome::Fail,
                    format!(
                        "a refused request came back retryable ({m}): the engine would retry a \
                         request that can never pass; refuse with INVALID_ARGUMENT or ABORTED"
                    ),
                )
            }
            _ => check("validate-refuses", Outcome::Skip, NOT_HONOURED),
        };
        self.push(c);
        let c = self.invalid_input(&remote, p, &version).await;
        self.push(c);

        // Deploy, then the same idempotency key again. The author's own Deploy is offered a
        // secret under any name it asks for: whether its value reaches a log line is checked.
        let author = Arc::new(AuthorSecret {
            value: format!(
                "kit-secret-{:016x}{:08x}",
                fastrand::u64(..),
                fastrand::u32(..)
            ),
            reads: std::sync::atomic::AtomicUsize::new(0),
        });
        let mut first = self.request("deploy", 1, &version, None);
        let (secrets, open) = Secrets::for_call_unredacted(author.clone());
        first.secrets = secrets;
        let deployed = self.bounded(remote.deploy(&first)).await;
        drop(open);
        let deploy_ok = deployed
            .as_ref()
            .is_ok_and(|r| self.answers_every_target(r).is_ok());
        let c = match &deployed {
            Ok(r) => match self.answers_every_target(r) {
                Ok(statuses) => check(
                    "deploy",
                    Outcome::Pass,
                    format!(
                        "{version} on {} targets: {statuses}",
                        self.spec.targets.len()
                    ),
                ),
                Err(why) => check("deploy", Outcome::Fail, why),
            },
            Err(e) if self.died(p).await => check(
                "deploy",
                Outcome::Fail,
                format!("the plugin died answering Deploy: {e}"),
            ),
            Err(e) => check(
                "deploy",
                Outcome::Pass,
                format!(
                    "answers with a {} error: {e} (the kit checks the contract, not your \
                     deployment: give it targets and params it can deploy with --config)",
                    kind(e)
                ),
            ),
        };
        self.push(c);
        // The same key again, with the same secret open for it as for the first call.
        let (secrets, open) = Secrets::for_call_unredacted(author.clone());
        first.secrets = secrets;
        let c = if deploy_ok {
            self.idempotency(&remote, &first, announced(Capability::CurrentRelease))
                .await
        } else {
            check(
                "idempotency",
                Outcome::Skip,
                "Deploy did not succeed on the kit's request (see `deploy`)",
            )
        };
        drop(open);
        first.secrets = Secrets::none();
        self.push(c);
        let c = self.secret_leak(&author).await;
        self.push(c);
        let c = self.dry_run(&remote, p, deploy_ok).await;
        self.push(c);
        let c = self.current_release(&remote, p).await;
        self.push(c);
        let c = self.rollback(&remote, p, deploy_ok).await;
        self.push(c);

        // What the conformance protocol makes a plugin do.
        let c = if honours {
            self.errors(&remote).await
        } else {
            check("errors", Outcome::Skip, NOT_HONOURED)
        };
        self.push(c);
        let c = if honours {
            self.logs(&remote).await
        } else {
            check("logs", Outcome::Skip, NOT_HONOURED)
        };
        self.push(c);
        let c = if honours {
            self.secret(&remote).await
        } else {
            check("secret", Outcome::Skip, NOT_HONOURED)
        };
        self.push(c);
        if honours {
            let probe = self.request(
                "print",
                1,
                &version,
                Some(serde_json::json!({"print": "conformance stdout probe"})),
            );
            let _ = self.bounded(remote.deploy(&probe)).await;
        }
        let c = if honours {
            self.cancellation(&remote).await
        } else {
            check("cancellation", Outcome::Skip, NOT_HONOURED)
        };
        self.push(c);
        let c = self.crash(&remote, p, honours).await;
        self.push(c);
        let c = self.stdout(honours).await;
        self.push(c);
        let c = self.shutdown().await;
        self.push(c);
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

    async fn supports(&self, p: &Process) -> Check {
        let mut client = p.deployer.clone();
        let call = client.supports(v1::SupportsRequest {
            artifact: Some((&self.spec.artifact).into()),
        });
        match tokio::time::timeout(self.spec.call_timeout, call).await {
            Ok(Ok(r)) => check(
                "supports",
                Outcome::Pass,
                format!(
                    "says it {} the kit's artifact ({})",
                    if r.into_inner().supported {
                        "supports"
                    } else {
                        "does not support"
                    },
                    self.spec.artifact.kind
                ),
            ),
            // Optional: manent deploys with the plugin a descriptor names and never needs it.
            Ok(Err(s)) if s.code() == tonic::Code::Unimplemented => check(
                "supports",
                Outcome::Skip,
                "Supports is not implemented: the plugin is taken to support every artifact \
                 (implement it to say which artifact types it can deploy)",
            ),
            Ok(Err(s)) => check(
                "supports",
                Outcome::Fail,
                format!(
                    "Supports failed: {:?} {} (an error counts as \"not supported\"; answer \
                     UNIMPLEMENTED if the plugin does not say)",
                    s.code(),
                    s.message()
                ),
            ),
            Err(_) => check("supports", Outcome::Fail, "Supports did not answer"),
        }
    }

    /// Every optional call it did not announce answers UNIMPLEMENTED.
    async fn unannounced(&self, p: &Process) -> Check {
        let mut wrong = Vec::new();
        let mut asked = Vec::new();
        for (call, cap) in KNOWN {
            if p.capabilities.has(cap) || cap == Capability::ParallelTargets {
                continue;
            }
            asked.push(call);
            let mut c = p.deployer.clone();
            let req = v1::DeployRequest::default();
            let weight = v1::WeightRequest::default();
            let answer = async {
                match call {
                    "DryRun" => c.dry_run(req).await.map(|_| ()),
                    "CurrentRelease" => c.current_release(req).await.map(|_| ()),
                    "Rollback" => c.rollback(v1::RollbackRequest::default()).await.map(|_| ()),
                    "PrepareSlots" => c.prepare_slots(req).await.map(|_| ()),
                    "SetCandidateWeight" => c.set_candidate_weight(weight).await.map(|_| ()),
                    "RouteTesters" => c.route_testers(req).await.map(|_| ()),
                    _ => c.scale_candidate(weight).await.map(|_| ()),
                }
            };
            // A plugin that never answers an optional call must not hold the kit for ever.
            let Ok(answer) = tokio::time::timeout(self.spec.call_timeout, Box::pin(answer)).await
            else {
                wrong.push(format!(
                    "{call} did not answer within {} (it should answer UNIMPLEMENTED at once)",
                    humantime::format_duration(self.spec.call_timeout)
                ));
                continue;
            };
            match answer {
                Err(s) if s.code() == tonic::Code::Unimplemented => {}
                Err(s) => wrong.push(format!("{call}: {:?} {}", s.code(), s.message())),
                Ok(()) => wrong.push(format!(
                    "{call} answered although `{}` was not announced (announce it, or the \
                     engine never calls it)",
                    cap.as_str()
                )),
            }
        }
        if asked.is_empty() {
            check(
                "unannounced",
                Outcome::Skip,
                "it announces every optional capability",
            )
        } else if wrong.is_empty() {
            check(
                "unannounced",
                Outcome::Pass,
                format!("UNIMPLEMENTED from {}", asked.join(", ")),
            )
        } else {
            check(
                "unannounced",
                Outcome::Fail,
                format!(
                    "an optional call it did not announce must answer UNIMPLEMENTED: {}",
                    wrong.join("; ")
                ),
            )
        }
    }

    async fn idempotency(&self, remote: &Remote, first: &Request, inspect: bool) -> Check {
        let mut again = first.clone();
        again.attempt = 2;
        let r = match self.bounded(remote.deploy(&again)).await {
            Ok(r) => r,
            Err(e) => {
                return check(
                    "idempotency",
                    Outcome::Fail,
                    format!(
                        "the same idempotency key again (attempt 2, as after a crash) failed: {e}; \
                         a retried step must find the work done, not fail"
                    ),
                );
            }
        };
        if let Err(why) = self.answers_every_target(&r) {
            return check("idempotency", Outcome::Fail, format!("attempt 2 {why}"));
        }
        use crate::plugin::types::TargetStatus;
        if let Some(t) = r
            .targets
            .iter()
            .find(|t| !matches!(t.status, TargetStatus::Deployed | TargetStatus::Unchanged))
        {
            return check(
                "idempotency",
                Outcome::Fail,
                format!(
                    "the same key again left {} {}: {}",
                    t.host,
                    t.status.as_str(),
                    t.message
                ),
            );
        }
        if !inspect {
            return check(
                "idempotency",
                Outcome::Pass,
                "the same key twice answered deployed/unchanged on every target (no \
                 CurrentRelease to read back what is live)",
            );
        }
        match self.live(remote, "idempotency-read").await {
            Ok(live) if live.iter().all(|(_, v)| v.is_empty()) => check(
                "idempotency",
                Outcome::Pass,
                "the same key twice answered deployed/unchanged on every target (CurrentRelease \
                 cannot tell what is live)",
            ),
            Ok(live) if live.iter().all(|(_, v)| *v == first.artifact.version) => check(
                "idempotency",
                Outcome::Pass,
                format!(
                    "the same key twice; CurrentRelease reads {} on every target",
                    first.artifact.version
                ),
            ),
            Ok(live) => check(
                "idempotency",
                Outcome::Fail,
                format!(
                    "after deploying {} twice CurrentRelease reads {live:?}",
                    first.artifact.version
                ),
            ),
            Err(PluginError::Unimplemented(_)) => check(
                "idempotency",
                Outcome::Pass,
                "the same key twice answered deployed/unchanged on every target (CurrentRelease \
                 answers UNIMPLEMENTED for this request: nothing to read back)",
            ),
            Err(e) => check(
                "idempotency",
                Outcome::Fail,
                format!("CurrentRelease failed: {e}"),
            ),
        }
    }

    /// What CurrentRelease reads, per host.
    async fn live(&self, remote: &Remote, key: &str) -> Result<Vec<(String, String)>, PluginError> {
        let req = self.request(key, 1, &self.spec.artifact.version, None);
        let inspector = remote
            .release_inspector()
            .ok_or_else(|| PluginError::Unimplemented("no CurrentRelease".into()))?;
        let r = self.bounded(inspector.current_release(&req)).await?;
        Ok(r.into_iter().map(|t| (t.host, t.version)).collect())
    }

    async fn dry_run(&self, remote: &Remote, p: &Process, deployed: bool) -> Check {
        let Some(dr) = remote.dry_runner() else {
            return check("dry-run", Outcome::Skip, "`dry_run` not announced");
        };
        let req = self.request("dry-run", 1, "2.0.0-dry-run", None);
        match self.bounded(dr.dry_run(&req)).await {
            Err(PluginError::Unimplemented(_)) => {
                check("dry-run", Outcome::Skip, UNIMPLEMENTED_HERE)
            }
            Err(e) if self.died(p).await => check(
                "dry-run",
                Outcome::Fail,
                format!("the plugin died answering DryRun: {e}"),
            ),
            Err(e) => check(
                "dry-run",
                Outcome::Pass,
                format!("answers with a {} error: {e}", kind(&e)),
            ),
            Ok(r) => {
                if let Err(why) = self.answers_every_target(&r) {
                    return check("dry-run", Outcome::Fail, why);
                }
                if !(deployed && p.capabilities.has(Capability::CurrentRelease)) {
                    return check("dry-run", Outcome::Pass, "plans every target");
                }
                match self.live(remote, "dry-run-read").await {
                    Ok(live) if live.iter().any(|(_, v)| v == "2.0.0-dry-run") => check(
                        "dry-run",
                        Outcome::Fail,
                        format!("a dry run of 2.0.0-dry-run made it live: {live:?}"),
                    ),
                    Ok(_) => check(
                        "dry-run",
                        Outcome::Pass,
                        "plans every target and changes nothing (CurrentRelease read back)",
                    ),
                    Err(PluginError::Unimplemented(_)) => {
                        check("dry-run", Outcome::Pass, "plans every target")
                    }
                    Err(e) => check(
                        "dry-run",
                        Outcome::Fail,
                        format!("CurrentRelease after a dry run failed: {e}"),
                    ),
                }
            }
        }
    }

    async fn current_release(&self, remote: &Remote, p: &Process) -> Check {
        if !p.capabilities.has(Capability::CurrentRelease) {
            return check(
                "current-release",
                Outcome::Skip,
                "`current_release` not announced",
            );
        }
        match self.live(remote, "current-release").await {
            Ok(live) => {
                let asked: Vec<&str> = self.spec.targets.iter().map(|t| t.host.as_str()).collect();
                match live.iter().find(|(h, _)| !asked.contains(&h.as_str())) {
                    Some((h, _)) => check(
                        "current-release",
                        Outcome::Fail,
                        format!("answered for host {h:?}, which the request did not name"),
                    ),
                    None => check(
                        "current-release",
                        Outcome::Pass,
                        live.iter()
                            .map(|(h, v)| {
                                format!("{h}: {}", if v.is_empty() { "unknown" } else { v })
                            })
                            .collect::<Vec<_>>()
                            .join(", "),
                    ),
                }
            }
            Err(PluginError::Unimplemented(_)) => {
                check("current-release", Outcome::Skip, UNIMPLEMENTED_HERE)
            }
            Err(e) if self.died(p).await => check(
                "current-release",
                Outcome::Fail,
                format!("the plugin died answering CurrentRelease: {e}"),
            ),
            Err(e) => check(
                "current-release",
                Outcome::Pass,
                format!("answers with a {} error: {e}", kind(&e)),
            ),
        }
    }

    async fn rollback(&self, remote: &Remote, p: &Process, deployed: bool) -> Check {
        let Some(rb) = remote.rollbacker() else {
            return check("rollback", Outcome::Skip, "`rollback` not announced");
        };
        if !deployed {
            return check(
                "rollback",
                Outcome::Skip,
                "Deploy did not succeed on the kit's request: nothing to roll back to",
            );
        }
        let next = self.request("deploy-2", 1, "2.0.0-conformance", None);
        if let Err(e) = self.bounded(remote.deploy(&next)).await {
            return check(
                "rollback",
                Outcome::Fail,
                format!("deploying a second release to roll back from failed: {e}"),
            );
        }
        let to = Release {
            version: self.spec.artifact.version.clone(),
            artifact: self.spec.artifact.clone(),
            deployment_id: self.run.clone(),
        };
        let back = self.request("rollback", 1, "2.0.0-conformance", None);
        match self.bounded(rb.rollback(&back, &to)).await {
            Err(PluginError::Unimplemented(_)) => {
                return check("rollback", Outcome::Skip, UNIMPLEMENTED_HERE);
            }
            Err(e) => return check("rollback", Outcome::Fail, format!("Rollback failed: {e}")),
            Ok(_) => {}
        }
        if !p.capabilities.has(Capability::CurrentRelease) {
            return check(
                "rollback",
                Outcome::Pass,
                "rolled back from 2.0.0-conformance (no CurrentRelease to read back)",
            );
        }
        match self.live(remote, "rollback-read").await {
            Ok(live) if live.iter().all(|(_, v)| v.is_empty()) => check(
                "rollback",
                Outcome::Pass,
                "rolled back from 2.0.0-conformance (CurrentRelease cannot tell what is live)",
            ),
            Ok(live) if live.iter().all(|(_, v)| *v == to.version) => check(
                "rollback",
                Outcome::Pass,
                format!(
                    "rolled back from 2.0.0-conformance; CurrentRelease reads {}",
                    to.version
                ),
            ),
            Err(PluginError::Unimplemented(_)) => check(
                "rollback",
                Outcome::Pass,
                "rolled back from 2.0.0-conformance (CurrentRelease answers UNIMPLEMENTED for \
                 this request: nothing to read back)",
            ),
            Ok(live) => check(
                "rollback",
                Outcome::Fail,
                format!(
                    "after a rollback to {} CurrentRelease reads {live:?}",
                    to.version
                ),
            ),
            Err(e) => check(
                "rollback",
                Outcome::Fail,
                format!("CurrentRelease after the rollback failed: {e}"),
            ),
        }
    }

    async fn errors(&self, remote: &Remote) -> Check {
        let v = &self.spec.artifact.version;
        let permanent = self.request(
            "fail-permanent",
            1,
            v,
            Some(serde_json::json!({"fail": "permanent"})),
        );
        let retryable = self.request(
            "fail-retryable",
            1,
            v,
            Some(serde_json::json!({"fail": "retryable"})),
        );
        let p = self.bounded(remote.deploy(&permanent)).await;
        let r = self.bounded(remote.deploy(&retryable)).await;
        match (p, r) {
            (Err(PluginError::Permanent(_)), Err(PluginError::Failed(_))) => check(
                "errors",
                Outcome::Pass,
                "a Permanent error fails at once (ABORTED); any other is retried",
            ),
            (p, r) => check(
                "errors",
                Outcome::Fail,
                format!(
                    "a Permanent error must reach the host as ABORTED and any other as retryable; \
                     got {} and {}",
                    outcome_kind(&p),
                    outcome_kind(&r)
                ),
            ),
        }
    }

    async fn logs(&self, remote: &Remote) -> Check {
        let req = self.request(
            "log",
            1,
            &self.spec.artifact.version,
            Some(serde_json::json!({"log": true})),
        );
        if let Err(e) = self.bounded(remote.deploy(&req)).await {
            return check(
                "logs",
                Outcome::Fail,
                format!("the logging call failed: {e}"),
            );
        }
        let levels = [
            Level::Trace,
            Level::Debug,
            Level::Info,
            Level::Warn,
            Level::Error,
        ];
        let mut wrong = Vec::new();
        for level in levels {
            let message = format!("conformance level {}", level.as_str());
            match self
                .capture
                .wait_for(&message, Duration::from_secs(2))
                .await
            {
                Some((l, _)) if l.level == level => {}
                Some((l, _)) => wrong.push(format!(
                    "{message:?} arrived at {} (an hclog line's @level must say it)",
                    l.level.as_str()
                )),
                None => wrong.push(format!("{message:?} never arrived on stderr")),
            }
        }
        if wrong.is_empty() {
            check(
                "logs",
                Outcome::Pass,
                "hclog JSON on stderr: trace, debug, info, warn and error kept their levels",
            )
        } else {
            check("logs", Outcome::Fail, wrong.join("; "))
        }
    }

    async fn secret(&self, remote: &Remote) -> Check {
        let value = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
        let want = format!("{:x}", Sha256::digest(value.as_bytes()));
        let mut req = self.request(
            "secret",
            1,
            &self.spec.artifact.version,
            Some(serde_json::json!({"secret": SECRET})),
        );
        let (secrets, guard) = Secrets::for_call(Arc::new(KitSecret(value.clone())));
        req.secrets = secrets;
        let answer = self.bounded(remote.deploy(&req)).await;
        drop(guard);
        if let Err(e) = answer {
            return check(
                "secret",
                Outcome::Fail,
                format!("reading a secret through the broker during the call failed: {e}"),
            );
        }
        let leaked = self.capture.lines().iter().any(|l| {
            l.message.contains(&value) || l.attrs.values().any(|v| v.to_string().contains(&value))
        });
        if leaked {
            return check(
                "secret",
                Outcome::Fail,
                "the secret's value appeared in the plugin's log lines",
            );
        }
        match self
            .capture
            .wait_for("conformance secret", Duration::from_secs(2))
            .await
        {
            Some((l, _)) if l.attrs.get("sha256").and_then(|v| v.as_str()) == Some(&want) => check(
                "secret",
                Outcome::Pass,
                "read through the broker during the call (the host closes it when the call \
                     returns)",
            ),
            Some(_) => check(
                "secret",
                Outcome::Fail,
                "the plugin read a different value than the kit offered",
            ),
            None => check(
                "secret",
                Outcome::Fail,
                "the call succeeded but the plugin never said it read the secret",
            ),
        }
    }

    /// Params the plugin cannot deploy with (`invalid:`, or empty) must fail as permanent, in
    /// Validate or in Deploy: a retry cannot fix them, and a retryable error makes manent try
    /// again and again.
    async fn invalid_input(&self, remote: &Remote, p: &Process, version: &str) -> Check {
        let given = self.spec.invalid.is_some();
        let mut req = self.request("invalid", 1, version, None);
        req.params = self
            .spec
            .invalid
            .clone()
            .unwrap_or_else(|| serde_json::json!({}));
        let what = if given {
            "the kit file's `invalid:` params"
        } else {
            "empty params"
        };
        let judged = |call: &str, e: &PluginError| match e {
            PluginError::Permanent(_) => check(
                "invalid-input",
                Outcome::Pass,
                format!("{what} are refused at {call} as permanent: {e}"),
            ),
            PluginError::Failed(_) => check(
                "invalid-input",
                Outcome::Fail,
                format!(
                    "{what} failed at {call} as retryable ({e}): a retry cannot fix bad input — \
                     return a permanent error (Permanent / ABORTED / INVALID_ARGUMENT)"
                ),
            ),
            PluginError::Unimplemented(_) => check(
                "invalid-input",
                Outcome::Fail,
                format!("{call} answered UNIMPLEMENTED to {what}: {e}"),
            ),
        };
        if let Err(e) = self.bounded(remote.validate(&req)).await {
            return judged("Validate", &e);
        }
        if !given {
            // Empty params Validate accepts are not known to be wrong: no Deploy is run on
            // them (it would deploy for real, and fail for any reason at all).
            return check(
                "invalid-input",
                Outcome::Skip,
                "Validate accepts empty params (the plugin may need none); give `invalid:` \
                 params it must refuse in the kit file to check how it fails",
            );
        }
        match self.bounded(remote.deploy(&req)).await {
            Err(e) if self.died(p).await => check(
                "invalid-input",
                Outcome::Fail,
                format!("the plugin died on the kit file's `invalid:` params: {e}"),
            ),
            Err(e) => judged("Deploy", &e),
            Ok(_) => check(
                "invalid-input",
                Outcome::Fail,
                "the plugin accepted the kit file's `invalid:` params, which it must refuse",
            ),
        }
    }

    /// The author's Deploy read the kit's secret: its value, as it is or base64 or hex, must be
    /// in none of the plugin's lines (stderr, stdout, their attributes).
    async fn secret_leak(&self, author: &AuthorSecret) -> Check {
        let reads = author.reads.load(std::sync::atomic::Ordering::Relaxed);
        if reads == 0 {
            return check(
                "secret-leak",
                Outcome::Skip,
                "the plugin's Deploy read no secret; name one in the kit file's `params:` as your \
                 plugin expects (any name reads a value the kit makes up)",
            );
        }
        // What the plugin wrote during the call has arrived by now or very soon.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let forms = leaked_forms(&author.value);
        let names = ["its value", "its value in base64", "its value in hex"];
        for line in self.capture.lines() {
            let text = format!(
                "{} {}",
                line.message,
                serde_json::to_string(&line.attrs).unwrap_or_default()
            );
            if let Some(i) = forms.iter().position(|f| text.contains(f.as_str())) {
                let shown = forms.iter().fold(line.message.clone(), |m, f| {
                    m.replace(f.as_str(), "[the secret]")
                });
                return check(
                    "secret-leak",
                    Outcome::Fail,
                    format!(
                        "the secret the plugin's Deploy read ({reads} read(s)) is in its log \
                         line ({}): {shown:?} — never log a secret's value; manent redacts what \
                         reaches it, but another host, a debug log or the plugin's own files \
                         would keep it",
                        names[i]
                    ),
                );
            }
        }
        check(
            "secret-leak",
            Outcome::Pass,
            format!(
                "the plugin's Deploy read a secret ({reads} read(s)); its value (as it is, base64, \
                 hex) is in none of its lines"
            ),
        )
    }

    async fn cancellation(&self, remote: &Remote) -> Check {
        let req = self.request(
            "cancel",
            1,
            &self.spec.artifact.version,
            Some(serde_json::json!({"sleep_ms": 30_000})),
        );
        let slow = tokio::time::timeout(CANCEL_AFTER, remote.deploy(&req)).await;
        if let Ok(answer) = slow {
            return check(
                "cancellation",
                Outcome::Fail,
                format!(
                    "a call asked to wait 30s answered before the kit cancelled it at {} ms: {}",
                    ms(CANCEL_AFTER),
                    outcome_kind(&answer)
                ),
            );
        }
        match self
            .capture
            .wait_for("conformance cancelled", CANCEL_BOUND)
            .await
        {
            Some((_, took)) => {
                let mut c = check(
                    "cancellation",
                    Outcome::Pass,
                    format!(
                        "a cancelled call stopped {} ms after the host cancelled it",
                        ms(took)
                    ),
                );
                c.ms = Some(ms(took));
                c
            }
            None => check(
                "cancellation",
                Outcome::Fail,
                format!(
                    "the host cancelled a call after {} ms and the plugin did not stop within {}s: \
                     a cancelled call must end (Go: watch ctx.Done(); Python: let CancelledError \
                     through; Rust: do not block the async task)",
                    ms(CANCEL_AFTER),
                    CANCEL_BOUND.as_secs()
                ),
            ),
        }
    }

    /// A plugin killed mid-call: the call fails as retryable, and the next call is answered by a
    /// new process.
    async fn crash(&self, remote: &Remote, p: &Arc<Process>, honours: bool) -> Check {
        let before = p.pid;
        let req = self.request(
            "crash",
            1,
            &self.spec.artifact.version,
            honours.then(|| serde_json::json!({"sleep_ms": 30_000})),
        );
        let mid_call = if honours {
            let call = remote.deploy(&req);
            let kill = async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                crate::sys::kill_group(before);
            };
            let (answer, ()) = tokio::join!(self.bounded(call), kill);
            Some(answer)
        } else {
            crate::sys::kill_group(before);
            let _ = p.crashed().await;
            None
        };
        if let Some(Ok(_) | Err(PluginError::Permanent(_) | PluginError::Unimplemented(_))) =
            &mid_call
        {
            return check(
                "crash",
                Outcome::Fail,
                format!(
                    "a plugin killed mid-call must make the call fail as retryable; got {}",
                    outcome_kind(mid_call.as_ref().unwrap_or(&Ok(DeployResult::default())))
                ),
            );
        }
        let started = Instant::now();
        let plain = self.request("after-crash", 1, &self.spec.artifact.version, None);
        let _ = self.bounded(remote.validate(&plain)).await;
        match self.host.process().await {
            Ok(again) if again.pid != before => {
                let mut c = check(
                    "crash",
                    Outcome::Pass,
                    format!(
                        "killed {} (pid {before}); the next call started it again (pid {}) in {} \
                         ms",
                        if honours { "mid-call" } else { "between calls" },
                        again.pid,
                        ms(started.elapsed())
                    ),
                );
                c.ms = Some(ms(started.elapsed()));
                c
            }
            Ok(_) => check(
                "crash",
                Outcome::Fail,
                "after SIGKILL the same process still answers",
            ),
            Err(e) => check(
                "crash",
                Outcome::Fail,
                format!("after a crash the plugin did not start again: {e}"),
            ),
        }
    }

    async fn stdout(&self, honours: bool) -> Check {
        // What the host drains from stdout is reported as it arrives.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let lines = self.capture.lines();
        if let Some(l) = lines
            .iter()
            .find(|l| l.message.contains("wrote to stdout after the handshake"))
        {
            return check("stdout", Outcome::Fail, l.message.clone());
        }
        if honours
            && !lines
                .iter()
                .any(|l| l.message == "conformance stdout probe")
        {
            return check(
                "stdout",
                Outcome::Fail,
                "a line printed with the language's ordinary print reached neither stdout nor \
                 stderr",
            );
        }
        check(
            "stdout",
            Outcome::Pass,
            if honours {
                "nothing on stdout after the handshake; an ordinary print became a stderr line"
            } else {
                "nothing on stdout after the handshake during the kit's calls"
            },
        )
    }

    async fn shutdown(&self) -> Check {
        let started = Instant::now();
        self.host.shutdown().await;
        let took = started.elapsed();
        let killed = self
            .capture
            .lines()
            .iter()
            .any(|l| l.message.contains("did not exit after Shutdown"));
        let mut c = if killed {
            check(
                "shutdown",
                Outcome::Fail,
                "it did not exit within 2s of GRPCController.Shutdown and was killed",
            )
        } else {
            check(
                "shutdown",
                Outcome::Pass,
                format!("exited {} ms after Shutdown", ms(took)),
            )
        };
        c.ms = Some(ms(took));
        c
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

/// True when the plugin answers an HTTP/2 preface in the clear (a SETTINGS frame).
async fn plaintext(addr: &Addr) -> std::io::Result<bool> {
    let mut io = match addr {
        Addr::Unix(path) => tokio::net::UnixStream::connect(path).await?,
        Addr::Tcp(_) => return Ok(false),
    };
    io.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await?;
    let mut head = [0u8; 9];
    match tokio::time::timeout(Duration::from_secs(2), io.read_exact(&mut head)).await {
        Ok(Ok(_)) => Ok(head[3] == 0x04),
        _ => Ok(false),
    }
}
