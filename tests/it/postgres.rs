//! Several engines on one real PostgreSQL: the real `manent` binary on two configuration
//! directories (two "bastion hosts") sharing one database. Failover after `kill -9`, fencing of
//! an engine that comes back after its lease, and a deploy that waits out a database outage.
//! The `exec` plugin's ledger says what really ran.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::process::Child;
use std::time::Duration;

use crate::support::fleet;
use crate::support::postgres as pg;
use fleet::{Fixture, LEDGER_MANENT, ledger_app, said, text, wait_until};

/// Lease of the engines in these tests: short, so a takeover comes quickly.
const LEASE: &str = "2s";

/// A "host": its own configuration directory on the shared database, as engine `id`.
fn host(url: &str, id: &str) -> Fixture {
    host_with(url, Some(id), &ledger_app(""))
}

/// A "host" with descriptor `app`, as engine `id` (or the default id).
fn host_with(url: &str, id: Option<&str>, app: &str) -> Fixture {
    let engine = id.map_or(String::new(), |id| {
        format!("engine: {{executor_id: {id}, lease: {LEASE}}}\n")
    });
    Fixture::on_postgres(url, &format!("{LEDGER_MANENT}{engine}"), &[("web", app)])
}

/// The ledger app whose deploy command also says something on stderr (log lines to find).
fn talkative_app() -> String {
    let app = ledger_app("").replace(
        "      echo \"start ",
        "      echo \"unpacking on $MANENT_TARGET\" >&2\n      echo \"start ",
    );
    assert!(app.contains("unpacking"));
    app
}

/// Host A's deploy of web/prod, each target taking `delay` seconds.
fn deploy_on(a: &Fixture, delay: &str) -> Child {
    on_ledger(
        a,
        a,
        &["deploy", "web", "prod", "--yes"],
        &[("DELAY", delay)],
    )
}

/// One ledger for both hosts: host B's commands write where host A's do.
fn on_ledger(fx: &Fixture, ledger: &Fixture, args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut all: Vec<(&str, &str)> = env.to_vec();
    all.push(("FIXTURE", ledger.path().to_str().unwrap()));
    fx.spawn_with(args, &all)
}

fn signal(child: &Child, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// Rows of `sql` as strings, read straight from PostgreSQL.
fn rows(url: &str, sql: &str) -> Vec<Vec<String>> {
    fleet::pg_rows(url, sql)
}

/// Starts and completions per idempotency key.
fn ledger_counts(fx: &Fixture) -> BTreeMap<String, (u32, u32)> {
    let mut m: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for e in fx.ledger() {
        let c = m.entry(e.key).or_default();
        match e.event.as_str() {
            "start" => c.0 += 1,
            "done" => c.1 += 1,
            _ => {}
        }
    }
    m
}

fn dones(fx: &Fixture) -> usize {
    fx.ledger().iter().filter(|e| e.event == "done").count()
}

fn deployment(url: &str) -> String {
    let ids = rows(
        url,
        "SELECT workflow_id FROM workflow_status WHERE name = 'deploy'",
    );
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids[0][0].clone()
}

fn status_of(url: &str, id: &str) -> String {
    rows(
        url,
        &format!("SELECT status FROM workflow_status WHERE workflow_id = '{id}'"),
    )
    .first()
    .map(|r| r[0].clone())
    .unwrap_or_default()
}

/// Which engines checkpointed the deployment's target steps.
fn executors(url: &str, id: &str) -> Vec<String> {
    rows(
        url,
        &format!(
            "SELECT DISTINCT executor_id FROM operation_outputs WHERE workflow_id = '{id}' \
             AND function_name LIKE 'deploy:%' ORDER BY 1"
        ),
    )
    .into_iter()
    .map(|r| r[0].clone())
    .collect()
}

#[test]
fn a_killed_engines_deploy_is_finished_by_another_and_no_completed_step_runs_again() {
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let url = pg.create_db("failover");
    let (a, b) = (host(&url, "host-a"), host(&url, "host-b"));
    // Host A deploys; each target takes a moment.
    let mut deploy = deploy_on(&a, "0.4");
    wait_until(
        Duration::from_secs(60),
        "host A completes two targets",
        || dones(&a) >= 2,
    );
    // Host B's engine is up before A dies (started now, so A claimed the deploy itself).
    let worker = on_ledger(&b, &a, &["worker"], &[("DELAY", "0.4")]);
    std::thread::sleep(Duration::from_millis(500));
    let id = deployment(&url);
    let completed_before: Vec<String> = rows(
        &url,
        &format!(
            "SELECT function_id FROM operation_outputs WHERE workflow_id = '{id}' \
             AND function_name LIKE 'deploy:%'"
        ),
    )
    .into_iter()
    .map(|r| format!("{id}/{}", r[0]))
    .collect();
    signal(&deploy, "-KILL");
    let out = deploy.wait().unwrap();
    assert_eq!(out.signal(), Some(9));
    // What was cut off is what had started and not finished when A died: read after the kill
    // (read before it, a step A started in between looked like one that ran twice).
    let before = ledger_counts(&a);
    // Within the lease and a few seconds, B takes the deployment over and finishes it.
    wait_until(
        Duration::from_secs(60),
        "host B finishes the deployment",
        || status_of(&url, &id) == "SUCCESS",
    );
    signal(&worker, "-TERM");
    let w = worker.wait_with_output().unwrap();
    let log = text(&w.stderr);
    assert!(w.status.success(), "worker B: {log}");
    assert_eq!(
        executors(&url, &id),
        ["host-a", "host-b"],
        "both engines completed targets of the one deployment"
    );
    let after = ledger_counts(&a);
    for key in &completed_before {
        assert_eq!(
            after.get(key).map(|c| c.0),
            Some(1),
            "{key} was checkpointed before the kill but ran again: {after:?}"
        );
    }
    for (key, (starts, done)) in &after {
        assert_eq!(*done, 1, "{key} completed {done} times: {after:?}");
        // A step the kill cut off runs again, with the same key; nothing else does.
        let cut_off = before.get(key).is_some_and(|(s, d)| *s > *d);
        assert!(
            *starts == 1 || cut_off,
            "{key} started {starts} times without being cut off: {after:?}"
        );
    }
    assert_eq!(after.len(), 6, "six targets: {after:?}");
    for t in 1..=6 {
        let v = std::fs::read_to_string(a.path().join(format!("fleet/web-{t}/VERSION"))).unwrap();
        assert_eq!(v.trim(), "1.0.0");
    }
    // Both hosts read the same history, and its log says who took it over from whom.
    let v = b.status(&id);
    assert_eq!(v["status"], "SUCCESS", "{v:#}");
    let logs = text(&a.run(&["logs", &id]).stdout);
    assert!(
        logs.contains("engine host-b takes this deployment over: engine host-a stopped renewing"),
        "{logs}"
    );
}

#[test]
fn an_engine_paused_past_its_lease_is_fenced_out_when_it_comes_back() {
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let url = pg.create_db("fencing");
    let (a, b) = (host(&url, "host-a"), host(&url, "host-b"));
    let mut deploy = deploy_on(&a, "0.5");
    wait_until(Duration::from_secs(60), "host A completes a target", || {
        dones(&a) >= 1
    });
    let mut worker = on_ledger(&b, &a, &["worker"], &[("DELAY", "0.5")]);
    std::thread::sleep(Duration::from_millis(300));
    let id = deployment(&url);
    // A stops (a paused VM, a partition) for well past its lease; B takes over.
    signal(&deploy, "-STOP");
    wait_until(
        Duration::from_secs(60),
        "host B takes the deployment over",
        || executors(&url, &id).contains(&"host-b".to_owned()),
    );
    // A comes back while B is at work: its late commits are refused and it starts nothing.
    signal(&deploy, "-CONT");
    wait_until(Duration::from_secs(60), "the deployment finishes", || {
        status_of(&url, &id) == "SUCCESS"
    });
    let out = wait_bounded(&mut deploy, Duration::from_secs(60));
    let said = text(&out.stderr);
    signal(&worker, "-TERM");
    let _ = worker.wait().unwrap();
    let counts = ledger_counts(&a);
    assert_eq!(counts.len(), 6, "{counts:?}");
    let starts: u32 = counts.values().map(|c| c.0).sum();
    // Six targets, plus at most the two that were in flight when A stopped.
    assert!(
        starts <= 8,
        "steps ran again beyond those cut off: {counts:?}"
    );
    for (key, (_, done)) in &counts {
        assert!(*done >= 1, "{key} never completed: {counts:?}");
    }
    let fenced = rows(
        &url,
        &format!(
            "SELECT count(*) FROM step_attempts WHERE workflow_id = '{id}' \
             AND outcome = 'interrupted' AND error LIKE '%host-a stopped renewing its lease%'"
        ),
    );
    assert_ne!(
        fenced[0][0], "0",
        "B closed A's attempts as interrupted by the lost lease"
    );
    // A's deploy command says who runs its deployment now and follows it to the end there.
    assert!(
        said.contains("engine host-b")
            && said.contains("took the deployment over from this engine"),
        "{said}"
    );
    assert!(out.status.success(), "{said}");
}

#[test]
fn a_deploy_waits_out_a_database_outage_and_completes() {
    let Some(mut pg) = pg::Postgres::start() else {
        return;
    };
    let url = pg.create_db("outage");
    let a = host(&url, "host-a");
    let mut deploy = deploy_on(&a, "0.3");
    wait_until(Duration::from_secs(60), "a target completes", || {
        dones(&a) >= 1
    });
    pg.stop();
    std::thread::sleep(Duration::from_secs(5));
    pg.restart();
    let out = wait_bounded(&mut deploy, Duration::from_secs(120));
    let said = text(&out.stderr);
    assert!(out.status.success(), "the deploy failed: {said}");
    assert!(
        said.contains("cannot commit") && said.contains("postgres:///outage"),
        "the deploy said it waits for the database: {said}"
    );
    let id = deployment(&url);
    assert_eq!(status_of(&url, &id), "SUCCESS");
    let counts = ledger_counts(&a);
    assert_eq!(counts.len(), 6, "{counts:?}");
    assert!(
        counts.values().all(|(_, d)| *d == 1),
        "every target completed once: {counts:?}"
    );
}

/// A deploy whose steps tick into the shared ledger every 100ms, tagged with the host running
/// them (`TAG`): when each target ran, and where.
const TICKING_APP: &str = r#"application: web
artifact: {version: "1.0.0"}
deploy:
  plugin: exec
  params:
    deploy: |
      for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
        echo "tick $MANENT_TARGET $TAG $(date +%s%N)" >> "$FIXTURE/ticks"
        sleep 0.1
      done
max_retries: 2
backoff: {base: 10ms, max: 50ms}
environments:
  prod:
    targets: [{name: t1}, {name: t2}, {name: t3}]
"#;

/// `pid` and every process under it.
fn family(pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(") ")
                .and_then(|(_, r)| r.split_whitespace().nth(1))
                .and_then(|x| x.parse::<u32>().ok());
            if ppid == Some(parent) && !out.contains(&p) {
                out.push(p);
            }
        }
        i += 1;
    }
    out
}

fn kill_all(pids: &[u32], sig: &str) {
    for p in pids {
        let _ = std::process::Command::new("kill")
            .args([sig, &p.to_string()])
            .status();
    }
}

/// (target, host, nanoseconds) of every tick.
fn ticks(fx: &Fixture) -> Vec<(String, String, u128)> {
    std::fs::read_to_string(fx.path().join("ticks"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((
                f.get(1)?.to_string(),
                f.get(2)?.to_string(),
                f.get(3)?.parse().ok()?,
            ))
        })
        .collect()
}

/// Hosts A and B on `url`, each an engine (lease `LEASE`) running `app`, whose commands tick
/// into A's file tagged with their host; B's worker is already running when this returns, and
/// A's deploy has ticked three times. (B's worker ends with B's fixture.)
fn ticking_hosts(url: &str, app: &str) -> ([Fixture; 2], Child, Child) {
    let manent = |id: &str| {
        format!(
            "plugins:\n  exec:\n    pass_env: [FIXTURE, TAG]\nengine: {{executor_id: {id}, lease: {LEASE}}}\n"
        )
    };
    let a = Fixture::on_postgres(url, &manent("host-a"), &[("web", app)]);
    let b = Fixture::on_postgres(url, &manent("host-b"), &[("web", app)]);
    let worker = on_ledger(&b, &a, &["worker"], &[("TAG", "b")]);
    std::thread::sleep(Duration::from_millis(500));
    let deploy = on_ledger(&a, &a, &["deploy", "web", "prod", "--yes"], &[("TAG", "a")]);
    wait_until(Duration::from_secs(60), "host A mid-target", || {
        ticks(&a).iter().filter(|t| t.1 == "a").count() >= 3
    });
    ([a, b], deploy, worker)
}

/// The first and last tick of `target` on host `h`.
fn span(all: &[(String, String, u128)], target: &str, h: &str) -> Option<(u128, u128)> {
    let on: Vec<u128> = all
        .iter()
        .filter(|t| t.0 == target && t.1 == h)
        .map(|t| t.2)
        .collect();
    Some((*on.iter().min()?, *on.iter().max()?))
}

#[test]
fn an_engine_and_its_steps_paused_past_the_lease_never_run_a_target_beside_its_taker() {
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let url = pg.create_db("sidefx");
    let ([a, _b], mut deploy, worker) = ticking_hosts(&url, TICKING_APP);
    // A paused VM: the engine and every step process it runs stop, well past the lease.
    let paused = family(deploy.id());
    kill_all(&paused, "-STOP");
    let id = deployment(&url);
    wait_until(
        Duration::from_secs(60),
        "host B runs the cut-off target",
        || ticks(&a).iter().any(|t| t.1 == "b"),
    );
    // The engine comes back first and fences itself: its step processes are killed before
    // they could go on (they are continued a moment later, as a machine's would be).
    kill_all(&paused[..1], "-CONT");
    std::thread::sleep(Duration::from_millis(1500));
    kill_all(&paused[1..], "-CONT");
    wait_until(Duration::from_secs(120), "the deployment finishes", || {
        status_of(&url, &id) == "SUCCESS"
    });
    let out = wait_bounded(&mut deploy, Duration::from_secs(60));
    signal(&worker, "-TERM");
    let w = worker.wait_with_output().unwrap();
    let all = ticks(&a);
    for target in ["t1", "t2", "t3"] {
        let (Some((a_first, a_last)), Some((b_first, b_last))) =
            (span(&all, target, "a"), span(&all, target, "b"))
        else {
            continue;
        };
        assert!(
            a_last < b_first || b_last < a_first,
            "{target} ran on both hosts at once: A {a_first}..{a_last}, B {b_first}..{b_last}\n{}\n{}",
            text(&out.stderr),
            text(&w.stderr)
        );
    }
    let said = text(&out.stderr) + &text(&a.run(&["logs", &id]).stdout);
    assert!(
        said.contains("lease lapsed"),
        "A said it fenced itself: {said}"
    );
}

/// The engine process alone is frozen (SIGSTOP; its step commands keep running) in the middle
/// of 10 s targets: its watchdog kills them once its renewals stop, before host B may take the
/// deployment over — by the commands' own clock, no target runs on both hosts at once.
#[test]
fn an_engine_frozen_alone_has_its_steps_stopped_before_another_takes_over() {
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let url = pg.create_db("frozen");
    let app = TICKING_APP.replace(
        "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do",
        "for i in $(seq 1 100); do",
    );
    assert!(app.contains("seq 1 100"));
    let ([a, _b], mut deploy, worker) = ticking_hosts(&url, &app);
    // The engine alone: its commands (and its watchdog) run on.
    kill_all(&[deploy.id()], "-STOP");
    let id = deployment(&url);
    wait_until(
        Duration::from_secs(60),
        "host B runs the cut-off target",
        || ticks(&a).iter().any(|t| t.1 == "b"),
    );
    // Frozen on well past the takeover: whatever of A still ran would tick beside B.
    std::thread::sleep(Duration::from_secs(2));
    kill_all(&[deploy.id()], "-CONT");
    wait_until(Duration::from_secs(180), "the deployment finishes", || {
        status_of(&url, &id) == "SUCCESS"
    });
    let out = wait_bounded(&mut deploy, Duration::from_secs(60));
    signal(&worker, "-TERM");
    let w = worker.wait_with_output().unwrap();
    let all = ticks(&a);
    let mut compared = 0;
    for target in ["t1", "t2", "t3"] {
        let (Some((_, a_last)), Some((b_first, _))) =
            (span(&all, target, "a"), span(&all, target, "b"))
        else {
            continue;
        };
        compared += 1;
        assert!(
            a_last < b_first,
            "{target} ran on A until {a_last}, after B started it at {b_first}\n{}\n{}",
            text(&out.stderr),
            text(&w.stderr)
        );
    }
    assert!(compared > 0, "no target ran on both hosts: {all:?}");
}

/// The same freeze in the middle of a long call to an external plugin: the plugin process the
/// frozen engine started is killed before host B's starts the target, and never finishes the
/// call (its ledger never says `done`).
#[test]
fn an_engine_frozen_alone_mid_plugin_call_has_its_plugin_stopped_before_another_takes_over() {
    const FIXTURE: &str = env!("CARGO_BIN_EXE_manent-fixture-plugin");
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let url = pg.create_db("frozencall");
    let manent = |id: &str| {
        format!(
            "plugins:\n  fix:\n    external:\n      command: {FIXTURE}\n      start_timeout: 10s\n\
             engine: {{executor_id: {id}, lease: {LEASE}}}\n"
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let app = format!(
        "application: web\nartifact: {{version: \"1\"}}\ndeploy:\n  plugin: fix\n  params: \
         {{ledger: \"{}\", sleep_ms: 8000}}\nmax_retries: 2\nbackoff: {{base: 10ms, max: 50ms}}\n\
         environments:\n  prod:\n    targets: [{{name: t1}}]\n",
        ledger.display()
    );
    let a = Fixture::on_postgres(&url, &manent("host-a"), &[("web", &app)]);
    let b = Fixture::on_postgres(&url, &manent("host-b"), &[("web", &app)]);
    let lines = || -> Vec<Vec<String>> {
        std::fs::read_to_string(&ledger)
            .unwrap_or_default()
            .lines()
            .map(|l| l.split_whitespace().map(str::to_owned).collect())
            .collect()
    };
    let pid_of = |l: &Vec<String>| l.last().cloned().unwrap_or_default();
    let worker = b.spawn_with(&["worker"], &[]);
    std::thread::sleep(Duration::from_millis(500));
    let mut deploy = a.spawn_with(&["deploy", "web", "prod", "--yes"], &[]);
    wait_until(Duration::from_secs(60), "A's plugin mid-call", || {
        lines().iter().any(|l| l[0] == "start")
    });
    let a_pid = pid_of(lines().iter().find(|l| l[0] == "start").unwrap());
    kill_all(&[deploy.id()], "-STOP");
    let id = deployment(&url);
    wait_until(
        Duration::from_secs(60),
        "B's plugin starts the target",
        || {
            lines()
                .iter()
                .any(|l| l[0] == "start" && pid_of(l) != a_pid)
        },
    );
    // A's plugin is gone (or a zombie its frozen parent has not reaped): it runs nothing.
    let state = std::fs::read_to_string(format!("/proc/{a_pid}/stat")).unwrap_or_default();
    let running = state
        .rsplit_once(") ")
        .is_some_and(|(_, r)| !r.starts_with('Z'));
    assert!(
        !running,
        "A's plugin {a_pid} still runs beside B's: {state}"
    );
    std::thread::sleep(Duration::from_secs(2));
    kill_all(&[deploy.id()], "-CONT");
    wait_until(Duration::from_secs(120), "the deployment finishes", || {
        status_of(&url, &id) == "SUCCESS"
    });
    let _ = wait_bounded(&mut deploy, Duration::from_secs(60));
    signal(&worker, "-TERM");
    let _ = worker.wait_with_output();
    let done_by_a = lines().iter().any(|l| l[0] == "done" && pid_of(l) == a_pid);
    assert!(!done_by_a, "A's plugin finished its call: {:?}", lines());
}

/// The watchdog killed under a running engine: the engine says so (its steps would run on
/// through a freeze) and the deploy goes on.
#[test]
fn an_engine_whose_watchdog_dies_says_so() {
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let url = pg.create_db("nowatchdog");
    let a = host(&url, "host-a");
    let deploy = deploy_on(&a, "1");
    let watchdogs = || {
        family(deploy.id())
            .into_iter()
            .filter(|p| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("watchdog"))
            })
            .collect::<Vec<u32>>()
    };
    wait_until(Duration::from_secs(30), "the engine's watchdog", || {
        !watchdogs().is_empty()
    });
    kill_all(&watchdogs(), "-KILL");
    let mut deploy = deploy;
    let out = wait_bounded(&mut deploy, Duration::from_secs(120));
    let said = text(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("the engine's watchdog went away"), "{said}");
}

/// Host A's deploy of 1 s targets loses the database just after a target started, for
/// `outage`: the target finishes during the outage, the engine's lease lapses (2 s) with
/// nothing running, and no other engine takes anything. Once the database is back the step
/// that finished is recorded as it was — every target ran once.
fn a_lapse_without_a_takeover_keeps_the_steps_finished_meanwhile(outage: Duration) {
    let Some(mut pg) = pg::Postgres::start() else {
        return;
    };
    let url = pg.create_db(&format!("lapse{}", outage.as_millis()));
    let a = host(&url, "host-a");
    let mut deploy = deploy_on(&a, "1");
    wait_until(Duration::from_secs(60), "a target in flight", || {
        ledger_counts(&a).values().any(|(s, d)| *s > *d)
    });
    pg.stop();
    std::thread::sleep(outage);
    pg.restart();
    let out = wait_bounded(&mut deploy, Duration::from_secs(120));
    let said = text(&out.stderr);
    assert!(out.status.success(), "the deploy failed: {said}");
    let counts = ledger_counts(&a);
    assert_eq!(counts.len(), 6, "{counts:?}");
    assert!(
        counts.values().all(|c| *c == (1, 1)),
        "every target ran once: {counts:?}\n{said}"
    );
    let id = deployment(&url);
    let logs = text(&a.run(&["logs", &id]).stdout);
    assert!(
        logs.contains("no other engine took this deployment meanwhile"),
        "the lapse and the renewal are said: {logs}"
    );
}

#[test]
fn a_lapse_of_one_lease_without_a_takeover_keeps_the_steps_finished_meanwhile() {
    a_lapse_without_a_takeover_keeps_the_steps_finished_meanwhile(Duration::from_millis(2500));
}

#[test]
fn a_lapse_of_three_leases_without_a_takeover_keeps_the_steps_finished_meanwhile() {
    a_lapse_without_a_takeover_keeps_the_steps_finished_meanwhile(Duration::from_secs(6));
}

#[test]
fn a_database_outage_longer_than_the_lease_moves_no_deployment() {
    let Some(mut pg) = pg::Postgres::start() else {
        return;
    };
    let url = pg.create_db("still");
    let (a, b) = (host(&url, "host-a"), host(&url, "host-b"));
    // B is up and connected well before: it would take over a silent engine.
    let mut worker = on_ledger(&b, &a, &["worker"], &[("DELAY", "0.3")]);
    std::thread::sleep(Duration::from_secs(3));
    let mut deploy = deploy_on(&a, "0.3");
    wait_until(Duration::from_secs(60), "a target completes", || {
        dones(&a) >= 1
    });
    // 1.5 times the lease: both engines lose the database; neither saw the other fall silent.
    pg.stop();
    std::thread::sleep(Duration::from_millis(3000));
    pg.restart();
    let out = wait_bounded(&mut deploy, Duration::from_secs(120));
    assert!(out.status.success(), "{}", said(&out));
    let id = deployment(&url);
    assert_eq!(
        executors(&url, &id),
        ["host-a"],
        "the deploy stayed on its host"
    );
    let counts = ledger_counts(&a);
    assert_eq!(counts.len(), 6, "{counts:?}");
    assert!(counts.values().all(|(_, d)| *d == 1), "{counts:?}");
    signal(&worker, "-TERM");
    let _ = worker.wait();
}

#[test]
fn a_schema_dropped_mid_deploy_stops_the_engine_and_db_check_says_so() {
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let url = pg.create_db("dropped");
    let a = host(&url, "host-a");
    let mut deploy = deploy_on(&a, "0.5");
    // Dropped while the first targets run: the command follows by events, so a target that
    // finished before the drop would be said (truly) deployed.
    wait_until(Duration::from_secs(60), "a target starts", || {
        a.ledger().iter().any(|e| e.event == "start")
    });
    rows(&url, "DROP SCHEMA public CASCADE; CREATE SCHEMA public");
    // Within a lease and a check: not a minute of failing renewals.
    let out = wait_bounded(&mut deploy, Duration::from_secs(60));
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(6), "{said}");
    assert!(
        said.contains("schema") && said.contains("is gone"),
        "{said}"
    );
    assert!(!said.contains(": deployed"), "{said}");
    assert!(
        !said.contains("manent resume"),
        "no advice that cannot work: {said}"
    );
    // A check reports the loss, and recreates nothing.
    for _ in 0..2 {
        let out = a.run(&["db", "check"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(6), "{err}");
        assert!(err.contains("holds no manent schema"), "{err}");
    }
    let out = a.run(&["status"]);
    assert_eq!(out.status.code(), Some(6), "{}", fleet::said(&out));
}

fn wait_bounded(child: &mut Child, limit: Duration) -> std::process::Output {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(_status) = child.try_wait().unwrap() {
            break;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!("the process did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut out = std::process::Output {
        status: child.wait().unwrap(),
        stdout: Vec::new(),
        stderr: Vec::new(),
    };
    use std::io::Read;
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_end(&mut out.stderr);
    }
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_end(&mut out.stdout);
    }
    out
}

/// Every row of every table of a SQLite system database, as text, table by table.
fn sqlite_rows(db: &std::path::Path) -> BTreeMap<String, Vec<String>> {
    let c = rusqlite::Connection::open(db).unwrap();
    let tables = [
        "workflow_status",
        "operation_outputs",
        "step_attempts",
        "notifications",
        "workflow_events",
        "workflow_events_history",
        "releases",
        "journal",
        "logs",
        "locks",
        "outbox",
    ];
    let mut all = BTreeMap::new();
    for t in tables {
        // The inputs' MAC is each database's own (its key signs what it holds).
        let sql = if t == "workflow_status" {
            "SELECT workflow_id, name, inputs, status, output, error, created_at, updated_at, \
             subject, dedup_key FROM workflow_status"
                .to_owned()
        } else {
            format!("SELECT * FROM {t}")
        };
        let mut stmt = c.prepare(&sql).unwrap();
        let n = stmt.column_count();
        let mut rows: Vec<String> = stmt
            .query_map([], |r| {
                Ok((0..n)
                    .map(|i| format!("{:?}", r.get_ref(i).unwrap()))
                    .collect::<Vec<_>>()
                    .join("|"))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows.sort();
        all.insert(t.to_owned(), rows);
    }
    all
}

#[test]
fn db_copy_moves_a_sqlite_history_to_postgres_and_back_without_losing_a_row() {
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let url = pg.create_db("copied");
    // A history on SQLite: a deploy, a lock and its journal entries, logs. Its configuration
    // declares the inputs key the engines on PostgreSQL will share.
    let local = Fixture::new(
        &format!(
            "{LEDGER_MANENT}secrets: {{pg_inputs: \"value:{}\"}}\n",
            pg::INPUTS_KEY
        ),
        &[("web", &talkative_app())],
    );
    let out = local.run(&["deploy", "web", "prod", "--yes"]);
    assert!(out.status.success(), "{}", said(&out));
    let out = local.run(&["lock", "web", "prod", "--reason", "freeze for the audit"]);
    assert!(out.status.success(), "{}", said(&out));
    let id = local.deployments().pop().unwrap();
    let before = sqlite_rows(&local.db_path());
    assert!(
        before["logs"].len() > 5 && !before["journal"].is_empty(),
        "{before:?}"
    );

    // Without the key its engines share, a copy to PostgreSQL is refused, saying what to give.
    let out = local.run(&["db", "copy", "--to", &url]);
    assert_eq!(out.status.code(), Some(6), "{}", said(&out));
    assert!(text(&out.stderr).contains("--inputs-key"), "{}", said(&out));
    let out = local.run(&[
        "db",
        "copy",
        "--to",
        &url,
        "--inputs-key",
        "pg_inputs",
        "--json",
    ]);
    assert!(out.status.success(), "{}", said(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["verified"], true, "{report:#}");
    let logs = report["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == "logs")
        .unwrap();
    assert_eq!(logs["rows"], before["logs"].len(), "{report:#}");

    // A second copy into the now non-empty database is refused, and changes nothing.
    let out = local.run(&["db", "copy", "--to", &url, "--inputs-key", "pg_inputs"]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(text(&out.stderr).contains("is not empty"), "{}", said(&out));

    // The copy reads as the original did, from a configuration on PostgreSQL.
    let shared = host(&url, "host-b");
    let there = shared.status(&id);
    let here = local.status(&id);
    assert_eq!(
        there, here,
        "status differs between the copy and the original"
    );
    let check = shared.run(&["db", "check", "--json"]);
    assert!(check.status.success(), "{}", text(&check.stderr));
    let check: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(check["store"], "postgresql", "{check:#}");

    // And back: PostgreSQL to a new SQLite file holds exactly the original rows.
    let back = shared.path().join("back.db");
    let out = shared.run(&["db", "copy", "--to", back.to_str().unwrap()]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        text(&out.stdout).contains("verified"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(
        sqlite_rows(&back),
        before,
        "a row changed in the round trip"
    );
    // Each database signs the deployments it holds with its own key: the copy's verify with
    // the key made beside it.
    let key = manent::workflow::InputsKey::load(
        &manent::workflow::InputsKey::path_beside(&back),
        &manent::sys::files::Trust::private(),
    )
    .unwrap()
    .unwrap();
    let c = rusqlite::Connection::open(&back).unwrap();
    let mut stmt = c
        .prepare("SELECT workflow_id, name, inputs, inputs_sha256 FROM workflow_status")
        .unwrap();
    let rows: Vec<(String, String, String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(!rows.is_empty());
    for (id, name, inputs, mac) in rows {
        assert!(
            key.verifies(&id, &name, &inputs, &mac),
            "{id} does not verify"
        );
    }
}

#[test]
fn a_deploy_run_on_one_host_is_paused_resumed_and_read_from_another() {
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let url = pg.create_db("verbs");
    let app = talkative_app();
    let (a, b) = (
        host_with(&url, Some("host-a"), &app),
        host_with(&url, Some("host-b"), &app),
    );
    // Host B's engine is up and listening: a deploy started on host A still runs on host A
    // (its environment, its reach), not on whichever engine hears of it first.
    let worker = on_ledger(&b, &a, &["worker"], &[("DELAY", "0.4")]);
    std::thread::sleep(Duration::from_millis(700));
    let mut deploy = deploy_on(&a, "0.4");
    wait_until(Duration::from_secs(60), "host A starts a target", || {
        !a.ledger().is_empty()
    });
    let id = deployment(&url);
    // From host B, where no engine runs, it reads as running: host A's engine runs it.
    let seen = b.status(&id);
    assert_eq!(seen["state"], "running", "{seen:#}");
    // Host B pauses it: host A's engine takes the command at its next boundary.
    let out = b.run(&["pause", &id, "--reason", "checking the dashboards"]);
    assert!(out.status.success(), "{}", said(&out));
    wait_until(Duration::from_secs(30), "the deployment pauses", || {
        b.status(&id)["state"] == "paused"
    });
    let held = a.ledger().len();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(a.ledger().len(), held, "nothing starts while it is paused");
    // Host B reads host A's plugin lines from the shared database.
    let logs = b.run(&["logs", &id]);
    assert!(
        text(&logs.stdout).contains("unpacking on web-1"),
        "{}",
        text(&logs.stdout)
    );
    // And resumes it; host A finishes it.
    let out = b.run(&["resume", &id]);
    assert!(out.status.success(), "{}", said(&out));
    let out = wait_bounded(&mut deploy, Duration::from_secs(60));
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(status_of(&url, &id), "SUCCESS");
    signal(&worker, "-TERM");
    let w = worker.wait_with_output().unwrap();
    assert!(w.status.success(), "{}", text(&w.stderr));
    assert_eq!(executors(&url, &id), ["host-a"], "host A ran every target");
    let journal = rows(
        &url,
        &format!("SELECT action FROM journal WHERE workflow_id = '{id}' ORDER BY id"),
    );
    let actions: Vec<&str> = journal.iter().map(|r| r[0].as_str()).collect();
    assert!(
        actions.contains(&"pause") && actions.contains(&"resume"),
        "{actions:?}"
    );
}

#[test]
fn a_deploy_run_on_one_host_is_cancelled_from_another() {
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let url = pg.create_db("cancel");
    let (a, b) = (host(&url, "host-a"), host(&url, "host-b"));
    let mut deploy = deploy_on(&a, "0.5");
    wait_until(Duration::from_secs(60), "host A starts a target", || {
        !a.ledger().is_empty()
    });
    let id = deployment(&url);
    let out = b.run(&["cancel", &id, "--reason", "wrong build"]);
    assert!(out.status.success(), "{}", said(&out));
    // Host A stops at the next step boundary; its deploy command says so.
    let out = wait_bounded(&mut deploy, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(3), "{}", said(&out));
    assert_eq!(status_of(&url, &id), "CANCELLED");
    let starts = a.ledger().iter().filter(|e| e.event == "start").count();
    assert!(
        starts < 6,
        "the deploy went on after the cancel: {starts} targets started"
    );
}

#[test]
fn two_configurations_on_one_host_run_two_engines_without_naming_them() {
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let url = pg.create_db("ids");
    // Two operators' checkouts on one bastion, neither naming its engine.
    let (a, b) = (
        host_with(&url, None, &ledger_app("")),
        host_with(&url, None, &ledger_app("")),
    );
    let mut wa = a.spawn_with(&["worker"], &[]);
    let mut wb = b.spawn_with(&["worker"], &[]);
    // Stopped once started: a SIGTERM while an engine starts stops it with exit 5.
    let said = [fleet::wait_ready(&mut wa), fleet::wait_ready(&mut wb)];
    let live = || -> usize {
        let out = a.run(&["db", "check", "--json"]);
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .ok()
            .and_then(|c| {
                c["engines"]
                    .as_array()
                    .map(|e| e.iter().filter(|e| e["live"] == true).count())
            })
            .unwrap_or(0)
    };
    wait_until(Duration::from_secs(30), "both engines run", || live() == 2);
    let ids = rows(&url, "SELECT executor_id FROM engines ORDER BY 1");
    assert_ne!(ids[0], ids[1], "{ids:?}");
    for (w, said) in [wa, wb].into_iter().zip(said) {
        signal(&w, "-TERM");
        let out = w.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", said.lock().unwrap());
    }
}

#[test]
fn a_deployment_written_into_the_shared_database_without_the_engines_key_never_runs() {
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let url = pg.create_db("forged");
    let a = host(&url, "host-a");
    let out = a.run(&["deploy", "web", "prod", "--yes"]);
    assert!(out.status.success(), "{}", said(&out));
    let id = deployment(&url);
    // Someone who can write the database but does not hold the engines' key: a copy of the
    // deployment whose command also writes `id -u` to $FIXTURE/pwned, with the plain sha256 of
    // its inputs anyone can compute, waiting for an engine.
    rows(
        &url,
        &format!(
            "INSERT INTO workflow_status (workflow_id, name, definition_version, inputs, \
             inputs_sha256, status, subject, created_at, updated_at) \
             SELECT 'dep-forged', name, definition_version, f.inputs, \
             encode(sha256(convert_to(f.inputs, 'UTF8')), 'hex'), 'ENQUEUED', subject, \
             created_at, updated_at FROM workflow_status, \
             LATERAL (SELECT replace(inputs, 'echo \\\"start', 'id -u > \\\"$FIXTURE/pwned\\\"; \
             echo \\\"start') AS inputs) f WHERE workflow_id = '{id}'"
        ),
    );
    let forged = rows(
        &url,
        "SELECT inputs FROM workflow_status WHERE workflow_id = 'dep-forged'",
    );
    assert!(forged[0][0].contains("pwned"), "{forged:?}");
    let out = a.run(&["deploy", "web", "prod", "--yes", "--version", "2"]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(status_of(&url, "dep-forged"), "ERROR");
    let error = rows(
        &url,
        "SELECT error FROM workflow_status WHERE workflow_id = 'dep-forged'",
    );
    assert!(error[0][0].contains("do not verify"), "{error:?}");
    assert!(!a.path().join("pwned").exists(), "the forged command ran");
    // An engine given another key than the database was signed with does not start.
    let b = Fixture::new(
        &format!(
            "database: \"{url}\"\n{LEDGER_MANENT}engine: {{inputs_key: k}}\n\
             secrets: {{k: \"value:another-key-of-32-characters-or-more\"}}\n"
        ),
        &[("web", &ledger_app(""))],
    );
    let out = b.run(&["deploy", "web", "prod", "--yes", "--version", "3"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(
        err.contains("signed with another inputs key") && err.contains("engine.inputs_key"),
        "{err}"
    );
}

/// A port that accepts connections and never answers: a clear error naming the limit, bounded
/// by `connect_timeout` (1s here), for reads and for a deploy alike.
#[test]
fn a_database_port_that_never_answers_is_a_clear_error_within_its_connect_timeout() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let url = format!("postgres://manent@127.0.0.1:{port}/manent?connect_timeout=1");
    let fx = Fixture::on_postgres(&url, LEDGER_MANENT, &[("web", &ledger_app(""))]);
    for verb in [&["status"][..], &["deploy", "web", "prod", "--yes"][..]] {
        let mut child = fx.spawn_with(verb, &[]);
        let out = wait_bounded(&mut child, Duration::from_secs(60));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(6), "{verb:?}: {err}");
        assert!(
            err.contains("no answer within 1s") && err.contains("connect_timeout"),
            "{verb:?}: {err}"
        );
    }
    drop(listener);
}
