//! A database that refuses writes (a full disk) holds nothing hostage.

use super::*;

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
