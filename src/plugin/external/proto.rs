//! The generated protobuf types, and their conversions to and from the contract types. Nothing
//! outside `plugin::external` sees a generated type.

use std::collections::BTreeMap;

use tonic::{Code, Status};

use crate::moniker::Moniker;
use crate::plugin::error::PluginError;
use crate::plugin::secrets::Secrets;
use crate::plugin::types::{
    Artifact, DeployResult, Pool, Release, Request, Routing, RoutingState, SlotTraffic, Target,
    TargetRelease, TargetResult, TargetStatus, Traffic, TrafficInterval,
};

/// `manent.plugin.v1`
#[allow(
    clippy::all,
    clippy::unwrap_used,
    missing_docs,
    reason = "generated code"
)]
pub mod v1 {
    tonic::include_proto!("manent.plugin.v1");
}

/// go-plugin's internal services (`plugin`).
#[allow(
    clippy::all,
    clippy::unwrap_used,
    missing_docs,
    reason = "generated code"
)]
pub mod goplugin {
    tonic::include_proto!("plugin");
}

impl From<&Artifact> for v1::Artifact {
    fn from(a: &Artifact) -> Self {
        v1::Artifact {
            r#type: a.kind.clone(),
            name: a.name.clone(),
            version: a.version.clone(),
            uri: a.uri.clone(),
            sha256: a.sha256.clone(),
        }
    }
}

impl From<v1::Artifact> for Artifact {
    fn from(a: v1::Artifact) -> Self {
        Artifact {
            kind: a.r#type,
            name: a.name,
            version: a.version,
            uri: a.uri,
            sha256: a.sha256,
        }
    }
}

/// A request on the wire; `broker_id` is where the call's Secrets service is (0: none).
pub fn request_to_wire(req: &Request, broker_id: u32) -> v1::DeployRequest {
    v1::DeployRequest {
        deployment_id: req.deployment_id.clone(),
        application: req.application.clone(),
        environment: req.environment.clone(),
        artifact: Some((&req.artifact).into()),
        targets: req
            .targets
            .iter()
            .map(|t| v1::Target {
                host: t.host.clone(),
                moniker: t.moniker.to_string(),
                labels: t.labels.clone().into_iter().collect(),
            })
            .collect(),
        params_json: serde_json::to_vec(&req.params).unwrap_or_default(),
        secrets_broker_id: broker_id,
        parallelism: req.parallelism,
        traffic: req
            .traffic
            .as_ref()
            .map(|t| serde_json::to_vec(t).unwrap_or_default())
            .unwrap_or_default(),
        idempotency_key: req.idempotency_key.clone(),
        attempt: req.attempt,
        routing: req.routing.as_ref().map(routing_to_wire),
    }
}

fn pool_to_wire(p: &Pool) -> v1::Pool {
    v1::Pool {
        slot: p.slot.clone(),
        version: p.version.clone(),
        addresses: p.addresses.clone(),
    }
}

fn pool_from_wire(p: Option<v1::Pool>) -> Pool {
    let p = p.unwrap_or_default();
    Pool {
        slot: p.slot,
        version: p.version,
        addresses: p.addresses,
    }
}

/// A routing on the wire.
pub fn routing_to_wire(r: &Routing) -> v1::Routing {
    v1::Routing {
        stable: Some(pool_to_wire(&r.stable)),
        candidate: Some(pool_to_wire(&r.candidate)),
        weight: r.weight,
        testers: r.testers,
        scale: r.scale,
        retired: r.retired,
    }
}

/// A routing from the wire (a scale of 0 from a peer that does not set it is 100).
pub fn routing_from_wire(r: v1::Routing) -> Routing {
    Routing {
        stable: pool_from_wire(r.stable),
        candidate: pool_from_wire(r.candidate),
        weight: r.weight,
        testers: r.testers,
        scale: if r.scale == 0 { 100 } else { r.scale },
        retired: r.retired,
    }
}

/// A routing state on the wire.
pub fn routing_state_to_wire(s: &RoutingState) -> v1::RoutingStateResponse {
    v1::RoutingStateResponse {
        routing: s.routing.as_ref().map(routing_to_wire),
        foreign: s.foreign.clone().unwrap_or_default(),
    }
}

/// A routing state from the wire.
pub fn routing_state_from_wire(s: v1::RoutingStateResponse) -> RoutingState {
    RoutingState {
        routing: s.routing.map(routing_from_wire),
        foreign: Some(s.foreign).filter(|f| !f.is_empty()),
    }
}

/// Observed traffic on the wire.
pub fn traffic_to_wire(t: &Traffic) -> v1::TrafficResponse {
    v1::TrafficResponse {
        slots: t
            .slots
            .iter()
            .map(|s| v1::SlotTraffic {
                slot: s.slot.clone(),
                version: s.version.clone(),
                requests: s.requests,
                responses_2xx: s.responses[0],
                responses_3xx: s.responses[1],
                responses_4xx: s.responses[2],
                responses_5xx: s.responses[3],
                retried_away: s.retried_away,
                p50_ms: s.p50_ms.unwrap_or(0),
                p95_ms: s.p95_ms.unwrap_or(0),
                p99_ms: s.p99_ms.unwrap_or(0),
                intervals: s
                    .intervals
                    .iter()
                    .map(|i| v1::TrafficInterval {
                        from_ms: i.from_ms,
                        requests: i.requests,
                        errors: i.errors,
                        p99_ms: i.p99_ms.unwrap_or(0),
                    })
                    .collect(),
                no_latency: s.no_latency,
            })
            .collect(),
        from_ms: t.from_ms,
        window_ms: t.window_ms,
        source: t.source.clone(),
    }
}

/// Observed traffic from the wire.
pub fn traffic_from_wire(t: v1::TrafficResponse) -> Traffic {
    Traffic {
        slots: t
            .slots
            .into_iter()
            .map(|s| {
                // Quantiles of no request are none, and so are those of a router that measures
                // no latency (its zeros are not figures).
                let measured = s.requests > 0 && !s.no_latency;
                let q = |v: u32| measured.then_some(v);
                SlotTraffic {
                    slot: s.slot,
                    version: s.version,
                    requests: s.requests,
                    responses: [
                        s.responses_2xx,
                        s.responses_3xx,
                        s.responses_4xx,
                        s.responses_5xx,
                    ],
                    retried_away: s.retried_away,
                    p50_ms: q(s.p50_ms),
                    p95_ms: q(s.p95_ms),
                    p99_ms: q(s.p99_ms),
                    intervals: s
                        .intervals
                        .iter()
                        .map(|i| TrafficInterval {
                            from_ms: i.from_ms,
                            requests: i.requests,
                            errors: i.errors,
                            p99_ms: (i.requests > 0 && !s.no_latency).then_some(i.p99_ms),
                        })
                        .collect(),
                    no_latency: s.no_latency,
                }
            })
            .collect(),
        from_ms: t.from_ms,
        window_ms: t.window_ms,
        source: t.source,
        since_ms: None,
    }
}

/// A request from the wire, with the call's secrets.
pub fn request_from_wire(w: v1::DeployRequest, secrets: Secrets) -> Result<Request, Status> {
    let json = |b: &[u8], what: &str| -> Result<Option<serde_json::Value>, Status> {
        if b.is_empty() {
            return Ok(None);
        }
        serde_json::from_slice(b)
            .map(Some)
            .map_err(|e| Status::invalid_argument(format!("{what} is not JSON: {e}")))
    };
    let targets = w
        .targets
        .into_iter()
        .map(|t| {
            let moniker: Moniker =
                t.moniker
                    .parse()
                    .map_err(|e: crate::moniker::MonikerError| {
                        Status::invalid_argument(e.to_string())
                    })?;
            Ok(Target {
                host: t.host,
                moniker,
                labels: t.labels.into_iter().collect::<BTreeMap<_, _>>(),
            })
        })
        .collect::<Result<Vec<_>, Status>>()?;
    Ok(Request {
        deployment_id: w.deployment_id,
        application: w.application,
        environment: w.environment,
        artifact: w.artifact.map(Into::into).unwrap_or_default(),
        targets,
        params: json(&w.params_json, "params_json")?.unwrap_or(serde_json::Value::Null),
        secrets,
        parallelism: w.parallelism.max(1),
        traffic: json(&w.traffic, "traffic")?,
        routing: w.routing.map(routing_from_wire),
        idempotency_key: w.idempotency_key,
        attempt: w.attempt.max(1),
        processes: crate::plugin::Processes::none(),
    })
}

/// A result on the wire.
pub fn result_to_wire(r: DeployResult) -> v1::DeployResponse {
    v1::DeployResponse {
        plugin: r.plugin,
        targets: r
            .targets
            .into_iter()
            .map(|t| v1::TargetResult {
                host: t.host,
                status: t.status.as_str().into(),
                message: t.message,
                duration_ms: t.duration_ms,
            })
            .collect(),
        release: r.release,
    }
}

/// A result from the wire; an unknown status is the plugin's bug, reported as a failure.
pub fn result_from_wire(r: v1::DeployResponse) -> DeployResult {
    DeployResult {
        plugin: r.plugin,
        targets: r
            .targets
            .into_iter()
            .map(|t| {
                let status = TargetStatus::parse(&t.status);
                TargetResult {
                    host: t.host,
                    status: status.unwrap_or(TargetStatus::Failed),
                    message: match status {
                        Some(_) => t.message,
                        None => format!("unknown target status `{}`: {}", t.status, t.message),
                    },
                    duration_ms: t.duration_ms,
                }
            })
            .collect(),
        release: r.release,
    }
}

/// A release on the wire.
pub fn release_to_wire(r: &Release) -> v1::Release {
    v1::Release {
        version: r.version.clone(),
        artifact: Some((&r.artifact).into()),
        deployment_id: r.deployment_id.clone(),
    }
}

/// A release from the wire.
pub fn release_from_wire(r: v1::Release) -> Release {
    Release {
        version: r.version,
        artifact: r.artifact.map(Into::into).unwrap_or_default(),
        deployment_id: r.deployment_id,
    }
}

/// Current releases on the wire.
pub fn releases_to_wire(r: Vec<TargetRelease>) -> v1::CurrentReleaseResponse {
    v1::CurrentReleaseResponse {
        targets: r
            .into_iter()
            .map(|t| v1::TargetRelease {
                host: t.host,
                version: t.version,
            })
            .collect(),
    }
}

/// Current releases from the wire.
pub fn releases_from_wire(r: v1::CurrentReleaseResponse) -> Vec<TargetRelease> {
    r.targets
        .into_iter()
        .map(|t| TargetRelease {
            host: t.host,
            version: t.version,
        })
        .collect()
}

/// A plugin error as a gRPC status: `Permanent` is `ABORTED`, a missing optional call
/// `UNIMPLEMENTED`.
impl From<PluginError> for Status {
    fn from(e: PluginError) -> Status {
        match e {
            PluginError::Permanent(m) => Status::aborted(m),
            PluginError::Unimplemented(m) => Status::unimplemented(m),
            PluginError::Failed(m) => Status::unknown(m),
        }
    }
}

/// A gRPC status from a plugin as a plugin error.
pub fn status_to_error(plugin: &str, call: &str, s: &Status) -> PluginError {
    let msg = s.message();
    match s.code() {
        Code::Aborted => PluginError::Permanent(msg.to_owned()),
        Code::Unimplemented => {
            PluginError::Unimplemented(format!("plugin {plugin} does not implement {call}"))
        }
        Code::InvalidArgument | Code::FailedPrecondition => {
            PluginError::Permanent(format!("plugin {plugin}: {msg}"))
        }
        Code::Unavailable
        | Code::Cancelled
        | Code::DeadlineExceeded
        | Code::Internal
        | Code::Unknown
            if msg.is_empty() || msg.contains("transport") || msg.contains("connection") =>
        {
            PluginError::Failed(format!(
                "plugin {plugin} failed during {call}: {} {msg}",
                s.code()
            ))
        }
        _ => PluginError::Failed(msg.to_owned()),
    }
}
