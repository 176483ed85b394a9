//! External plugins over go-plugin's protocol, with real processes: the Rust SDK fixture plugin
//! and `manent-plugin-remote-copy`. Secrets through the broker only during a call, a cleared
//! environment, one shared process, sha256 pinning, every way a plugin can fail to start, a
//! plugin killed mid-deploy, and remote-copy over local paths and over a real sshd.

use std::time::Duration;

use crate::support::fleet;
use crate::support::sshd;
use fleet::{Fixture, said, text, wait_until};

const FIXTURE: &str = env!("CARGO_BIN_EXE_manent-fixture-plugin");
const REMOTE_COPY: &str = env!("CARGO_BIN_EXE_manent-plugin-remote-copy");

fn manent_yml(extra_external: &str, extra: &str) -> String {
    format!(
        "plugins:\n  fix:\n    external:\n      command: {FIXTURE}\n      start_timeout: 5s\n{extra_external}{extra}"
    )
}

fn app(params: &str, targets: usize, extra: &str) -> String {
    let t: String = (1..=targets)
        .map(|i| format!("      - {{name: t{i}}}\n"))
        .collect();
    format!(
        "application: a\nartifact: {{version: \"1\"}}\ndeploy:\n  plugin: fix\n  params: {{ledger: \"$LEDGER\", {params}}}\n\
         parallelism: 4\nmax_retries: 2\nbackoff: {{base: 50ms, max: 200ms}}\n{extra}environments:\n  prod:\n    targets:\n{t}"
    )
}

fn fixture(manent: &str, app_text: &str) -> Fixture {
    let fx = Fixture::new(manent, &[]);
    let ledger = fx.path().join("ledger");
    let text = app_text.replace("$LEDGER", &ledger.display().to_string());
    std::fs::write(fx.path().join("apps/a.yml"), text).unwrap();
    fx
}

fn ledger(fx: &Fixture) -> Vec<String> {
    std::fs::read_to_string(fx.path().join("ledger"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Every plugin process that wrote to the ledger has exited (the engine stops its plugins).
fn plugin_processes_gone(fx_ledger: &[String]) {
    let pids: std::collections::BTreeSet<&str> = fx_ledger
        .iter()
        .filter(|l| l.starts_with("start") || l.starts_with("done"))
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    for pid in pids {
        wait_until(Duration::from_secs(5), "the plugin process to exit", || {
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s.contains(") Z "))
        });
    }
}

#[test]
fn secrets_come_through_the_broker_only_during_a_call_and_the_environment_is_cleared() {
    let manent = manent_yml("", "secrets:\n  token: env:FIXTURE_TOKEN\n");
    let a = app(
        "secret: token, env_probe: [PATH, HOME, FIXTURE_TOKEN, UNRELATED_VAR]",
        2,
        "",
    )
    .replace("  plugin: fix\n", "  plugin: fix\n  secrets: [token]\n");
    let fx = fixture(&manent, &a);
    let env = [("FIXTURE_TOKEN", "tok-0123456789"), ("UNRELATED_VAR", "x")];
    let out = fx.run_with(&["deploy", "a", "prod", "--yes"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let lines = ledger(&fx);
    assert_eq!(
        lines.iter().filter(|l| *l == "secret token len=14").count(),
        2,
        "{lines:?}"
    );
    assert!(lines.contains(&"env PATH true".to_owned()), "{lines:?}");
    assert!(
        lines.contains(&"env FIXTURE_TOKEN false".to_owned()),
        "manent's own environment leaked: {lines:?}"
    );
    assert!(lines.contains(&"env UNRELATED_VAR false".to_owned()));
    // A handle kept from an earlier call reads nothing once that call has returned.
    // Targets one at a time: t1's call stashes its handle and returns before t2 tries it.
    let a2 = a
        .replace("secret: token, ", "secret: token, stale_secret: token, ")
        .replace("version: \"1\"", "version: \"2\"")
        .replace("parallelism: 4", "parallelism: 1");
    std::fs::write(
        fx.path().join("apps/a.yml"),
        a2.replace("$LEDGER", &fx.path().join("ledger").display().to_string()),
    )
    .unwrap();
    let out = fx.run_with(&["deploy", "a", "prod", "--yes"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let stale: Vec<String> = ledger(&fx)
        .into_iter()
        .filter(|l| l.starts_with("stale"))
        .collect();
    // t1 finds nothing stashed yet; t2 holds t1's handle, whose call has returned.
    assert_eq!(
        stale,
        ["stale nothing stashed".to_owned(), stale[1].clone()],
        "{stale:?}"
    );
    assert!(stale[1].starts_with("stale refused"), "{stale:?}");
    plugin_processes_gone(&ledger(&fx));
}

#[test]
fn plugin_logs_arrive_with_their_levels_and_targets() {
    let fx = fixture(&manent_yml("", ""), &app("log_lines: 3", 1, ""));
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let db = fx.db();
    let mut stmt = db
        .prepare("SELECT level, source, target, message, attrs FROM logs WHERE message LIKE 'fixture line%' ORDER BY id")
        .unwrap();
    type Row = (String, String, Option<String>, String, Option<String>);
    let rows: Vec<Row> = stmt
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let levels: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(levels, ["debug", "info", "warn"]);
    assert!(
        rows.iter()
            .all(|r| r.1 == "fix" && r.2.as_deref() == Some("t1"))
    );
    assert!(
        rows[2].4.as_deref().unwrap().contains("\"n\":2"),
        "{:?}",
        rows[2]
    );
}

/// The host closes its connection after Shutdown, as go-plugin's does: the plugin's graceful
/// stop is not left waiting for it (a verb that starts an engine would wait as long to exit).
#[test]
fn a_plugin_stopped_by_its_host_is_not_left_waiting_for_the_connection() {
    let fx = fixture(&manent_yml("", ""), &app("", 2, ""));
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    plugin_processes_gone(&ledger(&fx));
    // The plugin's last lines are the deployment's: its stop is in the log.
    let lines = fx.strings("SELECT message FROM logs WHERE source = 'fix' ORDER BY id");
    assert!(
        lines.iter().any(|l| l.contains("plugin fix exited")),
        "{lines:#?}"
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("after Shutdown") || l.contains("did not exit")),
        "{lines:#?}"
    );
}

#[test]
fn a_permanent_error_crosses_the_wire_as_aborted_and_is_not_retried() {
    let fx = fixture(&manent_yml("", ""), &app("permanent: true", 1, ""));
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert_eq!(
        ledger(&fx)
            .iter()
            .filter(|l| l.starts_with("start"))
            .count(),
        1
    );
    assert!(
        text(&out.stdout).contains("refuses: a permanent error"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_plugin_that_rejects_validation_stops_the_deploy_before_any_target() {
    let fx = fixture(&manent_yml("", ""), &app("invalid: true", 2, ""));
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(ledger(&fx).is_empty());
    assert!(
        text(&out.stdout).contains("told its params are invalid"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_plugin_killed_mid_deploy_is_restarted_and_the_step_retried() {
    let fx = fixture(&manent_yml("", ""), &app("sleep_ms: 3000", 1, ""));
    let deploy = fx.spawn_with(&["deploy", "a", "prod", "--yes"], &[]);
    wait_until(
        Duration::from_secs(30),
        "the plugin to start deploying",
        || !ledger(&fx).is_empty(),
    );
    let first_pid: u32 = ledger(&fx)[0]
        .split_whitespace()
        .last()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        std::process::Command::new("kill")
            .arg("-9")
            .arg(first_pid.to_string())
            .status()
            .unwrap()
            .success()
    );
    let out = deploy.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let starts: Vec<String> = ledger(&fx)
        .into_iter()
        .filter(|l| l.starts_with("start"))
        .collect();
    assert_eq!(starts.len(), 2, "{starts:?}");
    let second_pid: u32 = starts[1]
        .split_whitespace()
        .last()
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(first_pid, second_pid, "a new process served the retry");
    assert_eq!(
        starts[0].split_whitespace().nth(1),
        starts[1].split_whitespace().nth(1),
        "same idempotency key"
    );
    let error: String = fx
        .db()
        .query_row(
            "SELECT error FROM step_attempts WHERE outcome = 'retryable'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(error.contains("crashed during Deploy"), "{error}");
    plugin_processes_gone(&ledger(&fx));
}

#[test]
fn a_plugin_whose_host_is_killed_exits_by_itself() {
    let fx = fixture(&manent_yml("", ""), &app("sleep_ms: 60000", 1, ""));
    let mut deploy = fx.spawn_with(&["deploy", "a", "prod", "--yes"], &[]);
    wait_until(
        Duration::from_secs(30),
        "the plugin to start deploying",
        || !ledger(&fx).is_empty(),
    );
    deploy.kill().unwrap();
    deploy.wait().unwrap();
    // Nobody will send it Shutdown now; it notices its parent is gone.
    plugin_processes_gone(&ledger(&fx));
}

#[test]
fn a_step_timeout_cancels_the_call_inside_the_plugin() {
    let a = app("sleep_ms: 20000", 1, "timeouts: {step: 500ms}\n")
        .replace("max_retries: 2", "max_retries: 0");
    let fx = fixture(&manent_yml("", ""), &a);
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
fn a_plugin_crashing_inside_a_call_fails_that_call_and_the_retry_completes() {
    let fx = fixture(&manent_yml("", ""), &app("crash_on_attempt: 1", 1, ""));
    let out = fx.run(&["deploy", "a", "prod", "--yes", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["targets"][0]["attempt"], 2);
}

#[test]
fn plugins_that_cannot_start_get_errors_that_name_them_and_the_fix() {
    let cases = [
        (
            "garbage",
            "printed \"Starting fixture plugin v1.2...\" where the go-plugin handshake line belongs",
        ),
        ("exit", "exited before the go-plugin handshake"),
        ("hang", "no go-plugin handshake within 5s (start_timeout)"),
        (
            "version2",
            "it speaks plugin protocol version 2, this manent speaks version 1",
        ),
    ];
    for (mode, expected) in cases {
        let manent = manent_yml(&format!("      env: {{FIXTURE_START: {mode}}}\n"), "");
        let fx = fixture(
            &manent,
            &app("", 1, "").replace("max_retries: 2", "max_retries: 0"),
        );
        let out = fx.run(&["deploy", "a", "prod", "--yes"]);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{mode}: {all}");
        assert!(
            all.contains("plugin fix") && all.contains(expected),
            "{mode}: expected {expected:?} in\n{all}"
        );
        if mode == "exit" {
            assert!(
                all.contains("cannot open /etc/fixture.conf"),
                "the plugin's stderr is quoted: {all}"
            );
        }
    }
}

#[test]
fn a_binary_that_changed_since_it_was_pinned_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("manent-plugin-fix");
    std::fs::copy(FIXTURE, &bin).unwrap();
    let sum = manent::plugin::external::activation::sha256_file(&bin).unwrap();
    let manent = format!(
        "plugins:\n  fix:\n    external:\n      command: {}\n      sha256: {sum}\n",
        bin.display()
    );
    let fx = fixture(&manent, &app("", 1, ""));
    assert_eq!(
        fx.run(&["deploy", "a", "prod", "--yes"]).status.code(),
        Some(0)
    );
    std::fs::copy(REMOTE_COPY, &bin).unwrap();
    let out = fx.run(&["deploy", "a", "prod", "--yes", "--version", "2"]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("changed since it was pinned") && all.contains("sha256sum"),
        "{all}"
    );
}

#[test]
fn an_undeclared_plugin_is_found_on_the_plugin_dir_with_a_warning() {
    let fx = Fixture::new("plugin_dir: bin\n", &[]);
    std::fs::create_dir(fx.path().join("bin")).unwrap();
    std::fs::copy(FIXTURE, fx.path().join("bin/manent-plugin-fix")).unwrap();
    let text_app =
        app("", 1, "").replace("$LEDGER", &fx.path().join("ledger").display().to_string());
    std::fs::write(fx.path().join("apps/a.yml"), text_app).unwrap();
    assert_eq!(
        fx.run(&["validate"]).status.code(),
        Some(0),
        "{}",
        text(&fx.run(&["validate"]).stderr)
    );
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert!(
        text(&out.stderr).contains("is not declared in manent.yml")
            && text(&out.stderr).contains("no sha256 pins it")
    );
}

#[test]
fn validate_and_plan_never_start_a_plugin() {
    let fx = fixture(
        &manent_yml("      env: {FIXTURE_START: exit}\n", ""),
        &app("", 2, ""),
    );
    assert_eq!(fx.run(&["validate"]).status.code(), Some(0));
    assert_eq!(fx.run(&["plan", "a", "prod"]).status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_deploys_share_one_plugin_process() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    std::fs::write(dir.path().join("manent.yml"), manent_yml("", "")).unwrap();
    std::fs::create_dir(dir.path().join("apps")).unwrap();
    let envs: String = (1..=50)
        .map(|i| format!("  e{i:02}:\n    targets: [{{name: t}}]\n"))
        .collect();
    let a = format!(
        "application: a\nartifact: {{version: \"1\"}}\ndeploy:\n  plugin: fix\n  params: {{ledger: \"{}\", sleep_ms: 300}}\nenvironments:\n{envs}",
        ledger.display()
    );
    std::fs::write(dir.path().join("apps/a.yml"), a).unwrap();
    let config =
        manent::config::Config::load(&dir.path().join("manent.yml"), &manent::plugin::catalog())
            .unwrap();
    let engine = manent::engine::Engine::start(&config).await.unwrap();
    let op = manent::operator::Operator {
        name: "t".into(),
        client: None,
    };
    let sub = manent::deploy::submit::Submission::new(&op, None, &config.engine);
    let mut ids = Vec::new();
    for i in 1..=50 {
        let spec = config.environment("a", &format!("e{i:02}")).unwrap();
        let id = manent::deploy::submit::deploy(engine.store().as_ref(), &spec, false, &sub)
            .await
            .unwrap();
        engine.run(id.id()).await.unwrap();
        ids.push(id.id().to_owned());
    }
    for id in &ids {
        let row = engine.wait(id).await.unwrap();
        assert_eq!(row.status.as_str(), "SUCCESS", "{row:?}");
    }
    let text = std::fs::read_to_string(&ledger).unwrap();
    let pids: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| l.starts_with("done"))
        .map(|l| l.split_whitespace().last().unwrap())
        .collect();
    assert_eq!(text.lines().filter(|l| l.starts_with("done")).count(), 50);
    assert_eq!(pids.len(), 1, "one process served them all: {pids:?}");
    // Deploys ran at the same time: some started before others finished.
    let first_done = text.lines().position(|l| l.starts_with("done")).unwrap();
    assert!(first_done > 1, "the deploys overlapped");
    engine.shutdown().await;
    plugin_processes_gone(&text.lines().map(str::to_owned).collect::<Vec<_>>());
}

fn remote_copy_app(path: &str, hosts: &[&str], extra: &str) -> String {
    let t: String = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| format!("      - {{name: n{}, host: {h}}}\n", i + 1))
        .collect();
    format!(
        "application: site\nartifact: {{type: directory, version: \"1.0\", uri: \"$ART\"}}\ndeploy:\n  plugin: rc\n  params: {{path: \"{path}\", keep: 2}}\n\
         max_retries: 0\n{extra}environments:\n  prod:\n    targets:\n{t}"
    )
}

fn artifact(fx: &Fixture, version: &str) -> String {
    let a = fx.path().join(format!("art-{version}"));
    std::fs::create_dir_all(a.join("static")).unwrap();
    std::fs::write(a.join("index.html"), format!("<h1>{version}</h1>")).unwrap();
    std::fs::write(a.join("static/app.js"), "console.log(1)").unwrap();
    a.display().to_string()
}

fn check_remote_copy(fx: &Fixture, root: &std::path::Path, names: &[&str]) {
    let app_file = fx.path().join("apps/site.yml");
    let base = std::fs::read_to_string(&app_file).unwrap();
    for v in ["1.0", "1.1", "1.2"] {
        let a = artifact(fx, v);
        std::fs::write(
            &app_file,
            base.replace("$ART", &a)
                .replace("version: \"1.0\"", &format!("version: \"{v}\"")),
        )
        .unwrap();
        let out = fx.run(&["deploy", "site", "prod", "--yes"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "deploy {v}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    for n in names {
        let t = root.join(n);
        assert_eq!(
            std::fs::read_link(t.join("current")).unwrap(),
            std::path::Path::new("releases/1.2")
        );
        assert_eq!(
            std::fs::read_to_string(t.join("current/index.html")).unwrap(),
            "<h1>1.2</h1>"
        );
        assert!(t.join("current/static/app.js").exists());
        assert!(
            !t.join("releases/1.0").exists(),
            "keep: 2 pruned the oldest release"
        );
    }
    let out = fx.run(&["rollback", "site", "prod", "--yes"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    for n in names {
        assert_eq!(
            std::fs::read_link(root.join(n).join("current")).unwrap(),
            std::path::Path::new("releases/1.1")
        );
    }
}

#[test]
fn remote_copy_deploys_and_rolls_back_local_paths_built_in_and_as_a_binary() {
    for declaration in [
        "  rc:\n    builtin: remote-copy\n".to_owned(),
        format!("  rc:\n    external:\n      command: {REMOTE_COPY}\n"),
    ] {
        let fx = Fixture::new(&format!("plugins:\n{declaration}"), &[]);
        let root = fx.path().join("srv");
        let path = format!("{}/{{target}}", root.display());
        std::fs::write(
            fx.path().join("apps/site.yml"),
            remote_copy_app(&path, &["local", "localhost"], ""),
        )
        .unwrap();
        check_remote_copy(&fx, &root, &["n1", "n2"]);
    }
}

#[test]
fn remote_copy_deploys_and_rolls_back_over_ssh() {
    let Some(server) = sshd::sshd() else {
        assert!(
            std::env::var("CI").is_err(),
            "sshd is required in CI (openssh-server)"
        );
        eprintln!("skipped: no sshd on this machine");
        return;
    };
    let fx = Fixture::new(
        &format!(
            "plugins:\n  rc:\n    builtin: remote-copy\n    ssh:\n      port: {}\n      identity: {}\n      options: [StrictHostKeyChecking=no, UserKnownHostsFile=/dev/null, LogLevel=ERROR]\n",
            server.port,
            server.key.display()
        ),
        &[],
    );
    let root = fx.path().join("remote");
    let path = format!("{}/{{target}}", root.display());
    std::fs::write(
        fx.path().join("apps/site.yml"),
        remote_copy_app(&path, &["127.0.0.1", "127.0.0.1"], ""),
    )
    .unwrap();
    check_remote_copy(&fx, &root, &["n1", "n2"]);
}

/// A deploy whose engine also resumed another application's deployment stuck on a plugin that
/// never speaks returns when its own deployment ends: the stuck one goes to a background
/// worker (a liveness bound of one minute, not a timing assertion: waiting for the stuck one
/// would take its 10-minute start_timeout).
#[test]
fn a_deploy_returns_when_its_own_deployment_ends_whatever_its_engine_resumed() {
    let manent = format!(
        "plugins:\n  fix:\n    external:\n      command: {FIXTURE}\n      start_timeout: 10m\n      \
         env: {{FIXTURE_START: silent}}\n  exec: {{}}\n"
    );
    let stuck = "application: a\nartifact: {version: \"1\"}\ndeploy:\n  plugin: fix\nenvironments:\n  prod:\n    targets: [{name: t1}]\n";
    let other = "application: other\nartifact: {version: \"1\"}\ndeploy:\n  plugin: exec\n  params:\n    deploy: echo ok\nenvironments:\n  prod:\n    targets: [{name: o1}]\n";
    let fx = Fixture::new(&manent, &[("a", stuck), ("other", other)]);
    let mut first = fx.spawn_with(&["deploy", "a", "prod", "--yes"], &[]);
    wait_until(Duration::from_secs(30), "the stuck deploy to start", || {
        fx.deployments().len() == 1
    });
    std::thread::sleep(Duration::from_millis(500));
    first.kill().unwrap();
    first.wait().unwrap();
    let mut child = fx.spawn_with(&["deploy", "other", "prod", "--yes"], &[]);
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the other deploy waited for the stuck one");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(status.success(), "{err}");
    assert!(
        err.contains("resumed by this engine) to a background worker"),
        "{err}"
    );
    // The worker carries the stuck one on; stop it (a second SIGTERM ends its drain at once:
    // the stuck run would hold it there).
    for _ in 0..2 {
        let _ = std::process::Command::new("pkill")
            .args(["-f", &format!("{} worker", fx.config().display())])
            .status();
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// A plugin that never finishes its handshake (start_timeout 10 minutes) does not hold a
/// stopping engine: SIGTERM to a worker and to a headless deploy abandons the start at once —
/// no further start attempt — and both leave the deployment to resume. (A liveness bound of one
/// minute, not a timing assertion: waiting the start out would take ten.)
#[test]
fn sigterm_abandons_a_plugin_start_the_same_way_for_a_worker_and_a_deploy() {
    let manent = manent_yml("      env: {FIXTURE_START: hang}\n", "")
        .replace("start_timeout: 5s", "start_timeout: 10m");
    let fx = fixture(&manent, &app("", 1, ""));
    // The fixture plugin processes `parent` started.
    let starts = |parent: u32| {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| {
                let e = e.ok()?;
                let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
                let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
                let ppid: u32 = stat
                    .rsplit(')')
                    .next()?
                    .split_whitespace()
                    .nth(1)?
                    .parse()
                    .ok()?;
                (ppid == parent && String::from_utf8_lossy(&cmd).starts_with(FIXTURE)).then_some(())
            })
            .count()
    };
    let stop_within_a_minute = |child: &mut std::process::Child, what: &str| {
        fleet::sigterm(child);
        let start = std::time::Instant::now();
        loop {
            if let Some(s) = child.try_wait().unwrap() {
                return s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{what} waited on the plugin's start after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // A headless deploy.
    let mut deploy = fx.spawn_with(&["deploy", "a", "prod", "--yes"], &[]);
    let pid = deploy.id();
    wait_until(Duration::from_secs(30), "the plugin to be started", || {
        starts(pid) > 0
    });
    let status = stop_within_a_minute(&mut deploy, "the deploy");
    assert_eq!(status.code(), Some(5), "interrupted, to resume");
    let id = fx.deployments().pop().unwrap();
    assert_eq!(fx.status(&id)["status"], "PENDING");
    // A worker resuming it.
    let mut worker = fx.spawn_with(&["worker"], &[]);
    fleet::wait_ready(&mut worker);
    let pid = worker.id();
    wait_until(
        Duration::from_secs(30),
        "the plugin to be started again",
        || starts(pid) > 0,
    );
    let status = stop_within_a_minute(&mut worker, "the worker");
    // A service stopped on request exits 0 (or 5 with a run it had to abandon).
    assert!(matches!(status.code(), Some(0 | 5)), "{status:?}");
    assert_eq!(fx.status(&id)["status"], "PENDING");
}

/// Under umask 000 the plugin's socket is still reached by no one else: the host's socket
/// directory and the plugin's own inside it are 0700, the socket 0600.
#[test]
fn plugin_sockets_are_private_whatever_the_umask() {
    use std::os::unix::fs::MetadataExt;
    let fx = fixture(&manent_yml("", ""), &app("sleep_ms: 3000", 1, ""));
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(format!(
            "umask 000; exec {} --config {} deploy a prod --yes",
            env!("CARGO_BIN_EXE_manent"),
            fx.config().display()
        ))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut deploy = cmd.spawn().unwrap();
    wait_until(
        Duration::from_secs(30),
        "the plugin to start deploying",
        || !ledger(&fx).is_empty(),
    );
    let pid = ledger(&fx)[0].split_whitespace().last().unwrap().to_owned();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let host_dir = environ
        .split(|b| *b == 0)
        .find_map(|v| v.strip_prefix(b"PLUGIN_UNIX_SOCKET_DIR="))
        .map(|v| std::path::PathBuf::from(String::from_utf8_lossy(v).into_owned()))
        .expect("the plugin's socket directory");
    let mode = |p: &std::path::Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
    assert_eq!(mode(&host_dir), 0o700, "{}", host_dir.display());
    let own: Vec<std::path::PathBuf> = std::fs::read_dir(&host_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(own.len(), 1, "{own:?}");
    assert_eq!(mode(&own[0]), 0o700, "{}", own[0].display());
    for socket in std::fs::read_dir(&own[0]).unwrap() {
        let socket = socket.unwrap().path();
        assert_eq!(mode(&socket), 0o600, "{}", socket.display());
    }
    assert!(deploy.wait().unwrap().success());
}

/// `deploy: {plugins: [picky, fallback]}`: a deployment uses the first plugin whose Supports
/// says yes for its artifact; `plan` says which and why the others were not; none saying yes
/// refuses the deploy before anything is recorded.
#[test]
fn a_deploy_chooses_the_first_plugin_that_supports_its_artifact() {
    let manent = format!(
        "plugins:\n  picky:\n    external:\n      command: {FIXTURE}\n    supports: [tarball]\n  \
         fallback:\n    external:\n      command: {FIXTURE}\n    supports: [file, tarball]\n"
    );
    let descriptor = |kind: &str| {
        format!(
            "application: a\nartifact: {{type: {kind}, version: \"1\"}}\ndeploy:\n  plugins: \
             [picky, fallback]\n  params: {{ledger: \"$LEDGER\"}}\nenvironments:\n  prod:\n    \
             targets: [{{name: t1}}]\n"
        )
    };
    let fx = fixture(&manent, &descriptor("file"));
    let out = fx.run(&["plan", "a", "prod"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert!(
        text(&out.stdout).contains(
            "plugin fallback chosen from deploy.plugins: fallback supports the file artifact a 1; \
             not picky: Supports says no"
        ),
        "{}",
        said(&out)
    );
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let id = fx.deployments().pop().unwrap();
    let logs = fx.run(&["logs", &id]);
    assert!(
        text(&logs.stdout).contains("plugin fallback chosen from deploy.plugins"),
        "{}",
        said(&logs)
    );
    // A tarball: the first says yes.
    std::fs::write(
        fx.path().join("apps/a.yml"),
        descriptor("tarball").replace("$LEDGER", &fx.path().join("ledger").display().to_string()),
    )
    .unwrap();
    let out = fx.run(&["plan", "a", "prod"]);
    assert!(
        text(&out.stdout).contains("plugin picky chosen from deploy.plugins: picky supports"),
        "{}",
        said(&out)
    );
    // An image: neither; the deploy is refused, saying why each said no.
    std::fs::write(
        fx.path().join("apps/a.yml"),
        descriptor("image").replace("$LEDGER", &fx.path().join("ledger").display().to_string()),
    )
    .unwrap();
    let before = fx.deployments().len();
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        text(&out.stderr).contains(
            "no plugin of deploy.plugins [picky, fallback] supports the image artifact a 1: \
             picky: Supports says no; fallback: Supports says no"
        ),
        "{}",
        said(&out)
    );
    assert_eq!(fx.deployments().len(), before, "nothing was recorded");
}
