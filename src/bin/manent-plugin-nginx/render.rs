//! The upstream file the plugin owns: rendered from the split's state, read back from the
//! state line at its top. `weight=0` is not valid nginx, so 0% and 100% route to one slot only;
//! in between, the servers' weights make the share of requests the candidate gets the weight
//! asked, however many servers each slot enables.

use std::fmt::Write as _;

/// A blue/green slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    Blue,
    Green,
}

impl Slot {
    pub fn as_str(self) -> &'static str {
        match self {
            Slot::Blue => "blue",
            Slot::Green => "green",
        }
    }

    pub fn other(self) -> Slot {
        match self {
            Slot::Blue => Slot::Green,
            Slot::Green => Slot::Blue,
        }
    }

    pub fn parse(s: &str) -> Option<Slot> {
        match s {
            "blue" => Some(Slot::Blue),
            "green" => Some(Slot::Green),
            _ => None,
        }
    }
}

/// Everything the rendered file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// The slot serving the release in production.
    pub stable: Slot,
    /// Percentage of requests for the candidate.
    pub weight: u32,
    /// Percentage of the candidate's servers enabled.
    pub scale: u32,
    /// Testers (header or cookie) reach the candidate.
    pub testers: bool,
}

impl Default for Split {
    fn default() -> Self {
        Split {
            stable: Slot::Blue,
            weight: 0,
            scale: 100,
            testers: false,
        }
    }
}

/// One server of the application: its address in each slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub blue: String,
    pub green: String,
}

impl Server {
    pub fn at(&self, slot: Slot) -> &str {
        match slot {
            Slot::Blue => &self.blue,
            Slot::Green => &self.green,
        }
    }
}

/// How the file names things: upstream `NAME_split`, the pool variable `$NAME_pool`, and the
/// testers' header and cookie.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    pub upstream: String,
    pub header: String,
    pub cookie: String,
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

const STATE: &str = "# manent-plugin-nginx:";

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Candidate servers enabled at `scale` percent: at least one.
pub fn enabled(servers: usize, scale: u32) -> usize {
    (servers * usize::try_from(scale).unwrap_or(100))
        .div_ceil(100)
        .clamp(1, servers.max(1))
}

/// The file for `split` over `servers`.
pub fn render(split: &Split, servers: &[Server], names: &Names, version: &str) -> String {
    let stable = split.stable;
    let candidate = stable.other();
    let n = &names.upstream;
    let mut out = format!(
        "{STATE} stable={} weight={} scale={} testers={} version={version}\n\
         # Written by manent's nginx plugin; edits are overwritten. The split is in upstream \
         {n}_split, the pool to proxy_pass to in ${n}_pool.\n",
        stable.as_str(),
        split.weight,
        split.scale,
        if split.testers { "on" } else { "off" },
    );
    let up = enabled(servers.len(), split.scale);
    let list = |out: &mut String, name: &str, slot: Slot, count: usize| {
        let _ = writeln!(out, "upstream {n}_{name} {{");
        for s in servers.iter().take(count) {
            let _ = writeln!(out, "    server {};", s.at(slot));
        }
        out.push_str("}\n");
    };
    list(&mut out, "stable", stable, servers.len());
    list(&mut out, "candidate", candidate, up);
    let _ = writeln!(out, "upstream {n}_split {{");
    match split.weight {
        0 => {
            for s in servers {
                let _ = writeln!(out, "    server {};", s.at(stable));
            }
        }
        100.. => {
            for s in servers.iter().take(up) {
                let _ = writeln!(out, "    server {};", s.at(candidate));
            }
        }
        w => {
            // Shares per server so that the candidate's servers together get w%: stable
            // (100-w)·up, candidate w·N, reduced.
            let (w, nn, up64) = (
                u64::from(w),
                u64::try_from(servers.len()).unwrap_or(1),
                u64::try_from(up).unwrap_or(1),
            );
            let (a, b) = ((100 - w) * up64, w * nn);
            let g = gcd(a, b).max(1);
            for s in servers {
                let _ = writeln!(out, "    server {} weight={};", s.at(stable), a / g);
            }
            for s in servers.iter().take(up) {
                let _ = writeln!(out, "    server {} weight={};", s.at(candidate), b / g);
            }
        }
    }
    out.push_str("}\n");
    let to_candidate = if split.testers {
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
    out
}

/// The split a rendered file says it holds.
pub fn parse(text: &str) -> Option<Split> {
    let line = text.lines().next()?.strip_prefix(STATE)?;
    let mut split = Split::default();
    for field in line.split_whitespace() {
        let (k, v) = field.split_once('=')?;
        match k {
            "stable" => split.stable = Slot::parse(v)?,
            "weight" => split.weight = v.parse().ok()?,
            "scale" => split.scale = v.parse().ok()?,
            "testers" => split.testers = v == "on",
            _ => {}
        }
    }
    Some(split)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(n: usize) -> Vec<Server> {
        (0..n)
            .map(|i| Server {
                blue: format!("127.0.0.1:{}", 18081 + 2 * i),
                green: format!("127.0.0.1:{}", 18082 + 2 * i),
            })
            .collect()
    }

    fn names() -> Names {
        Names {
            upstream: "web".into(),
            header: "X-Canary".into(),
            cookie: "canary".into(),
        }
    }

    /// The candidate's share of the split upstream's weights.
    fn share(text: &str, candidate_ports: &[&str]) -> f64 {
        let split = text.split("upstream web_split {").nth(1).unwrap();
        let split = split.split('}').next().unwrap();
        let (mut c, mut all) = (0.0, 0.0);
        for l in split.lines().filter(|l| l.contains("server")) {
            let w: f64 = l
                .split("weight=")
                .nth(1)
                .map_or(1.0, |w| w.trim_end_matches(';').parse().unwrap());
            all += w;
            if candidate_ports.iter().any(|p| l.contains(p)) {
                c += w;
            }
        }
        c / all
    }

    #[test]
    fn the_candidate_gets_the_weight_asked_whatever_the_scale() {
        for (n, scale) in [(1, 100), (3, 100), (4, 50), (5, 20)] {
            let s = servers(n);
            let ports: Vec<String> = s.iter().map(|s| s.green.clone()).collect();
            let ports: Vec<&str> = ports.iter().map(String::as_str).collect();
            for weight in [1, 10, 25, 50, 99] {
                let split = Split {
                    weight,
                    scale,
                    ..Split::default()
                };
                let text = render(&split, &s, &names(), "2.0");
                let got = share(&text, &ports);
                assert!(
                    (got - f64::from(weight) / 100.0).abs() < 1e-9,
                    "{n} servers, scale {scale}, weight {weight}: {got}\n{text}"
                );
                assert_eq!(parse(&text), Some(split));
            }
        }
    }

    #[test]
    fn zero_and_a_hundred_route_to_one_slot_without_weight_zero() {
        let s = servers(2);
        let zero = render(&Split::default(), &s, &names(), "1");
        assert!(
            zero.lines()
                .filter(|l| l.trim_start().starts_with("server"))
                .all(|l| !l.contains("weight=")),
            "{zero}"
        );
        assert_eq!(share(&zero, &["18082", "18084"]), 0.0);
        let all = Split {
            weight: 100,
            ..Split::default()
        };
        let text = render(&all, &s, &names(), "1");
        assert_eq!(share(&text, &["18082", "18084"]), 1.0);
        // Testers go to the candidate by header or cookie; without them, nothing does.
        assert!(!text.contains("\"1\" web_candidate"));
        let testers = Split {
            testers: true,
            ..all
        };
        let text = render(&testers, &s, &names(), "1");
        assert!(
            text.contains(
                "map $http_x_canary $web_pool { default $web_by_cookie; \"1\" web_candidate; }"
            ),
            "{text}"
        );
        assert!(text.contains("map $cookie_canary $web_by_cookie"), "{text}");
    }
}
