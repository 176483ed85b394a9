//! What HAProxy serves, from what its admin socket answers: `show servers state` (each
//! server's address, weight now and whether it takes requests), the tester map, and the
//! process variable that says which rendering it loaded — read into manent's routing, or
//! reported as foreign with why (a backend manent did not write, a file edited by hand,
//! servers that are not the targets').

use std::net::IpAddr;

use manent::plugin::slots::{enabled, other};
use manent::plugin::{Pool, Routing, RoutingState};

use crate::render::{self, Names};

/// `srv_admin_state` bits that take a server out of every pool: forced maintenance, inherited
/// maintenance, an address that did not resolve (not 0x04, which only says the configuration
/// started it in maintenance: `set server … state ready` leaves that bit and serves).
const MAINT: u32 = 0x01 | 0x02 | 0x20;
/// Bits that drain it: no load-balanced requests.
const DRAIN: u32 = 0x08 | 0x10;

/// One line of `show servers state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    pub name: String,
    /// `127.0.0.1`, `::1`, or `-` (a unix socket).
    pub addr: String,
    pub port: u16,
    /// The host name it was configured with (`-` when an address was).
    pub fqdn: String,
    pub op_state: u32,
    pub admin_state: u32,
    pub uweight: u32,
}

impl Served {
    /// It takes requests at all (not in maintenance, not stopped).
    pub fn usable(&self) -> bool {
        self.admin_state & MAINT == 0 && self.op_state != 0
    }

    /// Forced to drain (`set server … state drain`): `state ready` undoes it.
    pub fn drained(&self) -> bool {
        self.admin_state & 0x08 != 0
    }

    /// Its share of load-balanced requests: its weight, unless it takes none.
    pub fn lb_weight(&self) -> u32 {
        if self.usable() && self.admin_state & DRAIN == 0 {
            self.uweight
        } else {
            0
        }
    }

    /// Whether this server is at the address `label` (`host:port`, `[v6]:port`,
    /// `unix:/path`); `None` when HAProxy does not tell (a unix socket's path).
    pub fn is_at(&self, label: &str) -> Option<bool> {
        if label.starts_with("unix:") {
            return if self.addr == "-" && self.port == 0 {
                None
            } else {
                Some(false)
            };
        }
        let (host, port) = label.rsplit_once(':')?;
        if port.parse::<u16>().ok() != Some(self.port) {
            return Some(false);
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        Some(match host.parse::<IpAddr>() {
            Ok(ip) => self.addr.parse::<IpAddr>().ok() == Some(ip),
            Err(_) => self.fqdn.eq_ignore_ascii_case(host),
        })
    }
}

/// Why a backend's servers could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unread {
    /// HAProxy runs no backend of that name.
    NoBackend,
    /// It answered something else.
    Garbled(String),
}

/// Parses the answer to `show servers state BACKEND` (format 1) within a batch's answer:
/// HAProxy ends some outputs with an empty line and others not, so each part of a batch is
/// found by its own shape, never by position.
pub fn parse_servers(text: &str) -> Result<Vec<Served>, Unread> {
    let lines: Vec<&str> = text.lines().collect();
    let Some(start) = lines
        .windows(2)
        .position(|w| w[0].trim() == "1" && w[1].starts_with("# be_id"))
    else {
        return Err(if text.contains("Can't find backend") {
            Unread::NoBackend
        } else {
            Unread::Garbled(
                lines
                    .iter()
                    .find(|l| !l.trim().is_empty() && !l.contains(": "))
                    .map_or_else(String::new, |l| first_line(l)),
            )
        });
    };
    lines[start + 2..]
        .iter()
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let num = |i: usize| f.get(i).and_then(|v| v.parse::<u32>().ok());
            let parsed = (|| {
                Some(Served {
                    name: (*f.get(3)?).to_owned(),
                    addr: (*f.get(4)?).to_owned(),
                    op_state: num(5)?,
                    admin_state: num(6)?,
                    uweight: num(7)?,
                    fqdn: (*f.get(17)?).to_owned(),
                    port: f.get(18)?.parse().ok()?,
                })
            })();
            parsed.ok_or_else(|| Unread::Garbled(first_line(l)))
        })
        .collect()
}

fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(120)
        .collect()
}

/// Parses the answer to `show map FILE` within a batch's answer: its entries (key, value),
/// or `None` when HAProxy has no such map.
pub fn parse_map(text: &str) -> Option<Vec<(String, String)>> {
    if text.contains("Unknown map identifier") {
        return None;
    }
    Some(
        text.lines()
            .filter_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                match w.as_slice() {
                    [r, key, value] if r.starts_with("0x") => {
                        Some(((*key).to_owned(), (*value).to_owned()))
                    }
                    _ => None,
                }
            })
            .collect(),
    )
}

/// Parses the answer to `get var NAME` within a batch's answer: its string value, if set.
pub fn parse_var(text: &str, name: &str) -> Option<String> {
    let prefix = format!("{name}: type=str value=<");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|v| v.strip_suffix('>'))
        .map(str::to_owned)
}

/// What HAProxy answered about the backend, and the file on disk.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    pub servers: &'a [Served],
    /// The tester map's entries (`None`: HAProxy has no such map).
    pub map: Option<&'a [(String, String)]>,
    /// The rendering's digest HAProxy loaded (`None`: it loaded none of manent's).
    pub var: Option<&'a str>,
    /// The file, as it is on disk.
    pub disk: Option<&'a str>,
}

/// Why HAProxy's backend is not manent's unedited rendering (`None`: it is).
pub fn not_ours(
    a: &Answer<'_>,
    names: &Names,
    config: &str,
    slots: &[(&str, Vec<String>)],
) -> Option<String> {
    let b = &names.backend;
    let Some(var) = a.var else {
        return Some(format!(
            "backend {b} was not written by manent: HAProxy runs no rendering of {config} (it \
             answers no {})",
            names.var()
        ));
    };
    let disk = a.disk.unwrap_or("");
    if render::stated_digest(disk, names) != Some(var) || render::digest(disk) != var {
        return Some(format!(
            "{config} is not what HAProxy loaded, or was edited by hand (its structure does not \
             match the digest manent wrote)"
        ));
    }
    for s in a.servers {
        let Some((slot, i)) = render::slot_of(&s.name) else {
            return Some(format!(
                "backend {b} has a server manent did not write ({})",
                s.name
            ));
        };
        let label = slots
            .iter()
            .find(|(x, _)| *x == slot)
            .and_then(|(_, l)| l.get(i - 1));
        match label {
            Some(l) if s.is_at(l) != Some(false) => {}
            Some(l) => {
                return Some(format!(
                    "server {b}/{} is at {}:{}, not at the target's {slot} address {l}",
                    s.name, s.addr, s.port
                ));
            }
            None => {
                return Some(format!(
                    "server {b}/{} is not one of the targets' (there are {} in the {slot} slot)",
                    s.name,
                    slots
                        .iter()
                        .find(|(x, _)| *x == slot)
                        .map_or(0, |(_, l)| l.len())
                ));
            }
        }
    }
    if a.map.is_none() {
        return Some(format!("HAProxy has no tester map {}", names.map));
    }
    None
}

/// One slot as served: its servers that take requests (their labels) and their weights.
#[derive(Debug, Default)]
struct Side {
    addresses: Vec<String>,
    servers: usize,
    sum: u64,
}

/// The routing HAProxy serves: by server name in manent's rendering, else by the servers'
/// addresses. `recorded` is manent's routing (its stable slot, when both take requests; the
/// versions, which HAProxy does not know).
pub fn routing(
    a: &Answer<'_>,
    names: &Names,
    config: &str,
    slots: &[(&str, Vec<String>)],
    recorded: Option<&Routing>,
) -> RoutingState {
    let foreign = not_ours(a, names, config, slots);
    let ours = foreign.is_none();
    let mut sides: Vec<(&str, Side)> = slots.iter().map(|(s, _)| (*s, Side::default())).collect();
    let mut total = 0u64;
    for s in a.servers {
        total += u64::from(s.lb_weight());
        let found = if ours {
            render::slot_of(&s.name).and_then(|(slot, i)| {
                let l = slots.iter().find(|(x, _)| *x == slot)?.1.get(i - 1)?;
                Some((slot, l.clone()))
            })
        } else {
            slots.iter().find_map(|(slot, labels)| {
                let l = labels.iter().find(|l| s.is_at(l) == Some(true))?;
                Some((*slot, l.clone()))
            })
        };
        let Some((slot, label)) = found else { continue };
        let Some((_, side)) = sides.iter_mut().find(|(x, _)| *x == slot) else {
            continue;
        };
        side.servers += 1;
        if s.usable() {
            side.addresses.push(label);
            side.sum += u64::from(s.lb_weight());
        }
    }
    let cannot = |why: String| RoutingState {
        routing: None,
        foreign: Some(why),
    };
    let b = &names.backend;
    let live: Vec<&str> = sides
        .iter()
        .filter(|(_, s)| !s.addresses.is_empty())
        .map(|(x, _)| *x)
        .collect();
    if live.is_empty() || total == 0 {
        let mut why = if a.servers.iter().any(|s| s.lb_weight() > 0) {
            format!(
                "no server of backend {b} is at one of the targets' addresses (it has {})",
                a.servers
                    .iter()
                    .map(|s| format!("{} {}:{}", s.name, s.addr, s.port))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            format!(
                "backend {b} sends requests nowhere: every server is in maintenance or at weight 0"
            )
        };
        if let Some(f) = foreign {
            why = format!("{f}; {why}");
        }
        return cannot(why);
    }
    let share_of = |slot: &str| {
        sides
            .iter()
            .find(|(x, _)| *x == slot)
            .map_or(0, |(_, s)| s.sum)
    };
    let stable = match live.as_slice() {
        [one] => (*one).to_owned(),
        _ => match recorded.map(|r| r.stable.slot.as_str()) {
            Some(r) if live.contains(&r) => r.to_owned(),
            _ if share_of("blue") > share_of("green") => "blue".into(),
            _ if share_of("green") > share_of("blue") => "green".into(),
            _ => {
                return cannot(format!(
                    "{}cannot tell which slot serves production: blue and green take the same \
                     share of backend {b}",
                    foreign.map(|f| format!("{f}; ")).unwrap_or_default()
                ));
            }
        },
    };
    let candidate = other(&stable);
    let side = |slot: &str| sides.iter().find(|(x, _)| *x == slot).map(|(_, s)| s);
    let cand = side(candidate);
    let retired = cand.is_none_or(|s| s.addresses.is_empty());
    let weight = render::share(total - share_of(candidate), share_of(candidate)).unwrap_or(0);
    let version = |slot: &str| {
        recorded
            .filter(|_| ours)
            .and_then(|r| {
                [&r.stable, &r.candidate]
                    .into_iter()
                    .find(|p| p.slot == slot)
            })
            .map(|p| p.version.clone())
            .unwrap_or_default()
    };
    let pool = |slot: &str| Pool {
        slot: slot.to_owned(),
        version: version(slot),
        addresses: side(slot).map(|s| s.addresses.clone()).unwrap_or_default(),
    };
    let (up, all) = cand.map_or((0, 0), |s| (s.addresses.len(), s.servers));
    let scale = match recorded.map(|r| r.scale) {
        _ if retired || all == 0 => recorded.map_or(100, |r| r.scale),
        Some(r) if enabled(all, r) == up => r,
        _ => u32::try_from((up * 100).div_ceil(all)).unwrap_or(100),
    };
    let mut foreign = foreign;
    let testers = if ours {
        match testers(a.map.unwrap_or(&[]), a.servers, candidate, retired) {
            Ok(t) => t,
            Err(why) => {
                foreign = Some(format!("the tester map {}: {why}", names.map));
                false
            }
        }
    } else {
        false
    };
    RoutingState {
        routing: Some(Routing {
            stable: pool(&stable),
            candidate: pool(candidate),
            weight: if retired { 0 } else { weight },
            testers,
            scale,
            retired,
        }),
        foreign,
    }
}

/// Whether the tester map sends every tester to a candidate server that takes requests (an
/// empty map: no); an error for a map that sends some elsewhere.
fn testers(
    map: &[(String, String)],
    servers: &[Served],
    candidate: &str,
    retired: bool,
) -> Result<bool, String> {
    if map.is_empty() {
        return Ok(false);
    }
    let keys = servers
        .iter()
        .filter_map(|s| render::slot_of(&s.name))
        .map(|(_, i)| i)
        .max()
        .unwrap_or(0);
    for k in 0..keys {
        let Some((_, to)) = map.iter().find(|(key, _)| *key == k.to_string()) else {
            return Err(format!("key {k} is missing: some testers reach the split"));
        };
        let ok = !retired
            && servers.iter().any(|s| {
                s.name == *to
                    && s.usable()
                    && render::slot_of(&s.name).is_some_and(|(slot, _)| slot == candidate)
            });
        if !ok {
            return Err(format!(
                "key {k} sends testers to {to}, which is not a candidate server that takes \
                 requests"
            ));
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::routing as canary;
    use crate::render::tests::names;
    use crate::render::{Rendered, render};

    const CONFIG: &str = "/etc/haproxy/manent-web.cfg";

    fn slots(r: &Routing) -> Vec<(&'static str, Vec<String>)> {
        vec![
            ("blue", r.stable.addresses.clone()),
            ("green", r.candidate.addresses.clone()),
        ]
    }

    /// What HAProxy answers once it loaded `out` and the runtime state was set.
    fn served(out: &Rendered) -> Vec<Served> {
        out.servers
            .iter()
            .map(|s| {
                let (addr, port) = s.address.rsplit_once(':').unwrap();
                Served {
                    name: s.name.clone(),
                    addr: addr.into(),
                    port: port.parse().unwrap(),
                    fqdn: "-".into(),
                    op_state: if s.usable { 2 } else { 0 },
                    admin_state: if s.usable { 0 } else { 5 },
                    uweight: s.weight,
                }
            })
            .collect()
    }

    fn read(out: &Rendered, servers: &[Served], r: &Routing) -> RoutingState {
        let answer = Answer {
            servers,
            map: Some(&out.testers),
            var: Some(&out.digest),
            disk: Some(&out.text),
        };
        routing(&answer, &names(), CONFIG, &slots(r), Some(r))
    }

    #[test]
    fn parses_what_haproxy_answers() {
        let text = "1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port srv_check_addr srv_agent_addr srv_agent_port\n\
                    3 app 1 blue1 127.0.0.1 2 0 100 100 2 1 0 2 0 0 0 0 - 28191 - 0 0 - - 0\n\
                    3 app 2 green1 127.0.0.1 0 5 0 0 2 1 0 0 8 0 0 0 - 28192 - 0 0 - - 0\n\
                    3 app2 3 h 127.0.0.1 2 4 5 5 1 1 0 0 8 0 0 0 localhost 28194 - 0 0 - - 0\n\
                    3 app2 1 u1 - 2 0 3 3 1 1 0 2 0 0 0 0 - 0 - 0 0 - - 0\n";
        let s = parse_servers(text).unwrap();
        assert_eq!(s.len(), 4);
        assert_eq!(
            (s[0].name.as_str(), s[0].port, s[0].uweight),
            ("blue1", 28191, 100)
        );
        assert!(s[0].usable() && !s[1].usable());
        assert!(
            s[2].usable(),
            "readied at run time after `disabled`: 0x04 alone serves"
        );
        assert_eq!(s[2].is_at("localhost:28194"), Some(true));
        assert_eq!(s[2].is_at("127.0.0.1:28194"), Some(true));
        assert_eq!(s[0].is_at("127.0.0.1:28192"), Some(false));
        assert_eq!(s[3].is_at("unix:/run/a.sock"), None);
        assert_eq!(s[0].is_at("unix:/run/a.sock"), Some(false));
        assert_eq!(
            parse_servers("Can't find backend.\n"),
            Err(Unread::NoBackend)
        );
        assert!(matches!(
            parse_servers("Permission denied\n"),
            Err(Unread::Garbled(_))
        ));
        let v6 = Served {
            addr: "::1".into(),
            port: 8080,
            ..s[0].clone()
        };
        assert_eq!(v6.is_at("[::1]:8080"), Some(true));
        assert_eq!(v6.is_at("[0:0::1]:8080"), Some(true));
        assert_eq!(
            parse_map("0x7f24e4046b50 0 green1\n0x7f24e4046c80 1 green1\n"),
            Some(vec![
                ("0".into(), "green1".into()),
                ("1".into(), "green1".into())
            ])
        );
        assert_eq!(parse_map(""), Some(vec![]));
        assert_eq!(
            parse_map("Unknown map identifier. Please use #<id> or <file>.\n"),
            None
        );
        assert_eq!(
            parse_var(
                "proc.manent_app: type=str value=<abc123>\n",
                "proc.manent_app"
            )
            .as_deref(),
            Some("abc123")
        );
        assert_eq!(parse_var("Variable not found.\n", "proc.manent_app"), None);
        // A batch: `get var` ends without an empty line, `show map` right after it.
        let batch = "Name: HAProxy\nPid: 559\nTainted: 0\n\n1\n# be_id be_name srv_id\n\
                     3 web 1 blue1 127.0.0.1 2 0 100 100 10 1 0 2 0 0 0 0 - 44359 - 0 0 - - 0\n\n\
                     proc.manent_web: type=str value=<c8e0>\n0x55e203fb5f40 0 green1\n\n";
        assert_eq!(parse_var(batch, "proc.manent_web").as_deref(), Some("c8e0"));
        assert_eq!(parse_map(batch), Some(vec![("0".into(), "green1".into())]));
        assert_eq!(parse_servers(batch).unwrap().len(), 1);
        let empty =
            "Pid: 5\n\nCan't find backend.\n\nVariable not found.\n\nUnknown map identifier.\n\n";
        assert_eq!(parse_servers(empty), Err(Unread::NoBackend));
        assert_eq!(parse_map(empty), None);
    }

    #[test]
    fn manent_s_rendering_reads_back_as_the_routing_it_was_rendered_from() {
        for (n, weight, scale, testers) in [
            (1, 0, 100, false),
            (1, 10, 100, true),
            (2, 25, 100, true),
            (2, 100, 50, true),
            (3, 33, 34, false),
        ] {
            let r = Routing {
                testers,
                scale,
                ..canary(n, weight, 100)
            };
            let out = render(&r, &names()).unwrap();
            let got = read(&out, &served(&out), &r);
            assert_eq!(got.foreign, None, "{r:?}");
            let got = got.routing.unwrap();
            assert_eq!(
                (got.weight, got.testers, got.retired, got.scale),
                (weight, testers, false, scale),
                "{r:?}"
            );
            assert_eq!(got.stable.slot, "blue");
            assert_eq!(got.stable.addresses, r.stable.addresses);
            assert_eq!(
                r.differences(&RoutingState {
                    routing: Some(got),
                    foreign: None
                }),
                Vec::<String>::new()
            );
        }
        // Promoted: green stable, blue out of every pool — whatever manent's record says.
        let p = manent::plugin::slots::promoted(&canary(2, 60, 100));
        let out = render(&p, &names()).unwrap();
        let got = read(&out, &served(&out), &canary(2, 60, 100))
            .routing
            .unwrap();
        assert_eq!(
            (got.stable.slot.as_str(), got.retired, got.weight),
            ("green", true, 0)
        );
        assert!(got.candidate.addresses.is_empty());
    }

    #[test]
    fn a_hand_edit_through_the_socket_is_what_is_reported() {
        let r = Routing {
            testers: true,
            ..canary(1, 20, 100)
        };
        let out = render(&r, &names()).unwrap();
        let mut s = served(&out);
        // set server web/green1 weight 80; set server web/blue1 weight 20
        s[0].uweight = 20;
        s[1].uweight = 80;
        let got = read(&out, &s, &r);
        assert_eq!(got.foreign, None);
        assert_eq!(got.routing.as_ref().unwrap().weight, 80);
        assert_eq!(
            r.differences(&got),
            vec!["the candidate gets 80% (manent set 20%)".to_owned()]
        );
        // The candidate put in maintenance by hand: out of every pool, testers too.
        let mut s = served(&out);
        s[1].admin_state = 1;
        s[1].op_state = 0;
        let got = read(&out, &s, &r);
        assert!(
            got.foreign
                .as_deref()
                .unwrap()
                .contains("key 0 sends testers to green1"),
            "{got:?}"
        );
        assert!(got.routing.unwrap().retired);
        // Every server in maintenance: nothing is served, and that is said.
        let mut s = served(&out);
        s[0].admin_state = 1;
        s[1].admin_state = 1;
        let got = read(&out, &s, &r);
        assert_eq!(got.routing, None);
        assert!(got.foreign.unwrap().contains("sends requests nowhere"));
    }

    #[test]
    fn a_backend_manent_did_not_write_is_read_by_its_addresses() {
        let r = canary(2, 0, 100);
        // Hand-written, production on green: no digest variable, its own server names.
        let servers: Vec<Served> = r
            .candidate
            .addresses
            .iter()
            .enumerate()
            .map(|(i, a)| Served {
                name: format!("web-{}", i + 1),
                addr: "127.0.0.1".into(),
                port: a.rsplit_once(':').unwrap().1.parse().unwrap(),
                fqdn: "-".into(),
                op_state: 2,
                admin_state: 0,
                uweight: 1,
            })
            .collect();
        let answer = Answer {
            servers: &servers,
            map: None,
            var: None,
            disk: Some("backend web\n    server web-1 127.0.0.1:18082\n"),
        };
        let got = routing(&answer, &names(), CONFIG, &slots(&r), None);
        assert!(
            got.foreign
                .as_deref()
                .unwrap()
                .contains("not written by manent"),
            "{got:?}"
        );
        let read = got.routing.unwrap();
        assert_eq!((read.stable.slot.as_str(), read.weight), ("green", 0));
        assert_eq!(read.stable.addresses, r.candidate.addresses);
        // A server that is not one of the targets' takes a share of its own.
        let mut more = servers.clone();
        more.push(Served {
            name: "other".into(),
            port: 9999,
            ..servers[0].clone()
        });
        more.push(Served {
            name: "b".into(),
            port: 18081,
            uweight: 2,
            ..servers[0].clone()
        });
        let got = routing(
            &Answer {
                servers: &more,
                ..answer
            },
            &names(),
            CONFIG,
            &slots(&r),
            Some(&r),
        );
        let read = got.routing.unwrap();
        assert_eq!((read.stable.slot.as_str(), read.weight), ("blue", 40));
        // Servers none of which is a target's: nothing is guessed.
        let got = routing(
            &Answer {
                servers: &more[2..3],
                ..answer
            },
            &names(),
            CONFIG,
            &slots(&r),
            None,
        );
        assert_eq!(got.routing, None);
        assert!(
            got.foreign
                .unwrap()
                .contains("no server of backend web is at one of the targets' addresses")
        );
    }

    #[test]
    fn manent_s_names_with_other_addresses_or_an_edited_file_are_foreign() {
        let r = canary(1, 10, 100);
        let out = render(&r, &names()).unwrap();
        let mut s = served(&out);
        s[1].port = 9999;
        let got = read(&out, &s, &r);
        assert!(
            got.foreign.as_deref().unwrap().contains("server web/green1 is at 127.0.0.1:9999, not at the target's green address 127.0.0.1:18082"),
            "{got:?}"
        );
        let edited = out.text.replace("    use-server", "    #use-server");
        let answer = Answer {
            servers: &served(&out),
            map: Some(&[]),
            var: Some(&out.digest),
            disk: Some(&edited),
        };
        let got = routing(&answer, &names(), CONFIG, &slots(&r), Some(&r));
        assert!(got.foreign.unwrap().contains("edited by hand"));
    }
}
