//! Named failure-injection sites for crash tests, switched on by `MANENT_FAILPOINTS`.
//!
//! The variable holds `site[~filter]=action[@hits]` entries separated by `;`. `filter` must be a
//! substring of the detail the site passes (a step name, for example); `hits` is `N`, `N-M` or
//! `N-` and counts matching hits in this process, from 1. Actions: `kill` (SIGKILL to this
//! process, exactly what an operator's `kill -9` does), `panic`, `ioerr` (the site reports an I/O
//! error), `sleep(MS)` and `pause` (sleep forever). Unset, every site costs one atomic load.
//!
//! With `MANENT_FAILPOINTS_WHILE=PATH`, sites fire (and count hits) only while that file exists,
//! so a test can arm them at a moment of its choosing (a full disk arriving mid-deploy).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What an enabled site tells its caller to do after the site's own action ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Report an I/O error from this site.
    IoError,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Kill,
    Panic,
    IoError,
    Sleep(u64),
    Pause,
}

#[derive(Debug)]
struct Rule {
    site: String,
    filter: Option<String>,
    action: Action,
    first: u64,
    last: u64,
    hits: AtomicU64,
}

fn rules() -> &'static [Rule] {
    static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
    RULES.get_or_init(|| {
        std::env::var("MANENT_FAILPOINTS")
            .map(|spec| parse(&spec))
            .unwrap_or_default()
    })
}

fn parse(spec: &str) -> Vec<Rule> {
    spec.split(';')
        .filter_map(|entry| {
            let (lhs, rhs) = entry.trim().split_once('=')?;
            let (site, filter) = match lhs.split_once('~') {
                Some((s, f)) => (s.to_owned(), Some(f.to_owned())),
                None => (lhs.to_owned(), None),
            };
            let (action, hits) = rhs.split_once('@').unwrap_or((rhs, "1-"));
            let action = match action {
                "kill" => Action::Kill,
                "panic" => Action::Panic,
                "ioerr" => Action::IoError,
                "pause" => Action::Pause,
                other => {
                    let ms = other.strip_prefix("sleep(")?.strip_suffix(')')?;
                    Action::Sleep(ms.parse().ok()?)
                }
            };
            let (first, last) = match hits.split_once('-') {
                Some((a, "")) => (a.parse().ok()?, u64::MAX),
                Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
                None => {
                    let n = hits.parse().ok()?;
                    (n, n)
                }
            };
            Some(Rule {
                site,
                filter,
                action,
                first,
                last,
                hits: AtomicU64::new(0),
            })
        })
        .collect()
}

/// Passes the site `site` with `detail`; runs the configured action if a rule matches.
pub fn hit(site: &str, detail: &str) -> Option<Fault> {
    let rules = rules();
    if rules.is_empty() {
        return None;
    }
    static WHILE: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();
    if let Some(armed) =
        WHILE.get_or_init(|| std::env::var_os("MANENT_FAILPOINTS_WHILE").map(Into::into))
        && !armed.exists()
    {
        return None;
    }
    for rule in rules {
        if rule.site != site || rule.filter.as_deref().is_some_and(|f| !detail.contains(f)) {
            continue;
        }
        let n = rule.hits.fetch_add(1, Ordering::SeqCst) + 1;
        if n < rule.first || n > rule.last {
            continue;
        }
        tracing::warn!(site, detail, hit = n, action = ?rule.action, "failpoint");
        match rule.action {
            Action::Kill => crate::sys::kill_self(),
            Action::Panic => panic!("failpoint {site} ({detail})"),
            Action::IoError => return Some(Fault::IoError),
            Action::Sleep(ms) => std::thread::sleep(Duration::from_millis(ms)),
            Action::Pause => loop {
                std::thread::sleep(Duration::from_secs(3600));
            },
        }
    }
    None
}

/// True when any failpoint is configured (tests use it to tell injected faults from real ones).
pub fn enabled() -> bool {
    !rules().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sites_filters_actions_and_hit_ranges() {
        let rules = parse("a=kill@3; b~deploy:b2=sleep(50)@2-4;c=ioerr;bad;d=nope");
        assert_eq!(rules.len(), 3);
        assert_eq!(
            (rules[0].action, rules[0].first, rules[0].last),
            (Action::Kill, 3, 3)
        );
        assert_eq!(rules[1].filter.as_deref(), Some("deploy:b2"));
        assert_eq!(
            (rules[1].action, rules[1].first, rules[1].last),
            (Action::Sleep(50), 2, 4)
        );
        assert_eq!((rules[2].first, rules[2].last), (1, u64::MAX));
    }
}
