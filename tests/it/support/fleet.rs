//! Test support: a manent configuration in a temporary directory, the real `manent` binary run
//! against it, and a ledger the `exec` plugin's commands append to (the side effects of steps).

#![allow(dead_code, reason = "each test binary uses part of the support module")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub use super::ports::free_port;

/// A configuration directory with `manent.yml` and `apps/`.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    /// The shared PostgreSQL database this fixture's configuration uses, if not SQLite.
    pub postgres: Option<String>,
}

/// One `exec` command's ledger line: `start|done KEY TARGET ATTEMPT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub event: String,
    pub key: String,
    pub target: String,
    pub attempt: u32,
}

impl Fixture {
    pub fn new(manent_yml: &str, apps: &[(&str, &str)]) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("manent.yml"), manent_yml).unwrap();
        std::fs::create_dir_all(dir.path().join("apps")).unwrap();
        for (name, text) in apps {
            std::fs::write(dir.path().join("apps").join(format!("{name}.yml")), text).unwrap();
        }
        Fixture {
            dir,
            postgres: None,
        }
    }

    /// The same, on the PostgreSQL database `url` (`database:` in manent.yml), with the inputs
    /// key the tests' engines share (`engine.inputs_key`, merged into an `engine:` section
    /// `manent_yml` has).
    pub fn on_postgres(url: &str, manent_yml: &str, apps: &[(&str, &str)]) -> Fixture {
        let key = "manent-tests-inputs-key-0123456789abcdef";
        assert!(!manent_yml.contains("secrets:"), "merge the secrets here");
        let manent_yml = if manent_yml.contains("engine: {") {
            manent_yml.replacen("engine: {", "engine: {inputs_key: pg_inputs, ", 1)
        } else if manent_yml.contains("engine:\n") {
            manent_yml.replacen("engine:\n", "engine:\n  inputs_key: pg_inputs\n", 1)
        } else {
            format!("{manent_yml}engine: {{inputs_key: pg_inputs}}\n")
        };
        let manent_yml = format!("{manent_yml}secrets: {{pg_inputs: \"value:{key}\"}}\n");
        let mut fx = Fixture::new(&format!("database: \"{url}\"\n{manent_yml}"), apps);
        fx.postgres = Some(url.to_owned());
        fx
    }

    /// Rows of `sql` from this fixture's PostgreSQL, as strings.
    pub fn pg_rows(&self, sql: &str) -> Vec<Vec<String>> {
        pg_rows(
            self.postgres.as_deref().expect("a fixture on PostgreSQL"),
            sql,
        )
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn config(&self) -> PathBuf {
        self.path().join("manent.yml")
    }

    pub fn db_path(&self) -> PathBuf {
        self.path().join(".manent/manent.db")
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_manent"));
        c.arg("--config").arg(self.config()).args(args);
        c.env("USER", "tester")
            .env_remove("SUDO_USER")
            .env_remove("SUDO_UID")
            .env_remove("SSH_CONNECTION");
        c.env("MANENT_LOG", "warn").env("FIXTURE", self.path());
        c.env_remove("MANENT_FAILPOINTS");
        c.stdin(Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    pub fn run_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut c = self.command(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    }

    pub fn spawn_with(&self, args: &[&str], env: &[(&str, &str)]) -> Child {
        let mut c = self.command(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// The pids of the `manent worker` processes on this fixture's configuration: a command
    /// that leaves a live canary hands it to a detached one.
    pub fn workers(&self) -> Vec<u32> {
        super::workers::of(&self.config())
    }

    /// Stops this fixture's workers and waits until they are gone: what follows runs with no
    /// engine.
    pub fn stop_workers(&self) {
        super::workers::stop(&self.config());
    }

    pub fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.db_path()).unwrap()
    }

    /// The first column of `sql`'s rows on the SQLite database, as text.
    pub fn strings(&self, sql: &str) -> Vec<String> {
        self.db()
            .prepare(sql)
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// `manent status ID --json`.
    pub fn status(&self, id: &str) -> serde_json::Value {
        let out = self.run(&["status", id, "--json"]);
        assert!(out.status.success(), "status failed: {}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Ids of every deployment, oldest first. A database another process is still creating
    /// (the file exists, its schema not yet) has none.
    pub fn deployments(&self) -> Vec<String> {
        if self.postgres.is_some() {
            return self
                .pg_rows("SELECT workflow_id FROM workflow_status ORDER BY created_at, workflow_id")
                .into_iter()
                .map(|r| r[0].clone())
                .collect();
        }
        if !self.db_path().exists() {
            return Vec::new();
        }
        let db = self.db();
        db.busy_timeout(Duration::from_secs(10)).unwrap();
        let stmt =
            db.prepare("SELECT workflow_id FROM workflow_status ORDER BY created_at, workflow_id");
        let mut stmt = match stmt {
            Ok(s) => s,
            Err(e) if e.to_string().contains("no such table") => return Vec::new(),
            Err(e) => panic!("reading deployments: {e}"),
        };
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    pub fn ledger(&self) -> Vec<Entry> {
        let Ok(text) = std::fs::read_to_string(self.path().join("ledger")) else {
            return Vec::new();
        };
        text.lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                Some(Entry {
                    event: f.next()?.to_owned(),
                    key: f.next()?.to_owned(),
                    target: f.next()?.to_owned(),
                    attempt: f.next()?.parse().ok()?,
                })
            })
            .collect()
    }

    /// The checkpointed steps of a deployment: (function_id, name).
    pub fn steps(&self, id: &str) -> Vec<(u32, String)> {
        if self.postgres.is_some() {
            return self
                .pg_rows(&format!(
                    "SELECT function_id, function_name FROM operation_outputs \
                     WHERE workflow_id = '{id}' ORDER BY function_id"
                ))
                .into_iter()
                .map(|r| (r[0].parse().unwrap(), r[1].clone()))
                .collect();
        }
        let db = self.db();
        let mut stmt = db
            .prepare("SELECT function_id, function_name FROM operation_outputs WHERE workflow_id = ?1 ORDER BY function_id")
            .unwrap();
        stmt.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// The fixture's descriptor gives its plugin a current_release.
    pub fn reconciles(&self) -> bool {
        std::fs::read_to_string(self.path().join("apps/web.yml"))
            .is_ok_and(|t| t.contains("current_release"))
    }

    /// Deployments still ENQUEUED or PENDING.
    pub fn live(&self) -> i64 {
        let sql = "SELECT count(*) FROM workflow_status WHERE status IN ('PENDING','ENQUEUED')";
        if self.postgres.is_some() {
            return self.pg_rows(sql)[0][0].parse().unwrap();
        }
        self.db().query_row(sql, [], |r| r.get(0)).unwrap()
    }

    pub fn integrity_ok(&self) {
        if self.postgres.is_some() {
            // PostgreSQL keeps its own pages whole; what must hold is that no attempt is left
            // open once the deployment ended.
            let open = self.pg_rows(
                "SELECT count(*) FROM step_attempts a JOIN workflow_status w USING (workflow_id) \
                 WHERE a.ended_at IS NULL AND w.status IN ('SUCCESS','ERROR')",
            );
            assert_eq!(open[0][0], "0");
            return;
        }
        let v: String = self
            .db()
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, "ok");
    }
}

/// Rows of `sql` from the PostgreSQL database `url`, as strings.
pub fn pg_rows(url: &str, sql: &str) -> Vec<Vec<String>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        client
            .simple_query(sql)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => Some(
                    (0..r.len())
                        .map(|i| r.get(i).unwrap_or("").to_owned())
                        .collect(),
                ),
                _ => None,
            })
            .collect()
    })
}

/// The operator the journal names for these tests' commands: the real user, as the kernel
/// knows it (`USER` is not believed).
pub fn me() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The environment that makes a command act for another operator, `nobody`: what sudo sets.
/// (Believed only when the real user is root, as the tests run; sudo makes it so.)
pub const AS_NOBODY: [(&str, &str); 2] = [("SUDO_USER", "nobody"), ("SUDO_UID", "65534")];

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Everything a command printed, stdout then stderr: what a failed assertion shows (a
/// deployment's final word is on stdout, its progress on stderr).
pub fn said(out: &std::process::Output) -> String {
    format!("{}{}", text(&out.stdout), text(&out.stderr))
}

/// Waits until `cond` holds, failing the test after `limit`.
pub fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An `exec` deploy command that appends `start` and `done` lines to `$FIXTURE/ledger`, with
/// an optional pause in between (`DELAY` seconds from the environment). A target fails while
/// `$FIXTURE/broken-TARGET` exists, and every target waits while `$FIXTURE/gate` exists.
pub const LEDGER_DEPLOY: &str = r#"echo "start $MANENT_IDEMPOTENCY_KEY $MANENT_TARGET $MANENT_ATTEMPT" >> "$FIXTURE/ledger"
      if [ -e "$FIXTURE/broken-$MANENT_TARGET" ]; then echo "broken on purpose: $MANENT_TARGET" >&2; exit 1; fi
      while [ -e "$FIXTURE/gate" ]; do sleep 0.05; done
      sleep "${DELAY:-0}"
      while [ -e "$FIXTURE/hold-before-version-$MANENT_TARGET" ]; do sleep 0.05; done
      mkdir -p "$FIXTURE/fleet/$MANENT_TARGET"
      echo "$MANENT_VERSION" > "$FIXTURE/fleet/$MANENT_TARGET/VERSION"
      while [ -e "$FIXTURE/hold-after-version-$MANENT_TARGET" ]; do sleep 0.05; done
      echo "done $MANENT_IDEMPOTENCY_KEY $MANENT_TARGET $MANENT_ATTEMPT" >> "$FIXTURE/ledger"
      while [ -e "$FIXTURE/hold-after-done-$MANENT_TARGET" ]; do sleep 0.05; done"#;

/// `manent.yml` for ledger fixtures: `exec` passes FIXTURE and DELAY through.
pub const LEDGER_MANENT: &str = "plugins:\n  exec:\n    pass_env: [FIXTURE, DELAY]\n";

/// A descriptor: six targets, rolling two at a time, two in parallel, the ledger deploy, and a
/// rollback that writes the previous version back.
pub fn ledger_app(extra: &str) -> String {
    format!(
        r#"application: web
artifact: {{type: directory, version: "1.0.0"}}
deploy:
  plugin: exec
  params:
    deploy: |
      {LEDGER_DEPLOY}
    current_release: cat "$FIXTURE/fleet/$MANENT_TARGET/VERSION" 2>/dev/null || true
    rollback: |
      echo "rollback $MANENT_IDEMPOTENCY_KEY $MANENT_TARGET $MANENT_ATTEMPT" >> "$FIXTURE/ledger"
      echo "$MANENT_TO_VERSION" > "$FIXTURE/fleet/$MANENT_TARGET/VERSION"
strategy:
  rolling: {{batch_size: 2}}
parallelism: 2
max_retries: 2
backoff: {{base: 10ms, max: 50ms}}
{extra}
environments:
  prod:
    targets:
      - {{name: web-1}}
      - {{name: web-2}}
      - {{name: web-3}}
      - {{name: web-4}}
      - {{name: web-5}}
      - {{name: web-6}}
"#
    )
}

impl Drop for Fixture {
    /// A worker a command started for this fixture ends with it (not when it notices its
    /// database gone).
    fn drop(&mut self) {
        self.stop_workers();
    }
}

/// Asks a manent process to stop, as an operator's `kill` would.
pub fn sigterm(child: &Child) {
    let ok = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(ok.success());
}

/// Waits until a `manent worker` says it runs (its engine started, its signals taken), then
/// keeps reading its stderr on a thread: the lines so far are in what it returns.
pub fn wait_ready(worker: &mut Child) -> std::sync::Arc<std::sync::Mutex<String>> {
    use std::io::BufRead;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let stderr = worker.stderr.take().unwrap();
    let lines = seen.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let started = line.contains("Ctrl-C or SIGTERM stops it");
            lines.lock().unwrap().push_str(&format!("{line}\n"));
            if started {
                let _ = ready_tx.send(());
            }
        }
    });
    if ready.recv_timeout(Duration::from_secs(30)).is_err() {
        panic!("the worker did not start: {}", seen.lock().unwrap());
    }
    seen
}
