//! Where the engine keeps its files, no link another user planted is followed and no directory
//! is re-moded: a symbolic link where the database's directory goes, a log directory swapped
//! for one, are refused naming them, and what they point at is untouched; a directory that was
//! there (a web root) keeps its mode.

use std::path::Path;

use super::{NOBODY, as_root, chmod, mode_of};
use crate::support::fleet::{Fixture, LEDGER_MANENT, ledger_app, said};

fn link_as_nobody(target: &Path, link: &Path) {
    use std::os::unix::process::CommandExt;
    let ok = std::process::Command::new("ln")
        .arg("-s")
        .arg(target)
        .arg(link)
        .uid(NOBODY)
        .gid(NOBODY)
        .status()
        .unwrap();
    assert!(ok.success());
}

fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

#[test]
fn a_database_directory_another_user_linked_elsewhere_is_refused_and_nothing_lands_there() {
    if !as_root("a_database_directory_another_user_linked…") {
        return;
    }
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &ledger_app(""))]);
    chmod(fx.path(), 0o755);
    // A shared directory (0777, no sticky bit), where nobody points `manent` at a copy of /etc.
    let shared = fx.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    chmod(&shared, 0o777);
    let etc = fx.path().join("etc-copy");
    std::fs::create_dir(&etc).unwrap();
    chmod(&etc, 0o755);
    link_as_nobody(&etc, &shared.join("manent"));
    std::fs::write(
        fx.config(),
        format!(
            "database: {}/manent/manent.db\n{LEDGER_MANENT}",
            shared.display()
        ),
    )
    .unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    let err = said(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&shared.display().to_string()) && err.contains("mode 0777"),
        "{err}"
    );
    assert_eq!(mode_of(&etc), 0o755, "re-moded through the link");
    assert_eq!(entries(&etc), 0, "files landed through the link");
}

#[test]
fn a_log_directory_swapped_for_a_link_is_refused_and_its_target_is_untouched() {
    if !as_root("a_log_directory_swapped_for_a_link…") {
        return;
    }
    let fx = Fixture::new(
        &format!("{LEDGER_MANENT}log_file:\n  dir: shared/logs\n"),
        &[("web", &ledger_app(""))],
    );
    chmod(fx.path(), 0o755);
    let shared = fx.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    // The directory above becomes writable by all; nobody swaps the log directory for a link.
    chmod(&shared, 0o777);
    let target = fx.path().join("elsewhere");
    std::fs::create_dir(&target).unwrap();
    chmod(&target, 0o755);
    std::fs::rename(shared.join("logs"), fx.path().join("old-logs")).unwrap();
    link_as_nobody(&target, &shared.join("logs"));
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", "2"]);
    let err = said(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("shared") && err.contains("mode 0777"), "{err}");
    assert_eq!(mode_of(&target), 0o755);
    assert_eq!(entries(&target), 0, "the JSON log went through the link");
}

#[test]
fn a_database_in_a_directory_that_was_there_leaves_its_mode_alone() {
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &ledger_app(""))]);
    // A web root: 0755, with a page others read.
    let www = fx.path().join("www");
    std::fs::create_dir(&www).unwrap();
    std::fs::write(www.join("index.html"), "hello\n").unwrap();
    chmod(&www, 0o755);
    std::fs::write(
        fx.config(),
        format!("database: {}/manent.db\n{LEDGER_MANENT}", www.display()),
    )
    .unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(mode_of(&www), 0o755, "the directory was re-moded");
    assert_eq!(
        mode_of(&www.join("manent.db")),
        0o600,
        "the database is private"
    );
}
