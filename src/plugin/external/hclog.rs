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
    /// Every other key.
    pub attrs: BTreeMap<String, Value>,
}

/// Parses one stderr line of a plugin. `in_panic` carries go-plugin's rule that after a
/// `panic:` line every plain line is an error.
pub fn parse(line: &str, in_panic: &mut bool) -> Parsed {
    let trimmed = line.trim_end();
    // Straight into the attributes' map (no intermediate JSON object to copy from).
    if trimmed.starts_with('{')
        && let Ok(mut map) = serde_json::from_str::<BTreeMap<String, Value>>(trimmed)
    {
        let text = |v: Option<Value>| match v {
            Some(Value::String(s)) => Some(s),
            Some(other) => Some(other.to_string()),
            None => None,
        };
        let level = text(map.remove("@level"))
            .and_then(|l| Level::parse(&l))
            .unwrap_or(Level::Info);
        let message = text(map.remove("@message")).unwrap_or_default();
        map.remove("@timestamp");
        return Parsed {
            level,
            message,
            attrs: map,
        };
    }
    for (prefix, level) in [
        ("[TRACE]", Level::Trace),
        ("[DEBUG]", Level::Debug),
        ("[INFO]", Level::Info),
        ("[WARN]", Level::Warn),
        ("[ERROR]", Level::Error),
    ] {
        if let Some(rest) = trimmed.strip_prefix(prefix) {
            return Parsed {
                level,
                message: rest.trim().to_owned(),
                attrs: BTreeMap::new(),
            };
        }
    }
    if trimmed.starts_with("panic: ") || trimmed.starts_with("fatal error: ") {
        *in_panic = true;
    }
    let level = if *in_panic { Level::Error } else { Level::Info };
    Parsed {
        level,
        message: trimmed.to_owned(),
        attrs: BTreeMap::new(),
    }
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
        assert_eq!(p.attrs["target"], "web-1");
        assert_eq!(p.attrs["n"], 3);
        assert!(!p.attrs.contains_key("@timestamp"));
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
