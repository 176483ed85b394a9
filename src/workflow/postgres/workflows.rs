//! Workflow rows on PostgreSQL: start, claim, recovery, outcome, operator cancel and resume,
//! queries. The semantics are SQLite's (`../sqlite/workflows.rs`); each change locks the row.

use deadpool_postgres::{GenericClient, Transaction};
use tokio_postgres::Row;

use super::{Extension, NOW_MS, exec, query, query_opt, u32_at};
use crate::sys::now_ms;
use crate::workflow::error::StoreError;
use crate::workflow::inputs_key::{InputsKey, KeyVerdict};
use crate::workflow::store::{
    Claim, ClaimDecision, Finished, NewWorkflow, Outcome, Record, Resume, Started, TakenOver,
    WorkflowQuery, WorkflowRow, WorkflowStatus, decide_claim, decide_resume, resume_blocked,
};

const COLUMNS: &str = "workflow_id, name, definition_version, inputs, status, output, error, \
    executor_id, run_token, recovery_attempts, max_recovery_attempts, subject, created_at, \
    updated_at, started_at, completed_at";

/// [`COLUMNS`] with each large document's head only (`WorkflowQuery::heads`): the inputs
/// without the spec's targets, the outcome without its per-target lines. A value that is not a
/// JSON object, or holds a NUL escape (jsonb refuses it), is returned as it is.
const HEAD_COLUMNS: &str = "workflow_id, name, definition_version, \
    CASE WHEN left(inputs, 1) = '{' AND strpos(inputs, '\\u0000') = 0 \
        THEN (inputs::jsonb #- '{spec,targets}')::text ELSE inputs END, \
    status, \
    CASE WHEN left(output, 1) = '{' AND strpos(output, '\\u0000') = 0 \
        THEN (output::jsonb - 'targets' - 'rolled_back')::text ELSE output END, \
    CASE WHEN left(error, 1) = '{' AND strpos(error, '\\u0000') = 0 \
        THEN (error::jsonb - 'targets' - 'rolled_back')::text ELSE error END, \
    executor_id, run_token, recovery_attempts, max_recovery_attempts, subject, created_at, \
    updated_at, started_at, completed_at";

fn row(r: &Row) -> Result<WorkflowRow, StoreError> {
    let status: String = r.get(4);
    Ok(WorkflowRow {
        id: r.get(0),
        name: r.get(1),
        definition_version: u32_at(r, 2),
        inputs: r.get(3),
        status: WorkflowStatus::parse(&status)
            .ok_or_else(|| StoreError::Sql(format!("unknown workflow status {status}")))?,
        output: r.get(5),
        error: r.get(6),
        executor_id: r.get(7),
        run_token: r.get(8),
        recovery_attempts: u32_at(r, 9),
        max_recovery_attempts: u32_at(r, 10),
        subject: r.get(11),
        created_at: r.get(12),
        updated_at: r.get(13),
        started_at: r.get(14),
        completed_at: r.get(15),
    })
}

/// One workflow row.
pub async fn get<C: GenericClient>(c: &C, id: &str) -> Result<Option<WorkflowRow>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM workflow_status WHERE workflow_id = $1");
    query_opt(c, &sql, &[&id])
        .await?
        .as_ref()
        .map(row)
        .transpose()
}

/// One workflow row, locked for the rest of the transaction.
async fn get_locked(tx: &Transaction<'_>, id: &str) -> Result<Option<WorkflowRow>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM workflow_status WHERE workflow_id = $1 FOR UPDATE");
    query_opt(tx, &sql, &[&id])
        .await?
        .as_ref()
        .map(row)
        .transpose()
}

async fn must_get<C: GenericClient>(c: &C, id: &str) -> Result<WorkflowRow, StoreError> {
    get(c, id)
        .await?
        .ok_or_else(|| StoreError::NotFound(id.to_owned()))
}

async fn live_with_dedup<C: GenericClient>(
    c: &C,
    key: &str,
) -> Result<Option<WorkflowRow>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM workflow_status WHERE dedup_key = $1 \
         AND status IN ('ENQUEUED','PENDING')"
    );
    query_opt(c, &sql, &[&key])
        .await?
        .as_ref()
        .map(row)
        .transpose()
}

pub async fn start(
    tx: &Transaction<'_>,
    wf: &NewWorkflow,
    ext: &dyn Extension,
    key: &InputsKey,
) -> Result<Started, StoreError> {
    let sha = key.mac(&wf.id, &wf.name, &wf.inputs);
    let now = now_ms();
    let (version, max) = (
        i64::from(wf.definition_version),
        i64::from(wf.max_recovery_attempts),
    );
    // Engines start workflows concurrently: the insert decides, and a loser reads the winner.
    // The savepoint keeps the transaction usable after a dedup key's unique violation.
    let sp = "SAVEPOINT start";
    tx.batch_execute(sp).await?;
    let inserted = exec(
        tx,
        "INSERT INTO workflow_status (workflow_id, name, definition_version, inputs, \
         inputs_sha256, status, max_recovery_attempts, dedup_key, subject, created_at, updated_at, \
         executor_id) VALUES ($1, $2, $3, $4, $5, 'ENQUEUED', $6, $7, $8, $9, $9, $10) \
         ON CONFLICT (workflow_id) DO NOTHING",
        &[
            &wf.id,
            &wf.name,
            &version,
            &wf.inputs,
            &sha,
            &max,
            &wf.dedup_key,
            &wf.subject,
            &now,
            &wf.executor,
        ],
    )
    .await;
    let inserted = match inserted {
        Ok(n) => n,
        Err(e) if e.cause().contains("wf_dedup") => {
            tx.batch_execute("ROLLBACK TO SAVEPOINT start").await?;
            if let Some(key) = &wf.dedup_key
                && let Some(live) = live_with_dedup(tx, key).await?
            {
                return Ok(Started::Duplicate(live));
            }
            return Err(StoreError::Transient(
                "a deploy of the same application and environment was starting at the same \
                 moment; retrying"
                    .into(),
            ));
        }
        Err(e) => return Err(e),
    };
    if inserted == 0 {
        let existing = must_get(tx, &wf.id).await?;
        let stored_sha: String = query_opt(
            tx,
            "SELECT inputs_sha256 FROM workflow_status WHERE workflow_id = $1",
            &[&wf.id],
        )
        .await?
        .map(|r| r.get(0))
        .unwrap_or_default();
        return crate::workflow::store::start_over(existing, wf, stored_sha == sha);
    }
    for (key, value) in &wf.events {
        exec(
            tx,
            "INSERT INTO workflow_events (workflow_id, key, value, function_id, updated_at) \
             VALUES ($1, $2, $3, -1, $4)",
            &[&wf.id, key, value, &now],
        )
        .await?;
    }
    for r in &wf.records {
        ext.apply(tx, Some(&wf.id), r).await?;
    }
    Ok(Started::Created)
}

/// Signs this database with `key`, unless an engine did first (under the migrations' advisory
/// lock): records its fingerprint. (Rows from before keys are not re-signed: their plain digest
/// vouches for nothing.) What the database says of the key after.
pub async fn adopt_key(tx: &Transaction<'_>, key: &InputsKey) -> Result<KeyVerdict, StoreError> {
    let stored: Option<String> =
        query_opt(tx, "SELECT fingerprint FROM inputs_key WHERE id = 1", &[])
            .await?
            .map(|r| r.get(0));
    if stored.is_some() {
        return Ok(key.verdict(stored.as_deref()));
    }
    exec(
        tx,
        "INSERT INTO inputs_key (id, fingerprint, created_at) VALUES (1, $1, $2)",
        &[&key.fingerprint(), &now_ms()],
    )
    .await?;
    Ok(KeyVerdict::Matches)
}

async fn forget_submitter(tx: &Transaction<'_>, id: &str) -> Result<(), StoreError> {
    exec(
        tx,
        "DELETE FROM workflow_events WHERE workflow_id = $1 AND key = $2",
        &[&id, &crate::workflow::store::SUBMITTER],
    )
    .await?;
    Ok(())
}

/// ENQUEUED and never claimed → CANCELLED, its submitter event kept as `never_started`.
pub async fn park_unclaimed(tx: &Transaction<'_>, id: &str) -> Result<bool, StoreError> {
    let now = now_ms();
    let changed = exec(
        tx,
        "UPDATE workflow_status SET status = 'CANCELLED', completed_at = $1, updated_at = $1 \
         WHERE workflow_id = $2 AND status = 'ENQUEUED' AND EXISTS (SELECT 1 FROM \
         workflow_events WHERE workflow_id = $2 AND key = $3)",
        &[&now, &id, &crate::workflow::store::SUBMITTER],
    )
    .await?;
    if changed == 0 {
        return Ok(false);
    }
    exec(
        tx,
        "UPDATE workflow_events SET key = $3, updated_at = $4 WHERE workflow_id = $1 \
         AND key = $2",
        &[
            &id,
            &crate::workflow::store::SUBMITTER,
            &crate::workflow::store::NEVER_STARTED,
            &now,
        ],
    )
    .await?;
    Ok(true)
}

pub async fn claim(
    tx: &Transaction<'_>,
    id: &str,
    executor: &str,
    run_token: &str,
    key: &InputsKey,
) -> Result<Claim, StoreError> {
    let now = now_ms();
    // Inputs that do not verify were written outside manent: ended, never run.
    let stored = query_opt(
        tx,
        "SELECT inputs_sha256 FROM workflow_status WHERE workflow_id = $1 AND status = 'ENQUEUED' \
         FOR UPDATE",
        &[&id],
    )
    .await?;
    if let Some(stored) = stored {
        let stored: String = stored.get(0);
        let row = must_get(tx, id).await?;
        if !key.verifies(&row.id, &row.name, &row.inputs, &stored) {
            let error = serde_json::json!({"kind": "refused", "message": key.refusal(id)});
            exec(
                tx,
                "UPDATE workflow_status SET status = 'ERROR', error = $1, completed_at = $2, \
                 updated_at = $2 WHERE workflow_id = $3",
                &[&error.to_string(), &now, &id],
            )
            .await?;
            return Ok(Claim::Refused(Box::new(must_get(tx, id).await?)));
        }
    }
    let changed = exec(
        tx,
        "UPDATE workflow_status SET status = 'PENDING', executor_id = $1, run_token = $2, \
         started_at = $3, updated_at = $3, recovery_attempts = recovery_attempts + 1 \
         WHERE workflow_id = $4 AND status = 'ENQUEUED'",
        &[&executor, &run_token, &now, &id],
    )
    .await?;
    if changed == 1 {
        // Claimed: nobody needs to watch the submission any more.
        forget_submitter(tx, id).await?;
    }
    let claimed = must_get(tx, id).await?;
    match decide_claim(changed == 1, &claimed, run_token) {
        ClaimDecision::Claimed => Ok(Claim::Claimed(claimed)),
        ClaimDecision::NotClaimable => Ok(Claim::NotClaimable),
        ClaimDecision::DeadLetter => {
            exec(
                tx,
                "UPDATE workflow_status SET status = 'MAX_RECOVERY_ATTEMPTS_EXCEEDED', \
                 completed_at = $1, updated_at = $1 WHERE workflow_id = $2",
                &[&now, &id],
            )
            .await?;
            Ok(Claim::DeadLettered(must_get(tx, id).await?))
        }
    }
}

/// A clean stop of the run holding `run_token`: its claim is not counted as a crash.
pub async fn stopped<C: GenericClient>(c: &C, id: &str, run_token: &str) -> Result<(), StoreError> {
    exec(
        c,
        "UPDATE workflow_status SET recovery_attempts = GREATEST(recovery_attempts - 1, 0) \
         WHERE workflow_id = $1 AND run_token = $2 AND status = 'PENDING'",
        &[&id, &run_token],
    )
    .await?;
    Ok(())
}

/// Re-enqueues the PENDING workflows of engines whose lease expired (and, at `executor`'s
/// start, those its own earlier run left), closing their open attempts as interrupted; returns
/// their ids. Rows another engine is taking over at the same moment are skipped, not waited for.
pub async fn take_over(
    tx: &Transaction<'_>,
    executor: &str,
    lease_ms: i64,
    own: bool,
) -> Result<Vec<TakenOver>, StoreError> {
    let sql = format!(
        "SELECT w.workflow_id, w.executor_id FROM workflow_status w \
         WHERE w.status = 'PENDING' AND ( \
           ($3 AND w.executor_id = $1) \
           OR (w.executor_id IS DISTINCT FROM $1 AND NOT EXISTS ( \
             SELECT 1 FROM engines e WHERE e.executor_id = w.executor_id \
             AND e.heartbeat_at >= {NOW_MS} - $2))) \
         ORDER BY w.created_at FOR UPDATE OF w SKIP LOCKED"
    );
    let rows = query(tx, &sql, &[&executor, &lease_ms, &own]).await?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    for r in &rows {
        let (id, from): (String, Option<String>) = (r.get(0), r.get(1));
        let from = from.unwrap_or_default();
        let why = if from == executor {
            "interrupted: the engine stopped during this attempt".to_owned()
        } else {
            format!("interrupted: engine {from} stopped renewing its lease during this attempt")
        };
        exec(
            tx,
            &format!(
                "UPDATE step_attempts SET ended_at = {NOW_MS}, outcome = 'interrupted', error = $2 \
                 WHERE workflow_id = $1 AND ended_at IS NULL"
            ),
            &[&id, &why],
        )
        .await?;
        if from != executor {
            tracing::info!(workflow = %id, from = %from, "taking over a deployment whose engine's lease expired");
        }
    }
    exec(
        tx,
        "UPDATE workflow_status SET status = 'ENQUEUED', run_token = NULL, started_at = NULL, \
         updated_at = $2 WHERE workflow_id = ANY($1) AND status = 'PENDING'",
        &[&ids, &now_ms()],
    )
    .await?;
    Ok(rows
        .iter()
        .map(|r| TakenOver {
            id: r.get(0),
            from: r.get(1),
        })
        .collect())
}

/// ENQUEUED ids `executor` may claim: not those meant for another engine whose lease is fresh
/// (a deploy started on host A runs on host A, with its environment and its reach).
pub async fn claimable<C: GenericClient>(
    c: &C,
    executor: &str,
    lease_ms: i64,
) -> Result<Vec<String>, StoreError> {
    let sql = format!(
        "SELECT w.workflow_id FROM workflow_status w WHERE w.status = 'ENQUEUED' \
         AND (w.executor_id IS NULL OR w.executor_id = $1 OR NOT EXISTS ( \
           SELECT 1 FROM engines e WHERE e.executor_id = w.executor_id \
           AND e.heartbeat_at >= {NOW_MS} - $2)) \
         ORDER BY w.priority, w.created_at, w.workflow_id"
    );
    Ok(query(c, &sql, &[&executor, &lease_ms])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect())
}

pub async fn finish(
    tx: &Transaction<'_>,
    id: &str,
    run_token: &str,
    out: Outcome,
) -> Result<Finished, StoreError> {
    let (status, output, error) = out.columns();
    let now = now_ms();
    let changed = exec(
        tx,
        "UPDATE workflow_status SET status = $1, output = $2, error = $3, completed_at = $4, \
         updated_at = $4 WHERE workflow_id = $5 AND status = 'PENDING' AND run_token = $6",
        &[&status.as_str(), &output, &error, &now, &id, &run_token],
    )
    .await?;
    if changed == 1 {
        Ok(Finished::Written)
    } else {
        Ok(Finished::Adopted(Box::new(must_get(tx, id).await?)))
    }
}

pub async fn cancel(
    tx: &Transaction<'_>,
    id: &str,
    records: &[Record],
    ext: &dyn Extension,
) -> Result<WorkflowRow, StoreError> {
    let now = now_ms();
    let changed = exec(
        tx,
        "UPDATE workflow_status SET status = 'CANCELLED', completed_at = $1, updated_at = $1 \
         WHERE workflow_id = $2 AND status IN ('PENDING','ENQUEUED')",
        &[&now, &id],
    )
    .await?;
    let after = must_get(tx, id).await?;
    if changed == 1 {
        for r in records {
            ext.apply(tx, Some(id), r).await?;
        }
    }
    Ok(after)
}

pub async fn resume(
    tx: &Transaction<'_>,
    id: &str,
    records: &[Record],
    ext: &dyn Extension,
) -> Result<WorkflowRow, StoreError> {
    let before = get_locked(tx, id)
        .await?
        .ok_or_else(|| StoreError::NotFound(id.to_owned()))?;
    if decide_resume(&before)? == Resume::AlreadyLive {
        return Ok(before);
    }
    let key: Option<String> = query_opt(
        tx,
        "SELECT dedup_key FROM workflow_status WHERE workflow_id = $1",
        &[&id],
    )
    .await?
    .and_then(|r| r.get(0));
    if let Some(key) = key
        && let Some(live) = live_with_dedup(tx, &key).await?
    {
        return Err(resume_blocked(id, &live));
    }
    exec(
        tx,
        "UPDATE workflow_status SET status = 'ENQUEUED', recovery_attempts = 0, \
         completed_at = NULL, updated_at = $1 WHERE workflow_id = $2",
        &[&now_ms(), &id],
    )
    .await?;
    // An operator's resume starts it whoever submitted it, and it is no longer one that
    // never started.
    forget_submitter(tx, id).await?;
    exec(
        tx,
        "DELETE FROM workflow_events WHERE workflow_id = $1 AND key = $2",
        &[&id, &crate::workflow::store::NEVER_STARTED],
    )
    .await?;
    for r in records {
        ext.apply(tx, Some(id), r).await?;
    }
    must_get(tx, id).await
}

pub async fn list<C: GenericClient>(
    c: &C,
    q: &WorkflowQuery,
) -> Result<Vec<WorkflowRow>, StoreError> {
    let live = if q.live_only {
        "AND status IN ('ENQUEUED','PENDING')"
    } else {
        ""
    };
    let limit = if q.limit == 0 {
        i64::MAX
    } else {
        i64::from(q.limit)
    };
    let columns = if q.heads { HEAD_COLUMNS } else { COLUMNS };
    let sql = format!(
        "SELECT {columns} FROM workflow_status WHERE ($1::TEXT IS NULL OR subject = $1) {live} \
         ORDER BY created_at DESC, workflow_id DESC LIMIT $2"
    );
    query(c, &sql, &[&q.subject, &limit])
        .await?
        .iter()
        .map(row)
        .collect()
}
