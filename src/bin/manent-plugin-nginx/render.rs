//! The upstream file the plugin owns, rendered from manent's routing alone (never from what an
//! earlier file said), and read back: its body's digest, and — for a file manent did not write,
//! or one edited by hand — the split its `upstream NAME_split` block really holds.
//!
//! The file ends with a small `server` on a loopback port whose one location answers what was
//! rendered (a nonce, the body's digest and the routing): nginx answering it is proof of what
//! nginx loaded. `weight=0` is not valid nginx, so 0% and a retired candidate route to the
//! stable slot only; in between, the servers' weights make the candidate's share of requests
//! the weight asked, however many of its servers the scale enables.

use std::fmt::Write as _;

use manent::plugin::slots::{check_address, enabled};
use manent::plugin::{Pool, Routing};
use sha2::{Digest, Sha256};

/// How the file names things: upstream `NAME_split`, the pool variable `$NAME_pool`, the
/// testers' header and cookie, and where nginx answers what it loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    pub upstream: String,
    pub header: String,
    pub cookie: String,
    /// `127.0.0.1:18999`
    pub state: String,
}

impl Names {
    /// `X-Canary` → `$http_x_canary`.
    fn header_var(&self) -> String {
        format!(
            "$http_{}",
            self.header.to_ascii_lowercase().replace('-', "_")
        )
    }
}

/// The line that ends the body and starts the state server.
const STATE_MARK: &str = "# manent-state";
/// The state location's path.
pub const STATE_PATH: &str = "/manent-state";

/// A rendered file and what its state location will answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub text: String,
    /// Unique to this rendering: seen in the state location once nginx loaded it.
    pub nonce: String,
}

/// What the state location answers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Served {
    /// The rendering nginx loaded.
    pub nonce: String,
    /// sha256 of the body rendered with it.
    pub digest: String,
    /// The routing rendered.
    pub routing: Routing,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Text safe inside the state location's single-quoted JSON: anything but letters, digits and
/// `.`, `_`, `+`, `-`, `:`, `/`, `[`, `]` as a JSON `\uXXXX` escape (nginx would expand a `$`
/// and end the string at a quote).
fn safe_json(v: &serde_json::Value) -> String {
    let raw = v.to_string();
    let mut out = String::with_capacity(raw.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in raw.chars() {
        if in_string && !escaped && c != '"' && c != '\\' {
            if c.is_ascii_alphanumeric()
                || matches!(c, '.' | '_' | '+' | '-' | ':' | '/' | '[' | ']' | ' ' | ',')
            {
                out.push(c);
            } else {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            continue;
        }
        if in_string && escaped {
            escaped = false;
            out.push(c);
            continue;
        }
        match c {
            '"' => in_string = !in_string,
            '\\' if in_string => escaped = true,
            _ => {}
        }
        out.push(c);
    }
    out
}

/// The body (upstreams and maps) for `routing`: what its digest covers.
fn body(routing: &Routing, names: &Names) -> Result<String, String> {
    let stable = &routing.stable.addresses;
    let candidate = &routing.candidate.addresses;
    for a in stable.iter().chain(candidate) {
        check_address(a)?;
    }
    if stable.is_empty() {
        return Err(format!(
            "the stable slot `{}` has no addresses: give each target its address in it (label `{}`)",
            routing.stable.slot, routing.stable.slot
        ));
    }
    let live = !routing.retired && !candidate.is_empty();
    if !routing.retired && candidate.is_empty() {
        return Err(format!(
            "the candidate slot `{}` has no addresses: give each target its address in it \
             (label `{}`)",
            routing.candidate.slot, routing.candidate.slot
        ));
    }
    let n = &names.upstream;
    let mut out = String::new();
    let list = |out: &mut String, name: &str, servers: &[String]| {
        let _ = writeln!(out, "upstream {n}_{name} {{");
        for s in servers {
            let _ = writeln!(out, "    server {s};");
        }
        out.push_str("}\n");
    };
    list(&mut out, "stable", stable);
    let up = enabled(candidate.len(), routing.scale);
    if live {
        list(&mut out, "candidate", &candidate[..up]);
    }
    let _ = writeln!(out, "upstream {n}_split {{");
    match routing.weight {
        w if w == 0 || !live => {
            for s in stable {
                let _ = writeln!(out, "    server {s};");
            }
        }
        100.. => {
            for s in &candidate[..up] {
                let _ = writeln!(out, "    server {s};");
            }
        }
        w => {
            // Per server: stable (100-w)·up, candidate w·S, reduced: the candidate's servers
            // together get w% of the requests.
            let w = u64::from(w);
            let s = u64::try_from(stable.len()).unwrap_or(1);
            let c = u64::try_from(up).unwrap_or(1);
            let (a, b) = ((100 - w) * c, w * s);
            let g = gcd(a, b).max(1);
            for addr in stable {
                let _ = writeln!(out, "    server {addr} weight={};", a / g);
            }
            for addr in &candidate[..up] {
                let _ = writeln!(out, "    server {addr} weight={};", b / g);
            }
        }
    }
    out.push_str("}\n");
    let to_candidate = if live && routing.testers {
        format!("\"1\" {n}_candidate; ")
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "map $cookie_{} ${n}_by_cookie {{ default {n}_split; {to_candidate}}}",
        names.cookie
    );
    let _ = writeln!(
        out,
        "map {} ${n}_pool {{ default ${n}_by_cookie; {to_candidate}}}",
        names.header_var()
    );
    Ok(out)
}

/// sha256 of a body, over its directives only (comments, blank lines and indentation do not
/// count: editing a comment is not a change of routing).
pub fn digest(body: &str) -> String {
    let mut h = Sha256::new();
    for line in body.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        h.update(line.as_bytes());
        h.update(b"\n");
    }
    format!("{:x}", h.finalize())
}

/// The body of a file on disk: everything before the state server.
pub fn body_of(text: &str) -> &str {
    text.split_once(STATE_MARK).map_or(text, |(b, _)| b)
}

/// The file for `routing`, with a fresh nonce.
pub fn render(routing: &Routing, names: &Names) -> Result<Rendered, String> {
    // Releases go into the log format as a literal: only checked versions reach the file.
    for pool in [&routing.stable, &routing.candidate] {
        if !pool.version.is_empty() {
            manent::config::values::check_version(&pool.version)?;
        }
    }
    let body = body(routing, names)?;
    let nonce = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
    let served = Served {
        nonce: nonce.clone(),
        digest: digest(&body),
        routing: routing.clone(),
    };
    let json = safe_json(&serde_json::to_value(&served).map_err(|e| e.to_string())?);
    let n = &names.upstream;
    let text = format!(
        "# Rendered by manent's nginx plugin from manent's records: edits are overwritten, and \
         manent reports them as drift.\n\
         # Proxy to ${n}_pool (the split is upstream {n}_split). nginx answers what it loaded at \
         http://{state}{STATE_PATH}.\n\
         {body}{STATE_MARK}: nginx answers here what it loaded (do not edit).\n\
         # The access log format the plugin reads each slot's traffic from (`access_log PATH \
         {n}_canary;` in the server that proxies to ${n}_pool).\n{log_format}\n\
         server {{\n    listen {state};\n    access_log off;\n    \
         # Open after answering: the plugin checks who holds the other end.\n    \
         keepalive_timeout 10s;\n    \
         location = {STATE_PATH} {{\n        default_type application/json;\n        \
         return 200 '{json}\\n';\n    }}\n    location / {{\n        return 404;\n    }}\n}}\n",
        state = names.state,
        log_format = crate::traffic::log_format(n, routing),
    );
    Ok(Rendered { text, nonce })
}

/// One `server` line of an upstream block: its address and weight (1 when unset).
fn servers_in<'a>(text: &'a str, upstream: &str) -> Option<Vec<(&'a str, u64)>> {
    let start = text.find(&format!("upstream {upstream} {{"))?;
    let block = text[start..].split_once('{')?.1.split_once('}')?.0;
    Some(
        block
            .split(';')
            .filter_map(|d| {
                let mut words = d.split_whitespace();
                (words.next()? == "server").then_some(())?;
                let addr = words.next()?;
                let weight = words
                    .find_map(|w| w.strip_prefix("weight="))
                    .and_then(|w| w.parse().ok())
                    .unwrap_or(1);
                Some((addr, weight))
            })
            .collect(),
    )
}

/// The routing a file's directives really hold (a file manent did not write, or one edited by
/// hand), read from its `upstream NAME_split` block and its maps: which slot's addresses take
/// what share of the requests, by each target's addresses in `blue` and `green`. The stable
/// slot is `recorded` when it is one of the two in the split, else the one with the larger
/// share. `None` when the file has no split upstream, or none of its servers is a target's.
pub fn parse_foreign(
    text: &str,
    names: &Names,
    slots: &[(&str, Vec<String>)],
    recorded: Option<&str>,
) -> Option<Routing> {
    let n = &names.upstream;
    let split = servers_in(text, &format!("{n}_split"))?;
    let slot_of = |addr: &str| {
        slots
            .iter()
            .find(|(_, addrs)| addrs.iter().any(|a| a == addr))
            .map(|(s, _)| *s)
    };
    let mut shares: Vec<(&str, u64)> = Vec::new();
    let mut total = 0;
    for (addr, w) in &split {
        total += w;
        if let Some(s) = slot_of(addr) {
            match shares.iter_mut().find(|(x, _)| *x == s) {
                Some(e) => e.1 += w,
                None => shares.push((s, *w)),
            }
        }
    }
    if shares.is_empty() || total == 0 {
        return None;
    }
    let stable = recorded
        .filter(|r| shares.iter().any(|(s, _)| s == r))
        .map(str::to_owned)
        .or_else(|| {
            let max = shares.iter().map(|(_, w)| *w).max()?;
            let top: Vec<&str> = shares
                .iter()
                .filter(|(_, w)| *w == max)
                .map(|(s, _)| *s)
                .collect();
            (top.len() == 1).then(|| top[0].to_owned())
        })?;
    let other = slots
        .iter()
        .map(|(s, _)| *s)
        .find(|s| *s != stable)
        .unwrap_or_default();
    let on_other: u64 = shares
        .iter()
        .filter(|(s, _)| *s != stable)
        .map(|(_, w)| w)
        .sum();
    let weight = u32::try_from((on_other * 100 + total / 2) / total).unwrap_or(100);
    let pool = |slot: &str, upstream: &str| Pool {
        slot: slot.to_owned(),
        version: String::new(),
        addresses: servers_in(text, upstream)
            .unwrap_or_default()
            .into_iter()
            .map(|(a, _)| a.to_owned())
            .collect(),
    };
    let candidate = servers_in(text, &format!("{n}_candidate"));
    let testers = text.contains(&format!("\"1\" {n}_candidate"));
    Some(Routing {
        stable: Pool {
            addresses: split
                .iter()
                .filter(|(a, _)| slot_of(a) == Some(stable.as_str()))
                .map(|(a, _)| (*a).to_owned())
                .collect(),
            ..pool(&stable, "")
        },
        candidate: pool(other, &format!("{n}_candidate")),
        weight,
        testers,
        scale: 100,
        retired: candidate.is_none() && on_other == 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::routing;

    fn names() -> Names {
        Names {
            upstream: "web".into(),
            header: "X-Canary".into(),
            cookie: "canary".into(),
            state: "127.0.0.1:18999".into(),
        }
    }

    fn slots(r: &Routing) -> Vec<(&'static str, Vec<String>)> {
        vec![
            ("blue", r.stable.addresses.clone()),
            ("green", r.candidate.addresses.clone()),
        ]
    }

    #[test]
    fn the_candidate_gets_the_weight_asked_whatever_the_scale() {
        for (n, scale) in [(1, 100), (3, 100), (4, 50), (5, 20)] {
            for weight in [1, 10, 25, 50, 99] {
                let r = routing(n, weight, scale);
                let text = render(&r, &names()).unwrap().text;
                let read = parse_foreign(&text, &names(), &slots(&r), Some("blue")).unwrap();
                assert_eq!(read.weight, weight, "{n} servers, scale {scale}\n{text}");
                assert_eq!(read.stable.slot, "blue");
            }
        }
    }

    #[test]
    fn zero_and_retired_route_to_the_stable_slot_only_and_testers_follow_the_routing() {
        let r = routing(2, 0, 100);
        let text = render(&r, &names()).unwrap().text;
        let split = text.split("upstream web_split").nth(1).unwrap();
        let split = split.split('}').next().unwrap();
        assert!(
            !split.contains("weight=") && !split.contains("18082"),
            "{text}"
        );
        assert!(!text.contains("\"1\" web_candidate"), "{text}");
        let testers = Routing {
            testers: true,
            ..routing(2, 100, 100)
        };
        let text = render(&testers, &names()).unwrap().text;
        assert!(
            text.contains(
                "map $http_x_canary $web_pool { default $web_by_cookie; \"1\" web_candidate; }"
            ),
            "{text}"
        );
        let retired = Routing {
            retired: true,
            ..testers
        };
        let text = render(&retired, &names()).unwrap().text;
        assert!(!text.contains("upstream web_candidate"), "{text}");
        assert!(
            !body_of(&text).contains("18082"),
            "the retired slot is in no pool:\n{text}"
        );
        assert!(!text.contains("\"1\" web_candidate"), "{text}");
    }

    #[test]
    fn the_state_location_answers_what_was_rendered() {
        let r = routing(2, 25, 100);
        let rendered = render(&r, &names()).unwrap();
        let text = &rendered.text;
        let json = text.split("return 200 '").nth(1).unwrap();
        let json = json.split("\\n';").next().unwrap();
        let served: Served = serde_json::from_str(json).unwrap();
        assert_eq!(served.routing, r);
        assert_eq!(served.nonce, rendered.nonce);
        assert_eq!(served.digest, digest(body_of(text)));
        // A comment edited by hand is no change; a weight is.
        let commented = text.replacen("# Rendered", "# Someone wrote here. Rendered", 1);
        assert_eq!(digest(body_of(&commented)), served.digest);
        let edited = text.replacen("weight=1;", "weight=9;", 1);
        assert_ne!(digest(body_of(&edited)), served.digest);
        // A version nginx would expand or end a string at never reaches the file (the log
        // format carries the releases as a literal).
        let odd = Routing {
            stable: Pool {
                version: "1.0$x'y\"".into(),
                ..r.stable.clone()
            },
            ..r
        };
        let err = render(&odd, &names()).unwrap_err();
        assert!(err.contains("is refused"), "{err}");
    }

    #[test]
    fn a_hand_written_file_is_read_by_its_addresses_not_a_comment() {
        let r = routing(2, 0, 100);
        // Pools swapped by hand: production on green, no state line, no comment.
        let text = "upstream web_split {\n    server 127.0.0.1:18082;\n    server 127.0.0.1:18084;\n}\n\
                    map $http_x_canary $web_pool { default web_split; }\n";
        let read = parse_foreign(text, &names(), &slots(&r), None).unwrap();
        assert_eq!((read.stable.slot.as_str(), read.weight), ("green", 0));
        // Weights edited to send 80% to the candidate, whatever a comment says.
        let text = "# manent-plugin-nginx: stable=blue weight=20\nupstream web_split {\n    server 127.0.0.1:18081 weight=1;\n    server 127.0.0.1:18082 weight=4;\n}\n";
        let read = parse_foreign(text, &names(), &slots(&r), Some("blue")).unwrap();
        assert_eq!((read.stable.slot.as_str(), read.weight), ("blue", 80));
    }
}
