//! What the engine tells its observers beyond the console: every log line to the JSON log
//! file, and the workflow runtime's events to the file and to the metrics (a retried step is
//! counted from the event the kernel broadcasts, not by the kernel itself). The telemetry layer
//! below writes and serves; this is where the engine's types become its records.

use std::sync::Arc;

use tokio::sync::broadcast::{self, error::RecvError};

use super::LogLine;
use crate::deploy::records::Db;
use crate::redact::redact;
use crate::telemetry::logfile::{self, EventLine, Line};
use crate::telemetry::metrics;
use crate::workflow::{RuntimeEvent as R, StepEvent as S};

/// Writes `line` (already redacted by the hub) to the JSON log file, when one is open.
pub(super) fn log_line(line: &LogLine) {
    if !logfile::is_open() {
        return;
    }
    let at = std::time::UNIX_EPOCH
        + std::time::Duration::from_millis(u64::try_from(line.at).unwrap_or(0));
    let engine = line.source == "engine" || line.source.starts_with("hook:");
    logfile::write(&Line {
        timestamp: humantime::format_rfc3339_millis(at).to_string(),
        level: line.level.as_str(),
        kind: if engine { "engine" } else { "plugin" },
        source: &line.source,
        message: &line.message,
        deployment: line.deployment_id.as_deref(),
        target: line.target.as_deref(),
        moniker: line.moniker.as_deref(),
        attrs: &line.attrs,
    });
}

/// Counts retried steps in the metrics and, with `log_file`, writes the runtime's events
/// (claims, each step's attempts and results, ends) to the JSON log; the task ends with the
/// runtime's channel.
pub(super) fn spawn_events(
    mut events: broadcast::Receiver<crate::workflow::RuntimeEvent>,
    log_file: bool,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let e = match events.recv().await {
                Ok(e) => e,
                Err(RecvError::Lagged(n)) => {
                    // Missed by the file (if one is open) and by the retried-step count alike:
                    // said, so a low count is not taken for the truth.
                    metrics::get().log_lines_dropped("events", n);
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            if let R::Step {
                event: S::Retrying { name, .. },
                ..
            } = &e
            {
                metrics::get().step_retried(name.split(':').next().unwrap_or(name));
            }
            if log_file && let Some(line) = event_line(&e) {
                logfile::write_event(&line);
            }
        }
    })
}

/// One runtime event as the JSON log carries it; None for what it leaves out (replayed steps).
fn event_line(e: &crate::workflow::RuntimeEvent) -> Option<EventLine<'_>> {
    let (level, event, deployment, message, step, attempt) = match e {
        R::Claimed {
            workflow_id,
            name,
            recovery_attempt,
        } => (
            "info",
            "workflow.claimed",
            workflow_id,
            if *recovery_attempt > 0 {
                format!("{name} resumed (recovery {recovery_attempt})")
            } else {
                format!("{name} started")
            },
            None,
            None,
        ),
        R::Ended {
            workflow_id,
            status,
            reason,
        } => (
            "info",
            "workflow.ended",
            workflow_id,
            match status {
                Some(s) => format!("ended {}: {reason}", s.as_str()),
                None => format!("stopped running here: {reason}"),
            },
            None,
            None,
        ),
        R::DeadLettered { workflow_id } => (
            "error",
            "workflow.dead_lettered",
            workflow_id,
            "too many runs crashed; it waits for an operator's resume".to_owned(),
            None,
            None,
        ),
        R::Step { workflow_id, event } => match event {
            S::Started { name, attempt, .. } => (
                "debug",
                "step.started",
                workflow_id,
                format!("{name} attempt {attempt}"),
                Some(name.as_str()),
                Some(*attempt),
            ),
            S::Retrying {
                name,
                attempt,
                error,
                delay,
                ..
            } => (
                "warn",
                "step.retrying",
                workflow_id,
                format!(
                    "{name} attempt {attempt} failed ({error}); again in {}",
                    humantime::format_duration(*delay)
                ),
                Some(name.as_str()),
                Some(*attempt),
            ),
            S::Finished {
                name,
                failure,
                replayed: false,
                ..
            } => match failure {
                None => (
                    "info",
                    "step.finished",
                    workflow_id,
                    format!("{name} done"),
                    Some(name.as_str()),
                    None,
                ),
                Some(f) => (
                    "error",
                    "step.failed",
                    workflow_id,
                    format!("{name} failed after {} attempts: {}", f.attempts, f.message),
                    Some(name.as_str()),
                    Some(f.attempts),
                ),
            },
            S::StoreDegraded { error, retries } => (
                "error",
                "store.degraded",
                workflow_id,
                format!("the database refuses writes ({error}); retry {retries}"),
                None,
                None,
            ),
            S::StoreRecovered => (
                "info",
                "store.recovered",
                workflow_id,
                "the database takes writes again".to_owned(),
                None,
                None,
            ),
            S::Parked { waiting } => (
                "info",
                "workflow.parked",
                workflow_id,
                if *waiting {
                    "waits for an operator".to_owned()
                } else {
                    "waits for a timer".to_owned()
                },
                None,
                None,
            ),
            S::Finished { replayed: true, .. } | S::Published => return None,
        },
    };
    Some(EventLine {
        timestamp: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        level,
        kind: "engine",
        event,
        deployment,
        message: redact(&message).into_owned(),
        step,
        attempt,
    })
}

/// The workflow gauges' counts, read from the database at each scrape.
pub(super) struct StoreCounts(pub(super) Arc<dyn Db>);

#[async_trait::async_trait]
impl metrics::WorkflowCounts for StoreCounts {
    async fn workflow_counts(&self) -> Option<Vec<(String, String, i64)>> {
        self.0.workflow_counts().await.ok()
    }
}
