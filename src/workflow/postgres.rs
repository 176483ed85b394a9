//! The PostgreSQL store: the same system database as SQLite's, shared by engines on several
//! hosts. A pool of connections; every write is a READ COMMITTED transaction that first locks
//! the workflows' rows (`FOR SHARE` to write beside one, `FOR UPDATE` to change it), so a
//! checkpoint and a cancel or a takeover of the same workflow are ordered. The attempts and
//! checkpoints that steps write at the same moment share one transaction (`group.rs`, as
//! SQLite's group commit), each answering for itself. A lost connection is
//! [`StoreError::Transient`]: the engine blocks and retries, as it does on a full disk with
//! SQLite.

mod events;
mod group;
mod schema;
mod steps;
mod workflows;

use self::schema::MIGRATIONS;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Object, Pool, Transaction};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::error::StoreError;
use super::inputs_key::{InputsKey, KeyVerdict};
use super::store::{
    AttemptEnd, AttemptStart, Checkpoint, Claim, EngineRow, Finished, History, Message,
    NewWorkflow, Outcome, Record, SendRequest, Sent, Started, Store, TakenOver, WorkflowQuery,
    WorkflowRow, WorkflowState,
};
use crate::config::database::{shown_url, tls_params};

/// Now, in epoch ms by the database's clock: every engine's lease is measured by one clock.
pub const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::BIGINT";

/// The engine's schema version on PostgreSQL.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Serialises migrations of engines starting together (an arbitrary, fixed advisory lock key).
const MIGRATION_LOCK: i64 = 0x6d61_6e65_6e74;

/// What the layer above the engine keeps in the same database, on PostgreSQL: its tables, and
/// how its [`Record`]s are written inside the engine's transactions.
#[async_trait]
pub trait Extension: Send + Sync + 'static {
    /// Its name, under which its schema version is kept.
    fn name(&self) -> &'static str;
    /// Its migrations, each applied once, in order.
    fn migrations(&self) -> &'static [&'static str];
    /// Writes `record` (of workflow `workflow_id`, if any) in the transaction `tx`.
    async fn apply(
        &self,
        tx: &Transaction<'_>,
        workflow_id: Option<&str>,
        record: &Record,
    ) -> Result<(), StoreError>;
}

/// No layer above: records are refused (the engine's own tests).
#[derive(Debug)]
pub struct NoExtension;

#[async_trait]
impl Extension for NoExtension {
    fn name(&self) -> &'static str {
        "none"
    }

    fn migrations(&self) -> &'static [&'static str] {
        &[]
    }

    async fn apply(
        &self,
        _: &Transaction<'_>,
        _: Option<&str>,
        record: &Record,
    ) -> Result<(), StoreError> {
        Err(StoreError::Sql(format!(
            "no extension writes `{}` records",
            record.kind
        )))
    }
}

/// The shared system database.
pub struct PostgresStore {
    pool: Pool,
    shown: String,
    ext: Arc<dyn Extension>,
    key: Arc<InputsKey>,
    lease_ms: i64,
    changes: Arc<Changes>,
    /// Ends the LISTEN connection when the store goes.
    stop: Arc<tokio::sync::Notify>,
    /// Attempts and checkpoints written together.
    group: group::Group,
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.stop.notify_one();
    }
}

/// What the `LISTEN` connection heard: new workflows, commands, outcomes and takeovers NOTIFY
/// `manent` (steps' checkpoints do not), so mailboxes and pollers wake at once instead of on
/// their next poll.
#[derive(Debug, Default)]
pub struct Changes {
    /// Bumped at every notification (and at every reconnection: something may have changed).
    version: std::sync::atomic::AtomicI64,
    /// True while the listening connection is up.
    listening: std::sync::atomic::AtomicBool,
    /// Wakes whoever waits for a change.
    notify: tokio::sync::Notify,
}

/// The channel every write notifies.
const CHANNEL: &str = "manent";

/// Listens on [`CHANNEL`] for as long as `changes` has other owners, reconnecting after a
/// lost connection.
fn spawn_listener(
    config: tokio_postgres::Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    changes: Arc<Changes>,
    stop: Arc<tokio::sync::Notify>,
) {
    use std::sync::atomic::Ordering;
    tokio::spawn(async move {
        let weak = Arc::downgrade(&changes);
        drop(changes);
        loop {
            let Some(changes) = weak.upgrade() else {
                return;
            };
            if let Ok((client, mut conn)) = config.connect(tls.clone()).await {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                let driver = tokio::spawn(async move {
                    while let Some(m) = futures::future::poll_fn(|cx| conn.poll_message(cx)).await {
                        if m.is_err() || tx.send(()).is_err() {
                            break;
                        }
                    }
                });
                if client
                    .batch_execute(&format!("LISTEN {CHANNEL}"))
                    .await
                    .is_ok()
                {
                    changes.listening.store(true, Ordering::SeqCst);
                    changes.version.fetch_add(1, Ordering::SeqCst);
                    changes.notify.notify_waiters();
                    drop(changes);
                    loop {
                        tokio::select! {
                            m = rx.recv() => if m.is_none() { break },
                            () = stop.notified() => {
                                driver.abort();
                                return;
                            }
                        }
                        let Some(c) = weak.upgrade() else {
                            driver.abort();
                            return;
                        };
                        c.version.fetch_add(1, Ordering::SeqCst);
                        c.notify.notify_waiters();
                    }
                } else {
                    drop(changes);
                }
                driver.abort();
            } else {
                drop(changes);
            }
            let Some(changes) = weak.upgrade() else {
                return;
            };
            changes.listening.store(false, Ordering::SeqCst);
            changes.notify.notify_waiters();
            drop(changes);
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
                () = stop.notified() => return,
            }
        }
    });
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("database", &self.shown)
            .finish()
    }
}

/// Where and how an engine reaches its PostgreSQL server.
#[derive(Debug, Clone, Copy)]
pub struct Server<'a> {
    /// The server's URL, without the password.
    pub url: &'a str,
    /// The password, given apart so it is never part of a shown URL.
    pub password: Option<&'a str>,
    /// Connections kept.
    pub pool_size: usize,
    /// The engine's lease: a session idle in a transaction ends well within it.
    pub lease: Duration,
}

impl PostgresStore {
    /// Connects to `url` (the password, if any, given apart so it is never part of a shown
    /// URL), and creates or migrates the engine's schema and `ext`'s. A database written by a
    /// newer manent is refused, and so is one whose deployments were signed with another inputs
    /// key than `key` (the secret the engines share).
    pub async fn open(
        url: &str,
        password: Option<&str>,
        pool_size: usize,
        ext: Arc<dyn Extension>,
        key: InputsKey,
    ) -> Result<Self, StoreError> {
        Self::open_with_lease(url, password, pool_size, Duration::from_secs(15), ext, key).await
    }

    /// [`PostgresStore::open`] for engines whose lease lasts `lease`: a session left idle in
    /// a transaction (an engine paused mid-commit) is ended by the server well within it, so
    /// the row locks it held never stop a takeover.
    pub async fn open_with_lease(
        url: &str,
        password: Option<&str>,
        pool_size: usize,
        lease: Duration,
        ext: Arc<dyn Extension>,
        key: InputsKey,
    ) -> Result<Self, StoreError> {
        let server = Server {
            url,
            password,
            pool_size,
            lease,
        };
        Self::connect(&server, ext, key, true).await
    }

    /// [`PostgresStore::open_with_lease`]; without `create`, a database that holds no manent
    /// schema is an error, not a fresh start (what reads and commands that are not an engine
    /// open: they never make a schema, nor remake a dropped one).
    pub async fn connect(
        server: &Server<'_>,
        ext: Arc<dyn Extension>,
        key: InputsKey,
        create: bool,
    ) -> Result<Self, StoreError> {
        let &Server {
            url,
            password,
            pool_size,
            lease,
        } = server;
        let lease_ms = i64::try_from(lease.as_millis())
            .unwrap_or(i64::MAX)
            .max(1000);
        let shown = shown_url(url);
        let open_err = |reason: String| StoreError::Open {
            path: shown.clone(),
            reason,
        };
        let (url, rootcert) = tls_params(url);
        let mut pg: tokio_postgres::Config = url
            .parse()
            .map_err(|e: tokio_postgres::Error| open_err(format!("not a PostgreSQL URL: {e}")))?;
        // TLS when the server offers it (`sslmode=prefer`, the default) or must (`require`),
        // verified against the system's authorities and `sslrootcert`.
        let (tls, _) = crate::sys::tls_client_config(rootcert.as_deref()).map_err(open_err)?;
        let tls = tokio_postgres_rustls::MakeRustlsConnect::new(tls);
        if let Some(p) = password {
            guard_password(&mut pg).map_err(open_err)?;
            pg.password(p);
        }
        // `connect_timeout=N` in the URL (libpq's), 5s by default: it bounds the whole
        // connection, handshake included (a port that accepts and never answers).
        let connect_timeout = pg
            .get_connect_timeout()
            .copied()
            .unwrap_or(Duration::from_secs(5));
        pg.connect_timeout(connect_timeout);
        pg.application_name("manent");
        pg.options(format!(
            "-c idle_in_transaction_session_timeout={}",
            (lease_ms / 2).max(500)
        ));
        pg.keepalives_idle(Duration::from_secs(5));
        let changes = Arc::new(Changes::default());
        let stop = Arc::new(tokio::sync::Notify::new());
        let listen = (pg.clone(), tls.clone());
        let manager = deadpool_postgres::Manager::from_config(
            pg,
            tls,
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(pool_size.max(2))
            .wait_timeout(Some(Duration::from_secs(30)))
            .create_timeout(Some(connect_timeout))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| open_err(e.to_string()))?;
        let store = PostgresStore {
            pool,
            shown: shown.clone(),
            ext,
            key: Arc::new(key),
            lease_ms,
            changes,
            stop,
            group: group::Group::new(),
        };
        let explain = |e: StoreError| {
            let cause = e.cause();
            if cause.contains("Timeout") || cause.contains("timed out") {
                open_err(format!(
                    "no answer within {} ({cause}): is the server up and is this its address? \
                     (`connect_timeout=N` in the database URL sets the limit)",
                    humantime::format_duration(connect_timeout)
                ))
            } else if cause.contains("does not support TLS") {
                open_err(format!(
                    "{cause}: with a password from a secret, manent connects over TLS only (the \
                     password goes to no server that has not proved who it is); turn `ssl` on \
                     in the server, or connect over its Unix socket (`host=/var/run/postgresql`)"
                ))
            } else if cause.contains("certificate") {
                open_err(format!(
                    "{cause}: give the server's certificate authority with \
                     `sslrootcert=/path/ca.pem` in the URL (or `sslmode=disable` on a network \
                     you trust)"
                ))
            } else {
                open_err(cause)
            }
        };
        if !create && !store.has_schema().await.map_err(explain)? {
            return Err(open_err(
                "it holds no manent schema: no engine has used it yet, or the schema was \
                 dropped (restore it from a backup); an engine's first start creates it"
                    .into(),
            ));
        }
        let verdict = store.migrate().await.map_err(explain)?;
        if verdict == KeyVerdict::Differs {
            return Err(open_err(store.key.differs(&shown)));
        }
        spawn_listener(
            listen.0,
            listen.1,
            store.changes.clone(),
            store.stop.clone(),
        );
        Ok(store)
    }

    /// The database, as it may be shown (no password).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// A pooled connection; a database that cannot be reached is transient.
    pub async fn client(&self) -> Result<Object, StoreError> {
        self.pool.get().await.map_err(|e| match e {
            deadpool_postgres::PoolError::Backend(e) => StoreError::from(e),
            other => StoreError::Transient(format!("cannot reach {}: {other}", self.shown)),
        })
    }

    /// Writes `op` in the next group commit, or alone when there is no writer to take it.
    async fn grouped(&self, op: group::Op) -> Result<(), StoreError> {
        match self.group.write(&self.pool, &self.ext, op).await {
            Ok(answer) => answer,
            Err(op) => group::write_alone(&self.pool, self.ext.as_ref(), &op).await,
        }
    }

    /// The key that authenticates the stored inputs.
    pub fn inputs_key(&self) -> &InputsKey {
        &self.key
    }

    /// Migrates the schemas and has the database adopt or recognise the inputs key, under one
    /// advisory lock (engines start together).
    /// True when manent's schema is there.
    async fn has_schema(&self) -> Result<bool, StoreError> {
        let c = self.client().await?;
        let row = c
            .query_one("SELECT to_regclass('schema_components') IS NOT NULL", &[])
            .await?;
        Ok(row.get(0))
    }

    async fn migrate(&self) -> Result<KeyVerdict, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_components (\
             name TEXT PRIMARY KEY, version BIGINT NOT NULL)",
        )
        .await?;
        migrate_component(&tx, "engine", MIGRATIONS).await?;
        migrate_component(&tx, self.ext.name(), self.ext.migrations()).await?;
        let verdict = workflows::adopt_key(&tx, &self.key).await?;
        tx.commit().await?;
        Ok(verdict)
    }

    /// The extension, for the layer above's own writes.
    pub fn extension(&self) -> &dyn Extension {
        self.ext.as_ref()
    }
}

async fn migrate_component(
    tx: &Transaction<'_>,
    name: &str,
    migrations: &[&str],
) -> Result<(), StoreError> {
    let have: i64 = tx
        .query_opt(
            "SELECT version FROM schema_components WHERE name = $1",
            &[&name],
        )
        .await?
        .map_or(0, |r| r.get(0));
    let want = i64::try_from(migrations.len()).unwrap_or(i64::MAX);
    if have > want {
        return Err(StoreError::Sql(format!(
            "its {name} schema has version {have}, newer than this manent's {want}: upgrade manent"
        )));
    }
    for (i, sql) in migrations
        .iter()
        .enumerate()
        .skip(usize::try_from(have).unwrap_or(0))
    {
        tx.batch_execute(sql).await?;
        let v = i as i64 + 1;
        tx.execute(
            "INSERT INTO schema_components (name, version) VALUES ($1, $2) \
             ON CONFLICT (name) DO UPDATE SET version = excluded.version",
            &[&name, &v],
        )
        .await?;
    }
    Ok(())
}

/// `execute` through the connection's statement cache.
pub async fn exec<C: GenericClient>(
    c: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, StoreError> {
    let stmt = c.prepare_cached(sql).await?;
    Ok(c.execute(&stmt, params).await?)
}

/// One row or none, through the statement cache.
pub async fn query_opt<C: GenericClient>(
    c: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Row>, StoreError> {
    let stmt = c.prepare_cached(sql).await?;
    Ok(c.query_opt(&stmt, params).await?)
}

/// Every row, through the statement cache.
pub async fn query<C: GenericClient>(
    c: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, StoreError> {
    let stmt = c.prepare_cached(sql).await?;
    Ok(c.query(&stmt, params).await?)
}

/// A `u32` column stored as BIGINT.
pub fn u32_at(r: &Row, i: usize) -> u32 {
    u32::try_from(r.get::<_, i64>(i)).unwrap_or(u32::MAX)
}

/// Runs `$body` (a future over `&$tx`) in one transaction on a pooled connection: committed
/// when it returns `Ok`; an `Err` drops the transaction, which rolls it back.
/// `notify` marks the writes others wait for (a new workflow, a command, an outcome, a
/// takeover): they NOTIFY listeners on commit. Steps' checkpoints do not — PostgreSQL
/// serialises the commits of notifying transactions, and consoles see progress by polling the
/// WAL position anyway.
macro_rules! in_tx {
    ($store:expr, notify, $tx:ident => $body:expr) => {{
        let mut client = $store.client().await?;
        let $tx = client.transaction().await?;
        let out = $body.await?;
        $tx.batch_execute(concat!("NOTIFY ", "manent")).await?;
        super::error::injected_before_commit()?;
        $tx.commit().await?;
        super::error::injected_after_commit()?;
        Ok(out)
    }};
    ($store:expr, $tx:ident => $body:expr) => {{
        let mut client = $store.client().await?;
        let $tx = client.transaction().await?;
        let out = $body.await?;
        super::error::injected_before_commit()?;
        $tx.commit().await?;
        super::error::injected_after_commit()?;
        Ok(out)
    }};
}

#[async_trait]
impl Store for PostgresStore {
    async fn start(&self, wf: NewWorkflow) -> Result<Started, StoreError> {
        let (ext, key) = (self.ext.clone(), self.key.clone());
        in_tx!(self, notify, tx => workflows::start(&tx, &wf, ext.as_ref(), &key))
    }

    async fn claim(&self, id: &str, executor: &str, run_token: &str) -> Result<Claim, StoreError> {
        in_tx!(self, tx => workflows::claim(&tx, id, executor, run_token, &self.key))
    }

    async fn recover(&self, executor: &str) -> Result<Vec<String>, StoreError> {
        let taken: Result<Vec<TakenOver>, StoreError> =
            in_tx!(self, notify, tx => workflows::take_over(&tx, executor, self.lease_ms, true));
        taken?;
        workflows::claimable(&self.client().await?, executor, self.lease_ms).await
    }

    async fn heartbeat(
        &self,
        executor: &str,
        take_over: bool,
    ) -> Result<Vec<TakenOver>, StoreError> {
        let expired_after = self.lease_ms + super::store::TAKEOVER_GRACE_MS;
        in_tx!(self, notify, tx => async {
            events::renew(&tx, executor, self.lease_ms).await?;
            if !take_over {
                return Ok(Vec::new());
            }
            workflows::take_over(&tx, executor, expired_after, false).await
        })
    }

    async fn reclaim_own(&self, executor: &str) -> Result<Vec<TakenOver>, StoreError> {
        in_tx!(self, notify, tx => workflows::take_over(&tx, executor, i64::MAX / 2, true))
    }

    async fn release(&self, executor: &str) -> Result<(), StoreError> {
        exec(
            &self.client().await?,
            "UPDATE engines SET heartbeat_at = 0 WHERE executor_id = $1",
            &[&executor],
        )
        .await?;
        Ok(())
    }

    async fn engines(&self) -> Result<Vec<EngineRow>, StoreError> {
        events::engines(&self.client().await?).await
    }

    fn describe(&self) -> String {
        self.shown.clone()
    }

    async fn lost(&self) -> Option<String> {
        let c = self.client().await.ok()?;
        let row = c
            .query_one("SELECT to_regclass('workflow_status') IS NULL", &[])
            .await
            .ok()?;
        row.get::<_, bool>(0).then(|| {
            format!(
                "manent's schema in {} is gone (its tables were dropped while the engine ran): \
                 nothing more can be recorded, the engine stops. Restore the database from a \
                 backup; `manent db check` says what is there",
                self.shown
            )
        })
    }

    async fn check(&self) -> Result<(), StoreError> {
        self.client().await?.batch_execute("SELECT 1").await?;
        Ok(())
    }

    async fn enqueued(&self, executor: &str) -> Result<Vec<String>, StoreError> {
        workflows::claimable(&self.client().await?, executor, self.lease_ms).await
    }

    async fn history(&self, id: &str) -> Result<History, StoreError> {
        steps::history(&self.client().await?, id).await
    }

    async fn begin_attempt(&self, a: AttemptStart) -> Result<(), StoreError> {
        self.grouped(group::Op::Begin(a)).await
    }

    async fn end_attempt(&self, a: AttemptEnd) -> Result<(), StoreError> {
        steps::end_attempt(&self.client().await?, &a).await
    }

    async fn checkpoint(&self, cp: Checkpoint) -> Result<(), StoreError> {
        self.grouped(group::Op::Checkpoint(cp)).await
    }

    async fn consume(
        &self,
        workflow_id: &str,
        run_token: &str,
        function_id: u32,
        topics: &[String],
    ) -> Result<Option<Message>, StoreError> {
        in_tx!(self, tx => steps::consume(&tx, workflow_id, run_token, function_id, topics))
    }

    async fn stopped(&self, id: &str, run_token: &str) -> Result<(), StoreError> {
        workflows::stopped(&self.client().await?, id, run_token).await
    }

    async fn finish(
        &self,
        id: &str,
        run_token: &str,
        out: Outcome,
    ) -> Result<Finished, StoreError> {
        in_tx!(self, notify, tx => workflows::finish(&tx, id, run_token, out))
    }

    async fn park_unclaimed(&self, id: &str) -> Result<bool, StoreError> {
        in_tx!(self, notify, tx => workflows::park_unclaimed(&tx, id))
    }

    async fn cancel(&self, id: &str, records: Vec<Record>) -> Result<WorkflowRow, StoreError> {
        let ext = self.ext.clone();
        in_tx!(self, notify, tx => workflows::cancel(&tx, id, &records, ext.as_ref()))
    }

    async fn resume(&self, id: &str, records: Vec<Record>) -> Result<WorkflowRow, StoreError> {
        let ext = self.ext.clone();
        in_tx!(self, notify, tx => workflows::resume(&tx, id, &records, ext.as_ref()))
    }

    async fn send(&self, req: SendRequest) -> Result<Sent, StoreError> {
        let ext = self.ext.clone();
        in_tx!(self, notify, tx => steps::send(&tx, &req, ext.as_ref()))
    }

    async fn publish(
        &self,
        workflow_id: &str,
        run_token: &str,
        evs: Vec<(String, String)>,
    ) -> Result<(), StoreError> {
        in_tx!(self, tx => events::publish(&tx, workflow_id, run_token, &evs))
    }

    async fn record_lease(&self, executor: &str, pid: u32, host: &str) -> Result<(), StoreError> {
        in_tx!(self, tx => events::register(&tx, executor, pid, host, self.lease_ms))
    }

    fn changes(&self) -> Option<&tokio::sync::Notify> {
        Some(&self.changes.notify)
    }

    async fn data_version(&self) -> Result<i64, StoreError> {
        use std::sync::atomic::Ordering;
        // What LISTEN heard: new workflows, commands, outcomes, takeovers (steps' checkpoints
        // do not notify). While the listener reconnects, the WAL position, which moves with
        // every commit anywhere in the cluster.
        if self.changes.listening.load(Ordering::SeqCst) {
            return Ok(self.changes.version.load(Ordering::SeqCst));
        }
        let c = self.client().await?;
        let row = query_opt(&c, "SELECT (pg_current_wal_lsn() - '0/0')::BIGINT", &[]).await?;
        Ok(row.map_or(0, |r| r.get(0)))
    }

    async fn workflow(&self, id: &str) -> Result<Option<WorkflowRow>, StoreError> {
        workflows::get(&self.client().await?, id).await
    }

    async fn workflows(&self, q: WorkflowQuery) -> Result<Vec<WorkflowRow>, StoreError> {
        workflows::list(&self.client().await?, &q).await
    }

    async fn state(
        &self,
        id: &str,
        skip_steps: &'static [&'static str],
    ) -> Result<Option<WorkflowState>, StoreError> {
        // One snapshot: another engine's commit cannot land between the queries.
        let mut client = self.client().await?;
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let Some(row) = workflows::get(&tx, id).await? else {
            return Ok(None);
        };
        let state = WorkflowState {
            row,
            events: events::events(&tx, id).await?,
            event_times: events::event_times(&tx, id).await?,
            history: steps::history_except(&tx, id, skip_steps).await?,
            pending: steps::pending_messages(&tx, id).await?,
        };
        tx.commit().await?;
        Ok(Some(state))
    }

    async fn events(&self, id: &str) -> Result<BTreeMap<String, String>, StoreError> {
        events::events(&self.client().await?, id).await
    }

    async fn events_except(
        &self,
        id: &str,
        skip: &'static [&'static str],
    ) -> Result<BTreeMap<String, String>, StoreError> {
        events::events_except(&self.client().await?, id, skip).await
    }

    async fn pending_messages(&self, id: &str) -> Result<Vec<Message>, StoreError> {
        steps::pending_messages(&self.client().await?, id).await
    }

    async fn close(&self) -> Result<(), StoreError> {
        self.pool.close();
        Ok(())
    }
}

/// A password goes only to a server that proved itself: over TCP, TLS is required (verified by
/// rustls against the system's authorities and `sslrootcert`, SCRAM with channel binding when
/// the server offers it), never `sslmode=disable` and never the plain fallback `prefer` allows;
/// over a Unix socket, its directory must be one no one else may write (where another user
/// could put a socket of their own, a password would go to them).
fn guard_password(pg: &mut tokio_postgres::Config) -> Result<(), String> {
    use tokio_postgres::config::{Host, SslMode};
    let mut tcp = false;
    for host in pg.get_hosts() {
        match host {
            Host::Tcp(_) => tcp = true,
            Host::Unix(dir) => {
                use std::os::unix::fs::MetadataExt;
                let meta = std::fs::metadata(dir)
                    .map_err(|e| format!("the socket directory {}: {e}", dir.display()))?;
                if meta.mode() & 0o002 != 0 {
                    return Err(format!(
                        "the password is not sent over a Unix socket in {} (mode {:04o}): \
                         anyone may put a socket of their own there; use the server's own \
                         socket directory (`/var/run/postgresql`) or TLS",
                        dir.display(),
                        meta.mode() & 0o7777
                    ));
                }
            }
        }
    }
    if tcp {
        if pg.get_ssl_mode() == SslMode::Disable {
            return Err(
                "sslmode=disable with a password: the password would cross the network in a \
                 form a listener can read or replay, to a server that never proved who it is; \
                 remove sslmode=disable (TLS, verified, is then required), or connect over the \
                 server's Unix socket"
                    .into(),
            );
        }
        pg.ssl_mode(SslMode::Require);
    }
    Ok(())
}

/// How a connection to `url` goes, in words: over TLS (required with a password, verified) or
/// a Unix socket, and whether a password is sent (for `manent db check`).
pub fn channel(url: &str, password: Option<&str>) -> String {
    use tokio_postgres::config::{Host, SslMode};
    let (url, rootcert) = tls_params(url);
    let Ok(pg) = url.parse::<tokio_postgres::Config>() else {
        return "not a PostgreSQL URL".into();
    };
    let authorities = match &rootcert {
        Some(ca) => format!("the system's authorities and {}", ca.display()),
        None => "the system's authorities".into(),
    };
    let pass = match password {
        Some(name) => format!("password from secret `{name}`"),
        None => "no password".into(),
    };
    let mut ways = Vec::new();
    for host in pg.get_hosts() {
        ways.push(match host {
            Host::Unix(dir) => format!("Unix socket in {}", dir.display()),
            Host::Tcp(h) => {
                let tls = if password.is_some() && pg.get_ssl_mode() == SslMode::Disable {
                    "refused: sslmode=disable with a password".into()
                } else if password.is_some() || pg.get_ssl_mode() == SslMode::Require {
                    format!("TLS required, verified against {authorities}")
                } else if pg.get_ssl_mode() == SslMode::Disable {
                    "no TLS (sslmode=disable)".into()
                } else {
                    format!("TLS when offered, verified against {authorities}")
                };
                format!("{h}: {tls}; SCRAM with channel binding when the server offers it")
            }
        });
    }
    format!("{}; {pass}", ways.join("; "))
}

#[cfg(test)]
mod channel_tests {
    use super::channel;

    #[test]
    fn db_check_says_how_the_connection_goes_and_whether_a_password_does() {
        let tls = channel(
            "postgres://manent@db.internal:5432/m?sslrootcert=/etc/manent/ca.pem",
            Some("pg"),
        );
        assert!(
            tls.contains(
                "TLS required, verified against the system's authorities and \
                          /etc/manent/ca.pem"
            ) && tls.contains("password from secret `pg`"),
            "{tls}"
        );
        let offered = channel("postgres://manent@db.internal/m", None);
        assert!(
            offered.contains("TLS when offered") && offered.contains("no password"),
            "{offered}"
        );
        let socket = channel("postgres:///m?host=/var/run/postgresql", None);
        assert!(
            socket.contains("Unix socket in /var/run/postgresql"),
            "{socket}"
        );
    }
}
