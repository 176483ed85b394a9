//! Plugins written with manent's Go SDK (sdk/go), built offline against Debian's go-plugin
//! 1.0.1, driven through the real CLI: the SDK fixture deploys, dry-runs, rolls back, logs with
//! levels, reads a secret through the broker, and sees its call cancelled (by `manent cancel`
//! and by a step timeout); the SDK's systemd-unit example installs a file; the raw go-plugin
//! fixture (no SDK) deploys.

use std::time::Duration;

use crate::support::fleet;
use crate::support::go;
use fleet::{Fixture, text, wait_until};

const TOKEN: &str = "go-secret-0123456789";
const TOKEN_SHA256: &str = "14344d44625d1f336e1693d95382b87ab96f8a167baa3e00f10c04422d425c13";

fn fixture(plugin: &std::path::Path, params: &str, extra_manent: &str, extra_app: &str) -> Fixture {
    let manent = format!(
        "plugins:\n  gofix:\n    external:\n      command: {}\n{extra_manent}",
        plugin.display()
    );
    let fx = Fixture::new(&manent, &[]);
    let ledger = fx.path().join("ledger");
    let app = format!(
        "application: a\nartifact: {{version: \"1\"}}\ndeploy:\n  plugin: gofix\n  params: {{ledger: \"{}\", {params}}}\n\
         parallelism: 2\nmax_retries: 2\nbackoff: {{base: 50ms, max: 200ms}}\n{extra_app}environments:\n  prod:\n    targets: [{{name: t1}}, {{name: t2}}]\n",
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

fn state(fx: &Fixture) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(fx.path().join("state.json")).unwrap()).unwrap()
}

#[test]
fn a_go_sdk_plugin_deploys_dry_runs_and_rolls_back() {
    let Some(go) = go::go_fixture() else { return };
    let fx = fixture(&go.plugin, "", "", "");
    let state_file = fx.path().join("state.json");
    let app_file = fx.path().join("apps/a.yml");
    let app = std::fs::read_to_string(&app_file).unwrap().replace(
        "params: {",
        &format!("params: {{state: \"{}\", ", state_file.display()),
    );
    std::fs::write(&app_file, app).unwrap();
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

    for v in ["1", "2"] {
        let out = fx.run(&["deploy", "a", "prod", "--yes", "--version", v]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "deploy {v}: {}",
            text(&out.stderr)
        );
    }
    assert_eq!(state(&fx), serde_json::json!({"t1": "2", "t2": "2"}));
    let out = fx.run(&[
        "deploy",
        "a",
        "prod",
        "--dry-run",
        "--json",
        "--version",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["report"]["targets"][0]["message"],
        "go would deploy 3 to t1"
    );
    assert_eq!(
        state(&fx),
        serde_json::json!({"t1": "2", "t2": "2"}),
        "a dry run changes nothing"
    );

    let out = fx.run(&["rollback", "a", "prod", "--yes"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert_eq!(state(&fx), serde_json::json!({"t1": "1", "t2": "1"}));
    let rollbacks: Vec<String> = ledger(&fx)
        .into_iter()
        .filter(|l| l.starts_with("rollback"))
        .collect();
    assert_eq!(rollbacks.len(), 2, "{rollbacks:?}");
    assert!(
        rollbacks
            .iter()
            .all(|l| l.split_whitespace().nth(3) == Some("1")),
        "{rollbacks:?}"
    );
}

#[test]
fn a_go_sdk_plugin_logs_with_levels_and_attributes() {
    let Some(go) = go::go_fixture() else { return };
    let fx = fixture(&go.plugin, "log_lines: 3", "", "");
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let db = fx.db();
    let mut stmt = db
        .prepare(
            "SELECT level, target, attrs FROM logs WHERE message = 'go fixture line' ORDER BY id",
        )
        .unwrap();
    let rows: Vec<(String, Option<String>, Option<String>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut levels: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    levels.sort_unstable();
    assert_eq!(levels, ["debug", "debug", "info", "info", "warn", "warn"]);
    for (_, target, attrs) in &rows {
        assert!(
            target.as_deref().is_some_and(|t| t == "t1" || t == "t2"),
            "{rows:?}"
        );
        let attrs: serde_json::Value = serde_json::from_str(attrs.as_deref().unwrap()).unwrap();
        assert!(attrs["n"].is_number(), "{attrs}");
        assert_eq!(attrs["@module"], "go-fixture", "{attrs}");
    }
}

#[test]
fn a_go_sdk_plugin_reads_a_secret_through_the_broker() {
    let Some(go) = go::go_fixture() else { return };
    let fx = fixture(
        &go.plugin,
        "secret: token",
        "secrets:\n  token: env:GO_FIXTURE_TOKEN\n",
        "",
    );
    let app_file = fx.path().join("apps/a.yml");
    let app = std::fs::read_to_string(&app_file)
        .unwrap()
        .replace("  plugin: gofix\n", "  plugin: gofix\n  secrets: [token]\n");
    std::fs::write(&app_file, app).unwrap();
    let out = fx.run_with(
        &["deploy", "a", "prod", "--yes"],
        &[("GO_FIXTURE_TOKEN", TOKEN)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines = ledger(&fx);
    let want = format!("secret token {TOKEN_SHA256}");
    assert_eq!(lines.iter().filter(|l| **l == want).count(), 2, "{lines:?}");
    assert!(!text(&out.stderr).contains(TOKEN));
}

#[test]
fn a_go_sdk_plugins_call_is_cancelled_by_manent_cancel() {
    let Some(go) = go::go_fixture() else { return };
    let fx = fixture(&go.plugin, "sleep_ms: 120000", "", "");
    let mut deploy = fx.spawn_with(&["deploy", "a", "prod", "--yes"], &[]);
    wait_until(Duration::from_secs(20), "both targets to start", || {
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
        Duration::from_secs(60),
        "the plugin to see its calls cancelled",
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
    assert!(
        !ledger(&fx).iter().any(|l| l.starts_with("done")),
        "{:?}",
        ledger(&fx)
    );
    assert_eq!(fx.status(&id)["status"], "CANCELLED");
}

#[test]
fn a_step_timeout_cancels_the_go_sdk_plugins_call() {
    let Some(go) = go::go_fixture() else { return };
    let fx = fixture(
        &go.plugin,
        "sleep_ms: 20000",
        "",
        "timeouts: {step: 500ms}\n",
    );
    let app_file = fx.path().join("apps/a.yml");
    let app = std::fs::read_to_string(&app_file)
        .unwrap()
        .replace("max_retries: 2", "max_retries: 0");
    std::fs::write(&app_file, app).unwrap();
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("timed out after 500ms"),
        "{}",
        text(&out.stdout)
    );
    wait_until(
        Duration::from_secs(5),
        "the plugin to see the cancellation",
        || ledger(&fx).iter().any(|l| l.starts_with("cancelled")),
    );
    assert!(!ledger(&fx).iter().any(|l| l.starts_with("done")));
}

#[test]
fn the_go_sdk_systemd_unit_example_installs_a_file_once() {
    let Some(go) = go::go_fixture() else { return };
    let fx = Fixture::new("", &[]);
    let srv = fx.path().join("srv");
    let restarts = fx.path().join("restarts");
    let artifact = fx.path().join("app.bin");
    std::fs::write(&artifact, "payload v1\n").unwrap();
    std::fs::write(
        fx.config(),
        format!(
            "plugins:\n  unit:\n    external:\n      command: {}\n    dir: {}/{{target}}\n    \
             restart: [\"sh\", \"-c\", \"echo restarted >> {}\"]\n    health: [\"true\"]\n",
            go.example.display(),
            srv.display(),
            restarts.display()
        ),
    )
    .unwrap();
    std::fs::write(
        fx.path().join("apps/a.yml"),
        format!(
            "application: a\nartifact: {{version: \"1\", uri: \"file://{}\"}}\ndeploy:\n  plugin: unit\n\
             environments:\n  prod:\n    targets: [{{name: t1}}, {{name: t2}}]\n",
            artifact.display()
        ),
    )
    .unwrap();
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    for t in ["t1", "t2"] {
        assert_eq!(
            std::fs::read_to_string(srv.join(t).join("app.bin")).unwrap(),
            "payload v1\n"
        );
        assert_eq!(
            std::fs::read_to_string(srv.join(t).join("VERSION")).unwrap(),
            "1\n"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&restarts).unwrap().lines().count(),
        2
    );
    // The same version again: the sha256 in place matches, nothing is copied or restarted.
    let out = fx.run(&["deploy", "a", "prod", "--yes", "--version", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("2 unchanged"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(
        std::fs::read_to_string(&restarts).unwrap().lines().count(),
        2
    );

    // The restart command of the brief: `true`.
    let conf = std::fs::read_to_string(fx.config()).unwrap();
    let start = conf.find("    restart:").unwrap();
    let end = start + conf[start..].find('\n').unwrap() + 1;
    std::fs::write(
        fx.config(),
        format!(
            "{}    restart: [\"true\"]\n{}",
            &conf[..start],
            &conf[end..]
        ),
    )
    .unwrap();
    std::fs::write(&artifact, "payload v2\n").unwrap();
    let out = fx.run(&["deploy", "a", "prod", "--yes", "--version", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(srv.join("t2/app.bin")).unwrap(),
        "payload v2\n"
    );
    assert_eq!(
        std::fs::read_to_string(srv.join("t2/VERSION")).unwrap(),
        "2\n"
    );
}

#[test]
fn the_raw_go_plugin_fixture_deploys() {
    let Some(go) = go::go_fixture() else { return };
    let fx = fixture(&go.raw, "log_lines: 1", "", "");
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
        serde_json::json!(["parallel_targets"])
    );
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        ledger(&fx).iter().filter(|l| l.starts_with("done")).count(),
        2
    );
}
