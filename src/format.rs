//! How manent writes times, durations and digests, in one place below every layer: the
//! records' messages and the CLI's tables say them alike (the console's narrow columns have
//! their own shorter forms, `console/widgets.rs`).

use std::time::{Duration, UNIX_EPOCH};

/// `2026-11-29T11:05:02Z` from epoch ms.
pub fn time(ms: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_seconds(t).to_string()
}

/// `350ms`, `1.2s`, `3m04s`.
pub fn duration(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms}ms"),
        1000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        _ => format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// The SHA-256 of `text`, in lowercase hex.
pub fn sha256_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
