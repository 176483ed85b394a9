//! The file the plugin owns — one `backend`, rendered from manent's routing alone — and the
//! runtime state that goes with it: each server's weight, whether it takes requests at all
//! (maintenance), and the tester map.
//!
//! Every server of both slots is in the backend (`blue1`, `blue2`, …, `green1`, …: the slot and
//! the target's place), so a weight change, promote, revert, scale or tester routing is a
//! runtime change through the admin socket — no reload. The file is rewritten with the same
//! values at each change, so a reload or restart of HAProxy serves what manent set last.
//!
//! Its structure — everything but the weights, the `disabled` flags and the tester map — has
//! a digest, which the file hands HAProxy as a process variable (`set-var proc.manent_NAME`):
//! HAProxy answering that variable is proof it loaded this rendering, and a file whose
//! structure no longer matches its digest was edited by hand.
//!
//! Testers: `use-server %[rand(K),map_int(MAP)] if manent_tester` — the map sends each of K
//! keys to one of the candidate's servers that take requests; an empty map sends testers
//! nowhere special (the rule finds no server and HAProxy load-balances as for anyone).

use std::fmt::Write as _;

use manent::plugin::Routing;
use manent::plugin::slots::{check_address, check_slot, enabled};
use sha2::{Digest, Sha256};

/// HAProxy's weights per server: 0 to 256.
pub const MAX_WEIGHT: u32 = 256;

/// How the file names things.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The backend the operator's frontend sends requests to.
    pub backend: String,
    /// The header that sends a tester to the candidate (value `1`).
    pub header: String,
    /// The cookie that does (value `1`).
    pub cookie: String,
    /// The tester map's path (beside the file).
    pub map: String,
}

impl Names {
    /// The process variable that carries the structure's digest: `proc.manent_app`.
    pub fn var(&self) -> String {
        format!("proc.manent_{}", self.backend.replace('-', "_"))
    }
}

/// One server as manent wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// `blue1`: the slot and the target's place in it, from 1.
    pub name: String,
    pub slot: &'static str,
    /// The target's address in that slot, as its label says.
    pub address: String,
    pub weight: u32,
    /// Takes requests (else: in maintenance, out of every pool).
    pub usable: bool,
}

/// A rendering: the file, the tester map, and the runtime state both describe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub text: String,
    pub map_text: String,
    /// The structure's digest (what `proc.manent_NAME` answers once HAProxy loaded it).
    pub digest: String,
    pub servers: Vec<Server>,
    /// The tester map.
    pub testers: Entries,
}

/// The tester map's entries: key → server.
pub type Entries = Vec<(String, String)>;

/// The slot a server name says (`green2` → green, 2), if it is one of the plugin's.
pub fn slot_of(name: &str) -> Option<(&'static str, usize)> {
    ["blue", "green"].into_iter().find_map(|slot| {
        let n = name.strip_prefix(slot)?;
        let i: usize = n.parse().ok()?;
        (i > 0 && n.chars().all(|c| c.is_ascii_digit()) && !n.starts_with('0')).then_some((slot, i))
    })
}

/// A label's address as HAProxy writes it: `unix:/p` → `unix@/p`.
fn haproxy_address(a: &str) -> String {
    match a.strip_prefix("unix:") {
        Some(path) => format!("unix@{path}"),
        None => a.to_owned(),
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The candidate's share, in whole percent (half up), of `stable` servers at weight `a` and
/// `candidate` servers at `b`: what the read-back reports.
pub fn share(stable_sum: u64, candidate_sum: u64) -> Option<u32> {
    let total = stable_sum + candidate_sum;
    (total > 0).then(|| u32::try_from((candidate_sum * 200 + total) / (total * 2)).unwrap_or(100))
}

/// Per-server weights `(stable, candidate)` that give the candidate's `candidate` servers
/// together `weight`% of the requests beside `stable` servers: `100 − w` and `w` with one
/// server each. Within HAProxy's 0–256; an error when no pair reads back as `weight`.
pub fn weights(stable: usize, candidate: usize, weight: u32) -> Result<(u32, u32), String> {
    match weight {
        0 => return Ok((100, 0)),
        100.. => return Ok((0, 100)),
        _ => {}
    }
    let (s, c) = (
        u32::try_from(stable.max(1)).unwrap_or(u32::MAX),
        u32::try_from(candidate.max(1)).unwrap_or(u32::MAX),
    );
    let reads_back = |a: u32, b: u32| {
        share(u64::from(a) * u64::from(s), u64::from(b) * u64::from(c)) == Some(weight)
    };
    let (a, b) = ((100 - weight).saturating_mul(c), weight.saturating_mul(s));
    let g = gcd(a, b).max(1);
    for (a, b) in [(a, b), (a / g, b / g)] {
        if a.max(b) <= MAX_WEIGHT {
            return Ok((a, b));
        }
    }
    // The nearest pair within 1–256 that still reads back as `weight`.
    let wanted = f64::from(weight) / 100.0;
    let mut best: Option<(f64, u32, u32)> = None;
    for b in 1..=MAX_WEIGHT {
        let ideal = f64::from(b) * f64::from(c) * (1.0 - wanted) / (wanted * f64::from(s));
        for a in [ideal.floor(), ideal.ceil()] {
            if !(1.0..=f64::from(MAX_WEIGHT)).contains(&a) {
                continue;
            }
            let a = a as u32;
            let got = f64::from(b * c) / f64::from(a * s + b * c);
            let err = (got - wanted).abs();
            if reads_back(a, b) && best.is_none_or(|(e, _, _)| err < e) {
                best = Some((err, a, b));
            }
        }
    }
    best.map(|(_, a, b)| (a, b)).ok_or_else(|| {
        format!(
            "weight {weight}% cannot be served with {stable} stable and {candidate} candidate \
             servers: HAProxy weighs each server 1 to 256 (scale the candidate to more servers, \
             or choose another weight)"
        )
    })
}

/// The structure of a file: its directives without comments, the digest line, and each
/// server's weight value and `disabled` flag (runtime state, set through the admin socket).
fn structure(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with("set-var proc.manent_") {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"server") && words.get(3) == Some(&"weight") {
            let flags = match &words[5.min(words.len())..] {
                [] | ["disabled"] => "",
                _ => line,
            };
            let _ = writeln!(
                out,
                "{} {} {} weight W {flags}",
                words[0], words[1], words[2]
            );
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The digest of a file's structure.
pub fn digest(text: &str) -> String {
    format!("{:x}", Sha256::digest(structure(text).as_bytes()))
}

/// The digest a file hands HAProxy (its `set-var proc.manent_NAME str(…)` line).
pub fn stated_digest<'a>(text: &'a str, names: &Names) -> Option<&'a str> {
    let prefix = format!("set-var {} str(", names.var());
    text.lines()
        .find_map(|l| l.trim().strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.strip_suffix(')'))
}

/// The servers, their weights and the tester map for `routing`.
fn servers(routing: &Routing) -> Result<(Vec<Server>, Entries, usize), String> {
    let (stable, candidate) = (&routing.stable, &routing.candidate);
    check_slot(&stable.slot).map_err(|e| e.to_string())?;
    if stable.addresses.is_empty() {
        return Err(format!(
            "the stable slot `{}` has no addresses: give each target its address in it (label \
             `{}`)",
            stable.slot, stable.slot
        ));
    }
    let has_candidate = !candidate.slot.is_empty();
    if has_candidate {
        check_slot(&candidate.slot).map_err(|e| e.to_string())?;
        if candidate.slot == stable.slot {
            return Err(format!(
                "stable and candidate are both slot `{}`: a canary needs the two",
                stable.slot
            ));
        }
        if candidate.addresses.is_empty() && !routing.retired {
            return Err(format!(
                "the candidate slot `{}` has no addresses: give each target its address in it \
                 (label `{}`)",
                candidate.slot, candidate.slot
            ));
        }
    }
    let live = has_candidate && !routing.retired;
    let up = if live {
        enabled(candidate.addresses.len(), routing.scale)
    } else {
        0
    };
    let weight = if live { routing.weight.min(100) } else { 0 };
    let (a, b) = weights(stable.addresses.len(), up, weight)?;
    let mut all = Vec::new();
    for (pool, is_stable) in [(stable, true), (candidate, false)] {
        if pool.slot.is_empty() {
            continue;
        }
        let slot = if pool.slot == "blue" { "blue" } else { "green" };
        for (i, address) in pool.addresses.iter().enumerate() {
            check_address(address)?;
            let usable = is_stable || i < up;
            all.push(Server {
                name: format!("{slot}{}", i + 1),
                slot,
                address: address.clone(),
                weight: match (is_stable, usable) {
                    (true, _) => a,
                    (false, true) => b,
                    (false, false) => 0,
                },
                usable,
            });
        }
    }
    // Blue before green whatever the roles: promote and revert keep the structure.
    all.sort_by(|x, y| (x.slot, x.name.len(), &x.name).cmp(&(y.slot, y.name.len(), &y.name)));
    let keys = stable.addresses.len().max(candidate.addresses.len());
    let targets: Vec<&Server> = all
        .iter()
        .filter(|s| s.usable && s.slot == candidate.slot)
        .collect();
    let testers = if live && routing.testers && !targets.is_empty() {
        (0..keys)
            .map(|k| (k.to_string(), targets[k % targets.len()].name.clone()))
            .collect()
    } else {
        Vec::new()
    };
    Ok((all, testers, keys))
}

/// The file and the tester map for `routing`.
pub fn render(routing: &Routing, names: &Names) -> Result<Rendered, String> {
    let (servers, testers, keys) = servers(routing)?;
    let b = &names.backend;
    let mut body = format!(
        "backend {b}\n    mode http\n    balance roundrobin\n    \
         acl manent_tester req.hdr({}) -m str 1\n    \
         acl manent_tester req.cook({}) -m str 1\n    \
         use-server %[rand({keys}),map_int({})] if manent_tester\n",
        names.header, names.cookie, names.map
    );
    // The release in each slot, for the log: a line names what this configuration routed
    // to, so an old worker's last requests after a reload are not the new release's. A new
    // release in a slot is a change of structure (a reload); weights stay run-time changes.
    let mut releases: Vec<(&str, &str)> = [&routing.stable, &routing.candidate]
        .iter()
        .filter(|p| !p.slot.is_empty() && !p.version.is_empty())
        .map(|p| (p.slot.as_str(), p.version.as_str()))
        .collect();
    releases.sort_unstable();
    for (slot, version) in releases {
        check_slot(slot).map_err(|e| e.to_string())?;
        manent::config::values::check_version(version)?;
        let _ = writeln!(
            body,
            "    http-request set-var(txn.manent_{slot}) str({version})"
        );
    }
    for s in &servers {
        let _ = writeln!(
            body,
            "    server {} {} weight {}{}",
            s.name,
            haproxy_address(&s.address),
            s.weight,
            if s.usable { "" } else { " disabled" }
        );
    }
    let text = |digest: &str| {
        format!(
            "# Rendered by manent's haproxy plugin from manent's records: edits are overwritten, \
             and manent reports them as drift.\n\
             # The operator's frontend sends requests to backend {b}; weights, maintenance and \
             the tester map ({}) are also set at run time.\n\
             # Canary analysis with latency: in that frontend, log-format '{}' and the plugin's \
             access_log: naming the file those lines reach.\n\
             global\n    set-var {} str({digest})\n\n{body}",
            names.map,
            crate::log::LOG_FORMAT,
            names.var()
        )
    };
    // The digest line is not part of the structure it states.
    let digest = digest(&text(""));
    let text = text(&digest);
    let map_text = testers.iter().fold(String::new(), |mut m, (k, v)| {
        let _ = writeln!(m, "{k} {v}");
        m
    });
    Ok(Rendered {
        text,
        map_text,
        digest,
        servers,
        testers,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::fixture::routing;

    pub(crate) fn names() -> Names {
        Names {
            backend: "web".into(),
            header: "X-Canary".into(),
            cookie: "canary".into(),
            map: "/etc/haproxy/manent-web.testers.map".into(),
        }
    }

    #[test]
    fn every_weight_reads_back_exactly_with_one_server_a_side() {
        for w in 0..=100 {
            let (a, b) = weights(1, 1, w).unwrap();
            assert_eq!((a, b), (100 - w, w));
            assert_eq!(share(u64::from(a), u64::from(b)), Some(w));
        }
    }

    #[test]
    fn the_candidate_gets_the_weight_asked_whatever_the_servers_and_the_scale() {
        for s in 1..=8 {
            for c in 1..=8 {
                for w in 0..=100 {
                    match weights(s, c, w) {
                        Ok((a, b)) => {
                            assert!(a <= MAX_WEIGHT && b <= MAX_WEIGHT, "{s}/{c} at {w}");
                            let got = share(u64::from(a) * s as u64, u64::from(b) * c as u64);
                            assert_eq!(got, Some(w), "{s} stable, {c} candidate at {w}: {a}/{b}");
                        }
                        // Only beyond what 256:1 per server reaches.
                        Err(e) => {
                            let (s, c) = (s as f64, c as f64);
                            let most = 100.0 * 256.0 * c / (s + 256.0 * c);
                            let least = 100.0 * c / (256.0 * s + c);
                            let w = f64::from(w);
                            assert!(w > most - 0.5 || w < least + 0.5, "{s}/{c} at {w}: {e}");
                            assert!(e.contains("1 to 256"), "{e}");
                        }
                    }
                }
            }
        }
        assert_eq!(weights(3, 3, 10).unwrap(), (9, 1));
        assert_eq!(weights(2, 2, 25).unwrap(), (150, 50));
    }

    #[test]
    fn a_canary_renders_both_slots_and_the_runtime_state_that_goes_with_them() {
        let r = Routing {
            testers: true,
            ..routing(2, 10, 50)
        };
        let out = render(&r, &names()).unwrap();
        let lines: Vec<&str> = out.text.lines().map(str::trim).collect();
        for want in [
            "backend web",
            "acl manent_tester req.hdr(X-Canary) -m str 1",
            "acl manent_tester req.cook(canary) -m str 1",
            "use-server %[rand(2),map_int(/etc/haproxy/manent-web.testers.map)] if manent_tester",
            "server blue1 127.0.0.1:18081 weight 90",
            "server blue2 127.0.0.1:18083 weight 90",
            "server green1 127.0.0.1:18082 weight 20",
            "server green2 127.0.0.1:18084 weight 0 disabled",
        ] {
            assert!(lines.contains(&want), "{want:?} in\n{}", out.text);
        }
        assert_eq!(out.map_text, "0 green1\n1 green1\n");
        assert_eq!(
            stated_digest(&out.text, &names()),
            Some(out.digest.as_str())
        );
        // Testers off, or the candidate retired: the map is empty.
        let off = render(&routing(2, 10, 100), &names()).unwrap();
        assert_eq!(off.map_text, "");
        let retired = render(
            &Routing {
                retired: true,
                ..r.clone()
            },
            &names(),
        )
        .unwrap();
        assert_eq!(retired.map_text, "");
        assert!(
            retired
                .servers
                .iter()
                .filter(|s| s.slot == "green")
                .all(|s| !s.usable && s.weight == 0),
            "{retired:?}"
        );
        assert!(
            retired
                .servers
                .iter()
                .filter(|s| s.slot == "blue")
                .all(|s| s.usable && s.weight == 100)
        );
    }

    #[test]
    fn promote_revert_weights_and_testers_keep_the_structure() {
        let base = render(&routing(2, 0, 100), &names()).unwrap();
        let promoted = manent::plugin::slots::promoted(&routing(2, 50, 100));
        for r in [
            routing(2, 50, 100),
            routing(2, 100, 50),
            Routing {
                testers: true,
                ..routing(2, 5, 100)
            },
            manent::plugin::slots::reverted(&routing(2, 50, 100)),
            promoted,
        ] {
            let out = render(&r, &names()).unwrap();
            assert_eq!(out.digest, base.digest, "{r:?}\n{}", out.text);
            assert_eq!(digest(&out.text), out.digest);
        }
        // A new release in a slot (its lines in the log name it), other addresses, or a
        // server more, are another structure.
        let mut next = routing(2, 0, 100);
        next.candidate.version = "3.0".into();
        let out = render(&next, &names()).unwrap();
        assert_ne!(out.digest, base.digest);
        assert!(
            out.text
                .contains("http-request set-var(txn.manent_green) str(3.0)"),
            "{}",
            out.text
        );
        let mut moved = routing(2, 0, 100);
        moved.candidate.addresses[1] = "127.0.0.1:9999".into();
        assert_ne!(render(&moved, &names()).unwrap().digest, base.digest);
        assert_ne!(
            render(&routing(3, 0, 100), &names()).unwrap().digest,
            base.digest
        );
    }

    #[test]
    fn a_hand_edit_of_the_structure_no_longer_matches_its_digest() {
        let out = render(&routing(1, 20, 100), &names()).unwrap();
        // A comment, a weight or a `disabled` edited: runtime state, read from HAProxy itself.
        let same = out
            .text
            .replace("# Rendered", "# Someone wrote here. Rendered")
            .replace("weight 80", "weight 7 disabled");
        assert_eq!(digest(&same), out.digest);
        for edited in [
            out.text.replace("weight 80", "weight 80 backup"),
            out.text.replace("balance roundrobin", "balance first"),
            out.text.replace("    use-server", "    #use-server"),
            out.text.replace("127.0.0.1:18082", "127.0.0.1:18099"),
        ] {
            assert_ne!(digest(&edited), out.digest, "{edited}");
        }
    }

    #[test]
    fn server_names_say_their_slot_and_nothing_else_does() {
        assert_eq!(slot_of("blue1"), Some(("blue", 1)));
        assert_eq!(slot_of("green12"), Some(("green", 12)));
        for other in [
            "blue", "blue0", "blue01", "green-1", "web-1", "bluex", "red1",
        ] {
            assert_eq!(slot_of(other), None, "{other}");
        }
    }

    #[test]
    fn unix_sockets_are_written_as_haproxy_reads_them() {
        let mut r = routing(1, 0, 100);
        r.stable.addresses = vec!["unix:/run/app-blue.sock".into()];
        let out = render(&r, &names()).unwrap();
        assert!(
            out.text
                .contains("server blue1 unix@/run/app-blue.sock weight 100"),
            "{}",
            out.text
        );
        r.stable.addresses = vec!["127.0.0.1:80\n    server evil 127.0.0.9:80".into()];
        assert!(render(&r, &names()).is_err());
    }
}
