//! One external plugin process: started on first use (never by validate or plan), in a cleared
//! environment, after its binary is checked; go-plugin's handshake with version negotiation and
//! AutoMTLS; health, stdio, broker, Configure. One process serves every deploy; after a crash
//! the next call starts a new one. Stopped with `GRPCController.Shutdown`, then killed.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::sync::{mpsc, watch};

use super::activation::{self, Pin};
use super::broker::HostBroker;
use super::conn::{self, H2};
use super::handshake::{self, Handshake};
use super::proto::goplugin::grpc_broker_client::GrpcBrokerClient;
use super::proto::goplugin::grpc_controller_client::GrpcControllerClient;
use super::proto::goplugin::grpc_stdio_client::GrpcStdioClient;
use super::proto::goplugin::stdio_data::Channel as StdioChannel;
use super::proto::v1;
use super::proto::v1::deployer_client::DeployerClient;
use super::{hclog, tls};
use crate::plugin::contract::Capabilities;
use crate::plugin::error::PluginError;
use crate::plugin::logger::{Level, LogLine, LogSink, Logger};
use crate::plugin::processes::{Processes, Tracked};

mod output;
use output::*;

/// How to run one external plugin (from its `plugins:` entry, or discovered on PATH).
#[derive(Debug, Clone)]
pub struct ExternalSpec {
    /// The name descriptors use.
    pub name: String,
    /// The binary.
    pub command: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Pinned sha256, if any.
    pub sha256: Option<String>,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
    /// Limit on start and handshake.
    pub start_timeout: Duration,
    /// Options for Configure.
    pub options: serde_json::Value,
}

/// manent's environment variables a plugin gets (everything else is cleared: it may hold the
/// secrets that `env:` sources read).
const PASSED: &[&str] = &["PATH", "HOME", "TMPDIR", "TZ", "LANG"];
const STDERR_TAIL: usize = 20;
/// The start phases that are named in a stuck start's error.
const HEALTH: &str = "its health check";
const CONFIGURE: &str = "Configure";
/// How long a plugin started for a debugger may take to start.
const DEBUG_WAIT: Duration = Duration::from_secs(3600);
/// A running plugin process.
pub struct Process {
    /// Its pid.
    pub pid: u32,
    /// The capabilities Configure announced.
    pub capabilities: Capabilities,
    /// The Deployer client.
    pub deployer: DeployerClient<H2>,
    /// The broker for Secrets.
    pub broker: HostBroker,
    /// Its handshake line, parsed: where it listens, its certificate.
    pub handshake: Handshake,
    controller: GrpcControllerClient<H2>,
    connection: H2,
    exited: watch::Receiver<Option<String>>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    _socket_dir: tempfile::TempDir,
    /// Its process group, recorded while it runs.
    _tracked: Tracked,
}

impl Process {
    /// How it exited, once it has.
    pub fn exit(&self) -> Option<String> {
        self.exited.borrow().clone()
    }

    /// Its last stderr lines, for error messages.
    pub fn stderr_tail(&self) -> String {
        tail(&self.stderr_tail)
    }

    /// Waits briefly for the process to be reaped after a broken call, and says how it ended.
    pub async fn crashed(&self) -> Option<String> {
        let mut rx = self.exited.clone();
        let _ =
            tokio::time::timeout(Duration::from_millis(500), rx.wait_for(Option::is_some)).await;
        self.exit()
    }
}

/// A plugin spawned, on its way up.
struct Spawned {
    identity: tls::Identity,
    socket_dir: tempfile::TempDir,
    /// Until its exit is watched.
    child: Option<tokio::process::Child>,
    /// Until its handshake is read; drained after.
    stdout: Option<BufReader<tokio::process::ChildStdout>>,
    pid: u32,
    started: std::time::Instant,
    unfinished: crate::sys::GroupKill,
    tracked: Tracked,
    tail: Arc<Mutex<VecDeque<String>>>,
    handshaken: Arc<std::sync::atomic::AtomicBool>,
}

/// A plugin spoken to: its connection, Configure's answer, the broker's TLS.
struct Dialed {
    channel: H2,
    deployer: DeployerClient<H2>,
    configured: v1::ConfigureResponse,
    broker_tls: Arc<rustls::ServerConfig>,
}

/// How far a plugin's start got, in order; a failed start stopped in the phase it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum StartPhase {
    /// Spawning it and waiting for its handshake line.
    Handshake,
    /// Checking the versions and protocol its line offers.
    Protocol,
    /// Its certificate, dialing its socket, TLS and HTTP/2.
    AutoMtls,
    /// Its health check.
    Health,
    /// Configure with its options.
    Configure,
    /// Started.
    Ready,
}

/// Starts and restarts one plugin's process.
pub struct Host {
    spec: ExternalSpec,
    sink: Arc<dyn LogSink>,
    /// The host's own lines about this plugin (started, exited, stray output).
    logger: Logger,
    current: tokio::sync::Mutex<Option<Arc<Process>>>,
    processes: Processes,
    /// The phase the last start reached.
    phase: std::sync::Mutex<StartPhase>,
    /// True once the engine stops: a start in progress is abandoned, none begins.
    stopping: watch::Receiver<bool>,
    /// Its calls in flight: whose an untagged stderr line is.
    calls: Arc<super::calls::Calls>,
}

impl Host {
    /// A host for `spec`; nothing starts yet. The processes it starts are recorded in
    /// `processes`.
    pub fn new(spec: ExternalSpec, sink: Arc<dyn LogSink>, processes: Processes) -> Self {
        Host {
            logger: Logger::new(sink.clone(), spec.name.clone()),
            spec,
            sink,
            current: tokio::sync::Mutex::new(None),
            processes,
            phase: std::sync::Mutex::new(StartPhase::Handshake),
            stopping: watch::channel(false).1,
            calls: Arc::default(),
        }
    }

    /// A call of `req` is in flight until the guard drops (its plugin's untagged lines are the
    /// call's deployment's meanwhile, when no other deployment's call is).
    pub fn in_call(&self, req: &crate::plugin::Request) -> Option<super::calls::InCall<'_>> {
        self.calls.begin(req)
    }

    /// The same host, its plugin's untagged lines left untagged (the conformance kit judges
    /// what the plugin itself says).
    #[must_use]
    pub fn keeps_untagged(mut self) -> Self {
        self.calls = Arc::new(super::calls::Calls::off());
        self
    }

    /// The same host, its starts abandoned once `stopping` turns true (the engine stops).
    #[must_use]
    pub fn stopped_by(mut self, stopping: watch::Receiver<bool>) -> Self {
        self.stopping = stopping;
        self
    }

    /// The phase the last start reached (where a failed one stopped).
    pub fn start_phase(&self) -> StartPhase {
        self.phase.lock().map_or(StartPhase::Handshake, |p| *p)
    }

    fn reach(&self, phase: StartPhase) {
        if let Ok(mut p) = self.phase.lock() {
            *p = phase;
        }
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    fn log(&self, level: Level, message: String) {
        self.logger.log(level, &message, &[]);
    }

    /// The running process, started (again) if there is none.
    pub async fn process(&self) -> Result<Arc<Process>, PluginError> {
        let mut current = self.current.lock().await;
        let again = current.is_some();
        if let Some(p) = current.as_ref() {
            match p.exit() {
                None => return Ok(p.clone()),
                Some(how) => self.log(
                    Level::Warn,
                    format!(
                        "plugin {} had exited ({how}); starting it again",
                        self.spec.name
                    ),
                ),
            }
        }
        let mut stopping = self.stopping.clone();
        let stop = async move {
            // A sender gone (no engine behind this host) never stops it.
            if stopping.wait_for(|s| *s).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        if *self.stopping.borrow() {
            return Err(self.stopping_error());
        }
        let p = tokio::select! {
            started = self.start() => Arc::new(started?),
            // The start's future is dropped: its plugin's group is killed with it.
            () = stop => return Err(self.stopping_error()),
        };
        crate::telemetry::metrics::get().plugin_started(&self.spec.name, again);
        *current = Some(p.clone());
        Ok(p)
    }

    /// Stops the process: `GRPCController.Shutdown`, up to 2 s to exit, then SIGKILL.
    pub async fn shutdown(&self) {
        let Some(p) = self.current.lock().await.take() else {
            return;
        };
        if p.exit().is_some() {
            return;
        }
        let mut controller = p.controller.clone();
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            controller.shutdown(super::proto::goplugin::Empty {}),
        )
        .await;
        // Then the connection goes, as go-plugin's host closes it: a server's graceful stop
        // waits for its connections.
        p.connection.close();
        let mut rx = p.exited.clone();
        if tokio::time::timeout(Duration::from_secs(2), rx.wait_for(Option::is_some))
            .await
            .is_err()
        {
            self.log(
                Level::Warn,
                format!(
                    "plugin {} did not exit after Shutdown; killing it",
                    self.spec.name
                ),
            );
            crate::sys::kill_group(p.pid);
        }
    }

    fn stopping_error(&self) -> PluginError {
        PluginError::Failed(format!(
            "the engine is stopping: plugin {} is not started (its start, if any, is abandoned); \
             it starts when the deployment resumes",
            self.spec.name
        ))
    }

    fn fail(&self, what: impl std::fmt::Display) -> PluginError {
        PluginError::Failed(format!(
            "plugin {} ({}): {what}",
            self.spec.name,
            self.spec.command.display()
        ))
    }

    /// A start, phase by phase: the binary checked, spawned, its handshake line read and
    /// checked, its exit watched, then mutual TLS, health and Configure, all within
    /// `start_timeout` from the spawn.
    async fn start(&self) -> Result<Process, PluginError> {
        self.reach(StartPhase::Handshake);
        self.activate().await?;
        let mut spawned = self.spawn()?;
        let shake = self.handshake(&mut spawned).await?;
        let exited = self.watch_exit(&mut spawned, &shake);
        let dialed = self.dial(&spawned, &shake).await?;
        Ok(self.ready(spawned, shake, exited, dialed))
    }

    /// True when manent's environment asks for this plugin to wait for a debugger
    /// (`MANENT_PLUGIN_DEBUG=NAME[,NAME…]` or `*`).
    fn debugging(&self) -> bool {
        // By its name in manent.yml, or its binary's (with or without `manent-plugin-`).
        let binary = self
            .spec
            .command
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        std::env::var(handshake::ENV_DEBUG).is_ok_and(|names| {
            names.split(',').map(str::trim).any(|n| {
                n == "*"
                    || n == self.spec.name
                    || n == binary
                    || binary.strip_prefix("manent-plugin-") == Some(n)
            })
        })
    }

    /// `start_timeout`, or an hour for a plugin waiting for a debugger.
    fn start_timeout(&self) -> Duration {
        if self.debugging() {
            self.spec.start_timeout.max(DEBUG_WAIT)
        } else {
            self.spec.start_timeout
        }
    }

    /// Says where the plugin waits for a debugger: in the log, and on stderr, where the
    /// developer who asked for it is looking.
    #[allow(
        clippy::print_stderr,
        reason = "the developer who set MANENT_PLUGIN_DEBUG is told the pid to attach to"
    )]
    fn waits_for_debugger(&self, pid: u32) {
        let said = format!(
            "plugin {} (pid {pid}) waits for a debugger before it serves ({}): attach one — \
             `dlv attach {pid}`, `gdb -p {pid}`, `lldb -p {pid}` — and continue; it has up to {} \
             to start",
            self.spec.name,
            handshake::ENV_DEBUG,
            humantime::format_duration(self.start_timeout())
        );
        eprintln!("manent: {said}");
        self.log(Level::Warn, said);
    }

    /// The plugin spawned in a cleared environment with a fresh 0700 socket directory and this
    /// host's certificate; its stderr forwarded from now on.
    fn spawn(&self) -> Result<Spawned, PluginError> {
        let s = &self.spec;
        let identity = tls::Identity::generate().map_err(|e| self.fail(e))?;
        // 0700 whatever the umask: the plugin's socket and the broker's are reached by no one
        // else.
        let socket_dir = {
            use std::os::unix::fs::PermissionsExt;
            tempfile::Builder::new()
                .prefix("manent-plugin-")
                .permissions(std::fs::Permissions::from_mode(0o700))
                .tempdir()
                .and_then(|d| {
                    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700))
                        .map(|()| d)
                })
                .map_err(|e| self.fail(e))?
        };
        let mut cmd = self.command(&identity, socket_dir.path());
        let started = std::time::Instant::now();
        let mut child = cmd
            .spawn()
            .map_err(|e| self.fail(format!("cannot start it: {e}")))?;
        let pid = child.id().unwrap_or(0);
        if self.debugging() {
            self.waits_for_debugger(pid);
        }
        // A start that does not finish — failed, or abandoned as the engine stops (its future
        // dropped) — leaves nothing of the plugin running: its whole group is killed.
        let unfinished = crate::sys::GroupKill::armed(pid);
        let tracked = self.processes.track(pid);
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let handshaken = Arc::new(std::sync::atomic::AtomicBool::new(false));
        if let Some(stderr) = child.stderr.take() {
            // A plugin logging in bursts fills 64 KiB in a fraction of a millisecond: a larger
            // pipe lets it write on while this side catches up (within the engine's budget).
            let share = PipeShare::take(&PIPES, PIPE_BYTES)
                .filter(|_| crate::sys::grow_pipe(&stderr, PIPE_BYTES));
            tokio::spawn(forward_stderr(
                stderr,
                (self.sink.clone(), self.calls.clone()),
                s.name.clone(),
                tail.clone(),
                handshaken.clone(),
                share,
            ));
        }
        let stdout = BufReader::new(child.stdout.take().ok_or_else(|| self.fail("no stdout"))?);
        Ok(Spawned {
            identity,
            socket_dir,
            child: Some(child),
            stdout: Some(stdout),
            pid,
            started,
            unfinished,
            tracked,
            tail,
            handshaken,
        })
    }

    /// Its first stdout line, within `start_timeout`: a go-plugin handshake whose versions,
    /// protocol and certificate this host takes.
    async fn handshake(&self, p: &mut Spawned) -> Result<Handshake, PluginError> {
        let s = &self.spec;
        let pid = p.pid;
        let mut first = String::new();
        let stdout = p.stdout.as_mut().ok_or_else(|| self.fail("no stdout"))?;
        let read = tokio::time::timeout(self.start_timeout(), stdout.read_line(&mut first)).await;
        let line = match read {
            Err(_) => {
                crate::sys::kill_group(pid);
                return Err(self.fail(format!(
                    "no go-plugin handshake within {} (start_timeout): a plugin must print its \
                     handshake line on stdout first (manent::plugin::external::serve or \
                     hashicorp/go-plugin's Serve do); raise `start_timeout` if it is just slow",
                    humantime::format_duration(self.start_timeout())
                )));
            }
            Ok(Ok(0) | Err(_)) => {
                let status = match p.child.as_mut() {
                    Some(child) => tokio::time::timeout(Duration::from_secs(2), child.wait())
                        .await
                        .ok()
                        .and_then(Result::ok),
                    None => None,
                };
                let how = status.map_or_else(|| "no exit status".into(), |st| st.to_string());
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Err(PluginError::Failed(format!(
                    "plugin {} ({}) exited before the go-plugin handshake ({how}); its last \
                     stderr lines:\n    {}",
                    s.name,
                    s.command.display(),
                    output::tail(&p.tail)
                )));
            }
            Ok(Ok(_)) => first,
        };
        let shake = Handshake::parse(&line).map_err(|why| {
            crate::sys::kill_group(pid);
            PluginError::Permanent(format!(
                "plugin {} ({}) printed {:?} where the go-plugin handshake line belongs ({why}): \
                 nothing may be printed on stdout before it",
                s.name,
                s.command.display(),
                line.trim()
            ))
        })?;
        self.reach(StartPhase::Protocol);
        self.check_handshake(&shake)
            .inspect_err(|_| crate::sys::kill_group(pid))?;
        p.handshaken
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(shake)
    }

    /// From the handshake on: stdout drained (nothing may come on it) and the exit watched —
    /// said in the log, and a socket the plugin made outside its directory removed after.
    fn watch_exit(&self, p: &mut Spawned, shake: &Handshake) -> watch::Receiver<Option<String>> {
        let (exit_tx, exited) = watch::channel(None);
        if let Some(stdout) = p.stdout.take() {
            tokio::spawn(drain_stdout(
                stdout,
                self.logger.clone(),
                self.spec.name.clone(),
            ));
        }
        let Some(mut child) = p.child.take() else {
            return exited;
        };
        let (name, log) = (self.spec.name.clone(), self.logger.clone());
        // A socket the plugin made outside the directory given to it (go-plugin before 1.4
        // ignores PLUGIN_UNIX_SOCKET_DIR) is left behind when it is killed: removed once it
        // has exited, if it is still a socket of this user's.
        let own_socket = match &shake.addr {
            handshake::Addr::Unix(path) if !path.starts_with(p.socket_dir.path()) => {
                Some(path.clone())
            }
            _ => None,
        };
        tokio::spawn(async move {
            let how = match child.wait().await {
                Ok(st) => {
                    if !st.success() {
                        crate::telemetry::metrics::get().plugin_crashed(&name);
                    }
                    st.to_string()
                }
                Err(e) => e.to_string(),
            };
            log.info(&format!("plugin {name} exited ({how})"));
            if let Some(path) = own_socket {
                remove_stale_socket(&path);
            }
            let _ = exit_tx.send(Some(how));
        });
        exited
    }

    /// Mutual TLS, health and Configure, within what is left of `start_timeout`; a start stuck
    /// on the way names the phase it is stuck in.
    async fn dial(&self, p: &Spawned, shake: &Handshake) -> Result<Dialed, PluginError> {
        let kill = |e: PluginError| {
            crate::sys::kill_group(p.pid);
            e
        };
        let plugin_cert =
            rustls::pki_types::CertificateDer::from(shake.cert.clone().unwrap_or_default());
        let client_tls =
            tls::client_config(&p.identity, &plugin_cert).map_err(|e| kill(self.fail(e)))?;
        let broker_tls =
            tls::server_config(&p.identity, &plugin_cert).map_err(|e| kill(self.fail(e)))?;
        // Every phase of a start lives within start_timeout, counted from the spawn: a plugin
        // that prints its handshake and then never speaks must not hang the engine.
        let left = self.start_timeout().saturating_sub(p.started.elapsed());
        let phase = std::sync::Mutex::new("dialing its socket");
        let at = |name: &'static str| {
            self.reach(match name {
                HEALTH => StartPhase::Health,
                CONFIGURE => StartPhase::Configure,
                _ => StartPhase::AutoMtls,
            });
            if let Ok(mut cur) = phase.lock() {
                *cur = name;
            }
        };
        let connect = self.connect(shake, client_tls, &at);
        match tokio::time::timeout(left, connect).await {
            Ok(r) => r
                .map(|(channel, deployer, configured)| Dialed {
                    channel,
                    deployer,
                    configured,
                    broker_tls,
                })
                .map_err(kill),
            Err(_) => {
                let stuck = phase.lock().map_or("starting", |p| *p);
                Err(kill(self.fail(format!(
                    "no answer within {} (start_timeout) after its handshake: stuck at {stuck}; \
                     the plugin accepted the connection but does not speak gRPC over mutual \
                     TLS — check that it is a manent plugin, or raise `start_timeout` if it is \
                     just slow",
                    humantime::format_duration(self.start_timeout())
                ))))
            }
        }
    }

    /// Started: its stdio and broker streams open, and the process as the host keeps it.
    fn ready(
        &self,
        p: Spawned,
        shake: Handshake,
        exited: watch::Receiver<Option<String>>,
        dialed: Dialed,
    ) -> Process {
        let Dialed {
            channel,
            deployer,
            configured,
            broker_tls,
        } = dialed;
        tokio::spawn(forward_stdio(channel.clone(), self.logger.clone()));
        let (broker_tx, broker_rx) = mpsc::channel(16);
        let mut broker = GrpcBrokerClient::with_origin(channel.clone(), conn::origin());
        tokio::spawn(async move {
            let outbound = tokio_stream::wrappers::ReceiverStream::new(broker_rx);
            if let Ok(resp) = broker.start_stream(outbound).await {
                let mut inbound = resp.into_inner();
                while let Ok(Some(_)) = inbound.message().await {}
            }
        });
        let capabilities = Capabilities(configured.capabilities.into_iter().collect());
        self.log(
            Level::Debug,
            format!(
                "plugin {} started (pid {}, protocol {}), capabilities: [{}]",
                self.spec.name, p.pid, shake.app, capabilities
            ),
        );
        self.reach(StartPhase::Ready);
        p.unfinished.disarm();
        Process {
            pid: p.pid,
            capabilities,
            deployer,
            broker: HostBroker::new(broker_tx, broker_tls, p.socket_dir.path().to_owned()),
            handshake: shake,
            controller: GrpcControllerClient::with_origin(channel.clone(), conn::origin()),
            connection: channel,
            exited,
            stderr_tail: p.tail,
            _socket_dir: p.socket_dir,
            _tracked: p.tracked,
        }
    }

    /// Activation, at every start: the binary exists, is executable and matches its pin
    /// (hashing a large binary is blocking work); an unpinned one is warned about.
    async fn activate(&self) -> Result<(), PluginError> {
        let s = &self.spec;
        let (name, command, pin) = (s.name.clone(), s.command.clone(), s.sha256.clone());
        let checked =
            tokio::task::spawn_blocking(move || activation::check(&name, &command, pin.as_deref()))
                .await
                .map_err(|e| self.fail(e))??;
        if let Pin::Unpinned = checked {
            self.log(
                Level::Warn,
                format!(
                    "plugin {} is not pinned by a sha256: add `sha256:` under its `external:` in \
                 manent.yml (`sha256sum {}` prints it; `manent plugins` too)",
                    s.name,
                    s.command.display()
                ),
            );
        }
        Ok(())
    }

    /// The plugin's command: a cleared environment (the few variables it may see, its own, and
    /// go-plugin's handshake settings with this host's certificate), its own process group, and
    /// killed with its parent.
    fn command(
        &self,
        identity: &tls::Identity,
        socket_dir: &std::path::Path,
    ) -> tokio::process::Command {
        let s = &self.spec;
        let mut cmd = tokio::process::Command::new(&s.command);
        cmd.args(&s.args).env_clear();
        for name in PASSED {
            if let Ok(v) = std::env::var(name) {
                cmd.env(name, v);
            }
        }
        cmd.envs(&s.env)
            .env(handshake::MAGIC_COOKIE_KEY, handshake::MAGIC_COOKIE_VALUE)
            .env(handshake::ENV_MIN_PORT, "10000")
            .env(handshake::ENV_MAX_PORT, "25000")
            .env(
                handshake::ENV_PROTOCOL_VERSIONS,
                handshake::APP_PROTOCOL_VERSION.to_string(),
            )
            .env(handshake::ENV_CLIENT_CERT, &identity.cert_pem)
            .env(handshake::ENV_UNIX_SOCKET_DIR, socket_dir)
            .env(
                handshake::ENV_WAIT_FOR_DEBUGGER,
                if self.debugging() { "1" } else { "0" },
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        crate::sys::die_with_parent(&mut cmd);
        cmd
    }

    /// After the handshake: mutual TLS to the plugin's address, its health check, then
    /// Configure with its options; `at` says which phase it is in (a stuck start names it).
    async fn connect(
        &self,
        shake: &Handshake,
        client_tls: Arc<rustls::ClientConfig>,
        at: &(dyn Fn(&'static str) + Sync),
    ) -> Result<(H2, DeployerClient<H2>, v1::ConfigureResponse), PluginError> {
        let s = &self.spec;
        let channel = conn::h2(shake.addr.clone(), client_tls, &at)
            .await
            .map_err(|e| self.fail(format!("cannot connect over mutual TLS: {e}")))?;
        at(HEALTH);
        let mut health = tonic_health::pb::health_client::HealthClient::with_origin(
            channel.clone(),
            conn::origin(),
        );
        let serving = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: "plugin".into(),
            })
            .await
            .map(|r| r.into_inner().status)
            .map_err(|e| self.fail(format!("health check failed: {}", e.message())))?;
        if serving != tonic_health::pb::health_check_response::ServingStatus::Serving as i32 {
            return Err(self.fail("its health service does not report `plugin` as SERVING"));
        }
        at(CONFIGURE);
        let mut deployer = DeployerClient::with_origin(channel.clone(), conn::origin())
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX);
        let config_json = serde_json::to_vec(&s.options).unwrap_or_default();
        let configured = deployer
            .configure(v1::ConfigureRequest { config_json })
            .await
            .map_err(|e| match e.code() {
                tonic::Code::InvalidArgument
                | tonic::Code::Aborted
                | tonic::Code::FailedPrecondition => PluginError::Permanent(format!(
                    "plugin {} rejected its options from manent.yml: {}",
                    s.name,
                    e.message()
                )),
                _ => self.fail(format!("Configure failed: {}", e.message())),
            })?
            .into_inner();
        Ok((channel, deployer, configured))
    }

    fn check_handshake(&self, h: &Handshake) -> Result<(), PluginError> {
        let s = &self.spec;
        let perm = |why: String| {
            PluginError::Permanent(format!(
                "plugin {} ({}): {why}",
                s.name,
                s.command.display()
            ))
        };
        if h.core != handshake::CORE_PROTOCOL_VERSION {
            return Err(perm(format!(
                "it speaks go-plugin core protocol {}, manent speaks {}",
                h.core,
                handshake::CORE_PROTOCOL_VERSION
            )));
        }
        if h.app != handshake::APP_PROTOCOL_VERSION {
            return Err(perm(format!(
                "it speaks plugin protocol version {}, this manent speaks version {}: rebuild the \
                 plugin with an SDK of protocol version {} (or use a manent that speaks {})",
                h.app,
                handshake::APP_PROTOCOL_VERSION,
                handshake::APP_PROTOCOL_VERSION,
                h.app
            )));
        }
        if h.protocol != "grpc" {
            return Err(perm(format!(
                "it serves go-plugin's `{}` protocol; manent needs `grpc` (set GRPCServer in the \
                 plugin's ServeConfig)",
                h.protocol
            )));
        }
        if h.cert.is_none() {
            self.reach(StartPhase::AutoMtls);
            return Err(perm(
                "it did not take part in AutoMTLS (no certificate in its handshake line); manent \
                 talks to plugins over mutual TLS only"
                    .into(),
            ));
        }
        Ok(())
    }
}
