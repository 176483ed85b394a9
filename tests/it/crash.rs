//! The crash harness (reference/durable-workflows.md part C): the real `manent` process is
//! killed with SIGKILL at named failpoints — every step boundary of a 3-batch rolling deploy,
//! inside steps, between retries, around the outcome, during rollbacks — then started again.
//! The `exec` plugin's commands write an external ledger keyed by each step's idempotency key,
//! so "ran exactly once" and "ran again with the same key" are checked against what really ran.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use crate::support::fleet;
use crate::support::postgres as pg;
use fleet::{Fixture, LEDGER_MANENT, ledger_app, said, text, wait_until};

const DEPLOY: &[&str] = &["deploy", "web", "prod", "--yes"];

fn fixture() -> Fixture {
    Fixture::new(LEDGER_MANENT, &[("web", &ledger_app(""))])
}

/// Where a kill-matrix test keeps its system database: the same matrix runs on both.
#[derive(Clone)]
enum Backend {
    Sqlite,
    Postgres(std::sync::Arc<pg::Postgres>),
}

impl Backend {
    /// PostgreSQL, or None (the test is skipped with a note) where it is not installed.
    fn postgres() -> Option<Backend> {
        pg::Postgres::start().map(|p| Backend::Postgres(std::sync::Arc::new(p)))
    }

    /// The ledger fixture, on a fresh database of this backend.
    fn fixture(&self) -> Fixture {
        self.fixture_of(&ledger_app(""))
    }

    /// A fixture of descriptor `app`, on a fresh database of this backend.
    fn fixture_of(&self, app: &str) -> Fixture {
        match self {
            Backend::Sqlite => Fixture::new(LEDGER_MANENT, &[("web", app)]),
            Backend::Postgres(server) => {
                static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
                let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let url = server.create_db(&format!("crash{n}"));
                Fixture::on_postgres(&url, LEDGER_MANENT, &[("web", app)])
            }
        }
    }
}

/// The same fleet, its plugin unable to tell a target's current release.
fn fixture_without_current_release() -> Fixture {
    let app = ledger_app("").replace(
        "    current_release: cat \"$FIXTURE/fleet/$MANENT_TARGET/VERSION\" 2>/dev/null || true\n",
        "",
    );
    assert!(!app.contains("current_release"));
    Fixture::new(LEDGER_MANENT, &[("web", &app)])
}

/// Runs `args` with `failpoints` and expects the process to die of SIGKILL.
fn run_killed(fx: &Fixture, args: &[&str], failpoints: &str) {
    let out = fx.run_with(args, &[("MANENT_FAILPOINTS", failpoints)]);
    assert_eq!(
        out.status.signal(),
        Some(9),
        "expected a kill at {failpoints}, got {:?}\n{}",
        out.status,
        text(&out.stderr)
    );
    // Commands the dead engine had started finish on their own; let them write the ledger.
    std::thread::sleep(Duration::from_millis(300));
}

/// What the database and the ledger say right after a kill.
struct AtKill {
    checkpointed: BTreeSet<String>,
    started: BTreeSet<String>,
}

fn at_kill(fx: &Fixture) -> AtKill {
    let checkpointed = match fx.deployments().last() {
        Some(id) => fx
            .steps(id)
            .into_iter()
            .filter(|(_, name)| name.starts_with("deploy:") || name.starts_with("rollback:"))
            .map(|(fid, _)| format!("{id}/{fid}"))
            .collect(),
        None => BTreeSet::new(),
    };
    let started = fx
        .ledger()
        .into_iter()
        .filter(|e| e.event != "done")
        .map(|e| e.key)
        .collect();
    AtKill {
        checkpointed,
        started,
    }
}

/// Which of [`check`]'s cases a target step met: what the kill found it doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    /// Checkpointed before the kill: never ran again.
    Completed,
    /// Its call had finished (ledger `done`): reconciled through current_release.
    FinishedCall,
    /// Killed between writing its version and its ledger's `done`: reconciled all the same.
    VersionWritten,
    /// Cut off in the middle: ran again, once, with the same key.
    Rerun,
    /// Not started at the kill: ran once.
    Fresh,
}

/// Every invariant of part C after the deployment finished; the case each target step met
/// (a test that forces one says which it expects: none is left to luck).
fn check(fx: &Fixture, golden: &[(u32, String)], before: &AtKill) -> BTreeMap<String, Case> {
    let mut cases = BTreeMap::new();
    let id = fx.deployments().pop().unwrap();
    let v = fx.status(&id);
    assert_eq!(v["status"], "SUCCESS", "{v:#}");
    assert_eq!(
        fx.steps(&id),
        golden,
        "the checkpoint log differs from the golden run"
    );
    let mut starts: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let mut dones: BTreeSet<(String, u32)> = BTreeSet::new();
    for e in fx.ledger() {
        if e.event == "start" {
            starts.entry(e.key).or_default().push(e.attempt);
        } else if e.event == "done" {
            dones.insert((e.key, e.attempt));
        }
    }
    let reconciles = fx.reconciles();
    for (fid, name) in golden.iter().filter(|(_, n)| n.starts_with("deploy:")) {
        let key = format!("{id}/{fid}");
        let attempts = starts.get(&key).cloned().unwrap_or_default();
        let target = name.rsplit(':').next().unwrap_or(name).to_owned();
        if before.checkpointed.contains(&key) {
            assert_eq!(
                attempts.len(),
                1,
                "{name} completed before the kill but ran again: {attempts:?}"
            );
            cases.insert(target, Case::Completed);
        } else if before.started.contains(&key)
            && reconciles
            && attempts
                .first()
                .is_some_and(|a| dones.contains(&(key.clone(), *a)))
        {
            assert_eq!(
                attempts.len(),
                1,
                "{name}: its cut-off call had finished; current_release reconciles it without \
                 running it again: {attempts:?}"
            );
            cases.insert(target, Case::FinishedCall);
        } else if before.started.contains(&key) && reconciles && attempts.len() == 1 {
            // Killed between writing its version and its ledger's `done` (its process dies with
            // the engine): current_release saw the version live and the engine said so.
            // Read through manent itself: the store under test (SQLite or PostgreSQL).
            let logs = text(&fx.run(&["logs", &id]).stdout);
            let said = logs
                .lines()
                .filter(|l| {
                    l.contains(&format!("{target}: a crash cut its call off after "))
                        && l.contains(" had finished it")
                })
                .count();
            assert_eq!(
                said, 1,
                "{name} ran once but was not reconciled: {attempts:?}"
            );
            cases.insert(target, Case::VersionWritten);
        } else if before.started.contains(&key) {
            assert_eq!(
                attempts.len(),
                2,
                "{name} was interrupted: it must run again, once: {attempts:?}"
            );
            assert!(
                attempts[1] > attempts[0],
                "{name}: the rerun is a later attempt: {attempts:?}"
            );
            cases.insert(target, Case::Rerun);
        } else {
            assert_eq!(attempts.len(), 1, "{name} ran {attempts:?}");
            cases.insert(target, Case::Fresh);
        }
    }
    for i in 1..=6 {
        let v = std::fs::read_to_string(fx.path().join(format!("fleet/web-{i}/VERSION"))).unwrap();
        assert_eq!(v.trim(), "1.0.0");
    }
    fx.integrity_ok();
    assert_eq!(fx.live(), 0);
    cases
}

fn golden() -> (Vec<(u32, String)>, usize) {
    golden_on(&Backend::Sqlite)
}

fn golden_on(b: &Backend) -> (Vec<(u32, String)>, usize) {
    let fx = b.fixture();
    let out = fx.run(DEPLOY);
    assert!(out.status.success(), "{}", said(&out));
    let id = fx.deployments().pop().unwrap();
    let steps = fx.steps(&id);
    let real = steps
        .iter()
        .filter(|(_, n)| !n.starts_with("engine."))
        .count();
    assert_eq!(
        real, 10,
        "plan, configure, validate, releases.before and six targets: {steps:?}"
    );
    (steps, real)
}

/// Kill at a failpoint, start the same deploy again, and check every invariant.
fn kill_and_resume(golden: &[(u32, String)], failpoints: &str) {
    kill_and_resume_on(fixture(), golden, failpoints);
}

fn kill_and_resume_on(fx: Fixture, golden: &[(u32, String)], failpoints: &str) {
    run_killed(&fx, DEPLOY, failpoints);
    let before = at_kill(&fx);
    let out = fx.run(DEPLOY);
    assert_eq!(
        out.status.code(),
        Some(0),
        "after {failpoints}:\n{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("resuming"),
        "the second run resumes the first"
    );
    check(&fx, golden, &before);
}

fn kill_after_every_step_checkpoint_on(b: &Backend) {
    let (golden, steps) = golden_on(b);
    for n in 1..=steps {
        kill_and_resume_on(
            b.fixture(),
            &golden,
            &format!("step.after_checkpoint={}", format_args!("kill@{n}")),
        );
    }
}

#[test]
fn kill_after_every_step_checkpoint() {
    kill_after_every_step_checkpoint_on(&Backend::Sqlite);
}

fn kill_after_the_side_effect_before_the_checkpoint_on(b: &Backend) {
    let (golden, steps) = golden_on(b);
    for n in 1..=steps {
        kill_and_resume_on(
            b.fixture(),
            &golden,
            &format!("step.before_checkpoint=kill@{n}"),
        );
    }
}

#[test]
fn kill_after_the_side_effect_before_the_checkpoint_reruns_with_the_same_key() {
    kill_after_the_side_effect_before_the_checkpoint_on(&Backend::Sqlite);
}

/// An unknown target (design/plugin-contract.md "Targets"): a call cut off after the plugin finished the work is
/// reconciled through current_release (the check above: ran once); a plugin without
/// current_release runs it again with the same key, and status shows the target unknown
/// while no engine runs.
#[test]
fn a_cut_off_call_without_current_release_runs_again_with_the_same_key_and_shows_unknown() {
    let (golden, _) = golden();
    let fx = fixture_without_current_release();
    run_killed(&fx, DEPLOY, "step.before_checkpoint~deploy:b2:web-3=kill");
    let id = fx.deployments().pop().unwrap();
    let v = fx.status(&id);
    assert_eq!(v["state"], "interrupted", "{v:#}");
    let web3 = v["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "web-3")
        .unwrap()
        .clone();
    assert_eq!(web3["state"], "unknown", "{web3:#}");
    let human = text(&fx.run(&["status", &id]).stdout);
    assert!(human.contains("unknown"), "{human}");
    let before = at_kill(&fx);
    let out = fx.run(DEPLOY);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    check(&fx, &golden, &before);
    let web3: Vec<_> = fx
        .ledger()
        .into_iter()
        .filter(|e| e.target == "web-3" && e.event == "start")
        .collect();
    assert_eq!(web3.len(), 2, "{web3:?}");
    assert_eq!(web3[0].key, web3[1].key, "the same idempotency key");
}

#[test]
fn kill_after_the_attempt_is_recorded_before_the_side_effect() {
    let (golden, steps) = golden();
    for n in 1..=steps {
        kill_and_resume(&golden, &format!("step.started=kill@{n}"));
    }
}

#[test]
fn kill_around_the_outcome_and_inside_the_store_commit() {
    let (golden, _) = golden();
    kill_and_resume(&golden, "workflow.before_outcome=kill");
    // After the outcome is written a restart has nothing to do: the first run's result stands.
    let fx = fixture();
    run_killed(&fx, DEPLOY, "workflow.after_outcome=kill");
    let id = fx.deployments().pop().unwrap();
    assert_eq!(fx.status(&id)["status"], "SUCCESS");
    assert_eq!(fx.ledger().iter().filter(|e| e.event == "start").count(), 6);
    kill_and_resume(&golden, "store.commit=kill@7");
}

#[test]
fn kill_inside_a_running_step() {
    kill_inside_a_running_step_on(&Backend::Sqlite);
}

fn kill_inside_a_running_step_on(b: &Backend) {
    let (golden, _) = golden_on(b);
    let fx = b.fixture();
    let mut child = fx.spawn_with(DEPLOY, &[("DELAY", "1")]);
    wait_until(Duration::from_secs(30), "a batch-2 target to start", || {
        fx.ledger()
            .iter()
            .any(|e| e.event == "start" && (e.target == "web-3" || e.target == "web-4"))
    });
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let before = at_kill(&fx);
    assert!(
        before.started.len() > before.checkpointed.len(),
        "a step was in flight"
    );
    let out = fx.run(DEPLOY);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    check(&fx, &golden, &before);
}

/// Each case of [`check`] that a kill in the middle of a batch meets only by timing, forced:
/// web-3's command is held at a point of its own (a file the fixture's command waits on: before
/// its version is written, after, after its ledger's `done`) and the engine killed there, so the
/// case it meets is the one named, every run, on either store.
fn every_case_of_a_cut_off_call_forced_on(b: &Backend) {
    let (golden, _) = golden_on(b);
    // (hold file, what shows the command is there, the case)
    let holds = [
        ("hold-before-version-web-3", Case::Rerun),
        ("hold-after-version-web-3", Case::VersionWritten),
        ("hold-after-done-web-3", Case::FinishedCall),
    ];
    for (hold, expected) in holds {
        let fx = b.fixture();
        std::fs::write(fx.path().join(hold), "").unwrap();
        let mut child = fx.spawn_with(DEPLOY, &[]);
        let web3 = |event: &str| {
            fx.ledger()
                .iter()
                .any(|e| e.target == "web-3" && e.event == event)
        };
        wait_until(
            Duration::from_secs(30),
            "web-3 held where named",
            || match expected {
                Case::Rerun => web3("start"),
                // Written, not only created (the shell creates the file, then writes it: a
                // kill between the two leaves an empty file, which reads as no version).
                Case::VersionWritten => {
                    std::fs::read_to_string(fx.path().join("fleet/web-3/VERSION"))
                        .is_ok_and(|v| !v.trim().is_empty())
                }
                _ => web3("done"),
            },
        );
        child.kill().unwrap();
        child.wait().unwrap();
        // The held command dies with its engine; what it would still write, it does not.
        std::fs::remove_file(fx.path().join(hold)).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let before = at_kill(&fx);
        let out = fx.run(DEPLOY);
        assert_eq!(out.status.code(), Some(0), "{hold}: {}", said(&out));
        let cases = check(&fx, &golden, &before);
        assert_eq!(cases.get("web-3"), Some(&expected), "{hold}: {cases:?}");
    }
}

#[test]
fn every_case_of_a_cut_off_call_is_forced_not_left_to_timing() {
    every_case_of_a_cut_off_call_forced_on(&Backend::Sqlite);
}

#[test]
fn a_lost_commit_acknowledgement_and_failing_commits_never_rerun_a_step_or_fail_the_deploy() {
    lost_acknowledgements_on(&Backend::Sqlite);
}

fn lost_acknowledgements_on(b: &Backend) {
    for fp in [
        "store.after_commit=ioerr@4",
        "store.commit=ioerr@5-9",
        "store.after_commit=ioerr@2-6",
    ] {
        let fx = b.fixture();
        let out = fx.run_with(DEPLOY, &[("MANENT_FAILPOINTS", fp)]);
        assert_eq!(out.status.code(), Some(0), "{fp}: {}", text(&out.stderr));
        let starts = fx.ledger().iter().filter(|e| e.event == "start").count();
        assert_eq!(starts, 6, "{fp}: every target exactly once");
        fx.integrity_ok();
    }
}

#[test]
fn a_crash_during_a_rollback_resumes_the_rollback() {
    a_crash_during_a_rollback_on(&Backend::Sqlite);
}

fn a_crash_during_a_rollback_on(b: &Backend) {
    let fx = b.fixture();
    assert!(fx.run(DEPLOY).status.success());
    assert!(
        fx.run(&["deploy", "web", "prod", "--yes", "--version", "2.0.0"])
            .status
            .success()
    );
    run_killed(
        &fx,
        &["rollback", "web", "prod", "--yes"],
        "step.after_checkpoint~rollback:=kill@3",
    );
    let id = fx.deployments().pop().unwrap();
    let done_before: Vec<(u32, String)> = fx
        .steps(&id)
        .into_iter()
        .filter(|(_, n)| n.starts_with("rollback:"))
        .collect();
    // Group commit may have recorded a parallel target in the same transaction as the third.
    assert!(done_before.len() >= 3, "{done_before:?}");
    let out = fx.run(&["resume", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(fx.status(&id)["report"]["result"], "rolled_back");
    for i in 1..=6 {
        let v = std::fs::read_to_string(fx.path().join(format!("fleet/web-{i}/VERSION"))).unwrap();
        assert_eq!(v.trim(), "1.0.0");
    }
    let mut per_target: BTreeMap<String, usize> = BTreeMap::new();
    for e in fx.ledger().into_iter().filter(|e| e.event == "rollback") {
        *per_target.entry(e.target).or_default() += 1;
    }
    for (fid, name) in &done_before {
        let target = name.rsplit(':').next().unwrap();
        assert_eq!(
            per_target[target], 1,
            "{name} ({fid}) was rolled back before the kill and ran again"
        );
    }
}

#[test]
fn a_crash_during_an_atomic_undo_resumes_the_undo() {
    let app = ledger_app("atomic: true").replace(
        "      sleep \"${DELAY:-0}\"",
        "      sleep \"${DELAY:-0}\"\n      if [ \"$MANENT_TARGET\" = web-4 ] && [ \"$MANENT_VERSION\" = 2.0.0 ]; then exit 1; fi",
    );
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &app)]);
    assert!(fx.run(DEPLOY).status.success());
    let v2 = ["deploy", "web", "prod", "--yes", "--version", "2.0.0"];
    run_killed(&fx, &v2, "step.after_checkpoint~rollback:=kill@1");
    let out = fx.run(&v2);
    assert_eq!(out.status.code(), Some(4), "{}", said(&out));
    for i in 1..=6 {
        let v = std::fs::read_to_string(fx.path().join(format!("fleet/web-{i}/VERSION"))).unwrap();
        assert_eq!(v.trim(), "1.0.0", "web-{i}");
    }
    let rollbacks = fx.ledger().iter().filter(|e| e.event == "rollback").count();
    assert_eq!(rollbacks, 3, "web-1, web-2 and web-3 each went back once");
}

fn flaky_app(max_retries: u32, fail_until: u32) -> String {
    ledger_app("").replace("max_retries: 2", &format!("max_retries: {max_retries}")).replace(
        "      sleep \"${DELAY:-0}\"",
        &format!(
            "      sleep \"${{DELAY:-0}}\"\n      if [ \"$MANENT_TARGET\" = web-1 ] && [ \"$MANENT_ATTEMPT\" -lt {fail_until} ]; then echo flaky >&2; exit 1; fi"
        ),
    )
}

#[test]
fn the_retry_budget_survives_a_crash() {
    // web-1 fails its first two attempts; the engine dies during the backoff after attempt 1.
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &flaky_app(3, 3))]);
    run_killed(&fx, DEPLOY, "step.backoff~web-1=kill@1");
    let out = fx.run(DEPLOY);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let attempts: Vec<u32> = fx
        .ledger()
        .into_iter()
        .filter(|e| e.event == "start" && e.target == "web-1")
        .map(|e| e.attempt)
        .collect();
    assert_eq!(
        attempts,
        [1, 2, 3],
        "attempts continue after the restart instead of starting over"
    );

    // An attempt a crash interrupted counts: with one retry, the budget is spent after it.
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &flaky_app(1, 99))]);
    run_killed(&fx, DEPLOY, "step.backoff~web-1=kill@1");
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let web1 = v["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "web-1")
        .unwrap()
        .clone();
    assert_eq!(web1["state"], "failed");
    assert_eq!(web1["attempt"], 2);
    let id = v["id"].as_str().unwrap().to_owned();
    let errors: String = fx
        .db()
        .query_row(
            "SELECT error FROM operation_outputs WHERE workflow_id = ?1 AND function_name = 'deploy:b1:web-1'",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    let errors: serde_json::Value = serde_json::from_str(&errors).unwrap();
    assert_eq!(errors["kind"], "retries_exhausted");
    assert_eq!(errors["errors"].as_array().unwrap().len(), 2, "{errors}");
}

#[test]
fn a_deploy_that_kills_the_engine_every_time_is_dead_lettered_then_resumable() {
    let manent = format!("{LEDGER_MANENT}engine:\n  max_recovery_attempts: 2\n");
    // Room in web-3's own budget for every cut attempt: the crash count decides here.
    let app = ledger_app("").replace("max_retries: 2", "max_retries: 5");
    let fx = Fixture::new(&manent, &[("web", &app)]);
    // The first run moves forward (batch 1), then dies at web-3.
    run_killed(&fx, DEPLOY, "step.started~web-3=kill");
    let id = fx.deployments().pop().unwrap();
    // Two recoveries that move nothing forward (web-3 kills them as it starts) …
    run_killed(&fx, &["resume", &id], "step.started~web-3=kill");
    run_killed(&fx, &["resume", &id], "step.started~web-3=kill");
    // … and the next claim exceeds the limit: the deployment is parked for an operator.
    let out = fx.run_with(
        &["resume", &id],
        &[("MANENT_FAILPOINTS", "step.started~web-3=kill")],
    );
    assert_eq!(out.status.code(), Some(6), "{}", said(&out));
    let v = fx.status(&id);
    assert_eq!(v["status"], "MAX_RECOVERY_ATTEMPTS_EXCEEDED");
    // Said as what it is: nothing resumes it by itself (not "interrupted", which the next
    // engine resumes).
    assert_eq!(v["state"], "dead_lettered", "{v:#}");
    let out = fx.run(&["status", &id]);
    let told = said(&out);
    assert!(
        told.contains("dead-lettered") && told.contains(&format!("manent resume {id}")),
        "{told}"
    );
    let out = fx.run(&["cancel", &id]);
    assert!(said(&out).contains("dead-lettered"), "{}", said(&out));
    let out = fx.run(&["resume", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(fx.status(&id)["status"], "SUCCESS");
}

/// A crash count is of recoveries that moved nothing forward (a poison step), not of kills:
/// the operator's command killed five times, each run finishing a target first, is never
/// dead-lettered, and no target runs more than twice.
#[test]
fn kills_with_progress_between_them_never_dead_letter_a_deployment() {
    let manent = format!("{LEDGER_MANENT}engine:\n  max_recovery_attempts: 2\n");
    let app = ledger_app("").replace("parallelism: 2", "parallelism: 1");
    let fx = Fixture::new(&manent, &[("web", &app)]);
    run_killed(&fx, DEPLOY, "step.started~web-2=kill");
    let id = fx.deployments().pop().unwrap();
    for t in ["web-3", "web-4", "web-5", "web-6"] {
        run_killed(&fx, &["resume", &id], &format!("step.started~{t}=kill"));
        assert_eq!(fx.status(&id)["status"], "PENDING", "after the kill at {t}");
    }
    let out = fx.run(&["resume", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(fx.status(&id)["status"], "SUCCESS");
    let ledger = fx.ledger();
    for t in ["web-1", "web-2", "web-3", "web-4", "web-5", "web-6"] {
        let starts = ledger
            .iter()
            .filter(|e| e.event == "start" && e.target == t)
            .count();
        assert!(
            (1..=2).contains(&starts),
            "{t} started {starts} times: {ledger:#?}"
        );
    }
}

/// The kill probe: `manent deploy` of sixteen targets killed `kills` times at points drawn from
/// a fixed seed — the start of the first, second or third step a run executes, or a target's
/// call done but not yet checkpointed — and run again each time, as an operator would. With
/// `dead_letter`, one stretch of kills lands before any step (no progress), until the
/// deployment is dead-lettered and the next `deploy` starts a new one. After a clean last run
/// every target runs the version, none ran more than twice, and the dead-lettered deployment
/// cannot be resumed over the one that finished.
fn kill_probe_on(b: &Backend, kills: usize, dead_letter: bool, seed: u64) {
    let targets: String = (1..=16)
        .map(|i| format!("      - {{name: web-{i}}}\n"))
        .collect();
    // One target at a time, so every kill lands between steps or after a call's side effect
    // (a kill in the middle of a call reruns that call with the same key, and a schedule that
    // cut the same call every time could rerun it at will). Room for more attempts than a
    // dead letter takes: the kills count against a step's persisted budget too.
    let app = ledger_app("")
        .replace("rolling: {batch_size: 2}", "rolling: {batch_size: 4}")
        .replace("parallelism: 2", "parallelism: 1")
        .replace("max_retries: 2", "max_retries: 9")
        .split("    targets:\n")
        .next()
        .unwrap()
        .to_owned()
        + "    targets:\n"
        + &targets;
    let fx = b.fixture_of(&app);
    let mut rng = seed;
    let mut next = |n: u64| {
        // A fixed-seed LCG: the same schedule every run of the test.
        rng = rng
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (rng >> 33) % n
    };
    // Default max_recovery_attempts (5): six runs that move nothing dead-letter it.
    let stretch = if dead_letter { 3..9 } else { 0..0 };
    let mut killed = 0;
    let mut runs = 0;
    while killed < kills {
        runs += 1;
        assert!(runs <= kills * 3, "{kills} kills took {runs} runs");
        let site = if stretch.contains(&killed) {
            "step.started=kill@1".to_owned()
        } else if next(4) == 0 {
            "step.before_checkpoint~deploy:=kill@1".to_owned()
        } else {
            format!("step.started=kill@{}", 1 + next(3))
        };
        let out = fx.run_with(DEPLOY, &[("MANENT_FAILPOINTS", &site)]);
        match out.status.signal() {
            Some(9) => {
                killed += 1;
                // Commands the dead engine had started finish on their own.
                std::thread::sleep(Duration::from_millis(300));
            }
            // Finished, or a target whose attempts the kills spent (they count: a persisted
            // budget) waits for a decision, which the next `deploy` gives (a retry).
            _ => assert!(
                matches!(out.status.code(), Some(0 | 1)),
                "{site}: {}",
                said(&out)
            ),
        }
    }
    let out = fx.run(DEPLOY);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let ledger = fx.ledger();
    for i in 1..=16 {
        let t = format!("web-{i}");
        let starts = ledger
            .iter()
            .filter(|e| e.event == "start" && e.target == t)
            .count();
        assert!(
            (1..=2).contains(&starts),
            "{t} started {starts} times in {kills} kills: {ledger:#?}"
        );
        let version = std::fs::read_to_string(fx.path().join(format!("fleet/{t}/VERSION")));
        assert_eq!(version.unwrap().trim(), "1.0.0", "{t}");
    }
    let dead: Vec<String> = fx
        .deployments()
        .into_iter()
        .filter(|id| fx.status(id)["status"] == "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
        .collect();
    if !dead_letter {
        return;
    }
    let Some(dead) = dead.first() else {
        let all: Vec<String> = fx
            .deployments()
            .iter()
            .map(|id| format!("{id} {}", fx.status(id)["status"]))
            .collect();
        panic!("the stretch of kills dead-lettered no deployment: {all:#?}");
    };
    let out = fx.run(&["resume", dead]);
    assert_ne!(out.status.code(), Some(0), "{}", said(&out));
    assert!(
        text(&out.stderr).contains("was superseded: dep-"),
        "{}",
        said(&out)
    );
    let again = fx.ledger().iter().filter(|e| e.event == "start").count();
    assert_eq!(again, ledger.iter().filter(|e| e.event == "start").count());
    // Nor does the inbox offer it any more.
    let inbox = text(&fx.run(&["inbox"]).stdout);
    assert!(!inbox.contains(dead.as_str()), "{inbox}");
}

#[test]
fn the_kill_probe_at_6_kills() {
    kill_probe_on(&Backend::Sqlite, 6, false, 6);
}

#[test]
fn the_kill_probe_at_13_kills_with_a_dead_letter() {
    kill_probe_on(&Backend::Sqlite, 13, true, 13);
}

#[test]
fn the_kill_probe_at_30_kills_with_a_dead_letter() {
    kill_probe_on(&Backend::Sqlite, 30, true, 30);
}

/// After a dead letter, a new deploy of the same version says so, names how to continue the
/// stopped one, and leaves the targets that one finished `unchanged`, naming it; `--force`
/// deploys them again.
#[test]
fn a_new_deploy_of_a_dead_lettered_version_leaves_its_finished_targets_unchanged() {
    let manent = format!("{LEDGER_MANENT}engine:\n  max_recovery_attempts: 1\n");
    let fx = Fixture::new(&manent, &[("web", &ledger_app(""))]);
    run_killed(&fx, DEPLOY, "step.started~web-3=kill");
    let first = fx.deployments().pop().unwrap();
    // A run that moves nothing, then the claim that finds one too many.
    run_killed(&fx, &["resume", &first], "step.started=kill@1");
    let out = fx.run_with(
        &["resume", &first],
        &[("MANENT_FAILPOINTS", "step.started=kill@1")],
    );
    assert_eq!(out.status.signal(), None, "{}", said(&out));
    assert_eq!(
        fx.status(&first)["status"],
        "MAX_RECOVERY_ATTEMPTS_EXCEEDED"
    );
    let out = fx.run(DEPLOY);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "{first} deployed this version before and was dead-lettered"
        )) && err.contains(&format!("`manent resume {first}`")),
        "{err}"
    );
    let second = fx.deployments().pop().unwrap();
    assert_ne!(second, first);
    let v = fx.status(&second);
    let targets = v["targets"].as_array().unwrap();
    for t in targets {
        let name = t["name"].as_str().unwrap();
        if name == "web-1" || name == "web-2" {
            assert_eq!(t["state"], "unchanged", "{v:#}");
            let msg = t["message"].as_str().unwrap();
            assert!(msg.contains(&format!("deployed by {first}")), "{msg}");
            assert!(msg.contains("reads 1.0.0 live"), "{msg}");
        } else {
            assert_eq!(t["state"], "deployed", "{v:#}");
        }
    }
    let starts = |fx: &Fixture, t: &str| {
        fx.ledger()
            .iter()
            .filter(|e| e.event == "start" && e.target == t)
            .count()
    };
    assert_eq!(starts(&fx, "web-1"), 1);
    // Forced, every target runs again.
    let mut forced = DEPLOY.to_vec();
    forced.extend(["--force", "--reason", "redo everything"]);
    let out = fx.run(&forced);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(starts(&fx, "web-1"), 2);
}

/// SIGTERM means for a worker what Ctrl-C means for a deploy: the targets in flight finish,
/// nothing new starts, and the deployment resumes later with only the rest.
#[test]
fn sigterm_to_a_worker_lets_targets_in_flight_finish_and_starts_nothing_new() {
    let fx = fixture();
    // The deployment is recorded (its command killed before any target), for the worker.
    run_killed(&fx, DEPLOY, "step.started~web-1=kill");
    let id = fx.deployments().pop().unwrap();
    let mut worker = fx.spawn_with(&["worker"], &[("DELAY", "1")]);
    let words = fleet::wait_ready(&mut worker);
    wait_until(Duration::from_secs(30), "batch 1 to start", || {
        fx.ledger().iter().filter(|e| e.event == "start").count() >= 2
    });
    fleet::sigterm(&worker);
    let status = worker.wait().unwrap();
    assert!(matches!(status.code(), Some(0 | 5)), "{status:?}");
    wait_until(Duration::from_secs(5), "the worker's last words", || {
        words
            .lock()
            .unwrap()
            .contains(&format!("stopped {id} at a step boundary"))
    });
    assert_eq!(fx.status(&id)["status"], "PENDING");
    let ledger = fx.ledger();
    let starts = ledger.iter().filter(|e| e.event == "start").count();
    let dones = ledger.iter().filter(|e| e.event == "done").count();
    assert_eq!(
        (starts, dones),
        (2, 2),
        "batch 1 finished, nothing more: {ledger:#?}"
    );
    let out = fx.run(&["resume", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let starts = fx.ledger().iter().filter(|e| e.event == "start").count();
    assert_eq!(starts, 6, "nothing ran twice: {:#?}", fx.ledger());
}

#[test]
fn ctrl_c_lets_targets_in_flight_finish_and_resume_runs_only_the_rest() {
    let fx = fixture();
    let mut child = fx.spawn_with(DEPLOY, &[("DELAY", "1")]);
    wait_until(Duration::from_secs(30), "batch 1 to start", || {
        fx.ledger().len() >= 2
    });
    let ok = std::process::Command::new("kill")
        .arg("-INT")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(ok.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(5));
    let id = fx.deployments().pop().unwrap();
    assert_eq!(fx.status(&id)["status"], "PENDING");
    assert_eq!(
        fx.ledger().iter().filter(|e| e.event == "done").count(),
        2,
        "batch 1 finished"
    );
    let out = fx.run(&["resume", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let starts = fx.ledger().iter().filter(|e| e.event == "start").count();
    assert_eq!(starts, 6, "nothing ran twice: {:#?}", fx.ledger());
}

#[test]
fn a_durable_pause_between_batches_is_not_restarted_by_a_crash() {
    let app = ledger_app("").replace(
        "rolling: {batch_size: 2}",
        "rolling: {batch_size: 2, interval: 2s}",
    );
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &app)]);
    let mut child = fx.spawn_with(DEPLOY, &[]);
    wait_until(Duration::from_secs(30), "the wait between batches", || {
        fx.deployments()
            .last()
            .is_some_and(|id| fx.status(id)["phase"]["phase"] == "waiting")
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let id = fx.deployments().pop().unwrap();
    let deadline = |fx: &Fixture| -> Vec<(u32, String)> {
        fx.db()
            .prepare("SELECT function_id, output FROM operation_outputs WHERE workflow_id = ?1 AND function_name = 'engine.sleep' ORDER BY function_id")
            .unwrap()
            .query_map([&id], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let first = deadline(&fx);
    assert_eq!(first.len(), 1);
    let out = fx.run(DEPLOY);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let after = deadline(&fx);
    assert_eq!(
        after[0], first[0],
        "the restart waited for the recorded deadline, not a new one"
    );
    let due: i64 = first[0].1.parse().unwrap();
    let batch2_started: i64 = fx
        .db()
        .query_row(
            "SELECT min(started_at) FROM step_attempts WHERE workflow_id = ?1 AND function_name LIKE 'deploy:b2:%'",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        batch2_started >= due,
        "batch 2 started before the recorded deadline"
    );
}

/// A retried target is a step like any other, under its own new key: killed before its side
/// effect it runs once more (as attempt 2); killed after the side effect and before the
/// checkpoint it is reconciled through current_release (not run again); killed after the
/// checkpoint it is not run again.
#[test]
fn a_crash_during_a_retried_target_completes_it_once() {
    for (failpoint, runs) in [
        ("step.started~deploy:b2~2:web-3=kill", 1),
        // Its plugin had finished: current_release reconciles it, it does not run again.
        ("step.before_checkpoint~deploy:b2~2:web-3=kill", 1),
        ("step.after_checkpoint~deploy:b2~2:web-3=kill", 1),
    ] {
        let fx = fixture();
        std::fs::write(fx.path().join("broken-web-3"), "").unwrap();
        let out = fx.run(DEPLOY);
        assert_eq!(out.status.code(), Some(1), "{}", said(&out));
        let id = fx.deployments().pop().unwrap();
        let first_key = fx
            .ledger()
            .into_iter()
            .find(|e| e.target == "web-3")
            .unwrap()
            .key;
        std::fs::remove_file(fx.path().join("broken-web-3")).unwrap();
        run_killed(&fx, &["retry", &id], failpoint);
        let out = fx.run(&["resume", &id]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{failpoint}: {}",
            text(&out.stderr)
        );
        let web3: Vec<_> = fx
            .ledger()
            .into_iter()
            .filter(|e| e.target == "web-3" && e.key != first_key)
            .collect();
        let keys: BTreeSet<&str> = web3.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(
            keys.len(),
            1,
            "{failpoint}: one new key for the retry: {web3:?}"
        );
        let starts = web3.iter().filter(|e| e.event == "start").count();
        let dones = web3.iter().filter(|e| e.event == "done").count();
        assert_eq!((starts, dones), (runs, runs), "{failpoint}: {web3:?}");
        let steps: Vec<String> = fx
            .steps(&id)
            .into_iter()
            .map(|(_, n)| n)
            .filter(|n| n == "deploy:b2~2:web-3")
            .collect();
        assert_eq!(
            steps.len(),
            1,
            "{failpoint}: the retried step is checkpointed once"
        );
        let v = fx.status(&id);
        assert_eq!(v["state"], "deployed", "{failpoint}: {v:#}");
        for t in ["web-1", "web-2", "web-4", "web-5", "web-6"] {
            let n = fx
                .ledger()
                .iter()
                .filter(|e| e.target == t && e.event == "start")
                .count();
            assert_eq!(n, 1, "{failpoint}: {t} ran once");
        }
        fx.integrity_ok();
    }
}

// ---------------------------------------------------------------------------------------------
// A canary killed anywhere: the same checkpoint log as an uninterrupted run, every completed
// plugin call once, an interrupted one again with its key.

/// A canary through every kind of step, on the simulated router, which writes a ledger line
/// per call (`<call> <key> <attempt> <detail>`).
fn canary_fixture() -> Fixture {
    let fx = Fixture::new(
        "plugins:\n  fleet:\n    builtin: simulate\n    log_lines: 0\n",
        &[],
    );
    let app = format!(
        "application: shop\nartifact: {{version: \"2.0.0\"}}\ndeploy:\n  plugin: fleet\n  params: {{ledger: \"{}\"}}\n\
         strategy:\n  canary:\n    steps:\n      - testers: {{}}\n      - weight: 10\n\
         \x20     - analysis: {{command: 'exit 0', count: 2, interval: 200ms}}\n      - pause: 400ms\n\
         \x20     - scale: 50\n      - weight: 50\n      - weight: 100\n\
         parallelism: 2\nenvironments:\n  prod:\n    targets: [{{name: s1}}, {{name: s2}}, {{name: s3}}]\n",
        fx.path().join("calls").display()
    );
    std::fs::write(fx.path().join("apps/shop.yml"), app).unwrap();
    fx
}

const CANARY: &[&str] = &["deploy", "shop", "prod", "--yes"];

/// (call, key, attempt) per ledger line with a key (the engine's own re-asserts have none).
fn calls(fx: &Fixture) -> Vec<(String, String, u32)> {
    std::fs::read_to_string(fx.path().join("calls"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let key = (*f.get(1)?).to_owned();
            let attempt = f.get(2)?.parse().ok()?;
            (key != "-").then(|| (f[0].to_owned(), key, attempt))
        })
        .collect()
}

fn canary_golden() -> Vec<(u32, String)> {
    let fx = canary_fixture();
    let out = fx.run(CANARY);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let id = fx.deployments().pop().unwrap();
    let steps = fx.steps(&id);
    let names: Vec<&str> = steps.iter().map(|(_, n)| n.as_str()).collect();
    for call in [
        "canary.slots",
        "candidate:b1:s1",
        "canary.testers",
        "canary.weight",
        "canary.check",
        "canary.deadline",
        "canary.scale",
        "canary.promote",
        "canary.retire",
    ] {
        assert!(names.contains(&call), "{call} in {names:?}");
    }
    steps
}

/// Runs the canary again after a kill and checks it against the golden run: a plugin call
/// whose step was checkpointed before the kill never runs again; one the kill cut off (it
/// ran, its step not checkpointed) runs again once, with its key and a later attempt; every
/// other runs once.
fn canary_resumes(fx: &Fixture, golden: &[(u32, String)], what: &str) {
    let id = fx.deployments().pop().unwrap();
    let done_before: BTreeSet<String> = fx
        .steps(&id)
        .into_iter()
        .map(|(fid, _)| format!("{id}/{fid}"))
        .collect();
    let ran_before: BTreeSet<String> = calls(fx).into_iter().map(|c| c.1).collect();
    let out = fx.run(CANARY);
    assert_eq!(
        out.status.code(),
        Some(0),
        "after {what}: {}",
        text(&out.stderr)
    );
    assert_eq!(fx.status(&id)["state"], "deployed", "after {what}");
    assert_eq!(
        fx.steps(&id),
        golden,
        "after {what}: the checkpoint log differs"
    );
    let checkpointed: BTreeSet<String> = fx
        .steps(&id)
        .into_iter()
        .map(|(fid, _)| format!("{id}/{fid}"))
        .collect();
    let mut seen: BTreeMap<(String, String), Vec<u32>> = BTreeMap::new();
    for (call, key, attempt) in calls(fx) {
        seen.entry((call, key)).or_default().push(attempt);
    }
    for ((call, key), attempts) in &seen {
        assert!(
            checkpointed.contains(key),
            "{call} {key} ran outside a step"
        );
        let cut_off = ran_before.contains(key) && !done_before.contains(key);
        let expected = if cut_off { 2 } else { 1 };
        assert_eq!(
            attempts.len(),
            expected,
            "after {what}: {call} {key} ran {attempts:?}"
        );
        if cut_off {
            assert!(
                attempts[1] > attempts[0],
                "after {what}: a rerun is a later attempt"
            );
        }
    }
    fx.integrity_ok();
}

#[test]
fn a_canary_killed_after_any_checkpoint_resumes_to_the_same_end() {
    let golden = canary_golden();
    for filter in ["canary.", "candidate:"] {
        let n = golden.iter().filter(|(_, m)| m.starts_with(filter)).count();
        for k in 1..=n {
            let fx = canary_fixture();
            let fp = format!("step.after_checkpoint~{filter}=kill@{k}");
            run_killed(&fx, CANARY, &fp);
            canary_resumes(&fx, &golden, &fp);
        }
    }
}

#[test]
fn a_canary_call_cut_off_before_its_checkpoint_runs_again_with_its_key() {
    let golden = canary_golden();
    for call in [
        "canary.weight",
        "canary.promote",
        "canary.testers",
        "canary.scale",
    ] {
        let fx = canary_fixture();
        let fp = format!("step.before_checkpoint~{call}=kill@1");
        run_killed(&fx, CANARY, &fp);
        let first: Vec<(String, String, u32)> = calls(&fx);
        let cut = first
            .iter()
            .rev()
            .find(|c| format!("canary.{}", c.0) == call)
            .cloned()
            .unwrap_or_else(|| panic!("{call} ran before the kill: {first:?}"));
        canary_resumes(&fx, &golden, &fp);
        let again: Vec<u32> = calls(&fx)
            .into_iter()
            .filter(|c| c.1 == cut.1)
            .map(|c| c.2)
            .collect();
        assert_eq!(again, [1, 2], "{call}: the same key, a later attempt");
    }
}

#[test]
fn a_canary_killed_inside_its_timed_pause_and_its_analysis_resumes_where_it_was() {
    let golden = canary_golden();
    for (doing, what) in [
        ("analysis", "inside the analysis"),
        ("timed", "inside the timed pause"),
    ] {
        let fx = canary_fixture();
        let mut child = fx.spawn_with(CANARY, &[]);
        wait_until(Duration::from_secs(60), what, || {
            fx.deployments().pop().is_some_and(|id| {
                let v = fx.status(&id);
                v["phase"]["doing"] == doing
            })
        });
        child.kill().unwrap();
        child.wait().unwrap();
        canary_resumes(&fx, &golden, what);
    }
}

/// The kill matrix on PostgreSQL: every step boundary of the rolling deploy, after the side
/// effect before its checkpoint, inside a running step, during a rollback, and commits that
/// fail or lose their acknowledgement — the same ledger guarantees as on SQLite.
mod postgres {
    use super::*;

    #[test]
    fn kill_after_every_step_checkpoint() {
        let Some(b) = Backend::postgres() else { return };
        kill_after_every_step_checkpoint_on(&b);
    }

    #[test]
    fn kill_after_the_side_effect_before_the_checkpoint_reruns_with_the_same_key() {
        let Some(b) = Backend::postgres() else { return };
        kill_after_the_side_effect_before_the_checkpoint_on(&b);
    }

    #[test]
    fn the_kill_probe_at_13_kills_with_a_dead_letter() {
        let Some(b) = Backend::postgres() else { return };
        kill_probe_on(&b, 13, true, 1313);
    }

    #[test]
    fn every_case_of_a_cut_off_call_is_forced_not_left_to_timing() {
        let Some(b) = Backend::postgres() else { return };
        every_case_of_a_cut_off_call_forced_on(&b);
    }

    #[test]
    fn kill_inside_a_running_step() {
        let Some(b) = Backend::postgres() else { return };
        kill_inside_a_running_step_on(&b);
    }

    #[test]
    fn a_crash_during_a_rollback_resumes_the_rollback() {
        let Some(b) = Backend::postgres() else { return };
        a_crash_during_a_rollback_on(&b);
    }

    #[test]
    fn a_lost_commit_acknowledgement_and_failing_commits_never_rerun_a_step_or_fail_the_deploy() {
        let Some(b) = Backend::postgres() else { return };
        lost_acknowledgements_on(&b);
    }
}

/// A database deleted under a running deploy (SQLite keeps writing to a deleted file) stops it
/// with exit 6 — never "deployed" — and the next read says the database is gone instead of "no
/// deployments yet", without creating a new one.
#[test]
fn a_database_deleted_mid_deploy_stops_the_deploy_and_reads_say_so() {
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &ledger_app(""))]);
    let child = fx.spawn_with(&["deploy", "web", "prod", "--yes"], &[("DELAY", "1")]);
    wait_until(Duration::from_secs(60), "a first target done", || {
        fx.ledger().iter().any(|e| e.event == "done")
    });
    for suffix in ["", "-wal", "-shm"] {
        let mut p = fx.db_path().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(6), "{stdout}{stderr}");
    assert!(
        stderr.contains("was deleted while the engine ran"),
        "{stderr}"
    );
    assert!(!stdout.contains(": deployed"), "never deployed: {stdout}");
    assert!(!fx.db_path().exists(), "nothing made a new database");
    for verb in [&["status"][..], &["db", "check"][..]] {
        let out = fx.run(verb);
        let err = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(6),
            "{verb:?}: {err}{}",
            text(&out.stdout)
        );
        assert!(
            err.contains("is gone, but its inputs key"),
            "{verb:?}: {err}"
        );
    }
    assert!(!fx.db_path().exists(), "a read never creates the database");
}
