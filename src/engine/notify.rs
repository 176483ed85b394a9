//! Webhook notifications (`notify:` in manent.yml): one JSON object per transition of every
//! deployment — started, waiting for an operator, target failed, promoted, reverted, rolled
//! back, finished — with application, environment, versions, who and why.
//!
//! Transitions are read from the deployments' durable state, not from events in memory: a
//! scanner compares each deployment with what the outbox already holds (a transition is a
//! *mark*, one outbox row per receiver and mark) and adds what is new, so an engine that
//! crashed between a transition and its notification adds it at its next start. One sender per
//! receiver delivers the outbox in order, retrying with backoff; a receiver that is down or
//! silent only delays its own queue, never a deploy.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{Notify, broadcast};

use crate::config::{Receiver, SecretRef};
use crate::deploy::records::{Db, Delivery, JournalEntry, OutboxRow};
use crate::deploy::state::{DeploymentState, Kind};
use crate::deploy::view::{self, DeploymentView};
use crate::plugin::Logger;
use crate::plugin::secrets::ConfigSecrets;
use crate::workflow::RuntimeEvent;
use crate::workflow::store::WorkflowQuery;

/// The shortest time between two scans.
const MIN_SCAN_GAP: Duration = Duration::from_secs(1);
/// How often the scanner looks even when no event woke it.
const SCAN_EVERY: Duration = Duration::from_secs(2);
/// Deployments that ended longer ago than this when the engine started are not notified (a
/// receiver added to manent.yml does not hear of last week's deploys).
const RECENT_MS: i64 = 10 * 60 * 1000;
/// A receiver first seen now still hears what happened this long before: the deploy whose
/// command started this engine was submitted a moment before the engine (and its notifier).
const ENABLING_GRACE_MS: i64 = 2_000;
/// At shutdown, what is due is sent for at most this long (a healthy receiver answers within
/// it); the rest stays in the durable outbox for the next engine: a command's exit never waits
/// on a receiver that hangs.
const FLUSH: Duration = Duration::from_millis(500);
/// At shutdown, the last scan (what the end of the command's deployment queues) may take this
/// long on a loaded machine before it is given up for the next start.
const LAST_SCAN: Duration = Duration::from_secs(10);

/// What a receiver gets.
#[derive(Debug, Serialize)]
struct Body<'a> {
    event: &'a str,
    deployment: &'a str,
    kind: String,
    application: &'a str,
    environment: &'a str,
    production: bool,
    /// The version being deployed (a rollback: the one it leaves).
    version: &'a str,
    /// `2.3.0 → 2.4.0` per group of targets, from the records.
    transitions: String,
    /// The deployment's state now.
    state: &'static str,
    /// Who started the deployment.
    operator: &'a str,
    /// Who made this transition happen, when a person did (promote, revert, abort…).
    #[serde(skip_serializing_if = "Option::is_none")]
    who: Option<String>,
    /// Their reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<&'a str>,
    message: String,
    /// When it happened (epoch ms): a notification sent late still says when.
    at: i64,
}

/// Who made a transition happen, and why (from the journal).
type WhoWhy = (Option<String>, Option<String>);

/// The notifier's tasks.
pub struct Notifier {
    stop: Arc<Notify>,
    scanner: tokio::task::JoinHandle<()>,
    senders: Vec<tokio::task::JoinHandle<()>>,
    /// The outbox, and the receivers', for what is left at shutdown.
    db: Arc<dyn Db>,
    receivers: Vec<String>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Notifier")
    }
}

impl Notifier {
    /// Starts the scanner and one sender per receiver; `None` without receivers.
    pub fn spawn(
        receivers: &[Receiver],
        secrets: &std::collections::BTreeMap<String, SecretRef>,
        db: Arc<dyn Db>,
        events: broadcast::Receiver<RuntimeEvent>,
        log: Logger,
    ) -> Option<Notifier> {
        if receivers.is_empty() {
            return None;
        }
        let wakes = Wakes {
            stop: Arc::new(Notify::new()),
            queued: Arc::new(Notify::new()),
            stopping: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        };
        let stop = wakes.stop.clone();
        let scanner = tokio::spawn(scan_loop(
            receivers.to_vec(),
            db.clone(),
            events,
            wakes.clone(),
            log.clone(),
        ));
        let secrets = Arc::new(ConfigSecrets::new(secrets.clone()));
        let senders = receivers
            .iter()
            .map(|r| {
                tokio::spawn(send_loop(
                    r.clone(),
                    db.clone(),
                    secrets.clone(),
                    wakes.clone(),
                    log.clone(),
                ))
            })
            .collect();
        Some(Notifier {
            stop,
            scanner,
            senders,
            db,
            receivers: receivers.iter().map(|r| r.name.clone()).collect(),
        })
    }

    /// Stops at once (an engine that failed to start).
    pub fn abort(self) {
        self.scanner.abort();
        for s in &self.senders {
            s.abort();
        }
    }

    /// A last scan, then what is due is sent for a moment at most; the rest stays in the
    /// outbox for the next start. Returns how many notifications wait there, by receiver.
    pub async fn finish(mut self) -> Vec<(String, usize)> {
        self.stop.notify_one();
        let scanner = self.scanner.abort_handle();
        if tokio::time::timeout(LAST_SCAN, self.scanner).await.is_err() {
            scanner.abort();
        }
        let senders = futures::future::join_all(self.senders.iter_mut());
        if tokio::time::timeout(FLUSH, senders).await.is_err() {
            for s in &self.senders {
                s.abort();
            }
        }
        let mut left = Vec::new();
        for r in &self.receivers {
            if let Ok(rows) = self.db.undelivered(r, 1000).await
                && !rows.is_empty()
            {
                left.push((r.clone(), rows.len()));
            }
        }
        left
    }
}

/// What the scanner and the senders wake each other with: the engine stops (the scanner's
/// last scan), a notification is queued, the senders are to stop after what is due.
#[derive(Clone)]
struct Wakes {
    stop: Arc<Notify>,
    queued: Arc<Notify>,
    stopping: Arc<std::sync::atomic::AtomicBool>,
}

async fn scan_loop(
    receivers: Vec<Receiver>,
    db: Arc<dyn Db>,
    mut events: broadcast::Receiver<RuntimeEvent>,
    wakes: Wakes,
    log: Logger,
) {
    let Wakes {
        stop,
        queued,
        stopping,
    } = wakes;
    let log = log.with_source("notify");
    let started = crate::sys::now_ms();
    let since = started - RECENT_MS;
    // Each receiver hears what happens from its enabling on, never the history before it.
    let mut enabled = Vec::new();
    for r in &receivers {
        let at = db
            .receiver_enabled(&r.name, started)
            .await
            .unwrap_or(started);
        enabled.push(Enabled {
            at,
            new: at == started,
            skipped: HashSet::new(),
            of: HashSet::new(),
        });
    }
    let mut told = false;
    let mut settled: HashSet<String> = HashSet::new();
    let mut previous = tokio::time::Instant::now() - MIN_SCAN_GAP;
    loop {
        let last = tokio::select! {
            // What a waiting canary measures changes no transition: no scan for it.
            ev = events.recv() => {
                if let Ok(RuntimeEvent::Step { event: crate::workflow::StepEvent::Published, .. }) = ev {
                    continue;
                }
                // Coalesce a burst: one scan for everything that happened meanwhile.
                tokio::time::sleep(Duration::from_millis(50)).await;
                while events.try_recv().is_ok() {}
                false
            }
            () = tokio::time::sleep(SCAN_EVERY) => false,
            () = stop.notified() => true,
        };
        // At most one scan a second while events pour in: a scan reads whole deployments
        // on the store's connection, beside the checkpoints of the deploys it watches.
        if !last && let Some(wait) = MIN_SCAN_GAP.checked_sub(previous.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        previous = tokio::time::Instant::now();
        if scan(&receivers, &mut enabled, db.as_ref(), since, &mut settled).await > 0 {
            queued.notify_waiters();
        }
        if !told {
            told = true;
            for (r, e) in receivers.iter().zip(&enabled) {
                if e.new && !e.skipped.is_empty() {
                    log.info(&format!(
                        "notify {}: new receiver: it gets what happens from now on; {} earlier \
                         event(s) of {} deployment(s) are not sent",
                        r.name,
                        e.skipped.len(),
                        e.of.len()
                    ));
                }
            }
        }
        if last {
            stopping.store(true, std::sync::atomic::Ordering::Relaxed);
            queued.notify_waiters();
            return;
        }
    }
}

/// When a receiver was enabled, and what it was not sent because it happened before.
struct Enabled {
    at: i64,
    /// Enabled by this engine's start.
    new: bool,
    /// `deployment/mark` of each transition not sent.
    skipped: HashSet<String>,
    /// Their deployments.
    of: HashSet<String>,
}

/// Adds the transitions the outbox does not hold yet; how many were new.
async fn scan(
    receivers: &[Receiver],
    enabled: &mut [Enabled],
    db: &dyn Db,
    since: i64,
    settled: &mut HashSet<String>,
) -> usize {
    // Every live deployment (a canary may wait for hours) and the most recent others.
    let query = |live_only, limit| WorkflowQuery {
        subject: None,
        live_only,
        limit,
        heads: true,
    };
    let (Ok(live), Ok(recent)) = (
        db.workflows(query(true, 10_000)).await,
        db.workflows(query(false, 50)).await,
    ) else {
        return 0;
    };
    let mut rows = live;
    for r in recent {
        if !rows.iter().any(|l| l.id == r.id) {
            rows.push(r);
        }
    }
    // Oldest first: one scan's rows reach a receiver in the order things happened.
    rows.sort_by_key(|r| r.created_at);
    let mut out = Vec::new();
    let mut ended = Vec::new();
    for row in rows {
        if settled.contains(&row.id) {
            continue;
        }
        let over = !row.status.is_live();
        let Ok(v) = view::of_row(db, row).await else {
            continue;
        };
        if over && v.completed_at.unwrap_or(v.created_at) < since {
            settled.insert(v.id.clone());
            continue;
        }
        let journal = db
            .journal_entries(None, Some(&v.id), 50)
            .await
            .unwrap_or_default();
        for (mark, event, at, body) in transitions(&v, &journal) {
            for (r, e) in receivers
                .iter()
                .zip(enabled.iter_mut())
                .filter(|(r, _)| r.events.iter().any(|e| e == event))
            {
                if at < e.at - ENABLING_GRACE_MS {
                    e.skipped.insert(format!("{}/{mark}", v.id));
                    e.of.insert(v.id.clone());
                    continue;
                }
                out.push(OutboxRow {
                    id: 0,
                    receiver: r.name.clone(),
                    workflow_id: v.id.clone(),
                    mark: mark.clone(),
                    event: event.to_owned(),
                    body: body.clone(),
                    attempts: 0,
                    next_at: 0,
                });
            }
        }
        if over {
            ended.push(v.id.clone());
        }
    }
    if out.is_empty() {
        settled.extend(ended);
        return 0;
    }
    match db.enqueue(out).await {
        Ok(n) => {
            // Only once their notifications are in the outbox.
            settled.extend(ended);
            n
        }
        Err(_) => 0,
    }
}

/// One transition: `(mark, event, when it happened, body)`; the mark tells one from the next.
type Transition = (String, &'static str, i64, String);

/// A deployment's transitions so far, in the order they happened.
fn transitions(v: &DeploymentView, journal: &[JournalEntry]) -> Vec<Transition> {
    let what = format!(
        "{} of {} {} to {}",
        v.kind, v.application, v.version, v.environment
    );
    // The journal is newest first: the start is the oldest entry.
    let starter = journal.last().map_or((None, None), |j| {
        (Some(j.operator.clone()), j.reason.clone())
    });
    let started = v.created_at;
    let mut out = vec![transition(
        v,
        "started".to_owned(),
        "started",
        (started, None),
        format!("{what} started"),
        starter,
    )];
    out.extend(failed_targets(v));
    out.extend(drift(v, &what));
    out.extend(waiting(v, &what, who_did(journal, &["pause"])));
    if !v.status.is_live() {
        out.extend(ends(v, &what, journal));
    }
    out
}

/// Who did the newest of `actions` in the journal, and why.
fn who_did(journal: &[JournalEntry], actions: &[&str]) -> WhoWhy {
    journal
        .iter()
        .find(|j| actions.contains(&j.action.as_str()))
        .map(|j| (Some(j.operator.clone()), j.reason.clone()))
        .unwrap_or((None, None))
}

/// A transition of `v`, with its body as a receiver gets it.
fn transition(
    v: &DeploymentView,
    mark: String,
    event: &'static str,
    (at, target): (i64, Option<&str>),
    message: String,
    (who, why): WhoWhy,
) -> Transition {
    let b = Body {
        event,
        deployment: &v.id,
        kind: v.kind.to_string(),
        application: &v.application,
        environment: &v.environment,
        production: v.production,
        version: &v.version,
        transitions: v.transitions.to_string(),
        state: v.state.as_str(),
        operator: &v.operator,
        who,
        why,
        target,
        message,
        at,
    };
    (
        mark,
        event,
        at,
        serde_json::to_string(&b).unwrap_or_default(),
    )
}

/// Each failed target's failure. A retry is a new step (its attempts count from 1 again): the
/// attempts recorded so far tell one failure from the next.
fn failed_targets(v: &DeploymentView) -> Vec<Transition> {
    v.targets
        .iter()
        .filter(|t| t.state.is_failed())
        .map(|t| {
            let at = t
                .attempts
                .last()
                .and_then(|a| a.ended_at.or(Some(a.started_at)))
                .unwrap_or(v.created_at);
            transition(
                v,
                format!("target-failed:{}:{}", t.name, t.attempts.len()),
                "target-failed",
                (at, Some(&t.name)),
                format!("{} failed on attempt {}: {}", t.name, t.attempt, t.message),
                (None, None),
            )
        })
        .collect()
}

/// A live canary's router serving something else than manent set.
fn drift(v: &DeploymentView, what: &str) -> Option<Transition> {
    let d = v
        .canary
        .as_ref()
        .and_then(|c| c.drift.as_ref())
        .filter(|d| !d.over && v.status.is_live())?;
    Some(transition(
        v,
        format!("drift:{}", d.at),
        "drift",
        (d.at, None),
        format!(
            "{what}: the router serves something else than manent set: {}; {}",
            d.differences.join("; "),
            d.action
        ),
        (None, None),
    ))
}

/// A deployment that waits for an operator: where it waits (batch or canary step, not a weight
/// an operator moves while it waits) and how far it got, so each new wait is one notification.
fn waiting(v: &DeploymentView, what: &str, who: WhoWhy) -> Option<Transition> {
    if !matches!(
        v.state,
        DeploymentState::FailedAwaiting | DeploymentState::CanaryPaused | DeploymentState::Paused
    ) {
        return None;
    }
    let phase = v
        .phase
        .as_ref()
        .map_or_else(|| v.state.as_str().to_owned(), ToString::to_string);
    let at = match &v.phase {
        Some(crate::deploy::state::Phase::AwaitingDecision { batch, .. }) => *batch,
        Some(crate::deploy::state::Phase::Paused { before, .. }) => *before,
        Some(crate::deploy::state::Phase::Canary { step, .. }) => *step,
        _ => 0,
    };
    let attempts: usize = v.targets.iter().map(|t| t.attempts.len()).sum();
    let since = v.phase_at.unwrap_or(v.created_at);
    Some(transition(
        v,
        format!("waiting:{}:{at}:{attempts}", v.state.as_str()),
        "waiting",
        (since, None),
        format!("{what} waits for an operator: {phase}"),
        who,
    ))
}

/// How a finished deployment ended (promoted, reverted, rolled back), then `finished`.
fn ends(v: &DeploymentView, what: &str, journal: &[JournalEntry]) -> Vec<Transition> {
    let ended = v.completed_at.unwrap_or(v.created_at);
    let by = |actions: &[&str]| who_did(journal, actions);
    let ending: Option<(&'static str, WhoWhy)> = match v.state {
        DeploymentState::Deployed | DeploymentState::DeployedWithSkips
            if v.kind == Kind::Canary =>
        {
            Some(("promoted", by(&["promote"])))
        }
        DeploymentState::Reverted => Some(("reverted", by(&["revert"]))),
        DeploymentState::RolledBack => Some(("rolled-back", by(&["rollback"]))),
        DeploymentState::Aborted => Some(("rolled-back", by(&["abort"]))),
        _ => None,
    };
    let mut out = Vec::new();
    if let Some((event, who)) = ending {
        out.push(transition(
            v,
            event.to_owned(),
            event,
            (ended, None),
            format!("{what}: {}", v.state.as_str()),
            who,
        ));
    }
    let message = match v.report.as_ref().filter(|r| !r.message.is_empty()) {
        Some(r) => r.message.clone(),
        None => format!("{what}: {}", v.state.as_str()),
    };
    out.push(transition(
        v,
        "finished".to_owned(),
        "finished",
        (ended, None),
        message,
        by(&["cancel", "abort", "revert", "promote", "abandon"]),
    ));
    out
}

async fn send_loop(
    r: Receiver,
    db: Arc<dyn Db>,
    secrets: Arc<ConfigSecrets>,
    wakes: Wakes,
    log: Logger,
) {
    let Wakes {
        queued, stopping, ..
    } = wakes;
    let log = log.with_source("notify");
    loop {
        let woken = queued.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let stop = stopping.load(std::sync::atomic::Ordering::Relaxed);
        let now = crate::sys::now_ms();
        // The oldest undelivered first, due or not: a later one never overtakes one that waits
        // for its retry.
        let queue = db.undelivered(&r.name, 100).await.unwrap_or_default();
        for row in queue {
            if row.next_at > now {
                break;
            }
            match deliver(&r, &secrets, &row).await {
                Ok(()) => {
                    crate::telemetry::metrics::get().notification(&r.name, true);
                    let _ = db
                        .delivery(row.id, Delivery::Delivered(crate::sys::now_ms()))
                        .await;
                }
                Err(e) => {
                    crate::telemetry::metrics::get().notification(&r.name, false);
                    let attempts = row.attempts + 1;
                    if e.refused || attempts >= r.max_attempts {
                        // Set aside: the receiver's later notifications go on.
                        log.warn(&format!(
                            "notify {}: the {} notification of {} is parked after {attempts} \
                             attempt(s) ({}): {}; `manent notify retry {}` sends it again",
                            r.name,
                            row.event,
                            row.workflow_id,
                            if e.refused {
                                "the receiver refused it"
                            } else {
                                "too many failures"
                            },
                            e.message,
                            row.id
                        ));
                        let at = crate::sys::now_ms();
                        let _ = db
                            .delivery(
                                row.id,
                                Delivery::Parked {
                                    at,
                                    error: e.message,
                                },
                            )
                            .await;
                        continue;
                    }
                    let delay = backoff(&r, attempts);
                    let next = crate::sys::now_ms()
                        + i64::try_from(delay.as_millis()).unwrap_or(i64::MAX / 2);
                    log.warn(&format!(
                        "notify {}: the {} notification of {} failed ({}); again in {}",
                        r.name,
                        row.event,
                        row.workflow_id,
                        e.message,
                        humantime::format_duration(delay)
                    ));
                    let _ = db
                        .delivery(
                            row.id,
                            Delivery::Failed {
                                next_at: next,
                                error: e.message,
                            },
                        )
                        .await;
                    // In order: nothing later goes before this one.
                    break;
                }
            }
        }
        if stop {
            // Shutting down: go on until the queue is empty (finish() bounds how long).
            let pending = db.undelivered(&r.name, 1).await.unwrap_or_default();
            let Some(next) = pending.first() else {
                return;
            };
            let wait = (next.next_at - crate::sys::now_ms()).clamp(10, 1000);
            tokio::time::sleep(Duration::from_millis(u64::try_from(wait).unwrap_or(10))).await;
            continue;
        }
        tokio::select! {
            () = &mut woken => {}
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
}

fn backoff(r: &Receiver, attempts: u32) -> Duration {
    let factor = 2u32.saturating_pow(attempts.saturating_sub(1).min(20));
    r.backoff_base.saturating_mul(factor).min(r.backoff_max)
}

/// Why a delivery failed.
struct Failure {
    message: String,
    /// The receiver refused it (an HTTP 4xx other than 408 and 429): trying again is useless.
    refused: bool,
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure {
            message,
            refused: false,
        }
    }
}

/// One POST; a 2xx is a delivery.
async fn deliver(r: &Receiver, secrets: &ConfigSecrets, row: &OutboxRow) -> Result<(), Failure> {
    let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    for (k, v) in &r.headers {
        headers.push((k.clone(), with_secrets(v, secrets).await?));
    }
    let (status, body) = crate::deploy::probe::request_with_body(
        "POST",
        &r.url,
        &headers,
        bytes::Bytes::from(row.body.clone()),
        r.timeout,
    )
    .await
    // A webhook URL may carry its token in the path: errors name only scheme and host.
    .map_err(|e| e.replace(&r.url, &shown_url(&r.url)))?;
    if (200..300).contains(&status) {
        Ok(())
    } else {
        let text = String::from_utf8_lossy(&body);
        Err(Failure {
            message: format!(
                "HTTP {status}{}",
                if text.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", crate::deploy::probe::tail(text.trim(), 200))
                }
            ),
            refused: (400..500).contains(&status) && status != 408 && status != 429,
        })
    }
}

/// `https://chat.internal/…`: a receiver's URL as errors and logs show it.
fn shown_url(url: &str) -> String {
    match url.parse::<http::Uri>() {
        Ok(u) => format!(
            "{}://{}/…",
            u.scheme_str().unwrap_or("http"),
            u.authority().map_or("?", |a| a.as_str())
        ),
        Err(_) => "the receiver's URL".into(),
    }
}

/// `Bearer ${secret:token}` with the secret read now (and registered for redaction); a value
/// that would then hold a line break (a secret with one) is refused, never sent.
async fn with_secrets(value: &str, secrets: &ConfigSecrets) -> Result<String, String> {
    let v = crate::plugin::secrets::substitute(value, secrets)
        .await
        .map_err(|e| e.to_string())?;
    crate::config::values::check_header_value(&v)?;
    Ok(v)
}
