//! A database that cannot be read is an error, never "nothing here".

use super::*;

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
