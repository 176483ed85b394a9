//! What is particular to Python plugins (the suite every SDK's fixture passes is in
//! sdk_plugins.rs): the SDK's own unit tests, run on the venv the fixture is installed in, and
//! its example script deployer through the conformance kit on a real command.

use crate::support::fleet::text;
use crate::support::python;

#[test]
fn the_python_sdks_own_unit_tests_pass() {
    if python::python_fixture().is_none() {
        return;
    }
    let sdk = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk/python");
    let out = std::process::Command::new(python::venv_python())
        .args(["-B", "-m", "unittest", "discover", "-s", "tests", "-t", "."])
        .current_dir(&sdk)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// A deploy through the Python SDK's example: the lines its command prints, which the SDK's
/// logger sends without a deployment, are the deployment's in `manent logs`.
#[test]
fn a_python_sdk_plugins_lines_are_in_its_deployments_log() {
    if python::python_fixture().is_none() {
        return;
    }
    let fx = crate::support::fleet::Fixture::new("", &[]);
    let plugin = fx.path().join("script_deployer");
    python::launcher(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("sdk/python/examples/script_deployer.py"),
        &plugin,
    );
    std::fs::write(
        fx.config(),
        format!(
            "plugins:\n  script:\n    external:\n      command: {}\n    state: {}\n",
            plugin.display(),
            fx.path().join("state.json").display()
        ),
    )
    .unwrap();
    std::fs::write(
        fx.path().join("apps/a.yml"),
        "application: a\nartifact: {version: \"1\"}\ndeploy:\n  plugin: script\n  params: \
         {command: \"echo hello-from-python-$MANENT_TARGET\"}\nenvironments:\n  prod:\n    \
         targets: [{name: t1}]\n",
    )
    .unwrap();
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::support::fleet::said(&out)
    );
    let id = fx.deployments().pop().unwrap();
    let logs = text(&fx.run(&["logs", &id]).stdout);
    assert!(logs.contains("hello-from-python-t1"), "{logs}");
}

#[test]
fn the_example_script_deployer_passes_the_kit_on_a_real_command() {
    if python::python_fixture().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("script_deployer");
    python::launcher(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("sdk/python/examples/script_deployer.py"),
        &plugin,
    );
    let kit = format!(
        "options: {{state: \"{}\"}}\nparams: {{command: \"echo $VERSION > {}/$MANENT_TARGET\"}}\n",
        dir.path().join("state.json").display(),
        dir.path().display()
    );
    let (code, report) = crate::plugin_kit::kit(&plugin, Some(&kit));
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(crate::plugin_kit::outcome(&report, "deploy").0, "pass");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("conformance-1"))
            .unwrap()
            .trim(),
        "1.0.0"
    );
}
