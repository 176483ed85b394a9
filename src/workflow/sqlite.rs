//! The SQLite store: one connection on its own writer thread (design/durable-workflows.md B.9). Writes that arrive together
//! share one `BEGIN IMMEDIATE` transaction (group commit), each inside its own savepoint, so a
//! hundred parallel checkpoints cost one fsync while each keeps its own all-or-nothing effect.

mod events;
mod steps;
mod wake;
mod workflows;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension};
use tokio::sync::oneshot;

use super::error::StoreError;
use super::inputs_key::{InputsKey, KeyVerdict};
use super::schema::{self, Synchronous};
use super::store::{
    AttemptEnd, AttemptStart, Checkpoint, Claim, EngineRow, Finished, History, Message,
    NewWorkflow, Outcome, Record, SendRequest, Sent, Started, Store, WorkflowQuery, WorkflowRow,
    WorkflowState,
};
use crate::sys::files::Trust;

/// Most jobs committed in one transaction.
const MAX_GROUP: usize = 512;

/// A unit of work for the writer thread.
trait Job: Send {
    /// Runs inside the group transaction (writes) or outside one (reads). `Ok(false)` means the
    /// job failed on its own terms and its savepoint must be rolled back; `Err` is a database
    /// fault that aborts the whole group.
    fn run(&mut self, conn: &Connection) -> Result<bool, StoreError>;
    /// Delivers the result once the group's commit is known.
    fn finish(self: Box<Self>, commit: Result<(), StoreError>);
    /// True for jobs that write.
    fn writes(&self) -> bool;
}

struct Op<F, R> {
    f: Option<F>,
    result: Option<Result<R, StoreError>>,
    reply: oneshot::Sender<Result<R, StoreError>>,
    writes: bool,
}

impl<F, R> Job for Op<F, R>
where
    F: FnOnce(&Connection) -> Result<R, StoreError> + Send,
    R: Send,
{
    fn run(&mut self, conn: &Connection) -> Result<bool, StoreError> {
        let Some(f) = self.f.take() else {
            return Ok(true);
        };
        match f(conn) {
            Err(e @ (StoreError::Transient(_) | StoreError::Corrupt(_))) => Err(e),
            r => {
                let ok = r.is_ok();
                self.result = Some(r);
                Ok(ok)
            }
        }
    }

    fn finish(self: Box<Self>, commit: Result<(), StoreError>) {
        let out = match commit {
            Ok(()) => self.result.unwrap_or(Err(StoreError::Closed)),
            Err(e) => Err(e),
        };
        let _ = self.reply.send(out);
    }

    fn writes(&self) -> bool {
        self.writes
    }
}

/// What the layer above the engine keeps in the same database: its tables, and how its
/// [`Record`]s are written inside the engine's transactions.
pub trait Extension: Send + Sync + 'static {
    /// Its name, under which its schema version is kept.
    fn name(&self) -> &'static str;
    /// Its migrations, each applied once, in order.
    fn migrations(&self) -> &'static [&'static str];
    /// Writes `record` (of workflow `workflow_id`, if any) in the current transaction.
    fn apply(
        &self,
        conn: &Connection,
        workflow_id: Option<&str>,
        record: &Record,
    ) -> Result<(), StoreError>;
}

/// No layer above: records are refused (the engine's own tests).
#[derive(Debug)]
pub struct NoExtension;

impl Extension for NoExtension {
    fn name(&self) -> &'static str {
        "none"
    }

    fn migrations(&self) -> &'static [&'static str] {
        &[]
    }

    fn apply(&self, _: &Connection, _: Option<&str>, record: &Record) -> Result<(), StoreError> {
        Err(StoreError::Sql(format!(
            "no extension writes `{}` records",
            record.kind
        )))
    }
}

/// The embedded system database.
pub struct SqliteStore {
    jobs: mpsc::Sender<Box<dyn Job>>,
    path: PathBuf,
    ext: Arc<dyn Extension>,
    key: Arc<InputsKey>,
    /// Wake-ups between this process and the engine holding the database.
    wake: Arc<wake::Wake>,
    /// The file opened: a file deleted or replaced under the engine is seen, not written on.
    identity: Identity,
}

/// The database file an open store writes to (device and inode): SQLite keeps writing to a file
/// that was deleted, and every commit would "succeed" into nothing.
#[derive(Debug, Clone)]
struct Identity {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl Identity {
    fn of(path: &Path) -> Result<Identity, String> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).map_err(|e| e.to_string())?;
        Ok(Identity {
            path: path.to_owned(),
            dev: m.dev(),
            ino: m.ino(),
        })
    }

    /// Why the file at the path is no longer the one opened, if it is not.
    fn lost(&self) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let what = match std::fs::metadata(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "was deleted".to_owned(),
            Err(e) => format!("cannot be read any more ({e})"),
            Ok(m) if (m.dev(), m.ino()) != (self.dev, self.ino) => {
                "was replaced by another file".to_owned()
            }
            Ok(_) => return None,
        };
        Some(format!(
            "the database {} {what} while the engine ran: nothing after that could be recorded; \
             the engine stops. Restore it from a backup (deployments recorded in it resume \
             from there), or start afresh with a new one",
            self.path.display()
        ))
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish()
    }
}

impl SqliteStore {
    /// Opens (creating it and its directory if needed) and migrates the database at `path`,
    /// with `ext`'s tables, as this user's private files. `check` runs `PRAGMA quick_check`
    /// first, as an engine does at start.
    pub fn open(
        path: &Path,
        sync: Synchronous,
        check: bool,
        ext: Arc<dyn Extension>,
    ) -> Result<Self, StoreError> {
        Self::open_trusted(path, sync, check, ext, &Trust::private())
    }

    /// [`SqliteStore::open`] under `trust`'s rules: the directory, the database, its journal
    /// files and the inputs key beside it must be the engine user's (or the shared group's) and
    /// writable by no one else — refused otherwise, naming the file — and what is created is
    /// created with the engine's mode whatever the umask.
    pub fn open_trusted(
        path: &Path,
        sync: Synchronous,
        check: bool,
        ext: Arc<dyn Extension>,
        trust: &Trust,
    ) -> Result<Self, StoreError> {
        let open_err = |reason: String| StoreError::Open {
            path: path.display().to_string(),
            reason,
        };
        let refused = |r: crate::sys::files::Refused| open_err(r.to_string());
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            trust
                .ensure_dir(dir, "the database's directory")
                .map_err(refused)?;
        }
        if std::fs::symlink_metadata(path).is_err() {
            // Its key still beside it: the database was there and is gone. A fresh one would
            // hide that every deployment, release and lock was lost.
            let key = InputsKey::path_beside(path);
            if key.exists() {
                return Err(StoreError::Lost(format!(
                    "the database {} is gone, but its inputs key {} is still beside it: the \
                     database was deleted. Restore it from a backup (its deployments, releases \
                     and locks are in it); to start afresh on purpose, remove the key as well",
                    path.display(),
                    key.display()
                )));
            }
            // Created here, private, before SQLite opens it (SQLite would use 0644 less the
            // umask); its -wal and -shm files take the same mode.
            if let Err(e) = trust.create_file(path, "the database")
                && !path.exists()
            {
                return Err(refused(e));
            }
        }
        trust.check_file(path, "the database").map_err(refused)?;
        for (suffix, what) in [
            ("-wal", "the database's write-ahead log"),
            ("-shm", "the database's shared memory file"),
            ("-journal", "the database's journal"),
        ] {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            trust.check_file(Path::new(&p), what).map_err(refused)?;
        }
        let mut conn = Connection::open(path).map_err(|e| open_err(e.to_string()))?;
        schema::configure(&conn, sync)?;
        if check {
            schema::quick_check(&conn)?;
        }
        schema::migrate(&mut conn, Some((ext.name(), ext.migrations())))?;
        let key = Arc::new(inputs_key(&conn, path, trust)?);
        let identity = Identity::of(path).map_err(open_err)?;
        let (tx, rx) = mpsc::channel::<Box<dyn Job>>();
        let wake = wake::Wake::new(path);
        let signal = wake.clone();
        let file = identity.clone();
        std::thread::Builder::new()
            .name("manent-store".into())
            .spawn(move || writer_loop(&conn, &rx, &signal, &file))
            .map_err(|e| open_err(format!("cannot start the writer thread: {e}")))?;
        Ok(SqliteStore {
            jobs: tx,
            path: path.to_owned(),
            ext,
            key,
            wake,
            identity,
        })
    }

    /// The key that authenticates the stored inputs.
    pub fn inputs_key(&self) -> &InputsKey {
        &self.key
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn call<R, F>(&self, writes: bool, f: F) -> Result<R, StoreError>
    where
        F: FnOnce(&Connection) -> Result<R, StoreError> + Send + 'static,
        R: Send + 'static,
    {
        let (reply, rx) = oneshot::channel();
        let op = Op {
            f: Some(f),
            result: None,
            reply,
            writes,
        };
        self.jobs
            .send(Box::new(op))
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Runs `f` in the next group transaction (inside its own savepoint): how the layer above
    /// writes its records.
    pub async fn write<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        F: FnOnce(&Connection) -> Result<R, StoreError> + Send + 'static,
        R: Send + 'static,
    {
        self.call(true, f).await
    }

    /// Runs `f` on the writer's connection outside any write transaction: how the layer above
    /// reads its records.
    pub async fn read<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        F: FnOnce(&Connection) -> Result<R, StoreError> + Send + 'static,
        R: Send + 'static,
    {
        self.call(false, f).await
    }
}

/// The key beside the database, made with a new database (or one from before keys); the
/// database adopts it, or must have been signed with it.
fn inputs_key(conn: &Connection, db: &Path, trust: &Trust) -> Result<InputsKey, StoreError> {
    let open_err = |reason: String| StoreError::Open {
        path: db.display().to_string(),
        reason,
    };
    let stored: Option<String> = conn
        .query_row("SELECT fingerprint FROM inputs_key WHERE id = 1", [], |r| {
            r.get(0)
        })
        .optional()?;
    let path = InputsKey::path_beside(db);
    let key = match InputsKey::load(&path, trust).map_err(|e| open_err(e.to_string()))? {
        Some(k) => k,
        None if stored.is_some() => {
            return Err(open_err(format!(
                "the inputs key {} that authenticates its deployments is missing: restore it \
                 from the database's backups (without it no stored deployment can be trusted, so \
                 none would run); to start afresh, move the database away",
                path.display()
            )));
        }
        // Another process opening the new database at the same moment may make it first.
        None => match InputsKey::create(&path, trust) {
            Ok(k) => k,
            Err(e) => InputsKey::load(&path, trust)
                .ok()
                .flatten()
                .ok_or_else(|| open_err(e.to_string()))?,
        },
    };
    let verdict = match key.verdict(stored.as_deref()) {
        KeyVerdict::Adopt => workflows::adopt_key(conn, &key)?,
        v => v,
    };
    if verdict == KeyVerdict::Differs {
        return Err(open_err(key.differs(&db.display().to_string())));
    }
    Ok(key)
}

fn writer_loop(
    conn: &Connection,
    rx: &mpsc::Receiver<Box<dyn Job>>,
    wake: &wake::Wake,
    file: &Identity,
) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let (writes, reads): (Vec<_>, Vec<_>) = batch.into_iter().partition(|j| j.writes());
        if !writes.is_empty() {
            // One stat per group commit: nothing is "committed" into a deleted file.
            match file.lost() {
                Some(why) => {
                    for job in writes {
                        job.finish(Err(StoreError::Lost(why.clone())));
                    }
                }
                None => commit_group(conn, writes, wake),
            }
        }
        for mut job in reads {
            let r = job.run(conn).map(|_| ());
            job.finish(r);
        }
    }
}

/// Commits a group of writes; once committed, the engine is told before anyone is answered
/// (a command-line process may exit as soon as it has its answer).
fn commit_group(conn: &Connection, mut jobs: Vec<Box<dyn Job>>, wake: &wake::Wake) {
    let result = run_group(conn, &mut jobs);
    if result.is_ok() {
        wake.signal();
    } else {
        // SQLite may already have rolled back (SQLITE_FULL, IOERR); an explicit ROLLBACK is the
        // documented response and may itself fail harmlessly.
        let _ = conn.execute_batch("ROLLBACK");
    }
    for job in jobs {
        job.finish(result.clone());
    }
}

fn run_group(conn: &Connection, jobs: &mut [Box<dyn Job>]) -> Result<(), StoreError> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    for job in jobs.iter_mut() {
        conn.execute_batch("SAVEPOINT job")?;
        if !job.run(conn)? {
            conn.execute_batch("ROLLBACK TO job")?;
        }
        conn.execute_batch("RELEASE job")?;
    }
    super::error::injected_before_commit()?;
    conn.execute_batch("COMMIT")?;
    super::error::injected_after_commit()
}

#[async_trait]
impl Store for SqliteStore {
    async fn start(&self, wf: NewWorkflow) -> Result<Started, StoreError> {
        let (ext, key) = (self.ext.clone(), self.key.clone());
        self.write(move |c| workflows::start(c, wf, ext.as_ref(), &key))
            .await
    }

    async fn claim(&self, id: &str, executor: &str, run_token: &str) -> Result<Claim, StoreError> {
        let (id, executor, token) = (id.to_owned(), executor.to_owned(), run_token.to_owned());
        let key = self.key.clone();
        self.write(move |c| workflows::claim(c, &id, &executor, &token, &key))
            .await
    }

    async fn recover(&self, _: &str) -> Result<Vec<String>, StoreError> {
        // One engine per file (its lock): whatever is PENDING, a crashed run left.
        self.write(workflows::recover).await
    }

    async fn engines(&self) -> Result<Vec<EngineRow>, StoreError> {
        self.read(events::engines).await
    }

    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    async fn check(&self) -> Result<(), StoreError> {
        self.read(super::schema::quick_check).await
    }

    async fn enqueued(&self, _: &str) -> Result<Vec<String>, StoreError> {
        self.read(workflows::enqueued).await
    }

    async fn history(&self, id: &str) -> Result<History, StoreError> {
        let id = id.to_owned();
        self.read(move |c| steps::history(c, &id)).await
    }

    async fn begin_attempt(&self, a: AttemptStart) -> Result<(), StoreError> {
        self.write(move |c| steps::begin_attempt(c, &a)).await
    }

    async fn end_attempt(&self, a: AttemptEnd) -> Result<(), StoreError> {
        self.write(move |c| steps::end_attempt(c, &a)).await
    }

    async fn checkpoint(&self, cp: Checkpoint) -> Result<(), StoreError> {
        let ext = self.ext.clone();
        self.write(move |c| steps::checkpoint(c, &cp, ext.as_ref()))
            .await
    }

    async fn consume(
        &self,
        workflow_id: &str,
        run_token: &str,
        function_id: u32,
        topics: &[String],
    ) -> Result<Option<Message>, StoreError> {
        let (id, token, topics) = (
            workflow_id.to_owned(),
            run_token.to_owned(),
            topics.to_vec(),
        );
        self.write(move |c| steps::consume(c, &id, &token, function_id, &topics))
            .await
    }

    async fn stopped(&self, id: &str, run_token: &str) -> Result<(), StoreError> {
        let (id, token) = (id.to_owned(), run_token.to_owned());
        self.write(move |c| workflows::stopped(c, &id, &token))
            .await
    }

    async fn finish(
        &self,
        id: &str,
        run_token: &str,
        out: Outcome,
    ) -> Result<Finished, StoreError> {
        let (id, token) = (id.to_owned(), run_token.to_owned());
        self.write(move |c| workflows::finish(c, &id, &token, out))
            .await
    }

    async fn park_unclaimed(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.write(move |c| workflows::park_unclaimed(c, &id)).await
    }

    async fn cancel(&self, id: &str, records: Vec<Record>) -> Result<WorkflowRow, StoreError> {
        let (id, ext) = (id.to_owned(), self.ext.clone());
        self.write(move |c| workflows::cancel(c, &id, &records, ext.as_ref()))
            .await
    }

    async fn resume(&self, id: &str, records: Vec<Record>) -> Result<WorkflowRow, StoreError> {
        let (id, ext) = (id.to_owned(), self.ext.clone());
        self.write(move |c| workflows::resume(c, &id, &records, ext.as_ref()))
            .await
    }

    async fn send(&self, req: SendRequest) -> Result<Sent, StoreError> {
        let ext = self.ext.clone();
        self.write(move |c| steps::send(c, &req, ext.as_ref()))
            .await
    }

    async fn publish(
        &self,
        workflow_id: &str,
        run_token: &str,
        evs: Vec<(String, String)>,
    ) -> Result<(), StoreError> {
        let (id, token) = (workflow_id.to_owned(), run_token.to_owned());
        self.write(move |c| events::publish(c, &id, &token, &evs))
            .await
    }

    async fn record_lease(&self, executor: &str, pid: u32, host: &str) -> Result<(), StoreError> {
        let (executor, host) = (executor.to_owned(), host.to_owned());
        self.write(move |c| events::record_lease(c, &executor, pid, &host))
            .await
    }

    async fn data_version(&self) -> Result<i64, StoreError> {
        self.read(|c| Ok(c.query_row("PRAGMA data_version", [], |r| r.get(0))?))
            .await
    }

    fn changes(&self) -> Option<&tokio::sync::Notify> {
        self.wake.listening().then_some(&self.wake.notify)
    }

    async fn lost(&self) -> Option<String> {
        self.identity.lost()
    }

    fn listen(&self) -> bool {
        self.wake.listen()
    }

    async fn workflow(&self, id: &str) -> Result<Option<WorkflowRow>, StoreError> {
        let id = id.to_owned();
        self.read(move |c| workflows::get(c, &id)).await
    }

    async fn workflows(&self, q: WorkflowQuery) -> Result<Vec<WorkflowRow>, StoreError> {
        self.read(move |c| workflows::list(c, &q)).await
    }

    async fn state(
        &self,
        id: &str,
        skip_steps: &'static [&'static str],
    ) -> Result<Option<WorkflowState>, StoreError> {
        let id = id.to_owned();
        self.read(move |c| {
            // One read transaction: another process's commit cannot land between the queries.
            c.execute_batch("BEGIN DEFERRED")?;
            let read = || -> Result<Option<WorkflowState>, StoreError> {
                let Some(row) = workflows::get(c, &id)? else {
                    return Ok(None);
                };
                Ok(Some(WorkflowState {
                    row,
                    events: events::events(c, &id)?,
                    event_times: events::event_times(c, &id)?,
                    history: steps::history_except(c, &id, skip_steps)?,
                    pending: steps::pending_messages(c, &id)?,
                }))
            };
            let out = read();
            let _ = c.execute_batch("COMMIT");
            out
        })
        .await
    }

    async fn events(&self, id: &str) -> Result<BTreeMap<String, String>, StoreError> {
        let id = id.to_owned();
        self.read(move |c| events::events(c, &id)).await
    }

    async fn events_except(
        &self,
        id: &str,
        skip: &'static [&'static str],
    ) -> Result<BTreeMap<String, String>, StoreError> {
        let id = id.to_owned();
        self.read(move |c| events::events_except(c, &id, skip))
            .await
    }

    async fn pending_messages(&self, id: &str) -> Result<Vec<Message>, StoreError> {
        let id = id.to_owned();
        self.read(move |c| steps::pending_messages(c, &id)).await
    }

    async fn close(&self) -> Result<(), StoreError> {
        self.wake.close();
        self.read(|c| {
            c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
            Ok(())
        })
        .await
    }
}

/// `execute` through the connection's statement cache: the hot statements run thousands of
/// times per deploy.
fn exec(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// `query_row` through the statement cache.
fn query_row<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.prepare_cached(sql)?.query_row(params, f)
}

/// The most recent deployments of the SQLite database at `path`, read-only and without its
/// engine (what a shell's completion offers): live ones first, then the newest, `limit` at
/// most, as (id, status, subject). Nothing is created or written: a database that is not
/// there, or that this user cannot read, is an error.
pub fn peek_recent(
    path: &std::path::Path,
    limit: u32,
) -> rusqlite::Result<Vec<(String, String, Option<String>)>> {
    let db = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let mut stmt = db.prepare(
        "SELECT workflow_id, status, subject FROM workflow_status WHERE parent_workflow_id IS NULL \
         ORDER BY status IN ('ENQUEUED','PENDING') DESC, created_at DESC LIMIT ?1",
    )?;
    stmt.query_map([limit], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect()
}
