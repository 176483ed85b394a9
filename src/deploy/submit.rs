//! Starting deploys and rollbacks, in-process or for an engine running elsewhere: one live
//! deployment per application and environment. Re-running an interrupted deploy resumes it; re-
//! running a deploy whose targets failed retries them; a new deploy replaces one that failed
//! and waits for a decision. A rollback with nothing to go back to is refused before it starts.

use super::command::{self, OperatorCommand};
use super::lineage::changes_releases;
use super::plan;
use super::records::Db;
use super::records::Lock;
use super::releases::{self, Move, Transitions};
use super::state::{Kind, Phase};
use super::{DeployInput, RollbackInput, VERSION};
use crate::config::EnvSpec;
use crate::operator::Operator;
use crate::workflow::StoreError;
use crate::workflow::store::{NewWorkflow, Record, Started, WorkflowRow};

/// What a submission did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submitted {
    /// A new deployment.
    Started(String),
    /// The same deploy was interrupted; it continues from its last checkpoint.
    Resuming(String),
    /// The same deploy failed on targets and waited for a decision: they run again.
    Retrying(String),
}

impl Submitted {
    /// The deployment id.
    pub fn id(&self) -> &str {
        match self {
            Submitted::Started(id) | Submitted::Resuming(id) | Submitted::Retrying(id) => id,
        }
    }
}

/// Why a submission was refused.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// Another deployment of the same application and environment is live.
    #[error(
        "{id} ({what}) is still in progress on {subject}: wait for it, stop it with \
         `manent cancel {id}`, or continue it with `manent resume {id}`"
    )]
    Busy {
        id: String,
        what: String,
        subject: String,
    },
    /// A rollback with nowhere to go.
    #[error("{0}")]
    NothingToRollBack(String),
    /// What was asked cannot be deployed (a version that is not a version).
    #[error("{0}")]
    BadInput(String),
    /// The application's environment is locked.
    #[error(
        "{} is locked by {} since {}{}: {} — wait for `manent unlock {}`, or go through \
         it with `--force --reason \"…\"` (journaled as a break-glass)",
        .0.subject, .0.owner(), crate::format::time(.0.since), until(.0), .0.reason,
        .0.subject.replacen('/', " ", 1)
    )]
    Locked(Box<Lock>),
    /// The database refused.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn until(lock: &Lock) -> String {
    match lock.expires_at {
        Some(at) => format!(" until {}", crate::format::time(at)),
        None => String::new(),
    }
}

/// Who submits, why, and the engine's crash-loop limit.
#[derive(Debug, Clone)]
pub struct Submission<'a> {
    /// The operator.
    pub operator: &'a Operator,
    /// Their reason, journaled.
    pub reason: Option<&'a str>,
    /// Crashed runs before the deployment is dead-lettered.
    pub max_recovery_attempts: u32,
    /// Go through a deploy lock (a break-glass: needs a reason, and is journaled).
    pub force: bool,
    /// The engine that runs it (`engine.executor_id`): on a shared database, the others leave
    /// it to that one.
    pub executor: &'a str,
    /// The process that submits it: an engine claims the submission only while it runs (one
    /// that went away before any engine claimed it leaves it for an operator's resume).
    pub submitter: Option<crate::workflow::store::Submitter>,
}

impl<'a> Submission<'a> {
    /// A submission by `operator`, for `reason`, that respects locks.
    pub fn new(
        operator: &'a Operator,
        reason: Option<&'a str>,
        engine: &'a crate::config::EngineSettings,
    ) -> Self {
        Submission {
            operator,
            reason,
            max_recovery_attempts: engine.max_recovery_attempts,
            force: false,
            executor: &engine.executor_id,
            submitter: Some(crate::workflow::store::Submitter::this_process(
                &operator.display(),
            )),
        }
    }
}

/// Refuses a start on a locked subject, or — forced, with a reason — returns the break-glass
/// journal entry that commits with the start (empty when nothing is locked).
pub async fn through_lock(
    db: &dyn Db,
    spec: &EnvSpec,
    kind: &str,
    sub: &Submission<'_>,
) -> Result<Vec<Record>, SubmitError> {
    let subject = spec.subject();
    let now = crate::sys::now_ms();
    let Some(lock) = db
        .locks(now)
        .await?
        .into_iter()
        .find(|l| l.subject == subject)
    else {
        return Ok(Vec::new());
    };
    if !sub.force {
        return Err(SubmitError::Locked(Box::new(lock)));
    }
    if sub.reason.is_none_or(|r| r.trim().is_empty()) {
        return Err(SubmitError::BadInput(format!(
            "{subject} is locked by {}: a forced {kind} needs a reason (`--reason \"…\"`) for \
             the journal",
            lock.owner()
        )));
    }
    let detail = format!(
        "{kind} through the lock of {} ({})",
        lock.owner(),
        lock.reason
    );
    let entry = super::records::JournalEntry::by(
        sub.operator,
        "break-glass",
        None,
        Some(&subject),
        Some(detail),
        sub.reason,
    );
    Ok(vec![entry.record()])
}

/// A fresh deployment id: `dep-YYYYMMDD-HHMMSSmmm-` (UTC, to the millisecond: ids sort by
/// when they were made) and 64 random bits in 13 characters of Crockford's base32, lower case
/// (no i, l, o or u to misread). Two submissions in the same millisecond collide once in
/// 2^64; its last 11 characters — what a narrow console shows and the CLI takes — are 55 of
/// those random bits.
pub fn new_id() -> String {
    let now = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    let digits: String = now.chars().filter(char::is_ascii_digit).collect();
    let (date, time) = digits.split_at(8.min(digits.len()));
    format!("dep-{date}-{time}-{}", base32(fastrand::u64(..)))
}

/// `n` in 13 characters of Crockford's base32 (5 bits each, the first holds the top 4).
fn base32(n: u64) -> String {
    const DIGITS: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";
    (0..13)
        .rev()
        .map(|i| char::from(DIGITS[usize::try_from((n >> (i * 5)) & 31).unwrap_or(0)]))
        .collect()
}

/// How many fresh ids a submission tries when the one it drew is taken.
const ID_TRIES: u32 = 3;

fn describe(row: &WorkflowRow, phase: Option<&Phase>) -> String {
    let input: Option<DeployInput> = serde_json::from_str(&row.inputs).ok();
    let what = match input {
        Some(i) if changes_releases(&row.name) => {
            format!(
                "{} of {} by {}",
                row.name, i.spec.artifact.version, i.operator
            )
        }
        _ => row.name.clone(),
    };
    match phase {
        Some(p @ (Phase::AwaitingDecision { .. } | Phase::Canary { .. })) => {
            format!("{what}: {p}")
        }
        _ => what,
    }
}

async fn phase_of(db: &dyn Db, id: &str) -> Option<Phase> {
    db.events(id)
        .await
        .ok()?
        .get("phase")
        .and_then(|p| serde_json::from_str(p).ok())
}

/// The same deploy: every setting equal, whatever words said why its plugin was chosen (the
/// other plugins' errors may read differently each time they are asked).
fn same_spec(a: &EnvSpec, b: &EnvSpec) -> bool {
    let words = |s: &EnvSpec| EnvSpec {
        chosen: None,
        ..s.clone()
    };
    words(a) == words(b)
}

/// Among the deployments an engine resumed as it started, the one that is this very deploy
/// (same kind, spec and dry-run), unless it waits for a decision: a `manent deploy` run again
/// after a crash follows it. Submitting instead races the resumed run — one that had only its
/// outcome left to write ends first, and a second, identical deployment would start.
pub async fn resumed_same(
    db: &dyn Db,
    resumed: &[String],
    spec: &EnvSpec,
    dry_run: bool,
) -> Option<String> {
    let workflow = if spec.strategy.canary().is_some() && !dry_run {
        Kind::Canary.workflow()
    } else {
        Kind::Deploy.workflow()
    };
    for id in resumed {
        let Ok(Some(row)) = db.workflow(id).await else {
            continue;
        };
        let same = row.name == workflow
            && serde_json::from_str::<DeployInput>(&row.inputs)
                .is_ok_and(|i| same_spec(&i.spec, spec) && i.dry_run == dry_run);
        // One that waits for a decision stays there: [`deploy`] sends it the retry.
        let awaiting = matches!(
            phase_of(db, &row.id).await,
            Some(Phase::AwaitingDecision { .. })
        );
        if same && !awaiting {
            return Some(row.id);
        }
    }
    None
}

/// Submits a deploy. An identical deploy that is still live is resumed (interrupted by a crash,
/// say) or retried (its targets failed); a different one that failed and waits for a decision
/// is replaced, and the journal says so.
pub async fn deploy(
    db: &dyn Db,
    spec: &EnvSpec,
    dry_run: bool,
    sub: &Submission<'_>,
) -> Result<Submitted, SubmitError> {
    crate::config::check_version(&spec.artifact.version).map_err(SubmitError::BadInput)?;
    // What ships is settled now: its digest checked against what is expected, and recorded.
    let mut pinned = spec.clone();
    super::artifact::pin(&mut pinned).map_err(SubmitError::BadInput)?;
    let spec = &pinned;
    let input = DeployInput {
        spec: spec.clone(),
        dry_run,
        operator: sub.operator.display(),
        force: sub.force && !dry_run,
        revert_of: None,
        testers: Default::default(),
    };
    let detail = format!(
        "{}{} to {}",
        if dry_run { "dry-run of " } else { "" },
        spec.artifact.version,
        super::plan::count(spec.targets.len(), "target")
    );
    let inputs = serde_json::to_string(&input).map_err(StoreError::from)?;
    // A canary runs its own workflow; its dry-run is a deploy's (plan, validate, ask).
    let workflow = if spec.strategy.canary().is_some() && !dry_run {
        Kind::Canary.workflow()
    } else {
        Kind::Deploy.workflow()
    };
    let forced = if dry_run {
        Vec::new()
    } else {
        through_lock(db, spec, workflow, sub).await?
    };
    let mut replaced = false;
    loop {
        let started = submit(
            db,
            Start {
                kind: workflow,
                inputs: inputs.clone(),
                spec,
                detail: detail.clone(),
                forced: &forced,
            },
            sub,
        );
        let live = match started.await? {
            Ok(id) => return Ok(Submitted::Started(id)),
            Err(live) => live,
        };
        let same = live.name == workflow
            && serde_json::from_str::<DeployInput>(&live.inputs)
                .is_ok_and(|i| same_spec(&i.spec, &input.spec) && i.dry_run == input.dry_run);
        let phase = phase_of(db, &live.id).await;
        let awaiting = matches!(phase, Some(Phase::AwaitingDecision { .. }));
        if same && awaiting {
            let retry = OperatorCommand::Retry {
                targets: Vec::new(),
            };
            command::send(db, sub.operator, &live.id, &retry, sub.reason)
                .await
                .map_err(|e| match e {
                    command::CommandError::Store(s) => SubmitError::Store(s),
                    other => SubmitError::Store(StoreError::Conflict(other.to_string())),
                })?;
            journal_forced(db, &forced, &live.id).await?;
            return Ok(Submitted::Retrying(live.id));
        }
        if same {
            journal_forced(db, &forced, &live.id).await?;
            return Ok(Submitted::Resuming(live.id));
        }
        if awaiting && changes_releases(&live.name) && !replaced {
            let note = format!(
                "replaced by a deploy of {} (it failed and waited for a decision)",
                spec.artifact.version
            );
            let entry = super::records::JournalEntry::by(
                sub.operator,
                "cancel",
                Some(&live.id),
                Some(&spec.subject()),
                Some(note),
                sub.reason,
            );
            db.cancel(&live.id, vec![entry.record()]).await?;
            replaced = true;
            continue;
        }
        return Err(SubmitError::Busy {
            what: describe(&live, phase.as_ref()),
            id: live.id,
            subject: spec.subject(),
        });
    }
}

/// Where a rollback of `spec` would take each target, from manent's records; an error when no
/// target has anywhere to go.
pub async fn rollback_moves(db: &dyn Db, spec: &EnvSpec) -> Result<Vec<Move>, SubmitError> {
    let plan = plan::compute(spec).map_err(SubmitError::NothingToRollBack)?;
    let live = releases::live(db.releases(&spec.subject()).await?);
    let moves = releases::moves(&plan, &live);
    if moves.is_empty() {
        let why = if live.is_empty() {
            "manent has recorded no release of it yet".to_owned()
        } else {
            "every target is on the only version manent recorded for it".to_owned()
        };
        return Err(SubmitError::NothingToRollBack(format!(
            "nothing to roll back on {}: {why}",
            spec.subject()
        )));
    }
    Ok(moves)
}

/// Submits a rollback of `spec`'s application and environment, refused when nothing has
/// anywhere to go back to.
pub async fn rollback(
    db: &dyn Db,
    spec: &EnvSpec,
    sub: &Submission<'_>,
) -> Result<Submitted, SubmitError> {
    let moves = rollback_moves(db, spec).await?;
    let input = RollbackInput {
        spec: spec.clone(),
        operator: sub.operator.display(),
    };
    let inputs = serde_json::to_string(&input).map_err(StoreError::from)?;
    let detail = Transitions::of(&moves).to_string();
    let forced = through_lock(db, spec, Kind::Rollback.workflow(), sub).await?;
    match submit(
        db,
        Start {
            kind: Kind::Rollback.workflow(),
            inputs,
            spec,
            detail,
            forced: &forced,
        },
        sub,
    )
    .await?
    {
        Ok(id) => Ok(Submitted::Started(id)),
        Err(live) => {
            let phase = phase_of(db, &live.id).await;
            let mut what = describe(&live, phase.as_ref());
            if matches!(phase, Some(Phase::AwaitingDecision { .. })) {
                what.push_str(&format!(
                    "; `manent abort {}` rolls back what it changed",
                    live.id
                ));
            }
            Err(SubmitError::Busy {
                what,
                id: live.id,
                subject: spec.subject(),
            })
        }
    }
}

/// Submits a run of `spec`'s `test` hooks against what is live (the most common live version,
/// from manent's records, else the descriptor's), or — `candidate` — against the candidate of
/// that canary, through the route its testers take. One test run per application and
/// environment at a time; it may run beside a deployment (a canary waiting at a pause, say).
pub async fn test(
    db: &dyn Db,
    spec: &EnvSpec,
    sub: &Submission<'_>,
    candidate: Option<&str>,
) -> Result<Submitted, SubmitError> {
    if !spec
        .hooks
        .iter()
        .any(|h| h.events.contains(&crate::config::Event::Test))
    {
        return Err(SubmitError::BadInput(format!(
            "{} has no test hooks: give a hook `events: [test]` in {}",
            spec.subject(),
            spec.descriptor.display()
        )));
    }
    let mut spec = spec.clone();
    let mut testers = std::collections::BTreeMap::new();
    match candidate {
        Some(id) => {
            let (version, routed) = candidate_route(db, id, &spec).await?;
            spec.artifact.version = version;
            testers = routed;
        }
        None => {
            let live = releases::live(db.releases(&spec.subject()).await?);
            let version = super::hooks::Vars::before(&live).previous_version;
            if !version.is_empty() {
                spec.artifact.version = version;
            }
        }
    }
    let input = DeployInput {
        spec: spec.clone(),
        dry_run: false,
        operator: sub.operator.display(),
        force: false,
        revert_of: None,
        testers,
    };
    let inputs = serde_json::to_string(&input).map_err(StoreError::from)?;
    let detail = match candidate {
        Some(id) => format!(
            "test hooks against the candidate {} of {id}",
            spec.artifact.version
        ),
        None => format!("test hooks against {}", spec.artifact.version),
    };
    match submit_keyed(
        db,
        Start {
            kind: Kind::Test.workflow(),
            inputs,
            spec: &spec,
            detail,
            forced: &[],
        },
        sub,
        format!("{}#test", spec.subject()),
    )
    .await?
    {
        Ok(id) => Ok(Submitted::Started(id)),
        Err(live) => Err(SubmitError::Busy {
            what: "a run of its test hooks".into(),
            id: live.id,
            subject: spec.subject(),
        }),
    }
}

/// The candidate's version of live canary `id` of `spec`'s environment, and the tester route
/// that reaches it.
async fn candidate_route(
    db: &dyn Db,
    id: &str,
    spec: &EnvSpec,
) -> Result<(String, std::collections::BTreeMap<String, String>), SubmitError> {
    let v = super::view::load(db, id)
        .await?
        .ok_or_else(|| SubmitError::BadInput(format!("no deployment with id {id}")))?;
    let canary = v
        .canary
        .as_ref()
        .filter(|_| v.status.is_live() && v.subject() == spec.subject())
        .ok_or_else(|| {
            SubmitError::BadInput(format!(
                "{id} is not a live canary of {}: there is no candidate to test",
                spec.subject()
            ))
        })?;
    if super::flows::canary::tester_header(&canary.status.testers).is_none() {
        return Err(SubmitError::BadInput(format!(
            "the candidate of {id} is reached by no tester route yet (its `testers` step has \
             not run): test hooks cannot reach it apart from production traffic"
        )));
    }
    Ok((v.version.clone(), canary.status.testers.clone()))
}

/// Starts a canary run that only takes out of traffic the candidate canary `of` left there
/// when it was abandoned (its routing as recorded; the router is read back after).
pub async fn revert_left(
    db: &dyn Db,
    of: &str,
    sub: &Submission<'_>,
) -> Result<Submitted, SubmitError> {
    let row = db
        .workflow(of)
        .await?
        .ok_or_else(|| SubmitError::BadInput(format!("no deployment with id {of}")))?;
    let mut input: DeployInput = serde_json::from_str(&row.inputs).map_err(StoreError::from)?;
    input.revert_of = Some(of.to_owned());
    input.operator = sub.operator.display();
    let inputs = serde_json::to_string(&input).map_err(StoreError::from)?;
    let detail = format!("the candidate {of} left in traffic");
    match submit(
        db,
        Start {
            kind: Kind::Canary.workflow(),
            inputs,
            spec: &input.spec,
            detail,
            forced: &[],
        },
        sub,
    )
    .await?
    {
        Ok(id) => Ok(Submitted::Started(id)),
        Err(live) => Err(SubmitError::Busy {
            what: describe(&live, phase_of(db, &live.id).await.as_ref()),
            id: live.id,
            subject: input.spec.subject(),
        }),
    }
}

/// A workflow to start: its kind, inputs and spec, what the journal says it does, and the
/// records that commit with it (a break-glass entry, naming the new deployment).
struct Start<'a> {
    kind: &'a str,
    inputs: String,
    spec: &'a EnvSpec,
    detail: String,
    forced: &'a [Record],
}

/// Inserts the workflow; `Err(live)` when another deployment of the subject is live.
async fn submit(
    db: &dyn Db,
    start: Start<'_>,
    sub: &Submission<'_>,
) -> Result<Result<String, WorkflowRow>, SubmitError> {
    let dedup = start.spec.subject();
    submit_keyed(db, start, sub, dedup).await
}

/// [`submit`], one live workflow per `dedup` key.
async fn submit_keyed(
    db: &dyn Db,
    start: Start<'_>,
    sub: &Submission<'_>,
    dedup: String,
) -> Result<Result<String, WorkflowRow>, SubmitError> {
    let Start {
        kind,
        inputs,
        spec,
        detail,
        forced,
    } = start;
    let subject = spec.subject();
    // The records that go with the start, naming its id (drawn again if it is taken).
    let records = |id: &str| -> Vec<Record> {
        let journal = super::records::JournalEntry::by(
            sub.operator,
            kind,
            Some(id),
            Some(&subject),
            Some(detail.clone()),
            sub.reason,
        );
        forced
            .iter()
            .map(|r| with_workflow(r, id))
            .chain(std::iter::once(journal.record()))
            .collect()
    };
    let id = new_id();
    let mut wf = NewWorkflow {
        records: records(&id),
        id,
        name: kind.to_owned(),
        definition_version: VERSION,
        inputs,
        subject: Some(subject.clone()),
        dedup_key: Some(dedup),
        max_recovery_attempts: sub.max_recovery_attempts,
        executor: Some(sub.executor.to_owned()),
        events: sub
            .submitter
            .iter()
            .filter_map(|s| serde_json::to_string(s).ok())
            .map(|v| (crate::workflow::store::SUBMITTER.to_owned(), v))
            .collect(),
    };
    let mut tries = 1;
    loop {
        // A start is idempotent by id, so a commit whose acknowledgement was lost is retried safely.
        let started = crate::workflow::retry::until_committed(
            || db.start(wf.clone()),
            |e| {
                tracing::warn!(error = %e, "the database refused the new deployment; retrying");
            },
        )
        .await;
        return match started {
            Ok(Started::Created | Started::Existing(_)) => Ok(Ok(wf.id)),
            Ok(Started::Duplicate(live)) => Ok(Err(live)),
            // 64 random bits make this all but impossible; a clash is never the operator's.
            Err(StoreError::IdInUse { .. }) if tries < ID_TRIES => {
                tracing::warn!(deployment = %wf.id, "the new deployment's id is taken; drawing another");
                tries += 1;
                wf.id = new_id();
                wf.records = records(&wf.id);
                continue;
            }
            Err(e) => Err(e.into()),
        };
    }
}

/// A journal record that names the deployment it went with.
fn with_workflow(r: &Record, id: &str) -> Record {
    let mut r = r.clone();
    if let Some(o) = r.body.as_object_mut() {
        o.insert(
            "workflow_id".into(),
            serde_json::Value::String(id.to_owned()),
        );
    }
    r
}

/// A break-glass that continues a live deployment (a retry, a resume) is journaled on its own.
async fn journal_forced(db: &dyn Db, forced: &[Record], id: &str) -> Result<(), SubmitError> {
    for r in forced {
        let entry: super::records::JournalEntry = serde_json::from_value(with_workflow(r, id).body)
            .map_err(|e| StoreError::Sql(format!("a break-glass entry does not decode: {e}")))?;
        db.journal(entry).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_their_time_sort_by_it_and_carry_64_random_bits() {
        let id = new_id();
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(parts.len(), 4, "{id}");
        assert_eq!(parts[0], "dep");
        assert!(
            parts[1].len() == 8 && parts[1].bytes().all(|b| b.is_ascii_digit()),
            "{id}"
        );
        assert!(
            parts[2].len() == 9 && parts[2].bytes().all(|b| b.is_ascii_digit()),
            "{id}"
        );
        assert_eq!(parts[3].len(), 13, "{id}");
        assert!(!parts[3].contains(['i', 'l', 'o', 'u']), "{id}");
        assert_eq!(base32(0), "0000000000000");
        assert_eq!(base32(u64::MAX), "fzzzzzzzzzzzz");
        assert_eq!(base32(32), "0000000000010");
        // Thousands in the same millisecond or so: none alike, end or whole.
        let ids: Vec<String> = (0..5000).map(|_| new_id()).collect();
        let whole: std::collections::BTreeSet<&str> = ids.iter().map(String::as_str).collect();
        let ends: std::collections::BTreeSet<&str> =
            ids.iter().map(|i| &i[i.len() - 11..]).collect();
        assert_eq!((whole.len(), ends.len()), (5000, 5000));
        let later = {
            std::thread::sleep(std::time::Duration::from_millis(2));
            new_id()
        };
        assert!(
            ids.iter().all(|i| *i < later),
            "an id sorts after every earlier one"
        );
    }
}
