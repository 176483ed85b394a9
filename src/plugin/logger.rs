//! The logger a plugin gets from its `Factory`: lines with a level, a message and attributes,
//! tagged with the plugin and, where present, the deployment and target. Built-in plugins write
//! to the engine's log; the SDK writes the same lines as hclog JSON on stderr.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::secrets::redact;
use super::types::Target;

/// Severity, as hclog names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Very detailed.
    Trace,
    /// For debugging.
    Debug,
    /// Normal progress.
    Info,
    /// Something to look at.
    Warn,
    /// Something failed.
    Error,
}

impl Level {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }

    /// Parses hclog's names (`warning` too), case-insensitively.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_lowercase().as_str() {
            "trace" => Level::Trace,
            "debug" => Level::Debug,
            "info" => Level::Info,
            "warn" | "warning" => Level::Warn,
            "error" | "err" => Level::Error,
            _ => return None,
        })
    }
}

/// One log line from the engine or a plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogLine {
    /// Epoch ms.
    pub at: i64,
    /// Severity.
    pub level: Level,
    /// `engine` or the plugin's name.
    pub source: String,
    /// The deployment it belongs to.
    pub deployment_id: Option<String>,
    /// The target it is about.
    pub target: Option<String>,
    /// That target's moniker, when known (`prod::web::exec::web-1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moniker: Option<String>,
    /// The message.
    pub message: String,
    /// Attributes, as the plugin logged them.
    pub attrs: BTreeMap<String, serde_json::Value>,
}

/// Where log lines go.
pub trait LogSink: Send + Sync {
    /// Takes one line; must not block.
    fn log(&self, line: LogLine);

    /// True while the sink's storage is behind but moving: a reader of a plugin's stderr then
    /// waits before reading on (the plugin's writes wait on its pipe) instead of passing lines
    /// the sink would have to leave unstored. Never true for a sink that is stuck: a plugin is
    /// not held up by a database outage.
    fn congested(&self) -> bool {
        false
    }
}

/// A sink that drops everything (tests, `validate`).
#[derive(Debug)]
pub struct Discard;

impl LogSink for Discard {
    fn log(&self, _line: LogLine) {}
}

/// A plugin's logger: cheap to clone, scoped with `for_request` / `for_target` / `with`.
#[derive(Clone)]
pub struct Logger {
    sink: Arc<dyn LogSink>,
    source: String,
    deployment_id: Option<String>,
    target: Option<String>,
    moniker: Option<String>,
    attrs: BTreeMap<String, serde_json::Value>,
}

impl std::fmt::Debug for Logger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Logger")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl Logger {
    /// A logger for `source` writing to `sink`.
    pub fn new(sink: Arc<dyn LogSink>, source: impl Into<String>) -> Self {
        Logger {
            sink,
            source: source.into(),
            deployment_id: None,
            target: None,
            moniker: None,
            attrs: BTreeMap::new(),
        }
    }

    /// A logger that drops everything.
    pub fn discard() -> Self {
        Logger::new(Arc::new(Discard), "discard")
    }

    /// The source name (plugin) lines are tagged with.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The same logger under another source name (`hook:migrate`).
    pub fn with_source(&self, source: impl Into<String>) -> Self {
        let mut l = self.clone();
        l.source = source.into();
        l
    }

    /// Tags lines with a deployment.
    pub fn for_deployment(&self, deployment_id: &str) -> Self {
        let mut l = self.clone();
        l.deployment_id = Some(deployment_id.to_owned());
        l
    }

    /// Tags lines with a target: lines of targets running in parallel interleave.
    pub fn for_target(&self, target: &Target) -> Self {
        let mut l = self.clone();
        l.target = Some(target.name().to_owned());
        l.moniker = Some(target.moniker.to_string());
        l
    }

    /// Adds an attribute to every line.
    pub fn with(&self, key: &str, value: impl Into<serde_json::Value>) -> Self {
        let mut l = self.clone();
        l.attrs.insert(key.to_owned(), value.into());
        l
    }

    /// Logs `message` at `level` with extra attributes.
    pub fn log(&self, level: Level, message: &str, attrs: &[(&str, serde_json::Value)]) {
        let mut all = self.attrs.clone();
        for (k, v) in attrs {
            all.insert((*k).to_owned(), v.clone());
        }
        self.sink.log(LogLine {
            at: crate::sys::now_ms(),
            level,
            source: self.source.clone(),
            deployment_id: self.deployment_id.clone(),
            target: self.target.clone(),
            moniker: self.moniker.clone(),
            message: redact(message).into_owned(),
            attrs: all,
        });
    }

    /// Waits while the sink is congested: a flooding command waits on its pipe instead of its
    /// lines being dropped. Bounded: a sink that stops moving is not congested.
    pub async fn wait_for_room(&self) {
        while self.sink.congested() {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }

    /// Logs at trace level.
    pub fn trace(&self, message: &str) {
        self.log(Level::Trace, message, &[]);
    }

    /// Logs at debug level.
    pub fn debug(&self, message: &str) {
        self.log(Level::Debug, message, &[]);
    }

    /// Logs at info level.
    pub fn info(&self, message: &str) {
        self.log(Level::Info, message, &[]);
    }

    /// Logs at warn level.
    pub fn warn(&self, message: &str) {
        self.log(Level::Warn, message, &[]);
    }

    /// Logs at error level.
    pub fn error(&self, message: &str) {
        self.log(Level::Error, message, &[]);
    }
}
