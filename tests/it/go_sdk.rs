//! What is particular to Go plugins (the suite every SDK's fixture passes is in sdk_plugins.rs):
//! a step timeout cancels a Go SDK plugin's call (its ctx), the SDK's systemd-unit example
//! installs a file once, and hashicorp/go-plugin's own host (Debian's 1.0.1) drives a plugin
//! built with manent's Rust SDK.

use std::time::Duration;

use crate::sdk_plugins::{fixture, ledger};
use crate::support::fleet::{Fixture, said, text, wait_until};
use crate::support::go;

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
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
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
    // The SDK's log lines name no deployment; they are the deployment's all the same.
    let id = fx.deployments().pop().unwrap();
    let logs = text(&fx.run(&["logs", &id]).stdout);
    assert!(
        logs.lines().filter(|l| l.contains("installed")).count() >= 2,
        "{logs}"
    );
    // The same version again: the sha256 in place matches, nothing is copied or restarted.
    let out = fx.run(&["deploy", "a", "prod", "--yes", "--version", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
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
    // The uri names no version: the file now holds version 2, and --uri says so.
    let uri = format!("file://{}", artifact.display());
    let out = fx.run(&[
        "deploy",
        "a",
        "prod",
        "--yes",
        "--version",
        "2",
        "--uri",
        &uri,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
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

#[test]
fn the_go_sdks_own_vet_and_unit_tests_pass() {
    if go::go_fixture().is_none() {
        return;
    }
    let (ok, log) = go::test_sdk();
    assert!(ok, "{log}");
}
