//! One run of a canary's analysis check: a shell command (exit 0 passes, 1 fails, anything
//! else is inconclusive), an HTTP GET (the expected status and, if given, a body that matches
//! a regular expression), or the candidate's real traffic as the router observed it (its 5xx
//! rate and p99 against limits, with too few requests inconclusive — never a pass). A check
//! never fails its step: what went wrong is its verdict, with the value seen and an excerpt of
//! the output, so the decision it leads to can say why.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::config::values::{Rate, percent_text};
use crate::config::{Check, HttpCheck, RouterCheck};
use crate::deploy::probe::tail;
use crate::plugin::{Processes, Traffic};

pub use crate::deploy::canary_status::{Seen, Verdict};

/// Longest excerpt kept.
const EXCERPT: usize = 300;

/// What a check may use besides itself.
pub struct Context<'a> {
    /// Variables for a command (`MANENT_DEPLOYMENT_ID`, `MANENT_CANARY_WEIGHT`, …).
    pub env: BTreeMap<String, String>,
    /// The testers' header (`X-Canary: 1`), from RouteTesters, for `tester: true`.
    pub tester_header: Option<(String, String)>,
    /// Where the engine records the processes it starts.
    pub processes: &'a Processes,
    /// Where a command runs (the descriptor's directory).
    pub dir: &'a std::path::Path,
    /// What a PromQL query's `{{name}}`s are replaced with (`slot`, `version`, …).
    pub vars: BTreeMap<&'static str, String>,
    /// How long the candidate has served (`None`: not known): no query range reaches further
    /// back, where its slot served another release.
    pub serving_for: Option<Duration>,
}

/// `query` with every range (`[5m]`, `[5m:30s]`) longer than `cap` cut to it (whole seconds,
/// at least one), and what was cut, for the verdict (`5m`).
pub fn cap_ranges(query: &str, cap: Duration) -> (String, Vec<String>) {
    // A duration in brackets, with an optional `:resolution`: PromQL's range selectors and
    // subqueries. Inside a string label value a bracket would not be a range; a query with
    // one is unusual enough to read as written.
    let re = regex::Regex::new(r"\[((?:\d+(?:ms|[smhdwy]))+)(:[^\]]*)?\]").expect("a valid regex");
    let cap_s = cap.as_secs().max(1);
    let mut cut = Vec::new();
    let out = re.replace_all(query, |c: &regex::Captures<'_>| {
        let asked = &c[1];
        match humantime::parse_duration(asked) {
            Ok(d) if d.as_secs() > cap_s => {
                cut.push(asked.to_owned());
                format!("[{cap_s}s{}]", c.get(2).map_or("", |m| m.as_str()))
            }
            _ => c[0].to_owned(),
        }
    });
    (out.into_owned(), cut)
}

/// `query` with every `{{name}}` of `vars` replaced.
pub fn substitute(query: &str, vars: &BTreeMap<&'static str, String>) -> String {
    let mut q = query.to_owned();
    for (k, v) in vars {
        q = q.replace(&format!("{{{{{k}}}}}"), v);
    }
    q
}

/// An instant query, judged: every series within the limits passes; no data (an empty
/// result, NaN) is inconclusive; a server that does not answer or refuses the query too.
async fn run_prometheus(
    p: &crate::config::PromCheck,
    vars: &BTreeMap<&'static str, String>,
    serving_for: Option<Duration>,
) -> (Verdict, String, String) {
    let mut query = substitute(&p.query, vars);
    let mut shortened = String::new();
    if let Some(cap) = serving_for {
        if cap < Duration::from_secs(1) {
            return (
                Verdict::Inconclusive,
                format!(
                    "the candidate has not served yet: no range of `{query}` at {} is its own",
                    p.url
                ),
                String::new(),
            );
        }
        let (capped, cut) = cap_ranges(&query, cap);
        if !cut.is_empty() {
            shortened = format!(
                " (range {} cut to {}s: the candidate began serving {}s ago)",
                cut.join(", "),
                cap.as_secs(),
                cap.as_secs()
            );
        }
        query = capped;
    }
    let url = format!(
        "{}/api/v1/query?query={}",
        p.url,
        percent_encoding::utf8_percent_encode(&query, percent_encoding::NON_ALPHANUMERIC)
    );
    let said = |v: String| format!("{v} — `{query}` at {}{shortened}", p.url);
    let (status, body) = match crate::deploy::probe::request("GET", &url, &[], p.timeout).await {
        Ok(r) => r,
        Err(e) => {
            return (
                Verdict::Inconclusive,
                said(format!("no answer: {e}")),
                String::new(),
            );
        }
    };
    let body: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(_) => {
            return (
                Verdict::Inconclusive,
                said(format!("HTTP {status}, not Prometheus' JSON")),
                tail(&String::from_utf8_lossy(&body), EXCERPT),
            );
        }
    };
    if body["status"] != "success" {
        return (
            Verdict::Inconclusive,
            said(format!(
                "the query failed: {}",
                body["error"].as_str().unwrap_or("no reason given")
            )),
            String::new(),
        );
    }
    judge_prometheus(p, &body["data"], &said)
}

/// The verdict on an instant query's `data` (`vector` or `scalar`).
pub fn judge_prometheus(
    p: &crate::config::PromCheck,
    data: &serde_json::Value,
    said: &dyn Fn(String) -> String,
) -> (Verdict, String, String) {
    let value = |v: &serde_json::Value| v[1].as_str().and_then(|s| s.parse::<f64>().ok());
    let series: Vec<(String, Option<f64>)> = match data["resultType"].as_str() {
        Some("scalar") => vec![(String::new(), value(&data["result"]))],
        Some("vector") => data["result"]
            .as_array()
            .map(|r| {
                r.iter()
                    .map(|s| {
                        let labels = s["metric"]
                            .as_object()
                            .map(|m| {
                                m.iter()
                                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                                    .collect::<Vec<_>>()
                                    .join(",")
                            })
                            .unwrap_or_default();
                        (labels, value(&s["value"]))
                    })
                    .collect()
            })
            .unwrap_or_default(),
        other => {
            return (
                Verdict::Inconclusive,
                said(format!(
                    "a {} result: write a query that gives one number per series",
                    other.unwrap_or("missing")
                )),
                String::new(),
            );
        }
    };
    if series.is_empty() {
        return (
            Verdict::Inconclusive,
            said("no data (an empty result: no such series, or no traffic yet)".into()),
            String::new(),
        );
    }
    let (min, max) = (
        p.min.as_ref().and_then(serde_json::Number::as_f64),
        p.max.as_ref().and_then(serde_json::Number::as_f64),
    );
    let mut shown = Vec::new();
    let (mut failed, mut nodata) = (false, false);
    for (labels, v) in &series {
        let name = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}} ")
        };
        match v.filter(|v| v.is_finite()) {
            None => {
                nodata = true;
                shown.push(format!("{name}NaN"));
            }
            Some(v) => {
                let low = min.is_some_and(|m| v < m);
                let high = max.is_some_and(|m| v > m);
                failed |= low || high;
                let verdict = match (low, high) {
                    (true, _) => format!(
                        " < {}",
                        p.min.as_ref().map(ToString::to_string).unwrap_or_default()
                    ),
                    (_, true) => format!(
                        " > {}",
                        p.max.as_ref().map(ToString::to_string).unwrap_or_default()
                    ),
                    _ => String::new(),
                };
                shown.push(format!("{name}{}{verdict}", round(v)));
            }
        }
    }
    let mut limits = Vec::new();
    if let Some(m) = &p.min {
        limits.push(format!("min {m}"));
    }
    if let Some(m) = &p.max {
        limits.push(format!("max {m}"));
    }
    let text = said(format!("{} ({})", shown.join(", "), limits.join(", ")));
    let verdict = if failed {
        Verdict::Fail
    } else if nodata {
        Verdict::Inconclusive
    } else {
        Verdict::Pass
    };
    (verdict, text, String::new())
}

/// A value short enough to read: 4 significant digits.
fn round(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return v.to_string();
    }
    let digits = (3 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.digits$}")
}

/// Runs `check` once, within `limit`.
pub async fn run(check: &Check, cx: &Context<'_>, limit: Duration) -> Seen {
    let started = Instant::now();
    let seen =
        match tokio::time::timeout(limit + Duration::from_secs(1), run_inner(check, cx, limit))
            .await
        {
            Ok(s) => s,
            Err(_) => (
                Verdict::Inconclusive,
                format!("no answer within {}", humantime::format_duration(limit)),
                String::new(),
            ),
        };
    Seen {
        verdict: seen.0,
        value: seen.1,
        excerpt: seen.2,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        traffic: None,
    }
}

/// A router check's run: `read` is what the router reported (or why it could not), for the
/// candidate in slot `candidate` beside the stable one in `stable`.
pub fn router_seen(
    check: &RouterCheck,
    read: Result<Traffic, String>,
    slots: (&str, &str),
    took: Duration,
) -> Seen {
    seen_of(read, slots, took, |t, c, s| judge(check, t, c, s))
}

/// What a run on the router's traffic saw: `judge`'s verdict on `read`, or inconclusive when
/// the router could not say.
pub fn seen_of(
    read: Result<Traffic, String>,
    (candidate, stable): (&str, &str),
    took: Duration,
    judge: impl FnOnce(&Traffic, &str, &str) -> (Verdict, String),
) -> Seen {
    let duration_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
    match read {
        Err(why) => Seen {
            verdict: Verdict::Inconclusive,
            value: format!("the router could not say what traffic it saw: {why}"),
            excerpt: String::new(),
            duration_ms,
            traffic: None,
        },
        Ok(t) => {
            let (verdict, value) = judge(&t, candidate, stable);
            Seen {
                verdict,
                value,
                excerpt: String::new(),
                duration_ms,
                traffic: Some(t),
            }
        }
    }
}

/// Why a latency limit cannot be judged on `t`'s figures: the router measures none.
pub fn unmeasured_latency(t: &Traffic) -> String {
    format!(
        "p99 cannot be judged: {} holds no latency (manent-plugin-haproxy: set its \
         `access_log:` to HAProxy's log in the plugin's log-format; else drop the latency limit)",
        t.source
    )
}

/// What the figures say of the window they cover: `last 1m`, or `the 40s since 2.0.0 began
/// serving` when the window was cut there.
pub fn span_text(t: &Traffic, version: &str) -> String {
    let span = span(t.window_ms);
    if t.cut_at_since() {
        let who = if version.is_empty() {
            "the candidate"
        } else {
            version
        };
        format!("the {span} since {who} began serving")
    } else {
        format!("the last {span}")
    }
}

/// A window's length as read: `1.2s` under ten seconds, `42s`, `1m 30s`.
pub fn span(ms: u64) -> String {
    if ms < 10_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        humantime::format_duration(Duration::from_secs(ms / 1000)).to_string()
    }
}

/// The verdict on the candidate's traffic in `t`, and the numbers that made it (both slots',
/// with the limits and the window).
pub fn judge(check: &RouterCheck, t: &Traffic, candidate: &str, stable: &str) -> (Verdict, String) {
    let (c, s) = (t.slot(candidate), t.slot(stable));
    let window = span_text(t, &c.version);
    let figures = |x: &crate::plugin::SlotTraffic| {
        let rate = x
            .error_rate()
            .map_or("—".to_owned(), |r| format!("{}%", percent_text(r)));
        let p99 = x.p99_ms.map_or("—".to_owned(), |p| format!("{p} ms"));
        (rate, p99)
    };
    let (c_rate, c_p99) = figures(&c);
    let (s_rate, s_p99) = figures(&s);
    let mut failed = Vec::new();
    let mut limits = Vec::new();
    if let Some(max) = check.max_error_rate {
        limits.push(format!("5xx ≤ {}", Rate(max)));
        // Tries the candidate failed that the router retried elsewhere count too: the client
        // never saw them, but the candidate did not answer.
        let rate = if c.retried_away > 0 {
            c.failure_rate()
        } else {
            c.error_rate()
        };
        if let Some(r) = rate.filter(|r| *r > Rate(max).fraction()) {
            failed.push(if c.retried_away > 0 {
                format!("5xx and failed tries {}% > {}", percent_text(r), Rate(max))
            } else {
                format!("5xx {c_rate} > {}", Rate(max))
            });
        }
    }
    if let Some(max) = check.max_p99 {
        limits.push(format!("p99 ≤ {}", humantime::format_duration(max)));
        let max_ms = u32::try_from(max.as_millis()).unwrap_or(u32::MAX);
        if c.p99_ms.is_some_and(|p| p > max_ms) {
            failed.push(format!("p99 {c_p99} > {}", humantime::format_duration(max)));
        }
    }
    let retried = if c.retried_away > 0 {
        format!(", {} tries retried elsewhere", c.retried_away)
    } else {
        String::new()
    };
    // `2.0.0 (green)`, or the slot alone when the release in it is not recorded.
    let named = |x: &crate::plugin::SlotTraffic, slot: &str| {
        if x.version.is_empty() {
            format!("({slot})")
        } else {
            format!("{} ({slot})", x.version)
        }
    };
    let numbers = format!(
        "candidate {}: {} requests, 5xx {c_rate}, p99 {c_p99}{retried}; stable {}: {} requests, \
         5xx {s_rate}, p99 {s_p99}; {window}, from {}; limits {}",
        named(&c, candidate),
        c.requests,
        named(&s, stable),
        s.requests,
        t.source,
        limits.join(", ")
    );
    if c.requests < check.min_requests {
        return (
            Verdict::Inconclusive,
            format!(
                "too few requests to judge: the candidate served {} (at least {} needed) — \
                 {numbers}",
                c.requests, check.min_requests
            ),
        );
    }
    if !failed.is_empty() {
        return (Verdict::Fail, format!("{} — {numbers}", failed.join(", ")));
    }
    if check.max_p99.is_some() && (c.no_latency || c.p99_ms.is_none()) {
        return (
            Verdict::Inconclusive,
            format!("{} — {numbers}", unmeasured_latency(t)),
        );
    }
    (Verdict::Pass, numbers)
}

async fn run_inner(check: &Check, cx: &Context<'_>, limit: Duration) -> (Verdict, String, String) {
    match check {
        Check::Command { command } => run_command(command, cx, limit).await,
        Check::Http(h) => run_http(h, cx).await,
        // Read through the router by the caller (it needs the plugin): see `router_seen`.
        Check::Router(_) => (
            Verdict::Inconclusive,
            "a router check needs the router".into(),
            String::new(),
        ),
        Check::Prometheus(p) => run_prometheus(p, &cx.vars, cx.serving_for).await,
        Check::Compare(_) => (
            Verdict::Inconclusive,
            "a comparison needs the router".into(),
            String::new(),
        ),
    }
}

async fn run_command(
    command: &str,
    cx: &Context<'_>,
    limit: Duration,
) -> (Verdict, String, String) {
    let ran =
        crate::deploy::probe::command(command, cx.dir, &cx.env, cx.processes, limit, None).await;
    let excerpt = tail(&ran.tail, EXCERPT);
    let value = ran.describe(limit);
    let verdict = match (&ran.code, ran.timed_out) {
        (Ok(Some(0)), false) => Verdict::Pass,
        (Ok(Some(1)), false) => Verdict::Fail,
        _ => Verdict::Inconclusive,
    };
    let value =
        if verdict == Verdict::Inconclusive && matches!(ran.code, Ok(Some(_))) && !ran.timed_out {
            format!("{value} (0 passes, 1 fails)")
        } else {
            value
        };
    (verdict, value, excerpt)
}

async fn run_http(h: &HttpCheck, cx: &Context<'_>) -> (Verdict, String, String) {
    let mut headers = h.headers.clone();
    if h.tester {
        match &cx.tester_header {
            Some(t) => headers.push(t.clone()),
            None => {
                return (
                    Verdict::Inconclusive,
                    "tester: true, but no testers' header is known (add a `testers: {}` step \
                     before the analysis)"
                        .into(),
                    String::new(),
                );
            }
        }
    }
    match crate::deploy::probe::request("GET", &h.url, &headers, h.timeout).await {
        Err(e) => (Verdict::Inconclusive, e, String::new()),
        Ok((status, body)) => {
            let text = String::from_utf8_lossy(&body).into_owned();
            let excerpt = tail(&crate::redact::redact(text.trim()), EXCERPT);
            if status != h.status {
                return (
                    Verdict::Fail,
                    format!("status {status} (expected {})", h.status),
                    excerpt,
                );
            }
            if let Some(pattern) = &h.body {
                let matched = regex::Regex::new(pattern).is_ok_and(|re| re.is_match(&text));
                if !matched {
                    return (
                        Verdict::Fail,
                        format!("status {status}, body does not match /{pattern}/"),
                        excerpt,
                    );
                }
            }
            (Verdict::Pass, format!("status {status}"), excerpt)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::SlotTraffic;

    fn traffic(candidate: (u64, u64, u32), stable: (u64, u64, u32)) -> Traffic {
        let slot =
            |name: &str, version: &str, (requests, errors, p99): (u64, u64, u32)| SlotTraffic {
                slot: name.into(),
                version: version.into(),
                requests,
                responses: [requests - errors, 0, 0, errors],
                retried_away: 0,
                p50_ms: Some(p99 / 2),
                p95_ms: Some(p99),
                p99_ms: Some(p99),
                intervals: Vec::new(),
                no_latency: false,
            };
        Traffic {
            slots: vec![
                slot("blue", "1.0.0", stable),
                slot("green", "2.0.0", candidate),
            ],
            from_ms: 0,
            window_ms: 60_000,
            source: "nginx access log /var/log/web.json".into(),
            since_ms: None,
        }
    }

    fn limits(rate: Option<u32>, p99: Option<u64>, min: u64) -> RouterCheck {
        RouterCheck {
            max_error_rate: rate,
            max_p99: p99.map(Duration::from_millis),
            min_requests: min,
            window: Duration::from_secs(60),
        }
    }

    #[test]
    fn a_router_check_judges_the_candidate_and_shows_both_slots() {
        let check = limits(Some(10_000), Some(300), 100);
        let (v, said) = judge(
            &check,
            &traffic((400, 20, 40), (400, 0, 15)),
            "green",
            "blue",
        );
        assert_eq!(v, Verdict::Fail);
        assert!(said.starts_with("5xx 5% > 1%"), "{said}");
        assert!(
            said.contains("candidate 2.0.0 (green): 400 requests, 5xx 5%, p99 40 ms"),
            "{said}"
        );
        assert!(
            said.contains("stable 1.0.0 (blue): 400 requests, 5xx 0%"),
            "{said}"
        );
        let (v, said) = judge(
            &check,
            &traffic((400, 2, 400), (400, 0, 15)),
            "green",
            "blue",
        );
        assert_eq!(v, Verdict::Fail);
        assert!(said.starts_with("p99 400 ms > 300ms"), "{said}");
        let (v, _) = judge(
            &check,
            &traffic((400, 4, 299), (400, 0, 15)),
            "green",
            "blue",
        );
        assert_eq!(v, Verdict::Pass, "1% is within a 1% limit");
    }

    #[test]
    fn a_promql_result_is_judged_series_by_series_and_no_data_is_never_a_pass() {
        let check = crate::config::PromCheck {
            url: "http://prom:9090".into(),
            query: "q".into(),
            max: Some(serde_json::Number::from_f64(0.01).unwrap()),
            min: None,
            timeout: Duration::from_secs(1),
        };
        let said = |v: String| v;
        let judge = |data: serde_json::Value| judge_prometheus(&check, &data, &said);
        let (v, text, _) = judge(serde_json::json!({"resultType": "vector", "result": [
            {"metric": {"slot": "green"}, "value": [1.0, "0.0523"]},
            {"metric": {"slot": "blue"}, "value": [1.0, "0.001"]}]}));
        assert_eq!(v, Verdict::Fail);
        assert_eq!(
            text,
            "{slot=green} 0.05230 > 0.01, {slot=blue} 0.001000 (max 0.01)"
        );
        let (v, _, _) =
            judge(serde_json::json!({"resultType": "scalar", "result": [1.0, "0.002"]}));
        assert_eq!(v, Verdict::Pass);
        let (v, text, _) = judge(serde_json::json!({"resultType": "vector", "result": []}));
        assert_eq!(v, Verdict::Inconclusive);
        assert!(text.contains("no data"), "{text}");
        let (v, text, _) = judge(serde_json::json!({"resultType": "vector", "result": [
            {"metric": {}, "value": [1.0, "NaN"]}]}));
        assert_eq!(v, Verdict::Inconclusive, "{text}");
        let (v, text, _) = judge(serde_json::json!({"resultType": "matrix", "result": []}));
        assert_eq!(v, Verdict::Inconclusive);
        assert!(text.contains("one number per series"), "{text}");
        let vars = BTreeMap::from([
            ("slot", "green".to_owned()),
            ("version", "2.0.0".to_owned()),
        ]);
        assert_eq!(
            substitute(
                "x{slot=\"{{slot}}\",v=\"{{version}}\",o=\"{{other}}\"}",
                &vars
            ),
            "x{slot=\"green\",v=\"2.0.0\",o=\"{{other}}\"}"
        );
    }

    #[test]
    fn a_query_range_never_reaches_before_the_candidate_began_serving() {
        let q = "sum(rate(e[5m])) / sum(rate(r[1h30m])) + max_over_time(x[10m:30s]) + y[20s]";
        let (capped, cut) = cap_ranges(q, Duration::from_millis(40_700));
        assert_eq!(
            capped,
            "sum(rate(e[40s])) / sum(rate(r[40s])) + max_over_time(x[40s:30s]) + y[20s]"
        );
        assert_eq!(cut, ["5m", "1h30m", "10m"]);
        let (same, cut) = cap_ranges(q, Duration::from_secs(7200));
        assert_eq!((same.as_str(), cut.len()), (q, 0));
    }

    #[test]
    fn tries_the_candidate_failed_and_the_router_retried_elsewhere_count_against_it() {
        let check = limits(Some(10_000), None, 100);
        let mut t = traffic((400, 0, 40), (400, 0, 15));
        t.slots[1].retried_away = 100;
        let (v, said) = judge(&check, &t, "green", "blue");
        assert_eq!(v, Verdict::Fail, "{said}");
        assert!(said.starts_with("5xx and failed tries 20% > 1%"), "{said}");
        assert!(said.contains("100 tries retried elsewhere"), "{said}");
    }

    #[test]
    fn too_few_requests_is_inconclusive_even_when_every_one_failed() {
        let check = limits(Some(10_000), None, 100);
        let (v, said) = judge(
            &check,
            &traffic((99, 99, 10), (400, 0, 15)),
            "green",
            "blue",
        );
        assert_eq!(v, Verdict::Inconclusive);
        assert!(
            said.contains("the candidate served 99 (at least 100 needed)"),
            "{said}"
        );
        assert!(
            said.contains("the last 1m, from nginx access log"),
            "{said}"
        );
        let s = router_seen(
            &check,
            Err("nginx: set `access_log:`".into()),
            ("green", "blue"),
            Duration::ZERO,
        );
        assert_eq!(s.verdict, Verdict::Inconclusive);
        assert!(s.value.contains("set `access_log:`"), "{}", s.value);
    }

    fn cx(p: &Processes) -> Context<'_> {
        Context {
            env: BTreeMap::from([("MANENT_CANARY_WEIGHT".into(), "25".into())]),
            tester_header: None,
            processes: p,
            dir: std::path::Path::new(""),
            vars: BTreeMap::new(),
            serving_for: None,
        }
    }

    #[tokio::test]
    async fn a_command_passes_fails_or_cannot_tell_by_its_exit_code() {
        let p = Processes::none();
        let limit = Duration::from_secs(10);
        let check = |c: &str| Check::Command {
            command: c.to_owned(),
        };
        let s = run(&check("echo weight $MANENT_CANARY_WEIGHT"), &cx(&p), limit).await;
        assert_eq!(
            (s.verdict, s.excerpt.as_str()),
            (Verdict::Pass, "weight 25")
        );
        let s = run(&check("echo 5xx rate 7% >&2; exit 1"), &cx(&p), limit).await;
        assert_eq!(s.verdict, Verdict::Fail);
        assert_eq!(s.excerpt, "5xx rate 7%");
        let s = run(&check("exit 3"), &cx(&p), limit).await;
        assert_eq!(s.verdict, Verdict::Inconclusive);
        assert!(s.value.contains("exit 3"), "{}", s.value);
        let s = run(&check("sleep 30"), &cx(&p), Duration::from_millis(300)).await;
        assert_eq!(s.verdict, Verdict::Inconclusive);
        assert!(s.value.contains("killed after 300ms"), "{}", s.value);
    }

    #[tokio::test]
    async fn an_http_check_reads_the_status_and_the_body() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut buf = [0u8; 2048];
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    let req = String::from_utf8_lossy(&buf[..n]).to_string();
                    let (status, body) = if req.starts_with("GET /health") {
                        if req.to_ascii_lowercase().contains("x-canary: 1") {
                            ("200 OK", "candidate ok")
                        } else {
                            ("200 OK", "stable ok")
                        }
                    } else {
                        ("404 Not Found", "no such page")
                    };
                    let resp = format!(
                        "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(resp.as_bytes()).await;
                });
            }
        });
        let p = Processes::none();
        let mut c = cx(&p);
        c.tester_header = Some(("X-Canary".into(), "1".into()));
        let http = |path: &str, body: Option<&str>, tester: bool| {
            Check::Http(HttpCheck {
                url: format!("http://{addr}{path}"),
                headers: Vec::new(),
                tester,
                status: 200,
                body: body.map(str::to_owned),
                timeout: Duration::from_secs(5),
            })
        };
        let limit = Duration::from_secs(10);
        let s = run(&http("/health", Some("^candidate"), true), &c, limit).await;
        assert_eq!(s.verdict, Verdict::Pass, "{s:?}");
        let s = run(&http("/health", Some("^candidate"), false), &c, limit).await;
        assert_eq!(s.verdict, Verdict::Fail);
        assert!(s.value.contains("does not match"), "{}", s.value);
        let s = run(&http("/missing", None, false), &c, limit).await;
        assert_eq!(
            (s.verdict, s.value.as_str(), s.excerpt.as_str()),
            (Verdict::Fail, "status 404 (expected 200)", "no such page")
        );
        // Port 1 (tcpmux): nothing listens there, and no connection's own source port can be
        // it (a freed ephemeral port can be taken again, or connect to itself).
        let gone = "127.0.0.1:1";
        let s = run(
            &Check::Http(HttpCheck {
                url: format!("http://{gone}/"),
                headers: Vec::new(),
                tester: false,
                status: 200,
                body: None,
                timeout: Duration::from_secs(2),
            }),
            &c,
            limit,
        )
        .await;
        assert_eq!(s.verdict, Verdict::Inconclusive);
        assert!(s.value.contains("cannot connect"), "{}", s.value);
    }
}
