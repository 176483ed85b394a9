//! Deploys' records — releases, the journal, logs, locks, the notification outbox — through the
//! store, written in the engine's transactions where they must be. One suite, two stores: each
//! test runs on SQLite and on a real PostgreSQL.

use std::sync::Arc;

use manent::deploy::records::{
    self, Db, Delivery, JournalEntry, Lock, LogRecord, OutboxRow, ReleaseRecord, RolledBack,
    SlotRecord,
};
use manent::workflow::store::{Checkpoint, Claim, NewWorkflow};
use manent::workflow::{StoreError, Synchronous};

use crate::support::postgres as pg;

fn entry(action: &str, at: i64) -> JournalEntry {
    JournalEntry {
        at,
        operator: "ana".into(),
        client: None,
        action: action.into(),
        workflow_id: Some("w1".into()),
        subject: Some("web/prod".into()),
        detail: None,
        reason: Some("because".into()),
    }
}

fn log(workflow: Option<&str>, message: &str, at: i64) -> LogRecord {
    LogRecord {
        id: 0,
        workflow_id: workflow.map(str::to_owned),
        at,
        level: "info".into(),
        source: "exec".into(),
        target: Some("web-1".into()),
        message: message.into(),
        attrs: Some(r#"{"k":"v"}"#.into()),
    }
}

fn checkpoint(fid: u32, token: &str, effects: Vec<manent::workflow::store::Effect>) -> Checkpoint {
    Checkpoint {
        workflow_id: "w1".into(),
        run_token: token.into(),
        function_id: fid,
        function_name: format!("s{fid}"),
        output: Some("null".into()),
        error: None,
        attempts: 1,
        close_attempt: None,
        started_at: 1,
        completed_at: 2,
        effects,
    }
}

async fn records_commit_with_the_engine_and_read_back(db: Arc<dyn Db>) {
    // A journal entry written with the start.
    db.start(NewWorkflow {
        id: "w1".into(),
        name: "deploy".into(),
        definition_version: 1,
        inputs: "{}".into(),
        subject: Some("web/prod".into()),
        dedup_key: Some("web/prod".into()),
        max_recovery_attempts: 5,
        records: vec![entry("deploy", 10).record()],
        executor: None,
        events: Vec::new(),
    })
    .await
    .unwrap();
    let Claim::Claimed(_) = db.claim("w1", "me", "tok").await.unwrap() else {
        panic!("not claimed")
    };
    // Releases become live with their steps, once, and a rollback marks them.
    let release = |moniker: &str| ReleaseRecord {
        id: 0,
        moniker: moniker.into(),
        subject: "web/prod".into(),
        version: "2.0.0".into(),
        artifact: "{}".into(),
        deployment_id: "w1".into(),
        recorded_at: 5,
        rolled_back_by: None,
    };
    db.checkpoint(checkpoint(
        0,
        "tok",
        vec![release("m1").effect(), release("m2").effect()],
    ))
    .await
    .unwrap();
    // The same checkpoint again (a lost acknowledgement) adds nothing.
    db.checkpoint(checkpoint(
        0,
        "tok",
        vec![release("m1").effect(), release("m2").effect()],
    ))
    .await
    .unwrap();
    let rels = db.releases("web/prod").await.unwrap();
    assert_eq!(
        rels.iter().map(|r| r.moniker.as_str()).collect::<Vec<_>>(),
        ["m1", "m2"]
    );
    assert!(rels[0].id < rels[1].id);
    let back = RolledBack {
        moniker: "m1".into(),
        to: None,
        by: "rb-1".into(),
    };
    db.checkpoint(checkpoint(1, "tok", vec![back.effect()]))
        .await
        .unwrap();
    let rels = db.releases("web/prod").await.unwrap();
    assert_eq!(rels[0].rolled_back_by.as_deref(), Some("rb-1"));
    assert_eq!(rels[1].rolled_back_by, None);
    // A fenced run's effects never land.
    let fenced = db
        .checkpoint(checkpoint(2, "other", vec![release("m3").effect()]))
        .await;
    assert!(matches!(fenced, Err(StoreError::Fenced(_))), "{fenced:?}");
    assert_eq!(db.releases("web/prod").await.unwrap().len(), 2);
    // Written at the same moment (one group commit on either store): each answers for itself —
    // the owner's steps land with their effects, a lost acknowledgement is acknowledged again,
    // another run's step is fenced and leaves nothing, and a step stored under another name
    // is non-deterministic.
    let mut at_once: Vec<_> = (3..9)
        .map(|fid| {
            db.checkpoint(checkpoint(
                fid,
                "tok",
                vec![release(&format!("g{fid}")).effect()],
            ))
        })
        .collect();
    at_once.push(db.checkpoint(checkpoint(
        0,
        "tok",
        vec![release("m1").effect(), release("m2").effect()],
    )));
    at_once.push(db.checkpoint(checkpoint(9, "other", vec![release("m9").effect()])));
    let mut renamed = checkpoint(1, "tok", Vec::new());
    renamed.function_name = "another".into();
    at_once.push(db.checkpoint(renamed));
    let answers = futures::future::join_all(at_once).await;
    assert!(answers[..7].iter().all(Result::is_ok), "{answers:?}");
    assert!(
        matches!(answers[7], Err(StoreError::Fenced(_))),
        "{answers:?}"
    );
    assert!(
        matches!(answers[8], Err(StoreError::NonDeterministic { .. })),
        "{answers:?}"
    );
    let monikers: Vec<String> = db
        .releases("web/prod")
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.moniker)
        .collect();
    assert_eq!(monikers, ["m1", "m2", "g3", "g4", "g5", "g6", "g7", "g8"]);

    // The journal, newest first, by subject or deployment.
    db.journal(entry("pause", 20)).await.unwrap();
    let j = db
        .journal_entries(Some("web/prod"), None, 10)
        .await
        .unwrap();
    assert_eq!(
        j.iter().map(|e| e.action.as_str()).collect::<Vec<_>>(),
        ["pause", "deploy"]
    );
    assert_eq!(j[1], entry("deploy", 10));
    assert_eq!(
        db.journal_entries(None, Some("w1"), 1).await.unwrap().len(),
        1
    );
    assert!(
        db.journal_entries(Some("x/y"), None, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // Logs keep their order; unassigned lines only after the given id.
    assert_eq!(db.last_log_id().await.unwrap(), 0);
    db.append_logs(vec![
        log(Some("w1"), "one", 100),
        log(None, "plugin restarted", 101),
        log(Some("w1"), "two", 200),
    ])
    .await
    .unwrap();
    db.append_logs(Vec::new()).await.unwrap();
    let all = db.recent_logs(0, 10).await.unwrap();
    assert_eq!(
        all.iter().map(|l| l.message.as_str()).collect::<Vec<_>>(),
        ["one", "plugin restarted", "two"]
    );
    assert_eq!(all[0].attrs.as_deref(), Some(r#"{"k":"v"}"#));
    assert!(all[0].id < all[1].id && all[1].id < all[2].id);
    let last = db.last_log_id().await.unwrap();
    assert_eq!(last, all[2].id);
    let mine = db.logs("w1", 0, None, 10).await.unwrap();
    assert_eq!(mine.len(), 2);
    let with_engine = db.logs("w1", 0, Some(0), 10).await.unwrap();
    assert_eq!(with_engine.len(), 3);
    let after = db.logs("w1", all[0].id, None, 10).await.unwrap();
    assert_eq!(after.len(), 1);
    assert_eq!(db.prune_logs(150).await.unwrap(), 2);
    assert_eq!(db.recent_logs(0, 10).await.unwrap().len(), 1);

    // Locks: another operator's active lock is kept unless replaced; the journal follows.
    let lock = |op: &str, since: i64, expires: Option<i64>| Lock {
        subject: "web/prod".into(),
        operator: op.into(),
        client: None,
        host: "bastion".into(),
        reason: "freeze".into(),
        since,
        expires_at: expires,
    };
    assert_eq!(
        db.lock(lock("ana", 1000, None), false, entry("lock", 1000))
            .await
            .unwrap(),
        Ok(())
    );
    let held = db
        .lock(lock("bo", 1001, None), false, entry("lock", 1001))
        .await
        .unwrap();
    assert_eq!(held.unwrap_err().operator, "ana");
    assert_eq!(db.locks(1002).await.unwrap().len(), 1);
    db.lock(lock("bo", 1003, Some(5000)), true, entry("lock", 1003))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(db.locks(1004).await.unwrap()[0].operator, "bo");
    assert!(db.locks(6000).await.unwrap().is_empty(), "expired");
    // Another operator's lock is lifted only with force (the journal entry's operator acts).
    let kept = db
        .unlock("web/prod", false, entry("unlock", 1005))
        .await
        .unwrap();
    assert_eq!(kept.unwrap_err().operator, "bo");
    let lifted = db
        .unlock("web/prod", true, entry("unlock", 1005))
        .await
        .unwrap();
    assert_eq!(lifted.unwrap().unwrap().operator, "bo");
    assert!(
        db.unlock("web/prod", false, entry("unlock", 1006))
            .await
            .unwrap()
            .unwrap()
            .is_none()
    );
    let actions: Vec<String> = db
        .journal_entries(Some("web/prod"), None, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect();
    assert_eq!(actions, ["unlock", "lock", "lock", "pause", "deploy"]);

    // The outbox: one row per receiver and mark, in order, attempts counted.
    let row = |mark: &str| OutboxRow {
        id: 0,
        receiver: "chat".into(),
        workflow_id: "w1".into(),
        mark: mark.into(),
        event: "started".into(),
        body: "{}".into(),
        attempts: 0,
        next_at: 0,
    };
    assert_eq!(db.enqueue(vec![row("a"), row("b")]).await.unwrap(), 2);
    assert_eq!(db.enqueue(vec![row("a")]).await.unwrap(), 0);
    assert_eq!(db.enqueue(vec![row("c")]).await.unwrap(), 1);
    let due = db.undelivered("chat", 10).await.unwrap();
    assert_eq!(
        due.iter().map(|r| r.mark.as_str()).collect::<Vec<_>>(),
        ["a", "b", "c"]
    );
    db.delivery(due[0].id, Delivery::Delivered(7))
        .await
        .unwrap();
    db.delivery(
        due[1].id,
        Delivery::Failed {
            next_at: 99,
            error: "503".into(),
        },
    )
    .await
    .unwrap();
    // A refusal sets a notification aside: the next one is due.
    db.delivery(
        due[2].id,
        Delivery::Parked {
            at: 5,
            error: "HTTP 400".into(),
        },
    )
    .await
    .unwrap();
    let due = db.undelivered("chat", 10).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!((due[0].attempts, due[0].next_at), (1, 99));
    let parked = db.parked(10).await.unwrap();
    assert_eq!(
        (parked.len(), parked[0].parked_at, parked[0].error.as_str()),
        (1, 5, "HTTP 400")
    );
    assert_eq!(db.unpark(None, 42).await.unwrap(), 1);
    assert!(db.parked(10).await.unwrap().is_empty());
    let due = db.undelivered("chat", 10).await.unwrap();
    assert_eq!(
        due.iter()
            .map(|r| (r.mark.as_str(), r.attempts))
            .collect::<Vec<_>>(),
        [("b", 1), ("c", 0)]
    );
    // manent's record of which slot serves, replaced as a canary changes it.
    let slots = |stable: &str, live: bool| SlotRecord {
        subject: "web/prod".into(),
        stable: stable.into(),
        stable_version: "1.0".into(),
        candidate: if stable == "blue" { "green" } else { "blue" }.into(),
        candidate_version: "2.0".into(),
        candidate_live: live,
        deployment_id: "w1".into(),
        updated_at: 1,
    };
    assert_eq!(db.slots("web/prod").await.unwrap(), None);
    db.checkpoint(checkpoint(40, "tok", vec![slots("blue", true).effect()]))
        .await
        .unwrap();
    assert_eq!(
        db.slots("web/prod").await.unwrap(),
        Some(slots("blue", true))
    );
    db.checkpoint(checkpoint(41, "tok", vec![slots("green", false).effect()]))
        .await
        .unwrap();
    assert_eq!(
        db.slots("web/prod").await.unwrap(),
        Some(slots("green", false))
    );
    // A receiver is first seen once.
    assert_eq!(db.receiver_enabled("chat", 10).await.unwrap(), 10);
    assert_eq!(
        db.receiver_enabled("chat", 20).await.unwrap(),
        10,
        "first seen stays"
    );

    assert_eq!(
        db.workflow_counts().await.unwrap(),
        [("deploy".to_owned(), "PENDING".to_owned(), 1)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_records_commit_with_the_engine_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = records::open(&dir.path().join("m.db"), Synchronous::Full, true).unwrap();
    records_commit_with_the_engine_and_read_back(Arc::new(db)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_records_commit_with_the_engine_and_read_back() {
    let Some(server) = pg::Postgres::start() else {
        return;
    };
    let url = server.create_db("records");
    let db = records::open_postgres(&url, None, 4, pg::inputs_key())
        .await
        .unwrap();
    records_commit_with_the_engine_and_read_back(Arc::new(db)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_database_from_a_newer_manent_is_refused_with_what_to_do() {
    let Some(server) = pg::Postgres::start() else {
        return;
    };
    let url = server.create_db("newer");
    // Created and migrated by this manent; a second open finds it current.
    let db = records::open_postgres(&url, None, 2, pg::inputs_key())
        .await
        .unwrap();
    drop(db);
    records::open_postgres(&url, None, 2, pg::inputs_key())
        .await
        .unwrap();
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .batch_execute("UPDATE schema_components SET version = 99 WHERE name = 'engine'")
        .await
        .unwrap();
    let err = records::open_postgres(&url, None, 2, pg::inputs_key())
        .await
        .unwrap_err();
    let said = err.to_string();
    assert!(
        said.contains("newer than this manent") && said.contains("upgrade manent"),
        "{said}"
    );
    assert!(!said.contains("password"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_across_the_network_is_reached_over_verified_tls() {
    let Some(server) = pg::Postgres::start_tls() else {
        return;
    };
    server.create_db("tls");
    let (port, ca) = (server.port(), server.ca_file().display().to_string());
    // libpq's verify-full with the server's CA: TLS, the chain and the host name checked.
    let url =
        format!("postgres://postgres@localhost:{port}/tls?sslmode=verify-full&sslrootcert={ca}");
    let db = records::open_postgres(&url, None, 2, pg::inputs_key())
        .await
        .unwrap();
    let ssl: bool = db
        .client()
        .await
        .unwrap()
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(ssl, "the connection is encrypted");
    // A certificate nobody vouches for is refused, saying what to give.
    let url = format!("postgres://postgres@localhost:{port}/tls?sslmode=require");
    let err = records::open_postgres(&url, None, 2, pg::inputs_key())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("certificate") && err.contains("sslrootcert=/path/ca.pem"),
        "{err}"
    );
}
