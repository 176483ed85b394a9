//! The Rust plugin SDK: `serve(factory)` makes a binary a manent plugin that any go-plugin host
//! can start — magic cookie, version negotiation, a Unix socket, AutoMTLS, health, controller,
//! stdio, broker and the Deployer service backed by the same `Factory` as a built-in. Stdout
//! carries only the handshake line; logs go to stderr as hclog JSON.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use tonic::{Request, Response, Status};

use super::broker::{BrokerSecrets, PluginBroker};
use super::handshake::{self, Addr, Handshake};
use super::proto::goplugin::grpc_broker_server::GrpcBrokerServer;
use super::proto::goplugin::grpc_controller_server::{GrpcController, GrpcControllerServer};
use super::proto::goplugin::grpc_stdio_server::{GrpcStdio, GrpcStdioServer};
use super::proto::goplugin::{self, StdioData};
use super::proto::v1::deployer_server::{Deployer as DeployerRpc, DeployerServer};
use super::proto::{self, v1};
use super::{conn, hclog, tls};
use crate::plugin::contract::{Capabilities, Deployer, Factory};
use crate::plugin::logger::{LogLine, LogSink, Logger};
use crate::plugin::secrets::{Secrets, SecretsGuard};

pub mod conformance;

/// Writes log lines as hclog JSON on stderr, where a go-plugin host reads them.
struct Stderr {
    module: String,
}

impl LogSink for Stderr {
    fn log(&self, mut line: LogLine) {
        // A line logged during a call names the call's deployment (and its target when the
        // call has one) unless it names its own: `manent logs DEP` shows it whichever logger
        // the plugin used.
        let _ = CALL.try_with(|c| {
            if line.deployment_id.is_none() {
                line.deployment_id = Some(c.deployment.clone());
                if line.target.is_none()
                    && let Some((t, m)) = &c.target
                {
                    line.target = Some(t.clone());
                    line.moniker = Some(m.clone());
                }
            }
        });
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{}", hclog::format(&line, &self.module));
    }
}

/// The call a task serves: its lines are tagged with it.
#[derive(Debug, Clone)]
struct CallTags {
    deployment: String,
    /// The target and its moniker, when the call has one.
    target: Option<(String, String)>,
}

tokio::task_local! {
    static CALL: CallTags;
}

/// What the SDK logs (at debug) when a call's handler returns or is dropped because the host
/// cancelled it, with `call`, `idempotency_key`, `ms` and `cancelled` — when the conformance
/// kit started the plugin, which reads how long a cancelled call ran on from it.
pub const CALL_ENDED: &str = "call ended";

/// Logs [`CALL_ENDED`] when dropped.
struct Ended {
    call: &'static str,
    deployment: String,
    key: String,
    started: std::time::Instant,
    answered: bool,
}

impl Drop for Ended {
    fn drop(&mut self) {
        // Said only to the conformance kit: an engine's log has no use for a line per call.
        if !conformance::enabled() {
            return;
        }
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        logger().for_deployment(&self.deployment).log(
            crate::plugin::logger::Level::Debug,
            CALL_ENDED,
            &[
                ("call", self.call.into()),
                ("idempotency_key", self.key.clone().into()),
                ("ms", ms.into()),
                ("cancelled", (!self.answered).into()),
            ],
        );
    }
}

/// Runs the plugin's `call` of `r`: every line it logs names the call's deployment (and
/// target), and [`CALL_ENDED`] is logged when it returns or is cancelled.
async fn in_call<T>(
    r: &crate::plugin::Request,
    call: &'static str,
    work: impl std::future::Future<Output = T>,
) -> T {
    let mut ended = Ended {
        call,
        deployment: r.deployment_id.clone(),
        key: r.idempotency_key.clone(),
        started: std::time::Instant::now(),
        answered: false,
    };
    let tags = CallTags {
        deployment: r.deployment_id.clone(),
        target: match r.targets.as_slice() {
            [t] => Some((t.name().to_owned(), t.moniker.to_string())),
            _ => None,
        },
    };
    let out = if r.deployment_id.is_empty() {
        work.await
    } else {
        CALL.scope(tags, work).await
    };
    ended.answered = true;
    out
}

/// The binary's file name: the plugin's name in its log lines and in Configure's answer.
fn module() -> &'static str {
    static MODULE: OnceLock<String> = OnceLock::new();
    MODULE.get_or_init(|| {
        std::env::args()
            .next()
            .and_then(|a| {
                std::path::Path::new(&a)
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "plugin".into())
    })
}

/// The plugin's logger: hclog JSON on stderr, forwarded by manent with level and attributes.
/// (It is also what the factory receives.)
pub fn logger() -> Logger {
    static LOGGER: OnceLock<Logger> = OnceLock::new();
    LOGGER
        .get_or_init(|| {
            Logger::new(
                Arc::new(Stderr {
                    module: module().to_owned(),
                }),
                module(),
            )
        })
        .clone()
}

/// Serves the plugin built by `factory` until the host shuts it down, then exits. A binary's
/// whole `main` is `manent::plugin::external::serve(my_plugin::factory)`.
pub fn serve(factory: Factory) -> ! {
    serve_with_versions(factory, &[handshake::APP_PROTOCOL_VERSION])
}

/// [`serve`] offering other protocol versions: for plugins built against another version of
/// the protocol, and for testing how a host refuses them.
pub fn serve_with_versions(factory: Factory, versions: &[u32]) -> ! {
    if std::env::var(handshake::MAGIC_COOKIE_KEY).as_deref() != Ok(handshake::MAGIC_COOKIE_VALUE) {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "This binary is a manent plugin. It is not meant to be run by hand: declare it under \
             `plugins:` in manent.yml and manent starts it when a deploy needs it."
        );
        std::process::exit(1);
    }
    wait_for_debugger();
    let code = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => match rt.block_on(run(factory, versions)) {
            Ok(()) => 0,
            Err(e) => {
                logger().error(&format!("plugin failed: {e}"));
                1
            }
        },
        Err(e) => {
            logger().error(&format!("cannot start the async runtime: {e}"));
            1
        }
    };
    std::process::exit(code)
}

/// Started for a debugger (`MANENT_PLUGIN_WAIT_FOR_DEBUGGER=1`: manent's `MANENT_PLUGIN_DEBUG`
/// names this plugin), waits until one is attached — a tracer in `/proc/self/status` — before
/// anything else, so a breakpoint in the factory or any call is reached.
fn wait_for_debugger() {
    if std::env::var(handshake::ENV_WAIT_FOR_DEBUGGER).as_deref() != Ok("1") {
        return;
    }
    // Any process of this user may attach, not only an ancestor (Ubuntu's default
    // `kernel.yama.ptrace_scope=1` refuses `gdb -p` from another terminal otherwise).
    let _ = rustix::process::set_ptracer(rustix::process::PTracer::Any);
    logger().warn(&format!(
        "waiting for a debugger to attach to pid {}",
        std::process::id()
    ));
    while !traced() {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    logger().info("a debugger is attached: serving");
}

/// True while a debugger (a tracer) is attached to this process.
fn traced() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("TracerPid:").map(|v| v.trim() != "0"))
        })
        .unwrap_or(false)
}

async fn run(factory: Factory, versions: &[u32]) -> Result<(), String> {
    let version = handshake::negotiate(
        std::env::var(handshake::ENV_PROTOCOL_VERSIONS)
            .ok()
            .as_deref(),
        versions,
    );
    let base = std::env::var_os(handshake::ENV_UNIX_SOCKET_DIR)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    // The socket goes in a directory of its own, 0700 whatever the umask (in a shared /tmp, or
    // a host's directory, no one else reaches it), and is 0600 itself.
    let dir = private_dir(&base)?;
    let path = dir.path().join(format!(
        "manent-plugin-{}-{:08x}.sock",
        std::process::id(),
        fastrand::u32(..)
    ));
    let listener = tokio::net::UnixListener::bind(&path)
        .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("cannot make {} private: {e}", path.display()))?;
    }
    let broker = Arc::new(PluginBroker::default());
    let host_pem = std::env::var(handshake::ENV_CLIENT_CERT)
        .ok()
        .filter(|p| !p.trim().is_empty());
    let host_cert = host_pem
        .as_deref()
        .map(|p| tls::der_from_pem(p).ok_or("PLUGIN_CLIENT_CERT is not a PEM certificate"))
        .transpose()?;
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_service_status("plugin", tonic_health::ServingStatus::Serving)
        .await;
    let stop = Arc::new(tokio::sync::Notify::new());
    let service = PluginService {
        factory,
        deployer: Mutex::new(None),
        broker: broker.clone(),
    };
    let router = tonic::transport::Server::builder()
        .add_service(health_service)
        .add_service(GrpcControllerServer::new(Controller {
            stop: stop.clone(),
            broker: broker.clone(),
        }))
        .add_service(GrpcStdioServer::new(Stdio(stop.clone())))
        .add_service(GrpcBrokerServer::new(broker.clone()))
        .add_service(DeployerServer::new(service).max_decoding_message_size(usize::MAX));
    let stopped = {
        let stop = stop.clone();
        async move { stop.notified().await }
    };
    let (cert, serving) = match host_cert {
        Some(host_cert) => {
            let identity = tls::Identity::generate().map_err(|e| e.to_string())?;
            broker.set_tls(tls::client_config(&identity, &host_cert).map_err(|e| e.to_string())?);
            let config = tls::server_config(&identity, &host_cert).map_err(|e| e.to_string())?;
            let incoming = conn::tls_incoming(listener, config);
            let serving = tokio::spawn(router.serve_with_incoming_shutdown(incoming, stopped));
            (Some(identity.cert.to_vec()), serving)
        }
        None => {
            let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
            (
                None,
                tokio::spawn(router.serve_with_incoming_shutdown(incoming, stopped)),
            )
        }
    };
    let line = Handshake {
        core: handshake::CORE_PROTOCOL_VERSION,
        app: version,
        addr: Addr::Unix(path.clone()),
        protocol: "grpc".into(),
        cert,
    }
    .line();
    {
        // Stdout is the handshake channel: this one line, and nothing else, ever.
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}")
            .and_then(|()| out.flush())
            .map_err(|e| format!("cannot write the handshake: {e}"))?;
        // From now on a stray `println!` in the plugin becomes a stderr line (the host shows
        // it in the plugin's log) instead of corrupting the handshake channel.
        crate::sys::stdout_to_stderr();
    }
    watch_parent(stop.clone());
    let served = serving.await;
    let _ = std::fs::remove_file(&path);
    drop(dir);
    match served {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// A new directory in `base`, 0700 whatever the umask, removed when dropped.
fn private_dir(base: &std::path::Path) -> Result<tempfile::TempDir, String> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("manent-plugin-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(base)
        .map_err(|e| format!("cannot make a socket directory in {}: {e}", base.display()))?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("cannot make {} private: {e}", dir.path().display()))?;
    Ok(dir)
}

/// A host killed outright (`kill -9`, an ssh session taking it down) never says Shutdown: a
/// plugin whose parent process changes stops serving instead of living on as an orphan.
fn watch_parent(stop: Arc<tokio::sync::Notify>) {
    let parent = std::os::unix::process::parent_id();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(1));
        loop {
            every.tick().await;
            if std::os::unix::process::parent_id() != parent {
                stop.notify_waiters();
                // A call still running has nobody to answer to: it gets two seconds.
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                std::process::exit(1);
            }
        }
    });
}

/// go-plugin's controller: `Shutdown` stops the process.
struct Controller {
    stop: Arc<tokio::sync::Notify>,
    broker: Arc<PluginBroker>,
}

#[async_trait]
impl GrpcController for Controller {
    async fn shutdown(
        &self,
        _: Request<goplugin::Empty>,
    ) -> Result<Response<goplugin::Empty>, Status> {
        // Answer first, then stop serving: the host waits for the process to exit. A graceful
        // stop waits for open streams, so the ones this side holds open end now (stdio when it
        // is told to stop, the broker's here); whatever the host still holds open, the process
        // exits after a short grace, like go-plugin's own server (which stops hard here).
        let (stop, broker) = (self.stop.clone(), self.broker.clone());
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            broker.close();
            stop.notify_waiters();
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            logger().warn(
                "stopping: the host still held a connection open 500 ms after Shutdown; exiting",
            );
            std::process::exit(0);
        });
        Ok(Response::new(goplugin::Empty {}))
    }
}

struct Stdio(Arc<tokio::sync::Notify>);

#[async_trait]
impl GrpcStdio for Stdio {
    type StreamStdioStream = tokio_stream::wrappers::ReceiverStream<Result<StdioData, Status>>;

    /// Stays open and silent: the SDK's logs go to stderr, and stdout is never written after
    /// the handshake.
    async fn stream_stdio(
        &self,
        _: Request<()>,
    ) -> Result<Response<Self::StreamStdioStream>, Status> {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let stop = self.0.clone();
        tokio::spawn(async move {
            stop.notified().await;
            drop(tx);
        });
        Ok(Response::new(tokio_stream::wrappers::ReceiverStream::new(
            rx,
        )))
    }
}

struct PluginService {
    factory: Factory,
    deployer: Mutex<Option<Arc<dyn Deployer>>>,
    broker: Arc<PluginBroker>,
}

impl PluginService {
    fn deployer(&self) -> Result<Arc<dyn Deployer>, Status> {
        self.deployer
            .lock()
            .ok()
            .and_then(|d| d.clone())
            .ok_or_else(|| Status::failed_precondition("Configure has not been called"))
    }

    /// The call's request, with its secrets open until the guard drops.
    fn request(
        &self,
        w: v1::DeployRequest,
    ) -> Result<(crate::plugin::Request, Option<SecretsGuard>), Status> {
        let (secrets, guard) = match w.secrets_broker_id {
            0 => (Secrets::none(), None),
            id => {
                let (s, g) =
                    Secrets::for_call(Arc::new(BrokerSecrets::new(self.broker.clone(), id)));
                (s, Some(g))
            }
        };
        Ok((proto::request_from_wire(w, secrets)?, guard))
    }
}

fn unimplemented(call: &str) -> Status {
    Status::unimplemented(format!("this plugin does not implement {call}"))
}

#[async_trait]
impl DeployerRpc for PluginService {
    async fn configure(
        &self,
        req: Request<v1::ConfigureRequest>,
    ) -> Result<Response<v1::ConfigureResponse>, Status> {
        let bytes = req.into_inner().config_json;
        let config: serde_json::Value = if bytes.is_empty() {
            serde_json::Value::Object(serde_json::Map::new())
        } else {
            serde_json::from_slice(&bytes)
                .map_err(|e| Status::invalid_argument(format!("config_json: {e}")))?
        };
        let deployer = (self.factory)(&config, logger())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let capabilities = Capabilities::of(deployer.as_ref()).0.into_iter().collect();
        if let Ok(mut d) = self.deployer.lock() {
            *d = Some(deployer);
        }
        Ok(Response::new(v1::ConfigureResponse {
            name: module().to_owned(),
            capabilities,
        }))
    }

    async fn supports(
        &self,
        req: Request<v1::SupportsRequest>,
    ) -> Result<Response<v1::SupportsResponse>, Status> {
        let artifact = req
            .into_inner()
            .artifact
            .map(Into::into)
            .unwrap_or_default();
        let supported = self.deployer()?.supports(&artifact).await?;
        Ok(Response::new(v1::SupportsResponse { supported }))
    }

    async fn validate(
        &self,
        req: Request<v1::DeployRequest>,
    ) -> Result<Response<v1::Empty>, Status> {
        let mut w = req.into_inner();
        w.secrets_broker_id = 0;
        let (r, _open) = self.request(w)?;
        let d = self.deployer()?;
        match conformance::probe(&r.params) {
            Some(probe) => conformance::validate(probe)?,
            None => in_call(&r, "validate", d.validate(&r)).await?,
        }
        Ok(Response::new(v1::Empty {}))
    }

    async fn deploy(
        &self,
        req: Request<v1::DeployRequest>,
    ) -> Result<Response<v1::DeployResponse>, Status> {
        let (r, _open) = self.request(req.into_inner())?;
        let d = self.deployer()?;
        if let Some(probe) = conformance::probe(&r.params) {
            return conformance::deploy(probe, &r, &logger(), module())
                .await
                .map(Response::new);
        }
        let result = in_call(&r, "deploy", d.deploy(&r)).await?;
        Ok(Response::new(proto::result_to_wire(result)))
    }

    async fn dry_run(
        &self,
        req: Request<v1::DeployRequest>,
    ) -> Result<Response<v1::DeployResponse>, Status> {
        let d = self.deployer()?;
        let dr = d.dry_runner().ok_or_else(|| unimplemented("DryRun"))?;
        let (r, _open) = self.request(req.into_inner())?;
        Ok(Response::new(proto::result_to_wire(
            in_call(&r, "dry_run", dr.dry_run(&r)).await?,
        )))
    }

    async fn current_release(
        &self,
        req: Request<v1::DeployRequest>,
    ) -> Result<Response<v1::CurrentReleaseResponse>, Status> {
        let d = self.deployer()?;
        let ri = d
            .release_inspector()
            .ok_or_else(|| unimplemented("CurrentRelease"))?;
        let (r, _open) = self.request(req.into_inner())?;
        Ok(Response::new(proto::releases_to_wire(
            in_call(&r, "current_release", ri.current_release(&r)).await?,
        )))
    }

    async fn rollback(
        &self,
        req: Request<v1::RollbackRequest>,
    ) -> Result<Response<v1::DeployResponse>, Status> {
        let d = self.deployer()?;
        let rb = d.rollbacker().ok_or_else(|| unimplemented("Rollback"))?;
        let w = req.into_inner();
        let to = proto::release_from_wire(w.to.unwrap_or_default());
        let (r, _open) = self.request(w.request.unwrap_or_default())?;
        Ok(Response::new(proto::result_to_wire(
            in_call(&r, "rollback", rb.rollback(&r, &to)).await?,
        )))
    }

    async fn prepare_slots(
        &self,
        req: Request<v1::DeployRequest>,
    ) -> Result<Response<v1::StateResponse>, Status> {
        let d = self.deployer()?;
        let s = d
            .slot_deployer()
            .ok_or_else(|| unimplemented("PrepareSlots"))?;
        let (r, _open) = self.request(req.into_inner())?;
        let state = in_call(&r, "prepare_slots", s.prepare_slots(&r)).await?;
        Ok(Response::new(v1::StateResponse {
            state_json: serde_json::to_vec(&state).unwrap_or_default(),
        }))
    }

    async fn deploy_candidate(
        &self,
        req: Request<v1::DeployRequest>,
    ) -> Result<Response<v1::DeployResponse>, Status> {
        let d = self.deployer()?;
        let s = d
            .slot_deployer()
            .ok_or_else(|| unimplemented("DeployCandidate"))?;
        let (r, _open) = self.request(req.into_inner())?;
        Ok(Response::new(proto::result_to_wire(
            in_call(&r, "deploy_candidate", s.deploy_candidate(&r)).await?,
        )))
    }

    async fn promote_candidate(
        &self,
        req: Request<v1::DeployRequest>,
    ) -> Result<Response<v1::Empty>, Status> {
        let d = self.deployer()?;
        let s = d
            .slot_deployer()
            .ok_or_else(|| unimplemented("PromoteCandidate"))?;
        let (r, _open) = self.request(req.into_inner())?;
        in_call(&r, "promote_candidate", s.promote_candidate(&r)).await?;
        Ok(Response::new(v1::Empty {}))
    }

    async fn revert_candidate(
        &self,
        req: Request<v1::DeployRequest>,
    ) -> Result<Response<v1::Empty>, Status> {
        let d = self.deployer()?;
        let s = d
            .slot_deployer()
            .ok_or_else(|| unimplemented("RevertCandidate"))?;
        let (r, _open) = self.request(req.into_inner())?;
        in_call(&r, "revert_candidate", s.revert_candidate(&r)).await?;
        Ok(Response::new(v1::Empty {}))
    }

    async fn retire_previous(
        &self,
        req: Request<v1::DeployRequest>,
    ) -> Result<Response<v1::Empty>, Status> {
        let d = self.deployer()?;
        let s = d
            .slot_deployer()
            .ok_or_else(|| unimplemented("RetirePrevious"))?;
        let (r, _open) = self.request(req.into_inner())?;
        in_call(&r, "retire_previous", s.retire_previous(&r)).await?;
        Ok(Response::new(v1::Empty {}))
    }

    async fn set_candidate_weight(
        &self,
        req: Request<v1::WeightRequest>,
    ) -> Result<Response<v1::Empty>, Status> {
        let d = self.deployer()?;
        let t = d
            .traffic_router()
            .ok_or_else(|| unimplemented("SetCandidateWeight"))?;
        let w = req.into_inner();
        let (r, _open) = self.request(w.request.unwrap_or_default())?;
        in_call(
            &r,
            "set_candidate_weight",
            t.set_candidate_weight(&r, w.weight),
        )
        .await?;
        Ok(Response::new(v1::Empty {}))
    }

    async fn candidate_weight(
        &self,
        req: Request<v1::DeployRequest>,
    ) -> Result<Response<v1::WeightResponse>, Status> {
        let d = self.deployer()?;
        let t = d
            .traffic_router()
            .ok_or_else(|| unimplemented("CandidateWeight"))?;
        let (r, _open) = self.request(req.into_inner())?;
        Ok(Response::new(v1::WeightResponse {
            weight: in_call(&r, "candidate_weight", t.candidate_weight(&r)).await?,
        }))
    }

    async fn routing_state(
        &self,
        req: Request<v1::DeployRequest>,
    ) -> Result<Response<v1::RoutingStateResponse>, Status> {
        let d = self.deployer()?;
        let t = d
            .traffic_router()
            .ok_or_else(|| unimplemented("RoutingState"))?;
        let (r, _open) = self.request(req.into_inner())?;
        Ok(Response::new(proto::routing_state_to_wire(
            &in_call(&r, "routing_state", t.routing_state(&r)).await?,
        )))
    }

    async fn traffic(
        &self,
        req: Request<v1::TrafficRequest>,
    ) -> Result<Response<v1::TrafficResponse>, Status> {
        let d = self.deployer()?;
        let t = d.traffic_router().ok_or_else(|| unimplemented("Traffic"))?;
        let w = req.into_inner();
        let window = crate::plugin::TrafficWindow::from_wire(w.window_ms, w.since_ms);
        let (r, _open) = self.request(
            w.request
                .ok_or_else(|| Status::invalid_argument("Traffic without its request"))?,
        )?;
        Ok(Response::new(proto::traffic_to_wire(
            &in_call(&r, "traffic", t.traffic(&r, window)).await?,
        )))
    }

    async fn route_testers(
        &self,
        req: Request<v1::DeployRequest>,
    ) -> Result<Response<v1::DetailsResponse>, Status> {
        let d = self.deployer()?;
        let t = d
            .tester_router()
            .ok_or_else(|| unimplemented("RouteTesters"))?;
        let (r, _open) = self.request(req.into_inner())?;
        let details = in_call(&r, "route_testers", t.route_testers(&r))
            .await?
            .into_iter()
            .collect();
        Ok(Response::new(v1::DetailsResponse { details }))
    }

    async fn scale_candidate(
        &self,
        req: Request<v1::WeightRequest>,
    ) -> Result<Response<v1::Empty>, Status> {
        let d = self.deployer()?;
        let s = d
            .slot_scaler()
            .ok_or_else(|| unimplemented("ScaleCandidate"))?;
        let w = req.into_inner();
        let (r, _open) = self.request(w.request.unwrap_or_default())?;
        in_call(&r, "scale_candidate", s.scale_candidate(&r, w.weight)).await?;
        Ok(Response::new(v1::Empty {}))
    }
}
