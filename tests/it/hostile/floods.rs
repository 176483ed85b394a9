//! What a plugin or a command writes is stored within bounds.

use super::*;

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
