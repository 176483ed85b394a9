//! The conformance protocol every manent SDK honours (docs/plugins.md, "The conformance protocol"): only
//! with `MANENT_PLUGIN_CONFORMANCE=1` in the plugin's environment — `manent plugin test` sets it,
//! the engine never does — a request whose params carry `manent_conformance` is answered by the
//! SDK itself, never by the plugin's code: a Validate refusal, a line on stdout, a log line at
//! every level, a secret read through the broker, a slow call to cancel, a chosen failure.

use std::io::Write;

use sha2::{Digest, Sha256};
use tonic::Status;

use super::super::proto::v1;
use crate::plugin::logger::{Level, Logger};
use crate::plugin::types::Request;

/// Set by the kit, never by the engine.
pub const ENV: &str = "MANENT_PLUGIN_CONFORMANCE";
/// The key in a request's params.
pub const KEY: &str = "manent_conformance";

type Probe = serde_json::Map<String, serde_json::Value>;

/// True when the conformance kit started this plugin.
pub fn enabled() -> bool {
    std::env::var(ENV).as_deref() == Ok("1")
}

/// The call's conformance probe, when the kit sent one to a plugin it started.
pub fn probe(params: &serde_json::Value) -> Option<&Probe> {
    if !enabled() {
        return None;
    }
    params.get(KEY)?.as_object()
}

/// Validate: `refuse` is refused as a bad request.
pub fn validate(probe: &Probe) -> Result<(), Status> {
    match probe.get("refuse").and_then(|v| v.as_str()) {
        Some(why) => Err(Status::invalid_argument(format!("conformance: {why}"))),
        None => Ok(()),
    }
}

/// Logs `conformance cancelled` when the call's future is dropped before it finished: tonic
/// drops a handler whose call the host cancelled.
struct OnCancel<'a> {
    log: &'a Logger,
    key: &'a str,
    done: bool,
}

impl Drop for OnCancel<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.log.log(
                Level::Warn,
                "conformance cancelled",
                &[("idempotency_key", self.key.into())],
            );
        }
    }
}

/// Deploy: print, log, secret, sleep, fail — in that order — then an `unchanged` answer.
pub async fn deploy(
    probe: &Probe,
    req: &Request,
    log: &Logger,
    plugin: &str,
) -> Result<v1::DeployResponse, Status> {
    if let Some(text) = probe.get("print").and_then(|v| v.as_str()) {
        // The ordinary print a careless plugin would use: the SDK has pointed stdout at stderr.
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{text}").and_then(|()| out.flush());
    }
    if probe.get("log").and_then(serde_json::Value::as_bool) == Some(true) {
        for level in [
            Level::Trace,
            Level::Debug,
            Level::Info,
            Level::Warn,
            Level::Error,
        ] {
            log.log(level, &format!("conformance level {}", level.as_str()), &[]);
        }
    }
    if let Some(name) = probe.get("secret").and_then(|v| v.as_str()) {
        let value = req.secrets.secret(name).await?;
        let digest = format!("{:x}", Sha256::digest(value.as_bytes()));
        log.log(
            Level::Info,
            "conformance secret",
            &[("sha256", digest.into())],
        );
    }
    if let Some(ms) = probe.get("sleep_ms").and_then(serde_json::Value::as_u64) {
        let mut guard = OnCancel {
            log,
            key: &req.idempotency_key,
            done: false,
        };
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        guard.done = true;
    }
    match probe.get("fail").and_then(|v| v.as_str()) {
        Some("permanent") => return Err(Status::aborted("conformance: permanent failure")),
        Some("retryable") => return Err(Status::unknown("conformance: retryable failure")),
        _ => {}
    }
    Ok(v1::DeployResponse {
        plugin: plugin.to_owned(),
        release: req.artifact.version.clone(),
        targets: req
            .targets
            .iter()
            .map(|t| v1::TargetResult {
                host: t.host.clone(),
                status: "unchanged".into(),
                message: "conformance".into(),
                duration_ms: 0,
            })
            .collect(),
    })
}
