//! How manent writes times, durations and digests, in one place below every layer: the
//! records' messages and the CLI's tables say them alike (the console's narrow columns have
//! their own shorter forms, `console/widgets.rs`); and how it orders versions.

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
/// Names said in a sentence: `web-2`, `web-2 and web-5`, `web-1, web-2, web-3`, or the first
/// `most` and how many more (`web-1, web-2, … and 7 more (9 targets)`); none for an empty list.
pub fn some_of(names: &[String], most: usize) -> Option<String> {
    match names {
        [] => None,
        [one] => Some(one.clone()),
        [a, b] => Some(format!("{a} and {b}")),
        _ if names.len() <= most => Some(names.join(", ")),
        _ => Some(format!(
            "{}, … and {} more ({} targets)",
            names[..most].join(", "),
            names.len() - most,
            names.len()
        )),
    }
}

/// Versions in their natural order: runs of digits compare as numbers, the rest as text
/// (`1.10.0` after `1.9.2`, `v2` after `v1`, `1.0.0-rc1` before `1.0.0-rc2`). A version with a
/// pre-release part (`-rc1`) comes before the same version without it.
pub fn version_order(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (a_core, a_pre) = a.split_once('-').map_or((a, None), |(c, p)| (c, Some(p)));
    let (b_core, b_pre) = b.split_once('-').map_or((b, None), |(c, p)| (c, Some(p)));
    natural(a_core, b_core).then_with(|| match (a_pre, b_pre) {
        (None, None) => Ordering::Equal,
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (Some(x), Some(y)) => natural(x, y),
    })
}

fn natural(a: &str, b: &str) -> std::cmp::Ordering {
    let chunks = |s: &str| -> Vec<(bool, String)> {
        let mut out: Vec<(bool, String)> = Vec::new();
        for c in s.chars() {
            let digit = c.is_ascii_digit();
            match out.last_mut() {
                Some((d, run)) if *d == digit => run.push(c),
                _ => out.push((digit, c.to_string())),
            }
        }
        out
    };
    let (x, y) = (chunks(a), chunks(b));
    for ((dx, cx), (dy, cy)) in x.iter().zip(&y) {
        let o = match (dx, dy) {
            (true, true) => {
                let (tx, ty) = (cx.trim_start_matches('0'), cy.trim_start_matches('0'));
                tx.len().cmp(&ty.len()).then_with(|| tx.cmp(ty))
            }
            _ => cx.cmp(cy),
        };
        if o.is_ne() {
            return o;
        }
    }
    x.len().cmp(&y.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_said_in_a_sentence() {
        let n = |k: usize| (1..=k).map(|i| format!("web-{i}")).collect::<Vec<_>>();
        assert_eq!(some_of(&n(0), 3), None);
        assert_eq!(some_of(&n(1), 3).unwrap(), "web-1");
        assert_eq!(some_of(&n(2), 3).unwrap(), "web-1 and web-2");
        assert_eq!(some_of(&n(3), 3).unwrap(), "web-1, web-2, web-3");
        assert_eq!(
            some_of(&n(9), 2).unwrap(),
            "web-1, web-2, … and 7 more (9 targets)"
        );
    }

    #[test]
    fn versions_order_naturally() {
        use std::cmp::Ordering::{Equal, Greater, Less};
        assert_eq!(version_order("1.10.0", "1.9.2"), Greater);
        assert_eq!(version_order("1.0.0", "1.1.0"), Less);
        assert_eq!(version_order("v2", "v10"), Less);
        assert_eq!(version_order("1.0.0-rc1", "1.0.0"), Less);
        assert_eq!(version_order("1.0.0-rc2", "1.0.0-rc10"), Less);
        assert_eq!(version_order("1.2.3", "1.2.3"), Equal);
        assert_eq!(version_order("2026.12.01", "2026.11.30"), Greater);
    }
}
