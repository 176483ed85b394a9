//! Nothing a dead engine started runs beside its retry: `kill -9`, a second Ctrl-C.

use super::*;

/// Resumes the deploy, checking when its first command starts that nothing of `old` still runs;
/// then that no old command ever finished.
fn resume_without_old_processes(fx: &Fixture, old: &[u32]) {
    // A command the dead engine started may have forked its `sleep` in the very moment of the
    // kill (its ledger line written, the fork a moment later): settled first, whatever starts
    // from here on is not the dead engine's.
    std::thread::sleep(Duration::from_millis(200));
    let before = ticks_now();
    let resume = fx.spawn_with(&["deploy", "web", "prod", "--yes"], &[("DELAY", "0")]);
    wait_until(HANG, "the retry to start", || started(fx).len() > old.len());
    for pgid in old {
        assert_eq!(
            group_members_since(*pgid, Some(before)),
            Vec::<u32>::new(),
            "the dead engine's command group {pgid} runs beside its retry"
        );
    }
    let out = wait_bounded(resume, HANG, "the resumed deploy");
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let ledger = slow_ledger(fx);
    assert!(
        !ledger.iter().any(|e| e.0 == "done" && old.contains(&e.2)),
        "an old command finished: {ledger:?}"
    );
    assert_eq!(ledger.iter().filter(|e| e.0 == "done").count(), 2);
}

#[test]
fn kill_9_mid_command_leaves_nothing_running_beside_the_retry() {
    let fx = Fixture::new(LEDGER_MANENT, &[("web", SLOW_APP)]);
    let mut child = fx.spawn_with(&["deploy", "web", "prod", "--yes"], &[("DELAY", "4")]);
    wait_until(HANG, "both commands to start", || started(&fx).len() == 2);
    child.kill().unwrap();
    child.wait().unwrap();
    let old = started(&fx);
    resume_without_old_processes(&fx, &old);
}

#[test]
fn a_second_ctrl_c_kills_what_the_engine_started_before_it_exits() {
    let fx = Fixture::new(LEDGER_MANENT, &[("web", SLOW_APP)]);
    let child = fx.spawn_with(&["deploy", "web", "prod", "--yes"], &[("DELAY", "4")]);
    wait_until(HANG, "both commands to start", || started(&fx).len() == 2);
    signal(&child, "INT");
    std::thread::sleep(Duration::from_millis(200));
    signal(&child, "INT");
    let out = wait_bounded(child, HANG, "the engine after two Ctrl-C");
    assert_eq!(out.status.code(), Some(5), "{}", said(&out));
    // Killed on the way out: gone as soon as the signal lands (zombies aside).
    let old = started(&fx);
    for pgid in &old {
        wait_until(Duration::from_secs(2), "the command group to die", || {
            group_members(*pgid).is_empty()
        });
    }
    resume_without_old_processes(&fx, &old);
}

#[test]
fn a_second_ctrl_c_stops_external_plugins_too() {
    let tag = tempfile::tempdir().unwrap();
    let tag = tag.path().display().to_string();
    let manent = format!(
        "plugins:\n  fix:\n    external:\n      command: {FIXTURE_PLUGIN}\n      start_timeout: 5s\n      \
         env: {{HOSTILE_TAG: \"{tag}\"}}\n"
    );
    let ledger = tempfile::NamedTempFile::new().unwrap();
    let app = format!(
        "application: a\nartifact: {{version: \"1\"}}\ndeploy:\n  plugin: fix\n  params: {{ledger: \"{}\", sleep_ms: 60000}}\n\
         environments:\n  prod:\n    targets: [{{name: t1}}]\n",
        ledger.path().display()
    );
    let fx = Fixture::new(&manent, &[("a", &app)]);
    let child = fx.spawn_with(&["deploy", "a", "prod", "--yes"], &[]);
    wait_until(HANG, "the plugin to start deploying", || {
        std::fs::read_to_string(ledger.path()).is_ok_and(|l| l.contains("start"))
    });
    signal(&child, "INT");
    std::thread::sleep(Duration::from_millis(200));
    signal(&child, "INT");
    let out = wait_bounded(child, HANG, "the engine after two Ctrl-C");
    assert_eq!(out.status.code(), Some(5), "{}", said(&out));
    wait_until(
        Duration::from_secs(2),
        "the plugin to die with its engine",
        || processes_with_env("HOSTILE_TAG", &tag).is_empty(),
    );
}

/// An engine killed after it started a command and before it recorded the command's process
/// group: the command never runs (it waits at a gate the dead engine never opened), so nothing
/// unrecorded runs beside the retry, and the retry deploys each target once.
#[test]
fn an_engine_killed_before_it_recorded_a_command_leaves_that_command_unrun() {
    use std::os::unix::process::ExitStatusExt;
    let fx = Fixture::new(LEDGER_MANENT, &[("web", SLOW_APP)]);
    let out = fx.run_with(
        &["deploy", "web", "prod", "--yes"],
        &[
            ("MANENT_FAILPOINTS", "command.spawned=kill@1"),
            ("DELAY", "0"),
        ],
    );
    assert_eq!(out.status.signal(), Some(9), "{}", said(&out));
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        slow_ledger(&fx).is_empty(),
        "a command the engine never recorded ran: {:?}",
        slow_ledger(&fx)
    );
    let out = fx.run_with(&["deploy", "web", "prod", "--yes"], &[("DELAY", "0")]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let ledger = slow_ledger(&fx);
    assert_eq!(
        ledger.iter().filter(|e| e.0 == "done").count(),
        2,
        "{ledger:?}"
    );
}
