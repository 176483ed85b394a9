//! An attached console follows the life of the engine it attached to: within a second of that
//! engine going away (its process gone, its lock released) the console takes the database over
//! and runs the engine itself — or, when another process was quicker, attaches to that one —
//! and says so. What it handed to the engine is watched until an engine claims it: past
//! [`CLAIM_BOUND_MS`] the console says why nothing took it (and that it will not start by
//! itself once this console is gone).

use super::{Actor, EngineMode, Level};
use crate::engine::{Engine, EngineError};
use crate::workflow::store::WorkflowStatus;
use crate::workflow::{Lease, LeaseError};

/// How often an attached console looks at the engine it attached to.
pub const CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// A deployment handed to another engine is claimed within this long, or the console says
/// why not.
pub const CLAIM_BOUND_MS: i64 = 5_000;

impl Actor {
    /// Attached: when the engine it attached to is gone, runs the engine here or attaches to
    /// the one that took the database. True when something changed.
    pub(super) async fn follow_engine(&mut self) -> bool {
        if self.engine.is_some() {
            return self.silent_holder().await;
        }
        let db = self.config.database.clone();
        let gone = match self.attached_to {
            // It was starting when this console opened: it is known once it stamped the lock.
            None => match Lease::stamp(&db) {
                Some((pid, host)) if self.alive(pid) => {
                    self.attached_to = Some(pid);
                    self.mode = EngineMode::Attached {
                        holder: format!("pid {pid} on {host}"),
                    };
                    return true;
                }
                _ => true,
            },
            Some(pid) => !self.alive(pid),
        };
        if !gone {
            return self.silent_holder().await;
        }
        let was = self.attached_to.map_or_else(
            || "an engine that was starting".to_owned(),
            |p| format!("pid {p}"),
        );
        let at = clock(crate::sys::now_ms());
        match Engine::start(&self.config).await {
            Ok(e) => {
                let resumed = e.recovered().len();
                self.store = e.store().clone();
                self.events = Some(e.events());
                self.engine = Some(e);
                self.mode = EngineMode::InProcess;
                self.attached_to = None;
                // An engine that ended (its console quit, a worker stopped) is the usual way;
                // only work it left unfinished is worth a warning.
                let text = format!(
                    "the engine this console was attached to ({was}) ended at {at}: this \
                     console runs the engine now{}",
                    if resumed > 0 {
                        format!(" and resumed {resumed} deployment(s) it had left")
                    } else {
                        String::new()
                    }
                );
                self.engine_note = Some(text.clone());
                self.notice(
                    if resumed > 0 {
                        Level::Warn
                    } else {
                        Level::Info
                    },
                    text,
                );
                // What it handed over is its own to start now.
                for (id, _, _) in std::mem::take(&mut self.submitted) {
                    if let Some(e) = &self.engine
                        && let Err(err) = e.run(&id).await
                    {
                        self.notice_about(
                            Level::Error,
                            Some(&id),
                            format!("{id} could not be started: {err}"),
                        );
                    }
                }
            }
            Err(EngineError::Lease(LeaseError::Held { pid, host, .. })) => {
                self.attached_to = pid.parse().ok();
                self.mode = EngineMode::Attached {
                    holder: format!("pid {pid} on {host}"),
                };
                let text = format!(
                    "the engine this console was attached to ({was}) went away at {at}: \
                     attached to the engine of pid {pid} on {host}, which took the database"
                );
                self.engine_note = Some(text.clone());
                self.notice(Level::Warn, text);
            }
            Err(EngineError::Lease(LeaseError::Starting { .. })) => {
                // Another engine is taking the database this very moment: known next check.
                self.attached_to = None;
            }
            Err(e) => {
                let text = format!(
                    "the engine this console was attached to ({was}) went away at {at}, and \
                     none can run here: {e}"
                );
                if self.engine_note.as_deref() != Some(text.as_str()) {
                    self.engine_note = Some(text.clone());
                    self.notice(Level::Error, text);
                }
            }
        }
        true
    }

    /// Whether process `pid` still holds the database (by the kernel's lock list where it can
    /// be read, else by the process existing).
    fn alive(&self, pid: u32) -> bool {
        Lease::held_by(&self.config.database, pid).unwrap_or_else(|| crate::sys::process_alive(pid))
    }

    /// On a shared database: whether the engine this console relies on renews its lease. A
    /// holder that stopped renewing (stopped, hung) is said in the header. True when the note
    /// changed.
    async fn silent_holder(&mut self) -> bool {
        let Some(pid) = self.attached_to else {
            return false;
        };
        if self.config.postgres.is_none() {
            return false;
        }
        let lease = self.config.engine.lease_ms();
        let engines = self.store.engines().await.unwrap_or_default();
        let host = crate::sys::hostname();
        let note = engines
            .iter()
            .find(|e| e.pid == pid && e.host == host)
            .filter(|e| e.age_ms >= lease)
            .map(|e| {
                format!(
                    "the engine of pid {pid} has not renewed its lease for {}s (stopped or hung?): \
                     what it runs waits, and another engine takes it over",
                    e.age_ms / 1000
                )
            });
        let changed = note != self.engine_note;
        self.engine_note = note;
        changed
    }

    /// What this console handed to another engine and no engine has claimed yet: past the
    /// bound, said once with why. True when something changed.
    pub(super) async fn watch_claims(&mut self) -> bool {
        if self.submitted.is_empty() {
            return false;
        }
        let now = crate::sys::now_ms();
        let mut changed = false;
        let mut keep = Vec::new();
        for (id, until, said) in std::mem::take(&mut self.submitted) {
            let row = self.store.workflow(&id).await.ok().flatten();
            if row
                .as_ref()
                .is_some_and(|r| r.status == WorkflowStatus::Cancelled)
            {
                let parked = self
                    .store
                    .events(&id)
                    .await
                    .ok()
                    .is_some_and(|e| e.contains_key(crate::workflow::store::NEVER_STARTED));
                if parked {
                    self.notice_about(
                        Level::Error,
                        Some(&id),
                        format!(
                            "{id} was not started: an engine that could not see this console \
                             took it for gone and left the deploy for an operator (Space on it, \
                             or `manent resume {id}`, starts it)"
                        ),
                    );
                }
            }
            if row.is_none_or(|r| r.status != WorkflowStatus::Enqueued) {
                changed = true;
                continue;
            }
            if now > until && !said {
                let why = self
                    .engine_note
                    .clone()
                    .unwrap_or_else(|| match self.attached_to {
                        Some(pid) => format!(
                            "the engine of pid {pid} holds the database but has not taken it (busy \
                         starting plugins, stopped with SIGSTOP, or another manent version)"
                        ),
                        None => "no engine holds the database".to_owned(),
                    });
                self.notice_about(
                    Level::Error,
                    Some(&id),
                    format!(
                        "{id} has not been claimed by an engine after {}s: {why}. It will not \
                         start by itself once this console is gone: it then waits in the inbox \
                         as never started (`manent resume {id}` starts it)",
                        CLAIM_BOUND_MS / 1000
                    ),
                );
                changed = true;
                keep.push((id, until, true));
            } else {
                keep.push((id, until, said));
            }
        }
        self.submitted = keep;
        changed
    }
}

/// `HH:MM:SS` (UTC) of an epoch-ms time.
fn clock(ms: i64) -> String {
    let s = ms.max(0) / 1000 % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, (s % 3600) / 60, s % 60)
}
