//! A plugin written in Go with manent's Go SDK on hashicorp/go-plugin (Debian's 1.0.1), driven by
//! manent's host: handshake with AutoMTLS, Configure capabilities, Deploy, DryRun, hclog logs
//! with levels, ABORTED as Permanent, and a crash mid-call followed by a restart.

use crate::support::fleet;
use crate::support::go;
use fleet::{Fixture, text};

fn fixture(plugin: &std::path::Path, params: &str) -> Fixture {
    let manent = format!(
        "plugins:\n  gofix:\n    external:\n      command: {}\n",
        plugin.display()
    );
    let fx = Fixture::new(&manent, &[]);
    let ledger = fx.path().join("ledger");
    let app = format!(
        "application: a\nartifact: {{version: \"1\"}}\ndeploy:\n  plugin: gofix\n  params: {{ledger: \"{}\", {params}}}\n\
         parallelism: 2\nmax_retries: 2\nbackoff: {{base: 50ms, max: 200ms}}\nenvironments:\n  prod:\n    targets: [{{name: t1}}, {{name: t2}}]\n",
        ledger.display()
    );
    std::fs::write(fx.path().join("apps/a.yml"), app).unwrap();
    fx
}

fn ledger(fx: &Fixture) -> Vec<String> {
    std::fs::read_to_string(fx.path().join("ledger"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_go_plugin_announces_its_capabilities_over_mutual_tls() {
    let Some(go) = go::go_fixture() else { return };
    let fx = fixture(&go.plugin, "");
    let out = fx.run(&["plugins", "--probe", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gofix = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "gofix")
        .unwrap();
    assert_eq!(
        gofix["capabilities"],
        serde_json::json!(["current_release", "dry_run", "parallel_targets", "rollback"])
    );
    assert!(gofix["sha256"].as_str().unwrap().starts_with("not pinned"));
}

#[test]
fn a_go_plugin_deploys_and_its_hclog_lines_keep_their_levels() {
    let Some(go) = go::go_fixture() else { return };
    let fx = fixture(&go.plugin, "log_lines: 3");
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let done = ledger(&fx).iter().filter(|l| l.starts_with("done")).count();
    assert_eq!(done, 2);
    let db = fx.db();
    let mut stmt = db
        .prepare("SELECT level, target FROM logs WHERE message = 'go fixture line' ORDER BY id")
        .unwrap();
    let rows: Vec<(String, Option<String>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut levels: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    levels.sort_unstable();
    assert_eq!(levels, ["debug", "debug", "info", "info", "warn", "warn"]);
    assert!(
        rows.iter()
            .all(|r| r.1.as_deref().is_some_and(|t| t == "t1" || t == "t2"))
    );
}

#[test]
fn a_go_plugin_answers_a_dry_run() {
    let Some(go) = go::go_fixture() else { return };
    let fx = fixture(&go.plugin, "");
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
        "go would deploy 7 to t2"
    );
    assert!(ledger(&fx).is_empty());
}

#[test]
fn aborted_from_go_is_permanent() {
    let Some(go) = go::go_fixture() else { return };
    let fx = fixture(&go.plugin, "abort: true");
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("the go fixture refuses for good (permanent, not retried)"),
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
fn a_go_plugin_that_crashes_mid_call_is_restarted_and_the_deploy_completes() {
    let Some(go) = go::go_fixture() else { return };
    let fx = fixture(&go.plugin, "crash_on_attempt: 1");
    let out = fx.run(&["deploy", "a", "prod", "--yes", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["targets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["state"] == "deployed")
    );
    let pids: std::collections::BTreeSet<String> = ledger(&fx)
        .iter()
        .filter(|l| l.starts_with("done"))
        .map(|l| l.split_whitespace().last().unwrap().to_owned())
        .collect();
    assert!(!pids.is_empty());
    let starts = ledger(&fx)
        .iter()
        .filter(|l| l.starts_with("start"))
        .count();
    assert!(
        starts >= 3,
        "the crashed attempt ran again: {:?}",
        ledger(&fx)
    );
}

#[test]
fn hashicorp_go_plugins_own_host_drives_a_plugin_built_with_our_sdk() {
    let Some(go) = go::go_fixture() else { return };
    // go-plugin's client: handshake, AutoMTLS (P-521 both ways), Configure and Deploy calls.
    // Sequential calls, a 100-target call, and 100 calls at once on one process.
    for (mode, calls) in [
        ("single", "20"),
        ("batch100", "3"),
        ("concurrent100", "200"),
    ] {
        let out = std::process::Command::new(&go.host)
            .arg(env!("CARGO_BIN_EXE_manent-fixture-plugin"))
            .args([mode, calls, "2"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{mode}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v["rtt_p50_ms"].as_f64().unwrap() > 0.0, "{mode}: {v}");
    }
}
