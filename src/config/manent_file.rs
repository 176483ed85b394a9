//! `manent.yml`: the engine's own configuration — database, plugins and their options, secret
//! sources, engine settings.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use super::error::nearest;
use super::values::{Dur, SecretRef, builtins};

/// The file as written.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ManentFile {
    /// SQLite database; relative paths are relative to this file. Default `.manent/manent.db`.
    /// Or a shared PostgreSQL: `postgres://user:${secret:NAME}@host/db`.
    #[serde(default)]
    pub database: Option<PathBuf>,
    /// Directory of application descriptors. Default `apps`.
    #[serde(default)]
    pub apps: Option<PathBuf>,
    /// Where undeclared external plugins (`manent-plugin-<name>`) are looked for, besides PATH.
    #[serde(default)]
    pub plugin_dir: Option<PathBuf>,
    /// Plugins by the name descriptors use.
    #[serde(default)]
    pub plugins: Plugins,
    /// Secret sources by name.
    #[serde(default)]
    pub secrets: BTreeMap<String, SecretSpec>,
    /// Engine settings.
    #[serde(default)]
    pub engine: EngineSection,
    /// Console settings.
    #[serde(default)]
    pub console: ConsoleSection,
    /// Prometheus metrics (off unless `listen` is set).
    #[serde(default)]
    pub metrics: MetricsSection,
    /// The JSON log file for a SIEM (off unless `dir` is set).
    #[serde(default)]
    pub log_file: LogFileSection,
    /// Webhooks that hear of every deployment's transitions.
    #[serde(default)]
    pub notify: Vec<NotifySection>,
}

/// One `notify:` receiver.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotifySection {
    /// Its name in logs and metrics (default: the URL's host).
    #[serde(default)]
    pub name: Option<String>,
    /// Where each transition is POSTed as JSON (http or https).
    pub url: String,
    /// Extra headers; `${secret:NAME}` in a value is read from `secrets:` when sending.
    #[serde(default)]
    pub headers: BTreeMap<super::values::HeaderName, super::values::HeaderValue>,
    /// The transitions it hears (default: all).
    #[serde(default)]
    pub events: Option<Vec<String>>,
    /// How long one delivery may take (default 5s).
    #[serde(default)]
    pub timeout: Option<Dur>,
    /// Retry backoff after a failed delivery (default 1s doubling to 5m).
    #[serde(default)]
    pub backoff: Option<super::descriptor::Backoff>,
    /// Failed deliveries before a notification is set aside so later ones flow (default 10;
    /// a refusal — an HTTP 4xx other than 408 and 429 — sets it aside at once).
    #[serde(default)]
    pub max_attempts: Option<u32>,
}

/// `metrics:` settings.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricsSection {
    /// Address the exposition is served on (`127.0.0.1:9464`, `[::1]:9464`).
    #[serde(default)]
    pub listen: Option<String>,
}

/// `log_file:` settings.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogFileSection {
    /// Directory of the daily files (`manent.YYYY-MM-DD.jsonl`), relative to manent.yml.
    #[serde(default)]
    pub dir: Option<PathBuf>,
    /// Files kept (default 14); older ones are deleted at rotation.
    #[serde(default)]
    pub keep: Option<usize>,
    /// A file is rotated once it holds this much (default 100MB), whatever the day.
    #[serde(default)]
    pub max_size: Option<super::values::Size>,
    /// The files together hold at most this much (default 1GB): the oldest go first.
    #[serde(default)]
    pub max_total: Option<super::values::Size>,
}

/// `console:` settings.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsoleSection {
    /// Theme name (bundled: default, light, high-contrast, mono; or yours).
    #[serde(default)]
    pub theme: Option<String>,
}

/// `engine:` settings.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EngineSection {
    /// Stable id of this engine (default: the host name).
    #[serde(default)]
    pub executor_id: Option<String>,
    /// How long shutdown waits for deploys to finish or park (default 10m).
    #[serde(default)]
    pub drain_timeout: Option<Dur>,
    /// How long it then waits for in-flight steps (default 1m).
    #[serde(default)]
    pub hard_timeout: Option<Dur>,
    /// `full` (default: every checkpoint survives power loss) or `normal`.
    #[serde(default)]
    pub synchronous: Option<SyncMode>,
    /// Crashed runs of one deployment before it is dead-lettered (default 5).
    #[serde(default)]
    pub max_recovery_attempts: Option<u32>,
    /// How long log lines are kept in the database (default 30d).
    #[serde(default)]
    pub log_retention: Option<Dur>,
    /// Log bytes one deployment keeps in the database at most (default 256MB); past it lines
    /// still reach the console and the JSON log, and the cut is said once.
    #[serde(default)]
    pub log_cap: Option<super::values::Size>,
    /// On a shared PostgreSQL: how long an engine that stops renewing its lease keeps its
    /// deployments before another engine takes them over (default 15s).
    #[serde(default)]
    pub lease: Option<Dur>,
    /// The group whose members share this engine's files (database, lock, key, process
    /// records, JSON log): 0660 files and 2770 directories of that group instead of 0600/0700
    /// of one user.
    #[serde(default)]
    pub shared_group: Option<String>,
    /// On a shared PostgreSQL: the secret (declared under `secrets:`) every engine on it holds,
    /// which authenticates deployments' stored inputs; at least 32 characters.
    #[serde(default)]
    pub inputs_key: Option<String>,
    /// Accept secrets shorter than 8 characters (test fixtures only): each is then redacted
    /// wherever its characters appear, even inside other words.
    #[serde(default)]
    pub allow_short_secrets: bool,
}

/// SQLite's `synchronous`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SyncMode {
    /// Durable across power loss.
    Full,
    /// Durable across process crashes only.
    Normal,
}

/// A secret source, `env:NAME` or `file:/path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretSpec(pub SecretRef);

impl<'de> Deserialize<'de> for SecretSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        SecretRef::parse(&s)
            .map(SecretSpec)
            .map_err(de::Error::custom)
    }
}

/// `external:` launch settings of a plugin binary.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExternalDecl {
    /// The binary; relative paths are relative to manent's working directory.
    pub command: PathBuf,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Expected sha256 of the binary, checked at activation and at every start.
    #[serde(default)]
    pub sha256: Option<Sha256Hex>,
    /// Environment variables passed to it (the rest of manent's environment is not).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Limit on start and handshake (default 15s; at least 1s).
    #[serde(default, deserialize_with = "start_timeout")]
    pub start_timeout: Option<Dur>,
}

fn start_timeout<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Dur>, D::Error> {
    let t = Dur::deserialize(d)?;
    if t.0 < std::time::Duration::from_secs(1) {
        return Err(de::Error::custom(format!(
            "start_timeout `{}` is too short: a plugin needs at least 1s to start",
            humantime::format_duration(t.0)
        )));
    }
    Ok(Some(t))
}

/// A sha256 digest in hex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sha256Hex(pub String);

impl<'de> Deserialize<'de> for Sha256Hex {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?.to_ascii_lowercase();
        if s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit()) {
            Ok(Sha256Hex(s))
        } else {
            Err(de::Error::custom(format!(
                "`{s}` is not a sha256: expected 64 hex digits, as `sha256sum` prints"
            )))
        }
    }
}

/// One `plugins:` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginDecl {
    /// The built-in this entry configures (its own name, or `builtin:`).
    pub builtin: Option<String>,
    /// Launch settings, for an external plugin.
    pub external: Option<ExternalDecl>,
    /// Every other key: the options passed to the plugin's factory.
    pub options: serde_json::Value,
}

/// The `plugins:` map, checked entry by entry as it is read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plugins(pub BTreeMap<String, PluginDecl>);

impl<'de> Deserialize<'de> for Plugins {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Plugins;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of plugin names to their settings")
            }

            fn visit_unit<E: de::Error>(self) -> Result<Plugins, E> {
                Ok(Plugins::default())
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Plugins, A::Error> {
                let mut out = BTreeMap::new();
                while let Some(name) = map.next_key::<String>()? {
                    let raw: RawDecl = map.next_value()?;
                    let decl = check_decl(&name, raw).map_err(de::Error::custom)?;
                    out.insert(name, decl);
                }
                Ok(Plugins(out))
            }
        }
        d.deserialize_map(V)
    }
}

struct RawDecl {
    builtin: Option<String>,
    external: Option<ExternalDecl>,
    options: serde_json::Map<String, serde_json::Value>,
}

impl<'de> Deserialize<'de> for RawDecl {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawDecl;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map: `external: {command: …}`, `builtin: NAME`, or plugin options")
            }

            fn visit_unit<E: de::Error>(self) -> Result<RawDecl, E> {
                Ok(RawDecl {
                    builtin: None,
                    external: None,
                    options: serde_json::Map::new(),
                })
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawDecl, A::Error> {
                let mut raw = RawDecl {
                    builtin: None,
                    external: None,
                    options: serde_json::Map::new(),
                };
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "builtin" => raw.builtin = Some(map.next_value()?),
                        "external" => raw.external = Some(map.next_value()?),
                        _ => {
                            let v: yaml_serde::Value = map.next_value()?;
                            super::values::finite(&v)
                                .map_err(|e| de::Error::custom(format!("option `{key}`: {e}")))?;
                            let v = serde_json::to_value(&v).map_err(|e| {
                                de::Error::custom(format!("option `{key}` cannot be used: {e}"))
                            })?;
                            raw.options.insert(key, v);
                        }
                    }
                }
                Ok(raw)
            }
        }
        d.deserialize_any(V)
    }
}

fn check_decl(name: &str, raw: RawDecl) -> Result<PluginDecl, String> {
    let names = builtins();
    let is_builtin = names.contains(&name);
    let options = serde_json::Value::Object(raw.options);
    match (raw.builtin, raw.external) {
        (Some(_), Some(_)) => Err(format!(
            "plugin `{name}` has both `builtin:` and `external:`; it is one or the other"
        )),
        (_, Some(_)) if is_builtin => Err(format!(
            "`{name}` is the name of a built-in plugin; give the external plugin another name, \
             such as `{name}-ext`"
        )),
        (None, Some(external)) => Ok(PluginDecl {
            builtin: None,
            external: Some(external),
            options,
        }),
        (Some(b), None) if is_builtin => Err(format!(
            "`{name}` is itself a built-in plugin; `builtin: {b}` needs an entry with another name"
        )),
        (Some(b), None) => {
            if names.contains(&b.as_str()) {
                Ok(PluginDecl {
                    builtin: Some(b),
                    external: None,
                    options,
                })
            } else {
                let guess = nearest(&b, names.iter().copied())
                    .map(|g| format!("did you mean `{g}`? "))
                    .unwrap_or_default();
                Err(format!(
                    "`builtin: {b}` names no built-in plugin ({guess}built-ins: {})",
                    names.join(", ")
                ))
            }
        }
        (None, None) if is_builtin => Ok(PluginDecl {
            builtin: Some(name.to_owned()),
            external: None,
            options,
        }),
        (None, None) => Err(format!(
            "plugin `{name}` is not built in (built-ins: {}): add `external: {{command: …}}` to \
             run a plugin binary, or `builtin: NAME` to configure a built-in under this name",
            names.join(", ")
        )),
    }
}
