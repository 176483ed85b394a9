//! What an engine keeps doing beside its runs: renewing its lease on a shared database and
//! claiming what lapsed engines left, fencing itself when its own lease lapses, watching that
//! its database is still there and takes writes, and pruning old log lines.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

use crate::deploy::records::Db;
use crate::plugin::{Logger, Processes};
use crate::workflow::store::TakenOver;
use crate::workflow::{Runtime, RuntimeEvent, StoreError};

/// Renews this engine's lease on a shared database every third of it, and claims what engines
/// whose lease expired left behind. A renewal that fails (the database is unreachable) is
/// retried at the next beat; the runs' own writes wait for the database meanwhile.
pub(super) fn spawn_heartbeat(
    runtime: Arc<Runtime>,
    store: Arc<dyn Db>,
    (processes, watchdog): (Processes, Option<Arc<super::watchdog::Watchdog>>),
    log: Logger,
    executor: &str,
    lease: Duration,
) -> tokio::task::JoinHandle<()> {
    let executor = executor.to_owned();
    // Often enough that a lapse is seen within half a second (before the grace others give it
    // is over), and a dead engine is taken over within its lease and 2s.
    let every = (lease / 3).clamp(Duration::from_millis(200), Duration::from_millis(500));
    tokio::spawn(async move {
        let mut beat = Heartbeat::new(lease);
        loop {
            // After a failure, again at once: the database coming back is the first thing
            // an engine tells it.
            let pause = if beat.failing {
                Duration::from_millis(200)
            } else {
                every
            };
            tokio::time::sleep(pause).await;
            if beat.lapsed() && !beat.fenced {
                fence(&runtime, &processes, &log, lease);
                beat.fenced = true;
            }
            // A renewal that hangs (a frozen database) counts as failed: it must not hold off
            // the lapse check.
            let renewed =
                tokio::time::timeout(every, store.heartbeat(&executor, beat.may_take_over()))
                    .await
                    .unwrap_or_else(|_| Err(StoreError::Transient("no answer".into())));
            let taken = match renewed {
                Ok(taken) => taken,
                Err(e) => {
                    if !beat.failing {
                        tracing::warn!(error = %e, "could not renew the engine's lease; trying again");
                    }
                    beat.failed();
                    continue;
                }
            };
            // A freeze during the renewal itself is a lapse too: fenced before anything goes on.
            if beat.lapsed() && !beat.fenced {
                fence(&runtime, &processes, &log, lease);
                beat.fenced = true;
            }
            if let Some(w) = &watchdog {
                w.beat();
            }
            if beat.renewed() {
                // Its lease is back: what no other engine took meanwhile goes on where it was.
                let (kept, cut) = runtime.after_lapse().await;
                for id in kept {
                    log.for_deployment(&id).warn(
                        "this engine renewed its lease and no other engine took this deployment \
                         meanwhile: it goes on where it was (a step that finished meanwhile is \
                         kept; one whose processes were killed is retried, the attempt counting \
                         against its retries)",
                    );
                }
                for id in cut {
                    log.for_deployment(&id).warn(
                        "this engine renewed its lease, but another engine took this deployment \
                         over meanwhile: this engine leaves it to that one",
                    );
                }
            }
            for TakenOver { id, from } in taken {
                // Said in the deployment's own log: whoever reads it later sees why another
                // engine finished it (who left it was read as it was taken).
                let why = from.map_or_else(
                    || "no engine had claimed it".to_owned(),
                    |f| format!("engine {f} stopped renewing its lease"),
                );
                log.for_deployment(&id).warn(&format!(
                    "engine {executor} takes this deployment over: {why}; it resumes from its \
                     last completed step"
                ));
                if let Err(e) = runtime.claim_and_spawn(&id).await {
                    tracing::warn!(workflow = %id, error = %e, "could not claim a deployment taken over");
                }
            }
        }
    })
}

/// What an engine's lease renewals have seen, by its own monotonic clock.
pub(super) struct Heartbeat {
    lease: Duration,
    /// The last renewal that committed.
    last_ok: std::time::Instant,
    /// Connected (renewals committing) without a break since: an engine takes others'
    /// workflows over only after a whole lease of it — an outage both saw moves nothing.
    connected_since: Option<std::time::Instant>,
    failing: bool,
    /// It fenced itself after a lapse (its runs start nothing) and has not renewed since.
    fenced: bool,
}

impl Heartbeat {
    fn new(lease: Duration) -> Heartbeat {
        let now = std::time::Instant::now();
        Heartbeat {
            lease,
            last_ok: now,
            connected_since: Some(now),
            failing: false,
            fenced: false,
        }
    }

    /// No renewal has committed for a whole lease: others may run this engine's workflows.
    fn lapsed(&self) -> bool {
        self.last_ok.elapsed() > self.lease
    }

    fn may_take_over(&self) -> bool {
        self.connected_since
            .is_some_and(|since| since.elapsed() >= self.lease)
    }

    fn failed(&mut self) {
        self.failing = true;
        self.connected_since = None;
    }

    /// A renewal committed; true when the engine had fenced itself and takes its runs back.
    fn renewed(&mut self) -> bool {
        let now = std::time::Instant::now();
        // A renewal after a lapse (a paused engine) starts a new connected stretch too.
        if self.failing || self.last_ok.elapsed() > self.lease {
            self.connected_since = Some(now);
        }
        self.last_ok = now;
        self.failing = false;
        std::mem::take(&mut self.fenced)
    }
}

/// This engine's lease lapsed: before anything else, every step process it started is killed
/// and no run starts another attempt — another engine may be running them now.
pub(super) fn fence(runtime: &Runtime, processes: &Processes, log: &Logger, lease: Duration) {
    let cut = runtime.fence();
    processes.kill_live();
    let said = format!(
        "this engine's lease lapsed (no renewal for over {}): its step processes were killed \
         and its runs start nothing more, so another engine can take them over without both \
         running a step; once it renews, what nobody took goes on where it was",
        humantime::format_duration(lease)
    );
    tracing::error!("{said}");
    for id in cut {
        log.for_deployment(&id).error(&said);
    }
}

/// Keeps what the database refuses, while it does: `disk full at PATH: …, retry N`.
pub(super) fn spawn_trouble_watch(
    mut events: broadcast::Receiver<RuntimeEvent>,
    trouble: Arc<std::sync::Mutex<Option<String>>>,
    db: String,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        use crate::workflow::StepEvent;
        loop {
            let event = match events.recv().await {
                Ok(e) => e,
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return,
            };
            let RuntimeEvent::Step { event, .. } = event else {
                continue;
            };
            let now = match event {
                StepEvent::StoreDegraded { error, retries } => Some(format!(
                    "the database {db} cannot commit ({error}); waiting, retry {retries} — nothing \
                     is recorded as failed"
                )),
                StepEvent::StoreRecovered => None,
                _ => continue,
            };
            if let Ok(mut t) = trouble.lock() {
                *t = now;
            }
        }
    })
}

/// How often an engine checks that its database is still there (a commit checks too).
pub(super) const LOST_CHECK: Duration = Duration::from_secs(2);

/// Checks that the database is still the one the engine opened; once it is not, stops every
/// run (nothing more can be recorded) and keeps why.
pub(super) fn spawn_lost_watch(
    store: Arc<dyn Db>,
    runtime: Arc<Runtime>,
    lost: Arc<std::sync::Mutex<Option<String>>>,
    log: Logger,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(LOST_CHECK).await;
            let Some(why) = store.lost().await else {
                continue;
            };
            tracing::error!("{why}");
            log.error(&why);
            if let Ok(mut l) = lost.lock() {
                *l = Some(why);
            }
            runtime.stop_now();
            return;
        }
    })
}

/// Deletes log lines older than `retention`, at start and every hour.
pub(super) fn spawn_pruner(store: Arc<dyn Db>, retention: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(3600));
        loop {
            every.tick().await;
            let keep = i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
            match store
                .prune_logs(crate::sys::now_ms().saturating_sub(keep))
                .await
            {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    lines = n,
                    "deleted log lines older than {} (engine.log_retention)",
                    humantime::format_duration(retention)
                ),
                Err(e) => tracing::warn!(error = %e, "old log lines could not be deleted"),
            }
        }
    })
}
