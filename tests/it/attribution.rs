//! Whose traffic a canary's analysis judges, over real routers (nginx, and HAProxy with and
//! without its log) in front of the tests' own backends, with a real client. Slots are reused
//! release after release: after v1 is promoted on green, v2's canary goes to blue, where v0
//! served until a moment before. What v0 did there — failing one request in twenty, or
//! answering slowly — must not be v2's verdict, and v2's own failures must be judged on v2's
//! own requests alone: a healthy candidate passes, a failing one is reverted with a request
//! count no larger than what it could have served.

use crate::support::fleet::{Fixture, said, text};
use crate::support::haproxy::Haproxy;
use crate::support::nginx::Nginx;
use crate::support::router::{Router, get};

#[allow(clippy::print_stderr, reason = "a skipped test says why")]
fn start<R: Router>(dir: &std::path::Path, logged: bool) -> Option<R> {
    let mut r = R::start(&dir.join(R::NAME), 2, "0.1.0");
    match &mut r {
        Some(r) if logged => r.log_traffic(),
        Some(_) => {}
        None => {
            assert!(
                std::env::var_os("CI").is_none(),
                "{} is required in CI (.ci/run installs it)",
                R::NAME
            );
            eprintln!("skipped: {} is not installed", R::NAME);
        }
    }
    r
}

/// `n` requests through `port`, eight at a time (a slow release holds each one): how many got
/// no 200.
fn send(port: u16, n: usize) -> usize {
    let each = n.div_ceil(8);
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let count = each.min(n.saturating_sub(i * each));
            std::thread::spawn(move || (0..count).filter(|_| get(port, None).is_err()).count())
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).sum()
}

/// `web` as a canary of whatever `--version` says: half the traffic to the candidate, a pause,
/// the router analysis `check`, and a pause after it.
fn fixture<R: Router>(r: &R, check: &str) -> Fixture {
    let app = format!(
        "application: web\nartifact: {{type: directory, version: \"1.0.0\", uri: \"{}\"}}\n\
         deploy:\n  plugin: edge\nstrategy:\n  canary:\n    steps:\n      - weight: 50\n      \
         - pause: {{}}\n      - analysis: {{router: {check}}}\n      - pause: {{}}\n\
         max_retries: 1\nbackoff: {{base: 100ms, max: 200ms}}\nenvironments:\n  prod:\n    \
         targets:\n{}",
        r.artifact_uri(),
        r.targets_yml()
    );
    Fixture::new(&r.manent_yml("edge"), &[("web", &app)])
}

/// Deploys `version` to its first pause, with `requests` through the front while half of them
/// reach it: the deployment's id.
fn to_the_pause<R: Router>(r: &R, fx: &Fixture, version: &str, requests: usize) -> String {
    let out = fx.run(&["deploy", "web", "prod", "--version", version, "--yes"]);
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    let id = fx.deployments().pop().unwrap();
    send(r.front(), requests);
    id
}

/// Promotes `version` to every request at once (its analysis is skipped).
fn promoted<R: Router>(r: &R, fx: &Fixture, version: &str) {
    let id = to_the_pause(r, fx, version, 200);
    let out = fx.run(&["promote", "--full", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
}

/// What the analysis of `id`'s canary decided: its first run's verdict and what it said.
fn analysed(fx: &Fixture, id: &str) -> (std::process::Output, String, String, u64) {
    let out = fx.run(&["promote", id]);
    let v = fx.status(id);
    let run = &v["canary"]["status"]["runs"][0];
    let verdict = run["verdict"].as_str().unwrap_or_default().to_owned();
    let value = run["value"].as_str().unwrap_or_default().to_owned();
    let slots = run["traffic"]["slots"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let version = v["version"].as_str().unwrap_or_default().to_owned();
    let counted = slots
        .iter()
        .find(|s| s["version"] == version.as_str())
        .and_then(|s| s["requests"].as_u64())
        .unwrap_or_else(|| panic!("no slot of {version} in {run}"));
    (out, verdict, value, counted)
}

/// v0 (in blue, misbehaving as `v0` says) serves, v1 is promoted to green, then v2 (healthy)
/// goes to blue: its analysis passes. v2 is promoted, and v3 (misbehaving as `v3` says) goes
/// to green, where healthy v1 served: reverted, on v3's own requests.
fn a_slot_s_earlier_release_is_not_the_candidate<R: Router>(
    logged: bool,
    check: &str,
    v0: (bool, u32),
    v3: (bool, u32),
    failed: &str,
) {
    let dir = tempfile::tempdir().unwrap();
    let Some(r) = start::<R>(dir.path(), logged) else {
        return;
    };
    r.misbehave("blue", v0.0, v0.1);
    r.build("1.0.0", true);
    r.build("2.0.0", true);
    if v3.0 {
        r.build_failing("3.0.0");
    } else {
        r.build_slow("3.0.0", v3.1);
    }
    let fx = fixture(&r, check);
    // v0's history in blue, then v1's canary beside it and its promotion.
    send(r.front(), 200);
    promoted(&r, &fx, "1.0.0");
    // v2 into blue, where v0 served a moment ago.
    let sent = 300;
    let id = to_the_pause(&r, &fx, "2.0.0", sent);
    let (out, verdict, value, counted) = analysed(&fx, &id);
    assert_eq!(verdict, "pass", "{value}\n{}", said(&out));
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    assert!(counted <= sent as u64, "v2 served at most {sent}: {value}");
    assert!(value.contains("since 2.0.0 began serving"), "{value}");
    let out = fx.run(&["promote", "--full", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    // v3 into green, where healthy v1 served until v2's promotion.
    let id = to_the_pause(&r, &fx, "3.0.0", sent);
    let (out, verdict, value, counted) = analysed(&fx, &id);
    assert_eq!(verdict, "fail", "{value}\n{}", said(&out));
    assert_eq!(out.status.code(), Some(4), "{}", said(&out));
    assert!(
        (50..=sent as u64).contains(&counted),
        "v3 served at most {sent} (half, at weight 50): {value}"
    );
    assert!(
        value.starts_with(failed) && value.contains(&format!("{counted} requests")),
        "{failed:?} in {value}"
    );
    let v = fx.status(&id);
    assert_eq!(v["state"], "reverted", "{v}");
}

/// The 5xx rate, on the error counts: v0 fails 5% of its requests, v3 5% of its own.
fn error_rates<R: Router>(logged: bool) {
    a_slot_s_earlier_release_is_not_the_candidate::<R>(
        logged,
        "{max_error_rate: 1%, min_requests: 50, window: 1m}",
        (true, 0),
        (true, 0),
        "5xx ",
    );
}

/// The p99, on each request's time: v0 answers in 250 ms, v3 too.
fn latency<R: Router>() {
    a_slot_s_earlier_release_is_not_the_candidate::<R>(
        true,
        "{max_p99: 150ms, min_requests: 50, window: 1m}",
        (false, 250),
        (false, 250),
        "p99 ",
    );
}

#[test]
fn on_nginx_the_error_rate_is_the_candidates_own() {
    error_rates::<Nginx>(true);
}

#[test]
fn on_nginx_the_latency_is_the_candidates_own() {
    latency::<Nginx>();
}

/// HAProxy's counters (no log): a window starts at the reading taken before the weight that
/// gave the candidate traffic — kept on disk, as `promote` runs in another plugin process.
#[test]
fn on_haproxy_counters_the_error_rate_is_the_candidates_own() {
    error_rates::<Haproxy>(false);
}

#[test]
fn on_haproxy_s_log_the_error_rate_is_the_candidates_own() {
    error_rates::<Haproxy>(true);
}

#[test]
fn on_haproxy_s_log_the_latency_is_the_candidates_own() {
    latency::<Haproxy>();
}

/// HAProxy's counters keep no latency: a p99 limit is never passed on them ("p99 0 ms" was),
/// the run is inconclusive and says how to give HAProxy a latency source.
#[test]
fn on_haproxy_counters_a_latency_limit_is_inconclusive_never_passed() {
    let dir = tempfile::tempdir().unwrap();
    let Some(h) = start::<Haproxy>(dir.path(), false) else {
        return;
    };
    h.build_slow("1.0.0", 250);
    let fx = fixture(&h, "{max_p99: 100ms, min_requests: 20, window: 1m}");
    // Said before any traffic moves, not first at the gate.
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    assert!(
        said(&out).contains("analysis at step 3 (router traffic over 1m: p99 ≤ 100ms")
            && said(&out).contains("holds no latency")
            && said(&out).contains("every such run will be inconclusive"),
        "{}",
        said(&out)
    );
    let id = fx.deployments().pop().unwrap();
    send(h.front(), 100);
    let (out, verdict, value, _) = analysed(&fx, &id);
    assert_eq!(verdict, "inconclusive", "{value}");
    // An inconclusive run pauses the canary for an operator.
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    for part in [
        "p99 cannot be judged",
        "holds no latency",
        "access_log",
        "p99 —",
    ] {
        assert!(value.contains(part), "{part:?} in {value}");
    }
    let status = text(&fx.run(&["status", &id]).stdout);
    assert!(!status.contains("p99 0 ms"), "{status}");
    // Nothing was decided for the operator: half the traffic still reaches the candidate.
    let v = fx.status(&id);
    assert_eq!(v["state"], "canary_paused", "{v}");
}
