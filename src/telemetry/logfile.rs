//! The JSON log file for a SIEM (design/architecture.md "Observability"): one JSON object per line, in daily files
//! (`manent.YYYY-MM-DD.jsonl`, rotated by size too, at most `keep` of them and `max_total`
//! bytes in all: [`rolling`]), written by the file's own thread from a bounded queue
//! ([`queue`]): a slow disk never stalls a deploy. A flooding step is slowed first (the log
//! hub reports the queue congested and output readers wait); a line that still finds the
//! queue full is counted, and the file itself says "N lines were dropped between T1 and T2"
//! where they would have been. At exit the queue is drained for at most [`queue::DRAIN`];
//! what it could not write is said on stderr.
//!
//! Two kinds of line share it: the engine's own tracing events (through a layer the process's
//! subscriber carries from the start and the engine switches on), and every plugin and engine
//! log line the engine's log hub carries, with its original level, message and
//! attributes, plugin, deployment, target and moniker. Both pass the secret redactor.
//!
//! The directory and its files are the engine user's alone (0700/0600, or the shared group's),
//! as the database is: every line may quote a deploy command or a hook's output.

pub mod queue;
mod rolling;

use std::io::Write;
use std::sync::{OnceLock, RwLock};

use serde::Serialize;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{Filtered, LevelFilter};
use tracing_subscriber::registry::Registry;
use tracing_subscriber::reload;

use crate::redact::redact;

type FileLayer = Option<Box<dyn Layer<Registry> + Send + Sync>>;

/// The switch for the engine's events: off until an engine opens the file.
static EVENTS: OnceLock<reload::Handle<FileLayer, Registry>> = OnceLock::new();
/// Where log lines are written, while a file is open.
static LINES: RwLock<Option<Redacting>> = RwLock::new(None);

/// The layer a process's subscriber starts with (put it first: it is typed for the registry).
/// The file's level filter wraps the switch, not the layer switched in: a per-layer filter
/// gets its id when the subscriber is built, and one reloaded in later has none (tracing
/// panics on it, and the log path would die with the deploy going on).
pub fn layer() -> Filtered<reload::Layer<FileLayer, Registry>, LevelFilter, Registry> {
    let (layer, handle) = reload::Layer::new(None);
    let _ = EVENTS.set(handle);
    layer.with_filter(LevelFilter::INFO)
}

/// Why the log file could not be opened.
#[derive(Debug, thiserror::Error)]
#[error(
    "log_file.dir {dir}: cannot write the JSON log file there ({reason}); make the directory \
     writable, or remove `log_file:` from manent.yml"
)]
pub struct LogFileError {
    dir: String,
    reason: String,
}

/// The open file; dropping it stops both kinds of line and drains what is queued (for at most
/// [`queue::DRAIN`], saying on stderr what it could not write).
#[must_use = "the file stays open while this lives"]
pub struct Open {
    writer: Option<queue::Writer>,
}

impl std::fmt::Debug for Open {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("logfile::Open")
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Ok(mut w) = LINES.write() {
            *w = None;
        }
        if let Some(h) = EVENTS.get() {
            let _ = h.reload(None);
        }
        if let Some(w) = self.writer.take() {
            let left = w.close();
            if let Some(said) = left.said() {
                let _ = writeln!(std::io::stderr(), "manent: {said}");
            }
        }
    }
}

/// Opens the daily files in `dir`, keeping at most `keep`, under `trust`'s file rules.
pub fn open(
    cfg: &crate::config::LogFile,
    trust: &crate::sys::files::Trust,
) -> Result<Open, LogFileError> {
    let fail = |reason: String| LogFileError {
        dir: cfg.dir.display().to_string(),
        reason,
    };
    trust
        .ensure_log_dir(&cfg.dir)
        .map_err(|e| fail(e.to_string()))?;
    let appender = rolling::Rolling::open(
        &cfg.dir,
        cfg.keep,
        cfg.max_size,
        cfg.max_total,
        trust.clone(),
    )
    .map_err(|e| fail(e.to_string()))?;
    let (queue, thread) =
        queue::Writer::start(appender, &cfg.dir).map_err(|e| fail(e.to_string()))?;
    let writer = Redacting(queue);
    if let Some(h) = EVENTS.get() {
        let events = tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_writer(writer.clone());
        let _ = h.reload(Some(
            Box::new(events) as Box<dyn Layer<Registry> + Send + Sync>
        ));
    }
    if let Ok(mut w) = LINES.write() {
        *w = Some(writer);
    }
    Ok(Open {
        writer: Some(thread),
    })
}

/// One log line as the file carries it.
#[derive(Serialize)]
pub struct Line<'a> {
    pub timestamp: String,
    pub level: &'a str,
    /// `plugin` for a plugin's own line, `engine` for manent's.
    pub kind: &'static str,
    pub source: &'a str,
    pub message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deployment: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moniker: Option<&'a str>,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub attrs: &'a std::collections::BTreeMap<String, serde_json::Value>,
}

/// Whether a file is open: a caller skips building lines nobody writes.
pub fn is_open() -> bool {
    LINES.read().is_ok_and(|w| w.is_some())
}

/// The open file's queue is nearly full while its thread is writing: output readers wait
/// rather than the file dropping lines.
pub fn congested() -> bool {
    LINES
        .read()
        .is_ok_and(|w| w.as_ref().is_some_and(|w| w.0.congested()))
}

/// Writes `line` (already redacted) when a file is open; never waits.
pub fn write(line: &Line) {
    write_raw(line);
}

/// Writes one engine event when a file is open (its message is redacted here); never waits.
pub fn write_event(event: &EventLine) {
    write_raw(event);
}

/// The file's writer, with every line passed through the secret redactor.
#[derive(Clone)]
struct Redacting(queue::Sender);

impl Write for Redacting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // The JSON layer writes each event whole, in one call: one call is one line.
        let line = match std::str::from_utf8(buf).map(redact) {
            Ok(std::borrow::Cow::Owned(clean)) => clean.into_bytes(),
            _ => buf.to_vec(),
        };
        self.0.line(line);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Redacting {
    type Writer = Redacting;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// One engine event as the file carries it.
#[derive(Serialize)]
pub struct EventLine<'a> {
    pub timestamp: String,
    pub level: &'static str,
    pub kind: &'static str,
    /// `workflow.claimed`, `step.started`, `step.retrying`, `step.finished`, `workflow.ended`…
    pub event: &'static str,
    pub deployment: &'a str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
}

fn write_raw(record: &impl Serialize) {
    let Ok(guard) = LINES.read() else {
        return;
    };
    let Some(writer) = guard.as_ref() else {
        return;
    };
    if let Ok(mut text) = serde_json::to_vec(record) {
        text.push(b'\n');
        writer.0.line(text);
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    #[allow(clippy::unwrap_used, reason = "test code")]
    fn the_engines_events_reach_the_file_from_any_thread() {
        let subscriber = tracing_subscriber::registry().with(super::layer());
        let dir = tempfile::tempdir().unwrap();
        tracing::subscriber::with_default(subscriber, || {
            let open = super::open(
                &crate::config::LogFile {
                    dir: dir.path().join("logs"),
                    keep: 2,
                    max_size: 1 << 20,
                    max_total: 4 << 20,
                },
                &crate::sys::files::Trust::private(),
            )
            .unwrap();
            tracing::warn!("first from the test's thread");
            tracing::info!("an info line");
            tracing::debug!("a debug line, below the file's level");
            drop(open);
        });
        let mut text = String::new();
        for e in std::fs::read_dir(dir.path().join("logs")).unwrap() {
            text.push_str(&std::fs::read_to_string(e.unwrap().path()).unwrap());
        }
        assert!(text.contains("first from the test's thread"), "{text}");
        assert!(text.contains("an info line"), "{text}");
        assert!(!text.contains("a debug line"), "{text}");
    }
}
