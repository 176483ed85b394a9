//! The durable engine in-process: steps commit before the workflow moves on, replay returns
//! recorded results, retries follow the policy, permanent errors are not retried, the mailbox is
//! idempotent and consumed once, and sleeps are durable. One suite, two stores: every test runs
//! on SQLite and on a real PostgreSQL (`mod sqlite`, `mod postgres` at the end).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::FutureExt;
use manent::workflow::store::{Message, NewWorkflow, Record, SendRequest, Sent, WorkflowStatus};
use manent::workflow::{
    Interrupt, PostgresStore, RetryPolicy, RunOutcome, Runtime, SqliteStore, StepError, Store,
    StoreError, Synchronous, WorkflowDef,
};

use crate::support::postgres as pg;

/// The layer above, as the kernel sees it: a table of its own and records it writes in the
/// kernel's transactions.
struct Notes;

impl manent::workflow::sqlite::Extension for Notes {
    fn name(&self) -> &'static str {
        "notes"
    }

    fn migrations(&self) -> &'static [&'static str] {
        &["CREATE TABLE notes (workflow_id TEXT, text TEXT NOT NULL);"]
    }

    fn apply(
        &self,
        conn: &rusqlite::Connection,
        workflow_id: Option<&str>,
        r: &Record,
    ) -> Result<(), StoreError> {
        conn.execute(
            "INSERT INTO notes (workflow_id, text) VALUES (?1, ?2)",
            rusqlite::params![workflow_id, r.body.as_str().unwrap_or_default()],
        )?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl manent::workflow::postgres::Extension for Notes {
    fn name(&self) -> &'static str {
        "notes"
    }

    fn migrations(&self) -> &'static [&'static str] {
        &["CREATE TABLE notes (id BIGSERIAL PRIMARY KEY, workflow_id TEXT, text TEXT NOT NULL);"]
    }

    async fn apply(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        workflow_id: Option<&str>,
        r: &Record,
    ) -> Result<(), StoreError> {
        tx.execute(
            "INSERT INTO notes (workflow_id, text) VALUES ($1, $2)",
            &[&workflow_id, &r.body.as_str().unwrap_or_default()],
        )
        .await?;
        Ok(())
    }
}

fn note(text: &str) -> Record {
    Record {
        kind: "note".into(),
        body: serde_json::json!(text),
    }
}

/// One PostgreSQL server for the tests of this binary that run at the same time; it stops
/// when the last of them drops it.
fn server() -> Option<Arc<pg::Postgres>> {
    static SHARED: Mutex<Weak<pg::Postgres>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(pg) = shared.upgrade() {
        return Some(pg);
    }
    let pg = Arc::new(pg::Postgres::start()?);
    *shared = Arc::downgrade(&pg);
    Some(pg)
}

/// A test's store, on one backend.
enum Backend {
    Sqlite {
        store: Arc<SqliteStore>,
        _dir: tempfile::TempDir,
    },
    Postgres {
        store: Arc<PostgresStore>,
        _server: Arc<pg::Postgres>,
    },
}

impl Backend {
    fn sqlite() -> Option<Backend> {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(
            &dir.path().join("m.db"),
            Synchronous::Full,
            true,
            Arc::new(Notes),
        )
        .unwrap();
        Some(Backend::Sqlite {
            store: Arc::new(store),
            _dir: dir,
        })
    }

    async fn postgres() -> Option<Backend> {
        static N: AtomicU32 = AtomicU32::new(0);
        let server = server()?;
        let name = format!(
            "t{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let url = server.create_db(&name);
        let store = PostgresStore::open(&url, None, 8, Arc::new(Notes), pg::inputs_key())
            .await
            .unwrap();
        Some(Backend::Postgres {
            store: Arc::new(store),
            _server: server,
        })
    }

    fn store(&self) -> Arc<dyn Store> {
        match self {
            Backend::Sqlite { store: s, .. } => s.clone(),
            Backend::Postgres { store: s, .. } => s.clone(),
        }
    }

    /// The notes the extension wrote, in order.
    async fn notes(&self) -> Vec<String> {
        match self {
            Backend::Sqlite { store: s, .. } => s
                .read(|c| {
                    let mut stmt = c.prepare("SELECT text FROM notes ORDER BY rowid")?;
                    let rows = stmt
                        .query_map([], |r| r.get(0))?
                        .collect::<Result<Vec<String>, _>>()?;
                    Ok(rows)
                })
                .await
                .unwrap(),
            Backend::Postgres { store: s, .. } => s
                .client()
                .await
                .unwrap()
                .query("SELECT text FROM notes ORDER BY id", &[])
                .await
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect(),
        }
    }
}

fn new_wf(id: &str, name: &str) -> NewWorkflow {
    NewWorkflow {
        id: id.into(),
        name: name.into(),
        definition_version: 1,
        inputs: "{}".into(),
        subject: Some("app/env".into()),
        dedup_key: None,
        max_recovery_attempts: 5,
        records: Vec::new(),
        executor: None,
        events: Vec::new(),
    }
}

fn fast(max_retries: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries,
        base: Duration::from_millis(5),
        max_interval: Duration::from_millis(20),
        ..RetryPolicy::default()
    }
}

/// What a [`gated`] workflow's steps tell the test, and wait for.
struct Gate {
    /// A gated step started.
    entered: tokio::sync::Notify,
    /// Lets a gated step go on.
    open: tokio::sync::Notify,
    /// Steps whose body ran to the end.
    ran: AtomicU32,
}

/// Workflow `t`: steps `s0`… `s{steps-1}`; each one `gated(i)` names says it started, then
/// waits for the gate to open.
fn gated(steps: u32, gated: fn(u32) -> bool) -> (WorkflowDef, Arc<Gate>) {
    let gate = Arc::new(Gate {
        entered: tokio::sync::Notify::new(),
        open: tokio::sync::Notify::new(),
        ran: AtomicU32::new(0),
    });
    let g = gate.clone();
    let def = WorkflowDef {
        name: "t".into(),
        version: 1,
        run: Arc::new(move |ctx, _| {
            let g = g.clone();
            async move {
                for i in 0..steps {
                    let g = g.clone();
                    ctx.step(format!("s{i}"), &fast(0), move |_| {
                        let g = g.clone();
                        async move {
                            if gated(i) {
                                g.entered.notify_one();
                                g.open.notified().await;
                            }
                            g.ran.fetch_add(1, Ordering::SeqCst);
                            Ok(i)
                        }
                    })
                    .await?
                    .ok();
                }
                Ok(RunOutcome::Success(serde_json::Value::Null))
            }
            .boxed()
        }),
    };
    (def, gate)
}

async fn retries_then_succeeds_and_permanent_fails_after_one_attempt(b: Backend) {
    let store = b.store();
    let calls = Arc::new(AtomicU32::new(0));
    let perm_calls = Arc::new(AtomicU32::new(0));
    let (c, p) = (calls.clone(), perm_calls.clone());
    let def = WorkflowDef {
        name: "t".into(),
        version: 1,
        run: Arc::new(move |ctx, _inputs| {
            let (c, p) = (c.clone(), p.clone());
            async move {
                let flaky = ctx
                    .step("flaky", &fast(3), |info| {
                        let c = c.clone();
                        async move {
                            c.fetch_add(1, Ordering::SeqCst);
                            if info.attempt < 3 {
                                Err(StepError::Retryable(format!("try {}", info.attempt)))
                            } else {
                                Ok(info.attempt)
                            }
                        }
                    })
                    .await?;
                let perm = ctx
                    .step("perm", &fast(5), |_| {
                        let p = p.clone();
                        async move {
                            p.fetch_add(1, Ordering::SeqCst);
                            Err::<(), _>(StepError::Permanent("bad input".into()))
                        }
                    })
                    .await?;
                Ok::<_, Interrupt>(RunOutcome::Success(serde_json::json!({
                    "flaky": flaky.unwrap(),
                    "perm": perm.unwrap_err(),
                })))
            }
            .boxed()
        }),
    };
    let rt = Runtime::new(store.clone(), "test".into(), vec![def]);
    rt.submit(new_wf("w1", "t")).await.unwrap();
    let row = rt.wait("w1").await.unwrap();
    assert_eq!(row.status, WorkflowStatus::Success);
    let out: serde_json::Value = serde_json::from_str(row.output.as_deref().unwrap()).unwrap();
    assert_eq!(out["flaky"], 3);
    assert_eq!(out["perm"]["kind"], "permanent");
    assert_eq!(out["perm"]["attempts"], 1);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(perm_calls.load(Ordering::SeqCst), 1);
    let history = store.history("w1").await.unwrap();
    assert_eq!(history.steps.len(), 2);
    let attempts: Vec<_> = history
        .attempts
        .iter()
        .map(|a| (a.function_id, a.attempt))
        .collect();
    assert_eq!(attempts, vec![(0, 1), (0, 2), (0, 3), (1, 1)]);
}

async fn exhausted_budget_records_every_attempt_error(b: Backend) {
    let store = b.store();
    let def = WorkflowDef {
        name: "t".into(),
        version: 1,
        run: Arc::new(|ctx, _| {
            async move {
                let r = ctx
                    .step("always", &fast(2), |info| async move {
                        Err::<(), _>(StepError::Retryable(format!("boom {}", info.attempt)))
                    })
                    .await?;
                Ok(RunOutcome::Failure(
                    serde_json::to_value(r.unwrap_err()).unwrap(),
                ))
            }
            .boxed()
        }),
    };
    let rt = Runtime::new(store.clone(), "test".into(), vec![def]);
    rt.submit(new_wf("w2", "t")).await.unwrap();
    let row = rt.wait("w2").await.unwrap();
    assert_eq!(row.status, WorkflowStatus::Error);
    let err: serde_json::Value = serde_json::from_str(row.error.as_deref().unwrap()).unwrap();
    assert_eq!(err["kind"], "retries_exhausted");
    assert_eq!(err["attempts"], 3);
    assert_eq!(
        err["errors"],
        serde_json::json!(["boom 1", "boom 2", "boom 3"])
    );
}

async fn mailbox_is_idempotent_by_command_id_and_consumed_once(b: Backend) {
    let store = b.store();
    let def = WorkflowDef {
        name: "t".into(),
        version: 1,
        run: Arc::new(|ctx, _| {
            async move {
                ctx.set_events(&[
                    ("phase", serde_json::json!("awaiting_promotion")),
                    ("accepts", serde_json::json!(["promote"])),
                ])
                .await?;
                let m = ctx
                    .recv(&["promote"], Some(Duration::from_secs(20)))
                    .await?;
                let second = ctx.poll_mailbox(&["promote"]).await?;
                Ok(RunOutcome::Success(serde_json::json!({
                    "got": m.map(|m| m.id),
                    "second": second.map(|m| m.id),
                })))
            }
            .boxed()
        }),
    };
    let rt = Runtime::new(store.clone(), "test".into(), vec![def]);
    rt.submit(new_wf("w3", "t")).await.unwrap();
    // Wait until the workflow published its phase, then press promote twice with one id.
    for _ in 0..200 {
        if store.events("w3").await.unwrap().contains_key("phase") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let send = |id: &str, topic: &str| SendRequest {
        message: Message {
            id: id.into(),
            destination: "w3".into(),
            topic: topic.into(),
            payload: "{}".into(),
            sender: Some("tester".into()),
            created_at: 1,
            interrupts: false,
        },
        guarded: true,
        records: vec![note(topic)],
    };
    let msg = |id: &str| send(id, "promote");
    // A command the workflow does not take where it is is refused, and nothing is recorded.
    let refused = store.send(send("cmd-0", "revert")).await.unwrap();
    assert!(
        matches!(&refused, Sent::Rejected(why) if why.contains("does not take `revert`") && why.contains("promote")),
        "{refused:?}"
    );
    assert_eq!(store.send(msg("cmd-1")).await.unwrap(), Sent::Delivered);
    assert_eq!(store.send(msg("cmd-1")).await.unwrap(), Sent::Duplicate);
    rt.wake("w3");
    let row = rt.wait("w3").await.unwrap();
    assert_eq!(row.status, WorkflowStatus::Success);
    let out: serde_json::Value = serde_json::from_str(row.output.as_deref().unwrap()).unwrap();
    assert_eq!(out["got"], "cmd-1");
    assert_eq!(out["second"], serde_json::Value::Null);
    assert_eq!(
        b.notes().await,
        ["promote"],
        "the command's record committed once, with its delivery"
    );
    // A finished workflow rejects further commands.
    assert!(matches!(
        store.send(msg("cmd-2")).await.unwrap(),
        Sent::Rejected(_)
    ));
}

async fn replay_returns_recorded_results_and_detects_renamed_steps(b: Backend) {
    let store = b.store();
    let runs = Arc::new(AtomicU32::new(0));
    let r2 = runs.clone();
    let first = WorkflowDef {
        name: "t".into(),
        version: 1,
        run: Arc::new(move |ctx, _| {
            let runs = r2.clone();
            async move {
                let v = ctx
                    .step("a", &fast(0), |_| {
                        let runs = runs.clone();
                        async move { Ok(runs.fetch_add(1, Ordering::SeqCst)) }
                    })
                    .await?;
                // Simulate the engine stopping right after the first step.
                let _ = v;
                Err(Interrupt::ShuttingDown)
            }
            .boxed()
        }),
    };
    let rt = Runtime::new(store.clone(), "test".into(), vec![first]);
    rt.submit(new_wf("w4", "t")).await.unwrap();
    for _ in 0..200 {
        if rt.active().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // A new binary whose first step has another name: non-determinism, nothing re-runs.
    let renamed = WorkflowDef {
        name: "t".into(),
        version: 1,
        run: Arc::new(|ctx, _| {
            async move {
                ctx.step("b", &fast(0), |_| async { Ok(1) }).await?.ok();
                Ok(RunOutcome::Success(serde_json::Value::Null))
            }
            .boxed()
        }),
    };
    let rt2 = Runtime::new(store.clone(), "test".into(), vec![renamed]);
    rt2.recover().await.unwrap();
    let row = rt2.wait("w4").await.unwrap();
    assert_eq!(row.status, WorkflowStatus::Error);
    assert!(row.error.unwrap().contains("non_deterministic"));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

async fn cancel_stops_at_the_next_step_boundary_and_resume_continues(b: Backend) {
    let store = b.store();
    // The first step says it started: the cancel lands while it is in flight, on a loaded
    // machine too (a fixed sleep sometimes cancelled before it began).
    let (def, gate) = gated(3, |i| i == 0);
    let rt = Runtime::new(store.clone(), "test".into(), vec![def]);
    let _poller = rt.spawn_poller(Duration::from_millis(50));
    rt.submit(new_wf("w5", "t")).await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), gate.entered.notified())
        .await
        .expect("the first step never started");
    let row = store.cancel("w5", vec![note("cancel")]).await.unwrap();
    assert_eq!(row.status, WorkflowStatus::Cancelled);
    gate.open.notify_one();
    let row = rt.wait("w5").await.unwrap();
    assert_eq!(row.status, WorkflowStatus::Cancelled);
    // The in-flight step finished and is kept; the next one never started.
    assert_eq!(gate.ran.load(Ordering::SeqCst), 1);
    assert_eq!(store.history("w5").await.unwrap().steps.len(), 1);
    store.resume("w5", vec![note("resume")]).await.unwrap();
    rt.claim_and_spawn("w5").await.unwrap();
    let row = rt.wait("w5").await.unwrap();
    assert_eq!(row.status, WorkflowStatus::Success);
    assert_eq!(gate.ran.load(Ordering::SeqCst), 3);
}

/// A submission no engine claimed before its submitter went away is parked, never run: only an
/// operator's resume starts it. One whose submitter runs is claimed as ever, and the claim
/// forgets the submitter.
async fn a_submission_whose_submitter_went_away_is_parked_until_resumed(b: Backend) {
    use manent::workflow::store::{NEVER_STARTED, SUBMITTER, Submitter};
    let store = b.store();
    let ran = Arc::new(AtomicU32::new(0));
    let r = ran.clone();
    let def = WorkflowDef {
        name: "t".into(),
        version: 1,
        run: Arc::new(move |_ctx, _| {
            let r = r.clone();
            async move {
                r.fetch_add(1, Ordering::SeqCst);
                Ok(RunOutcome::Success(serde_json::json!({})))
            }
            .boxed()
        }),
    };
    // A process that existed and is gone: its pid, with an identity no process has now.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let dead = Submitter {
        by: "alice".into(),
        pid,
        host: manent::sys::hostname(),
        identity: Some("gone".into()),
        at: 0,
    };
    let with = |id: &str, s: &Submitter| {
        let mut wf = new_wf(id, "t");
        wf.subject = Some(format!("app/{id}"));
        wf.events = vec![(SUBMITTER.into(), serde_json::to_string(s).unwrap())];
        wf
    };
    store.start(with("orphan", &dead)).await.unwrap();
    let alive = Submitter::this_process("bob");
    store.start(with("watched", &alive)).await.unwrap();
    // An engine starts and recovers what is ENQUEUED.
    let rt = Runtime::new(store.clone(), "test".into(), vec![def]);
    let started = rt.recover().await.unwrap();
    assert_eq!(started, vec!["watched".to_owned()]);
    assert_eq!(
        rt.wait("watched").await.unwrap().status,
        WorkflowStatus::Success
    );
    assert!(
        !store
            .events("watched")
            .await
            .unwrap()
            .contains_key(SUBMITTER),
        "claimed: the submitter is forgotten"
    );
    let parked = store.workflow("orphan").await.unwrap().unwrap();
    assert_eq!(parked.status, WorkflowStatus::Cancelled);
    let events = store.events("orphan").await.unwrap();
    let seen: Submitter = serde_json::from_str(&events[NEVER_STARTED]).unwrap();
    assert_eq!(seen, dead);
    assert!(!events.contains_key(SUBMITTER));
    assert_eq!(ran.load(Ordering::SeqCst), 1, "the orphan never ran");
    // Nothing claims it later by itself.
    assert!(!rt.claim_and_spawn("orphan").await.unwrap());
    // An operator's resume starts it.
    store.resume("orphan", Vec::new()).await.unwrap();
    assert!(rt.claim_and_spawn("orphan").await.unwrap());
    assert_eq!(
        rt.wait("orphan").await.unwrap().status,
        WorkflowStatus::Success
    );
    assert!(
        !store
            .events("orphan")
            .await
            .unwrap()
            .contains_key(NEVER_STARTED),
        "started: it is no longer one that never started"
    );
}

/// A hard stop asked while the engine drains (its database was lost) ends the drain's wait: a
/// run in a step far longer than any test (a plugin that never starts) is waited for only as
/// long as a hard stop allows, not the drain's 10 minutes.
async fn a_hard_stop_during_a_drain_ends_the_drain(b: Backend) {
    let store = b.store();
    let (def, gate) = gated(2, |_| true);
    let rt = Runtime::new(store.clone(), "test".into(), vec![def]);
    rt.submit(new_wf("w9", "t")).await.unwrap();
    gate.entered.notified().await;
    let drain = {
        let rt = rt.clone();
        tokio::spawn(async move {
            rt.drain(Duration::from_secs(600), Duration::from_millis(300), false)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!drain.is_finished(), "a drain waits for the step in flight");
    rt.stop_now();
    let left = tokio::time::timeout(Duration::from_secs(60), drain)
        .await
        .expect("the drain ended once a hard stop was asked")
        .unwrap();
    assert_eq!(
        left, 1,
        "the run still in its step is left for the next engine"
    );
    // Released, the step ends and the run stops at that boundary: the next never starts.
    gate.open.notify_one();
    let row = rt.wait("w9").await.unwrap();
    assert_ne!(row.status, WorkflowStatus::Success);
    assert_eq!(store.history("w9").await.unwrap().steps.len(), 1);
}

/// Each test above, once per store.
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backend::sqlite().unwrap()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(b) = super::Backend::postgres().await else { return };
                    super::$name(b).await;
                }
            )*
        }
    };
}

on_both!(
    retries_then_succeeds_and_permanent_fails_after_one_attempt,
    exhausted_budget_records_every_attempt_error,
    mailbox_is_idempotent_by_command_id_and_consumed_once,
    replay_returns_recorded_results_and_detects_renamed_steps,
    cancel_stops_at_the_next_step_boundary_and_resume_continues,
    a_submission_whose_submitter_went_away_is_parked_until_resumed,
    a_hard_stop_during_a_drain_ends_the_drain,
);
