//! Canary releases over real routers — nginx and HAProxy, each started by the test on loopback
//! ports — through one suite: what manent says is where traffic goes, measured by a real
//! client. The split is exact and testers always reach the candidate; no request fails
//! through 20 weight changes; revert leaves the candidate without traffic and promote leaves
//! only the new version; a configuration manent did not write is read by its addresses, not
//! guessed; a router that fails a change makes the canary wait for a decision with nothing
//! half-applied; drift (a hand edit, a reload without manent's file) is seen within
//! `canary.watch` and corrected or held; `status` with no engine reads the router itself; a
//! killed engine resumes at the recorded weight.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::fleet;
use crate::support::haproxy;
use crate::support::nginx;
use crate::support::router;
use fleet::{Fixture, said, text};
use router::Router;

#[allow(clippy::print_stderr, reason = "a skipped test says why")]
fn start<R: Router>(dir: &std::path::Path, servers: usize) -> Option<R> {
    let r = R::start(dir, servers, "1.0.0");
    if r.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} is required in CI (.ci/run installs it)",
            R::NAME
        );
        eprintln!("skipped: {} is not installed", R::NAME);
    }
    r
}

/// A canary descriptor of `web` over the router's targets; the router is watched every 500ms.
fn app<R: Router>(r: &R, steps: &str, extra: &str) -> String {
    format!(
        "application: web\nartifact: {{type: directory, version: \"2.0.0\", uri: \"{}\"}}\ndeploy:\n  plugin: edge\n\
         strategy:\n  canary:\n    watch: 500ms\n{extra}    steps:\n{steps}max_retries: 1\nbackoff: {{base: 100ms, max: 200ms}}\n\
         environments:\n  prod:\n    targets:\n{}",
        r.artifact_uri(),
        r.targets_yml()
    )
}

/// A fixture whose canary of `web` was deployed and waits for an operator: its id.
fn paused<R: Router>(r: &R, steps: &str, extra: &str) -> (Fixture, String) {
    let fx = Fixture::new(&r.manent_yml("edge"), &[("web", &app(r, steps, extra))]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    let id = id_of(&fx);
    (fx, id)
}

fn id_of(fx: &Fixture) -> String {
    fx.deployments().pop().unwrap()
}

fn logs(fx: &Fixture, id: &str) -> String {
    text(&fx.run(&["logs", id]).stdout)
}

/// A `manent worker`, stopped (SIGTERM) when dropped.
struct Worker(std::process::Child);

impl Drop for Worker {
    fn drop(&mut self) {
        fleet::sigterm(&self.0);
        let _ = self.0.wait();
    }
}

/// A process killed when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until a worker took the canary over (it read the router back).
fn resumed(fx: &Fixture, id: &str) {
    fleet::wait_until(
        Duration::from_secs(30),
        "the worker to take the canary",
        || logs(fx, id).contains("canary resumed"),
    );
}

fn assert_share<R: Router>(r: &R, version: &str, want: f64, what: &str) {
    let (got, failed) = r.share(version, 1000);
    assert_eq!(failed, 0, "{what}: failed requests\n{}", r.error_log());
    assert!(
        (got - want).abs() <= 3.0,
        "{what}: {got}% reached {version}, expected {want}%"
    );
}

/// Waits until `version` gets `want`% (±3) of requests.
fn serves<R: Router>(r: &R, version: &str, want: f64, what: &str) {
    fleet::wait_until(Duration::from_secs(30), what, || {
        let (got, _) = r.share(version, 200);
        (got - want).abs() <= 5.0
    });
    assert_share(r, version, want, what);
}

fn split_follows_the_canary_and_nothing_fails_while_it_moves<R: Router>() {
    let dir = tempfile::tempdir().unwrap();
    let Some(n) = start::<R>(dir.path(), 2) else {
        return;
    };
    n.build("2.0.0", true);
    n.build("3.0.0", true);
    let steps = "      - testers: {}\n      - weight: 10\n      - pause: {}\n      - weight: 25\n      - pause: {}\n      - weight: 50\n      - pause: {}\n";
    let fx = Fixture::new(&n.manent_yml("edge"), &[("web", &app(&n, steps, ""))]);
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
        let (got, failed) = n.share("2.0.0", 2000);
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
            assert_eq!(
                out.status.code(),
                Some(7),
                "{}\n{}\n{}",
                text(&out.stderr),
                text(&out.stdout),
                fx.status(&id)
            );
        }
    }
    // Twenty weight changes while four clients send requests: not one fails.
    let stop = Arc::new(AtomicBool::new(false));
    let (sent, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (stop, sent, failed, port) =
                (stop.clone(), sent.clone(), failed.clone(), n.front());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    sent.fetch_add(1, Ordering::Relaxed);
                    if router::get(port, None).is_err() {
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
    // Revert: no request reaches the candidate, testers neither; it is out of every pool.
    let out = fx.run(&["revert", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(n.sample(500, None, "2.0.0"), (0, 0));
    assert_eq!(n.sample(50, Some(("X-Canary", "1")), "2.0.0").0, 0);
    assert_eq!(n.sample(50, None, "1.0.0").0, 50);
    let v = fx.status(&id);
    assert_eq!(v["state"], "reverted");
    assert_eq!(v["phase"]["phase"], "done", "a revert is not a failure");
    let status = text(&fx.run(&["status", &id]).stdout);
    assert!(!status.contains("testers send"), "{status}");
    // A new canary goes to the slot that is not stable; promoted, only it answers.
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", "3.0.0"]);
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    let id = id_of(&fx);
    let out = fx.run(&["promote", "--full", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(n.sample(500, None, "3.0.0"), (500, 0));
    // The next canary leaves the live 3.0.0 alone: it goes to the other slot.
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", "2.0.0"]);
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    let id = id_of(&fx);
    assert!(
        logs(&fx, &id).contains("manent's records: slot"),
        "{}",
        logs(&fx, &id)
    );
    assert_share(
        &n,
        "3.0.0",
        90.0,
        "3.0.0 stays live beside the candidate's 10%",
    );
    let out = fx.run(&["revert", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(n.sample(200, None, "3.0.0"), (200, 0));
    assert!(n.leftovers().is_empty(), "{:?}", n.leftovers());
    drop(worker);
}

fn a_failed_analysis_reverts_and_names_the_url_the_status_and_the_count<R: Router>() {
    let dir = tempfile::tempdir().unwrap();
    let Some(n) = start::<R>(dir.path(), 1) else {
        return;
    };
    // The candidate has no health page: testers asking for it get 404.
    n.build("2.0.0", false);
    let url = format!("http://127.0.0.1:{}/health", n.front());
    let steps = format!(
        "      - testers: {{}}\n      - weight: 10\n      - analysis: {{http: {{url: \"{url}\", tester: true}}, count: 3, interval: 200ms, failure_limit: 2}}\n      - weight: 50\n"
    );
    let fx = Fixture::new(&n.manent_yml("edge"), &[("web", &app(&n, &steps, ""))]);
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
        "read back",
    ] {
        assert!(why.contains(part), "{part:?} in {why}");
    }
    assert_eq!(n.sample(200, None, "2.0.0"), (0, 0), "reverted: no traffic");
}

fn broken_set_ups_are_errors_that_name_the_file_and_keep_the_router_running<R: Router>() {
    let dir = tempfile::tempdir().unwrap();
    let Some(n) = start::<R>(dir.path(), 1) else {
        return;
    };
    n.build("2.0.0", true);
    let steps = "      - weight: 10\n      - pause: {}\n";
    // A configuration check that fails: refused before anything is touched.
    n.break_check(true);
    let fx = Fixture::new(&n.manent_yml("edge"), &[("web", &app(&n, steps, ""))]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("fails before anything changed"), "{all}");
    n.break_check(false);
    assert_eq!(n.sample(20, None, "1.0.0"), (20, 0), "still serving");
    // A target without its slots' addresses.
    let bad = app(&n, steps, "").replace("blue: ", "bleu: ");
    let fx = Fixture::new(&n.manent_yml("edge"), &[("web", &bad)]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(all.contains("has no `blue` label"), "{all}");
    // An address that would add a server or an include: refused at validation.
    for evil in [
        "127.0.0.1:18201 weight=1; server 127.0.0.1:18299 weight=100",
        "127.0.0.1:18201; include /etc/shadow",
    ] {
        let labels = app(&n, steps, "");
        let start = labels.find("blue: \"").unwrap() + "blue: \"".len();
        let end = start + labels[start..].find('"').unwrap();
        let bad = format!("{}{evil}{}", &labels[..start], &labels[end..]);
        let fx = Fixture::new(&n.manent_yml("edge"), &[("web", &bad)]);
        let out = fx.run(&["deploy", "web", "prod", "--yes"]);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{all}");
        assert!(all.contains("label `blue`"), "{evil}: {all}");
    }
    assert_eq!(n.sample(20, None, "1.0.0"), (20, 0));
    assert!(n.leftovers().is_empty(), "{:?}", n.leftovers());
}

/// A link another user plants where the plugin stages its file is never written through: in
/// a directory they may write, the plugin refuses it naming the directory; planted before the
/// directory was made the engine's own, it is replaced by a new file. The file it pointed at is
/// untouched either way.
fn a_link_planted_where_the_plugin_writes_is_never_written_through<R: Router>() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    if !fleet::me().starts_with("root") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(n) = start::<R>(dir.path(), 1) else {
        return;
    };
    n.build("2.0.0", true);
    let (conf, temp) = n.staged();
    let victim = dir.path().join("precious");
    std::fs::write(&victim, "root's own\n").unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o777)).unwrap();
    let planted = std::process::Command::new("ln")
        .arg("-s")
        .arg(&victim)
        .arg(&temp)
        .uid(65534)
        .gid(65534)
        .status()
        .unwrap();
    assert!(planted.success());
    let steps = "      - weight: 10\n      - pause: {}\n";
    let fx = Fixture::new(&n.manent_yml("edge"), &[("web", &app(&n, steps, ""))]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    let all = said(&out);
    assert!(
        all.contains(&conf.display().to_string())
            && all.contains("mode 0777")
            && all.contains("plant a link"),
        "{all}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's own\n");
    assert_eq!(n.sample(20, None, "1.0.0"), (20, 0), "still serving");
    // The directory made the engine's own again, the old link still there: replaced.
    std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o755)).unwrap();
    if let Some(id) = fx.deployments().pop() {
        let _ = fx.run(&["abandon", &id, "--reason", "test", "--yes"]);
        let _ = fx.run(&["cancel", &id]);
    }
    let fx = Fixture::new(&n.manent_yml("edge"), &[("web", &app(&n, steps, ""))]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's own\n");
    assert!(n.leftovers().is_empty(), "{:?}", n.leftovers());
}

fn a_killed_canary_serves_the_recorded_weight_after_the_restart<R: Router>() {
    let dir = tempfile::tempdir().unwrap();
    let Some(n) = start::<R>(dir.path(), 1) else {
        return;
    };
    n.build("2.0.0", true);
    let steps = "      - weight: 20\n      - pause: 1h\n      - weight: 60\n";
    let fx = Fixture::new(&n.manent_yml("edge"), &[("web", &app(&n, steps, ""))]);
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
    assert_share(&n, "2.0.0", 20.0, "before the kill");
    // While no engine runs, the router drifts: someone puts everything back on blue.
    n.edit_weights("green", 0);
    assert_eq!(n.sample(100, None, "2.0.0").0, 0);
    // `status` with no engine reads the router itself.
    let status = text(&fx.run(&["status", &id]).stdout);
    assert!(
        status.contains("no engine is running: last recorded candidate 20%")
            && status.contains("the router serves")
            && status.contains("drift:"),
        "{status}"
    );
    // The next engine reads the router back and sets the recorded 20% again.
    let mut resumed = fx.spawn_with(&["resume", &id], &[]);
    serves(
        &n,
        "2.0.0",
        20.0,
        "the weight re-asserted after the restart",
    );
    resumed.kill().unwrap();
    resumed.wait().unwrap();
    assert!(
        logs(&fx, &id).contains("canary resumed: the router serves something else"),
        "{}",
        logs(&fx, &id)
    );
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

fn a_configuration_manent_did_not_write_is_read_by_its_addresses<R: Router>() {
    let dir = tempfile::tempdir().unwrap();
    let Some(n) = start::<R>(dir.path(), 2) else {
        return;
    };
    // By hand, before manent ever ran here: production on green (1.0.0 there too).
    let green: Vec<_> = n
        .targets_yml()
        .lines()
        .filter_map(|l| l.split("green_root: \"").nth(1))
        .map(|r| std::path::PathBuf::from(r.split('"').next().unwrap()))
        .collect();
    for root in &green {
        std::fs::write(root.join("index.html"), "version 1.0.0\n").unwrap();
    }
    n.hand_written("green");
    n.build("2.0.0", true);
    let steps = "      - weight: 10\n      - pause: {}\n";
    let (fx, id) = paused(&n, steps, "");
    // The candidate went to blue, and gets 10%: what manent says is what is served.
    assert_share(&n, "2.0.0", 10.0, "weight 10 over a hand-written config");
    assert_share(&n, "1.0.0", 90.0, "the stable release on green");
    let log = logs(&fx, &id);
    assert!(
        log.contains("the router serves it from green") && log.contains("not written by manent"),
        "{log}"
    );
    let v = fx.status(&id);
    assert_eq!(v["canary"]["status"]["routing"]["stable"]["slot"], "green");
    let out = fx.run(&["revert", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(n.sample(300, None, "2.0.0"), (0, 0), "reverted");
}

fn a_router_that_fails_a_change_waits_for_a_decision<R: Router>() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut n) = start::<R>(dir.path(), 1) else {
        return;
    };
    n.build("2.0.0", true);
    let steps = "      - weight: 10\n      - pause: {}\n      - weight: 50\n      - pause: {}\n";
    let (fx, id) = paused(&n, steps, "");
    assert_share(&n, "2.0.0", 10.0, "the first step");
    // The router refuses the change (nginx: its check fails; HAProxy: its runtime API): the
    // change waits for a decision, nothing half-applied.
    n.refuse_changes(true);
    let out = fx.run(&["weight", &id, "50"]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    let v = fx.status(&id);
    assert_eq!(v["state"], "failed_awaiting", "{v}");
    assert_eq!(v["phase"]["doing"], "router_failed", "{v}");
    let err = v["canary"]["status"]["router_error"].as_str().unwrap();
    assert!(!err.is_empty(), "{v}");
    assert!(all.contains("the router failed"), "{all}");
    assert!(n.leftovers().is_empty(), "{:?}", n.leftovers());
    assert_share(&n, "2.0.0", 10.0, "untouched while it waits");
    let inbox = text(&fx.run(&["inbox"]).stdout);
    assert!(
        inbox.contains("the router failed") && inbox.contains("retry|revert|weight|abandon"),
        "{inbox}"
    );
    // Revert through a broken router fails too, and waits again (retry or abandon only).
    let out = fx.run(&["revert", &id]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}\n{}\n{}",
        text(&out.stderr),
        text(&out.stdout),
        fx.status(&id)
    );
    let v = fx.status(&id);
    assert_eq!(v["phase"]["reverting"], true, "{v}");
    let refused = text(&fx.run(&["weight", &id, "30"]).stderr);
    assert!(
        refused.contains("it takes retry, abandon there"),
        "{refused}"
    );
    // Mended, a retry reverts: the candidate has no traffic, measured; it says what it retries
    // and ends as `revert` would have (the revert is what was asked).
    n.refuse_changes(false);
    let out = fx.run(&["retry", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert!(
        said(&out).contains("retrying the router's failed call"),
        "{}",
        said(&out)
    );
    assert_eq!(fx.status(&id)["state"], "reverted");
    assert_eq!(n.sample(300, None, "2.0.0"), (0, 0));
    assert!(n.leftovers().is_empty(), "{:?}", n.leftovers());

    // A router that is stopped: the change waits; started again it serves what it had.
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    let id = id_of(&fx);
    n.stop();
    let out = fx.run(&["weight", &id, "50"]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(n.leftovers().is_empty(), "{:?}", n.leftovers());
    n.start_again();
    assert_share(&n, "2.0.0", 10.0, "restarted with the last served split");
    // An operator's weight instead of the failed one: held there.
    let out = fx.run(&["weight", &id, "30"]);
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    assert_share(&n, "2.0.0", 30.0, "the operator's weight");
    // Abandoned with a reason: it ends failed where its traffic is, journaled.
    n.refuse_changes(true);
    let out = fx.run(&["weight", &id, "40"]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let out = fx.run(&["abandon", &id]);
    assert_eq!(out.status.code(), Some(2), "a reason is required");
    let out = fx.run(&[
        "abandon",
        &id,
        "--reason",
        "router under repair, left at 30%",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let v = fx.status(&id);
    assert_eq!(v["state"], "failed");
    assert!(
        v["report"]["message"].as_str().unwrap().contains(&format!(
            "abandoned by {} (router under repair",
            fleet::me()
        )),
        "{v}"
    );
    n.refuse_changes(false);
    assert_share(&n, "2.0.0", 30.0, "abandoned where it was");
    // Revert still works on it: a run of its own takes the candidate out, read back.
    let out = fx.run(&["revert", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(n.sample(300, None, "2.0.0"), (0, 0));
    let reverting = id_of(&fx);
    assert_ne!(reverting, id);
    let v = fx.status(&reverting);
    assert_eq!(v["state"], "reverted", "{v}");
    assert!(
        v["report"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("the candidate {id} left in traffic")),
        "{v}"
    );
}

fn drift_is_seen_and_corrected_or_held<R: Router>() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut n) = start::<R>(dir.path(), 1) else {
        return;
    };
    n.build("2.0.0", true);
    let steps = "      - weight: 20\n      - pause: {}\n";
    let (fx, id) = paused(&n, steps, "");
    let worker = Worker(fx.spawn_with(&["worker"], &[]));
    resumed(&fx, &id);
    // A hand edit sends 80% to the candidate: corrected within the watch.
    n.edit_weights("green", 80);
    serves(&n, "2.0.0", 20.0, "the drift corrected");
    fleet::wait_until(Duration::from_secs(10), "the drift logged", || {
        let l = logs(&fx, &id);
        l.contains("drift on web/prod") && l.contains("drift: corrected")
    });
    // A reload without manent's file: seen, and said in the inbox (correcting cannot help).
    n.unload(true);
    fleet::wait_until(
        Duration::from_secs(20),
        "the unloaded file in the inbox",
        || text(&fx.run(&["inbox"]).stdout).contains("router drift"),
    );
    let status = text(&fx.run(&["status", &id]).stdout);
    assert!(status.contains("drift:"), "{status}");
    n.unload(false);
    // A correction under way when the file comes back may first wait out its 5s confirmation
    // and put the file back: on a loaded machine that is a few cycles.
    fleet::wait_until(Duration::from_secs(45), "the drift over", || {
        !text(&fx.run(&["inbox"]).stdout).contains("router drift")
    });
    assert_share(&n, "2.0.0", 20.0, "served again");
    drop(worker);
    // The first canary's engine (the one its deploy handed it to) stops watching this router.
    fx.stop_workers();

    // `on_drift: hold`: the router is left as it is, the timed steps hold, the inbox says so.
    let steps = "      - weight: 20\n      - pause: 1h\n      - weight: 60\n";
    let fx = Fixture::new(
        &n.manent_yml("edge"),
        &[("web", &app(&n, steps, "    on_drift: hold\n"))],
    );
    let mut deploy = fx.spawn_with(&["deploy", "web", "prod", "--yes"], &[]);
    fleet::wait_until(Duration::from_secs(60), "the timed pause", || {
        fx.deployments()
            .pop()
            .is_some_and(|id| fx.status(&id)["phase"]["doing"] == "timed")
    });
    deploy.kill().unwrap();
    deploy.wait().unwrap();
    let id = id_of(&fx);
    let worker = Worker(fx.spawn_with(&["worker"], &[]));
    resumed(&fx, &id);
    n.edit_weights("green", 70);
    fleet::wait_until(Duration::from_secs(20), "the drift held", || {
        text(&fx.run(&["inbox"]).stdout).contains("held")
    });
    assert_share(&n, "2.0.0", 70.0, "left as the operator's hand set it");
    fleet::wait_until(Duration::from_secs(10), "the canary held", || {
        fx.status(&id)["phase"]["doing"] == "held"
    });
    let journal = text(&fx.run(&["history", "web", "prod"]).stdout);
    assert!(journal.contains("router drift"), "{journal}");
    drop(worker);
}

/// The suite, once per router.
macro_rules! suite {
    ($name:ident, $router:ty) => {
        mod $name {
            use super::*;

            #[test]
            fn split_follows_the_canary_and_nothing_fails_while_it_moves() {
                super::split_follows_the_canary_and_nothing_fails_while_it_moves::<$router>();
            }

            #[test]
            fn a_failed_analysis_reverts_and_names_the_url_the_status_and_the_count() {
                super::a_failed_analysis_reverts_and_names_the_url_the_status_and_the_count::<
                    $router,
                >();
            }

            #[test]
            fn broken_set_ups_are_errors_that_name_the_file_and_keep_the_router_running() {
                super::broken_set_ups_are_errors_that_name_the_file_and_keep_the_router_running::<
                    $router,
                >();
            }

            #[test]
            fn a_link_planted_where_the_plugin_writes_is_never_written_through() {
                super::a_link_planted_where_the_plugin_writes_is_never_written_through::<$router>();
            }

            #[test]
            fn a_killed_canary_serves_the_recorded_weight_after_the_restart() {
                super::a_killed_canary_serves_the_recorded_weight_after_the_restart::<$router>();
            }

            #[test]
            fn a_configuration_manent_did_not_write_is_read_by_its_addresses() {
                super::a_configuration_manent_did_not_write_is_read_by_its_addresses::<$router>();
            }

            #[test]
            fn a_router_that_fails_a_change_waits_for_a_decision() {
                super::a_router_that_fails_a_change_waits_for_a_decision::<$router>();
            }

            #[test]
            fn drift_is_seen_and_corrected_or_held() {
                super::drift_is_seen_and_corrected_or_held::<$router>();
            }
        }
    };
}

suite!(on_nginx, nginx::Nginx);
suite!(on_haproxy, haproxy::Haproxy);

/// What only nginx has: its binary and upstream file named in the plugin's options, and a
/// comment line that used to be read as the truth.
mod nginx_only {
    use super::*;
    use nginx::Nginx;

    #[test]
    fn a_wrong_binary_or_an_unwritable_directory_is_named_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let Some(n) = start::<Nginx>(dir.path(), 1) else {
            return;
        };
        n.build("2.0.0", true);
        let steps = "      - weight: 10\n      - pause: {}\n";
        let manent = n
            .manent_yml("edge")
            .replace(&n.bin.display().to_string(), "/nonexistent/nginx");
        let fx = Fixture::new(&manent, &[("web", &app(&n, steps, ""))]);
        let out = fx.run(&["deploy", "web", "prod", "--yes"]);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{all}");
        assert!(
            all.contains("cannot run /nonexistent/nginx") && all.contains("install nginx"),
            "{all}"
        );
        let manent = n
            .manent_yml("edge")
            .replace(&n.upstreams.display().to_string(), "/proc/manent-web.conf");
        let fx = Fixture::new(&manent, &[("web", &app(&n, steps, ""))]);
        let out = fx.run(&["deploy", "web", "prod", "--yes"]);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{all}");
        assert!(all.contains("cannot write in /proc"), "{all}");
        // The wrong binary mid-canary: the change waits for a decision; mended, a retry goes on.
        // (A worker keeps the configuration it started with: the commands here run their own
        // engine on the file as it is.)
        let (fx, id) = paused(&n, steps, "");
        fx.stop_workers();
        let good = std::fs::read_to_string(fx.config()).unwrap();
        std::fs::write(
            fx.config(),
            good.replace(&n.bin.display().to_string(), "/nonexistent/nginx"),
        )
        .unwrap();
        let out = fx.run(&["weight", &id, "40"]);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{all}");
        assert!(all.contains("cannot run /nonexistent/nginx"), "{all}");
        assert_share(&n, "2.0.0", 10.0, "untouched");
        fx.stop_workers();
        std::fs::write(fx.config(), good).unwrap();
        let out = fx.run(&["retry", &id]);
        assert_eq!(out.status.code(), Some(7), "{}", said(&out));
        assert_share(&n, "2.0.0", 40.0, "the retried weight");
    }

    /// A pid file another local user could replace would let them name their own process as
    /// nginx's master (its title is theirs to set): the plugin trusts none, and says why.
    #[test]
    fn a_pid_file_another_user_could_replace_is_not_trusted() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let Some(n) = start::<Nginx>(dir.path(), 1) else {
            return;
        };
        n.build("2.0.0", true);
        let logs = n.prefix.join("logs");
        let mode = |m: u32| {
            std::fs::set_permissions(&logs, std::fs::Permissions::from_mode(m)).unwrap();
        };
        mode(0o777);
        let steps = "      - weight: 10\n      - pause: {}\n";
        let fx = Fixture::new(&n.manent_yml("edge"), &[("web", &app(&n, steps, ""))]);
        let out = fx.run(&["deploy", "web", "prod", "--yes"]);
        let all = said(&out);
        assert_eq!(out.status.code(), Some(1), "{all}");
        assert!(
            all.contains("mode 777") && all.contains("lets another user replace"),
            "{all}"
        );
        assert_share(&n, "2.0.0", 0.0, "untouched");
        mode(0o755);
        let out = fx.run(&["deploy", "web", "prod", "--yes"]);
        assert_eq!(out.status.code(), Some(7), "{}", said(&out));
        assert_share(&n, "2.0.0", 10.0, "the first step");
    }

    /// nginx's master refuses a reload without a word to whoever sent it: it keeps the file it
    /// runs and writes why in its error log. The plugin reads that log, so the failure says
    /// what nginx said and what to do, as soon as nginx gives up — not that the state location
    /// did not answer, after a timeout — and nginx serves what it served.
    #[test]
    fn a_reload_nginx_refuses_is_said_in_its_own_words_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let Some(n) = start::<Nginx>(dir.path(), 1) else {
            return;
        };
        n.build("2.0.0", true);
        let written = std::fs::read_to_string(&n.upstreams).unwrap();
        // Another program listens on the plugin's state address before nginx does.
        let squatter = std::net::TcpListener::bind(("127.0.0.1", n.state)).unwrap();
        let steps = "      - weight: 10\n      - pause: {}\n";
        let fx = Fixture::new(&n.manent_yml("edge"), &[("web", &app(&n, steps, ""))]);
        let out = fx.run(&["deploy", "web", "prod", "--yes"]);
        let all = said(&out);
        assert_eq!(out.status.code(), Some(1), "{all}");
        let bind = format!(
            "bind() to 127.0.0.1:{} failed (98: Address already in use)",
            n.state
        );
        for part in [
            "its master refused it",
            "logs/error.log",
            &bind,
            "still could not bind()",
            "another program holds",
            "state_listen",
            "the previous file is back",
        ] {
            assert!(all.contains(part), "{part:?} in {all}");
        }
        assert!(!all.contains("did not answer"), "{all}");
        assert_eq!(std::fs::read_to_string(&n.upstreams).unwrap(), written);
        assert_share(&n, "2.0.0", 0.0, "untouched");
        // Once the address is free, the same deploy goes on.
        drop(squatter);
        let out = fx.run(&["deploy", "web", "prod", "--yes"]);
        assert_eq!(out.status.code(), Some(7), "{}", said(&out));
        assert_share(&n, "2.0.0", 10.0, "the first step");
    }

    /// Another local user answers on the plugin's state address exactly what nginx answered
    /// there (a perfect replay): once where the plugin's options point, with nginx up, and
    /// once on nginx's own state address with nginx down. The plugin trusts an answer only
    /// when the other end of its own connection belongs to nginx's master's user, so status
    /// says the router could not be read and who answered — never the replayed split.
    #[test]
    fn another_users_replay_of_the_state_location_is_not_read_as_nginx() {
        let python = std::path::Path::new("/usr/bin/python3");
        let dir = tempfile::tempdir().unwrap();
        let Some(mut n) = start::<Nginx>(dir.path(), 1) else {
            return;
        };
        if !python.exists() {
            assert!(std::env::var_os("CI").is_none(), "CI installs python3");
            return;
        }
        n.build("2.0.0", true);
        let steps = "      - weight: 10\n      - pause: {}\n";
        let (fx, id) = paused(&n, steps, "");
        // What a command reads with no engine running (the deploy handed its canary to one).
        fx.stop_workers();
        let truth = crate::support::router::get_path(n.state, "/manent-state", None).unwrap();
        let v = fx.status(&id);
        assert_eq!(v["canary"]["actual"]["served"]["weight"], 10, "{v}");
        let untrusted = |why: &str| {
            let out = fx.run(&["status", &id]);
            let all = said(&out);
            assert!(all.contains("uid 65534") && all.contains(why), "{all}");
            let v = fx.status(&id);
            assert!(v["canary"]["actual"]["served"].is_null(), "{v}");
        };
        let elsewhere = fleet::free_port();
        let replay = Replay::start(python, 65534, elsewhere, &truth);
        let config = std::fs::read_to_string(fx.config()).unwrap();
        let state = format!("state_listen: 127.0.0.1:{}", n.state);
        assert!(config.contains(&state), "{config}");
        let moved = config.replace(&state, &format!("state_listen: 127.0.0.1:{elsewhere}"));
        std::fs::write(fx.config(), moved).unwrap();
        untrusted("neither nginx's master's (uid 0) nor its workers' (uid 0)");
        drop(replay);
        std::fs::write(fx.config(), config).unwrap();
        n.stop();
        let _replay = Replay::start(python, 65534, n.state, &truth);
        untrusted("nginx's master process is not found");
    }

    /// nginx's master runs as root and its workers as `www-data`, as on most hosts: a socket a
    /// worker accepted is `www-data`'s, and the state read trusts it as nginx's.
    #[test]
    fn workers_of_another_user_than_the_master_are_nginx() {
        let dir = tempfile::tempdir().unwrap();
        let Some(mut n) = start::<Nginx>(dir.path(), 1) else {
            return;
        };
        n.workers_as("www-data");
        n.build("2.0.0", true);
        let steps = "      - weight: 10\n      - pause: {}\n";
        let (fx, id) = paused(&n, steps, "");
        let v = fx.status(&id);
        assert_eq!(v["canary"]["actual"]["served"]["weight"], 10, "{v}");
        assert!(v["canary"]["actual"]["error"].is_null(), "{v}");
        assert_share(&n, "2.0.0", 10.0, "the first step");
        let out = fx.run(&["weight", &id, "40"]);
        assert_eq!(out.status.code(), Some(7), "{}", said(&out));
        assert_share(&n, "2.0.0", 40.0, "set by hand");
        assert_eq!(fx.status(&id)["canary"]["actual"]["served"]["weight"], 40);
        // What a command reads with no engine running (the weight handed its canary to one).
        fx.stop_workers();
        // Another program of the workers' user (PHP-FPM runs as www-data too) replaying
        // nginx's answer is not nginx: no nginx process holds its socket.
        let python = std::path::Path::new("/usr/bin/python3");
        if !python.exists() {
            assert!(std::env::var_os("CI").is_none(), "CI installs python3");
            return;
        }
        let truth = crate::support::router::get_path(n.state, "/manent-state", None).unwrap();
        let elsewhere = fleet::free_port();
        let _replay = Replay::start(python, 33, elsewhere, &truth);
        let config = std::fs::read_to_string(fx.config()).unwrap();
        let state = format!("state_listen: 127.0.0.1:{}", n.state);
        let moved = config.replace(&state, &format!("state_listen: 127.0.0.1:{elsewhere}"));
        std::fs::write(fx.config(), moved).unwrap();
        let out = fx.run(&["status", &id]);
        let all = said(&out);
        assert!(
            all.contains("uid 33") && all.contains("no nginx process holds"),
            "{all}"
        );
        assert!(fx.status(&id)["canary"]["actual"]["served"].is_null());
    }

    /// A server run as `uid` (its group the same number) that answers every request with
    /// `body`, keeping each connection open as nginx does (unless asked to close it).
    struct Replay {
        _server: Killed,
    }

    impl Replay {
        fn start(python: &std::path::Path, uid: u32, port: u16, body: &str) -> Replay {
            use std::io::BufRead as _;
            use std::os::unix::process::CommandExt as _;
            let server = "import socket,sys\nbody=sys.argv[2].encode()\ns=socket.socket()\n\
                          s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
                          s.bind(('127.0.0.1',int(sys.argv[1])))\ns.listen(64)\n\
                          print('ready',flush=True)\nkept=[]\nwhile True:\n    \
                          c,_=s.accept()\n    r=c.recv(4096)\n    c.sendall(b'HTTP/1.1 200 \
                          OK\\r\\nContent-Type: application/json\\r\\nContent-Length: \
                          %d\\r\\n\\r\\n'%len(body)+body)\n    \
                          c.close() if b'Connection: close' in r else kept.append(c)\n";
            let mut child = Killed(
                std::process::Command::new(python)
                    .args(["-c", server, &port.to_string(), body])
                    .uid(uid)
                    .gid(uid)
                    .current_dir("/")
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap(),
            );
            let mut ready = String::new();
            std::io::BufReader::new(child.0.stdout.take().unwrap())
                .read_line(&mut ready)
                .unwrap();
            assert_eq!(ready.trim(), "ready");
            assert_eq!(
                crate::support::router::get_path(port, "/manent-state", None).unwrap(),
                body,
                "the replay"
            );
            Replay { _server: child }
        }
    }

    /// After a reload, nginx's old workers keep taking connections with the previous file for
    /// the 100 ms its master waits before telling them to finish. The plugin tells them once a
    /// worker the reload started is ready, and says a split is served only when none is left;
    /// the master counts them as exiting, so none is started again.
    #[test]
    fn a_weight_said_served_is_served_by_new_workers_only_and_nginx_keeps_its_count() {
        let dir = tempfile::tempdir().unwrap();
        let Some(n) = start::<Nginx>(dir.path(), 1) else {
            return;
        };
        n.build("2.0.0", true);
        let steps = "      - weight: 10\n      - pause: {}\n";
        let (fx, id) = paused(&n, steps, "");
        let started = n.workers();
        assert_eq!(started.len(), 2, "{started:?}");
        for (to, version) in [("100", "2.0.0"), ("0", "1.0.0"), ("100", "2.0.0")] {
            let before = n.workers();
            let out = fx.run(&["weight", &id, to]);
            assert_eq!(out.status.code(), Some(7), "{}", said(&out));
            let now = n.workers();
            assert!(
                now.iter().all(|w| !before.contains(w)),
                "weight {to}: workers from before still take connections: {before:?} then {now:?}"
            );
            // Not one answer from the previous file once the command said so.
            let (hits, failed) = n.sample(200, None, version);
            assert_eq!(
                (hits, failed),
                (200, 0),
                "weight {to}: answers of {version}"
            );
        }
        // Back to back, the second reload inside the first one's 100 ms: the workers the first
        // started are still new to nginx's master then.
        for to in ["0", "100"] {
            let out = fx.run(&["weight", &id, to]);
            assert_eq!(out.status.code(), Some(7), "{}", said(&out));
        }
        let (hits, failed) = n.sample(200, None, "2.0.0");
        assert_eq!((hits, failed), (200, 0), "back to back: answers of 2.0.0");
        std::thread::sleep(Duration::from_millis(500));
        let settled = n.workers();
        assert_eq!(settled.len(), 2, "nginx started workers again: {settled:?}");
    }

    #[test]
    fn a_comment_edited_by_hand_is_no_drift_and_weights_edited_by_hand_are() {
        let dir = tempfile::tempdir().unwrap();
        let Some(n) = start::<Nginx>(dir.path(), 1) else {
            return;
        };
        n.build("2.0.0", true);
        let steps = "      - weight: 20\n      - pause: {}\n";
        let (fx, id) = paused(&n, steps, "    on_drift: hold\n");
        let worker = Worker(fx.spawn_with(&["worker"], &[]));
        resumed(&fx, &id);
        // A lying comment: nothing served changed, nothing is said.
        let file = std::fs::read_to_string(&n.upstreams).unwrap();
        std::fs::write(
            &n.upstreams,
            format!("# manent-plugin-nginx: stable=green weight=90\n{file}"),
        )
        .unwrap();
        n.reload();
        std::thread::sleep(Duration::from_secs(2));
        assert!(!logs(&fx, &id).contains("drift on"), "{}", logs(&fx, &id));
        let v = fx.status(&id);
        assert_eq!(v["canary"]["actual"]["drift"], serde_json::json!([]), "{v}");
        // Weights by hand: seen, held, the two states in the log.
        n.edit_weights("green", 80);
        fleet::wait_until(Duration::from_secs(20), "the hand edit seen", || {
            logs(&fx, &id).contains("drift on")
        });
        let log = logs(&fx, &id);
        assert!(
            log.contains("manent set candidate 20%") && log.contains("the candidate gets 80%"),
            "{log}"
        );
        drop(worker);
    }
}

/// What only HAProxy has: an admin socket another process can take, the files its command
/// line loads, and a file whose structure HAProxy runs until it is reloaded.
mod haproxy_only {
    use super::*;
    use haproxy::Haproxy;

    #[test]
    fn an_admin_socket_answered_by_another_haproxy_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let Some(mut h) = start::<Haproxy>(dir.path(), 1) else {
            return;
        };
        h.build("2.0.0", true);
        let steps = "      - weight: 10\n      - pause: {}\n";
        let (fx, id) = paused(&h, steps, "");
        // A second HAProxy takes the socket's path: what it says is not read as the truth,
        // and nothing is set through it.
        // Killed if the test fails before it does (a panic would leave it running).
        let mut intruder = Killed(h.intruder());
        // Read now, once no engine holds the database (under a loaded suite, once the deploy
        // command's lease is seen released: with one held, status shows that engine's reading).
        let since = std::time::Instant::now();
        loop {
            let status = text(&fx.run(&["status", &id]).stdout);
            if status.contains("which is not a worker of HAProxy's master") {
                break;
            }
            assert!(since.elapsed() < Duration::from_secs(10), "{status}");
            std::thread::sleep(Duration::from_millis(100));
        }
        let out = fx.run(&["weight", &id, "30"]);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{all}");
        assert!(all.contains("nothing was changed"), "{all}");
        assert_share(&h, "2.0.0", 10.0, "untouched through the other socket");
        intruder.0.kill().unwrap();
        intruder.0.wait().unwrap();
        // Its socket file stays, answering nothing; the master's own socket is unreachable
        // (a reload passes the old one on): that is said, and only a restart binds it again.
        let out = fx.run(&["weight", &id, "30"]);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(all.contains("a restart binds it again"), "{all}");
        h.stop();
        h.start_again();
        let out = fx.run(&["retry", &id]);
        assert_eq!(out.status.code(), Some(7), "{}", said(&out));
        assert_share(&h, "2.0.0", 30.0, "the retried weight");
    }

    #[test]
    fn a_wrong_binary_or_a_file_haproxy_does_not_load_is_named_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let Some(h) = start::<Haproxy>(dir.path(), 1) else {
            return;
        };
        h.build("2.0.0", true);
        let steps = "      - weight: 10\n      - pause: {}\n";
        let bin = h.bin.display().to_string();
        let manent = h.manent_yml("edge").replace(&bin, "/nonexistent/haproxy");
        let fx = Fixture::new(&manent, &[("web", &app(&h, steps, ""))]);
        let out = fx.run(&["deploy", "web", "prod", "--yes"]);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{all}");
        assert!(
            all.contains("cannot run /nonexistent/haproxy") && all.contains("install haproxy"),
            "{all}"
        );
        let elsewhere = dir.path().join("conf/elsewhere.cfg");
        std::fs::write(&elsewhere, "").unwrap();
        let config = h.config.display().to_string();
        let manent = h
            .manent_yml("edge")
            .replace(&config, &elsewhere.display().to_string());
        let fx = Fixture::new(&manent, &[("web", &app(&h, steps, ""))]);
        let out = fx.run(&["deploy", "web", "prod", "--yes"]);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{all}");
        assert!(
            all.contains(&format!("does not load {}", elsewhere.display()))
                && all.contains(&format!("add `-f {}`", elsewhere.display())),
            "{all}"
        );
        assert_eq!(h.sample(50, None, "1.0.0"), (50, 0), "still serving");
    }

    #[test]
    fn a_file_edited_by_hand_and_reloaded_is_foreign_and_corrected_by_a_checked_reload() {
        let dir = tempfile::tempdir().unwrap();
        let Some(h) = start::<Haproxy>(dir.path(), 1) else {
            return;
        };
        h.build("2.0.0", true);
        let steps = "      - testers: {}\n      - weight: 20\n      - pause: {}\n";
        let (fx, id) = paused(&h, steps, "");
        let worker = Worker(fx.spawn_with(&["worker"], &[]));
        resumed(&fx, &id);
        // The tester rule commented out by hand, and HAProxy reloaded: testers no longer
        // reach the candidate, and nothing HAProxy's servers say would show it.
        h.edit_file("    use-server", "    #use-server");
        fleet::wait_until(Duration::from_secs(20), "the edit seen", || {
            logs(&fx, &id).contains("edited by hand")
        });
        fleet::wait_until(Duration::from_secs(20), "the file rendered again", || {
            std::fs::read_to_string(&h.config)
                .unwrap()
                .contains("\n    use-server")
                && h.sample(20, Some(("X-Canary", "1")), "2.0.0").0 == 20
        });
        // The correction is said once the router is read back; its line reaches the database
        // through the log hub's batches a moment after the router serves it.
        fleet::wait_until(Duration::from_secs(10), "the correction said", || {
            logs(&fx, &id).contains("drift: corrected")
        });
        assert!(
            logs(&fx, &id).contains("drift: corrected"),
            "{}",
            logs(&fx, &id)
        );
        assert_share(&h, "2.0.0", 20.0, "the weight kept through the reload");
        assert!(h.leftovers().is_empty(), "{:?}", h.leftovers());
        drop(worker);
    }
}
