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
/// The plugin's stderr pipe: room for a burst of log lines.
const PIPE_BYTES: usize = 1 << 20;
/// What the engine's grown plugin stderr pipes may take together, each counted at its full
/// size: a quarter of a user's default pipe allowance (`pipe-user-pages-soft`, 64 MiB). Past that
/// allowance the kernel gives each new pipe of the user a page or two — the operator's shell
/// pipelines included — so plugins past the budget keep the default size.
const PIPES_BUDGET: usize = 16 << 20;

/// The bytes the engine's pipes took beyond their default, against the most they may.
#[derive(Debug)]
struct PipeBudget {
    grown: std::sync::atomic::AtomicUsize,
    most: usize,
}

static PIPES: PipeBudget = PipeBudget::new(PIPES_BUDGET);

impl PipeBudget {
    const fn new(most: usize) -> Self {
        PipeBudget {
            grown: std::sync::atomic::AtomicUsize::new(0),
            most,
        }
    }
}

/// A share of a [`PipeBudget`], given back when dropped (the plugin's stderr closed).
#[derive(Debug)]
struct PipeShare(&'static PipeBudget, usize);

impl PipeShare {
    fn take(budget: &'static PipeBudget, bytes: usize) -> Option<PipeShare> {
        use std::sync::atomic::Ordering::SeqCst;
        budget
            .grown
            .fetch_update(SeqCst, SeqCst, |g| {
                (g + bytes <= budget.most).then_some(g + bytes)
            })
            .ok()
            .map(|_| PipeShare(budget, bytes))
    }
}

impl Drop for PipeShare {
    fn drop(&mut self) {
        (self.0.grown).fetch_sub(self.1, std::sync::atomic::Ordering::SeqCst);
    }
}

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

fn tail(lines: &Mutex<VecDeque<String>>) -> String {
    lines
        .lock()
        .map(|l| l.iter().cloned().collect::<Vec<_>>().join("\n    "))
        .unwrap_or_default()
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

    async fn start(&self) -> Result<Process, PluginError> {
        let s = &self.spec;
        self.reach(StartPhase::Handshake);
        self.activate().await?;
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
        let mut stdout = BufReader::new(child.stdout.take().ok_or_else(|| self.fail("no stdout"))?);
        let (exit_tx, exited) = watch::channel(None);
        let mut first = String::new();
        let read = tokio::time::timeout(s.start_timeout, stdout.read_line(&mut first)).await;
        let line = match read {
            Err(_) => {
                crate::sys::kill_group(pid);
                return Err(self.fail(format!(
                    "no go-plugin handshake within {} (start_timeout): a plugin must print its \
                     handshake line on stdout first (manent::plugin::external::serve or \
                     hashicorp/go-plugin's Serve do); raise `start_timeout` if it is just slow",
                    humantime::format_duration(s.start_timeout)
                )));
            }
            Ok(Ok(0)) | Ok(Err(_)) => {
                let status = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
                let how = match status {
                    Ok(Ok(st)) => st.to_string(),
                    _ => "no exit status".into(),
                };
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Err(PluginError::Failed(format!(
                    "plugin {} ({}) exited before the go-plugin handshake ({how}); its last \
                     stderr lines:\n    {}",
                    s.name,
                    s.command.display(),
                    self::tail(&tail)
                )));
            }
            Ok(Ok(_)) => first,
        };
        let kill = |e: PluginError| {
            crate::sys::kill_group(pid);
            e
        };
        let shake = Handshake::parse(&line).map_err(|why| {
            kill(PluginError::Permanent(format!(
                "plugin {} ({}) printed {:?} where the go-plugin handshake line belongs ({why}): \
                 nothing may be printed on stdout before it",
                s.name,
                s.command.display(),
                line.trim()
            )))
        })?;
        self.reach(StartPhase::Protocol);
        self.check_handshake(&shake).map_err(kill)?;
        handshaken.store(true, std::sync::atomic::Ordering::Relaxed);
        let plugin_cert =
            rustls::pki_types::CertificateDer::from(shake.cert.clone().unwrap_or_default());
        tokio::spawn(drain_stdout(stdout, self.logger.clone(), s.name.clone()));
        let (name, log) = (s.name.clone(), self.logger.clone());
        // A socket the plugin made outside the directory given to it (go-plugin before 1.4
        // ignores PLUGIN_UNIX_SOCKET_DIR) is left behind when it is killed: removed once it
        // has exited, if it is still a socket of this user's.
        let own_socket = match &shake.addr {
            handshake::Addr::Unix(path) if !path.starts_with(socket_dir.path()) => {
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
        let client_tls =
            tls::client_config(&identity, &plugin_cert).map_err(|e| kill(self.fail(e)))?;
        let broker_tls =
            tls::server_config(&identity, &plugin_cert).map_err(|e| kill(self.fail(e)))?;
        // Every phase of a start lives within start_timeout, counted from the spawn: a plugin
        // that prints its handshake and then never speaks must not hang the engine.
        let left = s.start_timeout.saturating_sub(started.elapsed());
        let phase = std::sync::Mutex::new("dialing its socket");
        let at = |p: &'static str| {
            self.reach(match p {
                HEALTH => StartPhase::Health,
                CONFIGURE => StartPhase::Configure,
                _ => StartPhase::AutoMtls,
            });
            if let Ok(mut cur) = phase.lock() {
                *cur = p;
            }
        };
        let connect = self.connect(&shake, client_tls, &at);
        let (channel, deployer, configured) = match tokio::time::timeout(left, connect).await {
            Ok(r) => r.map_err(kill)?,
            Err(_) => {
                let stuck = phase.lock().map_or("starting", |p| *p);
                return Err(kill(self.fail(format!(
                    "no answer within {} (start_timeout) after its handshake: stuck at {stuck}; \
                     the plugin accepted the connection but does not speak gRPC over mutual \
                     TLS — check that it is a manent plugin, or raise `start_timeout` if it is \
                     just slow",
                    humantime::format_duration(s.start_timeout)
                ))));
            }
        };
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
                "plugin {} started (pid {pid}, protocol {}), capabilities: [{}]",
                s.name, shake.app, capabilities
            ),
        );
        self.reach(StartPhase::Ready);
        unfinished.disarm();
        Ok(Process {
            pid,
            capabilities,
            deployer,
            broker: HostBroker::new(broker_tx, broker_tls, socket_dir.path().to_owned()),
            handshake: shake,
            controller: GrpcControllerClient::with_origin(channel.clone(), conn::origin()),
            connection: channel,
            exited,
            stderr_tail: tail,
            _socket_dir: socket_dir,
            _tracked: tracked,
        })
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

/// Removes `path` if it is a socket (not followed) owned by this user; anything else stays.
fn remove_stale_socket(path: &std::path::Path) {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    if let Ok(m) = std::fs::symlink_metadata(path)
        && m.file_type().is_socket()
        && m.uid() == crate::sys::euid()
    {
        let _ = std::fs::remove_file(path);
    }
}

/// Lines a plugin may write on stderr before its handshake that are kept (shown and stored);
/// past it they only count, so a plugin flooding stderr on its way up cannot fill the database.
const BEFORE_HANDSHAKE: usize = 1_000;

async fn forward_stderr(
    stderr: tokio::process::ChildStderr,
    (sink, calls): (Arc<dyn LogSink>, Arc<super::calls::Calls>),
    plugin: String,
    tail: Arc<Mutex<VecDeque<String>>>,
    handshaken: Arc<std::sync::atomic::AtomicBool>,
    // Held while the pipe is read: given back when it closes.
    _share: Option<PipeShare>,
) {
    use std::sync::atomic::Ordering;
    // The pipe's whole capacity per read: a flooding plugin is drained in one syscall.
    let mut lines = crate::plugin::lines::Lines::new(BufReader::with_capacity(1 << 16, stderr));
    let mut in_panic = false;
    let (mut early, mut dropped) = (0usize, 0u64);
    let mut read = 0u32;
    while let Some(line) = lines.next().await {
        // Every 64 lines: while the database is behind but moving, the plugin waits on its
        // pipe rather than its lines going unstored.
        read = read.wrapping_add(1);
        if read.is_multiple_of(64) {
            while sink.congested() {
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
        }
        if line.trim().is_empty() {
            continue;
        }
        let p = hclog::parse(&line, &mut in_panic);
        if let Ok(mut t) = tail.lock() {
            if t.len() == STDERR_TAIL {
                t.pop_front();
            }
            t.push_back(p.message.clone());
        }
        let up = handshaken.load(Ordering::Relaxed);
        if !up {
            early += 1;
            if early > BEFORE_HANDSHAKE {
                dropped += 1;
                continue;
            }
        }
        if up && dropped > 0 {
            sink.log(LogLine {
                at: crate::sys::now_ms(),
                level: Level::Warn,
                source: plugin.clone(),
                deployment_id: None,
                target: None,
                moniker: None,
                message: format!(
                    "{dropped} more stderr lines the plugin wrote before its handshake were not \
                     kept (more than {BEFORE_HANDSHAKE})"
                ),
                attrs: BTreeMap::new(),
            });
            dropped = 0;
        }
        // A line that names no deployment is the call's in flight, if only one can be meant.
        let (deployment_id, target, moniker) = match p.deployment {
            Some(d) => (Some(d), p.target, p.moniker),
            None => {
                let a = calls.attribute();
                // The call's moniker only where the line names no other target.
                let (target, moniker) = match (p.target, a.target) {
                    (Some(own), Some((t, m))) if own == t => (Some(own), p.moniker.or(Some(m))),
                    (None, Some((t, m))) => (Some(t), p.moniker.or(Some(m))),
                    (own, _) => (own, p.moniker),
                };
                (a.deployment, target, moniker)
            }
        };
        sink.log(LogLine {
            at: crate::sys::now_ms(),
            level: p.level,
            source: plugin.clone(),
            deployment_id,
            target,
            moniker,
            message: p.message,
            attrs: p.attrs,
        });
    }
    if dropped > 0 {
        sink.log(LogLine {
            at: crate::sys::now_ms(),
            level: Level::Warn,
            source: plugin,
            deployment_id: None,
            target: None,
            moniker: None,
            message: format!(
                "{dropped} more stderr lines the plugin wrote before its handshake were not kept \
                 (more than {BEFORE_HANDSHAKE})"
            ),
            attrs: BTreeMap::new(),
        });
    }
}

/// Nothing a plugin writes on stdout after the handshake is accepted: it is drained (so the
/// plugin never blocks) and reported once, with the start of what it wrote.
async fn drain_stdout(
    mut stdout: BufReader<tokio::process::ChildStdout>,
    log: Logger,
    plugin: String,
) {
    let mut buf = vec![0u8; 8192];
    let mut warned = false;
    while let Ok(n) = stdout.read(&mut buf).await {
        if n == 0 {
            return;
        }
        if !warned {
            warned = true;
            let text = String::from_utf8_lossy(&buf[..n]);
            let first: String = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or_default()
                .chars()
                .filter(|c| !c.is_control())
                .take(80)
                .collect();
            log.warn(&format!(
                "plugin {plugin} wrote to stdout after the handshake ({first:?}…); it is ignored \
                 (stdout is reserved for the handshake: log through the plugin's logger)"
            ));
        }
    }
}

/// go-plugin's GRPCStdio: what a Go plugin prints after Serve. Older plugins (go-plugin 1.0.1)
/// do not have it.
async fn forward_stdio(channel: H2, log: Logger) {
    let mut client = GrpcStdioClient::with_origin(channel, conn::origin());
    let Ok(resp) = client.stream_stdio(()).await else {
        return;
    };
    let mut stream = resp.into_inner();
    while let Ok(Some(data)) = stream.message().await {
        let text = String::from_utf8_lossy(&data.data);
        let level = if data.channel == StdioChannel::Stderr as i32 {
            Level::Info
        } else {
            Level::Warn
        };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            log.log(level, line, &[]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_pipes_grow_within_the_engines_budget_and_give_it_back() {
        static BUDGET: PipeBudget = PipeBudget::new(3 << 20);
        let shares: Vec<PipeShare> = std::iter::from_fn(|| PipeShare::take(&BUDGET, 1 << 20))
            .take(10)
            .collect();
        assert_eq!(shares.len(), 3);
        assert!(PipeShare::take(&BUDGET, 1).is_none());
        drop(shares);
        assert!(PipeShare::take(&BUDGET, 3 << 20).is_some());
    }
}
