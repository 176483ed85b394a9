//! Deploys' records in the SQLite store: their tables (an extension of the engine's schema) and
//! their queries, on the store's own connection.

use async_trait::async_trait;
use rusqlite::{Connection, params};

use super::{
    Delivery, JOURNAL, JournalEntry, Lock, LogRecord, OutboxRow, Parked, RELEASE, ROLLED_BACK,
    Records, ReleaseRecord, RolledBack, SLOTS, SlotRecord,
};
use crate::workflow::sqlite::Extension;
use crate::workflow::store::Record;
use crate::workflow::{SqliteStore, StoreError};

/// The tables deploys keep, and how their records are written.
#[derive(Debug, Clone, Copy)]
pub struct DeployRecords;

/// `IF NOT EXISTS`: databases made before deploys had their own schema version already have
/// these tables.
const MIGRATIONS: &[&str] = &[
    r"
-- What is live on each moniker, and what was: appended by deploys, marked by rollbacks.
CREATE TABLE IF NOT EXISTS releases (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  moniker        TEXT NOT NULL,
  subject        TEXT NOT NULL,
  version        TEXT NOT NULL,
  artifact       TEXT NOT NULL,
  deployment_id  TEXT NOT NULL,
  recorded_at    INTEGER NOT NULL,
  rolled_back_by TEXT,
  UNIQUE (moniker, deployment_id)
);
CREATE INDEX IF NOT EXISTS releases_moniker ON releases(moniker, id);
CREATE INDEX IF NOT EXISTS releases_subject ON releases(subject, id);

-- Who did what: every operator action, with the reason they gave.
CREATE TABLE IF NOT EXISTS journal (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  at          INTEGER NOT NULL,
  operator    TEXT NOT NULL,
  client      TEXT,
  action      TEXT NOT NULL,
  workflow_id TEXT,
  subject     TEXT,
  detail      TEXT,
  reason      TEXT
);
CREATE INDEX IF NOT EXISTS journal_subject ON journal(subject, id);
CREATE INDEX IF NOT EXISTS journal_workflow ON journal(workflow_id, id);

-- Engine and plugin log lines, per deployment, for `manent logs` and attached consoles.
CREATE TABLE IF NOT EXISTS logs (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  workflow_id TEXT,
  at          INTEGER NOT NULL,
  level       TEXT NOT NULL,
  source      TEXT NOT NULL,
  target      TEXT,
  message     TEXT NOT NULL,
  attrs       TEXT
);
CREATE INDEX IF NOT EXISTS logs_workflow ON logs(workflow_id, id);
",
    r"
-- Deploy locks: one per application and environment; an expired one no longer blocks.
CREATE TABLE locks (
  subject    TEXT PRIMARY KEY,
  operator   TEXT NOT NULL,
  client     TEXT,
  host       TEXT NOT NULL,
  reason     TEXT NOT NULL,
  since      INTEGER NOT NULL,
  expires_at INTEGER
);
",
    r"
-- Webhook notifications, written before they are sent: a receiver that is down gets them later.
CREATE TABLE outbox (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  receiver     TEXT NOT NULL,
  workflow_id  TEXT NOT NULL,
  mark         TEXT NOT NULL,
  event        TEXT NOT NULL,
  body         TEXT NOT NULL,
  created_at   INTEGER NOT NULL,
  attempts     INTEGER NOT NULL DEFAULT 0,
  next_at      INTEGER NOT NULL,
  delivered_at INTEGER,
  last_error   TEXT,
  UNIQUE (receiver, workflow_id, mark)
);
CREATE INDEX outbox_undelivered ON outbox(receiver, id) WHERE delivered_at IS NULL;
",
    r"
-- Which slot serves each application's environment, as the last canary left it.
CREATE TABLE slots (
  subject           TEXT PRIMARY KEY,
  stable            TEXT NOT NULL,
  stable_version    TEXT NOT NULL,
  candidate         TEXT NOT NULL,
  candidate_version TEXT NOT NULL,
  candidate_live    INTEGER NOT NULL,
  deployment_id     TEXT NOT NULL,
  updated_at        INTEGER NOT NULL
);
-- When each notification receiver was first seen: it gets what happens from then on.
CREATE TABLE receivers (
  name       TEXT PRIMARY KEY,
  enabled_at INTEGER NOT NULL
);
-- A notification its receiver refused (or that failed too often) is set aside: later ones flow.
ALTER TABLE outbox ADD COLUMN parked_at INTEGER;
DROP INDEX outbox_undelivered;
CREATE INDEX outbox_undelivered ON outbox(receiver, id)
  WHERE delivered_at IS NULL AND parked_at IS NULL;
",
];

fn exec(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> Result<(), StoreError> {
    conn.prepare_cached(sql)?.execute(params)?;
    Ok(())
}

impl Extension for DeployRecords {
    fn name(&self) -> &'static str {
        "deploy"
    }

    fn migrations(&self) -> &'static [&'static str] {
        MIGRATIONS
    }

    fn apply(&self, conn: &Connection, _: Option<&str>, r: &Record) -> Result<(), StoreError> {
        match r.kind.as_str() {
            RELEASE => {
                let r: ReleaseRecord = r.decode()?;
                exec(
                    conn,
                    "INSERT INTO releases (moniker, subject, version, artifact, deployment_id, \
                     recorded_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
                    params![
                        r.moniker,
                        r.subject,
                        r.version,
                        r.artifact,
                        r.deployment_id,
                        r.recorded_at
                    ],
                )
            }
            ROLLED_BACK => {
                let r: RolledBack = r.decode()?;
                exec(
                    conn,
                    "UPDATE releases SET rolled_back_by = ?1 WHERE moniker = ?2 \
                     AND id > COALESCE(?3, 0) AND rolled_back_by IS NULL",
                    params![r.by, r.moniker, r.to],
                )
            }
            JOURNAL => insert_journal(conn, &r.decode()?),
            SLOTS => {
                let r: SlotRecord = r.decode()?;
                exec(
                    conn,
                    "INSERT INTO slots (subject, stable, stable_version, candidate, \
                     candidate_version, candidate_live, deployment_id, updated_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (subject) DO UPDATE SET \
                     stable = ?2, stable_version = ?3, candidate = ?4, candidate_version = ?5, \
                     candidate_live = ?6, deployment_id = ?7, updated_at = ?8",
                    params![
                        r.subject,
                        r.stable,
                        r.stable_version,
                        r.candidate,
                        r.candidate_version,
                        r.candidate_live,
                        r.deployment_id,
                        r.updated_at
                    ],
                )
            }
            other => Err(StoreError::Sql(format!("unknown record kind `{other}`"))),
        }
    }
}

fn insert_journal(conn: &Connection, e: &JournalEntry) -> Result<(), StoreError> {
    exec(
        conn,
        "INSERT INTO journal (at, operator, client, action, workflow_id, subject, detail, reason) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            e.at,
            e.operator,
            e.client,
            e.action,
            e.workflow_id,
            e.subject,
            e.detail,
            e.reason
        ],
    )
}

const LOCK_COLUMNS: &str = "subject, operator, client, host, reason, since, expires_at";

fn lock_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Lock> {
    Ok(Lock {
        subject: r.get(0)?,
        operator: r.get(1)?,
        client: r.get(2)?,
        host: r.get(3)?,
        reason: r.get(4)?,
        since: r.get(5)?,
        expires_at: r.get(6)?,
    })
}

fn active_lock(conn: &Connection, subject: &str, now: i64) -> Result<Option<Lock>, StoreError> {
    use rusqlite::OptionalExtension;
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {LOCK_COLUMNS} FROM locks WHERE subject = ?1 \
             AND (expires_at IS NULL OR expires_at > ?2)"
        ))?
        .query_row(params![subject, now], lock_row)
        .optional()?)
}

fn outbox_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<OutboxRow> {
    Ok(OutboxRow {
        id: r.get(0)?,
        receiver: r.get(1)?,
        workflow_id: r.get(2)?,
        mark: r.get(3)?,
        event: r.get(4)?,
        body: r.get(5)?,
        attempts: r.get(6)?,
        next_at: r.get(7)?,
    })
}

fn log_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<LogRecord> {
    Ok(LogRecord {
        id: r.get(0)?,
        workflow_id: r.get(1)?,
        at: r.get(2)?,
        level: r.get(3)?,
        source: r.get(4)?,
        target: r.get(5)?,
        message: r.get(6)?,
        attrs: r.get(7)?,
    })
}

#[async_trait]
impl Records for SqliteStore {
    async fn releases(&self, subject: &str) -> Result<Vec<ReleaseRecord>, StoreError> {
        let subject = subject.to_owned();
        self.read(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT id, moniker, subject, version, artifact, deployment_id, recorded_at, \
                 rolled_back_by FROM releases WHERE subject = ?1 ORDER BY id",
            )?;
            let rows = stmt
                .query_map([subject], |r| {
                    Ok(ReleaseRecord {
                        id: r.get(0)?,
                        moniker: r.get(1)?,
                        subject: r.get(2)?,
                        version: r.get(3)?,
                        artifact: r.get(4)?,
                        deployment_id: r.get(5)?,
                        recorded_at: r.get(6)?,
                        rolled_back_by: r.get(7)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    async fn slots(&self, subject: &str) -> Result<Option<SlotRecord>, StoreError> {
        use rusqlite::OptionalExtension;
        let subject = subject.to_owned();
        self.read(move |c| {
            Ok(c.prepare_cached(
                "SELECT subject, stable, stable_version, candidate, candidate_version, \
                 candidate_live, deployment_id, updated_at FROM slots WHERE subject = ?1",
            )?
            .query_row([subject], |r| {
                Ok(SlotRecord {
                    subject: r.get(0)?,
                    stable: r.get(1)?,
                    stable_version: r.get(2)?,
                    candidate: r.get(3)?,
                    candidate_version: r.get(4)?,
                    candidate_live: r.get(5)?,
                    deployment_id: r.get(6)?,
                    updated_at: r.get(7)?,
                })
            })
            .optional()?)
        })
        .await
    }

    async fn journal(&self, entry: JournalEntry) -> Result<(), StoreError> {
        self.write(move |c| insert_journal(c, &entry)).await
    }

    async fn journal_entries(
        &self,
        subject: Option<&str>,
        workflow_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<JournalEntry>, StoreError> {
        let (s, w) = (subject.map(str::to_owned), workflow_id.map(str::to_owned));
        self.read(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT at, operator, client, action, workflow_id, subject, detail, reason \
                 FROM journal WHERE (?1 IS NULL OR subject = ?1) \
                 AND (?2 IS NULL OR workflow_id = ?2) ORDER BY id DESC LIMIT ?3",
            )?;
            let rows = stmt
                .query_map(params![s, w, limit], |r| {
                    Ok(JournalEntry {
                        at: r.get(0)?,
                        operator: r.get(1)?,
                        client: r.get(2)?,
                        action: r.get(3)?,
                        workflow_id: r.get(4)?,
                        subject: r.get(5)?,
                        detail: r.get(6)?,
                        reason: r.get(7)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    async fn append_logs(&self, lines: Vec<LogRecord>) -> Result<(), StoreError> {
        self.write(move |c| {
            // LOG_ROWS rows a statement: the statement's set-up and the AUTOINCREMENT counter's
            // update are shared by them (a third of a row's cost alone, measured).
            let mut chunks = lines.chunks_exact(LOG_ROWS);
            if chunks.len() > 0 {
                let mut many = c.prepare_cached(log_insert_many())?;
                for chunk in &mut chunks {
                    many.execute(rusqlite::params_from_iter(
                        chunk.iter().flat_map(log_values),
                    ))?;
                }
            }
            let mut one = c.prepare_cached(LOG_INSERT_ONE)?;
            for l in chunks.remainder() {
                one.execute(rusqlite::params_from_iter(log_values(l)))?;
            }
            Ok(())
        })
        .await
    }

    async fn logs(
        &self,
        id: &str,
        after: i64,
        unassigned_after: Option<i64>,
        limit: u32,
    ) -> Result<Vec<LogRecord>, StoreError> {
        let id = id.to_owned();
        self.read(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT id, workflow_id, at, level, source, target, message, attrs FROM logs \
                 WHERE id > ?2 AND (workflow_id = ?1 OR (workflow_id IS NULL AND id > ?3)) \
                 ORDER BY id LIMIT ?4",
            )?;
            let rows = stmt
                .query_map(
                    params![id, after, unassigned_after.unwrap_or(i64::MAX), limit],
                    log_row,
                )?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    async fn recent_logs(&self, after: i64, limit: u32) -> Result<Vec<LogRecord>, StoreError> {
        self.read(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT id, workflow_id, at, level, source, target, message, attrs FROM logs \
                 WHERE id > ?1 ORDER BY id LIMIT ?2",
            )?;
            let rows = stmt
                .query_map(params![after, limit], log_row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    async fn prune_logs(&self, before: i64) -> Result<u64, StoreError> {
        self.write(move |c| {
            let n = c
                .prepare_cached("DELETE FROM logs WHERE at < ?1")?
                .execute([before])?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
        .await
    }

    async fn lock(
        &self,
        lock: Lock,
        replace: bool,
        entry: JournalEntry,
    ) -> Result<Result<(), Lock>, StoreError> {
        self.write(move |c| {
            let held = active_lock(c, &lock.subject, lock.since)?;
            if let Some(refused) = Lock::refusing(held.as_ref(), &lock.operator, replace) {
                return Ok(Err(refused));
            }
            exec(
                c,
                &format!(
                    "INSERT OR REPLACE INTO locks ({LOCK_COLUMNS}) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                ),
                params![
                    lock.subject,
                    lock.operator,
                    lock.client,
                    lock.host,
                    lock.reason,
                    lock.since,
                    lock.expires_at
                ],
            )?;
            insert_journal(c, &entry)?;
            Ok(Ok(()))
        })
        .await
    }

    async fn unlock(
        &self,
        subject: &str,
        force: bool,
        entry: JournalEntry,
    ) -> Result<Result<Option<Lock>, Lock>, StoreError> {
        let subject = subject.to_owned();
        self.write(move |c| {
            let held = active_lock(c, &subject, entry.at)?;
            if let Some(refused) = Lock::refusing(held.as_ref(), &entry.operator, force) {
                return Ok(Err(refused));
            }
            exec(c, "DELETE FROM locks WHERE subject = ?1", [&subject])?;
            if held.is_some() {
                insert_journal(c, &entry)?;
            }
            Ok(Ok(held))
        })
        .await
    }

    async fn locks(&self, now: i64) -> Result<Vec<Lock>, StoreError> {
        self.read(move |c| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {LOCK_COLUMNS} FROM locks \
                 WHERE expires_at IS NULL OR expires_at > ?1 ORDER BY subject"
            ))?;
            let rows = stmt
                .query_map([now], lock_row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    async fn enqueue(&self, rows: Vec<OutboxRow>) -> Result<usize, StoreError> {
        let now = crate::sys::now_ms();
        self.write(move |c| {
            let mut stmt = c.prepare_cached(
                "INSERT OR IGNORE INTO outbox (receiver, workflow_id, mark, event, body, \
                 created_at, next_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            let mut added = 0;
            for r in &rows {
                added += stmt.execute(params![
                    r.receiver,
                    r.workflow_id,
                    r.mark,
                    r.event,
                    r.body,
                    now,
                    r.next_at
                ])?;
            }
            Ok(added)
        })
        .await
    }

    async fn undelivered(&self, receiver: &str, limit: u32) -> Result<Vec<OutboxRow>, StoreError> {
        let receiver = receiver.to_owned();
        self.read(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT id, receiver, workflow_id, mark, event, body, attempts, next_at \
                 FROM outbox WHERE delivered_at IS NULL AND parked_at IS NULL AND receiver = ?1 \
                 ORDER BY id LIMIT ?2",
            )?;
            let rows = stmt
                .query_map(params![receiver, limit], outbox_row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    async fn delivery(&self, id: i64, outcome: Delivery) -> Result<(), StoreError> {
        self.write(move |c| match outcome {
            Delivery::Delivered(at) => exec(
                c,
                "UPDATE outbox SET delivered_at = ?2, attempts = attempts + 1 WHERE id = ?1",
                params![id, at],
            ),
            Delivery::Failed { next_at, error } => exec(
                c,
                "UPDATE outbox SET attempts = attempts + 1, next_at = ?2, last_error = ?3 \
                 WHERE id = ?1",
                params![id, next_at, error],
            ),
            Delivery::Parked { at, error } => exec(
                c,
                "UPDATE outbox SET attempts = attempts + 1, parked_at = ?2, last_error = ?3 \
                 WHERE id = ?1",
                params![id, at, error],
            ),
        })
        .await
    }

    async fn parked(&self, limit: u32) -> Result<Vec<Parked>, StoreError> {
        self.read(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT id, receiver, workflow_id, mark, event, body, attempts, next_at, \
                 parked_at, COALESCE(last_error, '') FROM outbox \
                 WHERE parked_at IS NOT NULL AND delivered_at IS NULL ORDER BY id LIMIT ?1",
            )?;
            let rows = stmt
                .query_map(params![limit], |r| {
                    Ok(Parked {
                        row: outbox_row(r)?,
                        parked_at: r.get(8)?,
                        error: r.get(9)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    async fn unpark(&self, id: Option<i64>, now: i64) -> Result<u64, StoreError> {
        self.write(move |c| {
            let n = c
                .prepare_cached(
                    "UPDATE outbox SET parked_at = NULL, attempts = 0, next_at = ?2 \
                     WHERE parked_at IS NOT NULL AND delivered_at IS NULL \
                     AND (?1 IS NULL OR id = ?1)",
                )?
                .execute(params![id, now])?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
        .await
    }

    async fn receiver_enabled(&self, name: &str, now: i64) -> Result<i64, StoreError> {
        let name = name.to_owned();
        self.write(move |c| {
            exec(
                c,
                "INSERT INTO receivers (name, enabled_at) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                params![name, now],
            )?;
            Ok(c.query_row(
                "SELECT enabled_at FROM receivers WHERE name = ?1",
                [&name],
                |r| r.get(0),
            )?)
        })
        .await
    }

    async fn workflow_counts(&self) -> Result<Vec<(String, String, i64)>, StoreError> {
        self.read(|c| {
            let mut stmt = c.prepare_cached(
                "SELECT name, status, COUNT(*) FROM workflow_status GROUP BY name, status \
                 ORDER BY name, status",
            )?;
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    async fn last_log_id(&self) -> Result<i64, StoreError> {
        self.read(|c| Ok(c.query_row("SELECT COALESCE(MAX(id), 0) FROM logs", [], |r| r.get(0))?))
            .await
    }
}

/// Log rows one statement holds (7 parameters each, far under SQLite's limit).
const LOG_ROWS: usize = 64;

const LOG_INSERT_ONE: &str = "INSERT INTO logs (workflow_id, at, level, source, target, \
     message, attrs) VALUES (?, ?, ?, ?, ?, ?, ?)";

/// The insert of LOG_ROWS log rows, made once.
fn log_insert_many() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| {
        format!(
            "{}{}",
            LOG_INSERT_ONE,
            ", (?, ?, ?, ?, ?, ?, ?)".repeat(LOG_ROWS - 1)
        )
    })
}

/// A log row's values, in the insert's column order.
fn log_values(l: &LogRecord) -> [&dyn rusqlite::ToSql; 7] {
    [
        &l.workflow_id,
        &l.at,
        &l.level,
        &l.source,
        &l.target,
        &l.message,
        &l.attrs,
    ]
}
