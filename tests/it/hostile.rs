//! manent against hostile and clumsy input, with the real binary: values built to break out of
//! a shell's quoting, a plugin that completes its handshake and never speaks, engines killed
//! mid-command, corrupted databases, a plugin flooding stderr, multi-line and passed-through
//! secrets, and configuration files that are FIFOs, devices or absurdly nested. Every run is
//! bounded: a hang fails the test instead of stalling it.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::fleet;
use crate::support::sshd;
use fleet::{Fixture, LEDGER_MANENT, me, said, text, wait_until};

mod links;
mod trust;

const FIXTURE_PLUGIN: &str = env!("CARGO_BIN_EXE_manent-fixture-plugin");

/// Longer than anything here takes when it works; reached only by a hang.
const HANG: Duration = Duration::from_secs(60);

/// Runs `cmd` to its end, failing the test if it is still running after `limit`.
fn bounded(mut cmd: Command, limit: Duration, what: &str) -> Output {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    wait_bounded(child, limit, what)
}

/// Waits for `child`, reading its output meanwhile; kills it and fails after `limit`.
fn wait_bounded(mut child: Child, limit: Duration, what: &str) -> Output {
    let pipe = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = pipe(child.stdout.take().map(|s| Box::new(s) as _));
    let err = pipe(child.stderr.take().map(|s| Box::new(s) as _));
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = err.join().unwrap();
            panic!("{what}: still running after {limit:?}\n{}", text(&stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Sends `sig` (`TERM`, `INT`) to `child`.
fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([format!("-{sig}"), child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig} {}", child.id());
}

/// The live (not zombie) processes whose process group is `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    group_members_since(pgid, None)
}

/// Clock ticks since boot now (the unit of a process's start time in /proc).
fn ticks_now() -> u64 {
    let up: f64 = std::fs::read_to_string("/proc/uptime")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    (up * 100.0) as u64
}

/// The live members of group `pgid` started no later than `before` (clock ticks since boot):
/// on a busy machine pids wrap (pid_max is often 32768), and a later process may lead a new
/// group with an old number.
fn group_members_since(pgid: u32, before: Option<u64>) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
        let Some(rest) = stat.rsplit_once(") ").map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        // Field 22 of stat (starttime) is f[19] here.
        let old_enough = before.is_none_or(|b| {
            f.get(19)
                .and_then(|t| t.parse::<u64>().ok())
                .is_none_or(|t| t <= b)
        });
        if f.first() != Some(&"Z")
            && f.get(2).and_then(|g| g.parse().ok()) == Some(pgid)
            && old_enough
        {
            found.push(pid);
        }
    }
    found
}

/// The live processes whose environment holds `KEY=value`.
fn processes_with_env(key: &str, value: &str) -> Vec<u32> {
    let needle = format!("{key}={value}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(") ").map(|(_, r)| r.starts_with('Z')))
            .unwrap_or(true);
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        if !zombie && env.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

// ---------------------------------------------------------------------------------------------
// No value is ever run by a shell.

/// What tries to break out of each quoting context; each would create `$FIXTURE/pwned` if the
/// shell evaluated it.
const PAYLOADS: &[&str] = &[
    r#"$(touch "$FIXTURE/pwned")"#,
    r#"`touch "$FIXTURE/pwned"`"#,
    r#"'; touch "$FIXTURE/pwned"; echo '"#,
    r#""; touch "$FIXTURE/pwned"; echo ""#,
    r#"x" $(touch "$FIXTURE/pwned") "y"#,
    "a\nEOF\ntouch \"$FIXTURE/pwned\"\necho ",
    r#"\"; touch "$FIXTURE/pwned" #"#,
    "${FIXTURE}/../../etc/passwd",
    "ünïcödé ✓ \t tab",
];

/// A command that writes label `p` to a file from every quoting context: bare, double, single,
/// an unquoted here-document, and label `q` from a quoted one.
const QUOTING_DEPLOY: &str = r#"set -eu
      d="$FIXTURE/out/$MANENT_TARGET"
      mkdir -p "$d"
      printf '%s' {{label.p}} > "$d/bare"
      printf '%s' "{{label.p}}" > "$d/double"
      printf '%s' '{{label.p}}' > "$d/single"
      printf '%s' "$(printf '%s' {{ label.p }})" > "$d/substituted"
      cat > "$d/heredoc" <<EOF
      {{label.p}}
      EOF
      cat > "$d/quoted" <<'EOF'
      {{label.q}}
      EOF"#;

fn quoting_app(targets: &[(String, String, String)]) -> String {
    let t: String = targets
        .iter()
        .map(|(name, p, q)| {
            format!(
                "      - name: {name}\n        labels: {{p: {}, q: {}}}\n",
                serde_json::to_string(p).unwrap(),
                serde_json::to_string(q).unwrap()
            )
        })
        .collect();
    format!(
        "application: web\nartifact: {{version: \"1.0.0\"}}\ndeploy:\n  plugin: exec\n  params:\n    \
         deploy: |\n      {QUOTING_DEPLOY}\n    dry_run: echo \"would switch {{{{target}}}} to {{{{version}}}} ({{{{label.p}}}})\"\n\
         max_retries: 0\nparallelism: 4\nenvironments:\n  prod:\n    targets:\n{t}"
    )
}

#[test]
fn values_stay_text_in_every_quoting_context() {
    let targets: Vec<(String, String, String)> = PAYLOADS
        .iter()
        .enumerate()
        .map(|(i, p)| {
            // A quoted here-document takes the value itself, so it may not hold a line break.
            let q = if p.contains('\n') { "plain" } else { p };
            (format!("t{i}"), (*p).to_owned(), q.to_owned())
        })
        .collect();
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &quoting_app(&targets))]);
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert!(
        text(&out.stdout).contains("would switch t0 to 1.0.0 ($(touch"),
        "{}",
        text(&out.stdout)
    );
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        !fx.path().join("pwned").exists(),
        "a value was run by the shell"
    );
    for (name, p, q) in &targets {
        let dir = fx.path().join("out").join(name);
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        for f in ["bare", "double", "single", "substituted"] {
            assert_eq!(&read(f), p, "{name}: {f}");
        }
        assert_eq!(read("heredoc"), format!("{p}\n"), "{name}: heredoc");
        assert_eq!(read("quoted"), format!("{q}\n"), "{name}: quoted heredoc");
    }
}

#[test]
fn a_value_that_would_end_a_quoted_here_document_is_refused() {
    for (q, why) in [("EOF", "its delimiter"), ("a\nb", "holds a line break")] {
        let targets = [("t1".to_owned(), "x".to_owned(), q.to_owned())];
        let app = quoting_app(&targets).replace(
            "{{label.q}}\n",
            "{{label.q}}\n      touch \"$FIXTURE/pwned\"\n",
        );
        let fx = Fixture::new(LEDGER_MANENT, &[("web", &app)]);
        let out = fx.run(&["deploy", "web", "prod", "--yes"]);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{q:?}: {all}");
        assert!(all.contains(why), "{q:?}: expected {why:?} in {all}");
        assert!(!fx.path().join("pwned").exists(), "{q:?}");
    }
}

#[test]
fn versions_that_are_not_names_are_refused_before_anything_runs() {
    let app = quoting_app(&[("t1".into(), "x".into(), "y".into())]);
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &app)]);
    let payloads = [
        (
            "$(touch /tmp/manent-pwned)",
            "must start with a letter or a digit",
        ),
        ("1.0$(touch /tmp/manent-pwned)", "'$' is not allowed"),
        ("`id`", "must start with a letter or a digit"),
        ("../../../../tmp/x", "must start with a letter or a digit"),
        ("1.0/../../x", "'/' is not allowed"),
        ("1.0\nrm", "'\\n' is not allowed"),
        ("1.0\u{1b}[31m", "'\\u{1b}' is not allowed"),
        ("", "it is empty"),
    ];
    for (v, why) in payloads {
        for dry in [true, false] {
            let mut args = vec!["deploy", "web", "prod", "--yes", "--version", v];
            if dry {
                args.push("--dry-run");
            }
            let out = fx.run(&args);
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{v:?}: {err}");
            assert!(err.contains(why), "{v:?}: expected {why:?} in {err}");
            assert!(err.contains("letters, digits and . _ + ~ -"), "{err}");
        }
    }
    let long = "1".repeat(129);
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", &long]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("longer than 128"));
    assert!(fx.deployments().is_empty(), "a deployment was recorded");
    assert!(!fx.path().join("out").exists(), "a command ran");
    // A descriptor's version is held to the same rule, at its line and column.
    let app = quoting_app(&[("t1".into(), "x".into(), "y".into())])
        .replace("version: \"1.0.0\"", "version: \"1.0 && id\"");
    std::fs::write(fx.path().join("apps/web.yml"), app).unwrap();
    let out = fx.run(&["validate"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("web.yml:2:") && text(&out.stderr).contains("' ' is not"),
        "{}",
        said(&out)
    );
}

// ---------------------------------------------------------------------------------------------
// Nothing hangs past its timeout.

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

const PLAIN_APP: &str = "application: other\nartifact: {version: \"1\"}\ndeploy:\n  plugin: exec\n  params:\n    \
     deploy: echo ok\nenvironments:\n  prod:\n    targets: [{name: o1}]\n";

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

// ---------------------------------------------------------------------------------------------
// Nothing a dead engine started runs beside its retry.

/// Two targets whose command records `start|done TARGET ATTEMPT PGID`, sleeping `DELAY` between.
const SLOW_APP: &str = r#"application: web
artifact: {version: "1.0.0"}
deploy:
  plugin: exec
  params:
    deploy: |
      echo "start $MANENT_TARGET $MANENT_ATTEMPT $$" >> "$FIXTURE/ledger"
      sleep "${DELAY:-0}"
      echo "done $MANENT_TARGET $MANENT_ATTEMPT $$" >> "$FIXTURE/ledger"
parallelism: 2
max_retries: 2
backoff: {base: 10ms, max: 50ms}
environments:
  prod:
    targets: [{name: web-1}, {name: web-2}]
"#;

/// `(event, target, pgid)` per ledger line.
fn slow_ledger(fx: &Fixture) -> Vec<(String, String, u32)> {
    std::fs::read_to_string(fx.path().join("ledger"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((
                f.first()?.to_string(),
                f.get(1)?.to_string(),
                f.get(3)?.parse().ok()?,
            ))
        })
        .collect()
}

fn started(fx: &Fixture) -> Vec<u32> {
    slow_ledger(fx)
        .into_iter()
        .filter(|e| e.0 == "start")
        .map(|e| e.2)
        .collect()
}

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

// ---------------------------------------------------------------------------------------------
// A database that cannot be read is an error, never "nothing here".

fn deployed_fixture() -> Fixture {
    let fx = Fixture::new(LEDGER_MANENT, &[("web", SLOW_APP)]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let db = fx.db();
    db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    drop(db);
    for ext in ["db-wal", "db-shm"] {
        let _ = std::fs::remove_file(fx.db_path().with_extension(ext));
    }
    fx
}

fn read_verbs_fail_naming(fx: &Fixture, case: &str) {
    let id = "dep-00000000";
    let verbs: [&[&str]; 7] = [
        &["status"],
        &["status", "--json"],
        &["status", id],
        &["history", "web", "prod"],
        &["history", "web", "prod", "--json"],
        &["logs", id],
        &["plan", "web", "prod"],
    ];
    let db = fx.db_path().display().to_string();
    for verb in verbs {
        if case == "zeroed page" && verb[0] == "plan" {
            // plan reads only the releases, which that page does not hold.
            continue;
        }
        let out = bounded(fx.command(verb), HANG, case);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(
            out.status.code(),
            Some(6),
            "{case}: {verb:?}\n{stdout}{stderr}"
        );
        assert!(
            stderr.contains(&db),
            "{case}: {verb:?} names the file: {stderr}"
        );
        assert!(
            !stdout.contains("no deployments") && stdout.trim() != "[]",
            "{case}: {verb:?} said nothing is here: {stdout}"
        );
    }
}

#[test]
fn read_verbs_on_a_damaged_database_exit_6_naming_it() {
    let fx = deployed_fixture();
    let good = std::fs::read(fx.db_path()).unwrap();
    // Garbage where the database was.
    let garbage: Vec<u8> = (0..65_536u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    std::fs::write(fx.db_path(), &garbage).unwrap();
    read_verbs_fail_naming(&fx, "garbage");
    // Cut short.
    std::fs::write(fx.db_path(), &good[..good.len() / 2]).unwrap();
    read_verbs_fail_naming(&fx, "truncated");
    // The page that holds the deployments zeroed.
    std::fs::write(fx.db_path(), &good).unwrap();
    let root: i64 = fx
        .db()
        .query_row(
            "SELECT rootpage FROM sqlite_master WHERE name = 'workflow_status'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let page_size = u64::from(u16::from_be_bytes([good[16], good[17]]));
    let mut zeroed = good.clone();
    let at = usize::try_from((u64::try_from(root).unwrap() - 1) * page_size).unwrap();
    zeroed[at..at + usize::try_from(page_size).unwrap()].fill(0);
    std::fs::write(fx.db_path(), &zeroed).unwrap();
    read_verbs_fail_naming(&fx, "zeroed page");
    // Not a file at all.
    std::fs::remove_file(fx.db_path()).unwrap();
    std::fs::create_dir(fx.db_path()).unwrap();
    read_verbs_fail_naming(&fx, "a directory");
}

// ---------------------------------------------------------------------------------------------
// What a plugin writes is stored within bounds.

#[test]
fn a_plugin_flooding_stderr_before_its_handshake_stores_a_bounded_tail() {
    let manent = format!(
        "plugins:\n  fix:\n    external:\n      command: {FIXTURE_PLUGIN}\n      start_timeout: 3s\n      \
         env: {{FIXTURE_START: stderr_flood, FIXTURE_STDERR_MB: \"30\"}}\n"
    );
    let app = "application: a\nartifact: {version: \"1\"}\ndeploy:\n  plugin: fix\nmax_retries: 0\n\
               environments:\n  prod:\n    targets: [{name: t1}]\n";
    let fx = Fixture::new(&manent, &[("a", app)]);
    let out = bounded(
        fx.command(&["deploy", "a", "prod", "--yes"]),
        HANG,
        "deploy",
    );
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let rows: i64 = fx
        .db()
        .query_row("SELECT count(*) FROM logs", [], |r| r.get(0))
        .unwrap();
    assert!(rows <= 1_100, "{rows} log rows kept from one start");
    let size: u64 = ["db", "db-wal"]
        .iter()
        .filter_map(|e| std::fs::metadata(fx.db_path().with_extension(e)).ok())
        .map(|m| m.len())
        .sum();
    assert!(
        size < 8 << 20,
        "30 MB of stderr grew the database to {size} bytes"
    );
}

#[test]
fn a_command_printing_a_megabyte_line_stores_it_cut_and_says_so() {
    let app = "application: a\nartifact: {version: \"1\"}\ndeploy:\n  plugin: exec\n  params:\n    \
               deploy: head -c 1000000 /dev/zero | tr '\\0' x; echo; echo after\n\
               environments:\n  prod:\n    targets: [{name: t1}]\n";
    let fx = Fixture::new(LEDGER_MANENT, &[("a", app)]);
    let out = fx.run(&["deploy", "a", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let db = fx.db();
    let (longest, cut): (i64, String) = db
        .query_row(
            "SELECT length(message), message FROM logs ORDER BY length(message) DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(
        longest < 17_000,
        "a line of {longest} characters was stored"
    );
    assert!(
        cut.ends_with(&format!("[cut: {} more bytes]", 1_000_000 - 16 * 1024)),
        "{}",
        &cut[cut.len() - 60..]
    );
    let after: i64 = db
        .query_row(
            "SELECT count(*) FROM logs WHERE message = 'after'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(after, 1, "the line after the long one is its own");
}

// ---------------------------------------------------------------------------------------------
// Secrets, however they arrive, never show.

#[test]
fn multi_line_and_passed_through_secrets_never_reach_output_logs_or_the_database() {
    let fx = Fixture::new("", &[]);
    let key = fx.path().join("key.pem");
    let lines = [
        "-----BEGIN FAKE KEY-----",
        "MIIEvQIBADANBgkqhkiG9w0BAQ",
        "s3cr3tLineNumberTwoXYZ",
        "-----END FAKE KEY-----",
    ];
    std::fs::write(&key, lines.join("\n") + "\n").unwrap();
    let manent = format!(
        "plugins:\n  exec:\n    pass_env: [FIXTURE, API_TOKEN]\nsecrets:\n  key: file:{}\n  api: env:API_TOKEN\n",
        key.display()
    );
    std::fs::write(fx.config(), manent).unwrap();
    let app = r#"application: s
artifact: {version: "1"}
deploy:
  plugin: exec
  secrets: [key]
  params:
    secrets: [key]
    deploy: |
      echo "key: $MANENT_SECRET_KEY"
      printf '%s\n' "$MANENT_SECRET_KEY" >&2
      echo "token via pass_env: $API_TOKEN"
      echo "token inside: xx${API_TOKEN}yy"
      exit "${FAIL:-0}"
environments:
  prod:
    targets: [{name: t1}]
"#;
    std::fs::write(fx.path().join("apps/s.yml"), app).unwrap();
    let env = [("API_TOKEN", "tok-9f8e7d6c5b4a")];
    let out = fx.run_with(&["deploy", "s", "prod", "--yes", "-v"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let id = fx.deployments().pop().unwrap();
    let logs = fx.run_with(&["logs", &id], &env);
    let status = fx.run_with(&["status", &id, "--json"], &env);
    let history = fx.run_with(&["history", "s", "prod", "--json"], &env);
    let mut seen = String::new();
    for o in [&out, &logs, &status, &history] {
        seen.push_str(&text(&o.stdout));
        seen.push_str(&text(&o.stderr));
    }
    assert!(seen.contains("[redacted]"), "{seen}");
    let mut stored = std::fs::read(fx.db_path()).unwrap();
    stored.extend(std::fs::read(fx.db_path().with_extension("db-wal")).unwrap_or_default());
    let secrets = [
        "MIIEvQIBADANBgkqhkiG9w0BAQ",
        "s3cr3tLineNumberTwoXYZ",
        "tok-9f8e7d6c5b4a",
    ];
    for s in secrets {
        assert!(!seen.contains(s), "{s} shown:\n{seen}");
        assert!(
            !stored.windows(s.len()).any(|w| w == s.as_bytes()),
            "{s} reached the database"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration and secret files that are not files.

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

fn validate_refuses(fx: &Fixture, expected: &[&str]) {
    let out = bounded(fx.command(&["validate"]), HANG, "validate");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for e in expected {
        assert!(err.contains(e), "expected {e:?} in {err}");
    }
}

#[test]
fn fifos_devices_and_absurd_nesting_are_refused_without_waiting() {
    let fx = Fixture::new("", &[("ok", PLAIN_APP)]);
    // manent.yml as a FIFO nobody writes to.
    std::fs::remove_file(fx.config()).unwrap();
    mkfifo(&fx.config());
    validate_refuses(&fx, &["manent.yml", "not a regular file"]);
    // manent.yml as a symlink to a device that never ends.
    std::fs::remove_file(fx.config()).unwrap();
    std::os::unix::fs::symlink("/dev/zero", fx.config()).unwrap();
    validate_refuses(&fx, &["manent.yml", "not a regular file"]);
    std::fs::remove_file(fx.config()).unwrap();
    std::fs::write(fx.config(), "").unwrap();
    // A descriptor as a FIFO.
    mkfifo(&fx.path().join("apps/fifo.yml"));
    validate_refuses(&fx, &["fifo.yml", "not a regular file"]);
    std::fs::remove_file(fx.path().join("apps/fifo.yml")).unwrap();
    // 100,000 nested brackets, refused at the first one too many.
    let deep = format!("application: x\nartifact: {}", "[".repeat(100_000));
    std::fs::write(fx.path().join("apps/deep.yml"), deep).unwrap();
    validate_refuses(&fx, &["deep.yml:2:", "nested more than 64 levels deep"]);
    std::fs::remove_file(fx.path().join("apps/deep.yml")).unwrap();
    // A symlink loop is a loop, not a missing file.
    std::os::unix::fs::symlink("loop2.yml", fx.path().join("apps/loop1.yml")).unwrap();
    std::os::unix::fs::symlink("loop1.yml", fx.path().join("apps/loop2.yml")).unwrap();
    let out = bounded(fx.command(&["validate"]), HANG, "validate");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("symbolic links") && !err.contains("no such file"),
        "{err}"
    );
}

#[test]
fn a_secret_file_that_is_a_fifo_fails_the_deploy_naming_it() {
    let fx = Fixture::new("", &[]);
    let fifo = fx.path().join("token");
    mkfifo(&fifo);
    let manent = format!(
        "plugins:\n  exec: {{}}\nsecrets:\n  token: file:{}\n",
        fifo.display()
    );
    std::fs::write(fx.config(), manent).unwrap();
    let app = "application: s\nartifact: {version: \"1\"}\ndeploy:\n  plugin: exec\n  secrets: [token]\n  params:\n    \
               secrets: [token]\n    deploy: echo hi\nmax_retries: 0\nenvironments:\n  prod:\n    targets: [{name: t1}]\n";
    std::fs::write(fx.path().join("apps/s.yml"), app).unwrap();
    let out = bounded(fx.command(&["validate"]), HANG, "validate");
    let err = text(&out.stderr);
    assert!(
        err.contains("token") && err.contains("not a regular file"),
        "validate names the secret: {err}"
    );
    let out = bounded(
        fx.command(&["deploy", "s", "prod", "--yes"]),
        HANG,
        "deploy",
    );
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_ne!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains(&fifo.display().to_string()) && all.contains("not a regular file"),
        "{all}"
    );
}

// ---------------------------------------------------------------------------------------------
// A database that refuses writes (a full disk) holds nothing hostage.

#[test]
fn a_database_that_refuses_writes_at_start_is_said_at_once() {
    let fx = Fixture::new(LEDGER_MANENT, &[("web", SLOW_APP)]);
    let out = bounded(
        fx.command(&["deploy", "web", "prod", "--yes"]),
        HANG,
        "deploy",
    );
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let full = fx.path().join("full");
    std::fs::write(&full, "").unwrap();
    let mut cmd = fx.command(&["deploy", "web", "prod", "--yes", "--version", "2.0"]);
    cmd.env("MANENT_FAILPOINTS", "store.commit=ioerr@1-")
        .env("MANENT_FAILPOINTS_WHILE", &full);
    let out = bounded(cmd, HANG, "deploy on a full disk");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(
        err.contains(&fx.db_path().display().to_string())
            && err.contains("refuses writes")
            && err.contains("nothing was started"),
        "{err}"
    );
    assert_eq!(fx.deployments().len(), 1, "a deployment was recorded");
}

#[test]
fn sigterm_stops_an_engine_waiting_on_a_database_that_refuses_writes() {
    let fx = Fixture::new(LEDGER_MANENT, &[("web", SLOW_APP)]);
    // Every commit fails once `$FIXTURE/full` exists, as on a full disk: it fills while both
    // commands run, so their outcomes cannot be recorded.
    let full = fx.path().join("full");
    let mut child = fx.spawn_with(
        &["deploy", "web", "prod", "--yes"],
        &[
            ("MANENT_FAILPOINTS", "store.commit=ioerr@1-"),
            ("MANENT_FAILPOINTS_WHILE", &full.display().to_string()),
            ("DELAY", "1"),
        ],
    );
    let stderr_path = fx.path().join("stderr");
    let mut err = child.stderr.take().unwrap();
    let copier = std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
            let _ = std::fs::write(&stderr_path, &all);
        }
    });
    wait_until(HANG, "both commands to start", || started(&fx).len() == 2);
    std::fs::write(&full, "").unwrap();
    wait_until(HANG, "both commands to finish", || {
        slow_ledger(&fx).iter().filter(|e| e.0 == "done").count() == 2
    });
    wait_until(HANG, "the follower to say what it waits for", || {
        std::fs::read_to_string(fx.path().join("stderr"))
            .is_ok_and(|s| s.contains("waiting: the database") && s.contains("cannot commit"))
    });
    signal(&child, "TERM");
    let out = wait_bounded(child, HANG, "the engine after SIGTERM");
    copier.join().unwrap();
    let said = std::fs::read_to_string(fx.path().join("stderr")).unwrap();
    assert_eq!(out.status.code(), Some(5), "{said}");
    assert!(said.contains(&fx.db_path().display().to_string()), "{said}");
    // Nothing was recorded as failed; once the disk has room the next start finishes it, and
    // status agrees.
    std::fs::remove_file(&full).unwrap();
    let out = bounded(
        fx.command(&["deploy", "web", "prod", "--yes"]),
        HANG,
        "resume",
    );
    assert_eq!(out.status.code(), Some(0), "{}", fleet::said(&out));
    let id = fx.deployments().pop().unwrap();
    assert_eq!(fx.status(&id)["state"], "deployed");
    fx.integrity_ok();
}

// ---------------------------------------------------------------------------------------------
// A second local user (`nobody`) can neither make the engine run nor kill anything: the engine
// trusts only its own user's files (ssh's StrictModes), process records only for the very
// process they recorded, and stored inputs only with its key.

const NOBODY: u32 = 65534;

/// True when the tests run as root (they must, to act as a second user); otherwise the test is
/// skipped, saying so.
fn as_root(test: &str) -> bool {
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false);
    if !root {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            format!("{test}: skipped: acting as a second user needs root\n").as_bytes(),
        );
    }
    root
}

/// `script` run by `sh` as `nobody`.
fn as_nobody(script: &str) -> Output {
    use std::os::unix::process::CommandExt;
    let out = Command::new("sh")
        .args(["-c", script])
        .uid(NOBODY)
        .gid(NOBODY)
        .current_dir("/")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "as nobody: {script}\n{}",
        text(&out.stderr)
    );
    out
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().mode() & 0o7777
}

/// A process of its own group that must survive: `sleep 300`, as root or as nobody.
struct Victim(Child);

impl Victim {
    fn start(nobody: bool) -> Victim {
        use std::os::unix::process::CommandExt;
        let mut c = Command::new("sleep");
        c.arg("300").process_group(0);
        if nobody {
            c.uid(NOBODY).gid(NOBODY);
        }
        Victim(c.spawn().unwrap())
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    fn alive(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }

    /// What the engine would record for it: `BOOT START UID EXE`, as anyone can read it from
    /// /proc (its start time is world-readable).
    fn record(&self, uid: u32, exe: &str) -> String {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        let start = stat
            .rsplit_once(") ")
            .unwrap()
            .1
            .split_whitespace()
            .nth(19)
            .unwrap();
        format!("{} {start} {uid} {exe}\n", boot.trim())
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The real path of the `sleep` binary (what /proc/PID/exe shows for a victim).
fn sleep_exe() -> String {
    let out = Command::new("sh")
        .args(["-c", "readlink -f \"$(command -v sleep)\""])
        .output()
        .unwrap();
    text(&out.stdout).trim().to_owned()
}

/// A fixture whose database lives in `shared/`, a directory others may write (`mode`), under a
/// fixture directory nobody may traverse.
fn shared_dir_fixture(mode: u32) -> Fixture {
    let fx = Fixture::new(
        &format!("database: shared/manent.db\n{LEDGER_MANENT}"),
        &[("web", SLOW_APP)],
    );
    chmod(fx.path(), 0o755);
    std::fs::create_dir(fx.path().join("shared")).unwrap();
    chmod(&fx.path().join("shared"), mode);
    fx
}

/// A deploy refused with exit 6, naming `path` and each of `said`; nothing ran.
fn refused_naming(fx: &Fixture, path: &Path, said: &[&str]) {
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}{}", text(&out.stdout));
    assert!(
        err.contains(&path.display().to_string()),
        "names {path:?}: {err}"
    );
    for s in said {
        assert!(err.contains(s), "expected {s:?} in {err}");
    }
    assert!(!fx.path().join("ledger").exists(), "a command ran: {err}");
}

#[test]
fn another_users_processes_directory_and_records_are_refused_and_nothing_is_killed() {
    if !as_root("another_users_processes_directory…") {
        return;
    }
    // umask 000 and a database in a directory everyone may write: what the issue found.
    let fx = shared_dir_fixture(0o777);
    let shared = fx.path().join("shared");
    let processes = shared.join("manent.db.processes");
    let mut victim = Victim::start(false);
    let forged = processes.join(victim.pid().to_string());
    // As nobody: the processes directory made first, and a record naming root's process with
    // the boot id, start time and executable anyone can read.
    as_nobody(&format!(
        "mkdir {0} && printf '%s' '{1}' > {2}",
        processes.display(),
        victim.record(0, &sleep_exe()),
        forged.display()
    ));
    // The directory everyone may write is refused first.
    refused_naming(&fx, &shared, &["mode 0777", "chmod 700"]);
    assert!(victim.alive(), "the engine killed root's process");
    // An administrator closes the directory; nobody's processes directory is still there.
    chmod(&shared, 0o700);
    refused_naming(
        &fx,
        &processes,
        &["owned by nobody (uid 65534)", "chown root"],
    );
    assert!(victim.alive(), "the engine killed root's process");
    // Given to root, the directory holds nobody's record: that is refused too.
    std::os::unix::fs::chown(&processes, Some(0), Some(0)).unwrap();
    refused_naming(
        &fx,
        &forged,
        &["a process record", "owned by nobody (uid 65534)"],
    );
    assert!(victim.alive(), "the engine killed root's process");
    // Once it is gone the engine runs; the directory, root's now and writable by no one else,
    // keeps the mode it was given (a directory manent did not make is never re-moded).
    std::fs::remove_file(&forged).unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(mode_of(&processes), 0o755);
    assert!(victim.alive(), "the engine killed root's process");
}

#[test]
fn a_process_record_is_acted_on_only_for_the_very_process_it_recorded() {
    if !as_root("a_process_record_is_acted_on_only…") {
        return;
    }
    let fx = Fixture::new(LEDGER_MANENT, &[("web", SLOW_APP)]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let dir = fx.path().join(".manent/manent.db.processes");
    let sleep = sleep_exe();
    let mut roots = Victim::start(false);
    let mut nobodys = Victim::start(true);
    let mut cleanly = Victim::start(false);
    // Records in the engine's own directory, as its user — but of another executable, and of
    // another user's process (both with the true start time).
    std::fs::write(
        dir.join(roots.pid().to_string()),
        roots.record(0, "/usr/bin/dash"),
    )
    .unwrap();
    std::fs::write(
        dir.join(nobodys.pid().to_string()),
        nobodys.record(0, &sleep),
    )
    .unwrap();
    // The control: a true record of a root process is acted on.
    std::fs::write(
        dir.join(cleanly.pid().to_string()),
        cleanly.record(0, &sleep),
    )
    .unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", "2"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    for (v, why) in [
        (&roots, format!("runs {sleep}, not /usr/bin/dash")),
        (&nobodys, "runs as uid 65534".to_owned()),
    ] {
        assert!(
            err.contains(&format!("did not kill process group {}", v.pid())) && err.contains(&why),
            "expected {why:?}: {err}"
        );
    }
    assert!(
        roots.alive() && nobodys.alive(),
        "a spared process was killed"
    );
    // Warnings to a stderr that is not a terminal are plain text.
    assert!(
        !err.contains('\u{1b}'),
        "colour codes in a piped stderr: {err:?}"
    );
    wait_until(
        Duration::from_secs(5),
        "the true record's group to die",
        || !cleanly.alive(),
    );
    assert!(
        err.contains(&format!(
            "killed 1 process group(s) an engine that died had left running (pgid {})",
            cleanly.pid()
        )),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "records were left"
    );
}

/// As nobody: a database of their own with a deployment left PENDING whose command writes `id
/// -u` to `$FIXTURE/pwned` — made with the real manent, stopped while it waited at a gate.
fn forged_database(fx: &Fixture) -> std::path::PathBuf {
    use std::os::unix::process::CommandExt;
    let evil = fx.path().join("evil");
    std::fs::create_dir_all(evil.join("apps")).unwrap();
    std::fs::write(
        evil.join("manent.yml"),
        "plugins:\n  exec:\n    pass_env: [FIXTURE, GATE]\n",
    )
    .unwrap();
    std::fs::write(
        evil.join("apps/evil.yml"),
        "application: evil\nartifact: {version: \"1\"}\ndeploy:\n  plugin: exec\n  params:\n    \
         deploy: |\n      while [ -e \"$GATE\" ]; do sleep 0.05; done\n      id -u > \"$FIXTURE/pwned\"\n\
         environments:\n  prod:\n    targets: [{name: t1}]\n",
    )
    .unwrap();
    let gate = evil.join("gate");
    std::fs::write(&gate, "").unwrap();
    Command::new("chown")
        .args(["-R", "nobody:nogroup"])
        .arg(&evil)
        .status()
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_manent"))
        .arg("--config")
        .arg(evil.join("manent.yml"))
        .args(["deploy", "evil", "prod", "--yes"])
        .env("FIXTURE", fx.path())
        .env("GATE", &gate)
        .env("MANENT_LOG", "warn")
        .uid(NOBODY)
        .gid(NOBODY)
        .current_dir("/")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let records = evil.join(".manent/manent.db.processes");
    wait_until(HANG, "the forged deployment to wait at its gate", || {
        std::fs::read_dir(&records).is_ok_and(|mut d| d.next().is_some())
    });
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_file(&gate).unwrap();
    // Its rows into the main file (they are in the write-ahead log), as `sqlite3` would do.
    let db = evil.join(".manent/manent.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    Command::new("chown")
        .args(["-R", "nobody:nogroup"])
        .arg(&evil)
        .status()
        .unwrap();
    db
}

#[test]
fn a_database_another_user_put_in_place_is_refused_and_never_runs_their_command() {
    if !as_root("a_database_another_user_put_in_place…") {
        return;
    }
    let fx = shared_dir_fixture(0o700);
    let shared = fx.path().join("shared");
    let db = shared.join("manent.db");
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    std::fs::remove_file(fx.path().join("ledger")).unwrap();
    let forged = forged_database(&fx);
    // A careless moment: the directory open to everyone, and nobody moves their database in.
    chmod(&shared, 0o777);
    as_nobody(&format!(
        "cd {0} && rm -f manent.db manent.db-wal manent.db-shm && cp {1} manent.db",
        shared.display(),
        forged.display()
    ));
    chmod(&shared, 0o700);
    refused_naming(&fx, &db, &["the database", "owned by nobody (uid 65534)"]);
    // Copied in by root, it is root's file — but signed with another key than root's.
    let copy = shared.join("copy");
    std::fs::copy(&db, &copy).unwrap();
    std::fs::rename(&copy, &db).unwrap();
    refused_naming(
        &fx,
        &db,
        &["signed with another inputs key", "manent.db.key"],
    );
    // Without its key's fingerprint, it opens — and the forged deployment is refused, never
    // run, while root's own deploy goes on.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute("DELETE FROM inputs_key", []).unwrap();
    drop(conn);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("do not verify"), "{err}");
    assert!(
        !fx.path().join("pwned").exists(),
        "the forged command ran as uid {}",
        std::fs::read_to_string(fx.path().join("pwned")).unwrap_or_default()
    );
    let (status, error): (String, String) = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT status, error FROM workflow_status WHERE subject = 'evil/prod'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(status, "ERROR");
    assert!(error.contains("never run"), "{error}");
}

#[test]
fn group_writable_files_are_refused_unless_the_group_is_declared_shared() {
    if !as_root("group_writable_files_are_refused…") {
        return;
    }
    let fx = Fixture::new(LEDGER_MANENT, &[("web", SLOW_APP)]);
    chmod(fx.path(), 0o755);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    std::fs::remove_file(fx.path().join("ledger")).unwrap();
    let dir = fx.path().join(".manent");
    std::os::unix::fs::chown(&dir, None, Some(NOBODY)).unwrap();
    chmod(&dir, 0o770);
    refused_naming(&fx, &dir, &["group nogroup, mode 0770", "chmod 700"]);
    // Declared, the group shares the files: 2770 and 0660, of that group.
    std::fs::write(
        fx.config(),
        format!("{LEDGER_MANENT}engine:\n  shared_group: nogroup\n"),
    )
    .unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    // The directory the group was given is used as it is (never re-moded).
    assert_eq!(mode_of(&dir), 0o770);
    use std::os::unix::fs::MetadataExt;
    for f in ["manent.db", "manent.db.key", "manent.db.lock"] {
        let m = std::fs::metadata(dir.join(f)).unwrap();
        assert_eq!((m.mode() & 0o777, m.gid()), (0o660, NOBODY), "{f}");
    }
    // A member of the group reads it.
    let out = as_nobody(&format!(
        "{} --config {} status",
        env!("CARGO_BIN_EXE_manent"),
        fx.config().display()
    ));
    assert!(text(&out.stdout).contains("web"), "{}", text(&out.stdout));
    // A group the engine's user is not in (and that does not exist) is said at validate.
    std::fs::write(
        fx.config(),
        format!("{LEDGER_MANENT}engine:\n  shared_group: no-such-group\n"),
    )
    .unwrap();
    let out = fx.run(&["validate"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("manent.yml:5:") && err.contains("groupadd no-such-group"),
        "{err}"
    );
}

#[test]
fn every_file_the_engine_keeps_is_private_whatever_the_umask() {
    let fx = Fixture::new(
        &format!("{LEDGER_MANENT}log_file:\n  dir: logs\n"),
        &[("web", SLOW_APP)],
    );
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("umask 000 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_manent"))
        .arg("--config")
        .arg(fx.config())
        .args(["deploy", "web", "prod", "--yes"])
        .env("FIXTURE", fx.path())
        .env("DELAY", "2")
        .env("MANENT_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let records = fx.path().join(".manent/manent.db.processes");
    // Recorded right after each starts (the command may write its ledger line first).
    wait_until(HANG, "both commands to be recorded", || {
        started(&fx).len() == 2 && std::fs::read_dir(&records).is_ok_and(|d| d.count() == 2)
    });
    let modes: Vec<(String, u32)> = std::fs::read_dir(&records)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (p.display().to_string(), mode_of(&p))
        })
        .collect();
    let out = wait_bounded(child, HANG, "the deploy");
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(modes.len(), 2, "{modes:?}");
    for (p, m) in modes {
        assert_eq!(m, 0o600, "{p}");
    }
    let m = fx.path().join(".manent");
    for (p, want) in [
        (m.clone(), 0o700),
        (m.join("manent.db"), 0o600),
        (m.join("manent.db.key"), 0o600),
        (m.join("manent.db.lock"), 0o600),
        (m.join("manent.db.processes"), 0o700),
        (fx.path().join("logs"), 0o700),
    ] {
        assert_eq!(mode_of(&p), want, "{}", p.display());
    }
    for e in std::fs::read_dir(fx.path().join("logs")).unwrap() {
        let p = e.unwrap().path();
        assert_eq!(mode_of(&p), 0o600, "{}", p.display());
    }
}

// ---------------------------------------------------------------------------------------------
// Every declared secret is redacted in every sink, from the engine's start — not only those a
// call read — and `${secret:NAME}` is read where the README says it is.

/// A loopback HTTP receiver answering 200 to everything; keeps each request's text (request
/// line, headers and body).
struct Catcher {
    port: u16,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Catcher {
    fn start() -> Catcher {
        use std::io::{BufRead, BufReader, Read as _, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let (mut all, mut len) = (String::new(), 0usize);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    all.push_str(&line);
                }
                let mut body = vec![0; len];
                let _ = reader.read_exact(&mut body);
                all.push_str(&String::from_utf8_lossy(&body));
                keep.lock().unwrap().push(all);
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
            }
        });
        Catcher { port, seen }
    }

    fn all(&self) -> String {
        self.seen.lock().unwrap().join("\n")
    }
}

#[test]
fn file_secrets_no_call_asked_for_are_redacted_in_every_sink() {
    const SECRET: &str = "fs3cr3t-Zq81-never-asked-for";
    let catcher = Catcher::start();
    let fx = Fixture::new("", &[]);
    let key = fx.path().join("key.txt");
    std::fs::write(&key, format!("{SECRET}\n")).unwrap();
    std::fs::write(
        fx.config(),
        format!(
            "plugins:\n  exec:\n    pass_env: [FIXTURE]\n  fix:\n    external: {{command: {FIXTURE_PLUGIN}}}\n\
             secrets:\n  key: file:{}\nlog_file:\n  dir: logs\nnotify:\n  - name: catcher\n    \
             url: http://127.0.0.1:{}/hook\n    backoff: {{base: 50ms, max: 100ms}}\n",
            key.display(),
            catcher.port
        ),
    )
    .unwrap();
    // A deploy command that prints the file (no call reads the secret) and fails with it as its
    // last line; a plugin that prints it on its stderr.
    std::fs::write(
        fx.path().join("apps/cat.yml"),
        "application: cat\nartifact: {version: \"1\"}\ndeploy:\n  plugin: exec\n  params:\n    \
         deploy: |\n      cat \"$FIXTURE/key.txt\"\n      echo \"the key is $(cat \"$FIXTURE/key.txt\")\" >&2\n      exit 1\n\
         max_retries: 0\nenvironments:\n  prod:\n    targets: [{name: t1}]\n",
    )
    .unwrap();
    std::fs::write(
        fx.path().join("apps/plug.yml"),
        format!(
            "application: plug\nartifact: {{version: \"1\"}}\ndeploy:\n  plugin: fix\n  params: \
             {{say_file: \"{}\"}}\nenvironments:\n  prod:\n    targets: [{{name: t1}}]\n",
            key.display()
        ),
    )
    .unwrap();
    let failed = fx.run(&["deploy", "cat", "prod", "--yes", "-v"]);
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed.stderr));
    let plugged = fx.run(&["deploy", "plug", "prod", "--yes", "-v"]);
    assert_eq!(plugged.status.code(), Some(0), "{}", text(&plugged.stderr));
    wait_until(Duration::from_secs(20), "the target-failed webhook", || {
        catcher.all().contains("target-failed")
    });
    let ids = fx.deployments();
    let mut sinks: Vec<(String, String)> = vec![
        (
            "deploy output".into(),
            format!("{}{}", text(&failed.stdout), text(&failed.stderr)),
        ),
        (
            "plugin output".into(),
            format!("{}{}", text(&plugged.stdout), text(&plugged.stderr)),
        ),
        ("webhook".into(), catcher.all()),
    ];
    for id in &ids {
        for verb in [vec!["status", id, "--json"], vec!["logs", id]] {
            let out = fx.run(&verb);
            sinks.push((
                format!("{verb:?}"),
                format!("{}{}", text(&out.stdout), text(&out.stderr)),
            ));
        }
    }
    let mut stored = std::fs::read(fx.db_path()).unwrap();
    stored.extend(std::fs::read(fx.db_path().with_extension("db-wal")).unwrap_or_default());
    sinks.push((
        "database".into(),
        String::from_utf8_lossy(&stored).into_owned(),
    ));
    for e in std::fs::read_dir(fx.path().join("logs")).unwrap() {
        let p = e.unwrap().path();
        sinks.push((
            p.display().to_string(),
            std::fs::read_to_string(&p).unwrap(),
        ));
    }
    for (sink, said) in &sinks {
        assert!(!said.contains(SECRET), "{sink} holds the secret:\n{said}");
    }
    let all: String = sinks.iter().map(|(_, s)| s.as_str()).collect();
    assert!(all.contains("the key is [redacted]"), "{all}");
    assert!(all.contains("the file says: [redacted]"), "{all}");
}

#[test]
fn short_secrets_and_line_breaks_in_headers_are_refused_at_validate() {
    let fx = Fixture::new(
        "plugins:\n  exec: {}\nsecrets:\n  pin: \"value:q7z\"\n",
        &[("ok", PLAIN_APP)],
    );
    validate_refuses(
        &fx,
        &[
            "manent.yml:4:3: secrets.pin: its value is 3 characters",
            "allow_short_secrets",
        ],
    );
    // A test fixture may say so; the value is then redacted wherever it appears.
    std::fs::write(
        fx.config(),
        "plugins:\n  exec: {}\nsecrets:\n  pin: \"value:q7z\"\nengine: {allow_short_secrets: true}\n",
    )
    .unwrap();
    let out = fx.run(&["validate"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    // A line break in a header would start another header: refused where it is written.
    std::fs::write(
        fx.config(),
        "plugins:\n  exec: {}\nnotify:\n  - url: http://127.0.0.1:9/x\n    headers: {X-A: \"a\\r\\nX-Evil: 1\"}\n",
    )
    .unwrap();
    validate_refuses(&fx, &["manent.yml:5:22:", "header injection"]);
    std::fs::write(fx.config(), "plugins:\n  exec: {}\n").unwrap();
    let app = "application: h\nartifact: {version: \"1\"}\ndeploy:\n  plugin: exec\n  params: {deploy: \"true\"}\n\
               hooks:\n  - name: smoke\n    events: [post-deploy]\n    http:\n      url: http://127.0.0.1:9/\n      \
               headers:\n        X-Ok: fine\n        X-B: \"b\\nSet-Cookie: x=1\"\n\
               environments:\n  prod:\n    targets: [{name: t1}]\n";
    std::fs::write(fx.path().join("apps/h.yml"), app).unwrap();
    validate_refuses(&fx, &["h.yml:13:16:", "header injection"]);
}

#[test]
fn secret_references_are_read_in_http_hooks_and_exec_env_and_refused_where_they_are_not() {
    const TOKEN: &str = "hk-T0ken-4f1b9c";
    let catcher = Catcher::start();
    let manent = "plugins:\n  exec:\n    pass_env: [FIXTURE]\n    env: {FROM_OPTIONS: \"o=${secret:tok}\"}\n\
                  secrets:\n  tok: env:TOK\n";
    let app = format!(
        "application: s\nartifact: {{version: \"1\"}}\ndeploy:\n  plugin: exec\n  secrets: [tok]\n  params:\n    \
         env: {{FROM_PARAMS: \"p=${{secret:tok}}\"}}\n    deploy: |\n      \
         printf '%s %s' \"$FROM_OPTIONS\" \"$FROM_PARAMS\" > \"$FIXTURE/env\"\n\
         hooks:\n  - name: tell\n    events: [post-deploy]\n    secrets: [tok]\n    http:\n      \
         url: \"http://127.0.0.1:{}/in/${{secret:tok}}\"\n      headers: {{X-Token: \"Bearer ${{secret:tok}}\"}}\n\
         environments:\n  prod:\n    targets: [{{name: t1}}]\n",
        catcher.port
    );
    let fx = Fixture::new(manent, &[("s", &app)]);
    let env = [("TOK", TOKEN)];
    let out = fx.run_with(&["validate"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let out = fx.run_with(&["deploy", "s", "prod", "--yes", "-v"], &env);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert_eq!(
        std::fs::read_to_string(fx.path().join("env")).unwrap(),
        format!("o={TOKEN} p={TOKEN}")
    );
    let seen = catcher.all();
    assert!(seen.contains(&format!("GET /in/{TOKEN} ")), "{seen}");
    assert!(
        seen.to_ascii_lowercase()
            .contains(&format!("x-token: bearer {}", TOKEN.to_ascii_lowercase())),
        "{seen}"
    );
    assert!(!all.contains(TOKEN), "{all}");
    // An application that does not list the secret cannot have exec read it for it.
    let unlisted = app.replace("  secrets: [tok]\n  params:", "  params:");
    std::fs::write(fx.path().join("apps/s.yml"), &unlisted).unwrap();
    validate_refuses(
        &fx,
        &[
            "s.yml:6:27:",
            "params.env.FROM_PARAMS reads ${secret:tok}",
            "add `secrets: [tok]` under `deploy:`",
        ],
    );
    // Nor a hook that does not list it.
    let hook_unlisted = app.replace("    secrets: [tok]\n    http:", "    http:");
    std::fs::write(fx.path().join("apps/s.yml"), &hook_unlisted).unwrap();
    validate_refuses(
        &fx,
        &["s.yml:", "hook `tell`: http.url reads ${secret:tok}"],
    );
    // Where nothing reads it, it is refused rather than sent as it is written.
    let waited = app
        .replace(
            "    http:\n      url: \"http://127.0.0.1:",
            "    wait:\n      url: \"http://127.0.0.1:",
        )
        .replace("      headers: {X-Token: \"Bearer ${secret:tok}\"}\n", "");
    std::fs::write(fx.path().join("apps/s.yml"), &waited).unwrap();
    validate_refuses(&fx, &["s.yml:", "wait.url: `${secret:…}` is not read"]);
}

// ---------------------------------------------------------------------------------------------
// Who acted is what the kernel says, not what anyone can type.

/// One journal entry of `manent history web ENV --json` with `action`.
fn journaled(fx: &Fixture, env: &str, action: &str) -> serde_json::Value {
    let out = fx.run(&["history", "web", env, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let h: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    h["journal"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["action"] == action)
        .unwrap_or_else(|| panic!("no {action} in {h:#}"))
        .clone()
}

#[test]
fn identity_comes_from_the_kernel_not_from_what_anyone_can_type() {
    if !as_root("identity_comes_from_the_kernel…") {
        return;
    }
    let app = "application: web\nartifact: {version: \"1\"}\ndeploy:\n  plugin: exec\n  params: {deploy: \"true\"}\n\
               environments:\n  prod:\n    targets: [{name: p1}]\n  qa:\n    targets: [{name: q1}]\n";
    // Shared with nogroup, so nobody may act on the same database.
    let fx = Fixture::new(
        &format!("{LEDGER_MANENT}engine:\n  shared_group: nogroup\n"),
        &[("web", app)],
    );
    chmod(fx.path(), 0o755);
    let out = fx.run(&["deploy", "web", "qa", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    // As nobody, typing someone else's name and address.
    use std::os::unix::process::CommandExt;
    let out = Command::new(env!("CARGO_BIN_EXE_manent"))
        .arg("--config")
        .arg(fx.config())
        .args(["lock", "web", "prod", "--reason", "it was alice"])
        .env("SUDO_USER", "alice")
        .env("SUDO_UID", "1000")
        .env("USER", "alice")
        .env("SSH_CONNECTION", "203.0.113.9 4242 10.0.0.1 22")
        .uid(NOBODY)
        .gid(NOBODY)
        .current_dir("/")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let lock = journaled(&fx, "prod", "lock");
    assert_eq!(
        lock["operator"], "nobody (claimed SUDO_USER=alice)",
        "{lock}"
    );
    assert_eq!(lock["client"], "203.0.113.9 (claimed)", "{lock}");
    // Root's own sudo environment that does not agree is a claim too.
    let out = fx.run_with(
        &["lock", "web", "qa", "--reason", "mismatch"],
        &[("SUDO_USER", "nobody"), ("SUDO_UID", "0")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(
        journaled(&fx, "qa", "lock")["operator"],
        format!("{} (claimed SUDO_USER=nobody)", me())
    );
    let out = fx.run(&["unlock", "web", "qa"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    // Over a real ssh session the address is the one its sshd is connected to, whatever the
    // session's variable says.
    let Some(server) = sshd::sshd() else {
        assert!(
            std::env::var("CI").is_err(),
            "sshd is required in CI (openssh-server)"
        );
        return;
    };
    let out = server
        .ssh(&format!(
            "SSH_CONNECTION='203.0.113.9 1 10.0.0.1 22' {} --config {} lock web qa --reason over-ssh",
            env!("CARGO_BIN_EXE_manent"),
            fx.config().display()
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let lock = journaled(&fx, "qa", "lock");
    assert_eq!(lock["reason"], "over-ssh", "{lock}");
    assert_eq!(lock["client"], "127.0.0.1", "{lock}");
    assert_eq!(lock["operator"], me().as_str(), "{lock}");
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
