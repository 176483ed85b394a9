#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]
//! The operational layer against the real binary: deploy locks (refusal, break-glass, expiry),
//! the "waiting on you" inbox, `status --watch`, Prometheus metrics, the JSON log file,
//! webhook notifications, and honest target state after a crash.

#[path = "support/fleet.rs"]
mod fleet;

use std::time::Duration;

use fleet::{Fixture, LEDGER_MANENT, ledger_app, text};

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&out.stdout), text(&out.stderr)))
}

#[test]
fn a_lock_refuses_deploys_and_rollbacks_naming_its_owner_until_lifted() {
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &ledger_app(""))]);
    for v in ["1.0.0", "2.0.0"] {
        let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", v]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }

    // A lock needs a reason; an unknown environment is named.
    let out = fx.run(&["lock", "web", "prod"]);
    assert_eq!(out.status.code(), Some(2));
    let out = fx.run(&["lock", "web", "qa", "--reason", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("qa"), "{}", text(&out.stderr));

    let out = fx.run(&[
        "lock",
        "web",
        "prod",
        "--reason",
        "investigating 502s",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lock = json(&out);
    assert_eq!(lock["locked"], true);
    assert_eq!(lock["lock"]["operator"], "tester");
    assert_eq!(lock["lock"]["reason"], "investigating 502s");
    assert!(lock["lock"]["expires_at"].is_null());

    // Another operator cannot take it over without --force.
    let out = fx.run_with(
        &["lock", "web", "prod", "--reason", "mine"],
        &[("USER", "bob")],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("already locked by tester"),
        "{}",
        text(&out.stderr)
    );

    // Deploys and rollbacks are refused before anything is recorded, naming owner and reason.
    let before = fx.deployments().len();
    for args in [
        &["deploy", "web", "prod", "--yes", "--version", "3.0.0"][..],
        &["rollback", "web", "prod", "--yes"][..],
    ] {
        let out = fx.run_with(args, &[("USER", "bob")]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains("web/prod is locked by tester") && err.contains("investigating 502s"),
            "{err}"
        );
        assert!(err.contains("manent unlock web prod"), "{err}");
    }
    assert_eq!(fx.deployments().len(), before, "nothing was recorded");
    // --force needs a reason (clap says so), and with one goes through: a break-glass.
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--force"]);
    assert_eq!(out.status.code(), Some(2));
    let out = fx.run_with(
        &[
            "deploy",
            "web",
            "prod",
            "--yes",
            "--version",
            "3.0.0",
            "--force",
            "--reason",
            "hotfix for the 502s",
        ],
        &[("USER", "bob")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("going through the lock"),
        "{}",
        text(&out.stderr)
    );
    let h = json(&fx.run(&["history", "web", "prod", "--json"]));
    let journal = h["journal"].as_array().unwrap();
    let glass = journal
        .iter()
        .find(|j| j["action"] == "break-glass")
        .expect("a break-glass entry");
    assert_eq!(glass["operator"], "bob");
    assert_eq!(glass["reason"], "hotfix for the 502s");
    assert!(
        glass["detail"]
            .as_str()
            .unwrap()
            .contains("through the lock of tester"),
        "{glass}"
    );
    let deploy = journal
        .iter()
        .find(|j| j["action"] == "deploy" && j["operator"] == "bob")
        .unwrap();
    assert_eq!(
        glass["workflow_id"], deploy["workflow_id"],
        "names its deploy"
    );

    // Unlocked, anyone deploys again; the journal keeps both ends.
    let out = fx.run_with(
        &["unlock", "web", "prod", "--reason", "fixed"],
        &[("USER", "bob")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("it was locked by tester"),
        "{}",
        text(&out.stdout)
    );
    let out = fx.run(&["rollback", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let h = json(&fx.run(&["history", "web", "prod", "--json"]));
    let actions: Vec<&str> = h["journal"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "rollback",
            "unlock",
            "deploy",
            "break-glass",
            "lock",
            "deploy",
            "deploy"
        ]
    );
}

#[test]
fn an_expired_lock_stops_blocking_by_itself() {
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &ledger_app(""))]);
    let out = fx.run(&["lock", "web", "prod", "--reason", "short", "--for", "1s"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(2), "locked for now");
    std::thread::sleep(Duration::from_millis(1100));
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn the_inbox_lists_a_failed_deploy_awaiting_a_decision_and_an_expiring_lock() {
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &ledger_app(""))]);
    let out = fx.run(&["inbox"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("nothing waits on you"));
    std::fs::write(fx.path().join("broken-web-3"), "").unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let id = fx.deployments().pop().unwrap();
    let out = fx.run(&[
        "lock",
        "web",
        "prod",
        "--reason",
        "look at web-3",
        "--for",
        "10m",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let inbox = json(&fx.run(&["inbox", "--json"]));
    let items = inbox["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{inbox}");
    assert_eq!(items[0]["waiting"], "decision");
    assert_eq!(items[0]["deployment"], id.as_str());
    assert_eq!(items[0]["subject"], "web/prod");
    assert!(
        items[0]["what"]
            .as_str()
            .unwrap()
            .contains("failed on web-3")
    );
    assert_eq!(items[0]["verbs"], format!("manent retry|skip|abort {id}"));
    assert_eq!(items[1]["waiting"], "lock-expiring");
    assert!(
        items[1]["what"]
            .as_str()
            .unwrap()
            .contains("locked by tester"),
        "{inbox}"
    );
    assert_eq!(inbox["locks"][0]["reason"], "look at web-3");
    let human = text(&fx.run(&["inbox"]).stdout);
    assert!(human.contains("decide") && human.contains(&id), "{human}");
    assert!(human.contains("locked  web/prod"), "{human}");
    // `status` shows the lock under its list too.
    let status = text(&fx.run(&["status"]).stdout);
    assert!(status.contains("locked  web/prod"), "{status}");
}
