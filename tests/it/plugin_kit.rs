//! `manent plugin test`, the conformance kit, run as a user runs it: on a plugin built with the
//! Rust SDK (every check passes), on the bundled plugins (nginx and HAProxy in front of real
//! routers), and on plugins that break the contract — one silent after its handshake, one that
//! writes on stdout, one that ignores cancellation — where it fails and names the check.

use std::path::Path;
use std::process::Command;

use crate::support::fleet::{said, text};
use crate::support::router::Router;
use crate::support::{haproxy, nginx};

const MANENT: &str = env!("CARGO_BIN_EXE_manent");
const FIXTURE: &str = env!("CARGO_BIN_EXE_manent-fixture-plugin");

/// The kit's report on `binary` (`--json`), with its exit code; `file` is the kit's file.
pub fn kit(binary: &Path, file: Option<&str>) -> (Option<i32>, serde_json::Value) {
    kit_in(binary, file, None)
}

/// [`kit`] run from directory `cwd` (the plugin starts there too).
pub fn kit_in(
    binary: &Path,
    file: Option<&str>,
    cwd: Option<&Path>,
) -> (Option<i32>, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(MANENT);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    if let Some(yaml) = file {
        let path = dir.path().join("kit.yml");
        std::fs::write(&path, yaml).unwrap();
        cmd.arg("--config").arg(path);
    }
    let out = cmd
        .args(["plugin", "test", "--json"])
        .arg(binary)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the kit's JSON: {e}\nstdout: {}\nstderr: {}",
            text(&out.stdout),
            text(&out.stderr)
        )
    });
    (out.status.code(), report)
}

/// Each check's outcome, by name.
pub fn outcomes(report: &serde_json::Value) -> Vec<(String, String, String)> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["outcome"].as_str().unwrap().to_owned(),
                c["detail"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The checks that failed, by name.
pub fn failed(report: &serde_json::Value) -> Vec<String> {
    outcomes(report)
        .into_iter()
        .filter(|(_, o, _)| o == "fail")
        .map(|(n, _, _)| n)
        .collect()
}

pub fn outcome(report: &serde_json::Value, name: &str) -> (String, String) {
    outcomes(report)
        .into_iter()
        .find(|(n, _, _)| n == name)
        .map(|(_, o, d)| (o, d))
        .unwrap_or_else(|| panic!("no check {name} in {report:#}"))
}

const EVERY_CHECK: [&str; 26] = [
    "cookie",
    "handshake",
    "protocol",
    "automtls",
    "health",
    "configure",
    "start",
    "supports",
    "unannounced",
    "validate",
    "validate-refuses",
    "invalid-input",
    "deploy",
    "call-logs",
    "idempotency",
    "secret-leak",
    "dry-run",
    "current-release",
    "rollback",
    "errors",
    "logs",
    "secret",
    "cancellation",
    "crash",
    "stdout",
    "shutdown",
];

#[test]
fn a_plugin_built_with_the_rust_sdk_passes_every_check() {
    // Its Deploy reads the secret its params name.
    let (code, report) = kit(Path::new(FIXTURE), Some(READS_A_SECRET));
    assert_eq!(code, Some(0), "{report:#}");
    let names: Vec<String> = outcomes(&report).into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(names, EVERY_CHECK, "{report:#}");
    assert_eq!(report["failed"], 0, "{report:#}");
    assert_eq!(report["skipped"], 0, "{report:#}");
    let (_, cancel) = outcome(&report, "cancellation");
    assert!(cancel.contains("stopped"), "{cancel}");
    let (_, crash) = outcome(&report, "crash");
    assert!(crash.contains("mid-call"), "{crash}");
    let (_, stdout) = outcome(&report, "stdout");
    assert!(stdout.contains("became a stderr line"), "{stdout}");
}

/// The kit's file for the Rust fixture: its Deploy reads the secret `token`, and `permanent`
/// is what it must refuse.
const READS_A_SECRET: &str =
    "params: {secret: token}\ninvalid: {permanent: true}\nslow: {sleep_ms: 30000}\n";

/// A Deploy that logs the secret it read fails `secret-leak`, whatever else it does right.
#[test]
fn a_deploy_that_logs_its_secret_fails_the_kit() {
    let (code, report) = kit(
        Path::new(FIXTURE),
        Some("params: {secret: token, log_secret: true}\n"),
    );
    assert_eq!(code, Some(1), "{report:#}");
    // Written raw to stderr, the line names no deployment either.
    assert_eq!(failed(&report), ["call-logs", "secret-leak"], "{report:#}");
    let (_, why) = outcome(&report, "secret-leak");
    assert!(
        why.contains("[the secret]") && why.contains("never log"),
        "{why}"
    );
    assert!(
        !why.contains("kit-secret-"),
        "the report shows no value: {why}"
    );
}

/// Bad input refused as retryable fails `invalid-input`: manent would retry what cannot work.
#[test]
fn invalid_input_refused_as_retryable_fails_the_kit() {
    let (code, report) = kit(
        Path::new(FIXTURE),
        Some("params: {secret: token}\ninvalid: {retryable_invalid: true}\n"),
    );
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(failed(&report), ["invalid-input"], "{report:#}");
    let (_, why) = outcome(&report, "invalid-input");
    assert!(
        why.contains("as retryable") && why.contains("params.path is required"),
        "{why}"
    );
}

#[test]
fn the_text_report_names_every_check_and_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kit.yml");
    std::fs::write(&file, READS_A_SECRET).unwrap();
    let out = Command::new(MANENT)
        .arg("--config")
        .arg(&file)
        .args(["plugin", "test", FIXTURE])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let stdout = text(&out.stdout);
    for name in EVERY_CHECK {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("pass") && l.split_whitespace().nth(1) == Some(name)),
            "{name}:\n{stdout}"
        );
    }
    assert!(
        stdout.ends_with("26 passed, 0 failed, 0 skipped\n"),
        "{stdout}"
    );
}

#[test]
fn a_plugin_silent_after_its_handshake_fails_at_automtls_and_stops_there() {
    let (code, report) = kit(
        Path::new(FIXTURE),
        Some("env: {FIXTURE_START: silent}\nstart_timeout: 2s\n"),
    );
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(failed(&report), ["automtls"], "{report:#}");
    let (_, why) = outcome(&report, "automtls");
    assert!(why.contains("stuck at the TLS handshake"), "{why}");
    let (health, _) = outcome(&report, "health");
    assert_eq!(health, "skip");
}

#[test]
fn a_plugin_that_writes_on_stdout_fails_the_stdout_check_with_what_it_wrote() {
    let (code, report) = kit(Path::new(FIXTURE), Some("params: {print_stdout: true}\n"));
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(failed(&report), ["stdout"], "{report:#}");
    let (_, why) = outcome(&report, "stdout");
    assert!(why.contains("a stray line on stdout"), "{why}");
}

#[test]
fn a_plugin_that_ignores_cancellation_fails_the_cancellation_check() {
    // Its own Deploy, slowed by the kit file's `slow:` params, blocks its thread through the
    // cancel: the kit times the plugin's code, not an answer the SDK gives for it.
    let (code, report) = kit(
        Path::new(FIXTURE),
        Some("env: {FIXTURE_START: ignore_cancel}\nslow: {sleep_ms: 30000}\n"),
    );
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(failed(&report), ["cancellation"], "{report:#}");
    let (_, why) = outcome(&report, "cancellation");
    assert!(why.contains("still running 2s later"), "{why}");
    // Without `slow:` the kit cannot slow the author's code: a skip saying how.
    let (code, report) = kit(Path::new(FIXTURE), Some("params: {}\n"));
    assert_eq!(code, Some(0), "{report:#}");
    let (o, why) = outcome(&report, "cancellation");
    assert_eq!(o, "skip", "{why}");
    assert!(why.contains("give `slow:` params"), "{why}");
}

/// A Deploy that does its work again under the same idempotency key fails `idempotency`;
/// declaring that it cannot tell makes it a skip.
#[test]
fn a_deploy_that_redoes_its_work_fails_idempotency() {
    let (code, report) = kit(Path::new(FIXTURE), Some("params: {redo: true}\n"));
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(failed(&report), ["idempotency"], "{report:#}");
    let (_, why) = outcome(&report, "idempotency");
    assert!(
        why.contains("answered `deployed` on conformance-1, conformance-2"),
        "{why}"
    );
    let (code, report) = kit(
        Path::new(FIXTURE),
        Some("params: {redo: true}\nnot_idempotent: it keeps no record of its work\n"),
    );
    assert_eq!(code, Some(0), "{report:#}");
    let (o, why) = outcome(&report, "idempotency");
    assert_eq!(o, "skip");
    assert!(why.contains("it keeps no record of its work"), "{why}");
}

#[test]
fn a_missing_binary_or_a_broken_kit_file_is_bad_input_named() {
    let out = Command::new(MANENT)
        .args(["plugin", "test", "/nonexistent/plugin"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("/nonexistent/plugin: no such file"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kit.yml");
    std::fs::write(&file, "targets:\n  - name: a\n    hots: x\n").unwrap();
    let out = Command::new(MANENT)
        .arg("--config")
        .arg(&file)
        .args(["plugin", "test", FIXTURE])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("kit.yml:3:") && err.contains("hots"), "{err}");
}

/// Over a real sshd on loopback: the kit deploys a directory to two paths of it, deploys it
/// again under the same key, dry-runs and rolls back, reading each back.
#[test]
fn the_bundled_remote_copy_plugin_passes() {
    let Some(server) = crate::support::sshd::sshd() else {
        assert!(std::env::var_os("CI").is_none(), "sshd is required in CI");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("build")).unwrap();
    std::fs::write(dir.path().join("build/index.html"), "hello").unwrap();
    let file = format!(
        "options: {{ssh: {{port: {}, identity: \"{}\", options: [StrictHostKeyChecking=no, \
         UserKnownHostsFile=/dev/null, LogLevel=ERROR]}}}}\n\
         artifact: {{type: directory, name: web, version: \"1.0.0\", uri: \"{d}/build\"}}\n\
         targets: [{{name: web-1, host: 127.0.0.1}}, {{name: web-2, host: 127.0.0.1}}]\n\
         params: {{path: \"{d}/remote/{{target}}\"}}\n",
        server.port,
        server.key.display(),
        d = dir.path().display()
    );
    let (code, report) = kit(
        Path::new(env!("CARGO_BIN_EXE_manent-plugin-remote-copy")),
        Some(&file),
    );
    assert_eq!(code, Some(0), "{report:#}");
    for check in ["deploy", "idempotency", "rollback"] {
        assert_eq!(outcome(&report, check).0, "pass", "{check}: {report:#}");
    }
}

/// The router plugin's options, as its manent.yml entry gives them, and its targets.
fn router_kit<R: Router>(r: &R) -> String {
    let yml: serde_json::Value = yaml_serde::from_str(&r.manent_yml("edge")).unwrap();
    let mut options = yml["plugins"]["edge"].clone();
    options.as_object_mut().unwrap().remove("external");
    let targets: serde_json::Value =
        yaml_serde::from_str(&r.targets_yml().replace("\n      ", "\n")[6..]).unwrap();
    format!(
        "options: {options}\ntargets: {targets}\nartifact: {{type: directory, version: \"1.0.0\", uri: \"{}\"}}\n\
         not_idempotent: a router's deploy puts the release in the idle slot and promotes it, \
         whichever release the live slot holds\n",
        r.artifact_uri()
    )
}

fn a_bundled_router_plugin_passes<R: Router>(binary: &str) {
    let dir = tempfile::tempdir().unwrap();
    let Some(r) = R::start(dir.path(), 2, "1.0.0") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} is required in CI",
            R::NAME
        );
        return;
    };
    r.build("1.0.0", true);
    let (code, report) = kit(Path::new(binary), Some(&router_kit(&r)));
    assert_eq!(code, Some(0), "{report:#}\n{}", r.error_log());
}

#[test]
fn the_bundled_nginx_plugin_passes_in_front_of_a_real_nginx() {
    a_bundled_router_plugin_passes::<nginx::Nginx>(env!("CARGO_BIN_EXE_manent-plugin-nginx"));
}

#[test]
fn the_bundled_haproxy_plugin_passes_in_front_of_a_real_haproxy() {
    a_bundled_router_plugin_passes::<haproxy::Haproxy>(env!("CARGO_BIN_EXE_manent-plugin-haproxy"));
}

#[test]
fn a_plugin_built_with_the_python_sdk_passes_every_check() {
    let Some(plugin) = crate::support::python::python_fixture() else {
        return;
    };
    sdk_fixture_passes(&plugin);
}

/// The Go or Python SDK's fixture passes every check but `secret-leak` (its Deploy reads a
/// secret only when asked, and logs only a digest of it) and `call-logs` without log lines;
/// its own Deploy stops when cancelled.
fn sdk_fixture_passes(plugin: &Path) {
    let (code, report) = kit(
        plugin,
        Some("invalid: {abort: true}\nslow: {sleep_ms: 30000}\nparams: {secret: token}\n"),
    );
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["skipped"], 0, "{report:#}");
    let (_, cancel) = outcome(&report, "cancellation");
    assert!(cancel.contains("stopped"), "{cancel}");
    let (_, logs) = outcome(&report, "call-logs");
    assert!(logs.contains("naming the call's deployment"), "{logs}");
}

/// `manent plugin new` into `p` in a fresh directory; the directory.
fn plugin_new(lang: &str) -> tempfile::TempDir {
    plugin_new_in(lang, "p")
}

/// [`plugin_new`] into `sub`.
fn plugin_new_in(lang: &str, sub: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(MANENT)
        .args(["plugin", "new", "hello-kit", "--lang", lang, "--dir"])
        .arg(dir.path().join(sub))
        .arg("--sdk")
        .arg(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert!(
        text(&out.stdout).contains("manent plugin test"),
        "{}",
        text(&out.stdout)
    );
    dir
}

/// A plugin project as written, with its kit file: its Deploy refuses every request ("not
/// implemented"), so the kit fails `deploy` and nothing else; its Deploy stops when cancelled.
fn fails_deploy_as_written(binary: &Path, project: &Path) {
    let file = std::fs::read_to_string(project.join("kit.yml")).unwrap();
    let (code, report) = kit(binary, Some(&file));
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(failed(&report), ["deploy"], "{report:#}");
    let (_, why) = outcome(&report, "deploy");
    assert!(why.contains("deploy is not implemented yet"), "{why}");
    assert_eq!(outcome(&report, "cancellation").0, "pass", "{report:#}");
    let (o, why) = outcome(&report, "invalid-input");
    assert_eq!(o, "pass", "{why}");
    assert!(why.contains("refused at Validate"), "{why}");
}

#[test]
fn plugin_new_python_installs_and_passes_the_kit_as_written() {
    if crate::support::python::python_fixture().is_none() {
        return;
    }
    // A path with a space and a quote: a shebang line would end at the space.
    let sub = "my plugins/it's here";
    let dir = plugin_new_in("python", sub);
    let p = dir.path().join(sub);
    let out = Command::new(p.join("install.sh"))
        .env("MANENT_PYTHON_SDK", crate::support::python::sdk_copy())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let out = Command::new(p.join(".venv/bin/python"))
        .args(["-m", "unittest", "-q"])
        .current_dir(&p)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    fails_deploy_as_written(&p.join("manent-plugin-hello-kit"), &p);
    // Started from a directory another user can write, the plugin takes no module from it.
    let elsewhere = tempfile::tempdir().unwrap();
    let ran = elsewhere.path().join("planted module ran");
    std::fs::write(
        elsewhere.path().join("json.py"),
        format!(
            "open({:?}, 'w').close()\nraise ImportError('planted')\n",
            ran
        ),
    )
    .unwrap();
    let (code, report) = kit_in(
        &p.join("manent-plugin-hello-kit"),
        None,
        Some(elsewhere.path()),
    );
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(failed(&report), ["deploy"], "{report:#}");
    assert!(
        !ran.exists(),
        "a json.py in the working directory was imported"
    );
}

#[test]
fn plugin_new_rust_builds_and_passes_the_kit_as_written() {
    let dir = plugin_new("rust");
    let p = dir.path().join("p");
    // The same dependency versions as manent's own build, in a target directory kept between
    // runs (the first build compiles the library: minutes).
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock"),
        p.join("Cargo.lock"),
    )
    .unwrap();
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-new-rust");
    let out = Command::new(env!("CARGO"))
        .args(["test", "--quiet"])
        .current_dir(&p)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let out = Command::new(env!("CARGO"))
        .args(["build", "--quiet"])
        .current_dir(&p)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    fails_deploy_as_written(&target.join("debug/manent-plugin-hello-kit"), &p);
}

#[test]
fn a_plugin_built_with_the_go_sdk_passes_every_check() {
    let Some(go) = crate::support::go::go_fixture() else {
        return;
    };
    sdk_fixture_passes(&go.plugin);
}

#[test]
fn a_minimal_raw_go_plugin_passes_with_what_it_lacks_skipped() {
    let Some(go) = crate::support::go::go_fixture() else {
        return;
    };
    let (code, report) = kit(&go.raw, None);
    assert_eq!(code, Some(0), "{report:#}");
    let skipped: Vec<String> = outcomes(&report)
        .into_iter()
        .filter(|(_, o, _)| o == "skip")
        .map(|(n, _, _)| n)
        .collect();
    assert_eq!(
        skipped,
        [
            "validate-refuses",
            "invalid-input",
            "call-logs",
            "secret-leak",
            "dry-run",
            "current-release",
            "rollback",
            "errors",
            "logs",
            "secret",
            "cancellation"
        ],
        "{report:#}"
    );
    let (_, crash) = outcome(&report, "crash");
    assert!(crash.contains("between calls"), "{crash}");
    // go-plugin 1.0.1 makes its socket in the temporary directory, whatever it is told: the
    // one of the process the crash check killed is gone too.
    let (_, shake) = outcome(&report, "handshake");
    let socket = shake.split("serves on unix:").nth(1).unwrap();
    assert!(!Path::new(socket).exists(), "{socket} was left behind");
    // Every check says how long it took but the start's phases (the `start` check has theirs).
    let phases = ["handshake", "protocol", "automtls", "health", "configure"];
    for c in report["checks"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        assert_eq!(c["ms"].is_u64(), !phases.contains(&name), "{c}");
    }
    // Without Supports at all (UNIMPLEMENTED, as go-plugin's generated server answers): the
    // engine never needs it, so the kit skips it and says what that means.
    let (code, report) = kit(&go.raw, Some("env: {RAW_NO_SUPPORTS: \"1\"}\n"));
    assert_eq!(code, Some(0), "{report:#}");
    let (o, why) = outcome(&report, "supports");
    assert_eq!(o, "skip", "{why}");
    assert!(why.contains("never chosen"), "{why}");
}

#[test]
fn the_go_sdk_systemd_unit_example_passes_the_kit_on_real_files() {
    let Some(go) = crate::support::go::go_fixture() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let artifact = dir.path().join("app.bin");
    std::fs::write(&artifact, "v1\n").unwrap();
    let kit_file = format!(
        "options: {{dir: \"{}\", restart: [\"true\"]}}\nartifact: {{type: file, name: app, version: \"1.0.0\", uri: \"file://{}\"}}\n",
        dir.path().join("units").display(),
        artifact.display()
    );
    let (code, report) = kit(&go.example, Some(&kit_file));
    assert_eq!(code, Some(0), "{report:#}");
    let (deploy, why) = outcome(&report, "deploy");
    assert_eq!(deploy, "pass");
    assert!(why.contains("on 2 targets"), "{why}");
}

#[test]
fn plugin_new_go_builds_and_passes_the_kit_as_written() {
    if crate::support::go::go_fixture().is_none() {
        return;
    }
    let dir = plugin_new("go");
    let p = dir.path().join("p");
    // The project's own offline build (GOPATH mode, Debian's packages), then its tests.
    let out = Command::new(p.join("build.sh"))
        .env(
            "GOCACHE",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-build-cache"),
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    crate::support::go::build_project(&p, "manent-plugin-hello-kit");
    fails_deploy_as_written(&p.join("manent-plugin-hello-kit"), &p);
}

#[test]
fn the_built_in_plugins_pass_when_served_as_external_ones() {
    for (plugin, extra) in [
        (
            "exec",
            "params: {deploy: \"true\"}\nnot_idempotent: exec runs the operator's commands, as \
             idempotent as they are\n",
        ),
        ("simulate", ""),
    ] {
        let (code, report) = kit(
            Path::new(MANENT),
            Some(&format!("args: [plugin-serve, {plugin}]\n{extra}")),
        );
        assert_eq!(code, Some(0), "{plugin}: {report:#}");
        let (deploy, why) = outcome(&report, "deploy");
        assert_eq!(deploy, "pass", "{plugin}");
        assert!(why.contains("on 2 targets"), "{plugin}: {why}");
    }
}

/// A start that fails is charged to the phase the host says it stopped in (not guessed from
/// its message): the checks before it passed, the rest were not reached.
#[test]
fn a_start_that_fails_is_charged_to_the_phase_it_stopped_in() {
    let nginx = env!("CARGO_BIN_EXE_manent-plugin-nginx");
    for (binary, file, phase) in [
        (FIXTURE, "env: {FIXTURE_START: exit}\n", "handshake"),
        (
            FIXTURE,
            "env: {FIXTURE_START: hang}\nstart_timeout: 1s\n",
            "handshake",
        ),
        (
            FIXTURE,
            "env: {FIXTURE_START: garbage}\nstart_timeout: 2s\n",
            "handshake",
        ),
        (FIXTURE, "env: {FIXTURE_START: version2}\n", "protocol"),
        (
            FIXTURE,
            "env: {FIXTURE_START: silent}\nstart_timeout: 2s\n",
            "automtls",
        ),
        (nginx, "options: {}\n", "configure"),
    ] {
        let (code, report) = kit(Path::new(binary), Some(file));
        assert_eq!(code, Some(1), "{file}: {report:#}");
        assert_eq!(failed(&report), [phase], "{file}: {report:#}");
        let all = outcomes(&report);
        let at = all.iter().position(|(n, _, _)| n == phase).unwrap();
        assert!(
            all[1..at].iter().all(|(_, o, _)| o == "pass"),
            "{file}: {report:#}"
        );
        assert!(
            all[at + 1..].iter().all(|(_, o, _)| o == "skip"),
            "{file}: {report:#}"
        );
    }
}

#[test]
fn a_fifo_given_as_the_kit_file_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("kit.yml");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let mut child = Command::new(MANENT)
        .arg("--config")
        .arg(&fifo)
        .args(["plugin", "test", FIXTURE])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > std::time::Duration::from_secs(10) {
            let _ = child.kill();
            panic!("the kit blocked on a FIFO");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(2));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.contains("not a regular file"), "{err}");
}

/// A "debugger": attaches to `pid` with ptrace (PTRACE_SEIZE: the process runs on), stays a
/// moment, and detaches by exiting.
fn attach_a_debugger(pid: u32) {
    let script = "import ctypes, sys, time\n\
                  libc = ctypes.CDLL(None, use_errno=True)\n\
                  if libc.ptrace(0x4206, int(sys.argv[1]), 0, 0) != 0:\n\
                  \x20   sys.exit('ptrace: errno %d' % ctypes.get_errno())\n\
                  time.sleep(1)\n";
    let out = Command::new("python3")
        .args(["-c", script, &pid.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
}

/// `MANENT_PLUGIN_DEBUG=NAME`: each start of the plugin waits for a debugger before it serves,
/// saying its pid; once one attaches, the run goes on (the kit's crash check starts it twice).
#[test]
fn a_plugin_started_for_a_debugger_waits_until_one_attaches() {
    use std::io::BufRead;
    let mut kit = Command::new(MANENT)
        .args(["plugin", "test", FIXTURE])
        .env("MANENT_PLUGIN_DEBUG", "manent-fixture-plugin")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::io::BufReader::new(kit.stderr.take().unwrap());
    let mut starts = 0;
    for line in stderr.lines() {
        let line = line.unwrap();
        let Some(pid) = line
            .split("(pid ")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .and_then(|p| p.parse::<u32>().ok())
            .filter(|_| line.contains("waits for a debugger"))
        else {
            continue;
        };
        starts += 1;
        // Nothing goes on while it waits.
        std::thread::sleep(std::time::Duration::from_millis(500));
        assert!(kit.try_wait().unwrap().is_none(), "the kit went on");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        assert!(status.contains("TracerPid:\t0"), "{status}");
        attach_a_debugger(pid);
    }
    let out = kit.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(starts, 2, "the first start and the crash check's");
}

/// A template's Deploy written for real — it answers every target, `unchanged` for a key it has
/// done — and the mistakes the kit must catch in it, each as (name, edits to the base, the
/// check that must fail). Each edit is (text in the base, replacement).
type Variant = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static str,
);

/// The Go template's deployer.go, implemented: edits from the file `plugin new` writes.
const GO_BASE: &[(&str, &str)] = &[
    ("\t\"errors\"\n", ""),
    (
        "type deployer struct {\n\tlog hclog.Logger\n}",
        "type deployer struct {\n\tlog  hclog.Logger\n\tdone map[string]bool\n}",
    ),
    (
        "return &deployer{log: log}, nil",
        "return &deployer{log: log, done: map[string]bool{}}, nil",
    ),
    (
        "\treturn nil, plugin.Permanent(errors.New(\"hello-kit: deploy is not implemented yet\"))",
        "\tres := &plugin.Result{}\n\
         \tfor _, t := range req.Targets {\n\
         \t\tst := plugin.StatusDeployed\n\
         \t\tif d.done[req.IdempotencyKey+t.Host] {\n\
         \t\t\tst = plugin.StatusUnchanged\n\
         \t\t}\n\
         \t\td.done[req.IdempotencyKey+t.Host] = true\n\
         \t\tres.Targets = append(res.Targets, plugin.TargetResult{Host: t.Host, Status: st})\n\
         \t}\n\
         \treturn res, nil",
    ),
];

const GO_VARIANTS: &[Variant] = &[
    (
        "logs its secret",
        &[(
            "\treq.Log().Info(\"deploy\", \"targets\", len(req.Targets))",
            "\ttoken, _ := req.Secret(ctx, \"token\")\n\treq.Log().Info(\"deploy\", \"token\", token)",
        )],
        "secret-leak",
    ),
    (
        "ignores cancellation",
        &[(
            "\tselect {\n\tcase <-time.After(time.Duration(p.DelayMs) * time.Millisecond):\n\tcase <-ctx.Done():\n\t\treturn nil, ctx.Err()\n\t}",
            "\ttime.Sleep(time.Duration(p.DelayMs) * time.Millisecond)",
        )],
        "cancellation",
    ),
    (
        "refuses invalid input as retryable",
        &[(
            "\tif err := req.DecodeParams(&p); err != nil {\n\t\treturn plugin.Permanent(err)\n\t}\n\treq.Log().Debug",
            "\tif err := req.DecodeParams(&p); err != nil {\n\t\treturn err\n\t}\n\treq.Log().Debug",
        )],
        "invalid-input",
    ),
    (
        "redoes its work",
        &[(
            "\t\tif d.done[req.IdempotencyKey+t.Host] {\n\t\t\tst = plugin.StatusUnchanged\n\t\t}\n",
            "",
        )],
        "idempotency",
    ),
];

/// The Python template's plugin.py, implemented.
const PYTHON_BASE: &[(&str, &str)] = &[
    (
        "        self.log = log\n",
        "        self.log = log\n        self.done = set()\n",
    ),
    (
        "        raise Permanent(\"hello-kit: deploy is not implemented yet\")",
        "        from manent_plugin import Result, TargetResult\n\
         \x20       results = []\n\
         \x20       for t in req.targets:\n\
         \x20           key = (req.idempotency_key, t.host)\n\
         \x20           status = TargetResult.UNCHANGED if key in self.done else TargetResult.DEPLOYED\n\
         \x20           self.done.add(key)\n\
         \x20           results.append(TargetResult(t.host, status))\n\
         \x20       return Result(targets=results, release=req.artifact.version)",
    ),
];

const PYTHON_VARIANTS: &[Variant] = &[
    (
        "logs its secret",
        &[(
            "        self.log.info(\"deploy to %d targets\", len(req.targets))",
            "        self.log.info(\"deploy with %s\", await req.secret(\"token\"))",
        )],
        "secret-leak",
    ),
    (
        "swallows its cancellation",
        &[(
            "        await asyncio.sleep(req.params.get(\"delay_ms\", 0) / 1000)",
            "        try:\n            await asyncio.sleep(req.params.get(\"delay_ms\", 0) / 1000)\n        except asyncio.CancelledError:\n            await asyncio.sleep(30)",
        )],
        "cancellation",
    ),
    (
        "blocks its event loop",
        &[(
            "        await asyncio.sleep(req.params.get(\"delay_ms\", 0) / 1000)",
            "        import time\n        time.sleep(req.params.get(\"delay_ms\", 0) / 1000)",
        )],
        "cancellation",
    ),
    (
        "refuses invalid input as retryable",
        &[(
            "            raise Permanent(\"params.delay_ms: a number of milliseconds\")",
            "            raise RuntimeError(\"params.delay_ms: a number of milliseconds\")",
        )],
        "invalid-input",
    ),
    (
        "redoes its work",
        &[(
            "TargetResult.UNCHANGED if key in self.done else TargetResult.DEPLOYED",
            "TargetResult.DEPLOYED",
        )],
        "idempotency",
    ),
];

/// `text` with each edit made; an edit whose text is not there fails the test (the template
/// changed under it).
fn edited(text: &str, edits: &[(&str, &str)]) -> String {
    edits.iter().fold(text.to_owned(), |t, (from, to)| {
        assert!(
            t.contains(from),
            "the template no longer has {from:?}:\n{t}"
        );
        t.replacen(from, to, 1)
    })
}

/// The base passes every check it can judge; each variant fails its check and no other.
fn variants_fail_their_checks(
    project: &Path,
    file: &str,
    build: &dyn Fn(),
    binary: &Path,
    base: &[(&str, &str)],
    variants: &[Variant],
) {
    let written = std::fs::read_to_string(project.join(file)).unwrap();
    let implemented = edited(&written, base);
    let kit_file = std::fs::read_to_string(project.join("kit.yml")).unwrap();
    std::fs::write(project.join(file), &implemented).unwrap();
    build();
    let (code, report) = kit(binary, Some(&kit_file));
    assert_eq!(code, Some(0), "implemented: {report:#}");
    for check in [
        "deploy",
        "call-logs",
        "idempotency",
        "cancellation",
        "invalid-input",
    ] {
        assert_eq!(outcome(&report, check).0, "pass", "{check}: {report:#}");
    }
    for (name, edits, check) in variants {
        std::fs::write(project.join(file), edited(&implemented, edits)).unwrap();
        build();
        let (code, report) = kit(binary, Some(&kit_file));
        assert_eq!(code, Some(1), "{name}: {report:#}");
        assert_eq!(failed(&report), [*check], "{name}: {report:#}");
    }
}

#[test]
fn go_template_mistakes_each_fail_their_check() {
    if crate::support::go::go_fixture().is_none() {
        return;
    }
    let dir = plugin_new("go");
    let p = dir.path().join("p");
    let build = || {
        let out = Command::new(p.join("build.sh"))
            .env(
                "GOCACHE",
                Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-build-cache"),
            )
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", said(&out));
    };
    variants_fail_their_checks(
        &p,
        "deployer.go",
        &build,
        &p.join("manent-plugin-hello-kit"),
        GO_BASE,
        GO_VARIANTS,
    );
}

#[test]
fn python_template_mistakes_each_fail_their_check() {
    if crate::support::python::python_fixture().is_none() {
        return;
    }
    let dir = plugin_new("python");
    let p = dir.path().join("p");
    let out = Command::new(p.join("install.sh"))
        .env("MANENT_PYTHON_SDK", crate::support::python::sdk_copy())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    variants_fail_their_checks(
        &p,
        "plugin.py",
        &|| {},
        &p.join("manent-plugin-hello-kit"),
        PYTHON_BASE,
        PYTHON_VARIANTS,
    );
}
