//! A plugin written with the Python SDK (sdk/python: grpclib over the stdlib's ssl), driven by
//! manent's host: handshake with AutoMTLS on P-521, Configure capabilities, Deploy with hclog
//! levels, DryRun, CurrentRelease + Rollback, ABORTED as Permanent, a crash mid-call followed by
//! a restart, a secret read through the broker, and a call cancelled by `manent cancel`.

use std::time::Duration;

use crate::support::fleet;
use crate::support::python;
use fleet::{Fixture, text, wait_until};

const SECRETS: &str = "secrets:\n  token: env:FIXTURE_TOKEN\n";
const TOKEN: &str = "tok-s3cr3t-value-0123";

fn fixture_with(
    plugin: &std::path::Path,
    manent_extra: &str,
    deploy_extra: &str,
    params: &str,
) -> Fixture {
    let manent = format!(
        "plugins:\n  pyfix:\n    external:\n      command: {}\n{manent_extra}",
        plugin.display()
    );
    let fx = Fixture::new(&manent, &[]);
    let ledger = fx.path().join("ledger");
    let state = fx.path().join("state.json");
    let app = format!(
        "application: a\nartifact: {{version: \"1\"}}\ndeploy:\n  plugin: pyfix\n{deploy_extra}  params: {{ledger: \"{}\", state: \"{}\", {params}}}\n\
         parallelism: 2\nmax_retries: 2\nbackoff: {{base: 50ms, max: 200ms}}\nenvironments:\n  prod:\n    targets: [{{name: t1}}, {{name: t2}}]\n",
        ledger.display(),
        state.display()
    );
    std::fs::write(fx.path().join("apps/a.yml"), app).unwrap();
    fx
}

fn fixture(plugin: &std::path::Path, params: &str) -> Fixture {
    fixture_with(plugin, "", "", params)
}

fn ledger(fx: &Fixture) -> Vec<String> {
    std::fs::read_to_string(fx.path().join("ledger"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn state(fx: &Fixture) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(fx.path().join("state.json")).unwrap()).unwrap()
}

#[test]
fn a_python_plugin_announces_its_capabilities_over_mutual_tls() {
    let Some(plugin) = python::python_fixture() else {
        return;
    };
    let fx = fixture(&plugin, "");
    let out = fx.run(&["plugins", "--probe", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pyfix = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pyfix")
        .unwrap();
    assert!(pyfix["problem"].is_null(), "{pyfix}");
    assert_eq!(
        pyfix["capabilities"],
        serde_json::json!(["current_release", "dry_run", "parallel_targets", "rollback"])
    );
    assert!(pyfix["sha256"].as_str().unwrap().starts_with("not pinned"));
}

#[test]
fn a_python_plugin_deploys_and_its_hclog_lines_keep_their_levels() {
    let Some(plugin) = python::python_fixture() else {
        return;
    };
    let fx = fixture(&plugin, "log_lines: 3");
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let done = ledger(&fx).iter().filter(|l| l.starts_with("done")).count();
    assert_eq!(done, 2, "{:?}", ledger(&fx));
    let db = fx.db();
    let mut stmt = db
        .prepare("SELECT level, target, attrs FROM logs WHERE message = 'python fixture line' ORDER BY id")
        .unwrap();
    let rows: Vec<(String, Option<String>, Option<String>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut levels: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    levels.sort_unstable();
    assert_eq!(levels, ["debug", "debug", "info", "info", "warn", "warn"]);
    assert!(
        rows.iter()
            .all(|r| r.1.as_deref().is_some_and(|t| t == "t1" || t == "t2")),
        "{rows:?}"
    );
    assert!(
        rows.iter()
            .any(|r| r.2.as_deref().is_some_and(|a| a.contains("\"n\":\"2\""))),
        "{rows:?}"
    );
    assert_eq!(state(&fx), serde_json::json!({"t1": "1", "t2": "1"}));
}

#[test]
fn a_python_plugin_answers_a_dry_run() {
    let Some(plugin) = python::python_fixture() else {
        return;
    };
    let fx = fixture(&plugin, "");
    let out = fx.run(&[
        "deploy",
        "a",
        "prod",
        "--dry-run",
        "--json",
        "--version",
        "7",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["report"]["targets"][1]["message"],
        "python would deploy 7 to t2"
    );
    assert!(ledger(&fx).is_empty());
}

#[test]
fn a_python_plugin_rolls_back_to_the_release_it_reports() {
    let Some(plugin) = python::python_fixture() else {
        return;
    };
    let fx = fixture(&plugin, "");
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = fx.run(&["deploy", "a", "prod", "--yes", "--version", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(state(&fx), serde_json::json!({"t1": "2", "t2": "2"}));
    let out = fx.run(&["rollback", "a", "prod", "--yes", "--reason", "errors up"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(state(&fx), serde_json::json!({"t1": "1", "t2": "1"}));
    let rollbacks: Vec<String> = ledger(&fx)
        .into_iter()
        .filter(|l| l.starts_with("rollback"))
        .collect();
    assert_eq!(rollbacks.len(), 2, "{rollbacks:?}");
    assert!(rollbacks.iter().all(|l| l.ends_with(" 1")), "{rollbacks:?}");
}

#[test]
fn permanent_from_python_is_not_retried() {
    let Some(plugin) = python::python_fixture() else {
        return;
    };
    let fx = fixture(&plugin, "abort: true");
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("the python fixture refuses for good (permanent, not retried)"),
        "{}",
        text(&out.stdout)
    );
    let t1 = ledger(&fx)
        .iter()
        .filter(|l| l.starts_with("start") && l.contains(" t1 "))
        .count();
    assert_eq!(t1, 1);
}

#[test]
fn a_python_plugin_that_crashes_mid_call_is_restarted_and_the_deploy_completes() {
    let Some(plugin) = python::python_fixture() else {
        return;
    };
    let fx = fixture(&plugin, "crash_on_attempt: 1");
    let out = fx.run(&["deploy", "a", "prod", "--yes", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["targets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["state"] == "deployed"),
        "{v}"
    );
    let lines = ledger(&fx);
    let crashed: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("start") && l.contains(" 1 "))
        .collect();
    let done: Vec<&String> = lines.iter().filter(|l| l.starts_with("done")).collect();
    assert_eq!(done.len(), 2, "{lines:?}");
    let crashed_pids: std::collections::BTreeSet<&str> = crashed
        .iter()
        .map(|l| l.split_whitespace().last().unwrap())
        .collect();
    assert!(
        done.iter()
            .all(|l| !crashed_pids.contains(l.split_whitespace().last().unwrap())),
        "a new process finished the deploy: {lines:?}"
    );
}

#[test]
fn a_python_plugin_reads_a_secret_through_the_broker_and_never_logs_it() {
    let Some(plugin) = python::python_fixture() else {
        return;
    };
    let fx = fixture_with(
        &plugin,
        SECRETS,
        "  secrets: [token]\n",
        "secret: token, log_lines: 3",
    );
    let out = fx.run_with(
        &["deploy", "a", "prod", "--yes"],
        &[("FIXTURE_TOKEN", TOKEN)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let sha = {
        use sha2::Digest;
        format!("{:x}", sha2::Sha256::digest(TOKEN.as_bytes()))
    };
    let lines = ledger(&fx);
    assert_eq!(
        lines
            .iter()
            .filter(|l| **l == format!("secret token {sha}"))
            .count(),
        2,
        "{lines:?}"
    );
    let id = fx.deployments().pop().unwrap();
    let logs = fx.run(&["logs", &id]);
    assert_eq!(logs.status.code(), Some(0), "{}", text(&logs.stderr));
    assert!(
        text(&logs.stdout).contains("python fixture line"),
        "{}",
        text(&logs.stdout)
    );
    for out in [&logs.stdout, &logs.stderr, &out.stdout, &out.stderr] {
        assert!(
            !text(out).contains(TOKEN),
            "the secret leaked: {}",
            text(out)
        );
    }
}

#[test]
fn cancelling_a_deploy_cancels_the_python_call() {
    let Some(plugin) = python::python_fixture() else {
        return;
    };
    let fx = fixture(&plugin, "sleep_ms: 60000");
    let mut deploy = fx.spawn_with(&["deploy", "a", "prod", "--yes"], &[]);
    wait_until(Duration::from_secs(30), "both targets to start", || {
        ledger(&fx)
            .iter()
            .filter(|l| l.starts_with("start"))
            .count()
            == 2
    });
    let id = fx.deployments().pop().unwrap();
    let out = fx.run(&["cancel", &id, "--reason", "wrong build"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    wait_until(
        Duration::from_secs(30),
        "the plugin's calls to be cancelled",
        || {
            ledger(&fx)
                .iter()
                .filter(|l| l.starts_with("cancelled"))
                .count()
                == 2
        },
    );
    let status = deploy.wait().unwrap();
    assert_eq!(status.code(), Some(3));
    let lines = ledger(&fx);
    assert!(
        lines
            .iter()
            .filter(|l| l.starts_with("cancelled"))
            .all(|l| l.starts_with(&format!("cancelled {id}/"))),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.starts_with("done")), "{lines:?}");
}

#[test]
fn the_python_sdks_own_unit_tests_pass() {
    if python::python_fixture().is_none() {
        return;
    }
    let sdk = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk/python");
    let out = std::process::Command::new(python::venv_python())
        .args(["-B", "-m", "unittest", "discover", "-s", "tests", "-t", "."])
        .current_dir(&sdk)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn the_example_script_deployer_passes_the_kit_on_a_real_command() {
    if python::python_fixture().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("script_deployer");
    python::launcher(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("sdk/python/examples/script_deployer.py"),
        &plugin,
    );
    let kit = format!(
        "options: {{state: \"{}\"}}\nparams: {{command: \"echo $VERSION > {}/$MANENT_TARGET\"}}\n",
        dir.path().join("state.json").display(),
        dir.path().display()
    );
    let (code, report) = crate::plugin_kit::kit(&plugin, Some(&kit));
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(crate::plugin_kit::outcome(&report, "deploy").0, "pass");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("conformance-1"))
            .unwrap()
            .trim(),
        "1.0.0"
    );
}
