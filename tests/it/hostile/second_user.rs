//! A second local user (`nobody`) can neither make the engine run nor kill anything: the engine
//! trusts only its own user's files, process records only for the very process they recorded, and
//! stored inputs only with its key.

use super::*;

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

/// The packaged layout: the database's directory belongs to the worker's user and is shared
/// with its group (2770), the directories above are root's. Another member of the group (here
/// root, with nobody as the worker's user) deploys there: a directory a member owns is no
/// danger the group's files are not already. Without the group declared it is refused.
#[test]
fn a_database_directory_another_member_of_the_shared_group_owns_is_used() {
    if !as_root("a_database_directory_another_member…") {
        return;
    }
    let fx = Fixture::new(LEDGER_MANENT, &[("web", SLOW_APP)]);
    chmod(fx.path(), 0o755);
    let db = fx.path().join("state/db");
    std::fs::create_dir_all(&db).unwrap();
    std::os::unix::fs::chown(&db, Some(NOBODY), Some(NOBODY)).unwrap();
    chmod(&db, 0o2770);
    let at = format!("database: {}\n", db.join("manent.db").display());
    std::fs::write(fx.config(), format!("{at}{LEDGER_MANENT}")).unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(6), "{}", said(&out));
    assert!(
        text(&out.stderr).contains("owned by nobody"),
        "{}",
        said(&out)
    );
    std::fs::write(
        fx.config(),
        format!("{at}{LEDGER_MANENT}engine:\n  shared_group: nogroup\n"),
    )
    .unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(db.join("manent.db")).unwrap();
    assert_eq!((m.mode() & 0o777, m.gid()), (0o660, NOBODY));
    // Still refused: the same directory writable by others.
    chmod(&db, 0o2777);
    let out = fx.run(&["status"]);
    assert_eq!(out.status.code(), Some(6), "{}", said(&out));
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
