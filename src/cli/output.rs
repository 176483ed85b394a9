//! Where the headless commands write: results on stdout, progress and errors on stderr. A
//! closed terminal (a dropped ssh session) must not stop a deploy, so write errors are ignored.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use super::exit;
use crate::config::{Config, ConfigErrors, EnvSpec};
use crate::deploy::plan::{self, Plan};
use crate::deploy::view::DeploymentView;
use std::sync::Arc;

use crate::deploy::records::Db;
use crate::workflow::StoreError;

/// stdout and stderr, or buffers in tests.
pub struct Out {
    stdout: Box<dyn Write + Send>,
    stderr: Box<dyn Write + Send>,
}

impl std::fmt::Debug for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Out")
    }
}

impl Out {
    /// The process's stdout and stderr.
    pub fn std() -> Self {
        Out {
            stdout: Box::new(std::io::stdout()),
            stderr: Box::new(std::io::stderr()),
        }
    }

    /// Writes results to `stdout` and progress and errors to `stderr` (a test's buffers).
    pub fn to(stdout: impl Write + Send + 'static, stderr: impl Write + Send + 'static) -> Self {
        Out {
            stdout: Box::new(stdout),
            stderr: Box::new(stderr),
        }
    }

    /// A line of result on stdout (control characters shown, never obeyed: a plugin's message
    /// or another operator's text must not drive the reader's terminal).
    pub fn line(&mut self, s: impl AsRef<str>) {
        let _ = writeln!(self.stdout, "{}", printable(s.as_ref()));
        let _ = self.stdout.flush();
    }

    /// Text on stdout as it is (a terminal redraw).
    pub fn raw(&mut self, s: &str) {
        let _ = write!(self.stdout, "{s}");
        let _ = self.stdout.flush();
    }

    /// A line of progress or error on stderr (control characters shown, never obeyed).
    pub fn note(&mut self, s: impl AsRef<str>) {
        let _ = writeln!(self.stderr, "{}", printable(s.as_ref()));
        let _ = self.stderr.flush();
    }

    /// `value` as pretty JSON on stdout.
    pub fn json<T: serde::Serialize>(&mut self, value: &T) {
        match serde_json::to_string_pretty(value) {
            Ok(s) => self.line(s),
            Err(e) => self.note(format!("manent: cannot encode JSON: {e}")),
        }
    }

    /// An error on stderr, prefixed with `manent:`.
    pub fn error(&mut self, s: impl std::fmt::Display) {
        self.note(format!("manent: {s}"));
    }
}

/// `s` with control characters other than line breaks and tabs written out (`\u{1b}`), so an
/// escape sequence in a plugin's output or a stored text is read, not run by the terminal.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return s.into();
    }
    s.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

/// Loads the configuration (and `-f FILE`), printing errors.
pub fn load_config(path: &Path, file: Option<&Path>, out: &mut Out) -> Option<Config> {
    match Config::load(path, &crate::plugin::catalog()) {
        Ok(mut c) => {
            if let Some(f) = file {
                c.descriptors.retain(|d| d.file != f);
                c.add_descriptor(f);
            }
            Some(c)
        }
        Err(e) => {
            print_errors(&e, out);
            None
        }
    }
}

/// Prints configuration errors.
pub fn print_errors(e: &ConfigErrors, out: &mut Out) {
    for err in &e.0 {
        out.note(format!("error: {err}"));
    }
}

/// Opens the database for commands that do not run the engine (no lease).
pub async fn open_store(config: &Config) -> Result<Arc<dyn Db>, StoreError> {
    crate::deploy::records::open_configured(config, false).await
}

/// Whether an engine runs deployments now: on SQLite, the one that holds the file's lock; on a
/// shared PostgreSQL, any engine whose lease is fresh (it takes over what a dead one left).
pub async fn engine_running(config: &Config, store: &dyn Db) -> bool {
    if config.postgres.is_none() {
        return crate::workflow::Lease::is_held(&config.database);
    }
    let lease = config.engine.lease_ms();
    store
        .engines()
        .await
        .is_ok_and(|e| e.iter().any(|e| e.alive(lease)))
}

/// The configured database, as it may be shown (a file, or a URL without its password).
pub fn database_shown(config: &Config) -> String {
    match &config.postgres {
        Some(pg) => pg.shown(),
        None => config.database.display().to_string(),
    }
}

/// The configuration at `path` and its database, saying what is wrong; `Err` is the exit code.
pub async fn open(path: &Path, out: &mut Out) -> Result<(Config, Arc<dyn Db>), u8> {
    let config = load_config(path, None, out).ok_or(exit::BAD_INPUT)?;
    match open_store(&config).await {
        Ok(store) => Ok((config, store)),
        Err(e) => Err(db_error(&database_shown(&config), &e, out)),
    }
}

/// [`open`], and deployment `id` in it.
pub async fn open_deployment(
    path: &Path,
    id: &str,
    out: &mut Out,
) -> Result<(Config, Arc<dyn Db>, DeploymentView), u8> {
    let (config, store) = open(path, out).await?;
    let v = view(store.as_ref(), id, out).await?;
    Ok((config, store, v))
}

/// The database, if it exists already (reads must not create one); a database that exists
/// but cannot be opened is an error, never "nothing here" — and so is one that was there (its
/// inputs key is still beside it) and is gone.
pub async fn existing_store(config: &Config) -> Result<Option<Arc<dyn Db>>, StoreError> {
    if config.postgres.is_none()
        && std::fs::symlink_metadata(&config.database)
            .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
    {
        // Opening says what is wrong when its key shows the database was there.
        let key = crate::workflow::InputsKey::path_beside(&config.database);
        if key.exists() {
            return open_store(config).await.map(Some);
        }
        return Ok(None);
    }
    open_store(config).await.map(Some)
}

/// [`existing_store`] for a verb that only reads: `Err(code)` said, `Ok(None)` when there is no
/// database yet (said as "nothing has run here yet").
pub async fn read_store(config: &Config, out: &mut Out) -> Result<Option<Arc<dyn Db>>, u8> {
    existing_store(config)
        .await
        .map_err(|e| db_error(&database_shown(config), &e, out))
}

/// Before a read verb says "nothing here": the database must pass its integrity check (a
/// damaged page can make a listing come back empty).
pub async fn verify(store: &dyn Db) -> Result<(), StoreError> {
    store.check().await
}

/// A database that cannot be read: said with its file (or URL), exit code 6.
pub fn db_error(db: &str, e: &StoreError, out: &mut Out) -> u8 {
    match e {
        // It names the database already.
        StoreError::Open { .. } => out.error(e),
        _ => out.error(format!("cannot read the database {db}: {e}")),
    }
    exit::ENGINE
}

/// `2026-11-29T11:05:02Z` from epoch ms.
pub fn time(ms: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_seconds(t).to_string()
}

/// `350ms`, `1.2s`, `3m04s`.
pub fn duration(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms}ms"),
        1000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        _ => format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// Loads a deployment or explains why not; `Err` is the exit code (2: no such deployment, 6: the
/// database cannot be read).
pub async fn view(store: &dyn Db, id: &str, out: &mut Out) -> Result<DeploymentView, u8> {
    match crate::deploy::view::load(store, id).await {
        Ok(Some(v)) => Ok(v),
        Ok(None) => {
            if let Err(e) = verify(store).await {
                return Err(db_error(&store.describe(), &e, out));
            }
            out.error(format!("no deployment with id {id} (see `manent status`)"));
            Err(exit::BAD_INPUT)
        }
        Err(e) => Err(db_error(&store.describe(), &e, out)),
    }
}

/// The environment's spec (with `version` if given) and its plan, printing what is wrong.
pub fn resolve(
    config: &Config,
    app: &str,
    env: &str,
    version: Option<&str>,
    out: &mut Out,
) -> Option<(EnvSpec, Plan)> {
    let mut spec = match config.environment(app, env) {
        Ok(s) => s,
        Err(e) => {
            print_errors(&e, out);
            return None;
        }
    };
    if let Some(v) = version {
        if let Err(e) = crate::config::check_version(v) {
            out.error(format!("--version: {e}"));
            return None;
        }
        spec.artifact.version = v.to_owned();
    }
    match plan::compute(&spec) {
        Ok(p) => Some((spec, p)),
        Err(e) => {
            out.error(e);
            None
        }
    }
}
