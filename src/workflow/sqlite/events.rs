//! Workflow events (what consoles read: phase, progress) and the engine lease row.

use std::collections::BTreeMap;

use rusqlite::{Connection, params};

use crate::sys::now_ms;
use crate::workflow::error::StoreError;
use crate::workflow::store::EngineRow;

/// Publishes event `key` of `workflow_id` (the latest value, and its history by step).
pub fn set(
    conn: &Connection,
    workflow_id: &str,
    function_id: u32,
    key: &str,
    value: &str,
) -> Result<(), StoreError> {
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
    Ok(())
}

/// Publishes events of a run that still owns its workflow, outside the checkpoint log: the
/// latest values only (no history row, no step).
pub fn publish(
    conn: &Connection,
    workflow_id: &str,
    run_token: &str,
    events: &[(String, String)],
) -> Result<(), StoreError> {
    let owned: Option<String> = conn
        .query_row(
            "SELECT run_token FROM workflow_status WHERE workflow_id = ?1 AND status = 'PENDING'",
            [workflow_id],
            |r| r.get(0),
        )
        .ok()
        .flatten();
    if owned.as_deref() != Some(run_token) {
        return Err(StoreError::Fenced(workflow_id.to_owned()));
    }
    for (key, value) in events {
        super::exec(
            conn,
            "INSERT INTO workflow_events (workflow_id, key, value, function_id, updated_at) \
             VALUES (?1, ?2, ?3, -1, ?4) ON CONFLICT (workflow_id, key) DO UPDATE SET \
             value = excluded.value, updated_at = excluded.updated_at",
            params![workflow_id, key, value, now_ms()],
        )?;
    }
    Ok(())
}

pub fn events(conn: &Connection, id: &str) -> Result<BTreeMap<String, String>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT key, value FROM workflow_events WHERE workflow_id = ?1")?;
    let rows = stmt
        .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<BTreeMap<String, String>, _>>()?;
    Ok(rows)
}

/// `id`'s events but those in `skip`.
pub fn events_except(
    conn: &Connection,
    id: &str,
    skip: &[&str],
) -> Result<BTreeMap<String, String>, StoreError> {
    let skip = serde_json::to_string(skip).map_err(|e| StoreError::Sql(e.to_string()))?;
    let mut stmt = conn.prepare_cached(
        "SELECT key, value FROM workflow_events WHERE workflow_id = ?1 \
         AND key NOT IN (SELECT value FROM json_each(?2))",
    )?;
    let rows = stmt
        .query_map(params![id, skip], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<BTreeMap<String, String>, _>>()?;
    Ok(rows)
}

/// When each of `id`'s events was last set.
pub fn event_times(conn: &Connection, id: &str) -> Result<BTreeMap<String, i64>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT key, updated_at FROM workflow_events WHERE workflow_id = ?1")?;
    let rows = stmt
        .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<BTreeMap<String, i64>, _>>()?;
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

/// The engine that recorded its lease last.
pub fn engines(conn: &Connection) -> Result<Vec<EngineRow>, StoreError> {
    let now = now_ms();
    let mut stmt = conn.prepare_cached(
        "SELECT executor_id, COALESCE(host, ''), COALESCE(pid, 0), COALESCE(acquired_at, 0), \
         COALESCE(heartbeat_at, 0) FROM engine_lease",
    )?;
    let rows = stmt
        .query_map([], |r| {
            let heartbeat_at: i64 = r.get(4)?;
            Ok(EngineRow {
                executor_id: r.get(0)?,
                host: r.get(1)?,
                pid: r.get(2)?,
                started_at: r.get(3)?,
                heartbeat_at,
                age_ms: now - heartbeat_at,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}
