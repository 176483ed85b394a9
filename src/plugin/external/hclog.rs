//! Plugin logs on stderr, as go-hclog's JSON lines: manent parses them into log lines with
//! their level, message and attributes (and the SDK writes them). Odd lines never crash it: a
//! non-JSON line is kept as text, a `[WARN]`-style prefix chooses its level.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::plugin::logger::{Level, LogLine};

/// A stderr line, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// Severity.
    pub level: Level,
    /// Message.
    pub message: String,
    /// The target it names (`target`), if any.
    pub target: Option<String>,
    /// The target's moniker (`moniker`), if any.
    pub moniker: Option<String>,
    /// The deployment it names (`deployment` or `deployment_id`), if any.
    pub deployment: Option<String>,
    /// Every other key.
    pub attrs: BTreeMap<String, Value>,
}

/// The keys an hclog line's visitor takes apart; the rest are attributes.
enum Key {
    Level,
    Message,
    Timestamp,
    Target,
    Moniker,
    /// `deployment` or `deployment_id`, as the line spells it.
    Deployment(&'static str),
    Other(String),
}

impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl serde::de::Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            // Borrowed from the line when it has no escapes: the known keys cost nothing.
            fn visit_str<E: serde::de::Error>(self, k: &str) -> Result<Key, E> {
                Ok(match k {
                    "@level" => Key::Level,
                    "@message" => Key::Message,
                    "@timestamp" => Key::Timestamp,
                    "target" => Key::Target,
                    "moniker" => Key::Moniker,
                    "deployment" => Key::Deployment("deployment"),
                    "deployment_id" => Key::Deployment("deployment_id"),
                    other => Key::Other(other.to_owned()),
                })
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// A string value as text; another JSON value as its JSON.
fn text(v: Value) -> String {
    match v {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

/// The value of `key` as a name (a target, moniker or deployment) when it is a string; another
/// value stays an attribute under its key.
fn named<'de, A: serde::de::MapAccess<'de>>(
    m: &mut A,
    key: &str,
    slot: &mut Option<String>,
    attrs: &mut BTreeMap<String, Value>,
) -> Result<(), A::Error> {
    match m.next_value::<Value>()? {
        Value::String(s) => *slot = Some(s),
        other => {
            attrs.insert(key.to_owned(), other);
        }
    }
    Ok(())
}

/// A line of go-hclog JSON, taken apart in one pass: no map of every key to pick from and
/// serialise again, the timestamp skipped unread.
struct Json(Parsed);

impl<'de> serde::Deserialize<'de> for Json {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct LineVisitor;
        impl<'de> serde::de::Visitor<'de> for LineVisitor {
            type Value = Json;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an hclog JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Json, A::Error> {
                let mut p = Parsed {
                    level: Level::Info,
                    message: String::new(),
                    target: None,
                    moniker: None,
                    deployment: None,
                    attrs: BTreeMap::new(),
                };
                while let Some(key) = m.next_key::<Key>()? {
                    match key {
                        Key::Level => {
                            p.level = Level::parse(&text(m.next_value()?)).unwrap_or(Level::Info);
                        }
                        Key::Message => p.message = text(m.next_value()?),
                        Key::Timestamp => {
                            m.next_value::<serde::de::IgnoredAny>()?;
                        }
                        Key::Target => named(&mut m, "target", &mut p.target, &mut p.attrs)?,
                        Key::Moniker => named(&mut m, "moniker", &mut p.moniker, &mut p.attrs)?,
                        Key::Deployment(k) => {
                            if p.deployment.is_some() {
                                // `deployment` and `deployment_id` both: the first names the
                                // deployment, the other stays an attribute.
                                p.attrs.insert(k.to_owned(), m.next_value()?);
                            } else {
                                named(&mut m, k, &mut p.deployment, &mut p.attrs)?;
                            }
                        }
                        Key::Other(k) => {
                            p.attrs.insert(k, m.next_value()?);
                        }
                    }
                }
                Ok(Json(p))
            }
        }
        d.deserialize_map(LineVisitor)
    }
}

/// Parses one stderr line of a plugin. `in_panic` carries go-plugin's rule that after a
/// `panic:` line every plain line is an error.
pub fn parse(line: &str, in_panic: &mut bool) -> Parsed {
    let trimmed = line.trim_end();
    if trimmed.starts_with('{')
        && let Ok(Json(p)) = serde_json::from_str::<Json>(trimmed)
    {
        return p;
    }
    let plain = |level: Level, message: &str| Parsed {
        level,
        message: message.to_owned(),
        target: None,
        moniker: None,
        deployment: None,
        attrs: BTreeMap::new(),
    };
    for (prefix, level) in [
        ("[TRACE]", Level::Trace),
        ("[DEBUG]", Level::Debug),
        ("[INFO]", Level::Info),
        ("[WARN]", Level::Warn),
        ("[ERROR]", Level::Error),
    ] {
        if let Some(rest) = trimmed.strip_prefix(prefix) {
            return plain(level, rest.trim());
        }
    }
    if trimmed.starts_with("panic: ") || trimmed.starts_with("fatal error: ") {
        *in_panic = true;
    }
    plain(if *in_panic { Level::Error } else { Level::Info }, trimmed)
}

/// A log line as hclog JSON: `@level`, `@message`, `@module`, `@timestamp` (six fractional
/// digits, as go-plugin hosts require) and the attributes.
pub fn format(line: &LogLine, module: &str) -> String {
    let mut map = serde_json::Map::new();
    for (k, v) in &line.attrs {
        map.insert(k.clone(), v.clone());
    }
    if let Some(t) = &line.target {
        map.insert("target".into(), Value::String(t.clone()));
    }
    if let Some(m) = &line.moniker {
        map.insert("moniker".into(), Value::String(m.clone()));
    }
    if let Some(d) = &line.deployment_id {
        map.insert("deployment".into(), Value::String(d.clone()));
    }
    map.insert("@level".into(), Value::String(line.level.as_str().into()));
    map.insert("@message".into(), Value::String(line.message.clone()));
    map.insert("@module".into(), Value::String(module.into()));
    let at = std::time::UNIX_EPOCH
        + std::time::Duration::from_millis(u64::try_from(line.at).unwrap_or(0));
    map.insert(
        "@timestamp".into(),
        Value::String(humantime::format_rfc3339_micros(at).to_string()),
    );
    Value::Object(map).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hclog_json_plain_prefixed_and_panic_lines() {
        let mut panic = false;
        let p = parse(
            r#"{"@level":"warn","@message":"slow host","@module":"p","@timestamp":"2026-11-29T10:34:17.920085Z","target":"web-1","n":3}"#,
            &mut panic,
        );
        assert_eq!((p.level, p.message.as_str()), (Level::Warn, "slow host"));
        assert_eq!(p.target.as_deref(), Some("web-1"));
        assert_eq!(p.attrs["n"], 3);
        assert_eq!(p.attrs["@module"], "p");
        // A target that is not a string stays an attribute; deployment_id names the deployment.
        let p = parse(
            r#"{"@message":"m","target":7,"deployment_id":"dep-1"}"#,
            &mut panic,
        );
        assert_eq!(
            (p.target, p.attrs["target"].clone()),
            (None, Value::from(7))
        );
        assert_eq!(p.deployment.as_deref(), Some("dep-1"));
        assert!(!p.attrs.contains_key("@timestamp"));
        // One that is not a string stays under its own key; with both, the first names the
        // deployment and the other is kept.
        let p = parse(r#"{"@message":"m","deployment_id":42}"#, &mut panic);
        assert_eq!(
            (p.deployment, p.attrs["deployment_id"].clone()),
            (None, Value::from(42))
        );
        let p = parse(
            r#"{"@message":"m","deployment":"dep-1","deployment_id":"dep-2"}"#,
            &mut panic,
        );
        assert_eq!(p.deployment.as_deref(), Some("dep-1"));
        assert_eq!(p.attrs["deployment_id"], "dep-2");
        // A message that is not a string must not crash anything.
        assert_eq!(
            parse(r#"{"@level":"info","@message":5}"#, &mut panic).message,
            "5"
        );
        assert_eq!(parse("[ERROR] disk full", &mut panic).level, Level::Error);
        assert_eq!(parse("plain words", &mut panic).level, Level::Info);
        assert_eq!(parse("panic: boom", &mut panic).level, Level::Error);
        assert_eq!(
            parse("goroutine 1 [running]:", &mut panic).level,
            Level::Error
        );
    }

    #[test]
    fn formats_timestamps_with_six_fractional_digits() {
        let line = LogLine {
            at: 1_795_951_621_579,
            level: Level::Info,
            source: "x".into(),
            deployment_id: Some("dep-1".into()),
            target: Some("a".into()),
            moniker: None,
            message: "hi".into(),
            attrs: BTreeMap::new(),
        };
        let v: Value = serde_json::from_str(&format(&line, "fixture")).unwrap();
        let ts = v["@timestamp"].as_str().unwrap();
        assert_eq!(
            ts.split('.').nth(1).unwrap().len(),
            7,
            "{ts}: six digits and Z"
        );
        assert_eq!(v["target"], "a");
        let mut panic = false;
        let back = parse(&format(&line, "fixture"), &mut panic);
        assert_eq!(back.message, "hi");
    }
}
