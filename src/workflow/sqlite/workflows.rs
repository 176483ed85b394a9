//! Workflow rows: start, claim, recovery, outcome, operator cancel and resume, queries.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::Extension;
use crate::sys::now_ms;
use crate::workflow::error::StoreError;
use crate::workflow::inputs_key::{InputsKey, KeyVerdict};
use crate::workflow::store::{
    Claim, ClaimDecision, Finished, NewWorkflow, Outcome, Record, Resume, Started, WorkflowQuery,
    WorkflowRow, WorkflowStatus, decide_claim, decide_resume, resume_blocked,
};

const COLUMNS: &str = "workflow_id, name, definition_version, inputs, status, output, error, \
    executor_id, run_token, recovery_attempts, max_recovery_attempts, subject, created_at, \
    updated_at, started_at, completed_at";

/// What a list leaves out of each large document (`WorkflowQuery::heads`): the spec's
/// targets of the inputs, the per-target lines of the outcome.
const INPUTS_BODY: &[&[&str]] = &[&["spec", "targets"]];
const OUTCOME_BODY: &[&[&str]] = &[&["targets"], &["rolled_back"]];

/// A row with each large document's head only (`WorkflowQuery::heads`), read in Rust from
/// SQLite's own copy of the text (SQLite's JSON functions built each document whole first).
fn head_row(r: &Row<'_>) -> rusqlite::Result<WorkflowRow> {
    let head = |i: usize, body: &[&[&str]]| -> rusqlite::Result<Option<String>> {
        Ok(match r.get_ref(i)? {
            rusqlite::types::ValueRef::Null => None,
            v => Some(crate::workflow::heads::without(v.as_str()?, body)),
        })
    };
    let inputs = head(3, INPUTS_BODY)?.unwrap_or_default();
    let output = head(5, OUTCOME_BODY)?;
    let error = head(6, OUTCOME_BODY)?;
    Ok(WorkflowRow {
        inputs,
        output,
        error,
        ..row_without_documents(r)?
    })
}

/// [`row`] without its documents (inputs, output, error), which the caller reads.
fn row_without_documents(r: &Row<'_>) -> rusqlite::Result<WorkflowRow> {
    row_of(r, false)
}

fn row(r: &Row<'_>) -> rusqlite::Result<WorkflowRow> {
    row_of(r, true)
}

fn row_of(r: &Row<'_>, documents: bool) -> rusqlite::Result<WorkflowRow> {
    let status: String = r.get(4)?;
    let document = |i: usize| -> rusqlite::Result<Option<String>> {
        if documents { r.get(i) } else { Ok(None) }
    };
    Ok(WorkflowRow {
        id: r.get(0)?,
        name: r.get(1)?,
        definition_version: r.get(2)?,
        inputs: document(3)?.unwrap_or_default(),
        status: WorkflowStatus::parse(&status).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                4,
                rusqlite::types::Type::Text,
                format!("unknown workflow status {status}").into(),
            )
        })?,
        output: document(5)?,
        error: document(6)?,
        executor_id: r.get(7)?,
        run_token: r.get(8)?,
        recovery_attempts: r.get(9)?,
        max_recovery_attempts: r.get(10)?,
        subject: r.get(11)?,
        created_at: r.get(12)?,
        updated_at: r.get(13)?,
        started_at: r.get(14)?,
        completed_at: r.get(15)?,
    })
}

/// One workflow row.
pub fn get(conn: &Connection, id: &str) -> Result<Option<WorkflowRow>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM workflow_status WHERE workflow_id = ?1");
    Ok(super::query_row(conn, &sql, [id], row).optional()?)
}

fn must_get(conn: &Connection, id: &str) -> Result<WorkflowRow, StoreError> {
    get(conn, id)?.ok_or_else(|| StoreError::NotFound(id.to_owned()))
}

fn live_with_dedup(conn: &Connection, key: &str) -> Result<Option<WorkflowRow>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM workflow_status WHERE dedup_key = ?1 \
         AND status IN ('ENQUEUED','PENDING')"
    );
    Ok(super::query_row(conn, &sql, [key], row).optional()?)
}

pub fn start(
    conn: &Connection,
    wf: NewWorkflow,
    ext: &dyn Extension,
    key: &InputsKey,
) -> Result<Started, StoreError> {
    let sha = key.mac(&wf.id, &wf.name, &wf.inputs);
    if let Some(existing) = get(conn, &wf.id)? {
        let stored_sha: String = super::query_row(
            conn,
            "SELECT inputs_sha256 FROM workflow_status WHERE workflow_id = ?1",
            [&wf.id],
            |r| r.get(0),
        )?;
        return crate::workflow::store::start_over(existing, &wf, stored_sha == sha);
    }
    if let Some(key) = &wf.dedup_key
        && let Some(live) = live_with_dedup(conn, key)?
    {
        return Ok(Started::Duplicate(live));
    }
    let now = now_ms();
    super::exec(
        conn,
        "INSERT INTO workflow_status (workflow_id, name, definition_version, inputs, \
         inputs_sha256, status, max_recovery_attempts, dedup_key, subject, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, 'ENQUEUED', ?6, ?7, ?8, ?9, ?9)",
        params![
            wf.id,
            wf.name,
            wf.definition_version,
            wf.inputs,
            sha,
            wf.max_recovery_attempts,
            wf.dedup_key,
            wf.subject,
            now
        ],
    )?;
    for (key, value) in &wf.events {
        super::exec(
            conn,
            "INSERT INTO workflow_events (workflow_id, key, value, function_id, updated_at) \
             VALUES (?1, ?2, ?3, -1, ?4)",
            params![wf.id, key, value, now],
        )?;
    }
    for r in &wf.records {
        ext.apply(conn, Some(&wf.id), r)?;
    }
    Ok(Started::Created)
}

/// Signs this database with `key`, unless another process did first: records its fingerprint.
/// (Rows from before keys are not re-signed: their plain digest vouches for nothing.) What the
/// database says of the key after.
pub fn adopt_key(conn: &Connection, key: &InputsKey) -> Result<KeyVerdict, StoreError> {
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
    let stored: Option<String> = tx
        .query_row("SELECT fingerprint FROM inputs_key WHERE id = 1", [], |r| {
            r.get(0)
        })
        .optional()?;
    if stored.is_some() {
        return Ok(key.verdict(stored.as_deref()));
    }
    tx.execute(
        "INSERT INTO inputs_key (id, fingerprint, created_at) VALUES (1, ?1, ?2)",
        params![key.fingerprint(), now_ms()],
    )?;
    tx.commit()?;
    Ok(KeyVerdict::Matches)
}

/// True when `id`'s stored inputs verify with `key`.
fn verified(conn: &Connection, row: &WorkflowRow, key: &InputsKey) -> Result<bool, StoreError> {
    let stored: String = super::query_row(
        conn,
        "SELECT inputs_sha256 FROM workflow_status WHERE workflow_id = ?1",
        [&row.id],
        |r| r.get(0),
    )?;
    Ok(key.verifies(&row.id, &row.name, &row.inputs, &stored))
}

fn forget_submitter(conn: &Connection, id: &str) -> Result<(), StoreError> {
    super::exec(
        conn,
        "DELETE FROM workflow_events WHERE workflow_id = ?1 AND key = ?2",
        params![id, crate::workflow::store::SUBMITTER],
    )?;
    Ok(())
}

/// ENQUEUED and never claimed → CANCELLED, its submitter event kept as `never_started`.
pub fn park_unclaimed(conn: &Connection, id: &str) -> Result<bool, StoreError> {
    let now = now_ms();
    let changed = super::exec(
        conn,
        "UPDATE workflow_status SET status = 'CANCELLED', completed_at = ?1, updated_at = ?1 \
         WHERE workflow_id = ?2 AND status = 'ENQUEUED' AND EXISTS (SELECT 1 FROM \
         workflow_events WHERE workflow_id = ?2 AND key = ?3)",
        params![now, id, crate::workflow::store::SUBMITTER],
    )?;
    if changed == 0 {
        return Ok(false);
    }
    super::exec(
        conn,
        "UPDATE workflow_events SET key = ?3, updated_at = ?4 WHERE workflow_id = ?1 \
         AND key = ?2",
        params![
            id,
            crate::workflow::store::SUBMITTER,
            crate::workflow::store::NEVER_STARTED,
            now
        ],
    )?;
    Ok(true)
}

pub fn claim(
    conn: &Connection,
    id: &str,
    executor: &str,
    run_token: &str,
    key: &InputsKey,
) -> Result<Claim, StoreError> {
    let now = now_ms();
    // Inputs that do not verify were written outside manent: ended, never run.
    if let Some(row) = get(conn, id)?
        && row.status == WorkflowStatus::Enqueued
        && !verified(conn, &row, key)?
    {
        let error = serde_json::json!({"kind": "refused", "message": key.refusal(id)});
        super::exec(
            conn,
            "UPDATE workflow_status SET status = 'ERROR', error = ?1, completed_at = ?2, \
             updated_at = ?2 WHERE workflow_id = ?3 AND status = 'ENQUEUED'",
            params![error.to_string(), now, id],
        )?;
        return Ok(Claim::Refused(Box::new(must_get(conn, id)?)));
    }
    let changed = super::exec(
        conn,
        "UPDATE workflow_status SET status = 'PENDING', executor_id = ?1, run_token = ?2, \
         started_at = ?3, updated_at = ?3, recovery_attempts = recovery_attempts + 1 \
         WHERE workflow_id = ?4 AND status = 'ENQUEUED'",
        params![executor, run_token, now, id],
    )?;
    if changed == 1 {
        // Claimed: nobody needs to watch the submission any more.
        forget_submitter(conn, id)?;
    }
    let claimed = must_get(conn, id)?;
    match decide_claim(changed == 1, &claimed, run_token) {
        ClaimDecision::Claimed => Ok(Claim::Claimed(claimed)),
        ClaimDecision::NotClaimable => Ok(Claim::NotClaimable),
        ClaimDecision::DeadLetter => {
            super::exec(
                conn,
                "UPDATE workflow_status SET status = 'MAX_RECOVERY_ATTEMPTS_EXCEEDED', \
                 completed_at = ?1, updated_at = ?1 WHERE workflow_id = ?2",
                params![now, id],
            )?;
            Ok(Claim::DeadLettered(must_get(conn, id)?))
        }
    }
}

/// A clean stop of the run holding `run_token`: its claim is not counted as a crash.
pub fn stopped(conn: &Connection, id: &str, run_token: &str) -> Result<(), StoreError> {
    super::exec(
        conn,
        "UPDATE workflow_status SET recovery_attempts = MAX(recovery_attempts - 1, 0) \
         WHERE workflow_id = ?1 AND run_token = ?2 AND status = 'PENDING'",
        params![id, run_token],
    )?;
    Ok(())
}

pub fn recover(conn: &Connection) -> Result<Vec<String>, StoreError> {
    let now = now_ms();
    super::exec(
        conn,
        "UPDATE step_attempts SET ended_at = ?1, outcome = 'interrupted', \
         error = 'interrupted: the engine stopped during this attempt' WHERE ended_at IS NULL",
        [now],
    )?;
    super::exec(
        conn,
        "UPDATE workflow_status SET status = 'ENQUEUED', run_token = NULL, started_at = NULL, \
         updated_at = ?1 WHERE status = 'PENDING'",
        [now],
    )?;
    enqueued(conn)
}

pub fn enqueued(conn: &Connection) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT workflow_id FROM workflow_status WHERE status = 'ENQUEUED' \
         ORDER BY priority, created_at, workflow_id",
    )?;
    let ids = stmt
        .query_map([], |r| r.get(0))?
        .collect::<Result<Vec<String>, _>>()?;
    Ok(ids)
}

pub fn finish(
    conn: &Connection,
    id: &str,
    run_token: &str,
    out: Outcome,
) -> Result<Finished, StoreError> {
    let (status, output, error) = out.columns();
    let now = now_ms();
    let changed = super::exec(
        conn,
        "UPDATE workflow_status SET status = ?1, output = ?2, error = ?3, completed_at = ?4, \
         updated_at = ?4 WHERE workflow_id = ?5 AND status = 'PENDING' AND run_token = ?6",
        params![status.as_str(), output, error, now, id, run_token],
    )?;
    if changed == 1 {
        Ok(Finished::Written)
    } else {
        Ok(Finished::Adopted(Box::new(must_get(conn, id)?)))
    }
}

pub fn cancel(
    conn: &Connection,
    id: &str,
    records: &[Record],
    ext: &dyn Extension,
) -> Result<WorkflowRow, StoreError> {
    let now = now_ms();
    let changed = super::exec(
        conn,
        "UPDATE workflow_status SET status = 'CANCELLED', completed_at = ?1, updated_at = ?1 \
         WHERE workflow_id = ?2 AND status IN ('PENDING','ENQUEUED')",
        params![now, id],
    )?;
    let after = must_get(conn, id)?;
    if changed == 1 {
        for r in records {
            ext.apply(conn, Some(id), r)?;
        }
    }
    Ok(after)
}

pub fn resume(
    conn: &Connection,
    id: &str,
    records: &[Record],
    ext: &dyn Extension,
) -> Result<WorkflowRow, StoreError> {
    let before = must_get(conn, id)?;
    if decide_resume(&before)? == Resume::AlreadyLive {
        return Ok(before);
    }
    let key: Option<String> = super::query_row(
        conn,
        "SELECT dedup_key FROM workflow_status WHERE workflow_id = ?1",
        [id],
        |r| r.get(0),
    )?;
    if let Some(key) = key
        && let Some(live) = live_with_dedup(conn, &key)?
    {
        return Err(resume_blocked(id, &live));
    }
    super::exec(
        conn,
        "UPDATE workflow_status SET status = 'ENQUEUED', recovery_attempts = 0, \
         completed_at = NULL, updated_at = ?1 WHERE workflow_id = ?2",
        params![now_ms(), id],
    )?;
    // An operator's resume starts it whoever submitted it, and it is no longer one that
    // never started.
    forget_submitter(conn, id)?;
    super::exec(
        conn,
        "DELETE FROM workflow_events WHERE workflow_id = ?1 AND key = ?2",
        params![id, crate::workflow::store::NEVER_STARTED],
    )?;
    for r in records {
        ext.apply(conn, Some(id), r)?;
    }
    must_get(conn, id)
}

pub fn list(conn: &Connection, q: &WorkflowQuery) -> Result<Vec<WorkflowRow>, StoreError> {
    let live = if q.live_only {
        "AND status IN ('ENQUEUED','PENDING')"
    } else {
        ""
    };
    let limit = if q.limit == 0 { u32::MAX } else { q.limit };
    // The ids in order first, then each row: sorted whole, rows went through SQLite's sorter
    // with their documents (three copies of a 100,000-target deployment's 20 MB).
    let sql = format!(
        "SELECT workflow_id FROM workflow_status WHERE (?1 IS NULL OR subject = ?1) {live} \
         ORDER BY created_at DESC, workflow_id DESC LIMIT ?2"
    );
    let ids = conn
        .prepare_cached(&sql)?
        .query_map(params![q.subject, limit], |r| r.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM workflow_status WHERE workflow_id = ?1"
    ))?;
    let read = if q.heads { head_row } else { row };
    let mut rows = Vec::with_capacity(ids.len());
    for id in ids {
        // Deleted since its id was read: not listed.
        if let Some(r) = stmt.query_row([id], read).optional()? {
            rows.push(r);
        }
    }
    Ok(rows)
}
