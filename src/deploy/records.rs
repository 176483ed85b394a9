//! What deploys keep beside the engine's checkpoint log: the releases live on each moniker (and
//! the ones before), the operator journal, and log lines. They live in the same database — the
//! SQLite store's [`DeployRecords`] extension owns their tables — and the ones that must commit
//! with an engine write (a release with its target's step, a journal entry with the command it
//! records) travel as [`Record`]s.

pub mod copy;
mod postgres;
mod sqlite;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use self::sqlite::DeployRecords;
use crate::operator::Operator;
/// What a read or write of the records fails with.
pub use crate::workflow::StoreError;
use crate::workflow::store::{Effect, Record};
use crate::workflow::{SqliteStore, Store, Synchronous};

/// A release on a moniker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseRecord {
    /// Row id: releases are ordered by it.
    #[serde(default)]
    pub id: i64,
    /// The moniker.
    pub moniker: String,
    /// `application/environment`.
    pub subject: String,
    /// Version string.
    pub version: String,
    /// JSON artifact.
    pub artifact: String,
    /// The deployment that made it live.
    pub deployment_id: String,
    /// Epoch ms.
    pub recorded_at: i64,
    /// The rollback that took it down, if any.
    pub rolled_back_by: Option<String>,
}

/// A rollback of one moniker: every release recorded after `to` (a release id; `None`: every
/// release) is marked rolled back by deployment `by`, so `to` is live again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolledBack {
    /// The moniker.
    pub moniker: String,
    /// The release live again.
    pub to: Option<i64>,
    /// The rollback.
    pub by: String,
}

/// One operator action in the audit journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// Epoch ms.
    pub at: i64,
    /// `SUDO_USER` or `USER`.
    pub operator: String,
    /// `SSH_CONNECTION`'s client address, if any.
    pub client: Option<String>,
    /// `deploy`, `cancel`, `resume`, `rollback`, `pause`, …
    pub action: String,
    /// The deployment acted on.
    pub workflow_id: Option<String>,
    /// `application/environment`.
    pub subject: Option<String>,
    /// What exactly (version, target count).
    pub detail: Option<String>,
    /// The operator's reason.
    pub reason: Option<String>,
}

impl JournalEntry {
    /// An entry for `action` by `operator`, now.
    pub fn by(
        operator: &Operator,
        action: &str,
        workflow_id: Option<&str>,
        subject: Option<&str>,
        detail: Option<String>,
        reason: Option<&str>,
    ) -> JournalEntry {
        JournalEntry {
            at: crate::sys::now_ms(),
            operator: operator.name.clone(),
            client: operator.client.clone(),
            action: action.to_owned(),
            workflow_id: workflow_id.map(str::to_owned),
            subject: subject.map(str::to_owned),
            detail,
            reason: reason.map(str::to_owned),
        }
    }
}

/// A log line kept for `manent logs` and attached consoles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRecord {
    /// Row id (0 before insert).
    pub id: i64,
    /// Deployment it belongs to.
    pub workflow_id: Option<String>,
    /// Epoch ms.
    pub at: i64,
    /// `error`, `warn`, `info`, `debug`, `trace`.
    pub level: String,
    /// `engine` or the plugin's name.
    pub source: String,
    /// Target name, when the line is about one.
    pub target: Option<String>,
    /// The message.
    pub message: String,
    /// JSON attributes.
    pub attrs: Option<String>,
}

/// A deploy lock on an application's environment: deploys, rollbacks and canaries there are
/// refused until it is lifted or expires (a break-glass `--force --reason` goes through it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    /// `application/environment`.
    pub subject: String,
    /// Who locked it.
    pub operator: String,
    /// Their ssh client address, if any.
    pub client: Option<String>,
    /// The host they locked it from.
    pub host: String,
    /// Why (required).
    pub reason: String,
    /// Epoch ms.
    pub since: i64,
    /// Epoch ms after which it no longer blocks (`None`: until unlocked).
    pub expires_at: Option<i64>,
}

impl Lock {
    /// True when it is another person's than `operator`'s (what they claimed aside): lifting
    /// or replacing it then needs `--force` and a reason.
    pub fn held_by_another(&self, operator: &str) -> bool {
        crate::operator::Operator::person(&self.operator)
            != crate::operator::Operator::person(operator)
    }

    /// The lock that keeps `operator` from locking or unlocking a subject: the active one, when
    /// it is another person's and they do not override it (`--force`); decided the same on
    /// every store.
    pub fn refusing(held: Option<&Lock>, operator: &str, overriding: bool) -> Option<Lock> {
        held.filter(|h| h.held_by_another(operator) && !overriding)
            .cloned()
    }

    /// Still blocking at `now` (epoch ms).
    pub fn active_at(&self, now: i64) -> bool {
        self.expires_at.is_none_or(|e| e > now)
    }

    /// `alice on bastion-1`.
    pub fn owner(&self) -> String {
        match &self.client {
            Some(c) => format!("{} (from {c}) on {}", self.operator, self.host),
            None => format!("{} on {}", self.operator, self.host),
        }
    }
}

/// A notification waiting in the outbox (or delivered).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxRow {
    /// Row id: deliveries to one receiver go in this order.
    #[serde(default)]
    pub id: i64,
    /// The receiver's name.
    pub receiver: String,
    /// The deployment.
    pub workflow_id: String,
    /// The transition's identity within the deployment (one row per receiver and mark).
    pub mark: String,
    /// `started`, `waiting`, …
    pub event: String,
    /// The JSON body.
    pub body: String,
    /// Failed deliveries so far.
    #[serde(default)]
    pub attempts: u32,
    /// Not before (epoch ms).
    pub next_at: i64,
}

/// Which slot serves an application's environment, as manent left it: what a canary tells the
/// router before PrepareSlots (the router never has to guess from its own files), updated in
/// the same transaction as the call that changed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotRecord {
    /// `application/environment`.
    pub subject: String,
    /// The slot serving production.
    pub stable: String,
    /// The release in it.
    pub stable_version: String,
    /// The other slot.
    pub candidate: String,
    /// The release in it.
    pub candidate_version: String,
    /// The other slot is in a pool (a canary's candidate, possibly taking traffic), not retired.
    pub candidate_live: bool,
    /// The deployment that wrote this.
    pub deployment_id: String,
    /// Epoch ms.
    pub updated_at: i64,
}

impl SlotRecord {
    /// Recorded with the step that changed the slots.
    pub fn effect(&self) -> Effect {
        Effect::Record(record(SLOTS, self))
    }
}

/// What one delivery attempt of a notification came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Delivered at (epoch ms).
    Delivered(i64),
    /// Failed; tried again at `next_at`.
    Failed { next_at: i64, error: String },
    /// Given up at `at` (a refusal, or too many failures): set aside so later ones flow.
    Parked { at: i64, error: String },
}

/// A parked notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parked {
    /// The notification.
    pub row: OutboxRow,
    /// When it was set aside (epoch ms).
    pub parked_at: i64,
    /// The last failure.
    pub error: String,
}

const RELEASE: &str = "release";
const SLOTS: &str = "slots";
const ROLLED_BACK: &str = "rolled_back";
const JOURNAL: &str = "journal";

fn record(kind: &str, body: &impl Serialize) -> Record {
    Record {
        kind: kind.to_owned(),
        body: serde_json::to_value(body).unwrap_or(serde_json::Value::Null),
    }
}

impl ReleaseRecord {
    /// Recorded with the step that made it live.
    pub fn effect(&self) -> Effect {
        Effect::Record(record(RELEASE, self))
    }
}

impl RolledBack {
    /// Recorded with the step that rolled the moniker back.
    pub fn effect(&self) -> Effect {
        Effect::Record(record(ROLLED_BACK, self))
    }
}

impl JournalEntry {
    /// Journaled in the same transaction as what it records.
    pub fn record(&self) -> Record {
        record(JOURNAL, self)
    }
}

/// Deploys' records in the system database.
#[async_trait]
pub trait Records: Send + Sync {
    /// Release history of a subject, oldest first.
    async fn releases(&self, subject: &str) -> Result<Vec<ReleaseRecord>, StoreError>;
    /// Which slot serves `subject`, as the last canary there left it.
    async fn slots(&self, subject: &str) -> Result<Option<SlotRecord>, StoreError>;
    /// Appends an audit journal entry.
    async fn journal(&self, entry: JournalEntry) -> Result<(), StoreError>;
    /// The newest `limit` journal entries of a subject or workflow (or all), newest first.
    async fn journal_entries(
        &self,
        subject: Option<&str>,
        workflow_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<JournalEntry>, StoreError>;
    /// Appends log lines.
    async fn append_logs(&self, lines: Vec<LogRecord>) -> Result<(), StoreError>;
    /// Log lines of workflow `id` after row id `after`, at most `limit`; with
    /// `unassigned_after`, also the engine's and plugins' lines that belong to no deployment
    /// (a plugin that restarts, an unpinned binary) after that row id.
    async fn logs(
        &self,
        id: &str,
        after: i64,
        unassigned_after: Option<i64>,
        limit: u32,
    ) -> Result<Vec<LogRecord>, StoreError>;
    /// Every log line after row id `after`, at most `limit` (an attached console's feed).
    async fn recent_logs(&self, after: i64, limit: u32) -> Result<Vec<LogRecord>, StoreError>;
    /// The newest log row id (0 when there is none).
    async fn last_log_id(&self) -> Result<i64, StoreError>;
    /// Deletes log lines written before `before` (epoch ms); returns how many.
    async fn prune_logs(&self, before: i64) -> Result<u64, StoreError>;
    /// Locks `lock.subject`, journaling `entry` in the same transaction. An active lock of
    /// another operator is kept and returned (`Err`) unless `replace`; the same operator's is
    /// updated (a new reason or expiry).
    async fn lock(
        &self,
        lock: Lock,
        replace: bool,
        entry: JournalEntry,
    ) -> Result<Result<(), Lock>, StoreError>;
    /// Lifts the lock on `subject`, journaling `entry` (whose operator acts) with it; the lock
    /// lifted (`None`: there was no active one, and nothing is journaled). Another operator's
    /// lock is kept and returned (`Err`) unless `force`.
    async fn unlock(
        &self,
        subject: &str,
        force: bool,
        entry: JournalEntry,
    ) -> Result<Result<Option<Lock>, Lock>, StoreError>;
    /// The locks active at `now` (epoch ms), by subject.
    async fn locks(&self, now: i64) -> Result<Vec<Lock>, StoreError>;
    /// Adds notifications not already there (by receiver, deployment and mark); how many were
    /// new.
    async fn enqueue(&self, rows: Vec<OutboxRow>) -> Result<usize, StoreError>;
    /// `receiver`'s notifications neither delivered nor parked, oldest first.
    async fn undelivered(&self, receiver: &str, limit: u32) -> Result<Vec<OutboxRow>, StoreError>;
    /// Records a delivery, a failed attempt and when to try again, or a parked notification.
    async fn delivery(&self, id: i64, outcome: Delivery) -> Result<(), StoreError>;
    /// Parked notifications (a receiver refused them, or they failed too often), oldest first.
    async fn parked(&self, limit: u32) -> Result<Vec<Parked>, StoreError>;
    /// Sends parked notification `id` (every parked one: `None`) again from the start of its
    /// receiver's queue position; how many.
    async fn unpark(&self, id: Option<i64>, now: i64) -> Result<u64, StoreError>;
    /// When notification receiver `name` was first seen by an engine (recorded as `now` the
    /// first time): it is sent what happens from then on, never the history before it.
    async fn receiver_enabled(&self, name: &str, now: i64) -> Result<i64, StoreError>;
    /// Workflows by kind and status (`deploy`, `SUCCESS`, 12): the metrics' gauge.
    async fn workflow_counts(&self) -> Result<Vec<(String, String, i64)>, StoreError>;
}

/// The system database as deploys use it: the engine's store and deploys' records.
pub trait Db: Store + Records {}

impl<T: Store + Records + ?Sized> Db for T {}

/// The configured system database with deploys' tables: the SQLite file (checked and created
/// under the configuration's file rules), or the shared PostgreSQL (its password and inputs key
/// read from their secrets now). `check` runs SQLite's quick check first, as an engine does at
/// start.
pub async fn open_configured(
    config: &crate::config::Config,
    check: bool,
) -> Result<std::sync::Arc<dyn Db>, StoreError> {
    let Some(pg) = &config.postgres else {
        return Ok(std::sync::Arc::new(open_trusted(
            &config.database,
            config.engine.synchronous,
            check,
            &trust(config).map_err(|reason| StoreError::Open {
                path: config.database.display().to_string(),
                reason,
            })?,
        )?));
    };
    let password = postgres_password(config, pg).await?;
    let key = postgres_inputs_key(config, pg).await?;
    // Only an engine makes the schema; every other command finds it, or says it is not there.
    Ok(std::sync::Arc::new(
        crate::workflow::PostgresStore::connect(
            &crate::workflow::postgres::Server {
                url: &pg.url,
                password: password.as_deref(),
                pool_size: POOL,
                lease: config.engine.lease,
            },
            std::sync::Arc::new(DeployRecords),
            key,
            check,
        )
        .await?,
    ))
}

/// The rules for the engine's files under `config` (its `engine.shared_group`).
pub fn trust(config: &crate::config::Config) -> Result<crate::sys::files::Trust, String> {
    crate::sys::files::Trust::new(config.engine.shared_group.as_deref())
}

/// Connections an engine keeps to a shared PostgreSQL: concurrent steps' commits share the
/// server's WAL flushes (its group commit); more connections measured slower on 2 cores
/// (PostgreSQL's backends compete with the engine for the CPU), and several engines must fit
/// in the server's `max_connections` (100).
const POOL: usize = 16;

/// The value of secret `name`, read now (and known to redaction).
async fn secret_value(
    config: &crate::config::Config,
    name: &str,
) -> Result<String, crate::plugin::PluginError> {
    use crate::plugin::secrets::SecretSource;
    let secrets = crate::plugin::secrets::ConfigSecrets::new(config.secrets.clone());
    let value = secrets.secret(name).await?;
    crate::redact::register_redaction(&value);
    Ok(value)
}

/// The configured PostgreSQL's password, read from its secret now (and known to redaction).
pub async fn postgres_password(
    config: &crate::config::Config,
    pg: &crate::config::PostgresDb,
) -> Result<Option<String>, StoreError> {
    let Some(name) = &pg.password else {
        return Ok(None);
    };
    let password = secret_value(config, name)
        .await
        .map_err(|e| StoreError::Open {
            path: pg.shown(),
            reason: format!("its password (secret `{name}`): {e}"),
        })?;
    Ok(Some(password))
}

/// The key the engines on the shared PostgreSQL authenticate stored inputs with: the secret
/// `engine.inputs_key` names.
pub async fn postgres_inputs_key(
    config: &crate::config::Config,
    pg: &crate::config::PostgresDb,
) -> Result<crate::workflow::InputsKey, StoreError> {
    let fail = |reason: String| StoreError::Open {
        path: pg.shown(),
        reason,
    };
    let Some(name) = &config.engine.inputs_key else {
        return Err(fail(
            "`engine.inputs_key` is not set: a shared PostgreSQL needs the secret its engines \
             authenticate stored deployments with (see `manent validate`)"
                .into(),
        ));
    };
    let value = secret_value(config, name)
        .await
        .map_err(|e| fail(format!("its inputs key (secret `{name}`): {e}")))?;
    crate::workflow::InputsKey::from_secret(&value, &format!("engine.inputs_key (secret `{name}`)"))
        .map_err(fail)
}

/// Connects to the shared PostgreSQL system database at `url` with deploys' tables, its stored
/// inputs authenticated with `key`.
pub async fn open_postgres(
    url: &str,
    password: Option<&str>,
    pool_size: usize,
    key: crate::workflow::InputsKey,
) -> Result<crate::workflow::PostgresStore, StoreError> {
    crate::workflow::PostgresStore::open(
        url,
        password,
        pool_size,
        std::sync::Arc::new(DeployRecords),
        key,
    )
    .await
}

/// Opens the system database at `path` with deploys' tables, as this user's private files.
pub fn open(
    path: &std::path::Path,
    sync: Synchronous,
    check: bool,
) -> Result<SqliteStore, StoreError> {
    SqliteStore::open(path, sync, check, std::sync::Arc::new(DeployRecords))
}

/// [`open`] under `trust`'s file rules.
pub fn open_trusted(
    path: &std::path::Path,
    sync: Synchronous,
    check: bool,
    trust: &crate::sys::files::Trust,
) -> Result<SqliteStore, StoreError> {
    SqliteStore::open_trusted(path, sync, check, std::sync::Arc::new(DeployRecords), trust)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(operator: &str) -> Lock {
        Lock {
            subject: "shop/prod".into(),
            operator: operator.into(),
            client: None,
            host: "bastion-1".into(),
            reason: "freeze".into(),
            since: 0,
            expires_at: None,
        }
    }

    #[test]
    fn another_persons_lock_refuses_unless_overridden_and_ones_own_never_does() {
        let alice = lock("alice");
        assert_eq!(
            Lock::refusing(None, "bob", false),
            None,
            "no lock, nothing refuses"
        );
        assert_eq!(
            Lock::refusing(Some(&alice), "bob", false),
            Some(alice.clone())
        );
        assert_eq!(Lock::refusing(Some(&alice), "bob", true), None, "--force");
        assert_eq!(Lock::refusing(Some(&alice), "alice", false), None);
        // What someone claimed beside their name is not who they are.
        assert_eq!(
            Lock::refusing(Some(&alice), "alice (claimed SUDO_USER=bob)", false),
            None
        );
        let claimed = lock("nobody (claimed SUDO_USER=alice)");
        assert_eq!(
            Lock::refusing(Some(&claimed), "alice", false),
            Some(claimed.clone()),
            "a claim to be alice is not alice's lock"
        );
    }
}
