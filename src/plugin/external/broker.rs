//! go-plugin's broker, for the Secrets service. The host opens one `StartStream` per plugin
//! process; for each call that may read secrets it listens on a fresh Unix socket (mutual TLS,
//! pinned to the plugin's certificate), announces it as `ConnInfo{service_id}`, and closes it
//! when the call returns. The plugin side waits for that `ConnInfo` and dials it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{Notify, mpsc, oneshot};
use tonic::{Request, Response, Status, Streaming};

use super::conn;
use super::handshake::Addr;
use super::proto::goplugin::ConnInfo;
use super::proto::goplugin::grpc_broker_server::GrpcBroker;
use super::proto::v1;
use super::proto::v1::secrets_client::SecretsClient;
use super::proto::v1::secrets_server::{Secrets as SecretsRpc, SecretsServer};
use crate::plugin::error::PluginError;
use crate::plugin::secrets::{SecretSource, Secrets};

/// The host's side of one plugin process's broker.
pub struct HostBroker {
    tx: mpsc::Sender<ConnInfo>,
    next: AtomicU32,
    /// Mutual TLS pinned to the plugin's certificate: the same for every call.
    tls: Arc<rustls::ServerConfig>,
    dir: PathBuf,
}

/// A Secrets service brokered for one call; dropping it closes the service.
pub struct Brokered {
    /// The broker id to put in the request.
    pub id: u32,
    stop: Option<oneshot::Sender<()>>,
    path: PathBuf,
}

impl Drop for Brokered {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

struct SecretsService(Secrets);

#[async_trait]
impl SecretsRpc for SecretsService {
    async fn secret(
        &self,
        req: Request<v1::SecretRequest>,
    ) -> Result<Response<v1::SecretResponse>, Status> {
        let name = req.into_inner().name;
        match self.0.secret(&name).await {
            Ok(value) => Ok(Response::new(v1::SecretResponse { value })),
            Err(e) => Err(Status::permission_denied(e.to_string())),
        }
    }
}

impl HostBroker {
    /// The broker of a process whose `StartStream` is fed by `tx`.
    pub fn new(tx: mpsc::Sender<ConnInfo>, tls: Arc<rustls::ServerConfig>, dir: PathBuf) -> Self {
        HostBroker {
            tx,
            next: AtomicU32::new(1),
            tls,
            dir,
        }
    }

    /// Serves `secrets` for one call. None when the call has no secrets (broker id 0).
    pub async fn serve(&self, secrets: &Secrets) -> Result<Option<Brokered>, PluginError> {
        if secrets.is_none() {
            return Ok(None);
        }
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let path = self.dir.join(format!("broker-{id}.sock"));
        let _ = std::fs::remove_file(&path);
        let listener = tokio::net::UnixListener::bind(&path).map_err(|e| {
            PluginError::Failed(format!("cannot listen for the plugin's secrets: {e}"))
        })?;
        let incoming = conn::tls_incoming(listener, self.tls.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let service = SecretsServer::new(SecretsService(secrets.clone()));
        tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopped.await;
                })
                .await;
        });
        let info = ConnInfo {
            service_id: id,
            network: "unix".into(),
            address: path.display().to_string(),
            knock: None,
        };
        if self.tx.send(info).await.is_err() {
            // The plugin has no broker stream: it cannot reach secrets, and says so if it tries.
            return Ok(None);
        }
        Ok(Some(Brokered {
            id,
            stop: Some(stop),
            path,
        }))
    }
}

/// The plugin's side: where the host said each brokered service is.
#[derive(Default)]
pub struct PluginBroker {
    known: Mutex<HashMap<u32, ConnInfo>>,
    arrived: Notify,
    tls: OnceLock<Arc<rustls::ClientConfig>>,
    // Keeps the outgoing half of StartStream open for as long as the plugin runs.
    outgoing: Mutex<Vec<mpsc::Sender<Result<ConnInfo, Status>>>>,
}

impl PluginBroker {
    /// Sets how to dial the host (AutoMTLS: our identity, pinned to the host's certificate).
    pub fn set_tls(&self, tls: Arc<rustls::ClientConfig>) {
        let _ = self.tls.set(tls);
    }

    /// Ends the plugin's half of every `StartStream`: the process is stopping, and a graceful
    /// stop waits for open streams.
    pub fn close(&self) {
        if let Ok(mut o) = self.outgoing.lock() {
            o.clear();
        }
    }

    /// Waits up to 5 s (go-plugin's limit) for the host to announce `id`.
    async fn wait_for(&self, id: u32) -> Result<ConnInfo, PluginError> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let notified = self.arrived.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(info) = self.known.lock().ok().and_then(|k| k.get(&id).cloned()) {
                return Ok(info);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(PluginError::Failed(format!(
                    "the host never announced broker service {id}"
                )));
            }
        }
    }

    /// A Secrets client for broker id `id`.
    pub async fn secrets(&self, id: u32) -> Result<SecretsClient<conn::H2>, PluginError> {
        let info = self.wait_for(id).await?;
        let addr = Addr::parse(&info.network, &info.address).map_err(PluginError::Failed)?;
        let tls = self.tls.get().cloned().ok_or_else(|| {
            PluginError::Failed("no AutoMTLS identity to reach the host's secrets".into())
        })?;
        // The host serves it for the duration of the call: if it does not answer at once, it
        // will not.
        let h2 = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            conn::h2(addr, tls, &|_| {}),
        )
        .await
        .map_err(|_| {
            PluginError::Failed("secrets are not available: the host did not answer".into())
        })?
        .map_err(|e| PluginError::Failed(format!("secrets are not available: {e}")))?;
        Ok(SecretsClient::with_origin(h2, conn::origin()))
    }
}

#[async_trait]
impl GrpcBroker for Arc<PluginBroker> {
    type StartStreamStream = tokio_stream::wrappers::ReceiverStream<Result<ConnInfo, Status>>;

    async fn start_stream(
        &self,
        req: Request<Streaming<ConnInfo>>,
    ) -> Result<Response<Self::StartStreamStream>, Status> {
        let mut inbound = req.into_inner();
        let me = self.clone();
        tokio::spawn(async move {
            while let Ok(Some(info)) = inbound.message().await {
                if let Ok(mut k) = me.known.lock() {
                    k.insert(info.service_id, info);
                }
                me.arrived.notify_waiters();
            }
        });
        let (tx, rx) = mpsc::channel(4);
        if let Ok(mut o) = self.outgoing.lock() {
            o.push(tx);
        }
        Ok(Response::new(tokio_stream::wrappers::ReceiverStream::new(
            rx,
        )))
    }
}

/// Secrets of one call, read from the host through the broker; the connection is made on the
/// first read and reused for the rest of the call.
pub struct BrokerSecrets {
    broker: Arc<PluginBroker>,
    id: u32,
    client: tokio::sync::Mutex<Option<SecretsClient<conn::H2>>>,
}

impl Drop for BrokerSecrets {
    /// The call is over: its broker address is forgotten (a long-lived plugin serves many).
    fn drop(&mut self) {
        if let Ok(mut k) = self.broker.known.lock() {
            k.remove(&self.id);
        }
    }
}

impl BrokerSecrets {
    /// Secrets at broker id `id`.
    pub fn new(broker: Arc<PluginBroker>, id: u32) -> Self {
        BrokerSecrets {
            broker,
            id,
            client: tokio::sync::Mutex::new(None),
        }
    }
}

#[async_trait]
impl SecretSource for BrokerSecrets {
    async fn secret(&self, name: &str) -> Result<String, PluginError> {
        let mut client = self.client.lock().await;
        if client.is_none() {
            *client = Some(self.broker.secrets(self.id).await?);
        }
        let c = client
            .as_mut()
            .ok_or_else(|| PluginError::Failed("no secrets client".into()))?;
        match c
            .secret(v1::SecretRequest {
                name: name.to_owned(),
            })
            .await
        {
            Ok(r) => Ok(r.into_inner().value),
            Err(s) if s.code() == tonic::Code::PermissionDenied => {
                Err(PluginError::Permanent(s.message().to_owned()))
            }
            Err(s) => Err(PluginError::Permanent(format!(
                "secret `{name}` is not available: {} (secrets can be read only during a call)",
                s.message()
            ))),
        }
    }
}
