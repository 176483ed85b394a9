//! The system database's schema (DBOS-like names, `PRAGMA user_version` = version) and the
//! connection settings every process applies: WAL, `synchronous`, foreign keys, busy timeout.

use rusqlite::{Connection, OptionalExtension};

use super::error::StoreError;

pub use crate::config::database::Synchronous;

/// One migration per schema version, applied in order inside one IMMEDIATE transaction.
const MIGRATIONS: &[&str] = &[
    r"
CREATE TABLE workflow_status (
  workflow_id           TEXT PRIMARY KEY,
  name                  TEXT NOT NULL,
  definition_version    INTEGER NOT NULL,
  inputs_sha256         TEXT NOT NULL,
  status                TEXT NOT NULL CHECK (status IN
                          ('ENQUEUED','PENDING','SUCCESS','ERROR','CANCELLED','MAX_RECOVERY_ATTEMPTS_EXCEEDED')),
  executor_id           TEXT,
  run_token             TEXT,
  recovery_attempts     INTEGER NOT NULL DEFAULT 0,
  max_recovery_attempts INTEGER NOT NULL DEFAULT 5,
  queue_name            TEXT,
  priority              INTEGER NOT NULL DEFAULT 0,
  dedup_key             TEXT,
  subject               TEXT,
  parent_workflow_id    TEXT,
  forked_from           TEXT,
  created_at            INTEGER NOT NULL,
  updated_at            INTEGER NOT NULL,
  started_at            INTEGER,
  completed_at          INTEGER,
  deadline_at           INTEGER,
  -- Large columns last: a status check at every step boundary must not walk the overflow
  -- pages of a big fleet's inputs.
  output                TEXT,
  error                 TEXT,
  inputs                TEXT NOT NULL
);
CREATE INDEX wf_live ON workflow_status(queue_name, status, priority, created_at)
  WHERE status IN ('ENQUEUED','PENDING');
CREATE UNIQUE INDEX wf_dedup ON workflow_status(dedup_key)
  WHERE dedup_key IS NOT NULL AND status IN ('ENQUEUED','PENDING');
CREATE INDEX wf_subject ON workflow_status(subject, created_at);

CREATE TABLE operation_outputs (
  workflow_id       TEXT NOT NULL REFERENCES workflow_status ON DELETE CASCADE,
  function_id       INTEGER NOT NULL,
  function_name     TEXT NOT NULL,
  output            TEXT,
  error             TEXT,
  child_workflow_id TEXT,
  attempts          INTEGER NOT NULL,
  started_at        INTEGER,
  completed_at      INTEGER,
  executor_id       TEXT,
  PRIMARY KEY (workflow_id, function_id)
);

CREATE TABLE step_attempts (
  workflow_id   TEXT NOT NULL REFERENCES workflow_status ON DELETE CASCADE,
  function_id   INTEGER NOT NULL,
  attempt       INTEGER NOT NULL,
  function_name TEXT NOT NULL,
  run_token     TEXT NOT NULL,
  started_at    INTEGER NOT NULL,
  ended_at      INTEGER,
  outcome       TEXT CHECK (outcome IN ('ok','retryable','permanent','interrupted')),
  error         TEXT,
  PRIMARY KEY (workflow_id, function_id, attempt)
);

CREATE TABLE notifications (
  message_id              TEXT PRIMARY KEY,
  destination_id          TEXT NOT NULL REFERENCES workflow_status ON DELETE CASCADE,
  topic                   TEXT NOT NULL,
  message                 TEXT NOT NULL,
  sender                  TEXT,
  created_at              INTEGER NOT NULL,
  consumed_by_function_id INTEGER
);
CREATE INDEX notif_pending ON notifications(destination_id, topic, created_at)
  WHERE consumed_by_function_id IS NULL;

CREATE TABLE workflow_events (
  workflow_id TEXT NOT NULL REFERENCES workflow_status ON DELETE CASCADE,
  key         TEXT NOT NULL,
  value       TEXT NOT NULL,
  function_id INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL,
  PRIMARY KEY (workflow_id, key)
);
CREATE TABLE workflow_events_history (
  workflow_id TEXT NOT NULL,
  function_id INTEGER NOT NULL,
  key         TEXT NOT NULL,
  value       TEXT NOT NULL,
  PRIMARY KEY (workflow_id, function_id, key)
);

CREATE TABLE engine_lease (
  id           INTEGER PRIMARY KEY CHECK (id = 1),
  executor_id  TEXT NOT NULL,
  pid          INTEGER,
  host         TEXT,
  acquired_at  INTEGER,
  heartbeat_at INTEGER
);
",
    r"
-- Extensions (the layer above the engine) keep their own schema versions here.
CREATE TABLE schema_components (
  name    TEXT PRIMARY KEY,
  version INTEGER NOT NULL
);
-- An undelivered interrupting command (abort) stops fan-outs from starting new steps.
ALTER TABLE workflow_status ADD COLUMN interrupt_requested INTEGER NOT NULL DEFAULT 0;
ALTER TABLE notifications ADD COLUMN interrupts INTEGER NOT NULL DEFAULT 0;
",
    r"
-- The fingerprint of the key that authenticates workflow_status.inputs (inputs_sha256 holds
-- each row's HMAC under it): an engine given another key refuses the database at open.
CREATE TABLE inputs_key (
  id          INTEGER PRIMARY KEY CHECK (id = 1),
  fingerprint TEXT NOT NULL,
  created_at  INTEGER NOT NULL
);
",
];

/// The schema version this binary writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Applies the pragmas of design/durable-workflows.md B.10 to a fresh connection; refuses a database that cannot use WAL.
pub fn configure(conn: &Connection, sync: Synchronous) -> Result<(), StoreError> {
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Open {
            path: conn.path().unwrap_or("?").to_owned(),
            reason: format!(
                "SQLite refused WAL mode (got `{mode}`): the database must be on a local disk, \
                 not a network filesystem"
            ),
        });
    }
    let sync = match sync {
        Synchronous::Full => "FULL",
        Synchronous::Normal => "NORMAL",
    };
    conn.execute_batch(&format!(
        "PRAGMA synchronous={sync}; PRAGMA foreign_keys=ON;"
    ))?;
    Ok(())
}

/// Brings the engine's schema to `SCHEMA_VERSION`, then `component`'s to the number of its
/// migrations; refuses a database written by a newer manent.
pub fn migrate(
    conn: &mut Connection,
    component: Option<(&str, &[&str])>,
) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::Open {
            path: tx.path().unwrap_or("?").to_owned(),
            reason: format!(
                "it has schema version {version}, newer than this manent's {SCHEMA_VERSION}: \
                 upgrade manent"
            ),
        });
    }
    for (i, sql) in MIGRATIONS
        .iter()
        .enumerate()
        .skip(usize::try_from(version).unwrap_or(0))
    {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i as i64 + 1)?;
    }
    if let Some((name, migrations)) = component {
        let have: i64 = tx
            .query_row(
                "SELECT version FROM schema_components WHERE name = ?1",
                [name],
                |r| r.get(0),
            )
            .optional()?
            .unwrap_or(0);
        let want = i64::try_from(migrations.len()).unwrap_or(i64::MAX);
        if have > want {
            return Err(StoreError::Open {
                path: tx.path().unwrap_or("?").to_owned(),
                reason: format!(
                    "its {name} records have schema version {have}, newer than this manent's \
                     {want}: upgrade manent"
                ),
            });
        }
        for sql in migrations.iter().skip(usize::try_from(have).unwrap_or(0)) {
            tx.execute_batch(sql)?;
        }
        tx.execute(
            "INSERT INTO schema_components (name, version) VALUES (?1, ?2) \
             ON CONFLICT (name) DO UPDATE SET version = excluded.version",
            rusqlite::params![name, want],
        )?;
    }
    tx.commit()?;
    Ok(())
}

/// `PRAGMA quick_check`: Ok, or the first problem SQLite reports.
pub fn quick_check(conn: &Connection) -> Result<(), StoreError> {
    let verdict: String = conn.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
    if verdict == "ok" {
        Ok(())
    } else {
        Err(StoreError::Corrupt(verdict))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_apply_once_and_are_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = Connection::open(dir.path().join("t.db")).unwrap();
        configure(&conn, Synchronous::Full).unwrap();
        migrate(&mut conn, None).unwrap();
        migrate(&mut conn, None).unwrap();
        let v: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
        quick_check(&conn).unwrap();
    }

    #[test]
    fn refuses_a_newer_schema() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = Connection::open(dir.path().join("t.db")).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
        let err = migrate(&mut conn, None).unwrap_err().to_string();
        assert!(err.contains("schema version 99"), "{err}");
    }
}
