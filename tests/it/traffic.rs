//! Canary analysis on real traffic: a real nginx in front of real backends, a real client
//! sending requests through it, and `analysis: {router: …}` judging what nginx's own access log
//! says each slot served (read by manent-plugin-nginx). A candidate answering 5% of its requests
//! with 500 is reverted, the decision naming the measured rate and the request count; a healthy
//! one passes; too few requests is inconclusive and waits for an operator, never a pass.

use crate::support::fleet::{Fixture, said, text};
use crate::support::nginx::Nginx;
use crate::support::router::{Router, get};

#[allow(clippy::print_stderr, reason = "a skipped test says why")]
fn start(dir: &std::path::Path) -> Option<Nginx> {
    let mut n = Nginx::start(dir, 2, "1.0.0");
    if let Some(n) = &mut n {
        n.log_traffic();
    }
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
    fixture_with(n, &format!("router: {check}"))
}

/// [`fixture`] with any analysis (`router: {…}`, `compare: {…}`).
fn fixture_with(n: &Nginx, analysis: &str) -> Fixture {
    let app = format!(
        "application: web\nartifact: {{type: directory, version: \"2.0.0\", uri: \"{}\"}}\n\
         deploy:\n  plugin: edge\nstrategy:\n  canary:\n    steps:\n      - weight: 50\n      \
         - pause: {{}}\n      - analysis: {{{analysis}}}\n      - pause: {{}}\n\
         max_retries: 1\nbackoff: {{base: 100ms, max: 200ms}}\nenvironments:\n  prod:\n    \
         targets:\n{}",
        n.artifact_uri(),
        n.targets_yml()
    );
    Fixture::new(&n.manent_yml("edge"), &[("web", &app)])
}

/// `n` requests through the front: how many did not get a 200.
fn send(n: &Nginx, requests: usize) -> usize {
    send_to(n.front(), requests)
}

/// `n` requests to the router's front on `port`: how many did not get a 200.
fn send_to(port: u16, requests: usize) -> usize {
    (0..requests).filter(|_| get(port, None).is_err()).count()
}

/// Deploys to the first pause, sends `requests`, and ends the pause: the analysis runs.
fn analysed(n: &Nginx, fx: &Fixture, requests: usize) -> (std::process::Output, String, usize) {
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
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
    // Every request the client sent (the front logs from the test's start on).
    let total = candidate["requests"].as_u64().unwrap() + stable["requests"].as_u64().unwrap();
    assert_eq!(total, 400, "{run}");
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
    // Past the analysis, waiting at the next pause; the command said the run as it came.
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    assert!(
        said(&out).contains("[analysis] analysis 1/1 at step 3 passed: candidate 2.0.0 (green): "),
        "{}",
        said(&out)
    );
    let v = fx.status(&id);
    let run = &v["canary"]["status"]["runs"][0];
    assert_eq!(run["verdict"], "pass", "{run}");
    let value = run["value"].as_str().unwrap();
    // Every request was sent after the candidate began serving: its window starts there.
    for part in [
        "candidate 2.0.0",
        "5xx 0%",
        "stable",
        "p99",
        "since 2.0.0 began serving",
    ] {
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
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
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
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
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
    // `status` says the last reading in words.
    let said = text(&fx.run(&["status", &id]).stdout);
    assert!(
        said.contains("traffic (last ") && said.contains("candidate 5xx"),
        "{said}"
    );
}

#[test]
fn background_analysis_reverts_a_held_canary_when_its_real_traffic_fails() {
    background_reverts::<Nginx>();
}

/// HAProxy reports its counters (no latency quantiles): the same revert from its own record.
#[test]
fn on_haproxy_background_analysis_reverts_a_held_canary_when_its_real_traffic_fails() {
    background_reverts::<crate::support::haproxy::Haproxy>();
}

#[allow(clippy::print_stderr, reason = "a skipped test says why")]
fn background_reverts<R: Router>() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut n) = R::start(&dir.path().join(R::NAME), 2, "1.0.0") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} is required in CI (.ci/run installs it)",
            R::NAME
        );
        eprintln!("skipped: {} is not installed", R::NAME);
        return;
    };
    n.log_traffic();
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
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    let id = fx.deployments().pop().unwrap();
    let mut worker = fx.spawn_with(&["worker"], &[]);
    // An operator holds it at 50%: the steps wait, the background analysis does not.
    let out = fx.run(&["weight", &id, "50"]);
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut v = fx.status(&id);
    while std::time::Instant::now() < deadline && v["state"] != "reverted" {
        send_to(n.front(), 100);
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
    // One automatic revert is one decision and one journal line.
    let reverts = v["canary"]["status"]["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["action"] == "revert")
        .count();
    assert_eq!(reverts, 1, "{v}");
    let journal = text(&fx.run(&["history", "web", "prod", "--json"]).stdout);
    let journal: serde_json::Value = serde_json::from_str(&journal).unwrap();
    let journaled = journal["journal"]
        .as_array()
        .map_or(0, |j| j.iter().filter(|e| e["action"] == "revert").count());
    assert_eq!(journaled, 1, "{journal}");
    let said = text(&fx.run(&["status", &id]).stdout);
    assert!(
        said.contains("background analysis (router traffic over 1m"),
        "{said}"
    );
    // Reverted: the candidate takes nothing.
    assert_eq!(n.sample(100, None, "2.0.0"), (0, 0));
}

/// A real Prometheus (Debian's `prometheus`) on a loopback port, scraping `target` every
/// second, its data in `dir`; stopped when dropped.
struct Prometheus {
    child: std::process::Child,
    port: u16,
}

impl Prometheus {
    #[allow(clippy::print_stderr, reason = "a skipped test says why")]
    fn start(dir: &std::path::Path, target: u16) -> Option<Prometheus> {
        let bin = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
            .into_iter()
            .find(|p| std::path::Path::new(p).is_file());
        let Some(bin) = bin else {
            assert!(
                std::env::var_os("CI").is_none(),
                "prometheus is required in CI (.ci/run installs it)"
            );
            eprintln!("skipped: prometheus is not installed");
            return None;
        };
        let port = crate::support::router::free_port();
        let cfg = dir.join("prometheus.yml");
        std::fs::write(
            &cfg,
            format!(
                "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n  - \
                 job_name: app\n    static_configs: [{{targets: ['127.0.0.1:{target}']}}]\n"
            ),
        )
        .unwrap();
        let child = std::process::Command::new(bin)
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        Some(Prometheus { child, port })
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Waits until `query` has a number (the scrapes that `rate` needs have come).
    fn wait_for(&self, query: &str) {
        let q: String = query
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        crate::support::fleet::wait_until(
            std::time::Duration::from_secs(60),
            "Prometheus to have the series",
            || {
                crate::support::router::get_path(
                    self.port,
                    &format!("/api/v1/query?query={q}"),
                    None,
                )
                .is_ok_and(|b| b.contains("\"value\":[") && !b.contains("NaN"))
            },
        );
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An application's exporter on a loopback port: per slot, requests and 5xx counters growing
/// with time — the candidate (green) answers 5% of its requests with 5xx, stable (blue) none.
/// Green's counters move together (one error per 20 requests), so any window Prometheus rates
/// them over holds exactly 5%: counters floored apart read 4.95% at some scrapes.
fn exporter() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let started = std::time::Instant::now();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            use std::io::{Read, Write};
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let t = started.elapsed().as_secs_f64();
            let body = format!(
                "# TYPE app_requests_total counter\n\
                 app_requests_total{{slot=\"green\"}} {}\napp_requests_total{{slot=\"blue\"}} {}\n\
                 # TYPE app_errors_total counter\n\
                 app_errors_total{{slot=\"green\"}} {}\napp_errors_total{{slot=\"blue\"}} 0\n",
                (t * 5.0).floor() * 20.0,
                (t * 100.0).floor(),
                (t * 5.0).floor()
            );
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: \
                 {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[test]
fn a_promql_analysis_on_a_real_prometheus_reverts_over_its_limit_and_passes_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let Some(prom) = Prometheus::start(dir.path(), exporter()) else {
        return;
    };
    let query = "sum(rate(app_errors_total{slot=\"{{slot}}\"}[4s])) / \
                 sum(rate(app_requests_total{slot=\"{{slot}}\"}[4s]))";
    prom.wait_for(&query.replace("{{slot}}", "green"));
    let app = |max: &str| {
        format!(
            "application: web\nartifact: {{version: \"2.0.0\"}}\ndeploy: {{plugin: fleet}}\n\
             strategy:\n  canary:\n    steps:\n      - weight: 50\n      - pause: 5s\n      \
             - analysis: {{prometheus: {{url: \"{}\", query: '{query}', max: {max}}}}}\n      \
             - pause: {{}}\n\
             environments:\n  prod:\n    targets: [{{name: web-1}}, {{name: web-2}}]\n",
            prom.url()
        )
    };
    let yml = "plugins:\n  fleet: {builtin: simulate}\n";
    // 5% of the candidate's requests fail: over a 1% limit, reverted, the value said.
    let fx = Fixture::new(yml, &[("web", &app("0.01"))]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(4), "{}", said(&out));
    let id = fx.deployments().pop().unwrap();
    let v = fx.status(&id);
    assert_eq!(v["state"], "reverted", "{v}");
    let why = v["report"]["message"].as_str().unwrap_or_default();
    for part in ["0.05", "> 0.01", "slot=\"green\"", &prom.url()] {
        assert!(why.contains(part), "{part:?} in {why}");
    }
    // Under a 10% limit the same candidate passes and the canary goes on to its pause.
    let fx = Fixture::new(yml, &[("web", &app("0.1"))]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    let v = fx.status(&fx.deployments().pop().unwrap());
    let run = &v["canary"]["status"]["runs"][0];
    assert_eq!(run["verdict"], "pass", "{run}");
    assert!(run["value"].as_str().unwrap().contains("0.05"), "{run}");
}

#[test]
fn a_comparison_with_stable_reverts_a_candidate_whose_5xx_stable_does_not_have() {
    let dir = tempfile::tempdir().unwrap();
    let Some(n) = start(dir.path()) else {
        return;
    };
    n.build_failing("2.0.0");
    let fx = fixture_with(
        &n,
        "compare: {metric: error_rate, against: stable, max_increase: 1%, min_requests: 100, \
         window: 10s}",
    );
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    let id = fx.deployments().pop().unwrap();
    // Requests spread over the window: the comparison ranks it second by second.
    for _ in 0..16 {
        send(&n, 60);
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let out = fx.run(&["promote", &id]);
    assert_eq!(out.status.code(), Some(4), "{}", said(&out));
    let v = fx.status(&id);
    let why = v["report"]["message"].as_str().unwrap_or_default();
    for part in [
        "error rate above stable's by more than allowed",
        "Mann–Whitney (one-sided)",
        "Hodges–Lehmann",
        "allowed +1% points",
        "stable",
    ] {
        assert!(why.contains(part), "{part:?} in {why}");
    }
}

#[test]
fn a_comparison_catches_a_latency_regression_stable_does_not_have() {
    let sim = |candidate_p99: &str| {
        format!(
            "plugins:\n  fleet:\n    builtin: simulate\n    traffic: {{rate: 200, stable: {{p99: \
             80ms}}, candidate: {{p99: {candidate_p99}}}}}\n"
        )
    };
    let app = "application: web\nartifact: {version: \"2.0.0\"}\ndeploy: {plugin: fleet}\n\
               strategy:\n  canary:\n    steps:\n      - weight: 50\n      - pause: 6s\n      \
               - analysis: {compare: {metric: p99, max_increase: 20%, window: 20s}}\n      \
               - pause: {}\n\
               environments:\n  prod:\n    targets: [{name: web-1}, {name: web-2}]\n";
    // 150ms against stable's 80ms: more than 20% higher, and no accident.
    let fx = Fixture::new(&sim("150ms"), &[("web", app)]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(4), "{}", said(&out));
    let v = fx.status(&fx.deployments().pop().unwrap());
    let why = v["report"]["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("p99 above stable's by more than allowed") && why.contains("of stable's"),
        "{why}"
    );
    // 84ms: within 20% of stable's, it passes to the pause.
    let fx = Fixture::new(&sim("84ms"), &[("web", app)]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
}

#[test]
fn a_router_analysis_killed_mid_window_resumes_without_counting_a_run_twice() {
    let fx = Fixture::new(
        "plugins:\n  fleet:\n    builtin: simulate\n    log_lines: 0\n    traffic: {rate: 200}\n",
        &[(
            "web",
            "application: web\nartifact: {version: \"2.0.0\"}\ndeploy: {plugin: fleet}\n\
             strategy:\n  canary:\n    steps:\n      - weight: 50\n      - analysis: {router: \
             {max_error_rate: 1%, min_requests: 10, window: 5s}, count: 4, interval: 700ms}\n      \
             - weight: 100\nenvironments:\n  prod:\n    targets: [{name: web-1}, {name: web-2}]\n",
        )],
    );
    let args = ["deploy", "web", "prod", "--yes"];
    let mut child = fx.spawn_with(&args, &[]);
    crate::support::fleet::wait_until(
        std::time::Duration::from_secs(60),
        "the second analysis run",
        || {
            fx.deployments().pop().is_some_and(|id| {
                let v = fx.status(&id);
                v["phase"]["doing"] == "analysis" && v["phase"]["run"].as_u64() >= Some(2)
            })
        },
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let id = fx.deployments().pop().unwrap();
    // The next command resumes it: the runs recorded stay, the rest run, none twice.
    let out = fx.run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let v = fx.status(&id);
    assert_eq!(v["state"], "deployed", "{v}");
    let runs: Vec<u64> = v["canary"]["status"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run"].as_u64().unwrap())
        .collect();
    assert_eq!(runs, [1, 2, 3, 4], "{v}");
    let checks = fx
        .steps(&id)
        .iter()
        .filter(|(_, name)| name == "canary.check")
        .count();
    assert_eq!(checks, 4);
}

/// `promote` runs the analysis in a new process, with a new plugin: its window still starts at
/// the reading taken before the weight gave the candidate traffic (kept beside the plugin's
/// file), so what the clients sent meanwhile is judged, and nothing from before.
#[test]
fn on_haproxy_a_fresh_commands_router_analysis_judges_the_traffic_of_a_moment() {
    use crate::support::haproxy::Haproxy;
    let dir = tempfile::tempdir().unwrap();
    let Some(h) = Haproxy::start(&dir.path().join("haproxy"), 2, "1.0.0") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "haproxy is required in CI (.ci/run installs it)"
        );
        return;
    };
    h.build_failing("2.0.0");
    let app = format!(
        "application: web\nartifact: {{type: directory, version: \"2.0.0\", uri: \"{}\"}}\n\
         deploy:\n  plugin: edge\nstrategy:\n  canary:\n    steps:\n      - weight: 50\n      \
         - pause: {{}}\n      - analysis: {{router: {{max_error_rate: 1%, min_requests: 20, \
         window: 1m}}}}\n      - pause: {{}}\nenvironments:\n  prod:\n    targets:\n{}",
        h.artifact_uri(),
        h.targets_yml()
    );
    let fx = Fixture::new(&h.manent_yml("edge"), &[("web", &app)]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    let id = fx.deployments().pop().unwrap();
    // Clients keep sending while `promote` (a new process, a new plugin) runs the analysis.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let port = h.front();
    let client = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = get(port, None);
            }
        })
    };
    let out = fx.run(&["promote", &id]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    client.join().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", said(&out));
    let why = fx.status(&id)["report"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for part in [
        "5xx",
        "> 1%",
        "HAProxy's counters",
        "since 2.0.0 began serving",
    ] {
        assert!(why.contains(part), "{part:?} in {why}");
    }
}
