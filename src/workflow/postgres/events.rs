//! Workflow events and the engine lease row on PostgreSQL (semantics of `../sqlite/events.rs`).

use std::collections::BTreeMap;

use deadpool_postgres::{GenericClient, Transaction};

use super::{exec, query, query_opt};
use crate::sys::now_ms;
use crate::workflow::error::StoreError;

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

pub async fn record_lease<C: GenericClient>(
    c: &C,
    executor: &str,
    pid: u32,
    host: &str,
) -> Result<(), StoreError> {
    let now = now_ms();
    exec(
        c,
        "INSERT INTO engine_lease (id, executor_id, pid, host, acquired_at, heartbeat_at) \
         VALUES (1, $1, $2, $3, $4, $4) ON CONFLICT (id) DO UPDATE SET \
         executor_id = excluded.executor_id, pid = excluded.pid, host = excluded.host, \
         acquired_at = excluded.acquired_at, heartbeat_at = excluded.heartbeat_at",
        &[&executor, &i64::from(pid), &host, &now],
    )
    .await?;
    Ok(())
}
