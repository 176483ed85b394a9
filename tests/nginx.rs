#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]
//! Canary releases over a real nginx, started by the test on loopback ports with its own prefix:
//! `manent-plugin-nginx` (an external plugin built with the Rust SDK) moves real traffic. The
//! split nginx serves matches the weight, testers always reach the candidate, a request loop
//! through 20 weight changes sees no failed request, a revert leaves the candidate without
//! traffic, promote leaves only the new version, an analysis over HTTP that fails reverts and
//! says why, and broken set-ups are errors that name the file and the fix.

#[path = "support/fleet.rs"]
mod fleet;
#[path = "support/nginx.rs"]
mod nginx;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use fleet::{Fixture, text};
use nginx::Nginx;

#[allow(clippy::print_stderr, reason = "a skipped test says why")]
fn start(dir: &std::path::Path, servers: usize) -> Option<Nginx> {
    let n = Nginx::start(dir, servers, "1.0.0");
    if n.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "nginx is required in CI (apt-get install nginx-light)"
        );
        eprintln!("skipped: nginx is not installed");
    }
    n
}

fn app(n: &Nginx, steps: &str) -> String {
    format!(
        "application: web\nartifact: {{type: directory, version: \"2.0.0\", uri: \"{}\"}}\ndeploy:\n  plugin: edge\n\
         strategy:\n  canary:\n    steps:\n{steps}max_retries: 1\nbackoff: {{base: 100ms, max: 200ms}}\n\
         environments:\n  prod:\n    targets:\n{}",
        n.artifact_uri(),
        n.targets_yml()
    )
}

/// The share of `n` requests that reached `version`, in percent, and the failures.
fn share(nginx: &Nginx, version: &str, n: usize) -> (f64, usize) {
    let (hits, failed) = nginx.sample(n, None, version);
    (100.0 * hits as f64 / n as f64, failed)
}

fn id_of(fx: &Fixture) -> String {
    fx.deployments().pop().unwrap()
}

#[test]
fn the_split_nginx_serves_follows_the_canary_and_nothing_fails_while_it_moves() {
    let dir = tempfile::tempdir().unwrap();
    let Some(n) = start(dir.path(), 2) else {
        return;
    };
    n.build("2.0.0", true);
    n.build("3.0.0", true);
    let steps = "      - testers: {}\n      - weight: 10\n      - pause: {}\n      - weight: 25\n      - pause: {}\n      - weight: 50\n      - pause: {}\n";
    let fx = Fixture::new(&n.manent_yml("edge"), &[("web", &app(&n, steps))]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(
        out.status.code(),
        Some(7),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let id = id_of(&fx);
    // An engine keeps running, as a console or a worker would: the verbs hand it their work.
    let worker = Worker(fx.spawn_with(&["worker"], &[]));
    // Each weight, measured over 2,000 requests: within ±3 points.
    for (weight, promote) in [(10.0, true), (25.0, true), (50.0, false)] {
        let (got, failed) = share(&n, "2.0.0", 2000);
        assert_eq!(failed, 0, "{}", n.error_log());
        assert!(
            (got - weight).abs() <= 3.0,
            "weight {weight}: {got}% reached the candidate"
        );
        // Testers always reach the candidate.
        let (hits, _) = n.sample(100, Some(("X-Canary", "1")), "2.0.0");
        assert_eq!(hits, 100, "testers at weight {weight}");
        if promote {
            let out = fx.run(&["promote", &id]);
            assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
        }
    }
    // Twenty weight changes while four clients send requests: not one fails.
    let stop = Arc::new(AtomicBool::new(false));
    let (sent, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (stop, sent, failed, port) = (stop.clone(), sent.clone(), failed.clone(), n.front);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    sent.fetch_add(1, Ordering::Relaxed);
                    if nginx::get(port, None).is_err() {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for i in 0..20u32 {
        let w = (i * 37 + 5) % 100;
        let out = fx.run(&["weight", &id, &w.to_string()]);
        assert_eq!(
            out.status.code(),
            Some(7),
            "weight {w}: {}",
            text(&out.stderr)
        );
    }
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    assert!(sent.load(Ordering::Relaxed) > 100, "the clients ran");
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "failed requests out of {} during 20 weight changes\n{}",
        sent.load(Ordering::Relaxed),
        n.error_log()
    );
    // Revert: no request reaches the candidate, testers neither.
    let out = fx.run(&["revert", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(n.sample(500, None, "2.0.0"), (0, 0));
    assert_eq!(n.sample(50, Some(("X-Canary", "1")), "2.0.0").0, 0);
    assert_eq!(n.sample(50, None, "1.0.0").0, 50);
    // A new canary goes to the slot that is not stable; promoted, only it answers.
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", "3.0.0"]);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    let id = id_of(&fx);
    let out = fx.run(&["promote", "--full", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(n.sample(500, None, "3.0.0"), (500, 0));
    let out = fx.run(&["history", "web", "prod", "--json"]);
    let h: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let live: Vec<&str> = h["releases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["rolled_back_by"].is_null())
        .map(|r| r["version"].as_str().unwrap())
        .collect();
    assert!(
        live.iter().all(|v| *v == "3.0.0") && live.len() >= 2,
        "{live:?}"
    );
    drop(worker);
}

/// A `manent worker`, stopped (SIGTERM) when dropped.
struct Worker(std::process::Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

#[test]
fn failed_analysis_over_http_reverts_and_names_the_url_the_status_and_the_count() {
    let dir = tempfile::tempdir().unwrap();
    let Some(n) = start(dir.path(), 1) else {
        return;
    };
    // The candidate has no health page: testers asking for it get 404.
    n.build("2.0.0", false);
    let url = format!("http://127.0.0.1:{}/health", n.front);
    let steps = format!(
        "      - testers: {{}}\n      - weight: 10\n      - analysis: {{http: {{url: \"{url}\", tester: true}}, count: 3, interval: 200ms, failure_limit: 2}}\n      - weight: 50\n"
    );
    let fx = Fixture::new(&n.manent_yml("edge"), &[("web", &app(&n, &steps))]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let v = fx.status(&id_of(&fx));
    assert_eq!(v["state"], "reverted");
    let why = v["report"]["message"].as_str().unwrap();
    for part in [
        &url as &str,
        "status 404 (expected 200)",
        "failed 2 of 2 runs (limit 2)",
    ] {
        assert!(why.contains(part), "{part:?} in {why}");
    }
    assert_eq!(n.sample(200, None, "2.0.0"), (0, 0), "reverted: no traffic");
}

#[test]
fn broken_set_ups_are_errors_that_name_the_file_and_keep_nginx_running() {
    let dir = tempfile::tempdir().unwrap();
    let Some(n) = start(dir.path(), 1) else {
        return;
    };
    n.build("2.0.0", true);
    let steps = "      - weight: 10\n      - pause: {}\n";
    // An nginx binary that is not there.
    let manent = n
        .manent_yml("edge")
        .replace(&n.bin.display().to_string(), "/nonexistent/nginx");
    let fx = Fixture::new(&manent, &[("web", &app(&n, steps))]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("cannot run /nonexistent/nginx") && all.contains("install nginx"),
        "{all}"
    );
    // A config that does not use the pool the plugin renders: nginx -t fails at validation.
    let conf = std::fs::read_to_string(&n.conf).unwrap();
    std::fs::write(&n.conf, conf.replace("$web_pool", "$web_pool_typo")).unwrap();
    let fx = Fixture::new(&n.manent_yml("edge"), &[("web", &app(&n, steps))]);
    let before = std::fs::read_to_string(&n.upstreams).unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("nginx -t fails") && all.contains("web_pool_typo"),
        "{all}"
    );
    assert_eq!(
        std::fs::read_to_string(&n.upstreams).unwrap(),
        before,
        "untouched"
    );
    std::fs::write(&n.conf, conf).unwrap();
    assert_eq!(n.sample(20, None, "1.0.0"), (20, 0), "nginx still serves");
    // An upstreams file in a directory the plugin cannot write: named, with the fix.
    let manent = n
        .manent_yml("edge")
        .replace(&n.upstreams.display().to_string(), "/proc/manent-web.conf");
    let fx = Fixture::new(&manent, &[("web", &app(&n, steps))]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("cannot write in /proc"), "{all}");
    // A target without its slots' addresses.
    let bad = app(&n, steps).replace("blue: ", "bleu: ");
    let fx = Fixture::new(&n.manent_yml("edge"), &[("web", &bad)]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(all.contains("has no `blue` label"), "{all}");
    assert_eq!(n.sample(20, None, "1.0.0"), (20, 0));
}

#[test]
fn a_canary_killed_while_it_waits_serves_the_recorded_weight_after_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let Some(n) = start(dir.path(), 1) else {
        return;
    };
    n.build("2.0.0", true);
    let steps = "      - weight: 20\n      - pause: 1h\n      - weight: 60\n";
    let fx = Fixture::new(&n.manent_yml("edge"), &[("web", &app(&n, steps))]);
    let mut child = fx.spawn_with(&["deploy", "web", "prod", "--yes"], &[]);
    fleet::wait_until(Duration::from_secs(60), "the timed pause", || {
        fx.deployments().pop().is_some_and(|id| {
            let v = fx.status(&id);
            v["phase"]["doing"] == "timed"
        })
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let id = id_of(&fx);
    // While no engine runs, the router drifts: someone puts everything back on blue.
    let rendered = std::fs::read_to_string(&n.upstreams).unwrap();
    assert!(rendered.contains("weight=20 "), "{rendered}");
    let (head, rest) = rendered.split_once("upstream web_split {").unwrap();
    let (_, tail) = rest.split_once('}').unwrap();
    let drifted = format!(
        "{}upstream web_split {{\n    server 127.0.0.1:{};\n}}{tail}",
        head.replace("weight=20 ", "weight=0 "),
        n.servers[0].blue
    );
    std::fs::write(&n.upstreams, drifted).unwrap();
    assert!(
        std::process::Command::new(&n.bin)
            .arg("-p")
            .arg(&n.prefix)
            .arg("-c")
            .arg(&n.conf)
            .args(["-s", "reload"])
            .status()
            .unwrap()
            .success()
    );
    fleet::wait_until(Duration::from_secs(10), "the drift to be served", || {
        n.sample(50, None, "2.0.0").0 == 0
    });
    // The next engine re-asserts the recorded 20% before it goes on waiting.
    let mut resumed = fx.spawn_with(&["resume", &id], &[]);
    fleet::wait_until(Duration::from_secs(30), "the weight re-asserted", || {
        std::fs::read_to_string(&n.upstreams).is_ok_and(|t| t.contains("weight=20 "))
    });
    std::thread::sleep(Duration::from_millis(300));
    let (got, failed) = share(&n, "2.0.0", 1000);
    assert_eq!(failed, 0);
    assert!(
        (got - 20.0).abs() <= 4.0,
        "after the restart {got}% reached the candidate"
    );
    resumed.kill().unwrap();
    resumed.wait().unwrap();
    // With no engine running, an operator promotes: taken once when the next one starts.
    let out = fx.run(&["promote", &id]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "promoted past the pause, to 60%, the end: {}",
        text(&out.stderr)
    );
    let v = fx.status(&id);
    assert_eq!(v["state"], "deployed");
    assert_eq!(n.sample(200, None, "2.0.0"), (200, 0));
    let journal = fx.run(&["history", "web", "prod", "--json"]);
    let h: serde_json::Value = serde_json::from_slice(&journal.stdout).unwrap();
    let promotes = h["journal"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["action"] == "promote")
        .count();
    assert_eq!(promotes, 1);
}
