//! `manent db check` and `manent db copy`: the system database itself — where it is, its schema,
//! the engines using it; and moving its whole history to another store.

use std::path::Path;

use serde::Serialize;

use super::exit;
use super::output::{self, Out, database_shown, load_config};
use crate::deploy::records::copy::{self, CopyError};

/// What `db check` reports.
#[derive(Debug, Serialize)]
struct Check {
    database: String,
    store: &'static str,
    engines: Vec<EngineLine>,
    live_deployments: usize,
}

#[derive(Debug, Serialize)]
struct EngineLine {
    executor_id: String,
    host: String,
    pid: u32,
    heartbeat_ms_ago: i64,
    live: bool,
    running: usize,
}

/// `manent db check`: connects (a PostgreSQL URL, or the file), checks it, and lists the
/// engines that use it with what each runs.
pub async fn check(config_path: &Path, json: bool, out: &mut Out) -> u8 {
    let Some(config) = load_config(config_path, None, out) else {
        return exit::BAD_INPUT;
    };
    let shown = database_shown(&config);
    // A check never creates the database (nor a dropped schema): it says what is there.
    let store = match output::existing_store(&config).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            out.line(format!(
                "no database at {shown} yet: nothing has run with this configuration (an \
                 engine's first start creates it)"
            ));
            return exit::OK;
        }
        Err(e) => return output::db_error(&shown, &e, out),
    };
    if let Err(e) = store.check().await {
        return output::db_error(&shown, &e, out);
    }
    let (engines, live) = match (
        store.engines().await,
        store
            .workflows(crate::workflow::store::WorkflowQuery {
                live_only: true,
                heads: true,
                ..Default::default()
            })
            .await,
    ) {
        (Ok(e), Ok(l)) => (e, l),
        (Err(e), _) | (_, Err(e)) => return output::db_error(&shown, &e, out),
    };
    let lease = config.engine.lease_ms();
    let shared = config.postgres.is_some();
    let report = Check {
        database: shown,
        store: if shared { "postgresql" } else { "sqlite" },
        engines: engines
            .iter()
            .map(|e| EngineLine {
                executor_id: e.executor_id.clone(),
                host: e.host.clone(),
                pid: e.pid,
                heartbeat_ms_ago: e.age_ms,
                live: if shared {
                    e.alive(lease)
                } else {
                    crate::workflow::Lease::is_held(&config.database)
                },
                running: live
                    .iter()
                    .filter(|w| {
                        w.status == crate::workflow::store::WorkflowStatus::Pending
                            && w.executor_id.as_deref() == Some(&e.executor_id)
                    })
                    .count(),
            })
            .collect(),
        live_deployments: live.len(),
    };
    if json {
        out.json(&report);
        return exit::OK;
    }
    out.line(format!("database   {} ({})", report.database, report.store));
    if let Some(pg) = &config.postgres {
        out.line(format!(
            "channel    {}",
            crate::workflow::postgres::channel(&pg.url, pg.password.as_deref())
        ));
    }
    out.line("schema     current (this manent's version)");
    out.line(format!(
        "live       {} deployment(s) running or waiting",
        report.live_deployments
    ));
    if report.engines.is_empty() {
        out.line("engines    none has used it yet");
    }
    for e in &report.engines {
        out.line(format!(
            "engine     {} — pid {} on {}, {}, running {}",
            e.executor_id,
            e.pid,
            e.host,
            if e.live {
                format!(
                    "alive (heartbeat {} ago)",
                    output::duration(e.heartbeat_ms_ago.max(0) as u64)
                )
            } else {
                "gone".to_owned()
            },
            e.running
        ));
    }
    exit::OK
}

/// `manent db copy --to TARGET`: the configured database's every row into `target`, refused if
/// it has rows unless `force`, verified by counts and checksums read back.
pub async fn copy_to(config_path: &Path, a: &super::DbCopyArgs, out: &mut Out) -> u8 {
    let (target, force, json) = (a.to.as_str(), a.force, a.json.json);
    let Some(config) = load_config(config_path, None, out) else {
        return exit::BAD_INPUT;
    };
    let (target, password) = match target_of(&config, target).await {
        Ok(t) => t,
        Err(e) => {
            out.error(e);
            return exit::BAD_INPUT;
        }
    };
    let shown_target = crate::config::database::shown_url(&target);
    let from = match copy::configured_side(&config).await {
        Ok(s) => s,
        Err(e) => return output::db_error(&database_shown(&config), &e, out),
    };
    let key = match target_key(&config, a.inputs_key.as_deref()).await {
        Ok(k) => k,
        Err(e) => {
            out.error(e);
            return exit::BAD_INPUT;
        }
    };
    let trust = match crate::deploy::records::trust(&config) {
        Ok(t) => t,
        Err(e) => {
            out.error(e);
            return exit::BAD_INPUT;
        }
    };
    let to = match copy::open_side(&target, password.as_deref(), key, &trust).await {
        Ok(s) => s,
        Err(e) => return output::db_error(&shown_target, &e, out),
    };
    if from.describe() == to.describe() {
        out.error("the target is the configured database itself");
        return exit::BAD_INPUT;
    }
    out.note(format!(
        "manent: copying {} to {}",
        from.describe(),
        to.describe()
    ));
    let mut progress = |table: &str, rows: i64| {
        tracing::info!(table, rows, "copied");
    };
    let copied = match copy::copy(&from, &to, force, &mut progress).await {
        Ok(c) => c,
        Err(e @ CopyError::NotEmpty { .. }) => {
            out.error(format!("{e}; `--force` empties it first"));
            return exit::BAD_INPUT;
        }
        Err(CopyError::Store(e)) => return output::db_error(&to.describe(), &e, out),
    };
    if json {
        let tables: Vec<serde_json::Value> = copied
            .tables
            .iter()
            .map(|(name, a, b)| {
                serde_json::json!({
                    "table": name,
                    "rows": a.rows,
                    "rows_in_target": b.rows,
                    "checksum": format!("{:032x}", a.sum),
                    "checksum_in_target": format!("{:032x}", b.sum),
                    "verified": a == b,
                })
            })
            .collect();
        out.json(&serde_json::json!({
            "from": from.describe(),
            "to": to.describe(),
            "verified": copied.verified(),
            "tables": tables,
        }));
    } else {
        for (name, a, b) in &copied.tables {
            out.line(format!(
                "{name:<24} {:>9} rows  {}",
                a.rows,
                if a == b {
                    "verified".to_owned()
                } else {
                    format!("MISMATCH: {} rows in the target, checksums differ", b.rows)
                }
            ));
        }
    }
    if !copied.unverified.is_empty() {
        out.note(format!(
            "manent: warning: {} deployment(s) whose stored inputs do not verify with {} were \
             copied as they are, unsigned; the target's engines will refuse them: {}",
            copied.unverified.len(),
            from.describe(),
            copied.unverified.join(", ")
        ));
    }
    if copied.verified() {
        out.note(format!(
            "manent: every row copied and verified; point `database:` at {} to use it",
            to.describe()
        ));
        exit::OK
    } else {
        out.error("the copy does not match its source (see above); do not switch to it");
        exit::ENGINE
    }
}

/// The inputs key of a PostgreSQL target: `--inputs-key NAME`, else the configuration's own
/// `engine.inputs_key` (a copy between two shared databases).
async fn target_key(
    config: &crate::config::Config,
    flag: Option<&str>,
) -> Result<Option<crate::workflow::InputsKey>, String> {
    let Some(name) = flag.or(config.engine.inputs_key.as_deref()) else {
        return Ok(None);
    };
    if !config.secrets.contains_key(name) {
        return Err(format!(
            "--inputs-key: secret `{name}` is not declared under `secrets:` in {}",
            config.file.display()
        ));
    }
    use crate::plugin::secrets::SecretSource;
    let value = crate::plugin::secrets::ConfigSecrets::new(config.secrets.clone())
        .secret(name)
        .await
        .map_err(|e| format!("--inputs-key: {e}"))?;
    crate::workflow::InputsKey::from_secret(&value, &format!("secret `{name}`")).map(Some)
}

/// The target as given, with a `${secret:NAME}` password read from the configuration's secrets.
async fn target_of(
    config: &crate::config::Config,
    target: &str,
) -> Result<(String, Option<String>), String> {
    let is_pg = target.starts_with("postgres://") || target.starts_with("postgresql://");
    if !is_pg {
        return Ok((target.to_owned(), None));
    }
    let Some(start) = target.find(":${secret:") else {
        return Ok((target.to_owned(), None));
    };
    let rest = &target[start + ":${secret:".len()..];
    let Some(end) = rest.find('}') else {
        return Err(format!("`{target}`: an unclosed ${{secret:…}}"));
    };
    let name = &rest[..end];
    if !config.secrets.contains_key(name) {
        return Err(format!(
            "secret `{name}` is not declared under `secrets:` in {}",
            config.file.display()
        ));
    }
    let pg = crate::config::PostgresDb {
        url: format!("{}{}", &target[..start], &rest[end + 1..]),
        password: Some(name.to_owned()),
    };
    let password = crate::deploy::records::postgres_password(config, &pg)
        .await
        .map_err(|e| e.to_string())?;
    Ok((pg.url, password))
}
