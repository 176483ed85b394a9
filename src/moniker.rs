//! Monikers name every target and hook run: `<namespace>::<module>::<type>::<name>`, that is
//! environment (`prod`, `prod/eu1`), application, plugin resource type, target name. State and
//! history are keyed by them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A target's stable identity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Moniker {
    namespace: String,
    module: String,
    kind: String,
    name: String,
}

/// A part that cannot go into a moniker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid moniker {text:?}: {reason}")]
pub struct MonikerError {
    text: String,
    reason: String,
}

impl Moniker {
    /// Builds a moniker, checking each part.
    pub fn new(
        namespace: &str,
        module: &str,
        kind: &str,
        name: &str,
    ) -> Result<Self, MonikerError> {
        let m = Moniker {
            namespace: namespace.to_owned(),
            module: module.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
        };
        for (part, what) in [
            (namespace, "namespace"),
            (module, "module"),
            (kind, "type"),
            (name, "name"),
        ] {
            if let Some(reason) = Self::check_part(part, what) {
                return Err(MonikerError {
                    text: m.to_string(),
                    reason,
                });
            }
        }
        Ok(m)
    }

    /// Why `part` cannot be the `what` of a moniker (empty, `::`, a control character, white
    /// space), if it cannot.
    pub fn check_part(part: &str, what: &str) -> Option<String> {
        if part.is_empty() {
            Some(format!("the {what} is empty"))
        } else if part.contains("::") {
            Some(format!("the {what} {part:?} contains `::`"))
        } else if let Some(c) = part.chars().find(|c| c.is_control()) {
            Some(format!(
                "the {what} {part:?} contains a control character ({c:?})"
            ))
        } else if part.chars().any(char::is_whitespace) {
            Some(format!("the {what} {part:?} contains white space"))
        } else {
            None
        }
    }

    /// The environment, e.g. `prod` or `prod/eu1`.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The application.
    pub fn module(&self) -> &str {
        &self.module
    }

    /// The plugin resource type.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The target name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for Moniker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}::{}::{}::{}",
            self.namespace, self.module, self.kind, self.name
        )
    }
}

impl FromStr for Moniker {
    type Err = MonikerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = s.split("::").collect();
        match parts.as_slice() {
            [ns, module, kind, name] => Moniker::new(ns, module, kind, name),
            _ => Err(MonikerError {
                text: s.to_owned(),
                reason: "expected four parts <namespace>::<module>::<type>::<name>".into(),
            }),
        }
    }
}

impl Serialize for Moniker {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Moniker {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_keeps_slashes_in_the_namespace() {
        let m = Moniker::new("prod/eu1", "web", "exec", "web-1").unwrap();
        assert_eq!(m.to_string(), "prod/eu1::web::exec::web-1");
        assert_eq!(m.to_string().parse::<Moniker>().unwrap(), m);
    }

    #[test]
    fn rejects_empty_parts_separators_and_spaces() {
        assert!(
            Moniker::new("", "web", "exec", "a")
                .unwrap_err()
                .to_string()
                .contains("namespace is empty")
        );
        assert!(Moniker::new("prod", "we::b", "exec", "a").is_err());
        assert!(Moniker::new("prod", "web", "exec", "a b").is_err());
        assert!("prod::web::exec".parse::<Moniker>().is_err());
    }
}
