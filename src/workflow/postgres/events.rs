//! Workflow events and the engine lease row on PostgreSQL (semantics of `../sqlite/events.rs`).

use std::collections::BTreeMap;

use deadpool_postgres::{GenericClient, Transaction};

use super::{NOW_MS, exec, query, query_opt, u32_at};
use crate::sys::now_ms;
use crate::workflow::error::StoreError;
use crate::workflow::store::EngineRow;

/// Publishes event `key` of `workflow_id` (the latest value, and its history by step).
pub async fn set(
    tx: &Transaction<'_>,
    workflow_id: &str,
    function_id: u32,
    key: &str,
    value: &str,
) -> Result<(), StoreError> {
    let fid = i64::from(function_id);
    exec(
        tx,
        "INSERT INTO workflow_events (workflow_id, key, value, function_id, updated_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (workflow_id, key) DO UPDATE SET \
         value = excluded.value, function_id = excluded.function_id, \
         updated_at = excluded.updated_at",
        &[&workflow_id, &key, &value, &fid, &now_ms()],
    )
    .await?;
    exec(
        tx,
        "INSERT INTO workflow_events_history (workflow_id, function_id, key, value) \
         VALUES ($1, $2, $3, $4) ON CONFLICT (workflow_id, function_id, key) DO UPDATE SET \
         value = excluded.value",
        &[&workflow_id, &fid, &key, &value],
    )
    .await?;
    Ok(())
}

/// Publishes events of a run that still owns its workflow, outside the checkpoint log: the
/// latest values only (no history row, no step).
pub async fn publish(
    tx: &Transaction<'_>,
    workflow_id: &str,
    run_token: &str,
    events: &[(String, String)],
) -> Result<(), StoreError> {
    let owned: Option<String> = query_opt(
        tx,
        "SELECT run_token FROM workflow_status WHERE workflow_id = $1 AND status = 'PENDING' \
         FOR SHARE",
        &[&workflow_id],
    )
    .await?
    .and_then(|r| r.get(0));
    if owned.as_deref() != Some(run_token) {
        return Err(StoreError::Fenced(workflow_id.to_owned()));
    }
    for (key, value) in events {
        exec(
            tx,
            "INSERT INTO workflow_events (workflow_id, key, value, function_id, updated_at) \
             VALUES ($1, $2, $3, -1, $4) ON CONFLICT (workflow_id, key) DO UPDATE SET \
             value = excluded.value, updated_at = excluded.updated_at",
            &[&workflow_id, key, value, &now_ms()],
        )
        .await?;
    }
    Ok(())
}

pub async fn events<C: GenericClient>(
    c: &C,
    id: &str,
) -> Result<BTreeMap<String, String>, StoreError> {
    Ok(query(
        c,
        "SELECT key, value FROM workflow_events WHERE workflow_id = $1",
        &[&id],
    )
    .await?
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect())
}

/// `id`'s events but those in `skip`.
pub async fn events_except<C: GenericClient>(
    c: &C,
    id: &str,
    skip: &[&str],
) -> Result<BTreeMap<String, String>, StoreError> {
    Ok(query(
        c,
        "SELECT key, value FROM workflow_events WHERE workflow_id = $1 AND key <> ALL($2)",
        &[&id, &skip],
    )
    .await?
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect())
}

/// When each of `id`'s events was last set.
pub async fn event_times<C: GenericClient>(
    c: &C,
    id: &str,
) -> Result<BTreeMap<String, i64>, StoreError> {
    Ok(query(
        c,
        "SELECT key, updated_at FROM workflow_events WHERE workflow_id = $1",
        &[&id],
    )
    .await?
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect())
}

/// Registers engine `executor` (host, pid) at its start. An engine id in use by another live
/// engine is refused: two engines with one id would take each other's deployments for their own.
pub async fn register(
    tx: &Transaction<'_>,
    executor: &str,
    pid: u32,
    host: &str,
    lease_ms: i64,
) -> Result<(), StoreError> {
    let sql = format!(
        "SELECT host, pid, {NOW_MS} - heartbeat_at FROM engines WHERE executor_id = $1 FOR UPDATE"
    );
    if let Some(r) = query_opt(tx, &sql, &[&executor]).await? {
        let (other_host, other_pid, age): (String, i64, i64) = (r.get(0), r.get(1), r.get(2));
        let same = other_host == host && other_pid == i64::from(pid);
        // On this host, a pid that is gone is this engine's own earlier run (killed): its
        // heartbeat may still be fresh.
        let gone_here =
            other_host == host && !std::path::Path::new(&format!("/proc/{other_pid}")).exists();
        if !same && !gone_here && age < lease_ms {
            return Err(StoreError::Conflict(format!(
                "engine id `{executor}` is in use by a running engine (pid {other_pid} on host \
                 {other_host}, heartbeat {age} ms ago): give each engine sharing the database its \
                 own `engine.executor_id`"
            )));
        }
    }
    let sql = format!(
        "INSERT INTO engines (executor_id, host, pid, started_at, heartbeat_at) \
         VALUES ($1, $2, $3, {NOW_MS}, {NOW_MS}) ON CONFLICT (executor_id) DO UPDATE SET \
         host = excluded.host, pid = excluded.pid, started_at = excluded.started_at, \
         heartbeat_at = excluded.heartbeat_at"
    );
    exec(tx, &sql, &[&executor, &host, &i64::from(pid)]).await?;
    Ok(())
}

/// Renews `executor`'s lease. Coming back after it expired (a paused or partitioned engine) is
/// said: its deployments may run elsewhere now, and its own runs of them are fenced out.
pub async fn renew(tx: &Transaction<'_>, executor: &str, lease_ms: i64) -> Result<(), StoreError> {
    let sql = format!(
        "UPDATE engines SET heartbeat_at = {NOW_MS} WHERE executor_id = $1 \
         RETURNING {NOW_MS} - (SELECT heartbeat_at FROM engines WHERE executor_id = $1)"
    );
    let away = query_opt(tx, &sql, &[&executor])
        .await?
        .map(|r| r.get::<_, i64>(0));
    if let Some(away) = away
        && away > lease_ms
    {
        tracing::warn!(
            executor,
            away_ms = away,
            "this engine renewed its lease {away} ms after the last time, past the lease of \
             {lease_ms} ms: other engines may have taken its deployments over; its runs of \
             them stop at their next step"
        );
    }
    Ok(())
}

/// The engines sharing the database, freshest first.
pub async fn engines<C: GenericClient>(c: &C) -> Result<Vec<EngineRow>, StoreError> {
    let sql = format!(
        "SELECT executor_id, host, pid, started_at, heartbeat_at, {NOW_MS} - heartbeat_at \
         FROM engines ORDER BY heartbeat_at DESC"
    );
    Ok(query(c, &sql, &[])
        .await?
        .iter()
        .map(|r| EngineRow {
            executor_id: r.get(0),
            host: r.get(1),
            pid: u32_at(r, 2),
            started_at: r.get(3),
            heartbeat_at: r.get(4),
            age_ms: r.get(5),
        })
        .collect())
}
