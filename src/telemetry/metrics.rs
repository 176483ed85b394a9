//! Prometheus metrics (design/architecture.md "Observability") with the official `prometheus-client`: recorded always (a
//! few atomics per target), served only when `metrics.listen` is set, in the Prometheus text
//! format, by any engine — worker, console, headless deploy — while it runs.

use std::sync::{Arc, OnceLock};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// A target's deploy, by application, environment, plugin and how it ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TargetLabels {
    /// Application.
    pub application: String,
    /// Environment.
    pub environment: String,
    /// Plugin.
    pub plugin: String,
    /// `deployed`, `unchanged`, `failed`.
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkflowLabels {
    kind: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabels {
    /// The step's family: its name before the first `:` (`deploy`, `hook`, `plugin.validate`).
    step: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabels {
    application: String,
    environment: String,
    event: String,
    hook: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WeightLabels {
    application: String,
    environment: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DroppedLabels {
    /// `store` (the database fell behind) or `subscriber` (a console or follower did).
    sink: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NotifyLabels {
    receiver: String,
}

/// Every metric manent exports.
pub struct Metrics {
    registry: Registry,
    target_seconds: Family<TargetLabels, Histogram>,
    step_retries: Family<StepLabels, Counter>,
    plugin_starts: Family<PluginLabels, Counter>,
    plugin_crashes: Family<PluginLabels, Counter>,
    plugin_restarts: Family<PluginLabels, Counter>,
    workflows: Family<WorkflowLabels, Gauge>,
    hook_seconds: Family<HookLabels, Histogram>,
    canary_set: Family<WeightLabels, Gauge>,
    canary_actual: Family<WeightLabels, Gauge>,
    log_dropped: Family<DroppedLabels, Counter>,
    notify_failed: Family<NotifyLabels, Counter>,
    notify_sent: Family<NotifyLabels, Counter>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn seconds() -> Histogram {
    // 5 ms to about 11 min: a no-op plugin call to a slow rollout of one host.
    Histogram::new(exponential_buckets(0.005, 2.0, 18))
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::default();
        let target_seconds =
            Family::<TargetLabels, Histogram>::new_with_constructor(seconds as fn() -> Histogram);
        registry.register(
            "manent_target_deploy_seconds",
            "Time of one target's deploy call, by how it ended",
            target_seconds.clone(),
        );
        let step_retries = Family::default();
        registry.register(
            "manent_step_retries",
            "Step attempts that failed and were retried after a backoff, by step family",
            step_retries.clone(),
        );
        let plugin_starts = Family::default();
        registry.register(
            "manent_plugin_starts",
            "External plugin processes started",
            plugin_starts.clone(),
        );
        let plugin_crashes = Family::default();
        registry.register(
            "manent_plugin_crashes",
            "External plugin processes that exited unsuccessfully",
            plugin_crashes.clone(),
        );
        let plugin_restarts = Family::default();
        registry.register(
            "manent_plugin_restarts",
            "External plugin processes started again after the previous one exited",
            plugin_restarts.clone(),
        );
        let workflows = Family::default();
        registry.register(
            "manent_workflows",
            "Workflows in the system database, by kind and state",
            workflows.clone(),
        );
        let hook_seconds =
            Family::<HookLabels, Histogram>::new_with_constructor(seconds as fn() -> Histogram);
        registry.register(
            "manent_hook_seconds",
            "Time of one lifecycle hook run, by how it ended",
            hook_seconds.clone(),
        );
        let canary_set = Family::default();
        registry.register(
            "manent_canary_weight_set_percent",
            "The traffic weight a canary step set for the candidate",
            canary_set.clone(),
        );
        let canary_actual = Family::default();
        registry.register(
            "manent_canary_weight_actual_percent",
            "The traffic weight the router reports for the candidate",
            canary_actual.clone(),
        );
        let log_dropped = Family::default();
        registry.register(
            "manent_log_lines_dropped",
            "Log lines not stored (the database fell behind) or not shown (a reader fell behind)",
            log_dropped.clone(),
        );
        let notify_sent = Family::default();
        registry.register(
            "manent_notifications_sent",
            "Notifications a receiver accepted",
            notify_sent.clone(),
        );
        let notify_failed = Family::default();
        registry.register(
            "manent_notification_failures",
            "Notification attempts that failed (they are retried)",
            notify_failed.clone(),
        );
        Metrics {
            registry,
            target_seconds,
            step_retries,
            plugin_starts,
            plugin_crashes,
            plugin_restarts,
            workflows,
            hook_seconds,
            canary_set,
            canary_actual,
            log_dropped,
            notify_failed,
            notify_sent,
        }
    }

    /// The exposition, in the Prometheus text format (0.0.4).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry);
        out
    }

    /// A target's deploy call ended after `seconds`.
    pub fn target_deployed(&self, labels: TargetLabels, seconds: f64) {
        self.target_seconds.get_or_create(&labels).observe(seconds);
    }

    /// A step of family `step` is retried.
    pub fn step_retried(&self, step: &str) {
        self.step_retries
            .get_or_create(&StepLabels { step: step.into() })
            .inc();
    }

    /// Plugin `plugin`'s process started (`again`: after the previous one exited).
    pub fn plugin_started(&self, plugin: &str, again: bool) {
        let l = PluginLabels {
            plugin: plugin.into(),
        };
        self.plugin_starts.get_or_create(&l).inc();
        if again {
            self.plugin_restarts.get_or_create(&l).inc();
        }
    }

    /// Plugin `plugin`'s process exited unsuccessfully.
    pub fn plugin_crashed(&self, plugin: &str) {
        self.plugin_crashes
            .get_or_create(&PluginLabels {
                plugin: plugin.into(),
            })
            .inc();
    }

    /// A hook run ended.
    pub fn hook_ran(&self, subject: (&str, &str), event: &str, hook: &str, ok: bool, secs: f64) {
        let l = HookLabels {
            application: subject.0.into(),
            environment: subject.1.into(),
            event: event.into(),
            hook: hook.into(),
            status: if ok { "passed" } else { "failed" }.into(),
        };
        self.hook_seconds.get_or_create(&l).observe(secs);
    }

    /// A canary's weights: the one its step set, and (when the router reports one) the actual.
    pub fn canary_weights(&self, subject: (&str, &str), set: u32, actual: Option<u32>) {
        let l = WeightLabels {
            application: subject.0.into(),
            environment: subject.1.into(),
        };
        self.canary_set.get_or_create(&l).set(i64::from(set));
        if let Some(a) = actual {
            self.canary_actual.get_or_create(&l).set(i64::from(a));
        }
    }

    /// The weight the router reports for a canary's candidate, measured while it waits.
    pub fn canary_actual(&self, subject: (&str, &str), actual: u32) {
        let l = WeightLabels {
            application: subject.0.into(),
            environment: subject.1.into(),
        };
        self.canary_actual.get_or_create(&l).set(i64::from(actual));
    }

    /// `n` log lines were not stored (`store`) or not shown to a reader (`subscriber`), or `n`
    /// runtime events were missed by the JSON log and the step counts (`events`).
    pub fn log_lines_dropped(&self, sink: &str, n: u64) {
        self.log_dropped
            .get_or_create(&DroppedLabels { sink: sink.into() })
            .inc_by(n);
    }

    /// A notification to `receiver` was accepted (`ok`) or failed.
    pub fn notification(&self, receiver: &str, ok: bool) {
        let l = NotifyLabels {
            receiver: receiver.into(),
        };
        if ok {
            self.notify_sent.get_or_create(&l).inc();
        } else {
            self.notify_failed.get_or_create(&l).inc();
        }
    }

    /// Sets the workflow gauges from the database's counts (at every scrape).
    async fn refresh_workflows(&self, db: &dyn WorkflowCounts) {
        let Some(counts) = db.workflow_counts().await else {
            return;
        };
        self.workflows.clear();
        for (kind, state, n) in counts {
            self.workflows
                .get_or_create(&WorkflowLabels { kind, state })
                .set(n);
        }
    }
}

/// Where the workflow gauges come from at each scrape: the database's (kind, state, count)
/// rows, or None when it cannot be read (the gauges keep their last values).
#[async_trait::async_trait]
pub trait WorkflowCounts: Send + Sync {
    /// The counts now.
    async fn workflow_counts(&self) -> Option<Vec<(String, String, i64)>>;
}

/// The process's metrics.
pub fn get() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

/// Why the metrics endpoint could not start.
#[derive(Debug, thiserror::Error)]
#[error(
    "metrics.listen {addr}: cannot listen there ({source}); pick a free port in manent.yml, or \
     remove `metrics:` to run without metrics"
)]
pub struct ServeError {
    addr: std::net::SocketAddr,
    source: std::io::Error,
}

/// Serves `GET /metrics` (any path, in fact) on `addr` until the returned task is aborted.
pub async fn serve(
    addr: std::net::SocketAddr,
    db: Arc<dyn WorkflowCounts>,
) -> Result<tokio::task::JoinHandle<()>, ServeError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError { addr, source })?;
    Ok(tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                // Out of descriptors, say: wait a little rather than spin.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            };
            let db = db.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let db = db.clone();
                    async move { respond(&req, db.as_ref()).await }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                // A scraper that connects and says nothing is dropped after a while.
                let _ = tokio::time::timeout(
                    std::time::Duration::from_secs(30),
                    hyper::server::conn::http1::Builder::new().serve_connection(io, service),
                )
                .await;
            });
        }
    }))
}

async fn respond(
    req: &hyper::Request<hyper::body::Incoming>,
    db: &dyn WorkflowCounts,
) -> Result<hyper::Response<http_body_util::Full<bytes::Bytes>>, std::convert::Infallible> {
    let (status, content_type, body) = if req.method() != hyper::Method::GET {
        (405, "text/plain", "GET /metrics\n".to_owned())
    } else if req.uri().path() != "/metrics" {
        (404, "text/plain", "manent serves GET /metrics\n".to_owned())
    } else {
        let m = get();
        m.refresh_workflows(db).await;
        (
            200,
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            m.encode(),
        )
    };
    let mut resp = hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from(body)));
    *resp.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or_default();
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    Ok(resp)
}
