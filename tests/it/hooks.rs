//! Lifecycle hooks with the real binary: their order (weight, kind, name) the same in plan,
//! the run and history; each event's failure semantics; every delete policy; timeouts,
//! retries, a readiness wait against a local HTTP server that becomes ready late; `manent
//! test`; and kill -9 inside a hook and after each hook's checkpoint.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use crate::support::fleet;
use fleet::{Fixture, said, text, wait_until};

const MANENT: &str = "plugins:\n  exec:\n    pass_env: [FIXTURE]\n";

/// A hook command that records `run|del NAME KEY ATTEMPT` in `$FIXTURE/hooks`.
fn rec(name: &str) -> String {
    format!(
        "echo \"run {name} $MANENT_IDEMPOTENCY_KEY $MANENT_ATTEMPT $MANENT_EVENT\" >> \"$FIXTURE/hooks\""
    )
}

fn del(name: &str) -> String {
    format!("echo \"del {name} $MANENT_DELETE_POLICY $MANENT_EVENT\" >> \"$FIXTURE/hooks\"")
}

/// Two targets deployed (and rolled back) by exec, which records `deploy|rollback TARGET`.
fn app(hooks: &str, extra: &str) -> String {
    format!(
        r#"application: web
artifact: {{version: "2.0.0"}}
deploy:
  plugin: exec
  params:
    deploy: |
      echo "deploy $MANENT_TARGET $MANENT_VERSION" >> "$FIXTURE/hooks"
      echo "$MANENT_VERSION" > "$FIXTURE/live-$MANENT_TARGET"
    current_release: cat "$FIXTURE/live-$MANENT_TARGET" 2>/dev/null || true
    rollback: |
      echo "rollback $MANENT_TARGET $MANENT_TO_VERSION" >> "$FIXTURE/hooks"
      echo "$MANENT_TO_VERSION" > "$FIXTURE/live-$MANENT_TARGET"
max_retries: 0
{extra}hooks:
{hooks}environments:
  prod:
    targets: [{{name: a}}, {{name: b}}]
"#
    )
}

/// The recorded lines.
fn lines(fx: &Fixture) -> Vec<String> {
    std::fs::read_to_string(fx.path().join("hooks"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `run NAME` and `del NAME POLICY` lines only, without keys.
fn events(fx: &Fixture) -> Vec<String> {
    lines(fx)
        .into_iter()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f.first().copied() {
                Some("run") => Some(format!("run {}", f[1])),
                Some("del") => Some(format!("del {} {}", f[1], f[2])),
                Some("deploy" | "rollback") => Some(format!("{} {}", f[0], f[1])),
                _ => None,
            }
        })
        .collect()
}

fn hook(name: &str, events: &str, more: &str) -> String {
    format!(
        "  - name: {name}\n    events: [{events}]\n    pass_env: [FIXTURE]\n    command: '{}'\n{more}",
        rec(name)
    )
}

#[test]
fn hooks_run_by_weight_then_kind_then_name_and_every_view_agrees() {
    // Weights -5, 0, 5, 10 (two as strings, as Helm writes them); at weight 0 kind orders
    // (command before http before wait), then the name.
    let server = Server::ready_after(Duration::ZERO);
    let url = format!("http://127.0.0.1:{}/ok", server.port);
    let hooks = format!(
        "{}{}{}{}  - name: zz-http\n    events: [pre-deploy]\n    http: {{url: \"{url}\"}}\n  - name: aa-wait\n    events: [pre-deploy]\n    wait: {{url: \"{url}\", interval: 100ms}}\n",
        hook("ten", "pre-deploy", "    weight: \"10\"\n"),
        hook("minus-five", "pre-deploy", "    weight: \"-5\"\n"),
        hook("b-zero", "pre-deploy", "    weight: 0\n"),
        hook("five", "pre-deploy", "    weight: 5\n") + &hook("a-zero", "pre-deploy", ""),
    );
    let fx = Fixture::new(MANENT, &[("web", &app(&hooks, ""))]);
    let expected = [
        "minus-five",
        "a-zero",
        "b-zero",
        "zz-http",
        "aa-wait",
        "five",
        "ten",
    ];
    // plan shows the order.
    let out = fx.run(&["plan", "web", "prod"]);
    let plan = text(&out.stdout);
    let shown: Vec<&str> = plan
        .lines()
        .filter_map(|l| {
            l.trim()
                .split_once(". ")
                .map(|(_, r)| r.split_whitespace().next().unwrap())
        })
        .collect();
    assert_eq!(shown, expected, "{plan}");
    // The run follows it, before any target.
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let ran: Vec<String> = events(&fx)
        .into_iter()
        .filter(|e| e.starts_with("run ") || e.starts_with("deploy "))
        .collect();
    assert_eq!(
        ran,
        [
            "run minus-five",
            "run a-zero",
            "run b-zero",
            "run five",
            "run ten",
            "deploy a",
            "deploy b"
        ],
        "commands ran in order, http and wait between (they record nothing)"
    );
    // The deployment (status ID; history lists summaries) shows the same order, each passed.
    let h = fx.run(&["history", "web", "prod", "--json"]);
    let h: serde_json::Value = serde_json::from_slice(&h.stdout).unwrap();
    let id = h["deployments"][0]["id"].as_str().unwrap();
    let h = fx.run(&["status", id, "--json"]);
    let h: serde_json::Value = serde_json::from_slice(&h.stdout).unwrap();
    let hooks = h["hooks"].as_array().unwrap();
    let names: Vec<&str> = hooks.iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert_eq!(names, expected);
    assert!(hooks.iter().all(|x| x["state"] == "passed"), "{hooks:?}");
    let wait = hooks.iter().find(|x| x["name"] == "aa-wait").unwrap();
    assert!(
        wait["message"].as_str().unwrap().contains("ready after"),
        "{wait}"
    );
    assert_eq!(hooks[0]["moniker"], "prod::web::hook::minus-five");
}

#[test]
fn a_failing_pre_deploy_hook_touches_no_target() {
    let hooks = hook("check", "pre-deploy", "")
        + "  - name: gate\n    events: [pre-deploy]\n    weight: 1\n    command: 'echo the change freeze is on >&2; exit 3'\n";
    let fx = Fixture::new(MANENT, &[("web", &app(&hooks, ""))]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("pre-deploy hook gate failed")
            && all.contains("exit 3")
            && all.contains("the change freeze is on")
            && all.contains("no target was touched"),
        "{all}"
    );
    assert_eq!(events(&fx), ["run check"]);
}

#[test]
fn a_failing_post_deploy_hook_of_an_atomic_deploy_rolls_it_back_with_the_rollback_hooks() {
    let hooks = hook("smoke", "post-deploy", "")
        .replace(&rec("smoke"), &format!("{}; exit 1", rec("smoke")))
        + &hook("before-rb", "pre-rollback", "")
        + &hook("after-rb", "post-rollback", "");
    let fx = Fixture::new(MANENT, &[("web", &app(&hooks, ""))]);
    // 1.0.0 live first (no atomic, the smoke hook fails: not atomic, so it just fails).
    let plain = app(&hooks, "").replace("version: \"2.0.0\"", "version: \"1.0.0\"");
    std::fs::write(
        fx.path().join("apps/web.yml"),
        plain.replace("; exit 1", ""),
    )
    .unwrap();
    assert_eq!(
        fx.run(&["deploy", "web", "prod", "--yes"]).status.code(),
        Some(0)
    );
    std::fs::remove_file(fx.path().join("hooks")).unwrap();
    std::fs::write(
        fx.path().join("apps/web.yml"),
        app(&hooks, "atomic: true\n"),
    )
    .unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(4), "{all}");
    assert!(all.contains("post-deploy hook smoke failed"), "{all}");
    // The two targets of one batch roll back in parallel: their order between the hooks is free.
    let mut e = events(&fx);
    assert_eq!(e.len(), 7, "{e:?}");
    e[0..2].sort();
    e[4..6].sort();
    assert_eq!(
        e,
        [
            "deploy a",
            "deploy b",
            "run smoke",
            "run before-rb",
            "rollback a",
            "rollback b",
            "run after-rb"
        ],
        "{e:?}"
    );
    // Without atomic, the deploy fails and stays; with on_failure: continue, it is deployed.
    std::fs::remove_file(fx.path().join("hooks")).unwrap();
    let cont = app(&hooks, "")
        .replace(
            "  - name: smoke\n    events: [post-deploy]\n",
            "  - name: smoke\n    events: [post-deploy]\n    on_failure: continue\n",
        )
        .replace("version: \"2.0.0\"", "version: \"3.0.0\"");
    std::fs::write(fx.path().join("apps/web.yml"), cont).unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("(on_failure: continue)"), "{all}");
}

#[test]
fn delete_policies_run_the_delete_command_when_they_say() {
    let hooks = [
        // Default policy: before it runs again.
        format!("  - name: default\n    events: [pre-deploy]\n    pass_env: [FIXTURE]\n    command: '{}'\n    delete: '{}'\n", rec("default"), del("default")),
        // After the event's hooks succeeded.
        format!("  - name: ok\n    events: [pre-deploy]\n    pass_env: [FIXTURE]\n    weight: 1\n    command: '{}'\n    delete: '{}'\n    delete_policy: [hook-succeeded]\n", rec("ok"), del("ok")),
        // On failure: its own, and the earlier one that asked for it on success.
        format!("  - name: boom\n    events: [post-deploy]\n    pass_env: [FIXTURE]\n    command: '{}; exit 1'\n    delete: '{}'\n    delete_policy: [hook-failed]\n", rec("boom"), del("boom")),
        format!("  - name: first\n    events: [post-deploy]\n    pass_env: [FIXTURE]\n    weight: -1\n    command: '{}'\n    delete: '{}'\n    delete_policy: [hook-succeeded, before-hook-creation]\n", rec("first"), del("first")),
    ]
    .concat();
    let fx = Fixture::new(MANENT, &[("web", &app(&hooks, ""))]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let e = events(&fx);
    assert_eq!(
        e,
        [
            "del default before-hook-creation",
            "run default",
            "run ok",
            "del ok hook-succeeded",
            "deploy a",
            "deploy b",
            "del first before-hook-creation",
            "run first",
            "run boom",
            "del boom hook-failed",
            "del first hook-succeeded",
        ],
        "{e:?}"
    );
    let id = fx.deployments().pop().unwrap();
    let v = fx.status(&id);
    let boom = v["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "boom")
        .unwrap()
        .clone();
    assert_eq!(boom["state"], "failed");
    assert_eq!(boom["deletes"][0], "hook-failed: exit 0");
}

#[test]
fn timeouts_kill_a_hook_and_retries_run_it_again() {
    let hooks = format!(
        "  - name: slow\n    events: [test]\n    command: 'sleep 30'\n    timeout: 1s\n\
         \x20 - name: flaky\n    events: [test]\n    pass_env: [FIXTURE]\n    retries: 2\n    command: 'n=$(cat \"$FIXTURE/n\" 2>/dev/null || echo 0); echo $((n+1)) > \"$FIXTURE/n\"; {}; [ $n -ge 2 ]'\n",
        rec("flaky")
    );
    let fx = Fixture::new(MANENT, &[("web", &app(&hooks, ""))]);
    let started = Instant::now();
    let out = fx.run(&["test", "web", "prod", "--yes"]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "one test failed: {all}");
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the timeout killed it"
    );
    assert!(
        all.contains("hook slow: failed") && all.contains("killed after 1s"),
        "{all}"
    );
    assert!(all.contains("hook flaky: passed"), "{all}");
    let attempts: Vec<String> = lines(&fx)
        .iter()
        .filter(|l| l.starts_with("run flaky"))
        .map(|l| l.split_whitespace().nth(3).unwrap().to_owned())
        .collect();
    assert_eq!(attempts, ["1", "2", "3"], "two failures, then ready");
    // The same key across the retries.
    let keys: std::collections::BTreeSet<String> = lines(&fx)
        .iter()
        .filter(|l| l.starts_with("run flaky"))
        .map(|l| l.split_whitespace().nth(2).unwrap().to_owned())
        .collect();
    assert_eq!(keys.len(), 1);
}

#[test]
fn a_wait_hook_polls_until_the_server_is_ready() {
    let server = Server::ready_after(Duration::from_millis(1500));
    let hooks = format!(
        "  - name: ready\n    events: [post-deploy]\n    wait: {{url: \"http://127.0.0.1:{}/health\", interval: 200ms}}\n    timeout: 30s\n",
        server.port
    );
    let fx = Fixture::new(MANENT, &[("web", &app(&hooks, ""))]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let id = fx.deployments().pop().unwrap();
    let v = fx.status(&id);
    let msg = v["hooks"][0]["message"].as_str().unwrap().to_owned();
    let polls: u32 = msg
        .trim_start_matches("ready after ")
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(polls >= 3, "it was not ready at first: {msg}");
    // Not ready within its timeout: the deploy fails, naming what it saw last.
    let server = Server::ready_after(Duration::from_secs(3600));
    let hooks = format!(
        "  - name: never\n    events: [post-deploy]\n    wait: {{url: \"http://127.0.0.1:{}/health\", interval: 100ms}}\n    timeout: 1s\n",
        server.port
    );
    std::fs::write(
        fx.path().join("apps/web.yml"),
        app(&hooks, "").replace("2.0.0", "3.0.0"),
    )
    .unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("not ready within 1s") && all.contains("answered 503"),
        "{all}"
    );
}

#[test]
fn test_hooks_run_on_demand_and_record_passed_or_failed() {
    let hooks = hook("smoke", "test", "")
        + "  - name: e2e\n    events: [test]\n    command: 'echo two of ten journeys failed; exit 1'\n";
    let fx = Fixture::new(MANENT, &[("web", &app(&hooks, ""))]);
    assert_eq!(
        fx.run(&["deploy", "web", "prod", "--yes"]).status.code(),
        Some(0)
    );
    assert!(
        lines(&fx).iter().all(|l| !l.starts_with("run")),
        "tests run only on demand"
    );
    let out = fx.run(&["test", "web", "prod", "--yes", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kind"], "test");
    assert_eq!(v["version"], "2.0.0", "against what is live");
    let states: Vec<(&str, &str)> = v["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["name"].as_str().unwrap(), h["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states, [("e2e", "failed"), ("smoke", "passed")]);
    assert!(
        v["report"]["message"]
            .as_str()
            .unwrap()
            .contains("1 of 2 test hook(s)")
    );
    // Without any test hook, it says so.
    let fx = Fixture::new(MANENT, &[("web", &app(&hook("x", "pre-deploy", ""), ""))]);
    let out = fx.run(&["test", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no test hooks"),
        "{}",
        said(&out)
    );
}

#[test]
fn a_hook_killed_while_it_runs_runs_again_with_its_key_and_completed_ones_never() {
    // The middle hook waits on a gate file: the engine is killed while it runs. The cut-off
    // attempt counts against its budget (a crash loop grants no free attempts): one retry left.
    let slow = format!(
        "  - name: slow\n    events: [pre-deploy]\n    pass_env: [FIXTURE]\n    weight: 1\n    retries: 1\n    command: 'echo \"start slow $MANENT_IDEMPOTENCY_KEY $MANENT_ATTEMPT\" >> \"$FIXTURE/hooks\"; while [ -e \"$FIXTURE/gate\" ]; do sleep 0.05; done; {}'\n",
        rec("slow")
    );
    let hooks =
        hook("early", "pre-deploy", "") + &slow + &hook("late", "pre-deploy", "    weight: 2\n");
    let fx = Fixture::new(MANENT, &[("web", &app(&hooks, ""))]);
    std::fs::write(fx.path().join("gate"), "").unwrap();
    let mut child = fx.spawn_with(&["deploy", "web", "prod", "--yes"], &[]);
    wait_until(Duration::from_secs(30), "the slow hook to start", || {
        lines(&fx).iter().any(|l| l.starts_with("start slow"))
    });
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_file(fx.path().join("gate")).unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let l = lines(&fx);
    let count = |p: &str| l.iter().filter(|x| x.starts_with(p)).count();
    assert_eq!(
        count("run early"),
        1,
        "completed before the kill: once\n{l:#?}"
    );
    assert_eq!(count("start slow"), 2, "interrupted: again\n{l:#?}");
    assert_eq!(count("run late"), 1);
    let keys: Vec<&str> = l
        .iter()
        .filter(|x| x.starts_with("start slow"))
        .map(|x| x.split_whitespace().nth(2).unwrap())
        .collect();
    assert_eq!(keys[0], keys[1], "the same idempotency key");
    let attempts: Vec<&str> = l
        .iter()
        .filter(|x| x.starts_with("start slow"))
        .map(|x| x.split_whitespace().nth(3).unwrap())
        .collect();
    assert_eq!(attempts, ["1", "2"], "the cut-off attempt counts");
}

#[test]
fn a_kill_after_each_hook_checkpoint_never_runs_a_completed_hook_again() {
    let hooks = hook("h1", "pre-deploy", "")
        + &hook("h2", "pre-deploy", "    weight: 1\n")
        + &hook("h3", "post-deploy", "")
        + &format!(
            "    delete: '{}'\n    delete_policy: [hook-succeeded]\n",
            del("h3")
        );
    for k in 1..=4 {
        let fx = Fixture::new(MANENT, &[("web", &app(&hooks, ""))]);
        let out = fx.run_with(
            &["deploy", "web", "prod", "--yes"],
            &[(
                "MANENT_FAILPOINTS",
                &format!("step.after_checkpoint~hook=kill@{k}"),
            )],
        );
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&out.status),
            Some(9),
            "kill@{k}"
        );
        let out = fx.run(&["deploy", "web", "prod", "--yes"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "kill@{k}: {}",
            text(&out.stderr)
        );
        let e = events(&fx);
        assert_eq!(
            e,
            [
                "run h1",
                "run h2",
                "deploy a",
                "deploy b",
                "run h3",
                "del h3 hook-succeeded"
            ],
            "kill after hook checkpoint {k}"
        );
    }
}

/// A local HTTP server: 503 until `after` has passed since it started, then 200.
struct Server {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Server {
    fn ready_after(after: Duration) -> Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let started = Instant::now();
        std::thread::spawn(move || {
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut s, _)) => {
                        s.set_nonblocking(false).ok();
                        let mut buf = [0u8; 1024];
                        let _ = s.read(&mut buf);
                        let (status, body) = if started.elapsed() >= after {
                            ("200 OK", "ok")
                        } else {
                            ("503 Service Unavailable", "warming up")
                        };
                        let _ = write!(
                            s,
                            "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Server { port, stop }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

#[test]
fn a_hook_runs_in_its_descriptors_directory_with_only_what_it_is_given() {
    let manent = format!("{MANENT}secrets:\n  token: env:HOOK_TOKEN\n");
    let hooks = "  - name: check\n    events: [test]\n    pass_env: [FIXTURE]\n    env: {GREETING: hello}\n    secrets: [token]\n    command: ./check.sh\n";
    let fx = Fixture::new(&manent, &[("web", &app(hooks, ""))]);
    let script = fx.path().join("apps/check.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\necho \"dir $(pwd -P) greeting $GREETING engine ${ENGINE_ONLY:-absent} \
         token-len ${#MANENT_SECRET_TOKEN}\" >> \"$FIXTURE/seen\"\necho \"using $MANENT_SECRET_TOKEN\"\n",
    )
    .unwrap();
    let mut perms = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).unwrap();
    // Started from elsewhere: `./check.sh` is still the one beside the descriptor.
    let out = fx
        .command(&["test", "web", "prod", "--yes", "--json"])
        .current_dir("/")
        .env("HOOK_TOKEN", "hunter2-hook-secret")
        .env("ENGINE_ONLY", "leaked")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let seen = std::fs::read_to_string(fx.path().join("seen")).unwrap();
    let apps = fx.path().join("apps").canonicalize().unwrap();
    assert_eq!(
        seen.trim(),
        format!(
            "dir {} greeting hello engine absent token-len 19",
            apps.display()
        )
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = v["id"].as_str().unwrap();
    let logs = fx.run(&["logs", id]);
    let all = format!(
        "{}{}{}",
        text(&out.stdout),
        text(&logs.stdout),
        text(&logs.stderr)
    );
    assert!(!all.contains("hunter2"), "{all}");
    assert!(all.contains("using [redacted]"), "{all}");
    let db = std::fs::read(fx.db_path()).unwrap();
    let wal = std::fs::read(fx.db_path().with_extension("db-wal")).unwrap_or_default();
    for bytes in [db, wal] {
        assert!(
            !bytes.windows(7).any(|w| w == b"hunter2"),
            "the secret reached the database"
        );
    }
}
