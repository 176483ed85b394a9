//! Where the headless commands write: results on stdout, progress and errors on stderr. A
//! closed terminal (a dropped ssh session) must not stop a deploy, so write errors are ignored.

use std::io::Write;
use std::path::Path;

use super::exit;
use crate::config::{Config, ConfigErrors, EnvSpec};
use crate::deploy::plan::{self, Plan};
use crate::deploy::view::DeploymentView;
pub use crate::format::{duration, time};
use std::sync::Arc;

use crate::deploy::records::Db;
use crate::deploy::records::StoreError;

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

    /// `value` as pretty JSON on stdout, written as it is encoded (a deployment of 100,000
    /// targets is tens of megabytes of JSON, never held whole), with the control characters
    /// JSON leaves as they are escaped: the same JSON, which no terminal obeys.
    pub fn json<T: serde::Serialize>(&mut self, value: &T) {
        let mut w = std::io::BufWriter::with_capacity(
            64 * 1024,
            JsonControls {
                inner: &mut *self.stdout,
                lead: false,
            },
        );
        let encoded = serde_json::to_writer_pretty(&mut w, value);
        let _ = w.write_all(b"\n").and_then(|()| w.flush());
        drop(w);
        // A closed stdout is ignored as everywhere else; only an encoding failure is said.
        if let Err(e) = encoded
            && !e.is_io()
        {
            self.note(format!("manent: cannot encode JSON: {e}"));
        }
    }

    /// An error on stderr, prefixed with `manent:`.
    pub fn error(&mut self, s: impl std::fmt::Display) {
        self.note(format!("manent: {s}"));
    }
}

/// JSON text passed on with the control characters serde_json writes as they are — DEL and the
/// C1 controls U+0080–U+009F (a terminal obeys U+009B as an escape) — as `\u00XX` escapes,
/// which are valid JSON for the same string. Everything else JSON already escapes.
struct JsonControls<W> {
    inner: W,
    /// The last write ended with 0xC2, the lead byte of U+0080–U+00BF.
    lead: bool,
}

impl<W: Write> Write for JsonControls<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut start = 0;
        let mut i = 0;
        if std::mem::take(&mut self.lead) {
            match buf.first() {
                Some(&b @ 0x80..=0x9f) => {
                    write!(self.inner, "\\u00{b:02x}")?;
                    (start, i) = (1, 1);
                }
                Some(_) => self.inner.write_all(&[0xc2])?,
                None => self.lead = true,
            }
        }
        while let Some(at) = memchr::memchr2(0x7f, 0xc2, &buf[i..]) {
            i += at;
            let escaped = match (buf[i], buf.get(i + 1)) {
                (0x7f, _) => Some((0x7f, 1)),
                (0xc2, Some(&b @ 0x80..=0x9f)) => Some((b, 2)),
                (0xc2, None) => {
                    self.inner.write_all(&buf[start..i])?;
                    self.lead = true;
                    return Ok(buf.len());
                }
                _ => None,
            };
            if let Some((b, len)) = escaped {
                self.inner.write_all(&buf[start..i])?;
                write!(self.inner, "\\u00{b:02x}")?;
                i += len;
                start = i;
            } else {
                i += 1;
            }
        }
        self.inner.write_all(&buf[start..])?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if std::mem::take(&mut self.lead) {
            self.inner.write_all(&[0xc2])?;
        }
        self.inner.flush()
    }
}

/// `s` with control characters other than line breaks and tabs written out (`\u{1b}`), so an
/// escape sequence in a plugin's output or a stored text is read, not run by the terminal; and
/// so are bidirectional overrides and invisible characters (U+202E would make a command's
/// output read as something else than it is), as the console shows them.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    let hidden =
        |c: char| (c.is_control() && c != '\n' && c != '\t') || crate::operator::invisible(c);
    if !s.chars().any(hidden) {
        return s.into();
    }
    s.chars()
        .map(|c| {
            if hidden(c) {
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

/// Loads `manent.yml` alone, printing errors: for the reads of the database that need no
/// descriptor (`status`, `inbox`, `logs`).
pub fn load_settings(path: &Path, out: &mut Out) -> Option<Config> {
    Config::load_settings(path, &crate::plugin::catalog())
        .inspect_err(|e| print_errors(e, out))
        .ok()
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
    crate::engine::judge::engine_running(config, store).await
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
    (version, uri): (Option<&str>, Option<&str>),
    out: &mut Out,
) -> Option<(EnvSpec, Plan)> {
    let mut spec = match config.environment(app, env) {
        Ok(s) => s,
        Err(e) => {
            print_errors(&e, out);
            return None;
        }
    };
    if let Some(v) = version
        && let Err(e) = crate::config::check_version(v)
    {
        out.error(format!("--version: {e}"));
        return None;
    }
    if let Err(e) = crate::deploy::artifact::with_version(&mut spec, version, uri) {
        out.error(e);
        return None;
    }
    match plan::compute(&spec) {
        Ok(p) => Some((spec, p)),
        Err(e) => {
            out.error(e);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `Out::json` writes of `value`, `Out` writing into a buffer.
    fn json_of(value: &serde_json::Value) -> Vec<u8> {
        let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0
                    .lock()
                    .map_err(|_| std::io::ErrorKind::Other)?
                    .extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut out = Out::to(Shared(buf.clone()), std::io::sink());
        out.json(value);
        drop(out);
        buf.lock().map(|b| b.clone()).unwrap_or_default()
    }

    #[test]
    fn text_shows_escapes_bidirectional_overrides_and_invisible_characters_written_out() {
        assert_eq!(printable("deploy of web 2.0.0"), "deploy of web 2.0.0");
        assert_eq!(
            printable("done: \u{202E}hs.live\u{202C} \u{1b}[2J\u{200B}ok\n"),
            "done: \\u{202e}hs.live\\u{202c} \\u{1b}[2J\\u{200b}ok\n"
        );
        assert_eq!(printable("café – 100 %"), "café – 100 %");
    }

    #[test]
    fn json_escapes_the_controls_a_terminal_obeys_and_stays_the_same_json() {
        let text = "a\u{9b}31mred\u{7f}é\u{85}\u{a0}\u{1b}[0m";
        let value = serde_json::json!({"message": text, "plain": "ok"});
        let written = json_of(&value);
        let s = String::from_utf8(written.clone()).unwrap_or_default();
        assert!(
            !s.contains('\u{9b}') && !s.contains('\u{7f}') && !s.contains('\u{85}'),
            "{s}"
        );
        assert!(!s.contains('\u{1b}'), "{s}");
        assert!(s.contains("\\u009b") && s.contains("\\u007f"), "{s}");
        assert!(s.ends_with("}\n"), "{s}");
        let back: serde_json::Value = serde_json::from_slice(&written).unwrap_or_default();
        assert_eq!(back, value);
    }

    #[test]
    fn json_controls_split_across_writes_are_escaped_alike() {
        let text = "x\u{9b}y\u{c2}\u{a9}z\u{9f}";
        let whole = format!("\"{text}\"");
        let mut one = JsonControls {
            inner: Vec::new(),
            lead: false,
        };
        one.write_all(whole.as_bytes()).unwrap_or_default();
        one.flush().unwrap_or_default();
        let mut bytewise = JsonControls {
            inner: Vec::new(),
            lead: false,
        };
        for b in whole.as_bytes() {
            bytewise
                .write_all(std::slice::from_ref(b))
                .unwrap_or_default();
        }
        bytewise.flush().unwrap_or_default();
        assert_eq!(one.inner, bytewise.inner);
        let s = String::from_utf8(one.inner).unwrap_or_default();
        assert_eq!(s, "\"x\\u009by\u{c2}\u{a9}z\\u009f\"");
    }
}
