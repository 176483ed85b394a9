//! Value types that check themselves while the YAML is read, so their errors carry the line and
//! column: durations, sizes, and references to plugins and secrets (checked against the
//! names `manent.yml` declares, which are in scope while descriptors are read).

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::time::Duration;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

use super::error::nearest;

/// Longest version manent takes.
pub const VERSION_MAX: usize = 128;

/// Checks a version: 1–128 characters, letters, digits and `. _ + ~ -`, starting with a letter or
/// a digit — what release tags and package versions use, and nothing a shell or a path could
/// read as more than a name (`$(…)`, `../`, spaces, line breaks, control characters).
pub fn check_version(v: &str) -> Result<(), String> {
    let shown: String = v.escape_debug().take(40).collect();
    let why = if v.is_empty() {
        Some("it is empty".to_owned())
    } else if v.chars().count() > VERSION_MAX {
        Some(format!("it is longer than {VERSION_MAX} characters"))
    } else if !v.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        Some("it must start with a letter or a digit".to_owned())
    } else {
        v.chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '~' | '-')))
            .map(|c| format!("{:?} is not allowed", c))
    };
    match why {
        None => Ok(()),
        Some(why) => Err(format!(
            "version \"{shown}\" is refused: {why} (versions are letters, digits and . _ + ~ -, \
             up to {VERSION_MAX})"
        )),
    }
}

/// A YAML value whose numbers are all finite (`.nan` and `.inf` have no JSON form: they would
/// silently become null in the options a plugin gets).
pub fn finite(v: &yaml_serde::Value) -> Result<(), String> {
    match v {
        yaml_serde::Value::Number(n) if n.as_f64().is_some_and(|f| !f.is_finite()) => {
            let shown = match n.as_f64() {
                Some(f) if f.is_nan() => ".nan",
                Some(f) if f < 0.0 => "-.inf",
                _ => ".inf",
            };
            Err(format!(
                "`{shown}` is not a number a plugin can take (NaN or infinite)"
            ))
        }
        yaml_serde::Value::Sequence(items) => items.iter().try_for_each(finite),
        yaml_serde::Value::Mapping(m) => m.iter().try_for_each(|(k, v)| {
            finite(k)?;
            finite(v)
        }),
        yaml_serde::Value::Tagged(t) => finite(&t.value),
        _ => Ok(()),
    }
}

/// Plugin parameters in a descriptor, checked as they are read.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamsSpec(pub yaml_serde::Value);

impl<'de> Deserialize<'de> for ParamsSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = yaml_serde::Value::deserialize(d)?;
        finite(&v).map_err(de::Error::custom)?;
        Ok(ParamsSpec(v))
    }
}

/// A version in a descriptor, checked as it is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionSpec(pub String);

impl<'de> Deserialize<'de> for VersionSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = String::deserialize(d)?;
        check_version(&v).map_err(de::Error::custom)?;
        Ok(VersionSpec(v))
    }
}

/// A duration written as `30s`, `5m`, `1h30m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dur(pub Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        humantime::parse_duration(s.trim()).map(Dur).map_err(|_| {
            de::Error::custom(format!(
                "invalid duration `{s}`: write it like 30s, 5m or 1h30m"
            ))
        })
    }
}

/// A size in bytes, written as `64MB`, `1GiB`, `512k` or a plain number of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl Size {
    /// Parses `64MB`, `1GiB`, `512k`, `1000`.
    pub fn parse(s: &str) -> Option<Size> {
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (n, unit) = t.split_at(split);
        let n: u64 = n.parse().ok()?;
        let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" | "kib" => 1 << 10,
            "m" | "mb" | "mib" => 1 << 20,
            "g" | "gb" | "gib" => 1 << 30,
            _ => return None,
        };
        n.checked_mul(mult).map(Size)
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        let s = match Raw::deserialize(d)? {
            Raw::N(n) => return Ok(Size(n)),
            Raw::S(s) => s,
        };
        Size::parse(&s).ok_or_else(|| {
            de::Error::custom(format!(
                "invalid size `{s}`: write it like 64MB, 1GB or 512KB"
            ))
        })
    }
}

/// A share written as `1%`, `0.5%` or a fraction (`0.01`), kept in parts per million.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate(pub u32);

impl Rate {
    /// Parses `1%`, `0.25%`, `0.01`; `None` for anything else or above 100%.
    pub fn parse(s: &str) -> Option<Rate> {
        let t = s.trim();
        let (n, scale) = match t.strip_suffix('%') {
            Some(p) => (p.trim(), 10_000.0),
            None => (t, 1_000_000.0),
        };
        let v: f64 = n.parse().ok()?;
        let ppm = (v * scale).round();
        (v.is_finite() && (0.0..=1_000_000.0).contains(&ppm)).then_some(Rate(ppm as u32))
    }

    /// As a fraction, 0–1.
    pub fn fraction(self) -> f64 {
        f64::from(self.0) / 1_000_000.0
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}%", percent_text(self.fraction()))
    }
}

/// A fraction as a short percentage's number: `0.052` → `5.2`, `0.00125` → `0.13`.
pub fn percent_text(fraction: f64) -> String {
    let p = fraction * 100.0;
    let text = if p == 0.0 || p >= 10.0 {
        format!("{p:.1}")
    } else if p >= 1.0 {
        format!("{p:.2}")
    } else {
        format!("{p:.3}")
    };
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text.is_empty() {
        "0".into()
    } else {
        text.into()
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(f64),
            S(String),
        }
        let s = match Raw::deserialize(d)? {
            Raw::N(n) => n.to_string(),
            Raw::S(s) => s,
        };
        Rate::parse(&s).ok_or_else(|| {
            de::Error::custom(format!(
                "invalid rate `{s}`: write a percentage like 1% or 0.5%, or a fraction like 0.01"
            ))
        })
    }
}

/// What configuration must know of plugins without depending on them: the built-in names, and
/// how an undeclared `manent-plugin-<name>` binary is found. The plugin layer provides it
/// (`manent::plugin::catalog()`).
#[derive(Debug, Clone, Copy)]
pub struct Catalog {
    /// Names of the built-in plugins.
    pub builtins: &'static [&'static str],
    /// Finds an undeclared plugin binary by name, in the plugin directory or on PATH.
    pub discover: fn(&str, Option<&std::path::Path>) -> Option<std::path::PathBuf>,
}

/// Names `manent.yml` declares; references in descriptors are checked against them.
#[derive(Debug, Clone)]
pub struct Known {
    /// Plugin names usable in `deploy.plugin`.
    pub plugins: BTreeSet<String>,
    /// Secret names usable in `deploy.secrets`.
    pub secrets: BTreeSet<String>,
    /// Where undeclared plugins (`manent-plugin-<name>`) are looked for, besides PATH.
    pub plugin_dir: Option<std::path::PathBuf>,
    /// The plugins that exist.
    pub catalog: Catalog,
}

thread_local! {
    static KNOWN: RefCell<Option<Known>> = const { RefCell::new(None) };
}

/// Runs `f` (a descriptor parse) with `known` in scope for reference checks.
pub fn with_known<R>(known: &Known, f: impl FnOnce() -> R) -> R {
    KNOWN.with(|k| *k.borrow_mut() = Some(known.clone()));
    let r = f();
    KNOWN.with(|k| *k.borrow_mut() = None);
    r
}

fn check_ref<E: de::Error>(
    name: &str,
    what: &str,
    pick: impl Fn(&Known) -> &BTreeSet<String>,
    fix: &str,
) -> Result<(), E> {
    KNOWN.with(|k| {
        let k = k.borrow();
        let Some(known) = k.as_ref() else {
            return Ok(());
        };
        let set = pick(known);
        if set.contains(name) || (what == "plugin" && discoverable(name, known)) {
            return Ok(());
        }
        if what == "plugin" && MUST_DECLARE.contains(&name) {
            return Err(E::custom(format!(
                "plugin `{name}` runs shell commands on this host, so manent.yml must declare it \
                 before a descriptor uses it: add `plugins: {{{name}: {{}}}}` to manent.yml \
                 (with `pass_env:` or `env:` as its commands need)"
            )));
        }
        let list = set
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ");
        let guess = nearest(name, set.iter().map(String::as_str))
            .map(|g| format!("did you mean `{g}`? "))
            .unwrap_or_default();
        Err(E::custom(format!(
            "unknown {what} `{name}` ({guess}known: {list}; {fix})"
        )))
    })
}

/// Built-in plugins a descriptor may use only when manent.yml declares them: `exec` runs any
/// shell command a descriptor writes, on this host, as the engine's user — whoever keeps
/// manent.yml decides whether descriptors may do that.
pub const MUST_DECLARE: &[&str] = &["exec"];

fn discoverable(name: &str, known: &Known) -> bool {
    (known.catalog.discover)(name, known.plugin_dir.as_deref()).is_some()
}

/// The built-in plugin names of the catalog in scope (while `manent.yml` is read).
pub(crate) fn builtins() -> &'static [&'static str] {
    KNOWN.with(|k| k.borrow().as_ref().map_or(&[][..], |k| k.catalog.builtins))
}

/// A plugin name in a descriptor: built in, declared under `plugins:`, or installed as
/// `manent-plugin-<name>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginRef(pub String);

impl<'de> Deserialize<'de> for PluginRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        check_ref(
            &name,
            "plugin",
            |k| &k.plugins,
            "declare it under `plugins:` in manent.yml, or install `manent-plugin-NAME` on PATH",
        )?;
        Ok(PluginRef(name))
    }
}

/// A secret name in a descriptor; must be declared under `secrets:`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretName(pub String);

impl<'de> Deserialize<'de> for SecretName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        check_ref(
            &name,
            "secret",
            |k| &k.secrets,
            "declare it under `secrets:` in manent.yml",
        )?;
        Ok(SecretName(name))
    }
}

/// The secrets `${secret:NAME}` references in `text` name, in order; an unclosed or empty
/// reference is an error.
pub fn secret_refs(text: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${secret:") {
        let after = &rest[start + "${secret:".len()..];
        let Some(end) = after.find('}') else {
            return Err("an unclosed `${secret:…`: write `${secret:NAME}`".into());
        };
        let name = &after[..end];
        if name.is_empty() {
            return Err("`${secret:}` names no secret: write `${secret:NAME}`".into());
        }
        names.push(name.to_owned());
        rest = &after[end + 1..];
    }
    Ok(names)
}

/// Why `value` cannot be an HTTP header value: a line break would end the header and start
/// another (or the body) — header injection; other control characters are refused by HTTP.
pub fn check_header_value(value: &str) -> Result<(), String> {
    match value.chars().find(|c| c.is_control() && *c != '\t') {
        None => Ok(()),
        Some(c) => Err(format!(
            "a header value may not hold {c:?}: a line break would start another header \
             (header injection); put one value on one line"
        )),
    }
}

/// Why `name` cannot be an HTTP header name (an RFC 9110 token).
pub fn check_header_name(name: &str) -> Result<(), String> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if !name.is_empty() && name.chars().all(token) {
        Ok(())
    } else {
        Err(format!(
            "`{}` is not a header name (letters, digits and !#$%&'*+-.^_`|~)",
            name.escape_debug()
        ))
    }
}

/// An HTTP header's name and value, checked as the YAML is read (so a refusal points at the
/// value): no line break can smuggle in another header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderValue(pub String);

impl<'de> Deserialize<'de> for HeaderValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = String::deserialize(d)?;
        check_header_value(&v).map_err(de::Error::custom)?;
        secret_refs(&v).map_err(de::Error::custom)?;
        Ok(HeaderValue(v))
    }
}

/// An HTTP header's name, checked as the YAML is read.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HeaderName(pub String);

impl<'de> Deserialize<'de> for HeaderName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = String::deserialize(d)?;
        check_header_name(&v).map_err(de::Error::custom)?;
        Ok(HeaderName(v))
    }
}

/// What is deployed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    /// Kind of artifact (`tarball`, `container`, `directory`, …); plugins select on it.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// Artifact name.
    #[serde(default)]
    pub name: String,
    /// Version; becomes the release's version.
    #[serde(default)]
    pub version: String,
    /// Where to fetch it (`file://…`, `https://…`, an image reference).
    #[serde(default)]
    pub uri: String,
    /// Expected digest of the artifact, hex.
    #[serde(default)]
    pub sha256: String,
}

/// A secret's source as configured in `manent.yml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretRef {
    /// `env:NAME`: the engine's own environment.
    Env(String),
    /// `file:/path`: the file's content, trailing newline removed.
    File(String),
    /// `value:…`: a literal, for tests only.
    Literal(String),
}

impl SecretRef {
    /// Parses `env:NAME`, `file:/path` or `value:…`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            Some(("env", name)) if !name.is_empty() => Ok(SecretRef::Env(name.to_owned())),
            Some(("file", path)) if !path.is_empty() => Ok(SecretRef::File(path.to_owned())),
            Some(("value", v)) => Ok(SecretRef::Literal(v.to_owned())),
            _ => Err(format!(
                "`{s}` is not a secret source: use env:NAME, file:/path (or value:… in tests)"
            )),
        }
    }
}
