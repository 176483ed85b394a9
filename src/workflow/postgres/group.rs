//! Group commit on PostgreSQL: the attempts and checkpoints that steps write at the same moment
//! (a fan-out of parallel targets) share one transaction, written with a handful of array
//! statements (`UNNEST`) whatever their number, the effects of each pipelined on the one
//! connection. A target step used to cost two transactions of some ten statements; in a group
//! it costs a share of six statements and of one commit.
//!
//! Each job keeps its own answer: a run that lost its workflow (fenced, cancelled, an
//! interrupting command waiting) is refused and writes nothing, while the rest of the group
//! commits. A database out of reach is every job's answer at once (each retries on its own, as
//! a write alone would); any other fault that fails the group (a deadlock with a takeover, a
//! record the database refuses) is not the group's answer: each job is then written on its own
//! and answers for itself. Every write is idempotent, so a group whose commit's outcome is
//! unknown is safely written again: its checkpoints then find themselves
//! stored and are acknowledged as such (`recommit`).

use std::collections::{BTreeSet, HashMap};

use deadpool_postgres::{Pool, Transaction};
use tokio::sync::{mpsc, oneshot};

use super::{Extension, exec, query, steps};
use crate::workflow::error::StoreError;
use crate::workflow::store::{AttemptStart, Checkpoint, StoredStep, recommit};

/// Jobs a group takes at most (a fan-out of 100 targets fills about one).
const MAX_GROUP: usize = 256;

/// A write that may share a transaction with others.
#[derive(Debug, Clone)]
pub enum Op {
    /// An attempt starts: durable before the step's body runs.
    Begin(AttemptStart),
    /// A step's result, with its effects.
    Checkpoint(Checkpoint),
}

impl Op {
    fn workflow_id(&self) -> &str {
        match self {
            Op::Begin(a) => &a.workflow_id,
            Op::Checkpoint(c) => &c.workflow_id,
        }
    }

    fn run_token(&self) -> &str {
        match self {
            Op::Begin(a) => &a.run_token,
            Op::Checkpoint(c) => &c.run_token,
        }
    }
}

struct Job {
    op: Op,
    reply: oneshot::Sender<Result<(), StoreError>>,
}

/// Where a store sends its groupable writes: one writer task, started on first use on the
/// runtime that uses the store (and again if that runtime has gone).
pub struct Group {
    sender: std::sync::Mutex<Option<mpsc::UnboundedSender<Job>>>,
}

impl Group {
    pub fn new() -> Self {
        Group {
            sender: std::sync::Mutex::new(None),
        }
    }

    /// Writes `op` in the next group and answers for it; `Err(op)` when no writer can take it
    /// (no runtime here, or the writer stopped with its runtime): the caller writes it alone.
    pub async fn write(
        &self,
        pool: &Pool,
        ext: &std::sync::Arc<dyn Extension>,
        op: Op,
    ) -> Result<Result<(), StoreError>, Op> {
        let (reply, answer) = oneshot::channel();
        let mut job = Job { op, reply };
        for _ in 0..2 {
            let Some(sender) = self.sender(pool, ext) else {
                break;
            };
            match sender.send(job) {
                // A writer dropped with its runtime took the job with it: unknown, so retried.
                Ok(()) => {
                    return Ok(answer.await.unwrap_or_else(|_| {
                        Err(StoreError::Transient(
                            "the group writer stopped before answering".into(),
                        ))
                    }));
                }
                Err(mpsc::error::SendError(j)) => job = j,
            }
        }
        Err(job.op)
    }

    /// The running writer's queue, a writer started on this runtime if there is none.
    fn sender(
        &self,
        pool: &Pool,
        ext: &std::sync::Arc<dyn Extension>,
    ) -> Option<mpsc::UnboundedSender<Job>> {
        let mut slot = self.sender.lock().ok()?;
        if let Some(s) = slot.as_ref().filter(|s| !s.is_closed()) {
            return Some(s.clone());
        }
        let handle = tokio::runtime::Handle::try_current().ok()?;
        let (tx, rx) = mpsc::unbounded_channel();
        handle.spawn(writer(rx, pool.clone(), ext.clone()));
        *slot = Some(tx.clone());
        Some(tx)
    }
}

impl Default for Group {
    fn default() -> Self {
        Self::new()
    }
}

/// Takes what waits, up to [`MAX_GROUP`], and writes it as one group; until the store goes.
async fn writer(
    mut rx: mpsc::UnboundedReceiver<Job>,
    pool: Pool,
    ext: std::sync::Arc<dyn Extension>,
) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        while jobs.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(j) => jobs.push(j),
                Err(_) => break,
            }
        }
        let ops: Vec<Op> = jobs.iter().map(|j| j.op.clone()).collect();
        let answers = match write_group(&pool, ext.as_ref(), &ops).await {
            Ok(answers) => answers,
            // The database is out of reach: every job hears it at once and retries on its own
            // (each write is idempotent), rather than wait for the others' attempts in turn.
            Err(e) if e.is_transient() => ops.iter().map(|_| Err(e.clone())).collect(),
            // The group failed as a whole: each job alone says what is true of it.
            Err(_) => {
                let mut answers = Vec::with_capacity(ops.len());
                for op in &ops {
                    answers.push(write_alone(&pool, ext.as_ref(), op).await);
                }
                answers
            }
        };
        for (job, answer) in jobs.into_iter().zip(answers) {
            let _ = job.reply.send(answer);
        }
    }
}

async fn client(pool: &Pool) -> Result<deadpool_postgres::Object, StoreError> {
    pool.get().await.map_err(|e| match e {
        deadpool_postgres::PoolError::Backend(e) => StoreError::from(e),
        other => StoreError::Transient(format!("no connection to PostgreSQL: {other}")),
    })
}

/// `op` in a transaction of its own.
pub async fn write_alone(pool: &Pool, ext: &dyn Extension, op: &Op) -> Result<(), StoreError> {
    let mut client = client(pool).await?;
    let tx = client.transaction().await?;
    match op {
        Op::Begin(a) => steps::begin_attempt(&tx, a).await?,
        Op::Checkpoint(c) => steps::checkpoint(&tx, c, ext).await?,
    }
    crate::workflow::error::injected_before_commit()?;
    tx.commit().await?;
    crate::workflow::error::injected_after_commit()
}

/// What the step boundary's check found of a workflow's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub status: String,
    pub run_token: Option<String>,
    pub interrupted: bool,
}

/// Whether `op` may be written, given its workflow's row (`None`: there is none) — the same
/// rules as a write alone (`steps::begin_attempt`, `steps::checkpoint`).
pub fn admit(op: &Op, owner: Option<&Owner>) -> Result<(), StoreError> {
    let id = op.workflow_id();
    let Some(owner) = owner else {
        return Err(StoreError::NotFound(id.to_owned()));
    };
    if owner.run_token.as_deref() != Some(op.run_token()) {
        return Err(StoreError::Fenced(id.to_owned()));
    }
    if let Op::Begin(a) = op {
        // A step in flight when the operator cancelled still checkpoints; none starts.
        if owner.status != "PENDING" {
            return Err(StoreError::Cancelled(id.to_owned()));
        }
        if a.interruptible && a.attempt == 1 && owner.interrupted {
            return Err(StoreError::Interrupted(id.to_owned()));
        }
    }
    Ok(())
}

/// Writes `ops` in one transaction: each one's answer, or the fault that failed the group.
async fn write_group(
    pool: &Pool,
    ext: &dyn Extension,
    ops: &[Op],
) -> Result<Vec<Result<(), StoreError>>, StoreError> {
    let mut client = client(pool).await?;
    let tx = client.transaction().await?;
    // The rows stay share-locked until the commit, so no owner changes before it (a cancel or
    // a takeover waits). Should one of those deadlock with the group, the database ends one
    // side, and the group's jobs are then written alone.
    let ids: Vec<&str> = ops
        .iter()
        .map(Op::workflow_id)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let owners: HashMap<String, Owner> = query(
        &tx,
        "SELECT workflow_id, status, run_token, interrupt_requested FROM workflow_status \
         WHERE workflow_id = ANY($1) ORDER BY workflow_id FOR SHARE",
        &[&ids],
    )
    .await?
    .iter()
    .map(|r| {
        (
            r.get(0),
            Owner {
                status: r.get(1),
                run_token: r.get(2),
                interrupted: r.get(3),
            },
        )
    })
    .collect();
    let mut answers: Vec<Result<(), StoreError>> = ops
        .iter()
        .map(|op| admit(op, owners.get(op.workflow_id())))
        .collect();
    let admitted = |i: &usize| answers[*i].is_ok();
    let begins: Vec<&AttemptStart> = (0..ops.len())
        .filter(admitted)
        .filter_map(|i| match &ops[i] {
            Op::Begin(a) => Some(a),
            Op::Checkpoint(_) => None,
        })
        .collect();
    let checkpoints: Vec<(usize, &Checkpoint)> = (0..ops.len())
        .filter(admitted)
        .filter_map(|i| match &ops[i] {
            Op::Checkpoint(c) => Some((i, c)),
            Op::Begin(_) => None,
        })
        .collect();
    insert_attempts(&tx, &begins).await?;
    let written = insert_outputs(&tx, &checkpoints).await?;
    let (new, stored): (Vec<_>, Vec<_>) = checkpoints
        .into_iter()
        .partition(|(_, c)| written.contains(&(c.workflow_id.clone(), c.function_id)));
    close_attempts(&tx, &new).await?;
    // The runs that moved forward: their crashes so far are not a poison step's.
    if !new.is_empty() {
        let moved: Vec<&str> = new.iter().map(|(_, c)| c.workflow_id.as_str()).collect();
        tx.execute(
            "UPDATE workflow_status SET recovery_attempts = 0 \
             WHERE workflow_id = ANY($1::TEXT[]) AND recovery_attempts > 0",
            &[&moved],
        )
        .await?;
    }
    // Effects in job order, pipelined: each job's own effects in its order.
    let on = &tx;
    let effects = new.iter().map(|(_, c)| async move {
        for effect in &c.effects {
            steps::apply_effect(on, c, effect, ext).await?;
        }
        Ok::<(), StoreError>(())
    });
    futures::future::try_join_all(effects).await?;
    // A checkpoint that found its step stored: ours (a lost acknowledgement) or another run's.
    for (i, answer) in recommitted(&tx, &stored).await? {
        answers[i] = answer;
    }
    crate::workflow::error::injected_before_commit()?;
    tx.commit().await?;
    crate::workflow::error::injected_after_commit()?;
    Ok(answers)
}

async fn insert_attempts(tx: &Transaction<'_>, begins: &[&AttemptStart]) -> Result<(), StoreError> {
    if begins.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = begins.iter().map(|a| a.workflow_id.as_str()).collect();
    let fids: Vec<i64> = begins.iter().map(|a| i64::from(a.function_id)).collect();
    let attempts: Vec<i64> = begins.iter().map(|a| i64::from(a.attempt)).collect();
    let names: Vec<&str> = begins.iter().map(|a| a.function_name.as_str()).collect();
    let tokens: Vec<&str> = begins.iter().map(|a| a.run_token.as_str()).collect();
    let started: Vec<i64> = begins.iter().map(|a| a.started_at).collect();
    exec(
        tx,
        "INSERT INTO step_attempts (workflow_id, function_id, attempt, function_name, run_token, \
         started_at) SELECT * FROM UNNEST($1::TEXT[], $2::BIGINT[], $3::BIGINT[], $4::TEXT[], \
         $5::TEXT[], $6::BIGINT[]) ON CONFLICT DO NOTHING",
        &[&ids, &fids, &attempts, &names, &tokens, &started],
    )
    .await?;
    Ok(())
}

/// Inserts the checkpoints' steps; the (workflow, step) of each one written (not already
/// stored).
async fn insert_outputs(
    tx: &Transaction<'_>,
    checkpoints: &[(usize, &Checkpoint)],
) -> Result<BTreeSet<(String, u32)>, StoreError> {
    if checkpoints.is_empty() {
        return Ok(BTreeSet::new());
    }
    let cs = checkpoints.iter().map(|(_, c)| *c);
    let ids: Vec<&str> = cs.clone().map(|c| c.workflow_id.as_str()).collect();
    let fids: Vec<i64> = cs.clone().map(|c| i64::from(c.function_id)).collect();
    let names: Vec<&str> = cs.clone().map(|c| c.function_name.as_str()).collect();
    let outputs: Vec<Option<&str>> = cs.clone().map(|c| c.output.as_deref()).collect();
    let errors: Vec<Option<&str>> = cs.clone().map(|c| c.error.as_deref()).collect();
    let attempts: Vec<i64> = cs.clone().map(|c| i64::from(c.attempts)).collect();
    let started: Vec<i64> = cs.clone().map(|c| c.started_at).collect();
    let completed: Vec<i64> = cs.map(|c| c.completed_at).collect();
    let rows = query(
        tx,
        "INSERT INTO operation_outputs (workflow_id, function_id, function_name, output, error, \
         attempts, started_at, completed_at, executor_id) \
         SELECT u.*, ws.executor_id FROM UNNEST($1::TEXT[], $2::BIGINT[], $3::TEXT[], $4::TEXT[], \
         $5::TEXT[], $6::BIGINT[], $7::BIGINT[], $8::BIGINT[]) AS u(workflow_id, function_id, \
         function_name, output, error, attempts, started_at, completed_at) \
         JOIN workflow_status ws ON ws.workflow_id = u.workflow_id \
         ON CONFLICT DO NOTHING RETURNING workflow_id, function_id",
        &[
            &ids, &fids, &names, &outputs, &errors, &attempts, &started, &completed,
        ],
    )
    .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get(0), super::u32_at(r, 1)))
        .collect())
}

/// Closes the attempts the written checkpoints end.
async fn close_attempts(
    tx: &Transaction<'_>,
    written: &[(usize, &Checkpoint)],
) -> Result<(), StoreError> {
    let closing: Vec<(&Checkpoint, u32, &str)> = written
        .iter()
        .filter_map(|(_, c)| c.close_attempt.map(|(a, o)| (*c, a, o.as_str())))
        .collect();
    if closing.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = closing
        .iter()
        .map(|(c, ..)| c.workflow_id.as_str())
        .collect();
    let fids: Vec<i64> = closing
        .iter()
        .map(|(c, ..)| i64::from(c.function_id))
        .collect();
    let attempts: Vec<i64> = closing.iter().map(|(_, a, _)| i64::from(*a)).collect();
    let ended: Vec<i64> = closing.iter().map(|(c, ..)| c.completed_at).collect();
    let outcomes: Vec<&str> = closing.iter().map(|(.., o)| *o).collect();
    let errors: Vec<Option<String>> = closing
        .iter()
        .map(|(c, ..)| {
            c.error
                .as_ref()
                .map(|_| crate::workflow::store::last_error(c))
        })
        .collect();
    exec(
        tx,
        "UPDATE step_attempts s SET ended_at = u.ended, outcome = u.outcome, \
         error = COALESCE(u.error, s.error) \
         FROM UNNEST($1::TEXT[], $2::BIGINT[], $3::BIGINT[], $4::BIGINT[], $5::TEXT[], \
         $6::TEXT[]) AS u(workflow_id, function_id, attempt, ended, outcome, error) \
         WHERE s.workflow_id = u.workflow_id AND s.function_id = u.function_id \
         AND s.attempt = u.attempt",
        &[&ids, &fids, &attempts, &ended, &outcomes, &errors],
    )
    .await?;
    Ok(())
}

/// For each checkpoint whose step was already stored, by job index: what committing it over
/// the stored one means.
async fn recommitted(
    tx: &Transaction<'_>,
    stored: &[(usize, &Checkpoint)],
) -> Result<Vec<(usize, Result<(), StoreError>)>, StoreError> {
    if stored.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = stored.iter().map(|(_, c)| c.workflow_id.as_str()).collect();
    let fids: Vec<i64> = stored
        .iter()
        .map(|(_, c)| i64::from(c.function_id))
        .collect();
    let rows: HashMap<(String, u32), StoredStep> = query(
        tx,
        "SELECT o.workflow_id, o.function_id, o.function_name, o.output, o.error, o.started_at \
         FROM operation_outputs o JOIN UNNEST($1::TEXT[], $2::BIGINT[]) AS u(workflow_id, \
         function_id) ON o.workflow_id = u.workflow_id AND o.function_id = u.function_id",
        &[&ids, &fids],
    )
    .await?
    .iter()
    .map(|r| {
        (
            (r.get(0), super::u32_at(r, 1)),
            StoredStep {
                name: r.get(2),
                output: r.get(3),
                error: r.get(4),
                started_at: r.get(5),
            },
        )
    })
    .collect();
    Ok(stored
        .iter()
        .map(|(i, c)| {
            let answer = match rows.get(&(c.workflow_id.clone(), c.function_id)) {
                Some(s) => recommit(c, s.clone()),
                None => Err(StoreError::NotFound(c.workflow_id.clone())),
            };
            (*i, answer)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn begin(attempt: u32, interruptible: bool) -> Op {
        Op::Begin(AttemptStart {
            workflow_id: "d-1".into(),
            run_token: "r1".into(),
            function_id: 4,
            function_name: "deploy.web-1".into(),
            attempt,
            started_at: 10,
            interruptible,
        })
    }

    fn checkpoint() -> Op {
        Op::Checkpoint(Checkpoint {
            workflow_id: "d-1".into(),
            run_token: "r1".into(),
            function_id: 4,
            function_name: "deploy.web-1".into(),
            output: Some("{}".into()),
            error: None,
            attempts: 1,
            close_attempt: None,
            started_at: 10,
            completed_at: 20,
            effects: Vec::new(),
        })
    }

    fn owner(status: &str, token: &str, interrupted: bool) -> Owner {
        Owner {
            status: status.into(),
            run_token: Some(token.into()),
            interrupted,
        }
    }

    #[test]
    fn a_run_that_owns_its_pending_workflow_writes() {
        let o = owner("PENDING", "r1", false);
        assert!(admit(&begin(1, true), Some(&o)).is_ok());
        assert!(admit(&checkpoint(), Some(&o)).is_ok());
    }

    #[test]
    fn another_runs_token_fences_both_kinds() {
        let o = owner("PENDING", "r2", false);
        assert!(matches!(
            admit(&begin(1, false), Some(&o)),
            Err(StoreError::Fenced(_))
        ));
        assert!(matches!(
            admit(&checkpoint(), Some(&o)),
            Err(StoreError::Fenced(_))
        ));
        assert!(matches!(
            admit(&checkpoint(), None),
            Err(StoreError::NotFound(_))
        ));
    }

    #[test]
    fn a_cancelled_workflow_starts_nothing_but_its_step_in_flight_checkpoints() {
        let o = owner("CANCELLED", "r1", false);
        assert!(matches!(
            admit(&begin(2, false), Some(&o)),
            Err(StoreError::Cancelled(_))
        ));
        assert!(admit(&checkpoint(), Some(&o)).is_ok());
    }

    #[test]
    fn an_interrupting_command_stops_first_attempts_of_interruptible_steps_only() {
        let o = owner("PENDING", "r1", true);
        assert!(matches!(
            admit(&begin(1, true), Some(&o)),
            Err(StoreError::Interrupted(_))
        ));
        assert!(admit(&begin(2, true), Some(&o)).is_ok(), "a retry goes on");
        assert!(admit(&begin(1, false), Some(&o)).is_ok());
    }
}
