//! What a shell completes besides the command line's own words: applications, environments
//! and deployment ids, read from the configuration and the database the command
//! being typed would use (`--config` on that line, else `MANENT_CONFIG`, else `manent.yml`).
//! The shell asks the binary itself (`COMPLETE=bash manent -- …`, clap_complete's protocol),
//! so what is offered is what this manent reads. Nothing is written: the configuration is
//! read as every verb reads it (one another user could have written gives nothing), the
//! database opened read-only; the whole is bounded to [`WITHIN`], after which nothing is offered
//! rather than a shell kept waiting.

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use clap_complete::CompletionCandidate;

/// How long a completion may take: past it the shell gets nothing.
pub const WITHIN: Duration = Duration::from_millis(80);

/// The configuration the command being completed names.
fn config_path() -> PathBuf {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut given = None;
    for (i, a) in args.iter().enumerate() {
        let a = a.to_string_lossy();
        if let Some(v) = a.strip_prefix("--config=") {
            given = Some(PathBuf::from(v));
        } else if a == "--config"
            && let Some(v) = args.get(i + 1)
        {
            given = Some(PathBuf::from(v));
        }
    }
    given
        .or_else(|| std::env::var_os("MANENT_CONFIG").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("manent.yml"))
}

/// `read` run off this thread, given up after [`WITHIN`].
fn bounded(
    read: impl FnOnce() -> Vec<CompletionCandidate> + Send + 'static,
) -> Vec<CompletionCandidate> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(read());
    });
    rx.recv_timeout(WITHIN).unwrap_or_default()
}

/// Only words a shell takes as they are (ids and names are of these): anything else read from
/// a file is not offered.
fn plain(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn config(descriptors: bool) -> Option<crate::config::Config> {
    let path = config_path();
    let catalog = crate::plugin::catalog();
    let mut c = crate::config::Config::load_settings(&path, &catalog).ok()?;
    if descriptors {
        c.load_descriptors();
    }
    Some(c)
}

/// The applications of the configuration's descriptors, with their environments as help.
pub fn applications() -> Vec<CompletionCandidate> {
    bounded(|| {
        let Some(c) = config(true) else {
            return Vec::new();
        };
        c.descriptors
            .iter()
            .filter(|d| plain(&d.spec.application))
            .map(|d| {
                let envs: Vec<&str> = d.spec.environments.keys().map(String::as_str).collect();
                CompletionCandidate::new(d.spec.application.clone())
                    .help(Some(envs.join(", ").into()))
            })
            .collect()
    })
}

/// Every environment of the configuration's descriptors, with the applications that have it.
pub fn environments() -> Vec<CompletionCandidate> {
    bounded(|| {
        let Some(c) = config(true) else {
            return Vec::new();
        };
        let mut envs: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for d in &c.descriptors {
            for e in d.spec.environments.keys() {
                envs.entry(e.clone())
                    .or_default()
                    .push(d.spec.application.clone());
            }
        }
        envs.into_iter()
            .filter(|(e, _)| plain(e))
            .map(|(e, apps)| CompletionCandidate::new(e).help(Some(apps.join(", ").into())))
            .collect()
    })
}

/// Deployment ids, live ones first then the newest, with what each is (SQLite only: a shared
/// PostgreSQL is not asked on a keystroke).
pub fn deployments() -> Vec<CompletionCandidate> {
    bounded(|| {
        let Some(c) = config(false) else {
            return Vec::new();
        };
        if c.postgres.is_some() {
            return Vec::new();
        }
        let Ok(rows) = crate::workflow::sqlite::peek_recent(&c.database, 50) else {
            return Vec::new();
        };
        rows.into_iter()
            .filter(|(id, _, _)| plain(id))
            .map(|(id, status, subject)| {
                let live = matches!(status.as_str(), "ENQUEUED" | "PENDING");
                let what = format!(
                    "{}{}",
                    subject.unwrap_or_default(),
                    if live { " (live)" } else { "" }
                );
                CompletionCandidate::new(id).help(Some(what.into()))
            })
            .collect()
    })
}
