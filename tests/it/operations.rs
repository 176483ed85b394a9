//! The operational layer against the real binary: deploy locks (refusal, break-glass, expiry),
//! the "waiting on you" inbox, `status --watch`, Prometheus metrics, the JSON log file,
//! webhook notifications, and honest target state after a crash.

use std::time::Duration;

use crate::support::fleet;
use fleet::{AS_NOBODY, Fixture, LEDGER_MANENT, free_port, ledger_app, me, said, sigterm, text};

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&out.stdout), text(&out.stderr)))
}

#[test]
fn a_lock_refuses_deploys_and_rollbacks_naming_its_owner_until_lifted() {
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &ledger_app(""))]);
    for v in ["1.0.0", "2.0.0"] {
        let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", v]);
        assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    }

    // A lock needs a reason; an unknown environment is named.
    let out = fx.run(&["lock", "web", "prod"]);
    assert_eq!(out.status.code(), Some(2));
    // A reason others will read in their terminals carries no escape sequences, nor what
    // would make it read otherwise than written (a right-to-left override).
    let out = fx.run(&["lock", "web", "prod", "--reason", "fine \u{202e}txt.exe"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("U+202E"), "{}", said(&out));
    let out = fx.run(&["lock", "web", "prod", "--reason", "\u{1b}[2Jgotcha"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("one line of visible text"),
        "{}",
        said(&out)
    );
    let out = fx.run(&["lock", "web", "qa", "--reason", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("qa"), "{}", said(&out));

    let out = fx.run(&[
        "lock",
        "web",
        "prod",
        "--reason",
        "investigating 502s",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let lock = json(&out);
    assert_eq!(lock["locked"], true);
    assert_eq!(lock["lock"]["operator"], me().as_str());
    assert_eq!(lock["lock"]["reason"], "investigating 502s");
    assert!(lock["lock"]["expires_at"].is_null());

    // Another operator cannot take it over without --force.
    let out = fx.run_with(&["lock", "web", "prod", "--reason", "mine"], &AS_NOBODY);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(&format!("already locked by {}", me())),
        "{}",
        said(&out)
    );

    // Deploys and rollbacks are refused before anything is recorded, naming owner and reason.
    let before = fx.deployments().len();
    for args in [
        &["deploy", "web", "prod", "--yes", "--version", "3.0.0"][..],
        &["rollback", "web", "prod", "--yes"][..],
    ] {
        let out = fx.run_with(args, &AS_NOBODY);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("web/prod is locked by {}", me()))
                && err.contains("investigating 502s"),
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
        &AS_NOBODY,
    );
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert!(
        text(&out.stderr).contains("going through the lock"),
        "{}",
        said(&out)
    );
    let h = json(&fx.run(&["history", "web", "prod", "--json"]));
    let journal = h["journal"].as_array().unwrap();
    let glass = journal
        .iter()
        .find(|j| j["action"] == "break-glass")
        .expect("a break-glass entry");
    assert_eq!(glass["operator"], "nobody");
    assert_eq!(glass["reason"], "hotfix for the 502s");
    assert!(
        glass["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("through the lock of {}", me())),
        "{glass}"
    );
    let deploy = journal
        .iter()
        .find(|j| j["action"] == "deploy" && j["operator"] == "nobody")
        .unwrap();
    assert_eq!(
        glass["workflow_id"], deploy["workflow_id"],
        "names its deploy"
    );

    // Another operator's lock is theirs to lift: `--force` and a reason, journaled.
    let out = fx.run_with(&["unlock", "web", "prod"], &AS_NOBODY);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("it is theirs to lift"),
        "{}",
        said(&out)
    );
    let out = fx.run_with(&["unlock", "web", "prod", "--force"], &AS_NOBODY);
    assert_eq!(out.status.code(), Some(2), "--force needs a reason");
    assert!(text(&out.stderr).contains("--reason"), "{}", said(&out));
    // Unlocked, anyone deploys again; the journal keeps both ends.
    let out = fx.run_with(
        &["unlock", "web", "prod", "--force", "--reason", "fixed"],
        &AS_NOBODY,
    );
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert!(
        text(&out.stdout).contains(&format!("it was locked by {}", me())),
        "{}",
        text(&out.stdout)
    );
    let out = fx.run(&["rollback", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
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
            "unlock --force",
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
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(2), "locked for now");
    std::thread::sleep(Duration::from_millis(1100));
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
}

#[test]
fn the_inbox_lists_a_failed_deploy_awaiting_a_decision_and_an_expiring_lock() {
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &ledger_app(""))]);
    let out = fx.run(&["inbox"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("nothing waits on you"));
    std::fs::write(fx.path().join("broken-web-3"), "").unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
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
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));

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
            .contains(&format!("lock expires in 10m: {} on", me())),
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

/// `GET path` on 127.0.0.1:`port`: the status line and the body.
fn http_get(port: u16, path: &str) -> Result<(String, String), String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut all = String::new();
    s.read_to_string(&mut all).map_err(|e| e.to_string())?;
    let (head, body) = all.split_once("\r\n\r\n").ok_or("no header end")?;
    Ok((
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    ))
}

fn sample(exposition: &str, name_and_labels: &str) -> Option<f64> {
    exposition
        .lines()
        .find(|l| l.starts_with(name_and_labels))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn a_worker_serves_metrics_that_promtool_accepts_and_count_every_target() {
    let port = free_port();
    let manent = format!("{LEDGER_MANENT}metrics:\n  listen: 127.0.0.1:{port}\n");
    let fx = Fixture::new(&manent, &[("web", &ledger_app(""))]);
    let mut worker = fx.spawn_with(&["worker"], &[]);
    fleet::wait_until(Duration::from_secs(20), "the metrics endpoint", || {
        http_get(port, "/metrics").is_ok()
    });
    std::fs::write(fx.path().join("broken-web-5"), "").unwrap();
    // Handed to the worker: it runs there, and this command follows it to its end.
    let first = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(first.status.code(), Some(1), "{}", said(&first));
    let id = fx.deployments().pop().unwrap();
    std::fs::remove_file(fx.path().join("broken-web-5")).unwrap();
    let out = fx.run(&["retry", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    // Beside the worker: one line says who runs it, and only what moves from now on is said
    // (the five targets deployed before the retry are not said again).
    let err = text(&out.stderr);
    assert_eq!(err.matches("runs the work").count(), 1, "{err}");
    assert!(err.contains("web-5: "), "{err}");
    assert!(!err.contains("web-1: "), "no replay: {err}");
    // Nor the log lines of the deploy before it (its error about web-5 was said then).
    assert!(text(&first.stderr).contains("error [engine] web-5"));
    assert!(!err.contains("broken on purpose"), "no replay: {err}");

    let (status, body) = http_get(port, "/metrics").unwrap();
    assert!(status.contains("200"), "{status}");
    let labels = r#"application="web",environment="prod",plugin="exec""#;
    let deployed = format!(r#"manent_target_deploy_seconds_count{{{labels},status="deployed"}}"#);
    let failed = format!(r#"manent_target_deploy_seconds_count{{{labels},status="failed"}}"#);
    assert_eq!(sample(&body, &deployed), Some(6.0), "{body}");
    // web-5 failed its first attempt and both retries (max_retries: 2) before the decision.
    assert_eq!(sample(&body, &failed), Some(3.0), "{body}");
    assert_eq!(
        sample(&body, r#"manent_step_retries_total{step="deploy"}"#),
        Some(2.0),
        "{body}"
    );
    assert_eq!(
        sample(&body, r#"manent_workflows{kind="deploy",state="SUCCESS"}"#),
        Some(1.0),
        "{body}"
    );
    let (status, _) = http_get(port, "/nope").unwrap();
    assert!(status.contains("404"), "{status}");

    // The exposition passes Prometheus's own linter.
    match std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(mut child) => {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(body.as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "promtool: {}{}\n{body}",
                text(&out.stdout),
                text(&out.stderr)
            );
        }
        Err(e) => assert!(
            std::env::var_os("CI").is_none(),
            "promtool is missing in CI ({e}): .ci/run installs Debian's prometheus"
        ),
    }
    sigterm(&worker);
    let _ = worker.wait();
}

#[test]
fn a_taken_metrics_port_and_a_bad_listen_address_are_clear_errors() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let manent = format!("{LEDGER_MANENT}metrics:\n  listen: 127.0.0.1:{port}\n");
    let fx = Fixture::new(&manent, &[("web", &ledger_app(""))]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(6), "{}", said(&out));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("metrics.listen 127.0.0.1:{port}")) && err.contains("free port"),
        "{err}"
    );
    assert!(fx.deployments().is_empty(), "nothing started");

    let fx = Fixture::new(
        &format!("{LEDGER_MANENT}metrics:\n  listen: localhost-9464\n"),
        &[("web", &ledger_app(""))],
    );
    let out = fx.run(&["validate"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("manent.yml:5:3") && err.contains("127.0.0.1:9464"),
        "{err}"
    );
}

const FIXTURE_PLUGIN: &str = env!("CARGO_BIN_EXE_manent-fixture-plugin");

#[test]
fn the_json_log_file_carries_every_line_with_its_level_and_attributes_and_no_secret() {
    let manent = format!(
        "plugins:\n  exec:\n    pass_env: [FIXTURE]\n  fix:\n    external:\n      command: \
         {FIXTURE_PLUGIN}\n      start_timeout: 5s\nsecrets:\n  token: env:DEPLOY_TOKEN\n\
         log_file:\n  dir: logs\n  keep: 3\n"
    );
    let api = r#"application: api
artifact: {version: "1"}
deploy:
  plugin: exec
  secrets: [token]
  params:
    secrets: [token]
    deploy: |
      echo "using $MANENT_SECRET_TOKEN"
      echo "a warning on stderr" >&2
environments:
  prod:
    targets: [{name: a}]
"#;
    let ext = r#"application: ext
artifact: {version: "1"}
deploy:
  plugin: fix
  params: {log_lines: 3}
environments:
  prod:
    targets: [{name: t1}]
"#;
    let fx = Fixture::new(&manent, &[("api", api), ("ext", ext)]);
    // Older files beyond the bound are pruned when the file opens.
    let logs = fx.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    for day in 1..=6 {
        std::fs::write(logs.join(format!("manent.2026-01-0{day}.jsonl")), "{}\n").unwrap();
    }
    for app in ["api", "ext"] {
        let out = fx.run_with(
            &["deploy", app, "prod", "--yes"],
            &[("DEPLOY_TOKEN", "hunter2-secret-value")],
        );
        assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    }
    let files: Vec<_> = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(files.len() <= 3, "at most `keep` files: {files:?}");
    let mut lines = Vec::new();
    for f in &files {
        let body = std::fs::read_to_string(f).unwrap();
        assert!(
            !body.contains("hunter2"),
            "the secret reached {}",
            f.display()
        );
        for l in body.lines() {
            let v: serde_json::Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {l}", f.display()));
            lines.push(v);
        }
    }
    let find = |pred: &dyn Fn(&serde_json::Value) -> bool| {
        lines
            .iter()
            .find(|v| pred(v))
            .cloned()
            .unwrap_or_else(|| panic!("no such line in {lines:#?}"))
    };
    // exec's lines: the command's output, stdout and stderr through one pipe, in the order the
    // command wrote them (issue 19), at info; a target that fails is the error-level line.
    let used = find(&|v| v["message"] == "using [redacted]");
    assert_eq!(used["level"], "info");
    assert_eq!(used["kind"], "plugin");
    assert_eq!(used["source"], "exec");
    assert_eq!(used["target"], "a");
    assert_eq!(used["moniker"], "prod::api::exec::a");
    assert!(used["deployment"].as_str().unwrap().starts_with("dep-"));
    let warned = find(&|v| v["message"] == "a warning on stderr");
    assert_eq!(warned["level"], "info");
    let at = |m: &str| lines.iter().position(|v| v["message"] == m).unwrap();
    assert!(
        at("using [redacted]") < at("a warning on stderr"),
        "stdout written first reads first"
    );
    // A go-plugin process's hclog lines keep their level, attributes and moniker.
    for (n, level) in [(0, "debug"), (1, "info"), (2, "warn")] {
        let l = find(&|v| v["message"] == format!("fixture line {n} for t1"));
        assert_eq!(l["level"], level, "{l}");
        assert_eq!(l["attrs"]["n"], n, "{l}");
        assert_eq!(l["source"], "fix");
        assert_eq!(l["moniker"], "prod::ext::fix::t1", "{l}");
    }
    // The engine's own lines are there too.
    let ended = find(&|v| v["kind"] == "engine" && v["event"] == "workflow.ended");
    assert!(
        ended["message"]
            .as_str()
            .unwrap()
            .starts_with("ended SUCCESS"),
        "{ended}"
    );
    find(&|v| {
        v["event"] == "step.finished"
            && v["step"].as_str().is_some_and(|s| s.starts_with("deploy:"))
    });
}

#[test]
fn a_flood_with_a_log_file_stores_every_line_up_to_the_cap_and_says_so() {
    let manent = "plugins:\n  exec: {}\nengine:\n  log_cap: 200KB\nlog_file:\n  dir: logs\n  keep: 20\n  max_size: 1MB\n";
    let app = r#"application: flood
artifact: {version: "1"}
deploy:
  plugin: exec
  params:
    deploy: seq 1 20000
environments:
  prod:
    targets: [{name: a}]
"#;
    let fx = Fixture::new(manent, &[("flood", app)]);
    let out = fx.run(&["deploy", "flood", "prod", "--yes"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let id = fx.deployments().pop().unwrap();
    let stored = text(&fx.run(&["logs", &id]).stdout);
    assert!(
        stored.contains("] 1\n") || stored.contains(" 1\n"),
        "the first lines are kept"
    );
    assert!(
        stored.contains("log reached 204800 bytes in the database (engine.log_cap)"),
        "the cut is said: {}",
        &stored[stored.len().saturating_sub(600)..]
    );
    assert!(!stored.contains(" 20000\n"), "past the cap, not stored");
    // The JSON log has every line, the cap notwithstanding, in files of at most 1MB.
    let mut all = String::new();
    let files: Vec<_> = std::fs::read_dir(fx.path().join("logs"))
        .unwrap()
        .map(|f| f.unwrap().path())
        .collect();
    assert!(files.len() > 1, "rotated by size: {files:?}");
    for f in &files {
        assert!(std::fs::metadata(f).unwrap().len() <= 1 << 20, "{f:?}");
        all.push_str(&std::fs::read_to_string(f).unwrap());
    }
    assert!(
        all.contains("\"message\":\"20000\""),
        "the JSON log has the last line"
    );
    assert!(all.contains("\"message\":\"1\""));
}

/// A flood of 300,000 lines with `log_file:`: the JSON log holds every line, or says in
/// itself how many it dropped — nothing goes missing without a word.
#[test]
fn a_flood_reaches_the_json_log_whole_or_the_log_counts_what_it_dropped() {
    const N: u64 = 300_000;
    let manent = "plugins:\n  exec: {}\nlog_file:\n  dir: logs\n  keep: 50\n  max_size: 64MB\n  \
                  max_total: 2GB\n";
    let app = format!(
        "application: flood\nartifact: {{version: \"1\"}}\ndeploy:\n  plugin: exec\n  params:\n    \
         deploy: seq 1 {N}\nenvironments:\n  prod:\n    targets: [{{name: a}}]\n"
    );
    let fx = Fixture::new(manent, &[("flood", &app)]);
    let out = fx.run(&["deploy", "flood", "prod", "--yes"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let mut seen = std::collections::BTreeSet::new();
    let mut dropped = 0u64;
    for f in std::fs::read_dir(fx.path().join("logs")).unwrap() {
        let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
        for line in text.lines() {
            let v: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            if let Some(n) = v["dropped"].as_u64() {
                dropped += n;
            } else if v["target"] == "a"
                && let Some(n) = v["message"].as_str().and_then(|m| m.parse::<u64>().ok())
            {
                assert!(seen.insert(n), "line {n} twice");
            }
        }
    }
    assert_eq!(
        seen.len() as u64 + dropped,
        N,
        "{} lines in the JSON log, {dropped} said dropped",
        seen.len()
    );
    if dropped > 0 {
        assert!(err.contains("the JSON log in"), "said on exit too: {err}");
    }
}

/// A webhook receiver on loopback: answers `fail_first` requests with 503 (or, `silent`,
/// never; or, `fail_first` above 1000, the first `fail_first - 1000` with 400), then 200; keeps
/// the bodies it accepted and the headers it saw.
struct Receiver {
    port: u16,
    accepted: std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
    headers: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    requests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Receiver {
    fn start(fail_first: usize, silent: bool) -> Receiver {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let headers = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let requests = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (a, h, n) = (accepted.clone(), headers.clone(), requests.clone());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut len = 0usize;
                let mut seen = Vec::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    let line = line.trim_end().to_owned();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    seen.push(line);
                }
                let mut body = vec![0; len];
                let _ = reader.read_exact(&mut body);
                let i = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if silent {
                    held.push(conn);
                    continue;
                }
                let refuse = fail_first > 1000 && i < fail_first - 1000;
                let ok = !refuse && i >= fail_first % 1000;
                if ok {
                    a.lock()
                        .unwrap()
                        .push(serde_json::from_slice(&body).unwrap());
                    h.lock().unwrap().extend(seen);
                }
                let status = if ok {
                    "200 OK"
                } else if refuse {
                    "400 Bad Request"
                } else {
                    "503 Service Unavailable"
                };
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
            }
        });
        Receiver {
            port,
            accepted,
            headers,
            requests,
        }
    }

    fn events(&self) -> Vec<String> {
        self.accepted
            .lock()
            .unwrap()
            .iter()
            .map(|v| v["event"].as_str().unwrap().to_owned())
            .collect()
    }
}

fn notify_manent(r: &Receiver, extra: &str) -> String {
    format!(
        "{LEDGER_MANENT}secrets:\n  hook: env:HOOK_TOKEN\nnotify:\n  - name: chat\n    url: \
         http://127.0.0.1:{}/hooks/deploys\n    headers: {{Authorization: \"Bearer \
         ${{secret:hook}}\"}}\n    backoff: {{base: 50ms, max: 200ms}}\n{extra}",
        r.port
    )
}

#[test]
fn every_transition_reaches_the_receiver_once_in_order_with_who_and_why() {
    let r = Receiver::start(0, false);
    let fx = Fixture::new(&notify_manent(&r, ""), &[("web", &ledger_app(""))]);
    std::fs::write(fx.path().join("broken-web-3"), "").unwrap();
    let env = [("HOOK_TOKEN", "s3cr3t-hook-token")];
    let out = fx.run_with(
        &[
            "deploy",
            "web",
            "prod",
            "--yes",
            "--version",
            "2.0.0",
            "--reason",
            "JIRA-7",
        ],
        &env,
    );
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let id = fx.deployments().pop().unwrap();
    assert_eq!(r.events(), ["started", "target-failed", "waiting"]);
    // A retry that fails the same way is a new failure and a new wait.
    let out = fx.run_with(&["retry", &id], &env);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    std::fs::remove_file(fx.path().join("broken-web-3")).unwrap();
    let out = fx.run_with(&["retry", &id], &env);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(
        r.events(),
        [
            "started",
            "target-failed",
            "waiting",
            "target-failed",
            "waiting",
            "finished"
        ],
        "each transition once, in order"
    );
    let all = r.accepted.lock().unwrap().clone();
    assert_eq!(all[0]["deployment"], id.as_str());
    assert_eq!(all[0]["application"], "web");
    assert_eq!(all[0]["environment"], "prod");
    assert_eq!(all[0]["version"], "2.0.0");
    assert_eq!(all[0]["who"], me().as_str());
    assert_eq!(all[0]["why"], "JIRA-7");
    assert_eq!(all[1]["target"], "web-3");
    assert!(
        all[1]["message"]
            .as_str()
            .unwrap()
            .contains("broken on purpose")
    );
    assert_eq!(all[5]["state"], "deployed");
    let headers = r.headers.lock().unwrap().clone();
    assert!(
        headers
            .iter()
            .any(|h| h.eq_ignore_ascii_case("authorization: Bearer s3cr3t-hook-token")),
        "{headers:?}"
    );
    // The secret header value is nowhere in the database.
    let db = std::fs::read(fx.db_path()).unwrap();
    assert!(!db.windows(10).any(|w| w == b"s3cr3t-hoo"));
}

#[test]
fn a_new_receiver_hears_from_its_enabling_on_with_when_each_thing_happened() {
    let r = Receiver::start(0, false);
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &ledger_app(""))]);
    for v in ["1.0.0", "1.1.0"] {
        let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", v]);
        assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    }
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    // The receiver is added: it hears of the next deploy, not of the two before.
    std::fs::write(fx.config(), notify_manent(&r, "")).unwrap();
    let env = [("HOOK_TOKEN", "a-hook-token-x")];
    let out = fx.run_with(
        &["deploy", "web", "prod", "--yes", "--version", "2.0.0"],
        &env,
    );
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let id = fx.deployments().pop().unwrap();
    assert_eq!(r.events(), ["started", "finished"]);
    let all = r.accepted.lock().unwrap().clone();
    assert!(
        all.iter().all(|b| b["deployment"] == id.as_str()),
        "{all:?}"
    );
    // Each is stamped with when it happened, not when it was sent.
    let v = fx.status(&id);
    assert_eq!(all[0]["at"], v["created_at"]);
    assert_eq!(all[1]["at"], v["completed_at"]);
    let said =
        fx.strings("SELECT message FROM logs WHERE message LIKE 'notify chat: new receiver%'");
    assert!(
        said.iter()
            .any(|m| m.contains("4 earlier event(s) of 2 deployment(s) are not sent")),
        "{said:?}"
    );
}

#[test]
fn a_refused_notification_is_parked_and_the_next_ones_arrive() {
    // The receiver refuses its first request (400): that one is set aside at once.
    let r = Receiver::start(1001, false);
    let fx = Fixture::new(&notify_manent(&r, ""), &[("web", &ledger_app(""))]);
    let env = [("HOOK_TOKEN", "a-hook-token-x")];
    let out = fx.run_with(&["deploy", "web", "prod", "--yes"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(
        r.events(),
        ["finished"],
        "the refused one did not block the next"
    );
    assert_eq!(r.requests.load(std::sync::atomic::Ordering::SeqCst), 2);
    let list = fx.run(&["notify", "list", "--json"]);
    let parked: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(parked[0]["row"]["event"], "started", "{parked}");
    assert!(parked[0]["error"].as_str().unwrap().contains("HTTP 400"));
    let inbox = text(&fx.run(&["inbox"]).stdout);
    assert!(
        inbox.contains("the started notification to chat is parked")
            && inbox.contains("notify retry"),
        "{inbox}"
    );
    // Sent again: it arrives with the next engine, and the inbox is clear.
    let id = parked[0]["row"]["id"].as_i64().unwrap().to_string();
    let out = fx.run(&["notify", "retry", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let out = fx.run_with(
        &["deploy", "web", "prod", "--yes", "--version", "2.0.0"],
        &env,
    );
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(r.events(), ["finished", "started", "started", "finished"]);
    assert!(!text(&fx.run(&["inbox"]).stdout).contains("parked"));
    let out = fx.run(&["notify", "retry", "--all"]);
    assert_eq!(out.status.code(), Some(2), "nothing parked now");
}

#[test]
fn a_receiver_down_for_three_attempts_still_gets_everything_in_order() {
    let r = Receiver::start(3, false);
    let fx = Fixture::new(&notify_manent(&r, ""), &[("web", &ledger_app(""))]);
    let out = fx.run_with(
        &["deploy", "web", "prod", "--yes"],
        &[("HOOK_TOKEN", "t0k3n-for-tests")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(r.events(), ["started", "finished"]);
    assert_eq!(
        r.requests.load(std::sync::atomic::Ordering::SeqCst),
        5,
        "3 refused, then each once"
    );
    // Its failures are in the engine's log.
    let id = fx.deployments().pop().unwrap();
    let out = fx.run(&["logs", &id]);
    let _ = out;
    let conn = fx.db();
    let failures: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM logs WHERE message LIKE 'notify chat: the started notification%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let said: Vec<String> = conn
        .prepare("SELECT message FROM logs WHERE message LIKE 'notify%'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(failures, 3, "{said:?}");
}

#[test]
fn a_receiver_that_never_answers_does_not_hold_the_deploy() {
    let r = Receiver::start(0, true);
    let fx = Fixture::new(
        &notify_manent(&r, "    timeout: 60s\n"),
        &[("web", &ledger_app(""))],
    );
    let started = std::time::Instant::now();
    let out = fx.run_with(
        &["deploy", "web", "prod", "--yes"],
        &[("HOOK_TOKEN", "t0k3n-for-tests")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the deploy waited for a receiver that never answers"
    );
    // The command does not wait on it, and says what waits and who sends it.
    assert!(
        said(&out).contains("wait in the outbox") && said(&out).contains("the next engine"),
        "{}",
        said(&out)
    );
    // What was not delivered stays in the outbox for the next start.
    let undelivered: i64 = fx
        .db()
        .query_row(
            "SELECT COUNT(*) FROM outbox WHERE delivered_at IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(undelivered, 2);
}

/// The worker's systemd unit (packaging/manent-worker.service) is one systemd accepts:
/// `systemd-analyze verify` on it, its binary the one built here and its documentation the
/// pages `manent man` writes.
#[test]
fn the_workers_systemd_unit_verifies() {
    if std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "systemd-analyze is required in CI"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let unit = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/manent-worker.service"),
    )
    .unwrap();
    for needed in [
        "Type=notify",
        "WatchdogSec=",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ReadWritePaths=/var/lib/manent",
        "Restart=on-failure",
    ] {
        assert!(unit.contains(needed), "{needed}");
    }
    let file = dir.path().join("manent-worker.service");
    std::fs::write(
        &file,
        unit.replace("/usr/bin/manent", env!("CARGO_BIN_EXE_manent")),
    )
    .unwrap();
    let pages = dir.path().join("man/man1");
    std::fs::create_dir_all(&pages).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_manent"))
        .arg("man")
        .arg(&pages)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&file)
        .env("MANPATH", dir.path().join("man"))
        .output()
        .unwrap();
    assert!(
        out.status.success() && text(&out.stderr).trim().is_empty(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}
