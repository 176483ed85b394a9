//! Canary analysis on real traffic: a real nginx in front of real backends, a real client
//! sending requests through it, and `analysis: {router: …}` judging what nginx's own access log
//! says each slot served (read by manent-plugin-nginx). A candidate answering 5% of its requests
//! with 500 is reverted, the decision naming the measured rate and the request count; a healthy
//! one passes; too few requests is inconclusive and waits for an operator, never a pass.

use crate::support::fleet::{Fixture, text};
use crate::support::nginx::Nginx;
use crate::support::router::{Router, get};

#[allow(clippy::print_stderr, reason = "a skipped test says why")]
fn start(dir: &std::path::Path) -> Option<Nginx> {
    let n = Nginx::start(dir, 2, "1.0.0");
    if n.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "nginx is required in CI (.ci/run installs it)"
        );
        eprintln!("skipped: nginx is not installed");
    }
    n
}

/// `web` as a canary: half the traffic to the candidate, a pause while the test sends
/// requests, the router analysis `check`, and a pause after it.
fn fixture(n: &Nginx, check: &str) -> Fixture {
    let app = format!(
        "application: web\nartifact: {{type: directory, version: \"2.0.0\", uri: \"{}\"}}\n\
         deploy:\n  plugin: edge\nstrategy:\n  canary:\n    steps:\n      - weight: 50\n      \
         - pause: {{}}\n      - analysis: {{router: {check}}}\n      - pause: {{}}\n\
         max_retries: 1\nbackoff: {{base: 100ms, max: 200ms}}\nenvironments:\n  prod:\n    \
         targets:\n{}",
        n.artifact_uri(),
        n.targets_yml()
    );
    Fixture::new(&n.manent_yml("edge"), &[("web", &app)])
}

/// `n` requests through the front: how many did not get a 200.
fn send(n: &Nginx, requests: usize) -> usize {
    (0..requests)
        .filter(|_| get(n.front(), None).is_err())
        .count()
}

/// Deploys to the first pause, sends `requests`, and ends the pause: the analysis runs.
fn analysed(n: &Nginx, fx: &Fixture, requests: usize) -> (std::process::Output, String, usize) {
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    let id = fx.deployments().pop().unwrap();
    let failed = send(n, requests);
    (fx.run(&["promote", &id]), id, failed)
}

#[test]
fn a_candidate_answering_5_percent_500s_is_reverted_and_the_decision_names_the_rate_and_count() {
    let dir = tempfile::tempdir().unwrap();
    let Some(n) = start(dir.path()) else {
        return;
    };
    n.build_failing("2.0.0");
    let fx = fixture(&n, "{max_error_rate: 1%, min_requests: 100, window: 1m}");
    let (out, id, failed) = analysed(&n, &fx, 400);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(4), "{all}");
    assert!(failed > 0, "the client saw no 500");
    let v = fx.status(&id);
    assert_eq!(v["state"], "reverted", "{v}");
    let why = v["report"]["message"].as_str().unwrap_or_default();
    for part in [
        "5xx",
        "> 1%",
        "requests",
        "candidate 2.0.0",
        "stable",
        "access log",
    ] {
        assert!(why.contains(part), "{part:?} in {why}");
    }
    // The numbers behind it, as nginx logged them: every 500 the client saw was the candidate's.
    let run = &v["canary"]["status"]["runs"][0];
    assert_eq!(run["verdict"], "fail", "{run}");
    let slots = run["traffic"]["slots"].as_array().unwrap();
    let slot = |version: &str| {
        slots
            .iter()
            .find(|s| s["version"] == version)
            .unwrap_or_else(|| panic!("no {version} in {slots:?}"))
    };
    let (candidate, stable) = (slot("2.0.0"), &slots[0]);
    assert_eq!(
        candidate["responses"][3].as_u64(),
        Some(failed as u64),
        "{run}"
    );
    assert_eq!(stable["responses"][3].as_u64(), Some(0), "{run}");
    // Every request the client sent, and the one that saw nginx up when the test started it.
    let total = candidate["requests"].as_u64().unwrap() + stable["requests"].as_u64().unwrap();
    assert_eq!(total, 401, "{run}");
    let share = candidate["requests"].as_u64().unwrap() as f64 / 400.0;
    assert!(
        (0.35..=0.65).contains(&share),
        "the candidate took {share} at weight 50"
    );
    assert!(
        why.contains(&format!("{} requests", candidate["requests"])),
        "{why}"
    );
    // Reverted: nothing reaches the candidate.
    assert_eq!(n.sample(100, None, "2.0.0"), (0, 0));
}

#[test]
fn a_healthy_candidate_passes_with_its_numbers_beside_the_stable_ones() {
    let dir = tempfile::tempdir().unwrap();
    let Some(n) = start(dir.path()) else {
        return;
    };
    n.build("2.0.0", true);
    let fx = fixture(
        &n,
        "{max_error_rate: 1%, max_p99: 2s, min_requests: 100, window: 1m}",
    );
    let (out, id, failed) = analysed(&n, &fx, 400);
    assert_eq!(failed, 0);
    // Past the analysis, waiting at the next pause.
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    let v = fx.status(&id);
    let run = &v["canary"]["status"]["runs"][0];
    assert_eq!(run["verdict"], "pass", "{run}");
    let value = run["value"].as_str().unwrap();
    for part in ["candidate 2.0.0", "5xx 0%", "stable", "p99", "last 1m"] {
        assert!(value.contains(part), "{part:?} in {value}");
    }
}

#[test]
fn too_few_requests_is_inconclusive_and_waits_for_an_operator() {
    let dir = tempfile::tempdir().unwrap();
    let Some(n) = start(dir.path()) else {
        return;
    };
    n.build_failing("2.0.0");
    let fx = fixture(&n, "{max_error_rate: 1%, min_requests: 500, window: 1m}");
    let (out, id, _) = analysed(&n, &fx, 40);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    let v = fx.status(&id);
    let run = &v["canary"]["status"]["runs"][0];
    assert_eq!(run["verdict"], "inconclusive", "{run}");
    let decision = v["canary"]["status"]["decisions"]
        .as_array()
        .and_then(|d| d.last())
        .cloned()
        .unwrap_or_default();
    let why = decision["why"].as_str().unwrap_or_default();
    assert!(
        why.contains("too few requests") && why.contains("at least 500 needed"),
        "{decision}"
    );
    // Still half the traffic on the candidate: nothing was decided for the operator.
    let (hits, _) = n.sample(200, None, "2.0.0");
    assert!(
        (60..=140).contains(&hits),
        "{hits} of 200 reached the candidate"
    );
}

#[test]
fn while_a_canary_waits_its_engine_charts_what_each_slot_served() {
    let dir = tempfile::tempdir().unwrap();
    let Some(n) = start(dir.path()) else {
        return;
    };
    n.build_failing("2.0.0");
    let app = format!(
        "application: web\nartifact: {{type: directory, version: \"2.0.0\", uri: \"{}\"}}\n\
         deploy:\n  plugin: edge\nstrategy:\n  canary:\n    watch: 300ms\n    steps:\n      \
         - weight: 50\n      - pause: {{}}\nenvironments:\n  prod:\n    targets:\n{}",
        n.artifact_uri(),
        n.targets_yml()
    );
    let fx = Fixture::new(&n.manent_yml("edge"), &[("web", &app)]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    let id = fx.deployments().pop().unwrap();
    // An engine holds the waiting canary (as a console or a worker does) and reads the router.
    let mut worker = fx.spawn_with(&["worker"], &[]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let (mut candidate, mut errors) = (0u64, 0u64);
    while std::time::Instant::now() < deadline && (candidate < 50 || errors == 0) {
        send(&n, 100);
        let v = fx.status(&id);
        let points = v["canary"]["traffic"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        candidate = points
            .iter()
            .map(|p| p["candidate"]["requests"].as_u64().unwrap_or(0))
            .sum();
        errors = points
            .iter()
            .map(|p| p["candidate"]["errors"].as_u64().unwrap_or(0))
            .sum();
        let stable_errors: u64 = points
            .iter()
            .map(|p| p["stable"]["errors"].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(stable_errors, 0, "stable answers no 500: {points:?}");
    }
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status();
    let _ = worker.wait();
    assert!(
        candidate >= 50 && errors > 0,
        "the candidate's requests ({candidate}) and 500s ({errors}) are charted"
    );
}

#[test]
fn background_analysis_reverts_a_held_canary_when_its_real_traffic_fails() {
    let dir = tempfile::tempdir().unwrap();
    let Some(n) = start(dir.path()) else {
        return;
    };
    n.build_failing("2.0.0");
    let app = format!(
        "application: web\nartifact: {{type: directory, version: \"2.0.0\", uri: \"{}\"}}\n\
         deploy:\n  plugin: edge\nstrategy:\n  canary:\n    watch: 300ms\n    analysis: {{router: \
         {{max_error_rate: 1%, min_requests: 50, window: 1m}}, interval: 500ms, failure_limit: \
         2}}\n    steps:\n      - weight: 10\n      - pause: {{}}\n      - weight: 100\n\
         environments:\n  prod:\n    targets:\n{}",
        n.artifact_uri(),
        n.targets_yml()
    );
    let fx = Fixture::new(&n.manent_yml("edge"), &[("web", &app)]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    let id = fx.deployments().pop().unwrap();
    let mut worker = fx.spawn_with(&["worker"], &[]);
    // An operator holds it at 50%: the steps wait, the background analysis does not.
    let out = fx.run(&["weight", &id, "50"]);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut v = fx.status(&id);
    while std::time::Instant::now() < deadline && v["state"] != "reverted" {
        send(&n, 100);
        v = fx.status(&id);
    }
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status();
    let _ = worker.wait();
    assert_eq!(v["state"], "reverted", "{v}");
    let decision = v["canary"]["status"]["decisions"]
        .as_array()
        .and_then(|d| d.iter().rev().find(|d| d["action"] == "revert"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(decision["by"], "analysis", "{decision}");
    let why = decision["why"].as_str().unwrap_or_default();
    for part in [
        "background analysis",
        "failed 2 of",
        "(limit 2)",
        "5xx",
        "> 1%",
        "requests",
    ] {
        assert!(why.contains(part), "{part:?} in {why}");
    }
    let b = &v["canary"]["background"];
    assert!(b["failures"].as_u64() >= Some(2), "{b}");
    // Reverted: the candidate takes nothing.
    assert_eq!(n.sample(100, None, "2.0.0"), (0, 0));
}
