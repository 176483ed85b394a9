//! Where `database:` points — a file, or a shared PostgreSQL whose URL is checked without
//! connecting — and how its commits are made durable. The stores open what this describes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{ConfigError, EngineSettings, SecretRef, locate};

/// Durability of each commit: `Full` survives power loss; `Normal` only process crashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Sync the WAL on every commit (the default).
    #[default]
    Full,
    /// Sync only around checkpoints (benchmarks compare it).
    Normal,
}

/// The schemes `database:` may use.
const DATABASE_SCHEMES: &[&str] = &["sqlite", "postgres"];

/// A shared PostgreSQL system database, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresDb {
    /// The URL without a password.
    pub url: String,
    /// The secret that holds the password, if the URL names one (`user:${secret:NAME}@`).
    pub password: Option<String>,
}

impl PostgresDb {
    /// The URL as it may be shown.
    pub fn shown(&self) -> String {
        shown_url(&self.url)
    }
}

/// Where the database is: a file, or a shared PostgreSQL.
pub(super) enum DatabaseAt {
    File(PathBuf),
    Postgres(PostgresDb),
}

/// `postgres://user:${secret:NAME}@host:port/db?…`, checked without connecting: its shape, and
/// that a password comes from a declared secret, never from the file itself.
fn postgres_url(
    url: &str,
    secrets: &BTreeMap<String, SecretRef>,
    fail: &dyn Fn(String, Option<String>) -> ConfigError,
) -> Result<PostgresDb, ConfigError> {
    let example = "postgres://manent:${secret:NAME}@db.internal:5432/manent";
    let mut password = None;
    let mut bare = url.to_owned();
    if let Some((_, rest)) = url.split_once("://") {
        let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
        if let Some((userinfo, _)) = authority.rsplit_once('@')
            && let Some((user, pass)) = userinfo.split_once(':')
        {
            let Some(name) = pass
                .strip_prefix("${secret:")
                .and_then(|p| p.strip_suffix('}'))
            else {
                return Err(fail(
                    "database: the URL holds a password; manent.yml is no place for one".into(),
                    Some(format!("declare it under `secrets:` and write {example}")),
                ));
            };
            if !secrets.contains_key(name) {
                return Err(fail(
                    format!("database: secret `{name}` is not declared under `secrets:`"),
                    Some(format!(
                        "declare it, e.g. `secrets: {{{name}: env:{}}}`",
                        name.to_uppercase()
                    )),
                ));
            }
            password = Some(name.to_owned());
            bare = url.replacen(&format!("{userinfo}@"), &format!("{user}@"), 1);
        }
    }
    if bare.contains("password=") {
        return Err(fail(
            "database: the URL holds a password; manent.yml is no place for one".into(),
            Some(format!("declare it under `secrets:` and write {example}")),
        ));
    }
    if let Err(e) = tls_params(&bare).0.parse::<tokio_postgres::Config>() {
        return Err(fail(
            format!(
                "database: `{}` is not a PostgreSQL URL ({e})",
                shown_url(&bare)
            ),
            Some(format!("write {example}")),
        ));
    }
    let db_named = bare
        .split_once("://")
        .map(|(_, r)| r)
        .and_then(|r| r.split_once('/'))
        .is_some_and(|(_, d)| !d.is_empty() && !d.starts_with('?'));
    if !db_named {
        return Err(fail(
            "database: the PostgreSQL URL names no database".into(),
            Some(format!("write {example}")),
        ));
    }
    Ok(PostgresDb {
        url: bare,
        password,
    })
}

/// `database:` as a file path or a PostgreSQL URL; a URL of a store this manent does not serve
/// is refused.
pub(super) fn database_at(
    text: &str,
    file: &Path,
    db: PathBuf,
    secrets: &BTreeMap<String, SecretRef>,
) -> Result<DatabaseAt, ConfigError> {
    let s = db.to_string_lossy();
    let Some((scheme, rest)) = s.split_once("://") else {
        return Ok(DatabaseAt::File(db));
    };
    if scheme == "sqlite" {
        return Ok(DatabaseAt::File(PathBuf::from(rest)));
    }
    if scheme == "postgres" || scheme == "postgresql" {
        let fail = |message: String, hint: Option<String>| ConfigError {
            file: file.to_owned(),
            position: locate(text, "database:", 0),
            message,
            hint,
        };
        return postgres_url(&s, secrets, &fail).map(DatabaseAt::Postgres);
    }
    Err(ConfigError {
        file: file.to_owned(),
        position: locate(text, "database:", 0),
        message: format!(
            "database: `{scheme}://…` is not a store this manent serves (it serves {}: a file \
             path, sqlite:///path, or postgres://…)",
            DATABASE_SCHEMES.join(", ")
        ),
        hint: Some("give a file path such as .manent/manent.db".into()),
    })
}

/// `engine.inputs_key`: required with a shared PostgreSQL (the engines authenticate each
/// other's stored inputs with it), naming a declared secret; a SQLite database keeps its key in
/// a file beside it instead.
pub(super) fn check_inputs_key(
    text: &str,
    path: &Path,
    engine: &EngineSettings,
    postgres: bool,
    secrets: &BTreeMap<String, SecretRef>,
) -> Result<(), ConfigError> {
    let fail = |needle: &str, message: String, hint: String| ConfigError {
        file: path.to_owned(),
        position: locate(text, needle, 0),
        message,
        hint: Some(hint),
    };
    match (&engine.inputs_key, postgres) {
        (None, true) => Err(fail(
            "database:",
            "a shared PostgreSQL needs `engine.inputs_key`: the secret every engine on it holds, \
             which authenticates the deployments they store for each other"
                .into(),
            "add `engine: {inputs_key: manent_key}` and `secrets: {manent_key: \
             file:/etc/manent/inputs.key}` — the same 32 or more random characters on every \
             host (`head -c 32 /dev/urandom | base64`)"
                .into(),
        )),
        (Some(_), false) => Err(fail(
            "inputs_key:",
            "engine.inputs_key is for a shared PostgreSQL; a SQLite database keeps its key in \
             a file beside it (<database>.key)"
                .into(),
            "remove it".into(),
        )),
        (Some(name), true) if !secrets.contains_key(name) => Err(fail(
            "inputs_key:",
            format!("engine.inputs_key: secret `{name}` is not declared under `secrets:`"),
            format!("declare it, e.g. `secrets: {{{name}: file:/etc/manent/inputs.key}}`"),
        )),
        _ => Ok(()),
    }
}

/// A `postgres://` URL as it may be shown: without its password.
pub fn shown_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => {
            let user = user.split_once(':').map_or(user, |(u, _)| u);
            format!("{user}@{host}")
        }
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let kept: Vec<&str> = query
                .split('&')
                .filter(|kv| !kv.starts_with("password="))
                .collect();
            if kept.is_empty() {
                path.to_owned()
            } else {
                format!("{path}?{}", kept.join("&"))
            }
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// libpq's TLS parameters that tokio-postgres does not read, taken out of `url`:
/// `sslrootcert=PATH` (the server's certificate authority, for a private CA) is returned, and
/// `sslmode=verify-ca|verify-full` become `require` — rustls always verifies the chain and the
/// host name.
pub fn tls_params(url: &str) -> (String, Option<std::path::PathBuf>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None);
    };
    let mut rootcert = None;
    let mut kept = Vec::new();
    for kv in query.split('&') {
        match kv.split_once('=') {
            Some(("sslrootcert", v)) => rootcert = Some(std::path::PathBuf::from(v)),
            Some(("sslmode", "verify-ca" | "verify-full")) => kept.push("sslmode=require"),
            _ => kept.push(kv),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (url, rootcert)
}

#[cfg(test)]
mod tests {
    use super::{shown_url, tls_params};

    #[test]
    fn libpq_tls_parameters_are_read_here() {
        let (url, ca) = tls_params(
            "postgres://m@db:5432/m?sslmode=verify-full&sslrootcert=/etc/manent/ca.pem&application_name=x",
        );
        assert_eq!(
            url,
            "postgres://m@db:5432/m?sslmode=require&application_name=x"
        );
        assert_eq!(
            ca.as_deref(),
            Some(std::path::Path::new("/etc/manent/ca.pem"))
        );
        assert!(url.parse::<tokio_postgres::Config>().is_ok());
        let (url, ca) = tls_params("postgres://m@db/m?sslrootcert=/ca.pem");
        assert_eq!((url.as_str(), ca.is_some()), ("postgres://m@db/m", true));
        assert_eq!(tls_params("postgres://m@db/m").0, "postgres://m@db/m");
    }

    #[test]
    fn a_shown_url_has_no_password() {
        assert_eq!(
            shown_url("postgres://manent:s3cret@db.internal:5432/manent"),
            "postgres://manent@db.internal:5432/manent"
        );
        assert_eq!(
            shown_url("postgres://db/manent?password=s3cret&sslmode=disable"),
            "postgres://db/manent?sslmode=disable"
        );
        assert_eq!(
            shown_url("postgres:///m?user=u&host=/tmp/x"),
            "postgres:///m?user=u&host=/tmp/x"
        );
    }
}
