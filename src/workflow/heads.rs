//! A large JSON document's head: the document without the values at some paths (a spec's
//! 100,000 targets, a report's 100,000 lines), read in one scan that never builds what it
//! leaves out. Lists read deployments so (`WorkflowQuery::heads`): SQLite's own JSON functions
//! build the whole document first (70 MB for a 16 MB report); PostgreSQL's jsonb operators do
//! the same on the server, where it costs the client nothing.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

/// `json` without the value at each of `paths` (object keys, outermost first); text that is
/// not a JSON object, or has no object where a path goes through, is returned as it is.
pub fn without(json: &str, paths: &[&[&str]]) -> String {
    let mut de = serde_json::Deserializer::from_str(json);
    let read = Without(paths.to_vec())
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
    match read {
        Ok(v) => v.to_string(),
        Err(_) => json.to_owned(),
    }
}

/// Reads an object, leaving out the keys a path ends at and going into those it goes through.
struct Without<'p>(Vec<&'p [&'p str]>);

impl<'de> DeserializeSeed<'de> for Without<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Without<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let through: Vec<&[&str]> = self
                .0
                .iter()
                .filter(|p| p.first() == Some(&key.as_str()))
                .map(|p| &p[1..])
                .collect();
            if through.iter().any(|rest| rest.is_empty()) {
                map.next_value::<IgnoredAny>()?;
            } else if through.is_empty() {
                out.insert(key, map.next_value::<Value>()?);
            } else {
                let inner = map.next_value_seed(Without(through))?;
                out.insert(key, inner);
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_out_the_paths_and_keeps_the_rest_as_it_was() {
        let doc = r#"{"kind":"deploy","targets":[{"m":"a"},{"m":"b"}],"message":"2 \"ok\"",
            "spec":{"targets":[1,2,3],"plugin":"fleet","nested":{"targets":[]}},"n":1.5}"#;
        let head = without(doc, &[&["targets"], &["spec", "targets"], &["absent", "x"]]);
        let v: Value = serde_json::from_str(&head).unwrap_or_default();
        assert_eq!(
            v,
            serde_json::json!({"kind":"deploy","message":"2 \"ok\"",
                "spec":{"plugin":"fleet","nested":{"targets":[]}},"n":1.5})
        );
    }

    #[test]
    fn what_is_not_an_object_comes_back_as_it_is() {
        for text in [
            "not json",
            "[1,2]",
            "\"s\"",
            "{\"targets\":[1]} trailing",
            "",
        ] {
            assert_eq!(without(text, &[&["targets"]]), text);
        }
        // A path through something that is not an object: the document as it is.
        let doc = r#"{"spec":[1],"a":1}"#;
        assert_eq!(without(doc, &[&["spec", "targets"]]), doc);
    }
}
