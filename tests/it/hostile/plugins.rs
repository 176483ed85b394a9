//! Plugins that never speak, or break on the search path: nothing hangs past its timeout.

use super::*;

fn silent_plugin(fx_tag: &str, retries: u32) -> (String, String) {
    let manent = format!(
        "plugins:\n  fix:\n    external:\n      command: {FIXTURE_PLUGIN}\n      start_timeout: 2s\n      \
         env: {{FIXTURE_START: silent, HOSTILE_TAG: \"{fx_tag}\"}}\n  exec:\n    pass_env: [FIXTURE]\n\
         engine:\n  drain_timeout: 5s\n"
    );
    let app = format!(
        "application: a\nartifact: {{version: \"1\"}}\ndeploy:\n  plugin: fix\ntimeouts: {{step: 5s}}\n\
         max_retries: {retries}\nbackoff: {{base: 100ms, max: 200ms}}\nenvironments:\n  prod:\n    targets: [{{name: t1}}]\n"
    );
    (manent, app)
}

#[test]
fn a_plugin_that_never_speaks_fails_within_its_start_timeout_and_holds_nothing_up() {
    let tag = tempfile::tempdir().unwrap();
    let tag = tag.path().display().to_string();
    let (manent, app) = silent_plugin(&tag, 0);
    let fx = Fixture::new(&manent, &[("a", &app), ("other", PLAIN_APP)]);
    let out = bounded(
        fx.command(&["deploy", "a", "prod", "--yes"]),
        HANG,
        "deploy",
    );
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("plugin fix") && all.contains("within 2s (start_timeout)"),
        "{all}"
    );
    assert!(all.contains("stuck at"), "{all}");
    // Probing it ends too, and says so.
    let out = bounded(fx.command(&["plugins", "--probe"]), HANG, "plugins --probe");
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(all.contains("stuck at"), "{all}");
    assert_eq!(
        out.status.code(),
        Some(2),
        "a failing probe is a failure: {all}"
    );
    // Another application deploys, whatever the stuck one waits for.
    let out = bounded(
        fx.command(&["deploy", "other", "prod", "--yes"]),
        HANG,
        "the other deploy",
    );
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    wait_until(
        Duration::from_secs(10),
        "the silent plugins to exit",
        || processes_with_env("HOSTILE_TAG", &tag).is_empty(),
    );
}

#[test]
fn sigterm_ends_an_engine_whose_plugin_never_speaks() {
    let tag = tempfile::tempdir().unwrap();
    let tag = tag.path().display().to_string();
    let (manent, app) = silent_plugin(&tag, 20);
    let fx = Fixture::new(&manent, &[("a", &app), ("other", PLAIN_APP)]);
    let child = fx.spawn_with(&["deploy", "a", "prod", "--yes"], &[]);
    wait_until(HANG, "the silent plugin to start", || {
        !processes_with_env("HOSTILE_TAG", &tag).is_empty()
    });
    signal(&child, "TERM");
    let out = wait_bounded(child, HANG, "the engine after SIGTERM");
    assert_eq!(out.status.code(), Some(5), "{}", said(&out));
    wait_until(
        Duration::from_secs(2),
        "the plugin to die with its engine",
        || processes_with_env("HOSTILE_TAG", &tag).is_empty(),
    );
    let out = bounded(
        fx.command(&["deploy", "other", "prod", "--yes"]),
        HANG,
        "the other deploy",
    );
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
}

#[test]
fn plugins_probe_fails_for_a_broken_plugin_found_on_the_search_path() {
    let fx = Fixture::new("plugin_dir: bin\n", &[]);
    std::fs::create_dir(fx.path().join("bin")).unwrap();
    let broken = fx.path().join("bin/manent-plugin-broken");
    std::fs::write(
        &broken,
        "#!/bin/sh\necho 'cannot start: no config' >&2\nexit 3\n",
    )
    .unwrap();
    chmod(&broken, 0o755);
    // Not declared, not used: still listed, and its failure is the probe's.
    let out = bounded(fx.command(&["plugins", "--probe"]), HANG, "plugins --probe");
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        all.contains("broken") && all.contains("cannot start: no config"),
        "{all}"
    );
}
