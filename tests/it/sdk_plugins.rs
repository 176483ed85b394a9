//! The same plugin, written three ways, driven by manent's host through the real CLI: with the
//! Go SDK (sdk/go on Debian's go-plugin 1.0.1), with the Python SDK (sdk/python: grpclib over
//! the stdlib's ssl), and on raw hashicorp/go-plugin against the proto (required calls only).
//! Each fixture takes the same `deploy.params` (ledger, state, log_lines, abort,
//! crash_on_attempt, sleep_ms, secret) and appends what it did to the ledger, so one suite
//! checks them all: capabilities over mutual TLS, deploy with hclog levels, dry run, rollback,
//! ABORTED as permanent, a crash mid-call answered by a restart, a secret through the broker,
//! and a call cancelled by `manent cancel`.

use std::path::PathBuf;
use std::time::Duration;

use crate::support::fleet::{Fixture, said, text, wait_until};
use crate::support::{go, python};

/// One of the fixture plugins.
pub trait SdkFixture {
    /// The word its messages use for itself: "go fixture line", "python would deploy …".
    const LANG: &'static str;
    /// What Configure announces.
    const CAPABILITIES: &'static [&'static str];
    /// The binary; None when its toolchain is missing (and not required).
    fn plugin() -> Option<PathBuf>;
}

pub struct GoSdk;
pub struct Python;
pub struct RawGo;

impl SdkFixture for GoSdk {
    const LANG: &'static str = "go";
    const CAPABILITIES: &'static [&'static str] =
        &["current_release", "dry_run", "parallel_targets", "rollback"];
    fn plugin() -> Option<PathBuf> {
        go::go_fixture().map(|g| g.plugin)
    }
}

impl SdkFixture for Python {
    const LANG: &'static str = "python";
    const CAPABILITIES: &'static [&'static str] =
        &["current_release", "dry_run", "parallel_targets", "rollback"];
    fn plugin() -> Option<PathBuf> {
        python::python_fixture()
    }
}

impl SdkFixture for RawGo {
    const LANG: &'static str = "go";
    const CAPABILITIES: &'static [&'static str] = &["parallel_targets"];
    fn plugin() -> Option<PathBuf> {
        go::go_fixture().map(|g| g.raw)
    }
}

const TOKEN: &str = "sdk-s3cr3t-value-0123";

/// A configuration with the plugin as `sdkfix` and application `a` on two targets, its params
/// `params` beside the ledger and the state file; `manent_extra` goes into manent.yml and
/// `app_extra` into the descriptor's top level.
pub fn fixture(
    plugin: &std::path::Path,
    params: &str,
    manent_extra: &str,
    app_extra: &str,
) -> Fixture {
    let manent = format!(
        "plugins:\n  sdkfix:\n    external:\n      command: {}\n{manent_extra}",
        plugin.display()
    );
    let fx = Fixture::new(&manent, &[]);
    let app = format!(
        "application: a\nartifact: {{version: \"1\"}}\ndeploy:\n  plugin: sdkfix\n  params: {{ledger: \"{}\", state: \"{}\", {params}}}\n\
         parallelism: 2\nmax_retries: 2\nbackoff: {{base: 50ms, max: 200ms}}\n{app_extra}environments:\n  prod:\n    targets: [{{name: t1}}, {{name: t2}}]\n",
        fx.path().join("ledger").display(),
        fx.path().join("state.json").display()
    );
    std::fs::write(fx.path().join("apps/a.yml"), app).unwrap();
    fx
}

pub fn ledger(fx: &Fixture) -> Vec<String> {
    std::fs::read_to_string(fx.path().join("ledger"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn count(fx: &Fixture, prefix: &str) -> usize {
    ledger(fx).iter().filter(|l| l.starts_with(prefix)).count()
}

fn state(fx: &Fixture) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(fx.path().join("state.json")).unwrap()).unwrap()
}

fn deploy(fx: &Fixture, version: &str) {
    let out = fx.run(&["deploy", "a", "prod", "--yes", "--version", version]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "deploy {version}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

fn announces_its_capabilities_over_mutual_tls<F: SdkFixture>() {
    let Some(plugin) = F::plugin() else { return };
    let fx = fixture(&plugin, "", "", "");
    let out = fx.run(&["plugins", "--probe", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "sdkfix")
        .unwrap();
    assert!(row["problem"].is_null(), "{row}");
    assert_eq!(row["capabilities"], serde_json::json!(F::CAPABILITIES));
    let pinned = row["sha256"].as_str().unwrap();
    assert!(pinned.starts_with("not pinned"));
    // The table says the sum to copy too, not only --json.
    let sum = pinned
        .trim_start_matches("not pinned (")
        .trim_end_matches(')');
    let table = text(&fx.run(&["plugins"]).stdout);
    assert!(table.contains(&format!("pin it: sha256: {sum}")), "{table}");
}

fn deploys_and_its_hclog_lines_keep_their_levels<F: SdkFixture>() {
    let Some(plugin) = F::plugin() else { return };
    let fx = fixture(&plugin, "log_lines: 3", "", "");
    deploy(&fx, "1");
    assert_eq!(count(&fx, "done"), 2, "{:?}", ledger(&fx));
    let db = fx.db();
    let mut stmt = db
        .prepare("SELECT level, target, attrs FROM logs WHERE message = ?1 ORDER BY id")
        .unwrap();
    let rows: Vec<(String, Option<String>, Option<String>)> = stmt
        .query_map([format!("{} fixture line", F::LANG)], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
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
        assert!(
            attrs["n"].is_number(),
            "an attribute keeps its JSON type: {attrs}"
        );
    }
}

/// What the plugin logged through the SDK's call logger (`deployed`, per target) is in
/// `manent logs DEP`, each line naming its target, and stored with the deployment.
fn its_call_logger_lines_are_in_manent_logs<F: SdkFixture>() {
    let Some(plugin) = F::plugin() else { return };
    let fx = fixture(&plugin, "", "", "");
    deploy(&fx, "7");
    let id = fx.deployments().pop().unwrap();
    let logs = text(&fx.run(&["logs", &id]).stdout);
    for t in ["t1", "t2"] {
        assert!(
            logs.lines()
                .any(|l| l.contains("deployed") && l.contains(t)),
            "{t}: {logs}"
        );
    }
    let db = fx.db();
    let stored: i64 = db
        .query_row(
            "SELECT count(*) FROM logs WHERE message LIKE 'deployed%' AND workflow_id = ?1 \
             AND target IN ('t1', 't2')",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stored, 2, "{logs}");
}

fn answers_a_dry_run_that_changes_nothing<F: SdkFixture>() {
    let Some(plugin) = F::plugin() else { return };
    let fx = fixture(&plugin, "", "", "");
    deploy(&fx, "1");
    let out = fx.run(&[
        "deploy",
        "a",
        "prod",
        "--dry-run",
        "--json",
        "--version",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["report"]["targets"][1]["message"],
        format!("{} would deploy 3 to t2", F::LANG)
    );
    assert_eq!(state(&fx), serde_json::json!({"t1": "1", "t2": "1"}));
    assert_eq!(count(&fx, "start"), 2, "{:?}", ledger(&fx));
}

fn rolls_back_to_the_release_it_reports<F: SdkFixture>() {
    let Some(plugin) = F::plugin() else { return };
    let fx = fixture(&plugin, "", "", "");
    deploy(&fx, "1");
    deploy(&fx, "2");
    assert_eq!(state(&fx), serde_json::json!({"t1": "2", "t2": "2"}));
    let out = fx.run(&["rollback", "a", "prod", "--yes", "--reason", "errors up"]);
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

fn permanent_is_not_retried<F: SdkFixture>() {
    let Some(plugin) = F::plugin() else { return };
    let fx = fixture(&plugin, "abort: true", "", "");
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let want = format!(
        "the {} fixture refuses for good (permanent, not retried)",
        F::LANG
    );
    assert!(text(&out.stdout).contains(&want), "{}", text(&out.stdout));
    let t1 = ledger(&fx)
        .iter()
        .filter(|l| l.starts_with("start") && l.contains(" t1 "))
        .count();
    assert_eq!(t1, 1);
}

fn a_crash_mid_call_is_restarted_and_the_deploy_completes<F: SdkFixture>() {
    let Some(plugin) = F::plugin() else { return };
    let fx = fixture(&plugin, "crash_on_attempt: 1", "", "");
    let out = fx.run(&["deploy", "a", "prod", "--yes", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["targets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["state"] == "deployed"),
        "{v}"
    );
    // `start|done KEY TARGET ATTEMPT PID`. Every first attempt crashes its process (one that
    // runs both targets may die before it writes the other's start); each target was finished
    // at a later attempt by another process, which may have crashed afterwards on the other
    // target's first attempt.
    let lines = ledger(&fx);
    let field = |l: &String, i: usize| l.split_whitespace().nth(i).unwrap_or("").to_owned();
    let first = |l: &&String| l.starts_with("start") && field(l, 3) == "1";
    assert!(lines.iter().any(|l| first(&l)), "{lines:?}");
    let done: Vec<&String> = lines.iter().filter(|l| l.starts_with("done")).collect();
    assert_eq!(done.len(), 2, "{lines:?}");
    for d in done {
        assert_ne!(field(d, 3), "1", "{lines:?}");
        let crashed = lines
            .iter()
            .filter(first)
            .any(|l| field(l, 2) == field(d, 2) && field(l, 4) == field(d, 4));
        assert!(
            !crashed,
            "a new process finished {}: {lines:?}",
            field(d, 2)
        );
    }
}

fn reads_a_secret_through_the_broker_and_never_logs_it<F: SdkFixture>() {
    let Some(plugin) = F::plugin() else { return };
    let fx = fixture(
        &plugin,
        "secret: token, log_lines: 3",
        "secrets:\n  token: env:FIXTURE_TOKEN\n",
        "",
    );
    let app_file = fx.path().join("apps/a.yml");
    let app = std::fs::read_to_string(&app_file).unwrap().replace(
        "  plugin: sdkfix\n",
        "  plugin: sdkfix\n  secrets: [token]\n",
    );
    std::fs::write(&app_file, app).unwrap();
    let out = fx.run_with(
        &["deploy", "a", "prod", "--yes"],
        &[("FIXTURE_TOKEN", TOKEN)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let sha = {
        use sha2::Digest;
        format!("{:x}", sha2::Sha256::digest(TOKEN.as_bytes()))
    };
    let want = format!("secret token {sha}");
    assert_eq!(count(&fx, &want), 2, "{:?}", ledger(&fx));
    let id = fx.deployments().pop().unwrap();
    let logs = fx.run(&["logs", &id]);
    assert_eq!(logs.status.code(), Some(0), "{}", text(&logs.stderr));
    let line = format!("{} fixture line", F::LANG);
    assert!(text(&logs.stdout).contains(&line), "{}", text(&logs.stdout));
    for out in [&logs.stdout, &logs.stderr, &out.stdout, &out.stderr] {
        assert!(
            !text(out).contains(TOKEN),
            "the secret leaked: {}",
            text(out)
        );
    }
}

fn a_call_is_cancelled_by_manent_cancel<F: SdkFixture>() {
    let Some(plugin) = F::plugin() else { return };
    let fx = fixture(&plugin, "sleep_ms: 120000", "", "");
    let mut running = fx.spawn_with(&["deploy", "a", "prod", "--yes"], &[]);
    wait_until(Duration::from_secs(30), "both targets to start", || {
        count(&fx, "start") == 2
    });
    let id = fx.deployments().pop().unwrap();
    let out = fx.run(&["cancel", &id, "--reason", "wrong build"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    wait_until(
        Duration::from_secs(60),
        "the plugin to see its calls cancelled",
        || count(&fx, "cancelled") == 2,
    );
    assert_eq!(running.wait().unwrap().code(), Some(3));
    let lines = ledger(&fx);
    assert!(
        lines
            .iter()
            .filter(|l| l.starts_with("cancelled"))
            .all(|l| l.starts_with(&format!("cancelled {id}/"))),
        "{lines:?}"
    );
    assert_eq!(count(&fx, "done"), 0, "{lines:?}");
    assert_eq!(fx.status(&id)["status"], "CANCELLED");
}

/// The whole suite for an SDK's fixture; the required calls' part for the raw one.
macro_rules! suite {
    ($module:ident, $fixture:ty, full) => {
        suite!($module, $fixture, required);
        mod full {
            use super::super::*;
            #[test]
            fn answers_a_dry_run_that_changes_nothing() {
                super::super::answers_a_dry_run_that_changes_nothing::<$fixture>();
            }
            #[test]
            fn its_call_logger_lines_are_in_manent_logs() {
                super::super::its_call_logger_lines_are_in_manent_logs::<$fixture>();
            }
            #[test]
            fn rolls_back_to_the_release_it_reports() {
                super::super::rolls_back_to_the_release_it_reports::<$fixture>();
            }
            #[test]
            fn reads_a_secret_through_the_broker_and_never_logs_it() {
                super::super::reads_a_secret_through_the_broker_and_never_logs_it::<$fixture>();
            }
            // go-plugin 1.0.1's own server stops hard at Shutdown: a raw plugin's cancelled
            // call may not get to say so before its process ends.
            #[test]
            fn a_call_is_cancelled_by_manent_cancel() {
                super::super::a_call_is_cancelled_by_manent_cancel::<$fixture>();
            }
        }
    };
    ($module:ident, $fixture:ty, required) => {
        use super::*;
        #[test]
        fn announces_its_capabilities_over_mutual_tls() {
            super::announces_its_capabilities_over_mutual_tls::<$fixture>();
        }
        #[test]
        fn deploys_and_its_hclog_lines_keep_their_levels() {
            super::deploys_and_its_hclog_lines_keep_their_levels::<$fixture>();
        }
        #[test]
        fn permanent_is_not_retried() {
            super::permanent_is_not_retried::<$fixture>();
        }
        #[test]
        fn a_crash_mid_call_is_restarted_and_the_deploy_completes() {
            super::a_crash_mid_call_is_restarted_and_the_deploy_completes::<$fixture>();
        }
    };
}

mod go_sdk {
    suite!(go_sdk, GoSdk, full);
}

mod python_sdk {
    suite!(python_sdk, Python, full);
}

mod raw_go_plugin {
    suite!(raw_go_plugin, RawGo, required);
}
