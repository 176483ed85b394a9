//! Configuration errors that point at the file, line and column, say what was expected and, for
//! a misspelt key or value, which valid one is nearest.

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem in one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line and column, when known.
    pub position: Option<(usize, usize)>,
    /// What is wrong, with the key path where known.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
}

impl ConfigError {
    /// An error about a whole file.
    pub fn file(file: &Path, message: impl Into<String>) -> Self {
        ConfigError {
            file: file.to_owned(),
            position: None,
            message: message.into(),
            hint: None,
        }
    }

    /// Adds a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// From a YAML parse or type error, with a nearest-key hint for unknown keys and values.
    pub fn from_yaml(file: &Path, err: &yaml_serde::Error) -> Self {
        let position = err.location().map(|l| (l.line(), l.column()));
        let mut message = err.to_string();
        // The position is shown in front; drop yaml_serde's and libyaml's " at line L column C".
        if position.is_some() {
            while let Some(i) = message.find(" at line ") {
                let rest = &message[i + " at line ".len()..];
                let Some(col) = rest.find("column ") else {
                    break;
                };
                let digits = rest[col + 7..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .count();
                let end = i + " at line ".len() + col + 7 + digits;
                message.replace_range(i..end, "");
            }
        }
        for (internal, plain) in [
            (
                "struct DescriptorFile",
                "a descriptor: a map with `application`, `deploy` and `environments`",
            ),
            ("struct ManentFile", "manent.yml's settings: a map"),
            (
                "struct ArtifactSpec",
                "an artifact: a map like `{version: \"1.2.3\"}`",
            ),
            (
                "struct DeploySpec",
                "a deploy section: a map with `plugin` and `params`",
            ),
            (
                "struct EnvironmentSpec",
                "an environment: a map with `targets`",
            ),
            ("struct TargetSpec", "a target: a map with `name`"),
            ("expected path string", "expected a path"),
            ("expected field identifier", "expected a key name"),
        ] {
            message = message.replace(internal, plain);
        }
        ConfigError::located(file, position, message)
    }

    /// [`ConfigError::from_yaml`] for a file whose text is known: a duplicate key is located at
    /// its second occurrence (the parser points at the start of the mapping).
    /// A file with nothing but comments is said to be so, and a position past the end of the
    /// text (the parser's end of stream) is moved to the end of its last line.
    pub fn from_yaml_in(file: &Path, text: &str, err: &yaml_serde::Error) -> Self {
        let mut e = ConfigError::from_yaml(file, err);
        let blank = text.lines().all(|l| {
            let l = l.trim();
            l.is_empty() || l.starts_with('#') || l == "---" || l == "..."
        });
        if blank {
            e.position = None;
            e.message = format!(
                "no settings (the file is empty or only comments): {}",
                e.message
            );
            return e;
        }
        let lines = text.lines().count().max(1);
        if let Some((line, _)) = e.position
            && line > lines
        {
            let last = text.lines().last().unwrap_or_default();
            e.position = Some((lines, last.chars().count() + 1));
        }
        // An alias bomb: the parser says no more than that; the first alias used is where.
        if e.message.contains("repetition limit exceeded") {
            e.position = text.lines().enumerate().find_map(|(n, l)| {
                let at = l.find('*').filter(|&i| {
                    l[..i].ends_with([' ', '[', ',', '{', ':'])
                        && l[i + 1..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
                })?;
                Some((n + 1, l[..at].chars().count() + 1))
            });
            e.message = "aliases (`*name`) expand to too much: refused before it fills the memory \
                         (an alias bomb)"
                .into();
            e.hint = Some("write the values out, or use fewer nested aliases".into());
            return e;
        }
        // A tab where YAML expects indentation: say so (the parser says only "cannot start
        // any token").
        if let Some((line, col)) = e.position
            && e.message.contains("cannot start any token")
            && text
                .lines()
                .nth(line.saturating_sub(1))
                .and_then(|l| l.chars().nth(col.saturating_sub(1)))
                == Some('\t')
        {
            e.message = "a tab character: YAML indents with spaces only".into();
            e.hint = Some("replace the tab with spaces".into());
            return e;
        }
        // A value refused inside a map is reported at the map: moved to the value (the first
        // `word` the message quotes, on or after the reported line).
        if let Some((line, _)) = e.position
            && let Some(word) = e.message.split('`').nth(1).filter(|w| w.len() >= 2)
            && !e.message.contains("unknown field")
            && !e.message.contains("duplicate")
            && !text
                .lines()
                .nth(line.saturating_sub(1))
                .is_some_and(|l| l.contains(word))
            && let Some((n, l)) = text
                .lines()
                .enumerate()
                .skip(line)
                .take(64)
                .find(|(_, l)| l.contains(word))
            && let Some(at) = l.find(word)
        {
            e.position = Some((n + 1, l[..at].chars().count() + 1));
        }
        if e.message.contains("while parsing a flow") && e.hint.is_none() {
            e.hint = Some(
                "a `[` or `{` opened here is not closed, or a value is missing after a `,`".into(),
            );
        }
        // A line break in a header value is refused on the value's own line (the parser points
        // at the start of the headers' map): the first escape of a control character after it.
        if e.message.contains("header injection")
            && let Some((line, _)) = e.position
        {
            let found = text
                .lines()
                .enumerate()
                .skip(line.saturating_sub(1))
                .find_map(|(n, l)| {
                    ["\\r", "\\n", "\\u00", "\\x"]
                        .iter()
                        .filter_map(|esc| l.find(esc))
                        .min()
                        .map(|at| (n + 1, l[..at].chars().count() + 1))
                });
            if found.is_some() {
                e.position = found;
            }
        }
        let key = ["duplicate field `", "duplicate entry with key `"]
            .iter()
            .find_map(|p| e.message.split_once(p))
            .and_then(|(_, rest)| rest.split_once('`'))
            .map(|(k, _)| k.trim_matches('"').to_owned());
        if let (Some(key), Some((line, col))) = (key, e.position) {
            let indent = col.saturating_sub(1);
            let second = text
                .lines()
                .enumerate()
                .skip(line.saturating_sub(1))
                .filter(|(_, l)| {
                    l.len() > indent
                        && l[..indent].trim().is_empty()
                        && l[indent..].starts_with(&format!("{key}:"))
                })
                .nth(1);
            if let Some((n, _)) = second {
                e.position = Some((n + 1, col));
                e.hint = Some(format!("`{key}` is given twice in one map; keep one"));
            }
        }
        e
    }

    /// From a message; the hint comes from serde's wording, if any.
    pub fn located(file: &Path, position: Option<(usize, usize)>, message: String) -> Self {
        let hint = nearest_hint(&message);
        ConfigError {
            file: file.to_owned(),
            position,
            message,
            hint,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(h) = &self.hint {
            write!(f, "\n  hint: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// Every problem found, across files.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        ConfigErrors(vec![e])
    }
}

/// The closest of `candidates` to `word`, if it is close enough to be a typo.
pub fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// serde's "unknown field `x`, expected one of `a`, `b`" (or variant) → "did you mean `a`?".
fn nearest_hint(message: &str) -> Option<String> {
    let (kind, rest) = ["unknown field `", "unknown variant `"]
        .iter()
        .find_map(|p| message.find(p).map(|i| (*p, &message[i + p.len()..])))?;
    let (word, expected) = rest.split_once('`')?;
    let candidates: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    let what = if kind.contains("field") {
        "key"
    } else {
        "value"
    };
    match nearest(word, candidates.iter().copied()) {
        Some(best) => Some(format!("did you mean `{best}`?")),
        None if candidates.is_empty() => None,
        None => Some(format!("valid {what}s here: {}", candidates.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_the_nearest_key_or_lists_the_valid_ones() {
        let m = "deploy: unknown field `plugn`, expected `plugin` or `params`";
        assert_eq!(nearest_hint(m).as_deref(), Some("did you mean `plugin`?"));
        let m = "strategy: unknown variant `zzz`, expected `all` or `rolling`";
        assert_eq!(
            nearest_hint(m).as_deref(),
            Some("valid values here: all, rolling")
        );
        assert_eq!(nearest_hint("missing field `deploy`"), None);
    }
}
