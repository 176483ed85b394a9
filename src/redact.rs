//! Secret values never reach a log line, the database or the screen: every value a plugin reads
//! is registered here, and everything manent records or shows passes through [`redact`].

use std::sync::RwLock;

use aho_corasick::{AhoCorasick, MatchKind};

/// The known secret values, longest first, and one automaton that finds them all in one pass.
struct Redactor {
    values: Vec<String>,
    finder: Option<AhoCorasick>,
}

fn redactor() -> &'static RwLock<Redactor> {
    static R: RwLock<Redactor> = RwLock::new(Redactor {
        values: Vec::new(),
        finder: None,
    });
    &R
}

/// Remembers a secret value so [`redact`] hides it wherever it shows up, however short (a
/// secret under 8 characters is refused by `manent validate` unless a test fixture allows it) —
/// and each of its lines, since output is read and shown line by line (a key file, a
/// certificate).
pub fn register_redaction(value: &str) {
    register_one(value, 1);
    // As JSON writes it (the JSON log file formats fields before it redacts them).
    if let Ok(quoted) = serde_json::to_string(value) {
        let escaped = &quoted[1..quoted.len() - 1];
        if escaped != value {
            register_one(escaped, 1);
        }
    }
    if value.contains('\n') {
        for line in value.lines() {
            // A line of a few characters (a PEM's `-----`) would hide ordinary text.
            register_one(line.trim_end_matches('\r'), 4);
        }
    }
}

fn register_one(value: &str, shortest: usize) {
    if value.len() < shortest {
        return;
    }
    let known = |r: &Redactor| r.values.iter().any(|x| x == value);
    if redactor().read().is_ok_and(|r| known(&r)) {
        return;
    }
    if let Ok(mut r) = redactor().write()
        && !known(&r)
    {
        // Longest first: a secret inside another must not break the longer one's redaction.
        let at = r.values.partition_point(|x| x.len() >= value.len());
        r.values.insert(at, value.to_owned());
        r.finder = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&r.values)
            .ok();
    }
}

/// `text` with every known secret value replaced by `[redacted]`, in one pass: a replacement
/// is never searched again (a one-letter test secret cannot eat into `[redacted]`).
pub fn redact(text: &str) -> std::borrow::Cow<'_, str> {
    let Ok(r) = redactor().read() else {
        return text.into();
    };
    let Some(finder) = &r.finder else {
        return text.into();
    };
    if !finder.is_match(text) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len());
    finder.replace_all_with(text, &mut out, |_, _, dst| {
        dst.push_str("[redacted]");
        true
    });
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_also_hidden_as_json_writes_it() {
        register_redaction(r#"pa"ss\w0rd-xyz"#);
        let json = serde_json::to_string(&serde_json::json!({"m": r#"pa"ss\w0rd-xyz"#})).unwrap();
        assert!(!redact(&json).contains("w0rd-xyz"), "{}", redact(&json));
    }

    #[test]
    fn a_secret_inside_another_does_not_break_the_longer_ones_redaction() {
        register_redaction("inner-7c1d");
        register_redaction("outer-inner-7c1d-tail");
        register_redaction("inner-7c1d");
        assert_eq!(redact("a outer-inner-7c1d-tail b"), "a [redacted] b");
        assert_eq!(redact("a inner-7c1d b"), "a [redacted] b");
    }

    #[test]
    fn a_short_secret_is_redacted_too() {
        register_redaction("q7z");
        assert_eq!(redact("pin=q7z"), "pin=[redacted]");
    }

    #[test]
    fn a_replacement_is_never_redacted_again() {
        register_redaction("dac");
        assert_eq!(redact("dac and dac"), "[redacted] and [redacted]");
    }

    #[test]
    fn every_line_of_a_multi_line_secret_is_redacted() {
        register_redaction("-----BEGIN KEY-----\r\nline-one-3f9a\nline-two-77b0\n");
        assert_eq!(redact("got line-two-77b0 here"), "got [redacted] here");
        assert_eq!(redact("line-one-3f9a"), "[redacted]");
    }
}
