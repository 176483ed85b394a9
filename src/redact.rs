//! Secret values never reach a log line, the database or the screen: every value a plugin reads
//! is registered here, and everything manent records or shows passes through [`redact`].

use std::sync::RwLock;

fn redactions() -> &'static RwLock<Vec<String>> {
    static VALUES: RwLock<Vec<String>> = RwLock::new(Vec::new());
    &VALUES
}

/// Remembers a secret value so [`redact`] hides it wherever it shows up.
pub fn register_redaction(value: &str) {
    // Very short values would redact ordinary words; they are still never logged on purpose.
    if value.len() < 4 {
        return;
    }
    if let Ok(mut v) = redactions().write()
        && !v.iter().any(|x| x == value)
    {
        v.push(value.to_owned());
    }
}

/// `text` with every known secret value replaced by `[redacted]`.
pub fn redact(text: &str) -> std::borrow::Cow<'_, str> {
    let Ok(values) = redactions().read() else {
        return text.into();
    };
    if values.iter().all(|v| !text.contains(v.as_str())) {
        return text.into();
    }
    let mut out = text.to_owned();
    for v in values.iter() {
        out = out.replace(v.as_str(), "[redacted]");
    }
    out.into()
}
