//! What every blue/green router plugin shares (nginx's and HAProxy's, and any written with the
//! SDK): each target is a server with an address in each of two slots — its labels `blue` and
//! `green` — checked before any of them reaches a router's configuration; manent's routing,
//! taken from the request with those addresses filled in; the routing a PrepareSlots, promote
//! or revert leaves; the candidate deployed into its slot on every target ([`candidate`]: the
//! artifact directory copied into `<slot>_root`, or a command run); and the whole contract
//! around a router's own apply and read-back ([`router`]).

pub mod access_log;
pub mod candidate;
pub mod router;

pub use router::{Router, SlotRouter};

use std::collections::BTreeMap;

use super::targets::for_each_target;
use super::{
    DeployResult, Logger, PluginError, Pool, Request, Routing, RoutingState, TargetResult,
    TargetStatus,
};

/// The two slots: a target's address in each is its label of that name.
pub const SLOTS: [&str; 2] = ["blue", "green"];

/// The other slot.
pub fn other(slot: &str) -> &'static str {
    if slot == "blue" { "green" } else { "blue" }
}

/// `slot` must be one of the two.
pub fn check_slot(slot: &str) -> Result<(), PluginError> {
    if SLOTS.contains(&slot) {
        Ok(())
    } else {
        Err(PluginError::Permanent(format!(
            "slot `{slot}` is not one of this plugin's slots (blue, green)"
        )))
    }
}

/// Candidate servers enabled at `scale` percent: at least one.
pub fn enabled(servers: usize, scale: u32) -> usize {
    (servers * usize::try_from(scale).unwrap_or(100))
        .div_ceil(100)
        .clamp(1, servers.max(1))
}

/// Checks an address before it reaches a config line: `host:port` (IPv4, or a host name of
/// letters, digits, `-` and `.`), `[v6]:port`, or `unix:/absolute/path` — nothing else, so no
/// value can add a directive, a server, an include or a second command.
pub fn check_address(a: &str) -> Result<(), String> {
    let bad = |why: &str| {
        Err(format!(
            "address {:?} {why}: write host:port (127.0.0.1:8081, [::1]:8081, app-1.internal:80) \
             or unix:/path",
            a.chars().take(80).collect::<String>()
        ))
    };
    if let Some(path) = a.strip_prefix("unix:") {
        let ok = path.starts_with('/')
            && path.len() < 108
            && path
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'))
            && !path.contains("..");
        return if ok {
            Ok(())
        } else {
            bad("is not a plain absolute socket path")
        };
    }
    let port = if let Some(rest) = a.strip_prefix('[') {
        let Some((v6, port)) = rest.split_once("]:") else {
            return bad("has an IPv6 address without `]:port`");
        };
        if v6.is_empty()
            || !v6
                .chars()
                .all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | '.'))
        {
            return bad("has an IPv6 address with other characters than hex digits, `:` and `.`");
        }
        port
    } else {
        let Some((host, port)) = a.rsplit_once(':') else {
            return bad("has no port");
        };
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        };
        if host.is_empty() || host.len() > 253 || !host.split('.').all(label_ok) {
            return bad("has a host that is not an IPv4 address or a host name");
        }
        port
    };
    match port.parse::<u16>() {
        Ok(p) if p > 0 && port.chars().all(|c| c.is_ascii_digit()) => Ok(()),
        _ => bad("has a port that is not a number from 1 to 65535"),
    }
}

/// Each target's address in each slot, checked (`blue` and `green` labels).
pub fn addresses(req: &Request) -> Result<Vec<(&'static str, Vec<String>)>, PluginError> {
    SLOTS
        .iter()
        .map(|slot| {
            let list = req
                .targets
                .iter()
                .map(|t| {
                    let a = t.labels.get(*slot).ok_or_else(|| {
                        PluginError::Permanent(format!(
                            "target {} has no `{slot}` label: give each target its address in \
                             both slots, e.g. labels: {{blue: 127.0.0.1:8081, green: \
                             127.0.0.1:8082}}",
                            t.name()
                        ))
                    })?;
                    check_address(a).map_err(|e| {
                        PluginError::Permanent(format!("target {}: label `{slot}`: {e}", t.name()))
                    })?;
                    Ok(a.clone())
                })
                .collect::<Result<Vec<_>, PluginError>>()?;
            Ok((*slot, list))
        })
        .collect()
}

/// A pool of `slot` holding `version`, with the targets' addresses in it.
pub fn pool(req: &Request, slot: &str, version: &str) -> Result<Pool, PluginError> {
    check_slot(slot)?;
    Ok(Pool {
        slot: slot.to_owned(),
        version: version.to_owned(),
        addresses: addresses(req)?
            .into_iter()
            .find(|(s, _)| *s == slot)
            .map(|(_, a)| a)
            .unwrap_or_default(),
    })
}

/// manent's routing, from the request: the only thing a router renders from. A pool the
/// request names without addresses takes the targets' labels; every address is checked.
pub fn recorded(req: &Request) -> Result<Routing, PluginError> {
    let mut r = req.routing.clone().ok_or_else(|| {
        PluginError::Permanent(
            "the call carries no routing: this plugin renders only from manent's records \
             (upgrade manent)"
                .into(),
        )
    })?;
    for p in [&mut r.stable, &mut r.candidate] {
        if p.addresses.is_empty() && !p.slot.is_empty() {
            p.addresses = pool(req, &p.slot, "")?.addresses;
        } else {
            for a in &p.addresses {
                check_address(a).map_err(PluginError::Permanent)?;
            }
        }
    }
    check_slot(&r.stable.slot)?;
    if !r.candidate.slot.is_empty() {
        check_slot(&r.candidate.slot)?;
    }
    Ok(r)
}

/// The slot manent's records say serves production, if the request names one.
fn named_stable(req: &Request) -> Option<Pool> {
    req.routing
        .as_ref()
        .map(|r| r.stable.clone())
        .filter(|p| !p.slot.is_empty())
}

/// The slot a running router serves production from (when manent has no record), or why it
/// cannot be told.
fn served_stable(served: RoutingState, router: &str) -> Result<Pool, PluginError> {
    let slot = served
        .routing
        .map(|r| r.stable.slot)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            PluginError::Permanent(format!(
                "cannot tell which slot serves production: {}",
                served
                    .foreign
                    .unwrap_or_else(|| format!("{router} does not say"))
            ))
        })?;
    Ok(Pool {
        slot,
        ..Pool::default()
    })
}

/// The routing PrepareSlots leaves: production stays on `stable`, the candidate goes to the
/// other slot with the request's version, at 0%.
fn prepared(req: &Request, stable: &Pool) -> Result<Routing, PluginError> {
    Ok(Routing {
        stable: pool(req, &stable.slot, &stable.version)?,
        candidate: pool(req, other(&stable.slot), &req.artifact.version)?,
        weight: 0,
        testers: false,
        scale: 100,
        retired: false,
    })
}

/// The routing a promotion leaves: the candidate is stable, the previous stable out of every
/// pool.
pub fn promoted(r: &Routing) -> Routing {
    Routing {
        stable: r.candidate.clone(),
        candidate: r.stable.clone(),
        weight: 0,
        testers: false,
        scale: 100,
        retired: true,
    }
}

/// The routing a revert leaves: the candidate out of every pool, the stable release serving
/// everything.
pub fn reverted(r: &Routing) -> Routing {
    Routing {
        weight: 0,
        testers: false,
        retired: true,
        ..r.clone()
    }
}

/// What a tester sends to reach the candidate: `header: NAME: 1`, `cookie: NAME=1`.
fn tester_details(header: &str, cookie: &str) -> BTreeMap<String, String> {
    [
        ("header".to_owned(), format!("{header}: 1")),
        ("cookie".to_owned(), format!("{cookie}=1")),
    ]
    .into_iter()
    .collect()
}

/// Validation shared by the routers: every target's address in both slots, and where each
/// slot's files go (`<slot>_root` labels) unless `params.deploy_command` deploys instead.
fn check_targets(req: &Request, plugin: &str) -> Result<(), PluginError> {
    addresses(req)?;
    if candidate::params(req, plugin)?.deploy_command.is_some() {
        return Ok(());
    }
    for t in &req.targets {
        for slot in SLOTS {
            if !t.labels.contains_key(&format!("{slot}_root")) {
                return Err(PluginError::Permanent(format!(
                    "target {} has no `{slot}_root` label and there is no \
                     params.deploy_command: say where each slot's files go",
                    t.name()
                )));
            }
        }
    }
    Ok(())
}

/// A router's error line about a file the plugin does not own, without the text it quotes
/// (`unknown directive "s3cr3t" in /etc/x:1` → `unknown directive "(not shown: another
/// file's text)" in /etc/x:1`): a router echoes the offending word of a file, and that may be
/// a file the operator must not see through manent.
pub fn elide_quoted(line: &str, quote: char) -> String {
    const HIDDEN: &str = "(not shown: another file's text)";
    let Some(first) = line.find(quote) else {
        return line.to_owned();
    };
    // The text quoted may hold the quote itself (`"se"cret"`): everything goes from the first
    // quote to the last one before the file is named (` in /…`), or to that naming.
    let named = line
        .rfind(" in /")
        .filter(|&at| at > first)
        .unwrap_or(line.len());
    // No closing quote before the naming (it was inside the quotes, or there is none): to the
    // line's last quote, else to the naming.
    let last = line[..named]
        .rfind(quote)
        .filter(|&at| at > first)
        .or_else(|| line.rfind(quote).filter(|&at| at > first));
    match last {
        Some(last) => format!("{}{quote}{HIDDEN}{}", &line[..first], &line[last..]),
        None => format!("{}{quote}{HIDDEN}{}", &line[..first], &line[named..]),
    }
}

/// Checks that the plugin may write `file` in its directory `dir`.
pub fn check_writable(dir: &std::path::Path, file: &std::path::Path) -> Result<(), PluginError> {
    let probe = dir.join(".manent-write-probe");
    std::fs::write(&probe, b"")
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| {
            PluginError::Permanent(format!(
                "cannot write in {} ({e}): the plugin renders {} there",
                dir.display(),
                file.display()
            ))
        })
}

/// DeployCandidate: the candidate in its slot on every target (PrepareSlots named the slot).
async fn deploy_candidate(
    req: &Request,
    plugin: &str,
    log: &Logger,
) -> Result<DeployResult, PluginError> {
    let slot = match &req.routing {
        Some(r) if !r.candidate.slot.is_empty() => r.candidate.slot.clone(),
        _ => {
            return Err(PluginError::Permanent(
                "the call names no candidate slot (PrepareSlots first)".into(),
            ));
        }
    };
    check_slot(&slot)?;
    let slot = &slot;
    let outcome = for_each_target(req, |t| async move {
        let said = candidate::deploy(req, &t, slot, plugin).await?;
        log.for_deployment(&req.deployment_id)
            .for_target(&t)
            .info(&format!("{plugin}: candidate {said}"));
        Ok(TargetResult::new(TargetStatus::Deployed).with_message(said))
    })
    .await;
    DeployResult::of(plugin, &req.artifact.version, outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_checked_before_they_reach_a_config_line() {
        for ok in [
            "127.0.0.1:18201",
            "[::1]:8080",
            "app-1.internal:80",
            "unix:/run/app.sock",
        ] {
            assert_eq!(check_address(ok), Ok(()), "{ok}");
        }
        for bad in [
            "127.0.0.1:18201 weight=1; server 127.0.0.1:18299 weight=100",
            "127.0.0.1:18201; include /tmp/rootonly.txt",
            "127.0.0.1:18201#x",
            "127.0.0.1:18201#9.9.9.9:80",
            "127.0.0.1",
            "127.0.0.1:0",
            "127.0.0.1:70000",
            "[::1]",
            "$host:80",
            "${UNSET}:18191",
            "a b:80",
            "unix:relative.sock",
            "unix:/tmp/../etc/x",
            "unix:/tmp/a;show info",
            "127.0.0.1:80\n    server evil:80",
            "127.0.0.1:18191\n    server evil 127.0.0.9:80 weight 256",
        ] {
            assert!(check_address(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn quoted_text_of_another_file_is_not_shown() {
        assert_eq!(
            elide_quoted("unknown directive \"s3cr3t\" in /tmp/x:1", '"'),
            "unknown directive \"(not shown: another file's text)\" in /tmp/x:1"
        );
        assert_eq!(
            elide_quoted(
                "parsing [/tmp/x:1] : unknown keyword 's3cr3t' out of section.",
                '\''
            ),
            "parsing [/tmp/x:1] : unknown keyword '(not shown: another file's text)' out of \
             section."
        );
        // A quote inside the quoted text hides nothing less.
        assert_eq!(
            elide_quoted("unknown directive \"se\"cret\" in /tmp/x:1", '"'),
            "unknown directive \"(not shown: another file's text)\" in /tmp/x:1"
        );
        assert_eq!(
            elide_quoted("unexpected \"s3cr3t in /tmp/x:1", '"'),
            "unexpected \"(not shown: another file's text) in /tmp/x:1"
        );
        // The naming inside the quotes is quoted text too.
        assert_eq!(
            elide_quoted("unknown keyword 'a in /b' out of section.", '\''),
            "unknown keyword '(not shown: another file's text)' out of section."
        );
    }

    #[test]
    fn at_least_one_candidate_server_is_enabled() {
        assert_eq!(enabled(4, 50), 2);
        assert_eq!(enabled(5, 20), 1);
        assert_eq!(enabled(3, 1), 1);
        assert_eq!(enabled(3, 100), 3);
        assert_eq!(enabled(0, 100), 1);
    }

    #[test]
    fn promote_and_revert_retire_the_candidate() {
        let r = Routing {
            stable: Pool {
                slot: "blue".into(),
                ..Pool::default()
            },
            candidate: Pool {
                slot: "green".into(),
                ..Pool::default()
            },
            weight: 40,
            testers: true,
            scale: 50,
            retired: false,
        };
        let p = promoted(&r);
        assert_eq!(
            (p.stable.slot.as_str(), p.candidate.slot.as_str()),
            ("green", "blue")
        );
        assert!(p.retired && !p.testers && p.weight == 0 && p.scale == 100);
        let v = reverted(&r);
        assert_eq!(v.stable.slot, "blue");
        assert!(v.retired && !v.testers && v.weight == 0 && v.scale == 50);
    }
}
