//! What deploys keep beside the checkpoint log: releases per moniker, the audit journal, log
//! lines, workflow events and the engine lease row.

use std::collections::BTreeMap;

use rusqlite::{Connection, params};

use crate::sys::now_ms;
use crate::workflow::error::StoreError;
use crate::workflow::store::{Effect, JournalEntry, LogRecord, ReleaseRecord};

pub fn insert_journal(conn: &Connection, e: &JournalEntry) -> Result<(), StoreError> {
    super::exec(
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
    )?;
    Ok(())
}

pub fn apply_effect(
    conn: &Connection,
    workflow_id: &str,
    function_id: u32,
    effect: &Effect,
) -> Result<(), StoreError> {
    match effect {
        Effect::Release(r) => {
            super::exec(
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
            )?;
        }
        Effect::RolledBack {
            moniker,
            deployment_id,
            by,
        } => {
            super::exec(
                conn,
                "UPDATE releases SET rolled_back_by = ?1 WHERE moniker = ?2 \
                 AND deployment_id = ?3 AND rolled_back_by IS NULL",
                params![by, moniker, deployment_id],
            )?;
        }
        Effect::Event { key, value } => {
            super::exec(
                conn,
                "INSERT INTO workflow_events (workflow_id, key, value, function_id, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (workflow_id, key) DO UPDATE SET \
                 value = excluded.value, function_id = excluded.function_id, \
                 updated_at = excluded.updated_at",
                params![workflow_id, key, value, function_id, now_ms()],
            )?;
            super::exec(
                conn,
                "INSERT OR REPLACE INTO workflow_events_history (workflow_id, function_id, key, \
                 value) VALUES (?1, ?2, ?3, ?4)",
                params![workflow_id, function_id, key, value],
            )?;
        }
    }
    Ok(())
}

pub fn releases(conn: &Connection, subject: &str) -> Result<Vec<ReleaseRecord>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT moniker, subject, version, artifact, deployment_id, recorded_at, rolled_back_by \
         FROM releases WHERE subject = ?1 ORDER BY id",
    )?;
    let rows = stmt
        .query_map([subject], |r| {
            Ok(ReleaseRecord {
                moniker: r.get(0)?,
                subject: r.get(1)?,
                version: r.get(2)?,
                artifact: r.get(3)?,
                deployment_id: r.get(4)?,
                recorded_at: r.get(5)?,
                rolled_back_by: r.get(6)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn journal_entries(
    conn: &Connection,
    subject: Option<&str>,
    workflow_id: Option<&str>,
    limit: u32,
) -> Result<Vec<JournalEntry>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT at, operator, client, action, workflow_id, subject, detail, reason FROM \
         (SELECT * FROM journal WHERE (?1 IS NULL OR subject = ?1) \
          AND (?2 IS NULL OR workflow_id = ?2) ORDER BY id DESC LIMIT ?3) ORDER BY id",
    )?;
    let rows = stmt
        .query_map(params![subject, workflow_id, limit], |r| {
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
}

pub fn append_logs(conn: &Connection, lines: &[LogRecord]) -> Result<(), StoreError> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO logs (workflow_id, at, level, source, target, message, attrs) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for l in lines {
        stmt.execute(params![
            l.workflow_id,
            l.at,
            l.level,
            l.source,
            l.target,
            l.message,
            l.attrs
        ])?;
    }
    Ok(())
}

pub fn logs(
    conn: &Connection,
    id: &str,
    after: i64,
    unassigned_after: Option<i64>,
    limit: u32,
) -> Result<Vec<LogRecord>, StoreError> {
    let mut stmt = conn.prepare_cached(
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
}

pub fn recent_logs(
    conn: &Connection,
    after: i64,
    limit: u32,
) -> Result<Vec<LogRecord>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, workflow_id, at, level, source, target, message, attrs FROM logs \
         WHERE id > ?1 ORDER BY id LIMIT ?2",
    )?;
    let rows = stmt
        .query_map(params![after, limit], log_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
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

pub fn events(conn: &Connection, id: &str) -> Result<BTreeMap<String, String>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT key, value FROM workflow_events WHERE workflow_id = ?1")?;
    let rows = stmt
        .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<BTreeMap<String, String>, _>>()?;
    Ok(rows)
}

pub fn record_lease(
    conn: &Connection,
    executor: &str,
    pid: u32,
    host: &str,
) -> Result<(), StoreError> {
    let now = now_ms();
    super::exec(
        conn,
        "INSERT INTO engine_lease (id, executor_id, pid, host, acquired_at, heartbeat_at) \
         VALUES (1, ?1, ?2, ?3, ?4, ?4) ON CONFLICT (id) DO UPDATE SET \
         executor_id = excluded.executor_id, pid = excluded.pid, host = excluded.host, \
         acquired_at = excluded.acquired_at, heartbeat_at = excluded.heartbeat_at",
        params![executor, pid, host, now],
    )?;
    Ok(())
}
