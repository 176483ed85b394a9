//! `manent db copy`: every row of the system database (deployments, their steps and attempts,
//! commands, events, releases, the journal, logs, locks, notifications, slots, receivers) from one store to
//! another — SQLite to PostgreSQL, and back — verified at the end by row counts and checksums
//! read back from the target. Engines' leases are not copied: they belong to running processes.
//! Nor is the inputs key: each database keeps its own, so every deployment whose inputs verify
//! with the source's key is signed with the target's (one that does not verify is copied as it
//! is, and the target's engines refuse it as the source's would).

use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::workflow::postgres::query;
use crate::workflow::{PostgresStore, SqliteStore, StoreError};

/// A column's type, as both stores hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Text,
    Bool,
}

use Kind::{Bool, Int, Text};

/// A table and the columns both schemas share, in the order rows are copied (parents first).
struct Table {
    name: &'static str,
    columns: &'static [(&'static str, Kind)],
    /// The order rows are read in, on SQLite and on PostgreSQL: insertion order where it
    /// matters (a mailbox's order).
    order_sqlite: &'static str,
    order_postgres: &'static str,
    /// An identity column whose sequence must follow the copied ids (PostgreSQL).
    identity: Option<&'static str>,
}

const TABLES: &[Table] = &[
    Table {
        name: "workflow_status",
        columns: &[
            ("workflow_id", Text),
            ("name", Text),
            ("definition_version", Int),
            ("inputs_sha256", Text),
            ("status", Text),
            ("executor_id", Text),
            ("run_token", Text),
            ("recovery_attempts", Int),
            ("max_recovery_attempts", Int),
            ("queue_name", Text),
            ("priority", Int),
            ("dedup_key", Text),
            ("subject", Text),
            ("parent_workflow_id", Text),
            ("forked_from", Text),
            ("created_at", Int),
            ("updated_at", Int),
            ("started_at", Int),
            ("completed_at", Int),
            ("deadline_at", Int),
            ("interrupt_requested", Bool),
            ("output", Text),
            ("error", Text),
            ("inputs", Text),
        ],
        order_sqlite: "created_at, workflow_id",
        order_postgres: "created_at, workflow_id",
        identity: None,
    },
    Table {
        name: "operation_outputs",
        columns: &[
            ("workflow_id", Text),
            ("function_id", Int),
            ("function_name", Text),
            ("output", Text),
            ("error", Text),
            ("child_workflow_id", Text),
            ("attempts", Int),
            ("started_at", Int),
            ("completed_at", Int),
            ("executor_id", Text),
        ],
        order_sqlite: "workflow_id, function_id",
        order_postgres: "workflow_id, function_id",
        identity: None,
    },
    Table {
        name: "step_attempts",
        columns: &[
            ("workflow_id", Text),
            ("function_id", Int),
            ("attempt", Int),
            ("function_name", Text),
            ("run_token", Text),
            ("started_at", Int),
            ("ended_at", Int),
            ("outcome", Text),
            ("error", Text),
        ],
        order_sqlite: "workflow_id, function_id, attempt",
        order_postgres: "workflow_id, function_id, attempt",
        identity: None,
    },
    Table {
        name: "notifications",
        columns: &[
            ("message_id", Text),
            ("destination_id", Text),
            ("topic", Text),
            ("message", Text),
            ("sender", Text),
            ("created_at", Int),
            ("consumed_by_function_id", Int),
            ("interrupts", Bool),
        ],
        order_sqlite: "created_at, rowid",
        order_postgres: "created_at, seq",
        identity: None,
    },
    Table {
        name: "workflow_events",
        columns: &[
            ("workflow_id", Text),
            ("key", Text),
            ("value", Text),
            ("function_id", Int),
            ("updated_at", Int),
        ],
        order_sqlite: "workflow_id, key",
        order_postgres: "workflow_id, key",
        identity: None,
    },
    Table {
        name: "workflow_events_history",
        columns: &[
            ("workflow_id", Text),
            ("function_id", Int),
            ("key", Text),
            ("value", Text),
        ],
        order_sqlite: "workflow_id, function_id, key",
        order_postgres: "workflow_id, function_id, key",
        identity: None,
    },
    Table {
        name: "releases",
        columns: &[
            ("id", Int),
            ("moniker", Text),
            ("subject", Text),
            ("version", Text),
            ("artifact", Text),
            ("deployment_id", Text),
            ("recorded_at", Int),
            ("rolled_back_by", Text),
        ],
        order_sqlite: "id",
        order_postgres: "id",
        identity: Some("id"),
    },
    Table {
        name: "journal",
        columns: &[
            ("id", Int),
            ("at", Int),
            ("operator", Text),
            ("client", Text),
            ("action", Text),
            ("workflow_id", Text),
            ("subject", Text),
            ("detail", Text),
            ("reason", Text),
        ],
        order_sqlite: "id",
        order_postgres: "id",
        identity: Some("id"),
    },
    Table {
        name: "logs",
        columns: &[
            ("id", Int),
            ("workflow_id", Text),
            ("at", Int),
            ("level", Text),
            ("source", Text),
            ("target", Text),
            ("message", Text),
            ("attrs", Text),
        ],
        order_sqlite: "id",
        order_postgres: "id",
        identity: Some("id"),
    },
    Table {
        name: "locks",
        columns: &[
            ("subject", Text),
            ("operator", Text),
            ("client", Text),
            ("host", Text),
            ("reason", Text),
            ("since", Int),
            ("expires_at", Int),
        ],
        order_sqlite: "subject",
        order_postgres: "subject",
        identity: None,
    },
    Table {
        name: "outbox",
        columns: &[
            ("id", Int),
            ("receiver", Text),
            ("workflow_id", Text),
            ("mark", Text),
            ("event", Text),
            ("body", Text),
            ("created_at", Int),
            ("attempts", Int),
            ("next_at", Int),
            ("delivered_at", Int),
            ("last_error", Text),
            ("parked_at", Int),
        ],
        order_sqlite: "id",
        order_postgres: "id",
        identity: Some("id"),
    },
    Table {
        name: "slots",
        columns: &[
            ("subject", Text),
            ("stable", Text),
            ("stable_version", Text),
            ("candidate", Text),
            ("candidate_version", Text),
            ("candidate_live", Bool),
            ("deployment_id", Text),
            ("updated_at", Int),
        ],
        order_sqlite: "subject",
        order_postgres: "subject",
        identity: None,
    },
    Table {
        name: "receivers",
        columns: &[("name", Text), ("enabled_at", Int)],
        order_sqlite: "name",
        order_postgres: "name",
        identity: None,
    },
];

/// Rows read or written at a time.
const CHUNK: i64 = 5000;

/// One value of a row.
#[derive(Debug, Clone, PartialEq)]
enum Cell {
    Null,
    Int(i64),
    Text(String),
    Bool(bool),
}

/// Either store, opened with deploys' tables.
pub enum Side {
    /// A SQLite file.
    Sqlite(Arc<SqliteStore>),
    /// A PostgreSQL database.
    Postgres(Arc<PostgresStore>),
}

impl Side {
    /// The key its stored inputs are authenticated with.
    fn inputs_key(&self) -> &crate::workflow::InputsKey {
        match self {
            Side::Sqlite(s) => s.inputs_key(),
            Side::Postgres(p) => p.inputs_key(),
        }
    }

    /// Where it is, as it may be shown.
    pub fn describe(&self) -> String {
        use crate::workflow::Store;
        match self {
            Side::Sqlite(s) => s.describe(),
            Side::Postgres(p) => p.describe(),
        }
    }

    async fn read(&self, t: &'static Table, offset: i64) -> Result<Vec<Vec<Cell>>, StoreError> {
        let cols = t
            .columns
            .iter()
            .map(|(c, _)| *c)
            .collect::<Vec<_>>()
            .join(", ");
        match self {
            Side::Sqlite(s) => {
                let sql = format!(
                    "SELECT {cols} FROM {} ORDER BY {} LIMIT {CHUNK} OFFSET {offset}",
                    t.name, t.order_sqlite
                );
                s.read(move |c| {
                    let mut stmt = c.prepare(&sql)?;
                    let rows = stmt
                        .query_map([], |r| {
                            t.columns
                                .iter()
                                .enumerate()
                                .map(|(i, (_, kind))| {
                                    Ok(match kind {
                                        Int => r
                                            .get::<_, Option<i64>>(i)?
                                            .map_or(Cell::Null, Cell::Int),
                                        Text => r
                                            .get::<_, Option<String>>(i)?
                                            .map_or(Cell::Null, Cell::Text),
                                        Bool => r
                                            .get::<_, Option<bool>>(i)?
                                            .map_or(Cell::Null, Cell::Bool),
                                    })
                                })
                                .collect::<rusqlite::Result<Vec<Cell>>>()
                        })?
                        .collect::<rusqlite::Result<Vec<_>>>()?;
                    Ok(rows)
                })
                .await
            }
            Side::Postgres(p) => {
                let sql = format!(
                    "SELECT {cols} FROM {} ORDER BY {} LIMIT {CHUNK} OFFSET {offset}",
                    t.name, t.order_postgres
                );
                let rows = query(&p.client().await?, &sql, &[]).await?;
                Ok(rows
                    .iter()
                    .map(|r| {
                        t.columns
                            .iter()
                            .enumerate()
                            .map(|(i, (_, kind))| match kind {
                                Int => r.get::<_, Option<i64>>(i).map_or(Cell::Null, Cell::Int),
                                Text => {
                                    r.get::<_, Option<String>>(i).map_or(Cell::Null, Cell::Text)
                                }
                                Bool => r.get::<_, Option<bool>>(i).map_or(Cell::Null, Cell::Bool),
                            })
                            .collect()
                    })
                    .collect())
            }
        }
    }

    /// Rows in the tables a copy fills (an empty target has none).
    async fn rows_in(&self) -> Result<i64, StoreError> {
        let mut n = 0;
        for t in TABLES {
            n += self.count(t).await?;
        }
        Ok(n)
    }

    async fn count(&self, t: &'static Table) -> Result<i64, StoreError> {
        let sql = format!("SELECT COUNT(*) FROM {}", t.name);
        match self {
            Side::Sqlite(s) => {
                s.read(move |c| Ok(c.query_row(&sql, [], |r| r.get(0))?))
                    .await
            }
            Side::Postgres(p) => Ok(query(&p.client().await?, &sql, &[]).await?[0].get(0)),
        }
    }

    /// Deletes every row of the copied tables (`--force`), children first.
    async fn empty(&self) -> Result<(), StoreError> {
        match self {
            Side::Sqlite(s) => {
                s.write(|c| {
                    for t in TABLES.iter().rev() {
                        c.execute(&format!("DELETE FROM {}", t.name), [])?;
                    }
                    Ok(())
                })
                .await
            }
            Side::Postgres(p) => {
                let names: Vec<&str> = TABLES.iter().map(|t| t.name).collect();
                p.client()
                    .await?
                    .batch_execute(&format!("TRUNCATE {} CASCADE", names.join(", ")))
                    .await?;
                Ok(())
            }
        }
    }

    async fn write(&self, t: &'static Table, rows: Vec<Vec<Cell>>) -> Result<(), StoreError> {
        let cols: Vec<&str> = t.columns.iter().map(|(c, _)| *c).collect();
        match self {
            Side::Sqlite(s) => {
                let marks = (1..=cols.len())
                    .map(|i| format!("?{i}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let sql = format!(
                    "INSERT INTO {} ({}) VALUES ({marks})",
                    t.name,
                    cols.join(", ")
                );
                s.write(move |c| {
                    let mut stmt = c.prepare_cached(&sql)?;
                    for row in &rows {
                        let params: Vec<rusqlite::types::Value> = row
                            .iter()
                            .map(|cell| match cell {
                                Cell::Null => rusqlite::types::Value::Null,
                                Cell::Int(i) => rusqlite::types::Value::Integer(*i),
                                Cell::Text(s) => rusqlite::types::Value::Text(s.clone()),
                                Cell::Bool(b) => rusqlite::types::Value::Integer(i64::from(*b)),
                            })
                            .collect();
                        stmt.execute(rusqlite::params_from_iter(params))?;
                    }
                    Ok(())
                })
                .await
            }
            Side::Postgres(p) => {
                // One statement per chunk: a column array each, unnested into rows in order.
                let mut ints: Vec<Vec<Option<i64>>> = Vec::new();
                let mut texts: Vec<Vec<Option<String>>> = Vec::new();
                let mut bools: Vec<Vec<Option<bool>>> = Vec::new();
                let mut slots = Vec::new();
                for (_, kind) in t.columns {
                    match kind {
                        Int => {
                            slots.push((Int, ints.len()));
                            ints.push(Vec::with_capacity(rows.len()));
                        }
                        Text => {
                            slots.push((Text, texts.len()));
                            texts.push(Vec::with_capacity(rows.len()));
                        }
                        Bool => {
                            slots.push((Bool, bools.len()));
                            bools.push(Vec::with_capacity(rows.len()));
                        }
                    }
                }
                for row in rows {
                    for (cell, (kind, at)) in row.into_iter().zip(&slots) {
                        match (kind, cell) {
                            (Int, Cell::Int(i)) => ints[*at].push(Some(i)),
                            (Int, _) => ints[*at].push(None),
                            (Text, Cell::Text(s)) => texts[*at].push(Some(s)),
                            (Text, _) => texts[*at].push(None),
                            (Bool, Cell::Bool(b)) => bools[*at].push(Some(b)),
                            (Bool, _) => bools[*at].push(None),
                        }
                    }
                }
                let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = Vec::new();
                let mut casts = Vec::new();
                for (i, (kind, at)) in slots.iter().enumerate() {
                    let (p, cast): (&(dyn tokio_postgres::types::ToSql + Sync), &str) = match kind {
                        Int => (&ints[*at], "BIGINT[]"),
                        Text => (&texts[*at], "TEXT[]"),
                        Bool => (&bools[*at], "BOOLEAN[]"),
                    };
                    params.push(p);
                    casts.push(format!("${}::{cast}", i + 1));
                }
                let names: Vec<String> = (0..cols.len()).map(|i| format!("c{i}")).collect();
                let sql = format!(
                    "INSERT INTO {} ({}) SELECT {} FROM UNNEST({}) WITH ORDINALITY AS t({}, n) \
                     ORDER BY n",
                    t.name,
                    cols.join(", "),
                    names.join(", "),
                    casts.join(", "),
                    names.join(", ")
                );
                p.client().await?.execute(sql.as_str(), &params).await?;
                Ok(())
            }
        }
    }

    /// After rows with explicit ids: new rows continue after the highest.
    async fn follow_identities(&self) -> Result<(), StoreError> {
        if let Side::Postgres(p) = self {
            let c = p.client().await?;
            for t in TABLES {
                if let Some(col) = t.identity {
                    c.batch_execute(&format!(
                        "SELECT setval(pg_get_serial_sequence('{0}', '{col}'), \
                         COALESCE((SELECT MAX({col}) FROM {0}), 0) + 1, false)",
                        t.name
                    ))
                    .await?;
                }
            }
        }
        Ok(())
    }
}

/// A table's rows and their checksum: the sum of each row's digest, so the order rows are read
/// in does not matter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    /// Rows.
    pub rows: i64,
    /// Order-independent checksum.
    pub sum: u128,
}

impl Tally {
    fn add(&mut self, row: &[Cell]) {
        let mut h = Sha256::new();
        for cell in row {
            match cell {
                Cell::Null => h.update(b"n"),
                Cell::Int(i) => {
                    h.update(b"i");
                    h.update(i.to_le_bytes());
                }
                Cell::Text(s) => {
                    h.update(b"t");
                    h.update((s.len() as u64).to_le_bytes());
                    h.update(s.as_bytes());
                }
                Cell::Bool(b) => h.update(if *b { b"T" } else { b"F" }),
            }
        }
        let d = h.finalize();
        let mut first = [0u8; 16];
        first.copy_from_slice(&d[..16]);
        self.rows += 1;
        self.sum = self.sum.wrapping_add(u128::from_le_bytes(first));
    }
}

/// What a copy did, per table.
#[derive(Debug, Clone)]
pub struct Copied {
    /// Table, and its rows and checksum on both sides (equal when verified).
    pub tables: Vec<(&'static str, Tally, Tally)>,
    /// Deployments whose stored inputs did not verify with the source's key: copied as they
    /// are, never signed with the target's.
    pub unverified: Vec<String>,
}

/// A `workflow_status` row's MAC made the target's, when the source's key vouches for it.
fn resign(
    row: &mut [Cell],
    from: &crate::workflow::InputsKey,
    to: &crate::workflow::InputsKey,
) -> bool {
    let text = |i: usize| match row.get(i) {
        Some(Cell::Text(s)) => s.clone(),
        _ => String::new(),
    };
    let (id, name, mac, inputs) = (text(0), text(1), text(3), text(row.len() - 1));
    if !from.verifies(&id, &name, &inputs, &mac) {
        return false;
    }
    row[3] = Cell::Text(to.mac(&id, &name, &inputs));
    true
}

impl Copied {
    /// True when every table's count and checksum agree.
    pub fn verified(&self) -> bool {
        self.tables.iter().all(|(_, a, b)| a == b)
    }
}

/// Why a copy did not start.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// The target has rows already.
    #[error("{target} is not empty ({rows} rows): copying into it would mix two histories")]
    NotEmpty { target: String, rows: i64 },
    /// A database error.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Copies every row from `from` to `to` (emptied first with `force`), then reads both back and
/// compares each table's count and checksum. `progress` hears each table as it is done.
pub async fn copy(
    from: &Side,
    to: &Side,
    force: bool,
    progress: &mut (dyn FnMut(&str, i64) + Send),
) -> Result<Copied, CopyError> {
    let there = to.rows_in().await?;
    if there > 0 {
        if !force {
            return Err(CopyError::NotEmpty {
                target: to.describe(),
                rows: there,
            });
        }
        to.empty().await?;
    }
    let mut tables = Vec::new();
    let mut unverified = Vec::new();
    for t in TABLES {
        let mut read = Tally::default();
        let mut offset = 0;
        loop {
            let mut rows = from.read(t, offset).await?;
            if rows.is_empty() {
                break;
            }
            offset += rows.len() as i64;
            for r in &mut rows {
                if t.name == "workflow_status"
                    && !resign(r, from.inputs_key(), to.inputs_key())
                    && let Some(Cell::Text(id)) = r.first()
                {
                    unverified.push(id.clone());
                }
                read.add(r);
            }
            to.write(t, rows).await?;
        }
        progress(t.name, read.rows);
        tables.push((t.name, read, Tally::default()));
    }
    to.follow_identities().await?;
    for (i, t) in TABLES.iter().enumerate() {
        let mut back = Tally::default();
        let mut offset = 0;
        loop {
            let rows = to.read(t, offset).await?;
            if rows.is_empty() {
                break;
            }
            offset += rows.len() as i64;
            for r in &rows {
                back.add(r);
            }
        }
        tables[i].2 = back;
    }
    Ok(Copied { tables, unverified })
}

/// Opens `target` for a copy: `postgres://…` (its password given apart, and `key`, the inputs
/// key its engines share), `sqlite:///path` or a file path (its key made beside it, under
/// `trust`'s file rules). The schema is created if missing.
pub async fn open_side(
    target: &str,
    password: Option<&str>,
    key: Option<crate::workflow::InputsKey>,
    trust: &crate::sys::files::Trust,
) -> Result<Side, StoreError> {
    if target.starts_with("postgres://") || target.starts_with("postgresql://") {
        let key = key.ok_or_else(|| StoreError::Open {
            path: crate::config::database::shown_url(target),
            reason: "no inputs key for it: give `--inputs-key NAME`, the secret (under \
                     `secrets:`) its engines will share as `engine.inputs_key`"
                .into(),
        })?;
        return Ok(Side::Postgres(Arc::new(
            super::open_postgres(target, password, 4, key).await?,
        )));
    }
    let path = target.strip_prefix("sqlite://").unwrap_or(target);
    Ok(Side::Sqlite(Arc::new(super::open_trusted(
        std::path::Path::new(path),
        crate::workflow::Synchronous::Full,
        false,
        trust,
    )?)))
}

/// The configured database, for a copy.
pub async fn configured_side(config: &crate::config::Config) -> Result<Side, StoreError> {
    match &config.postgres {
        Some(pg) => {
            let password = super::postgres_password(config, pg).await?;
            let key = super::postgres_inputs_key(config, pg).await?;
            Ok(Side::Postgres(Arc::new(
                super::open_postgres(&pg.url, password.as_deref(), 4, key).await?,
            )))
        }
        None => {
            let trust = super::trust(config).map_err(|reason| StoreError::Open {
                path: config.database.display().to_string(),
                reason,
            })?;
            open_side(&config.database.display().to_string(), None, None, &trust).await
        }
    }
}
