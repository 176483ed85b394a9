//! A change at run time: the admin socket commands that take HAProxy from what it serves to
//! what manent wants, in the one order that never sends a burst of requests to one side —
//! servers that come back leave maintenance first, then every weight that rises, then the
//! tester map, then every weight that falls, and last the servers that leave every pool go
//! into maintenance. (Lowering one side before raising the other sent every request to the
//! candidate for hundreds of requests on HAProxy 2.6; raising first did not.)

use crate::state::Served;

/// One server as wanted: its name, weight, and whether it takes requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Want {
    pub name: String,
    pub weight: u32,
    pub usable: bool,
}

/// What HAProxy serves, as wanted again (to put it back after a change that failed midway).
pub fn as_served(servers: &[Served]) -> Vec<Want> {
    servers
        .iter()
        .map(|s| Want {
            name: s.name.clone(),
            weight: s.uweight,
            usable: s.usable() && !s.drained(),
        })
        .collect()
}

/// The commands, in order, from `now` (servers and tester map) to `want`.
pub fn plan(
    backend: &str,
    map: &str,
    now: (&[Served], &[(String, String)]),
    want: (&[Want], &[(String, String)]),
) -> Vec<String> {
    let (servers, map_now) = now;
    let (wanted, map_want) = want;
    let pairs: Vec<(&Want, Option<&Served>)> = wanted
        .iter()
        .map(|w| (w, servers.iter().find(|s| s.name == w.name)))
        .collect();
    let set = |w: &Want, what: String| format!("set server {backend}/{} {what}", w.name);
    let mut out = Vec::new();
    for (w, s) in &pairs {
        let drained = s.is_some_and(Served::drained);
        if w.usable && (s.is_none_or(|s| !s.usable()) || drained) {
            out.push(set(w, "state ready".into()));
        }
    }
    for (w, s) in &pairs {
        if s.is_none_or(|s| w.weight > s.uweight) {
            out.push(set(w, format!("weight {}", w.weight)));
        }
    }
    for (key, to) in map_want {
        match map_now.iter().find(|(k, _)| k == key) {
            Some((_, v)) if v == to => {}
            Some(_) => out.push(format!("set map {map} {key} {to}")),
            None => out.push(format!("add map {map} {key} {to}")),
        }
    }
    for (key, _) in map_now {
        if !map_want.iter().any(|(k, _)| k == key) {
            out.push(format!("del map {map} {key}"));
        }
    }
    for (w, s) in &pairs {
        if s.is_some_and(|s| w.weight < s.uweight) {
            out.push(set(w, format!("weight {}", w.weight)));
        }
    }
    for (w, s) in &pairs {
        if !w.usable && s.is_none_or(Served::usable) {
            out.push(set(w, "state maint".into()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(name: &str, uweight: u32, usable: bool) -> Served {
        Served {
            name: name.into(),
            addr: "127.0.0.1".into(),
            port: 1,
            fqdn: "-".into(),
            op_state: if usable { 2 } else { 0 },
            admin_state: if usable { 0 } else { 1 },
            uweight,
        }
    }

    fn want(name: &str, weight: u32, usable: bool) -> Want {
        Want {
            name: name.into(),
            weight,
            usable,
        }
    }

    const MAP: &str = "/m.map";

    #[test]
    fn a_weight_change_raises_first_then_lowers() {
        let now = [served("blue1", 90, true), served("green1", 10, true)];
        let cmds = plan(
            "web",
            MAP,
            (&now, &[]),
            (&[want("blue1", 25, true), want("green1", 75, true)], &[]),
        );
        assert_eq!(
            cmds,
            vec![
                "set server web/green1 weight 75",
                "set server web/blue1 weight 25"
            ]
        );
        let back = plan("web", MAP, (&now, &[]), (&as_served(&now), &[]));
        assert!(back.is_empty(), "{back:?}");
    }

    #[test]
    fn a_revert_drops_the_testers_then_puts_the_candidate_in_maintenance_last() {
        let now = [served("blue1", 50, true), served("green1", 50, true)];
        let map = [("0".to_owned(), "green1".to_owned())];
        let cmds = plan(
            "web",
            MAP,
            (&now, &map),
            (&[want("blue1", 100, true), want("green1", 0, false)], &[]),
        );
        assert_eq!(
            cmds,
            vec![
                "set server web/blue1 weight 100",
                "del map /m.map 0",
                "set server web/green1 weight 0",
                "set server web/green1 state maint",
            ]
        );
    }

    #[test]
    fn a_new_canary_takes_its_servers_out_of_maintenance_before_testers_reach_them() {
        let now = [served("blue1", 0, false), served("green1", 100, true)];
        let cmds = plan(
            "web",
            MAP,
            (&now, &[]),
            (
                &[want("blue1", 0, true), want("green1", 100, true)],
                &[("0".to_owned(), "blue1".to_owned())],
            ),
        );
        assert_eq!(
            cmds,
            vec!["set server web/blue1 state ready", "add map /m.map 0 blue1"]
        );
    }
}
