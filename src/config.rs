//! Loading `manent.yml` and the application descriptors, and resolving one application's
//! environment into the [`EnvSpec`] a deployment runs from. Problems name file:line:col.

pub mod canary;
pub mod database;
pub mod descriptor;
mod environment;
pub mod error;
pub mod hooks;
pub mod manent_file;
mod receivers;
pub mod schema;
pub mod strategy;
pub mod trust;
pub mod values;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use self::canary::{
    Analysis, Canary, CanaryStep, Check, CompareCheck, CompareMetric, HttpCheck, OnDrift,
    PromCheck, RouterCheck,
};
use self::database::{DatabaseAt, check_inputs_key, database_at};
pub use self::database::{PostgresDb, Synchronous};
pub use self::descriptor::DescriptorFile;
use self::environment::check_descriptor;
pub use self::error::{ConfigError, ConfigErrors};
pub use self::hooks::{DeletePolicy, Event, Hook, HookKind, OnFailure};
pub use self::manent_file::{ExternalDecl, ManentFile, PluginDecl, SyncMode};
use self::receivers::receivers;
pub use self::strategy::Strategy;
pub use self::values::{Artifact, Catalog, Known, SecretRef, check_version};
use crate::moniker::Moniker;

/// The loaded configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// `manent.yml`'s path.
    pub file: PathBuf,
    /// Its directory; relative paths in it are relative to this.
    pub dir: PathBuf,
    /// The database file; with a shared PostgreSQL, the engine's local state beside it (its
    /// lock file, the processes it started).
    pub database: PathBuf,
    /// The shared PostgreSQL system database, if `database:` is a `postgres://` URL.
    pub postgres: Option<PostgresDb>,
    /// The descriptors' directory.
    pub apps_dir: PathBuf,
    /// Where undeclared plugin binaries are looked for.
    pub plugin_dir: Option<PathBuf>,
    /// Declared plugins.
    pub plugins: BTreeMap<String, PluginDecl>,
    /// Secret sources.
    pub secrets: BTreeMap<String, SecretRef>,
    /// Engine settings, with defaults applied.
    pub engine: EngineSettings,
    /// The console's theme, if set.
    pub theme: Option<String>,
    /// Where Prometheus metrics are served, if anywhere.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// The JSON log file, if on.
    pub log_file: Option<LogFile>,
    /// Webhook receivers of transitions.
    pub notify: Vec<Receiver>,
    /// Descriptors that parsed.
    pub descriptors: Vec<Descriptor>,
    /// Whether the descriptors were read ([`Config::load`], [`Config::load_descriptors`]);
    /// false after [`Config::load_settings`] alone, which leaves `descriptors` empty.
    pub descriptors_read: bool,
    /// Problems in descriptors (the rest stay usable: one broken file must not block an
    /// unrelated deploy during an incident).
    pub problems: Vec<ConfigError>,
    /// The plugins that exist (built-ins, discovery).
    pub catalog: Catalog,
}

/// What a webhook receiver hears of.
pub const NOTIFY_EVENTS: &[&str] = &[
    "started",
    "waiting",
    "target-failed",
    "promoted",
    "reverted",
    "rolled-back",
    "finished",
    "drift",
];

/// A webhook receiver of transitions (`notify:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receiver {
    /// Its name in logs and metrics.
    pub name: String,
    /// Where transitions are POSTed.
    pub url: String,
    /// Headers; `${secret:NAME}` is substituted when sending.
    pub headers: Vec<(String, String)>,
    /// The transitions it hears.
    pub events: Vec<String>,
    /// Limit on one delivery.
    pub timeout: Duration,
    /// First retry delay.
    pub backoff_base: Duration,
    /// Failed deliveries before a notification is parked.
    pub max_attempts: u32,
    /// Longest retry delay.
    pub backoff_max: Duration,
}

/// The JSON log file's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    /// Directory of the daily files.
    pub dir: PathBuf,
    /// Files kept.
    pub keep: usize,
    /// Bytes per file before it rotates.
    pub max_size: u64,
    /// Bytes of all files together at most.
    pub max_total: u64,
}

/// Engine settings with defaults applied.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// Stable engine id.
    pub executor_id: String,
    /// On a shared PostgreSQL: how long an engine's deployments stay its own after its last
    /// heartbeat.
    pub lease: Duration,
    /// Drain limit at shutdown.
    pub drain_timeout: Duration,
    /// Limit for in-flight steps after the drain.
    pub hard_timeout: Duration,
    /// Commit durability.
    pub synchronous: Synchronous,
    /// Crashed runs before dead-lettering.
    pub max_recovery_attempts: u32,
    /// How long log lines are kept.
    pub log_retention: Duration,
    /// Log bytes one deployment keeps in the database at most.
    pub log_cap: u64,
    /// The group that shares the engine's files, if any (`engine.shared_group`).
    pub shared_group: Option<String>,
    /// On a shared PostgreSQL: the secret that authenticates stored inputs.
    pub inputs_key: Option<String>,
    /// Secrets shorter than 8 characters are accepted (test fixtures).
    pub allow_short_secrets: bool,
}

impl EngineSettings {
    /// The lease in milliseconds, as heartbeats are compared with it.
    pub fn lease_ms(&self) -> i64 {
        i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX)
    }
}

/// One parsed descriptor.
#[derive(Debug, Clone)]
pub struct Descriptor {
    /// Its file.
    pub file: PathBuf,
    /// Its text (for locating semantic errors).
    pub text: String,
    /// Its content.
    pub spec: DescriptorFile,
}

/// A target after defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetDef {
    /// Name.
    pub name: String,
    /// Address.
    pub host: String,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// Everything a deployment of one application to one environment runs from; stored in the
/// workflow's inputs, so editing the descriptor later does not change a deployment under way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvSpec {
    /// Application.
    pub application: String,
    /// Environment.
    pub environment: String,
    /// Production environment.
    pub production: bool,
    /// The descriptor it came from.
    pub descriptor: PathBuf,
    /// What to deploy.
    pub artifact: Artifact,
    /// The file of expected digests by version (`artifact.sha256s`), absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digests: Option<PathBuf>,
    /// Plugin name (with `plugins:`, the one a deployment chose).
    pub plugin: String,
    /// `plugins:`: the plugins to choose from, in order (empty when one plugin is named).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plugins: Vec<String>,
    /// Why `plugin` was chosen from `plugins`, once a deployment chose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen: Option<String>,
    /// Moniker resource type.
    pub resource_type: String,
    /// Plugin parameters.
    pub params: serde_json::Value,
    /// Secrets the plugin may read.
    pub secrets: Vec<String>,
    /// Batching.
    pub strategy: Strategy,
    /// Targets at once within a batch.
    pub parallelism: u32,
    /// Retries per target step.
    pub max_retries: u32,
    /// Limit on one attempt.
    #[serde(with = "crate::duration_ms")]
    pub step_timeout: Duration,
    /// Limit on Validate.
    #[serde(with = "crate::duration_ms")]
    pub validate_timeout: Duration,
    /// First retry delay.
    #[serde(with = "crate::duration_ms")]
    pub backoff_base: Duration,
    /// Longest retry delay.
    #[serde(with = "crate::duration_ms")]
    pub backoff_max: Duration,
    /// Roll back on failure.
    pub atomic: bool,
    /// Targets in order.
    pub targets: Vec<TargetDef>,
    /// Lifecycle hooks (in the order written; [`hooks::ordered`] gives an event's run order).
    #[serde(default)]
    pub hooks: Vec<Hook>,
    /// Where its hook and analysis commands run: the descriptor's directory, made absolute when
    /// the deployment was submitted (so a worker started elsewhere runs them in the same place).
    #[serde(default)]
    pub workdir: PathBuf,
}

impl EnvSpec {
    /// The plugin as a person reads it before a deployment chose: `exec`, or, with
    /// `deploy.plugins`, `the first of [a, b] that supports it`.
    pub fn plugin_said(&self) -> String {
        if self.plugins.is_empty() || self.chosen.is_some() {
            self.plugin.clone()
        } else {
            format!(
                "the first of [{}] that supports it",
                self.plugins.join(", ")
            )
        }
    }

    /// `application/environment`: what history and the one-live-deploy rule key on.
    pub fn subject(&self) -> String {
        format!("{}/{}", self.application, self.environment)
    }

    /// The moniker of `target`.
    pub fn moniker(&self, target: &TargetDef) -> Result<Moniker, crate::moniker::MonikerError> {
        Moniker::new(
            &self.environment,
            &self.application,
            &self.resource_type,
            &target.name,
        )
    }
}

/// Largest configuration file read.
const MAX_FILE: u64 = 4 << 20;
/// Deepest nesting of `[`/`{` a configuration file may have (a descriptor needs a handful).
const MAX_DEPTH: usize = 64;

/// A configuration file's text: a regular file (a FIFO would block, a device never end) of at
/// most 4 MiB, valid UTF-8, nested at most 64 deep; otherwise an error with its line:col.
pub(crate) fn read(path: &Path) -> Result<(String, std::fs::Metadata), ConfigError> {
    let (bytes, meta) = crate::sys::files::read_regular_with(path, MAX_FILE)
        .map_err(|e| ConfigError::file(path, e.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = good.iter().filter(|b| **b == b'\n').count() + 1;
        let start = good.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let col = String::from_utf8_lossy(&good[start..]).chars().count() + 1;
        ConfigError {
            file: path.to_owned(),
            position: Some((line, col)),
            message: format!("not valid UTF-8 (byte 0x{:02x})", e.as_bytes()[good.len()]),
            hint: Some("save the file as UTF-8".into()),
        }
    })?;
    check_depth(path, &text)?;
    Ok((text, meta))
}

/// Refuses flow collections nested deeper than [`MAX_DEPTH`] before the YAML parser sees them
/// (it would take minutes to refuse 100,000 `[`). Brackets inside quoted scalars and comments
/// do not count; a quote or `#` counts only where YAML reads it as one (a quote at the start of
/// a scalar, `#` after white space), so `it's` or `a#b` in a plain scalar hides nothing.
fn check_depth(path: &Path, text: &str) -> Result<(), ConfigError> {
    let (mut depth, mut line, mut col) = (0usize, 1, 0);
    let mut quote: Option<char> = None;
    let mut comment = false;
    let mut escaped = false;
    // The previous character outside quotes; a line break reads as white space.
    let mut prev = ' ';
    for c in text.chars() {
        col += 1;
        if c == '\n' {
            line += 1;
            col = 0;
            comment = false;
            if quote.is_none() {
                prev = ' ';
            }
            continue;
        }
        if comment {
            continue;
        }
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if q == '"' && c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
                prev = c;
            }
            continue;
        }
        let starts_scalar =
            prev.is_whitespace() || matches!(prev, ':' | ',' | '[' | '{' | '-' | '?');
        match c {
            '\'' | '"' if starts_scalar => quote = Some(c),
            '#' if prev.is_whitespace() => comment = true,
            '[' | '{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(ConfigError {
                        file: path.to_owned(),
                        position: Some((line, col)),
                        message: format!("nested more than {MAX_DEPTH} levels deep"),
                        hint: None,
                    });
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        prev = c;
    }
    Ok(())
}

/// `text` as a `T`, with `known`'s names in scope. When that fails, the text is read again as
/// plain YAML, so a syntax error anywhere (an unclosed `[`, a tab, an alias bomb) is said at
/// its own line:col rather than hidden behind the first key `T` does not take. A file of the
/// other kind (a manent.yml given as a descriptor) is said to be one. (Read as plain YAML
/// first, every time, a descriptor of 100,000 targets cost 110 MB; it is read so only to say
/// what is wrong, and then without building the document: the syntax is all it is for.)
fn parse_yaml<T: serde::de::DeserializeOwned>(
    path: &Path,
    text: &str,
    known: &Known,
    kind: &str,
) -> Result<T, ConfigError> {
    values::with_known(known, || yaml_serde::from_str::<T>(text)).map_err(|e| {
        if let Err(syntax) = yaml_serde::from_str::<serde::de::IgnoredAny>(text) {
            return ConfigError::from_yaml_in(path, text, &syntax);
        }
        let mut err = ConfigError::from_yaml_in(path, text, &e);
        let other = match kind {
            "descriptor" => ["plugins", "database", "secrets", "engine", "notify", "log_file"]
                .iter()
                .find(|k| err.message.contains(&format!("unknown field `{k}`")))
                .map(|_| "manent.yml (the engine's settings), not an application descriptor: descriptors go in apps/ or -f FILE"),
            _ => ["application", "environments", "deploy"]
                .iter()
                .find(|k| err.message.contains(&format!("unknown field `{k}`")))
                .map(|_| "an application descriptor, not manent.yml: put it in apps/ (or pass it with -f FILE)"),
        };
        if let Some(other) = other {
            err.hint = Some(format!("this file looks like {other}"));
        }
        err
    })
}

/// Line and column (1-based) of the first `needle` in `text`.
pub fn locate_text(text: &str, needle: &str) -> Option<(usize, usize)> {
    locate(text, needle, 0)
}

/// Line and column (1-based) of the `nth` occurrence of `needle` in `text`.
fn locate(text: &str, needle: &str, nth: usize) -> Option<(usize, usize)> {
    let (idx, _) = text.match_indices(needle).nth(nth)?;
    let before = &text[..idx];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(idx, |nl| idx - nl - 1) + 1;
    Some((line, col))
}

impl Config {
    /// Loads `manent.yml` at `path` and the descriptors it points to. Errors in `manent.yml`
    /// are fatal; descriptor problems are kept in `problems`.
    pub fn load(path: &Path, catalog: &Catalog) -> Result<Config, ConfigErrors> {
        let mut config = Config::load_settings(path, catalog)?;
        config.load_descriptors();
        Ok(config)
    }

    /// Reads the descriptors of a configuration loaded with [`Config::load_settings`] (the
    /// console starts its engine meanwhile: at 100,000 targets the YAML costs as long as the
    /// database's check).
    pub fn load_descriptors(&mut self) {
        self.load_apps_dir();
        self.check_monikers();
        self.descriptors_read = true;
    }

    /// Loads `manent.yml` at `path` alone — the database, the engine, plugins, secrets — without
    /// the descriptors (`descriptors` is empty): for reads of the database, which need no
    /// descriptor, and which a descriptor of 100,000 targets would otherwise cost 0.4 s and
    /// 60 MB before anything is read.
    pub fn load_settings(path: &Path, catalog: &Catalog) -> Result<Config, ConfigErrors> {
        // Only "not there at all" is "no such file": a symlink loop or a denied directory says
        // what it is when read.
        if std::fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        {
            return Err(ConfigError::file(path, "no such file")
                .with_hint(
                    "pass --config FILE or set MANENT_CONFIG; `manent demo` runs without any",
                )
                .into());
        }
        let (text, meta) = read(path)?;
        let file: ManentFile = if text.trim().is_empty() {
            ManentFile::default()
        } else {
            let known = Known {
                plugins: BTreeSet::new(),
                secrets: BTreeSet::new(),
                plugin_dir: None,
                catalog: *catalog,
            };
            parse_yaml(path, &text, &known, "manent.yml")?
        };
        // A bare `manent.yml` has an empty parent: paths then stay relative to the working
        // directory and read as the user wrote them (`apps/web.yml`, not `./apps/web.yml`).
        let dir = path.parent().map(Path::to_owned).unwrap_or_default();
        let e = &file.engine;
        if let Some(l) = e.lease
            && l.0 < Duration::from_secs(1)
        {
            return Err(ConfigError {
                file: path.to_owned(),
                position: locate(&text, "lease:", 0),
                message: format!(
                    "engine.lease: {} is too short: an engine renews its lease every third of it, \
                     and one that misses a renewal loses its deployments to another engine",
                    humantime::format_duration(l.0)
                ),
                hint: Some("give 1s or more (the default is 15s)".into()),
            }
            .into());
        }
        let engine = EngineSettings {
            executor_id: e.executor_id.clone().unwrap_or_else(crate::sys::hostname),
            drain_timeout: e.drain_timeout.map_or(Duration::from_secs(600), |d| d.0),
            hard_timeout: e.hard_timeout.map_or(Duration::from_secs(60), |d| d.0),
            synchronous: match e.synchronous {
                Some(SyncMode::Normal) => Synchronous::Normal,
                _ => Synchronous::Full,
            },
            max_recovery_attempts: e.max_recovery_attempts.unwrap_or(5),
            log_retention: e
                .log_retention
                .map_or(Duration::from_secs(30 * 24 * 3600), |d| d.0),
            log_cap: e.log_cap.map_or(256 << 20, |s| s.0),
            lease: e.lease.map_or(Duration::from_secs(15), |d| d.0),
            shared_group: e.shared_group.clone(),
            inputs_key: e.inputs_key.clone(),
            allow_short_secrets: e.allow_short_secrets,
        };
        // Obeyed only when no one else could have written it: before a secret is read or a
        // database opened.
        // Never the shared group's to write: its members could change what the engine runs
        // (and what it vouches for against its own files).
        trust::check(path, &meta)?;
        if let Some(group) = &e.shared_group
            && let Err(why) = crate::sys::files::Trust::new(Some(group))
        {
            return Err(ConfigError {
                file: path.to_owned(),
                position: locate(&text, "shared_group:", 0),
                message: why,
                hint: None,
            }
            .into());
        }
        let secrets: BTreeMap<String, SecretRef> =
            file.secrets.into_iter().map(|(k, v)| (k, v.0)).collect();
        let (database, postgres) = match database_at(
            &text,
            path,
            file.database.unwrap_or_else(|| ".manent/manent.db".into()),
            &secrets,
        )? {
            DatabaseAt::File(f) => (f, None),
            DatabaseAt::Postgres(pg) => (PathBuf::from(".manent/manent.db"), Some(pg)),
        };
        check_inputs_key(&text, path, &engine, postgres.is_some(), &secrets)?;
        // Engines sharing a database need distinct ids; two configurations on one bastion (two
        // operators' checkouts) would both default to the host name. The configuration file's
        // digest keeps an engine's id across its restarts, so it still resumes its own
        // deployments at once.
        let mut engine = engine;
        if postgres.is_some() && file.engine.executor_id.is_none() {
            let place = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
            let digest = crate::format::sha256_hex(&place.display().to_string());
            engine.executor_id = format!("{}-{}", engine.executor_id, &digest[..6]);
        }
        let metrics_listen = match &file.metrics.listen {
            None => None,
            Some(l) => Some(l.parse::<std::net::SocketAddr>().map_err(|e| ConfigError {
                file: path.to_owned(),
                position: locate(&text, "listen:", 0),
                message: format!("metrics.listen: `{l}` is not an address to listen on ({e})"),
                hint: Some("give an IP and a port, such as 127.0.0.1:9464 or [::1]:9464".into()),
            })?),
        };
        let log_file = match (&file.log_file.dir, file.log_file.keep) {
            (_, Some(0)) => {
                return Err(ConfigError {
                    file: path.to_owned(),
                    position: locate(&text, "keep:", 0),
                    message: "log_file.keep: 0 would delete every file; keep at least 1".into(),
                    hint: Some("the default keeps 14 daily files".into()),
                }
                .into());
            }
            (Some(d), keep) => Some(LogFile {
                dir: dir.join(d),
                keep: keep.unwrap_or(14),
                max_size: file.log_file.max_size.map_or(100 << 20, |s| s.0).max(4096),
                max_total: file.log_file.max_total.map_or(1 << 30, |s| s.0).max(4096),
            }),
            (None, _) => None,
        };
        let notify = receivers(&text, path, &file.notify, &secrets)?;
        let config = Config {
            file: path.to_owned(),
            database: dir.join(database),
            postgres,
            apps_dir: dir.join(file.apps.unwrap_or_else(|| "apps".into())),
            plugin_dir: file.plugin_dir.map(|p| dir.join(p)),
            dir,
            plugins: file.plugins.0,
            secrets,
            engine,
            theme: file.console.theme,
            metrics_listen,
            log_file,
            notify,
            descriptors: Vec::new(),
            descriptors_read: false,
            problems: Vec::new(),
            catalog: *catalog,
        };
        Ok(config)
    }

    /// `manent.yml`'s text, read again (to locate a problem found after loading).
    pub fn manent_text(&self) -> Option<String> {
        read(&self.file).ok().map(|(text, _)| text)
    }

    /// Names descriptors may refer to.
    pub fn known(&self) -> Known {
        let mut plugins: BTreeSet<String> = self
            .catalog
            .builtins
            .iter()
            .filter(|b| !values::MUST_DECLARE.contains(b))
            .map(|s| (*s).to_owned())
            .collect();
        plugins.extend(self.plugins.keys().cloned());
        Known {
            plugins,
            secrets: self.secrets.keys().cloned().collect(),
            plugin_dir: self.plugin_dir.clone(),
            catalog: self.catalog,
        }
    }

    fn load_apps_dir(&mut self) {
        let entries = match std::fs::read_dir(&self.apps_dir) {
            Ok(e) => e,
            Err(e) => {
                let hint = "set `apps:` in manent.yml to the directory of the application \
                            descriptors (apps/<app>.yml)";
                self.problems.push(
                    ConfigError::file(
                        &self.apps_dir,
                        format!("the descriptors' directory cannot be read: {e}"),
                    )
                    .with_hint(hint),
                );
                return;
            }
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
            .collect();
        files.sort();
        for f in files {
            self.add_descriptor(&f);
        }
    }

    /// Parses one descriptor file (`-f FILE`, or one of `apps/`) and adds it, or its problems.
    pub fn add_descriptor(&mut self, file: &Path) {
        let text = match read(file) {
            Ok((text, meta)) => {
                if let Err(e) = trust::check(file, &meta) {
                    return self.problems.push(e);
                }
                text
            }
            Err(e) => return self.problems.push(e),
        };
        let known = self.known();
        match parse_yaml::<DescriptorFile>(file, &text, &known, "descriptor") {
            Ok(spec) => {
                let d = Descriptor {
                    file: file.to_owned(),
                    text,
                    spec,
                };
                let problems = check_descriptor(&d);
                if problems.is_empty() {
                    self.descriptors.push(d);
                } else {
                    self.problems.extend(problems);
                }
            }
            Err(e) => self.problems.push(e),
        }
    }

    /// Two descriptors claiming one moniker is a plan error: neither can be deployed safely.
    fn check_monikers(&mut self) {
        let mut owners: BTreeMap<String, &Descriptor> = BTreeMap::new();
        let mut problems = Vec::new();
        for d in &self.descriptors {
            for (env_name, env) in &d.spec.environments {
                let kind = env
                    .deploy
                    .as_ref()
                    .unwrap_or(&d.spec.deploy)
                    .resource_type
                    .clone()
                    .unwrap_or_else(|| {
                        env.deploy
                            .as_ref()
                            .unwrap_or(&d.spec.deploy)
                            .plugin_names()
                            .first()
                            .cloned()
                            .unwrap_or_default()
                    });
                for t in &env.targets {
                    let Ok(m) = Moniker::new(env_name, &d.spec.application, &kind, &t.name) else {
                        continue;
                    };
                    let key = m.to_string();
                    match owners.get(&key) {
                        Some(other) if other.file != d.file => problems.push(ConfigError {
                            file: d.file.clone(),
                            position: locate(&d.text, &format!("name: {}", t.name), 0),
                            message: format!(
                                "moniker {key} is also claimed by {}",
                                other.file.display()
                            ),
                            hint: Some(
                                "two descriptors may not own one target: rename the target, or \
                                 set a distinct `deploy.type`"
                                    .into(),
                            ),
                        }),
                        Some(_) => {}
                        None => {
                            owners.insert(key, d);
                        }
                    }
                }
            }
        }
        self.problems.extend(problems);
    }

    /// Where in `file` the word a message is about first appears (`unknown field `x``,
    /// `unknown variable `{{x}}``), else where `fallback` does.
    pub fn locate_in(&self, file: &Path, message: &str, fallback: &str) -> Option<(usize, usize)> {
        let d = self.descriptors.iter().find(|d| d.file == file)?;
        let quoted = message
            .split('`')
            .nth(1)
            .map(|w| w.trim_matches(['{', '}']).to_owned());
        quoted
            .filter(|w| !w.is_empty())
            .and_then(|w| locate(&d.text, &w, 0))
            .or_else(|| locate(&d.text, fallback, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(text: &str) -> Result<(), String> {
        check_depth(Path::new("x.yml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn nesting_is_counted_outside_quotes_and_comments_only() {
        let deep = "[".repeat(MAX_DEPTH + 1);
        let err = depth(&format!("a: 1\nb: {deep}")).unwrap_err();
        assert!(err.contains(&format!("x.yml:2:{}", MAX_DEPTH + 4)), "{err}");
        assert!(depth(&format!("a: '{deep}'\nb: \"{deep}\\\"\"\n# {deep}")).is_ok());
        // A quote inside a plain scalar, or `#` not after white space, hides nothing.
        for hider in ["a: it's\n", "a: x#y\n"] {
            assert!(
                depth(&format!("{hider}b: {deep}")).is_err(),
                "{hider:?} hid the nesting"
            );
        }
        // Shell in a block scalar opens and closes what it opens.
        let shell = "deploy: |\n  [ -e x ] && echo \"${A:-[}\" || test ${#B} -gt 0\n";
        assert!(depth(&shell.repeat(100)).is_ok());
    }
}
