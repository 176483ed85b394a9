//! `manent schema config|app` against every fixture, with a real validator (Python's
//! `jsonschema`, the reference implementation, for the draft the schema names): every file
//! manent loads
//! passes, and every file manent refuses fails the schema too — or is listed here with why a
//! schema cannot say it (the rule needs another file, or order, or the host).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::fleet::{said, text};

/// Refusals a JSON Schema cannot express, by fixture: what the loader checks beyond one
/// file's shape.
const BEYOND_A_SCHEMA: &[(&str, &str)] = &[
    (
        "app-alias-bomb",
        "YAML aliases expanded past a limit: the reader's, before any schema",
    ),
    (
        "app-canary-weight-down",
        "weights must rise from step to step: order across a list",
    ),
    (
        "app-dangling-plugin",
        "the plugin must be declared in manent.yml: another file",
    ),
    (
        "app-dangling-secret",
        "the secret must be declared in manent.yml: another file",
    ),
    (
        "app-deploy-names-no-plugin",
        "a deploy names a plugin or plugins: checked by the loader's resolution",
    ),
    (
        "app-duplicate-target",
        "target names unique: uniqueness of a field across a list",
    ),
    (
        "app-exec-secret-not-listed",
        "a ${secret:…} in a command must be listed: text inside a string",
    ),
    (
        "app-exec-undeclared",
        "exec must be declared in manent.yml: another file",
    ),
    (
        "app-exec-unknown-param",
        "a plugin's parameters are the plugin's own",
    ),
    (
        "app-exec-unknown-variable",
        "a {{variable}} inside a command: text inside a string",
    ),
    (
        "app-exec-without-deploy-command",
        "a plugin's parameters are the plugin's own",
    ),
    (
        "app-heredoc-line-break-label",
        "a label must not break a heredoc: text inside a string",
    ),
    (
        "app-hook-continue-before-deploy",
        "on_failure continue only after the deploy: a rule across two fields' values",
    ),
    (
        "app-hook-duplicate-name",
        "hook names unique: uniqueness of a field across a list",
    ),
    (
        "app-hook-two-kinds",
        "one of command, http or wait: a rule across fields",
    ),
    (
        "app-latency-shape",
        "a plugin's parameters are the plugin's own",
    ),
    (
        "app-deploy-plugin-and-plugins",
        "plugin or plugins, not both: checked as the descriptor resolves",
    ),
    (
        "app-moniker-collision",
        "monikers unique across every application: other files",
    ),
    (
        "app-no-targets",
        "an environment with no targets: checked once defaults are merged",
    ),
    (
        "app-only-comments",
        "an empty file: no document to validate",
    ),
    (
        "app-per-target-hook-on-canary",
        "per-target hooks with a canary: a rule across two fields' values",
    ),
    (
        "app-quoted-environment-name",
        "environment names' form: a key's text",
    ),
    (
        "app-space-in-environment",
        "environment names' form: a key's text",
    ),
    (
        "manent-builtin-alias-typo",
        "`builtin:` must name a built-in: the host's plugins",
    ),
    (
        "manent-database-password",
        "a password in a database URL: text inside a string",
    ),
    (
        "manent-database-scheme",
        "a database URL's scheme: text inside a string",
    ),
    (
        "manent-database-secret",
        "a secret in the URL must be declared: another key's names",
    ),
    (
        "manent-external-uses-builtin-name",
        "an external plugin may not take a built-in's name: the host's plugins",
    ),
    (
        "manent-duplicate-key",
        "a key written twice: the YAML reader's, gone before any schema",
    ),
    (
        "manent-nan-option",
        "NaN in a plugin's options (which are the plugin's own): the reader's",
    ),
    (
        "manent-lease-too-short",
        "a duration's minimum: a schema reads durations as text",
    ),
    (
        "manent-metrics-bad-listen",
        "an address that must parse: text inside a string",
    ),
    (
        "manent-missing-apps-dir",
        "the apps directory must exist: the host",
    ),
    (
        "manent-notify-bad-url",
        "a URL that must parse: text inside a string",
    ),
    (
        "manent-notify-undeclared-secret",
        "a secret in a header must be declared: another key's names",
    ),
    (
        "manent-notify-unknown-event",
        "event names: checked against the engine's list when delivering",
    ),
    (
        "manent-plugin-neither-builtin-nor-external",
        "an unknown name needs `builtin:` or `external:`: the host's plugins",
    ),
    (
        "manent-postgres-without-inputs-key",
        "a PostgreSQL URL needs engine.inputs_key: a rule across keys' values",
    ),
    (
        "manent-shared-group-unknown",
        "the group must exist: the host",
    ),
    (
        "manent-short-secret",
        "a secret's minimum length: read from its source",
    ),
    (
        "manent-start-timeout-zero",
        "a duration's minimum: a schema reads durations as text",
    ),
    ("manent-logfile-keep-zero", "keep must be at least 1"),
];

const VALIDATE: &str = r#"
import json, sys, yaml, jsonschema
schemas = {k: json.load(open(v)) for k, v in (a.split("=", 1) for a in sys.argv[1:3])}
for line in sys.stdin:
    kind, path = line.rstrip("\n").split("\t")
    try:
        doc = yaml.safe_load(open(path, encoding="utf-8"))
    except Exception as e:
        print(f"{path}\tinvalid\tnot YAML: {str(e).splitlines()[0]}")
        continue
    if doc is None:
        print(f"{path}\tempty\t")
        continue
    schema = schemas[kind]
    errors = sorted(jsonschema.validators.validator_for(schema)(schema).iter_errors(doc), key=str)
    if errors:
        e = errors[0]
        print(f"{path}\tinvalid\t{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}")
    else:
        print(f"{path}\tok\t")
"#;

fn python_has_jsonschema() -> bool {
    Command::new("python3")
        .args(["-c", "import jsonschema, yaml"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn yml_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "yml" || e == "yaml"));
    v.sort();
    v
}

#[test]
fn every_fixture_passes_or_fails_the_schema_as_the_loader_does() {
    if !python_has_jsonschema() {
        assert!(
            std::env::var_os("CI").is_none(),
            "python3-jsonschema and python3-yaml are required in CI"
        );
        eprintln!("schema: skipped: python3 with jsonschema and yaml is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut schemas = Vec::new();
    for of in ["config", "app"] {
        let out = Command::new(env!("CARGO_BIN_EXE_manent"))
            .args(["schema", of])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", said(&out));
        // Draft 7: what yaml-language-server and VS Code read in full.
        let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
        let file = dir.path().join(format!("{of}.json"));
        std::fs::write(&file, &out.stdout).unwrap();
        schemas.push(format!("{of}={}", file.display()));
    }
    // (kind, file, whether manent loads it)
    let mut files: Vec<(&str, PathBuf, bool)> = Vec::new();
    for base in [root().join("fixtures/local"), root().join("packaging/etc")] {
        files.push(("config", base.join("manent.yml"), true));
        for app in yml_in(&base.join("apps")) {
            files.push(("app", app, true));
        }
    }
    files.push(("config", root().join("manent.yml"), true));
    let invalid = root().join("fixtures/invalid");
    let mut cases: Vec<String> = std::fs::read_dir(&invalid)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    cases.sort();
    for case in &cases {
        let at = invalid.join(case);
        let subject_is_app = case.starts_with("app-");
        // The file a case is about is refused; the other kind is a good file.
        files.push(("config", at.join("manent.yml"), subject_is_app));
        for app in yml_in(&at.join("apps")) {
            files.push(("app", app, !subject_is_app));
        }
    }
    let stdin: String = files
        .iter()
        .filter(|(_, p, _)| p.exists())
        .map(|(k, p, _)| format!("{k}\t{}\n", p.display()))
        .collect();
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(VALIDATE)
        .args(&schemas)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", said(&out));
    let verdicts: BTreeMap<PathBuf, (String, String)> = text(&out.stdout)
        .lines()
        .map(|l| {
            let mut f = l.splitn(3, '\t');
            let path = PathBuf::from(f.next().unwrap());
            let v = f.next().unwrap_or("").to_owned();
            (path, (v, f.next().unwrap_or("").to_owned()))
        })
        .collect();
    let beyond: BTreeMap<&str, &str> = BEYOND_A_SCHEMA.iter().copied().collect();
    let mut wrong = Vec::new();
    let mut used = std::collections::BTreeSet::new();
    for (_, path, loads) in &files {
        let Some((verdict, why)) = verdicts.get(path) else {
            continue;
        };
        let case = path
            .strip_prefix(&invalid)
            .ok()
            .and_then(|p| p.components().next())
            .map(|c| c.as_os_str().to_string_lossy().into_owned());
        let passes = verdict != "invalid";
        match (loads, passes) {
            (true, false) => wrong.push(format!(
                "{}: manent loads it, the schema says {why}",
                path.display()
            )),
            (false, true) => {
                let case = case.unwrap_or_default();
                if beyond.contains_key(case.as_str()) {
                    used.insert(case);
                } else {
                    wrong.push(format!(
                        "{}: manent refuses it, the schema passes it",
                        path.display()
                    ));
                }
            }
            _ => {}
        }
    }
    for case in beyond.keys() {
        if !used.contains(*case) {
            wrong.push(format!("{case}: listed as beyond a schema, but the schema refuses it (or it is gone): take it off the list"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
