//! The checkpoint log: attempts, step outputs with their effects, and the mailbox.

use rusqlite::{Connection, OptionalExtension, params, params_from_iter};

use super::{Extension, events};
use crate::sys::now_ms;
use crate::workflow::error::StoreError;
use crate::workflow::store::{
    ACCEPTS, AttemptEnd, AttemptOutcome, AttemptRecord, AttemptStart, Checkpoint, Effect, History,
    Message, SendRequest, Sent, StepRecord, StoredStep,
};

pub fn history(conn: &Connection, id: &str) -> Result<History, StoreError> {
    history_except(conn, id, &[])
}

/// [`history`] without the steps named in `skip`.
pub fn history_except(conn: &Connection, id: &str, skip: &[&str]) -> Result<History, StoreError> {
    let skip = serde_json::to_string(skip).map_err(|e| StoreError::Sql(e.to_string()))?;
    let mut stmt = conn.prepare_cached(
        "SELECT function_id, function_name, output, error, attempts, started_at, completed_at \
         FROM operation_outputs WHERE workflow_id = ?1 \
         AND function_name NOT IN (SELECT value FROM json_each(?2)) ORDER BY function_id",
    )?;
    let steps = stmt
        .query_map(rusqlite::params![id, skip], |r| {
            Ok(StepRecord {
                function_id: r.get(0)?,
                function_name: r.get(1)?,
                output: r.get(2)?,
                error: r.get(3)?,
                attempts: r.get(4)?,
                started_at: r.get(5)?,
                completed_at: r.get(6)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut stmt = conn.prepare_cached(
        "SELECT function_id, attempt, function_name, started_at, ended_at, outcome, error \
         FROM step_attempts WHERE workflow_id = ?1 ORDER BY function_id, attempt",
    )?;
    let attempts = stmt
        .query_map([id], |r| {
            let outcome: Option<String> = r.get(5)?;
            Ok(AttemptRecord {
                function_id: r.get(0)?,
                attempt: r.get(1)?,
                function_name: r.get(2)?,
                started_at: r.get(3)?,
                ended_at: r.get(4)?,
                outcome: outcome.as_deref().and_then(AttemptOutcome::parse),
                error: r.get(6)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(History { steps, attempts })
}

/// The step-boundary check (design/durable-workflows.md B.3 step 1): the run must still own a PENDING workflow.
fn check_owner(
    conn: &Connection,
    id: &str,
    run_token: &str,
    boundary: bool,
) -> Result<(), StoreError> {
    let row: Option<(String, Option<String>)> = super::query_row(
        conn,
        "SELECT status, run_token FROM workflow_status WHERE workflow_id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()?;
    let Some((status, token)) = row else {
        return Err(StoreError::NotFound(id.to_owned()));
    };
    if token.as_deref() != Some(run_token) {
        return Err(StoreError::Fenced(id.to_owned()));
    }
    // A step in flight when the operator cancelled still checkpoints; the next one does not start.
    if boundary && status != "PENDING" {
        return Err(StoreError::Cancelled(id.to_owned()));
    }
    Ok(())
}

pub fn begin_attempt(conn: &Connection, a: &AttemptStart) -> Result<(), StoreError> {
    check_owner(conn, &a.workflow_id, &a.run_token, true)?;
    if a.interruptible && a.attempt == 1 {
        let interrupted: bool = super::query_row(
            conn,
            "SELECT interrupt_requested FROM workflow_status WHERE workflow_id = ?1",
            [&a.workflow_id],
            |r| r.get(0),
        )?;
        if interrupted {
            return Err(StoreError::Interrupted(a.workflow_id.clone()));
        }
    }
    super::exec(
        conn,
        "INSERT INTO step_attempts (workflow_id, function_id, attempt, function_name, run_token, \
         started_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
        params![
            a.workflow_id,
            a.function_id,
            a.attempt,
            a.function_name,
            a.run_token,
            a.started_at
        ],
    )?;
    Ok(())
}

pub fn end_attempt(conn: &Connection, a: &AttemptEnd) -> Result<(), StoreError> {
    super::exec(
        conn,
        "UPDATE step_attempts SET ended_at = ?1, outcome = ?2, error = ?3 \
         WHERE workflow_id = ?4 AND function_id = ?5 AND attempt = ?6",
        params![
            a.ended_at,
            a.outcome.as_str(),
            a.error,
            a.workflow_id,
            a.function_id,
            a.attempt
        ],
    )?;
    Ok(())
}

pub fn checkpoint(
    conn: &Connection,
    c: &Checkpoint,
    ext: &dyn Extension,
) -> Result<(), StoreError> {
    check_owner(conn, &c.workflow_id, &c.run_token, false)?;
    let inserted = super::exec(
        conn,
        "INSERT INTO operation_outputs (workflow_id, function_id, function_name, output, error, \
         attempts, started_at, completed_at, executor_id) \
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, executor_id FROM workflow_status \
         WHERE workflow_id = ?1 ON CONFLICT DO NOTHING",
        params![
            c.workflow_id,
            c.function_id,
            c.function_name,
            c.output,
            c.error,
            c.attempts,
            c.started_at,
            c.completed_at
        ],
    )?;
    if inserted == 0 {
        let stored = super::query_row(
            conn,
            "SELECT function_name, output, error, started_at FROM operation_outputs \
             WHERE workflow_id = ?1 AND function_id = ?2",
            params![c.workflow_id, c.function_id],
            |r| {
                Ok(StoredStep {
                    name: r.get(0)?,
                    output: r.get(1)?,
                    error: r.get(2)?,
                    started_at: r.get(3)?,
                })
            },
        )?;
        return crate::workflow::store::recommit(c, stored);
    }
    // The run moved forward: its crashes so far are not a poison step's.
    super::exec(
        conn,
        "UPDATE workflow_status SET recovery_attempts = 0 \
         WHERE workflow_id = ?1 AND recovery_attempts > 0",
        params![c.workflow_id],
    )?;
    if let Some((attempt, outcome)) = c.close_attempt {
        let error = c
            .error
            .as_ref()
            .map(|_| crate::workflow::store::last_error(c));
        super::exec(
            conn,
            "UPDATE step_attempts SET ended_at = ?1, outcome = ?2, error = COALESCE(?3, error) \
             WHERE workflow_id = ?4 AND function_id = ?5 AND attempt = ?6",
            params![
                c.completed_at,
                outcome.as_str(),
                error,
                c.workflow_id,
                c.function_id,
                attempt
            ],
        )?;
    }
    for effect in &c.effects {
        match effect {
            Effect::Event { key, value } => {
                events::set(conn, &c.workflow_id, c.function_id, key, value)?;
            }
            Effect::Record(r) => ext.apply(conn, Some(&c.workflow_id), r)?,
        }
    }
    Ok(())
}

fn message_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Message> {
    Ok(Message {
        id: r.get(0)?,
        destination: r.get(1)?,
        topic: r.get(2)?,
        payload: r.get(3)?,
        sender: r.get(4)?,
        created_at: r.get(5)?,
        interrupts: r.get(6)?,
    })
}

/// The interrupt flag follows the mailbox: set while an interrupting command waits.
fn sync_interrupt(conn: &Connection, id: &str) -> Result<(), StoreError> {
    super::exec(
        conn,
        "UPDATE workflow_status SET interrupt_requested = EXISTS (SELECT 1 FROM notifications \
         WHERE destination_id = ?1 AND consumed_by_function_id IS NULL AND interrupts = 1) \
         WHERE workflow_id = ?1",
        [id],
    )?;
    Ok(())
}

pub fn consume(
    conn: &Connection,
    id: &str,
    run_token: &str,
    function_id: u32,
    topics: &[String],
) -> Result<Option<Message>, StoreError> {
    let recorded: Option<Option<String>> = super::query_row(
        conn,
        "SELECT output FROM operation_outputs WHERE workflow_id = ?1 AND function_id = ?2",
        params![id, function_id],
        |r| r.get(0),
    )
    .optional()?;
    if let Some(output) = recorded {
        // A retry after a lost acknowledgement: the message was consumed by this very step.
        return Ok(output
            .as_deref()
            .map(serde_json::from_str)
            .transpose()?
            .flatten());
    }
    check_owner(conn, id, run_token, true)?;
    let marks = vec!["?"; topics.len()].join(",");
    let sql = format!(
        "SELECT message_id, destination_id, topic, message, sender, created_at, interrupts \
         FROM notifications WHERE destination_id = ? AND consumed_by_function_id IS NULL \
         AND topic IN ({marks}) ORDER BY created_at, rowid LIMIT 1"
    );
    let args = std::iter::once(id.to_owned()).chain(topics.iter().cloned());
    let found = conn
        .query_row(&sql, params_from_iter(args), message_row)
        .optional()?;
    let Some(msg) = found else { return Ok(None) };
    super::exec(
        conn,
        "UPDATE notifications SET consumed_by_function_id = ?1 WHERE message_id = ?2",
        params![function_id, msg.id],
    )?;
    let now = now_ms();
    let output = serde_json::to_string(&Some(&msg))?;
    super::exec(
        conn,
        "INSERT INTO operation_outputs (workflow_id, function_id, function_name, output, attempts, \
         started_at, completed_at) VALUES (?1, ?2, 'engine.recv', ?3, 1, ?4, ?4)",
        params![id, function_id, output, now],
    )?;
    if msg.interrupts {
        sync_interrupt(conn, id)?;
    }
    // Acting on a command: the workflow takes nothing else until it says what it takes next.
    super::exec(
        conn,
        "UPDATE workflow_events SET value = '[]', updated_at = ?3 \
         WHERE workflow_id = ?1 AND key = ?2",
        params![id, ACCEPTS, now],
    )?;
    Ok(Some(msg))
}

pub fn send(conn: &Connection, req: &SendRequest, ext: &dyn Extension) -> Result<Sent, StoreError> {
    let m = &req.message;
    let status: Option<String> = super::query_row(
        conn,
        "SELECT status FROM workflow_status WHERE workflow_id = ?1",
        [&m.destination],
        |r| r.get(0),
    )
    .optional()?;
    let Some(status) = status else {
        return Err(StoreError::NotFound(m.destination.clone()));
    };
    let duplicate: bool = super::query_row(
        conn,
        "SELECT EXISTS (SELECT 1 FROM notifications WHERE message_id = ?1)",
        [&m.id],
        |r| r.get(0),
    )?;
    if let Some(sent) = crate::workflow::store::undeliverable(m, &status, duplicate) {
        return Ok(sent);
    }
    if req.guarded {
        let value: Option<String> = super::query_row(
            conn,
            "SELECT value FROM workflow_events WHERE workflow_id = ?1 AND key = ?2",
            params![m.destination, ACCEPTS],
            |r| r.get(0),
        )
        .optional()?;
        if let Some(why) = crate::workflow::store::refusal(m, value.as_deref()) {
            return Ok(Sent::Rejected(why));
        }
    }
    super::exec(
        conn,
        "INSERT INTO notifications (message_id, destination_id, topic, message, sender, \
         created_at, interrupts) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            m.id,
            m.destination,
            m.topic,
            m.payload,
            m.sender,
            m.created_at,
            m.interrupts
        ],
    )?;
    if m.interrupts {
        sync_interrupt(conn, &m.destination)?;
    }
    for r in &req.records {
        ext.apply(conn, Some(&m.destination), r)?;
    }
    Ok(Sent::Delivered)
}

pub fn pending_messages(conn: &Connection, id: &str) -> Result<Vec<Message>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT message_id, destination_id, topic, message, sender, created_at, interrupts \
         FROM notifications WHERE destination_id = ?1 AND consumed_by_function_id IS NULL \
         ORDER BY created_at, rowid",
    )?;
    let rows = stmt
        .query_map([id], message_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}
