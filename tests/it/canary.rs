//! Canary deployments with the real binary and the simulated fleet: a headless deploy parks at
//! an operator's pause (exit 7) and says how to go on; weight, back, resume, promote and revert
//! do what they say and are journaled; analysis reverts on failure and pauses when it cannot
//! tell, recording why; a plugin without slots fails before touching anything.

use crate::support::fleet;
use fleet::{Fixture, said, text};

const MANENT: &str = "plugins:\n  fleet:\n    builtin: simulate\n    latency: {min: 5ms, max: 20ms}\n    log_lines: 1\n  exec:\n    pass_env: [FIXTURE]\n";

fn app(steps: &str) -> String {
    format!(
        "application: shop\nartifact: {{version: \"2.0.0\"}}\ndeploy:\n  plugin: fleet\nstrategy:\n  canary:\n    steps:\n{steps}\
         environments:\n  prod:\n    targets: [{{name: s1}}, {{name: s2}}, {{name: s3}}]\n"
    )
}

const STEPS: &str = "      - weight: 10\n      - pause: {}\n      - weight: 40\n      - pause: {}\n      - weight: 80\n";

fn deploy(fx: &Fixture, version: &str) -> (Option<i32>, String, String) {
    let out = fx.run(&["deploy", "shop", "prod", "--yes", "--version", version]);
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

fn status(fx: &Fixture, id: &str) -> serde_json::Value {
    fx.status(id)
}

fn canary(v: &serde_json::Value) -> &serde_json::Value {
    &v["canary"]["status"]
}

#[test]
fn a_canary_parks_at_each_pause_and_the_operator_moves_it_on() {
    let fx = Fixture::new(MANENT, &[("shop", &app(STEPS))]);
    let (code, out, err) = deploy(&fx, "2.0.0");
    assert_eq!(code, Some(7), "{out}{err}");
    assert!(out.contains("candidate 10% / stable 90%"), "{out}");
    assert!(out.contains("manent promote dep-"), "{out}");
    let id = fx.deployments().pop().unwrap();
    let v = status(&fx, &id);
    assert_eq!(v["state"], "canary_paused");
    assert_eq!(canary(&v)["weight"], 10);
    assert_eq!(canary(&v)["step"], 2);
    for t in v["targets"].as_array().unwrap() {
        assert_eq!(t["state"], "candidate");
    }
    // A weight by hand holds the steps.
    let out = fx.run(&["weight", &id, "25", "--reason", "see errors at 25"]);
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    let v = status(&fx, &id);
    assert_eq!(
        (canary(&v)["weight"].clone(), canary(&v)["held"].clone()),
        (25.into(), true.into())
    );
    assert_eq!(v["phase"]["doing"], "held");
    // Back: to the previous step's weight (a weight set by hand goes back to the last step's).
    let out = fx.run(&["back", &id]);
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    assert_eq!(canary(&status(&fx, &id))["weight"], 10);
    // Resume: the steps go on from where they were held (the operator's pause at step 2).
    let out = fx.run(&["resume", &id]);
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    let v = status(&fx, &id);
    assert_eq!(
        (canary(&v)["step"].clone(), canary(&v)["weight"].clone()),
        (2.into(), 10.into())
    );
    // Promote ends the pause: weight 40, then the next pause.
    let out = fx.run(&["promote", &id]);
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    let v = status(&fx, &id);
    assert_eq!(
        (canary(&v)["step"].clone(), canary(&v)["weight"].clone()),
        (4.into(), 40.into())
    );
    // Back from a step's weight: the previous step's, and that step runs again on resume.
    let out = fx.run(&["back", &id]);
    assert_eq!(out.status.code(), Some(7));
    let v = status(&fx, &id);
    assert_eq!(
        (canary(&v)["step"].clone(), canary(&v)["weight"].clone()),
        (3.into(), 10.into())
    );
    let out = fx.run(&["resume", &id]);
    assert_eq!(out.status.code(), Some(7));
    let v = status(&fx, &id);
    assert_eq!(
        (canary(&v)["step"].clone(), canary(&v)["weight"].clone()),
        (4.into(), 40.into())
    );
    // The full promote skips the rest: the candidate is the stable release.
    let out = fx.run(&["promote", "--full", &id, "--reason", "metrics are fine"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let v = status(&fx, &id);
    assert_eq!(v["state"], "deployed");
    for t in v["targets"].as_array().unwrap() {
        assert_eq!(t["state"], "deployed");
    }
    let h = fx.run(&["history", "shop", "prod", "--json"]);
    let h: serde_json::Value = serde_json::from_slice(&h.stdout).unwrap();
    let live: Vec<&str> = h["releases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["version"].as_str().unwrap())
        .collect();
    assert_eq!(live, ["2.0.0", "2.0.0", "2.0.0"]);
    let actions: Vec<&str> = h["journal"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .map(|j| j["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "canary", "weight", "back", "resume", "promote", "back", "resume", "promote"
        ]
    );
    assert_eq!(h["journal"][0]["reason"], "metrics are fine");
    assert_eq!(h["journal"][0]["detail"], "the remaining steps");
}

#[test]
fn a_revert_takes_the_candidate_out_and_keeps_the_stable_release() {
    let fx = Fixture::new(MANENT, &[("shop", &app(STEPS))]);
    // 1.0.0 live everywhere first (a canary promoted at once).
    assert_eq!(deploy(&fx, "1.0.0").0, Some(7));
    let first = fx.deployments().pop().unwrap();
    assert_eq!(
        fx.run(&["promote", "--full", &first]).status.code(),
        Some(0)
    );
    assert_eq!(deploy(&fx, "2.0.0").0, Some(7));
    let id = fx.deployments().pop().unwrap();
    let out = fx.run(&["revert", &id, "--reason", "p99 doubled"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert!(
        text(&out.stdout).contains("reverted"),
        "{}",
        text(&out.stdout)
    );
    let v = status(&fx, &id);
    assert_eq!(v["state"], "reverted");
    assert_eq!(canary(&v)["weight"], 0);
    for t in v["targets"].as_array().unwrap() {
        assert_eq!(t["state"], "reverted");
    }
    assert!(
        v["report"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("reverted by {} (p99 doubled)", fleet::me())),
        "{}",
        v["report"]["message"]
    );
    let h = fx.run(&["history", "shop", "prod", "--json"]);
    let h: serde_json::Value = serde_json::from_slice(&h.stdout).unwrap();
    for r in h["releases"].as_array().unwrap() {
        assert_eq!(
            r["version"], "1.0.0",
            "a reverted canary records no release"
        );
    }
    // Anything after the end is refused, and says why.
    let out = fx.run(&["promote", &id]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("has finished"), "{}", said(&out));
}

#[test]
fn failed_analysis_reverts_by_itself_and_says_why() {
    let steps = "      - weight: 20\n      - analysis: {command: 'echo 5xx rate 7% above 1%; exit 1', count: 3, interval: 100ms, failure_limit: 2}\n      - weight: 50\n";
    let fx = Fixture::new(MANENT, &[("shop", &app(steps))]);
    let (code, out, err) = deploy(&fx, "2.0.0");
    assert_eq!(code, Some(4), "reverted by its analysis: {out}{err}");
    let id = fx.deployments().pop().unwrap();
    let v = status(&fx, &id);
    assert_eq!(v["state"], "reverted");
    let why = v["report"]["message"].as_str().unwrap();
    for part in [
        "reverted automatically",
        "failed 2 of 2 runs (limit 2)",
        "exit 1",
        "5xx rate 7% above 1%",
    ] {
        assert!(why.contains(part), "{part:?} in {why}");
    }
    let runs = canary(&v)["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["verdict"], "fail");
    let h = fx.run(&["history", "shop", "prod", "--json"]);
    let h: serde_json::Value = serde_json::from_slice(&h.stdout).unwrap();
    let auto = &h["journal"][0];
    assert_eq!(
        (auto["action"].as_str(), auto["operator"].as_str()),
        (Some("revert"), Some("manent"))
    );
    assert!(
        auto["reason"].as_str().unwrap().contains("5xx rate"),
        "{auto}"
    );
}

#[test]
fn inconclusive_analysis_pauses_for_an_operator() {
    let steps = "      - weight: 20\n      - analysis: {command: 'exit 3', count: 2, interval: 100ms}\n      - weight: 50\n";
    let fx = Fixture::new(MANENT, &[("shop", &app(steps))]);
    let (code, out, err) = deploy(&fx, "2.0.0");
    assert_eq!(code, Some(7), "{out}{err}");
    assert!(out.contains("pause by its analysis"), "{out}");
    assert!(out.contains("exit 3 (0 passes, 1 fails)"), "{out}");
    let id = fx.deployments().pop().unwrap();
    // The operator decides: promote ends the analysis step, the canary goes on to its end.
    let out = fx.run(&["promote", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(status(&fx, &id)["state"], "deployed");
}

#[test]
fn a_plugin_without_slots_fails_before_touching_anything() {
    let app = app(STEPS).replace(
        "plugin: fleet",
        "plugin: exec\n  params: {deploy: 'echo touched >> $FIXTURE/touched'}",
    );
    let fx = Fixture::new(MANENT, &[("shop", &app)]);
    let (code, out, err) = deploy(&fx, "2.0.0");
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        out.contains("plugin exec cannot run this canary: it lacks slots, traffic_router"),
        "{out}"
    );
    assert!(!fx.path().join("touched").exists());
}

#[test]
fn canary_commands_are_refused_where_they_mean_nothing() {
    let plain = app(STEPS).replace(
        "strategy:\n  canary:\n    steps:\n      - weight: 10\n      - pause: {}\n      - weight: 40\n      - pause: {}\n      - weight: 80\n",
        "",
    );
    let fx = Fixture::new(MANENT, &[("shop", &plain)]);
    assert_eq!(deploy(&fx, "2.0.0").0, Some(0));
    let id = fx.deployments().pop().unwrap();
    let out = fx.run(&["weight", &id, "50"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("has finished") || text(&out.stderr).contains("not a canary")
    );
    let fx = Fixture::new(
        MANENT,
        &[("shop", &app("      - pause: {}\n      - weight: 50\n"))],
    );
    assert_eq!(deploy(&fx, "2.0.0").0, Some(7));
    let id = fx.deployments().pop().unwrap();
    let out = fx.run(&["back", &id]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("nothing to go back to"),
        "{}",
        said(&out)
    );
    let out = fx.run(&["weight", &id, "101"]);
    assert_eq!(out.status.code(), Some(2));
    let out = fx.run(&["resume", &id]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a pause for an operator is ended by promote"
    );
    assert!(text(&out.stderr).contains("promote"), "{}", said(&out));
    // --wait follows through the pauses: a promote from elsewhere ends it.
    let journal = fx.run(&["history", "shop", "prod", "--json"]);
    assert!(journal.status.success());
}
