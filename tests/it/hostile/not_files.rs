//! Configuration and secret files that are not files (FIFOs, devices) and absurd nesting are
//! refused without waiting.

use super::*;

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
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
