//! The checkpoint log on PostgreSQL: attempts, step outputs with their effects, and the mailbox
//! (semantics of `../sqlite/steps.rs`).

use deadpool_postgres::{GenericClient, Transaction};
use tokio_postgres::Row;

use super::{Extension, events, exec, query, query_opt, u32_at};
use crate::sys::now_ms;
use crate::workflow::error::StoreError;
use crate::workflow::store::{
    ACCEPTS, AttemptEnd, AttemptOutcome, AttemptRecord, AttemptStart, Checkpoint, Effect, History,
    Message, SendRequest, Sent, StepRecord, StoredStep,
};

pub async fn history<C: GenericClient>(c: &C, id: &str) -> Result<History, StoreError> {
    history_except(c, id, &[]).await
}

/// [`history`] without the steps named in `skip`.
pub async fn history_except<C: GenericClient>(
    c: &C,
    id: &str,
    skip: &[&str],
) -> Result<History, StoreError> {
    let steps = query(
        c,
        "SELECT function_id, function_name, output, error, attempts, started_at, completed_at \
         FROM operation_outputs WHERE workflow_id = $1 AND function_name <> ALL($2) \
         ORDER BY function_id",
        &[&id, &skip],
    )
    .await?
    .iter()
    .map(|r| StepRecord {
        function_id: u32_at(r, 0),
        function_name: r.get(1),
        output: r.get(2),
        error: r.get(3),
        attempts: u32_at(r, 4),
        started_at: r.get(5),
        completed_at: r.get(6),
    })
    .collect();
    let attempts = query(
        c,
        "SELECT function_id, attempt, function_name, started_at, ended_at, outcome, error \
         FROM step_attempts WHERE workflow_id = $1 ORDER BY function_id, attempt",
        &[&id],
    )
    .await?
    .iter()
    .map(|r| {
        let outcome: Option<String> = r.get(5);
        AttemptRecord {
            function_id: u32_at(r, 0),
            attempt: u32_at(r, 1),
            function_name: r.get(2),
            started_at: r.get(3),
            ended_at: r.get(4),
            outcome: outcome.as_deref().and_then(AttemptOutcome::parse),
            error: r.get(6),
        }
    })
    .collect();
    Ok(History { steps, attempts })
}

/// How the ownership check locks the workflow's row.
#[derive(Clone, Copy)]
enum Lock {
    /// Writes beside the row (a checkpoint): parallel steps do not wait for each other, a
    /// cancel or a takeover waits for them.
    Share,
    /// Changes the row too.
    Update,
}

/// The step-boundary check (design/durable-workflows.md B.3 step 1): the run must still own a PENDING workflow. The row
/// stays locked until the transaction ends, so ownership cannot change before the commit.
async fn check_owner(
    tx: &Transaction<'_>,
    id: &str,
    run_token: &str,
    boundary: bool,
    lock: Lock,
) -> Result<bool, StoreError> {
    let sql = match lock {
        Lock::Share => {
            "SELECT status, run_token, interrupt_requested FROM workflow_status \
             WHERE workflow_id = $1 FOR SHARE"
        }
        Lock::Update => {
            "SELECT status, run_token, interrupt_requested FROM workflow_status \
             WHERE workflow_id = $1 FOR UPDATE"
        }
    };
    let Some(row) = query_opt(tx, sql, &[&id]).await? else {
        return Err(StoreError::NotFound(id.to_owned()));
    };
    let (status, token, interrupted): (String, Option<String>, bool) =
        (row.get(0), row.get(1), row.get(2));
    if token.as_deref() != Some(run_token) {
        return Err(StoreError::Fenced(id.to_owned()));
    }
    // A step in flight when the operator cancelled still checkpoints; the next one does not start.
    if boundary && status != "PENDING" {
        return Err(StoreError::Cancelled(id.to_owned()));
    }
    Ok(interrupted)
}

pub async fn begin_attempt(tx: &Transaction<'_>, a: &AttemptStart) -> Result<(), StoreError> {
    let interrupted = check_owner(tx, &a.workflow_id, &a.run_token, true, Lock::Share).await?;
    if a.interruptible && a.attempt == 1 && interrupted {
        return Err(StoreError::Interrupted(a.workflow_id.clone()));
    }
    exec(
        tx,
        "INSERT INTO step_attempts (workflow_id, function_id, attempt, function_name, run_token, \
         started_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        &[
            &a.workflow_id,
            &i64::from(a.function_id),
            &i64::from(a.attempt),
            &a.function_name,
            &a.run_token,
            &a.started_at,
        ],
    )
    .await?;
    Ok(())
}

pub async fn end_attempt<C: GenericClient>(c: &C, a: &AttemptEnd) -> Result<(), StoreError> {
    exec(
        c,
        "UPDATE step_attempts SET ended_at = $1, outcome = $2, error = $3 \
         WHERE workflow_id = $4 AND function_id = $5 AND attempt = $6",
        &[
            &a.ended_at,
            &a.outcome.as_str(),
            &a.error,
            &a.workflow_id,
            &i64::from(a.function_id),
            &i64::from(a.attempt),
        ],
    )
    .await?;
    Ok(())
}

pub async fn checkpoint(
    tx: &Transaction<'_>,
    c: &Checkpoint,
    ext: &dyn Extension,
) -> Result<(), StoreError> {
    check_owner(tx, &c.workflow_id, &c.run_token, false, Lock::Share).await?;
    let function_id = i64::from(c.function_id);
    let inserted = exec(
        tx,
        "INSERT INTO operation_outputs (workflow_id, function_id, function_name, output, error, \
         attempts, started_at, completed_at, executor_id) \
         SELECT $1, $2, $3, $4, $5, $6, $7, $8, executor_id FROM workflow_status \
         WHERE workflow_id = $1 ON CONFLICT DO NOTHING",
        &[
            &c.workflow_id,
            &function_id,
            &c.function_name,
            &c.output,
            &c.error,
            &i64::from(c.attempts),
            &c.started_at,
            &c.completed_at,
        ],
    )
    .await?;
    if inserted == 0 {
        let stored = query_opt(
            tx,
            "SELECT function_name, output, error, started_at FROM operation_outputs \
             WHERE workflow_id = $1 AND function_id = $2",
            &[&c.workflow_id, &function_id],
        )
        .await?
        .ok_or_else(|| StoreError::NotFound(c.workflow_id.clone()))?;
        return crate::workflow::store::recommit(
            c,
            StoredStep {
                name: stored.get(0),
                output: stored.get(1),
                error: stored.get(2),
                started_at: stored.get(3),
            },
        );
    }
    // The run moved forward: its crashes so far are not a poison step's.
    exec(
        tx,
        "UPDATE workflow_status SET recovery_attempts = 0 \
         WHERE workflow_id = $1 AND recovery_attempts > 0",
        &[&c.workflow_id],
    )
    .await?;
    if let Some((attempt, outcome)) = c.close_attempt {
        let error = c
            .error
            .as_ref()
            .map(|_| crate::workflow::store::last_error(c));
        exec(
            tx,
            "UPDATE step_attempts SET ended_at = $1, outcome = $2, error = COALESCE($3, error) \
             WHERE workflow_id = $4 AND function_id = $5 AND attempt = $6",
            &[
                &c.completed_at,
                &outcome.as_str(),
                &error,
                &c.workflow_id,
                &function_id,
                &i64::from(attempt),
            ],
        )
        .await?;
    }
    for effect in &c.effects {
        apply_effect(tx, c, effect, ext).await?;
    }
    Ok(())
}

/// Writes one effect of checkpoint `c`.
pub async fn apply_effect(
    tx: &Transaction<'_>,
    c: &Checkpoint,
    effect: &Effect,
    ext: &dyn Extension,
) -> Result<(), StoreError> {
    match effect {
        Effect::Event { key, value } => {
            events::set(tx, &c.workflow_id, c.function_id, key, value).await
        }
        Effect::Record(r) => ext.apply(tx, Some(&c.workflow_id), r).await,
    }
}

const MESSAGE_COLUMNS: &str =
    "message_id, destination_id, topic, message, sender, created_at, interrupts";

fn message_row(r: &Row) -> Message {
    Message {
        id: r.get(0),
        destination: r.get(1),
        topic: r.get(2),
        payload: r.get(3),
        sender: r.get(4),
        created_at: r.get(5),
        interrupts: r.get(6),
    }
}

/// The interrupt flag follows the mailbox: set while an interrupting command waits.
async fn sync_interrupt(tx: &Transaction<'_>, id: &str) -> Result<(), StoreError> {
    exec(
        tx,
        "UPDATE workflow_status SET interrupt_requested = EXISTS (SELECT 1 FROM notifications \
         WHERE destination_id = $1 AND consumed_by_function_id IS NULL AND interrupts) \
         WHERE workflow_id = $1",
        &[&id],
    )
    .await?;
    Ok(())
}

pub async fn consume(
    tx: &Transaction<'_>,
    id: &str,
    run_token: &str,
    function_id: u32,
    topics: &[String],
) -> Result<Option<Message>, StoreError> {
    let fid = i64::from(function_id);
    let recorded = query_opt(
        tx,
        "SELECT output FROM operation_outputs WHERE workflow_id = $1 AND function_id = $2",
        &[&id, &fid],
    )
    .await?;
    if let Some(r) = recorded {
        // A retry after a lost acknowledgement: the message was consumed by this very step.
        let output: Option<String> = r.get(0);
        return Ok(output
            .as_deref()
            .map(serde_json::from_str)
            .transpose()?
            .flatten());
    }
    check_owner(tx, id, run_token, true, Lock::Update).await?;
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM notifications WHERE destination_id = $1 \
         AND consumed_by_function_id IS NULL AND topic = ANY($2) ORDER BY created_at, seq LIMIT 1"
    );
    let Some(msg) = query_opt(tx, &sql, &[&id, &topics])
        .await?
        .as_ref()
        .map(message_row)
    else {
        return Ok(None);
    };
    exec(
        tx,
        "UPDATE notifications SET consumed_by_function_id = $1 WHERE message_id = $2",
        &[&fid, &msg.id],
    )
    .await?;
    let now = now_ms();
    let output = serde_json::to_string(&Some(&msg))?;
    exec(
        tx,
        "INSERT INTO operation_outputs (workflow_id, function_id, function_name, output, attempts, \
         started_at, completed_at) VALUES ($1, $2, 'engine.recv', $3, 1, $4, $4)",
        &[&id, &fid, &output, &now],
    )
    .await?;
    if msg.interrupts {
        sync_interrupt(tx, id).await?;
    }
    // Acting on a command: the workflow takes nothing else until it says what it takes next.
    exec(
        tx,
        "UPDATE workflow_events SET value = '[]', updated_at = $3 \
         WHERE workflow_id = $1 AND key = $2",
        &[&id, &ACCEPTS, &now],
    )
    .await?;
    Ok(Some(msg))
}

pub async fn send(
    tx: &Transaction<'_>,
    req: &SendRequest,
    ext: &dyn Extension,
) -> Result<Sent, StoreError> {
    let m = &req.message;
    let Some(status) = query_opt(
        tx,
        "SELECT status FROM workflow_status WHERE workflow_id = $1 FOR UPDATE",
        &[&m.destination],
    )
    .await?
    .map(|r| r.get::<_, String>(0)) else {
        return Err(StoreError::NotFound(m.destination.clone()));
    };
    let duplicate = query_opt(
        tx,
        "SELECT 1 FROM notifications WHERE message_id = $1",
        &[&m.id],
    )
    .await?
    .is_some();
    if let Some(sent) = crate::workflow::store::undeliverable(m, &status, duplicate) {
        return Ok(sent);
    }
    if req.guarded {
        let value: Option<String> = query_opt(
            tx,
            "SELECT value FROM workflow_events WHERE workflow_id = $1 AND key = $2",
            &[&m.destination, &ACCEPTS],
        )
        .await?
        .map(|r| r.get(0));
        if let Some(why) = crate::workflow::store::refusal(m, value.as_deref()) {
            return Ok(Sent::Rejected(why));
        }
    }
    exec(
        tx,
        "INSERT INTO notifications (message_id, destination_id, topic, message, sender, \
         created_at, interrupts) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[
            &m.id,
            &m.destination,
            &m.topic,
            &m.payload,
            &m.sender,
            &m.created_at,
            &m.interrupts,
        ],
    )
    .await?;
    if m.interrupts {
        sync_interrupt(tx, &m.destination).await?;
    }
    for r in &req.records {
        ext.apply(tx, Some(&m.destination), r).await?;
    }
    Ok(Sent::Delivered)
}

pub async fn pending_messages<C: GenericClient>(
    c: &C,
    id: &str,
) -> Result<Vec<Message>, StoreError> {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM notifications WHERE destination_id = $1 \
         AND consumed_by_function_id IS NULL ORDER BY created_at, seq"
    );
    Ok(query(c, &sql, &[&id])
        .await?
        .iter()
        .map(message_row)
        .collect())
}
