//! Engine overhead: a `simulate` deploy of 10,000 targets at parallelism 100 with no simulated
//! latency, so every microsecond measured is the engine's (plan, steps, checkpoints, group
//! commit). Run with `cargo bench --bench engine`; it prints ratios against baselines measured
//! in the same run: the same 10,000 plugin calls without any durability, and `synchronous=FULL`
//! against `NORMAL`, and the operational layer on (Prometheus metrics served, the JSON log
//! file written) against off, interleaved.
//!
//! With PostgreSQL installed (Debian's `postgresql`; the benchmark starts its own server, with
//! fsync on, in a temporary directory), the same deploy on PostgreSQL beside SQLite, then two
//! measurements with the real `manent` binary: failover (engine A killed with SIGKILL mid-deploy
//! → engine B's first completed step, lease 3 s) and recovery (100 deployments in flight at a
//! SIGKILL → every one's next completed step after the restart), on both stores.
//!
//! Under `cargo test`, a smoke run at tiny sizes (see `support/smoke.rs`).

#![allow(
    clippy::unwrap_used,
    clippy::print_stdout,
    reason = "a benchmark's report"
)]

#[path = "support/runtime.rs"]
mod runtime;
#[path = "support/smoke.rs"]
mod smoke;

#[path = "../tests/it/support/postgres.rs"]
mod pg;
#[path = "../tests/it/support/ports.rs"]
mod ports;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use manent::config::Config;
use manent::deploy::submit::{self, Submission};
use manent::engine::Engine;
use manent::operator::Operator;
use manent::plugin::{Logger, Request, Secrets, Target, for_each_target};
use manent::workflow::Synchronous;

// What ships: manent's binary allocates with jemalloc.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The deploy's targets: 10,000 (200 in a smoke run).
fn targets() -> usize {
    smoke::size(10_000, 200)
}

const PARALLELISM: u32 = 100;

fn fixture(sync: &str) -> (tempfile::TempDir, Config) {
    fixture_with(sync, "")
}

/// Metrics on an ephemeral port and the JSON log file in the fixture's directory.
const TELEMETRY: &str = "metrics:\n  listen: 127.0.0.1:0\nlog_file:\n  dir: logs\n";

/// The inputs key the benchmark's engines on PostgreSQL share (`engine.inputs_key`).
const PG_KEY: &str = "secrets: {pg_inputs: \"value:manent-bench-inputs-key-0123456789abcdef\"}\n";

fn fixture_with(sync: &str, extra: &str) -> (tempfile::TempDir, Config) {
    let dir = tempfile::tempdir().unwrap();
    let manent = format!(
        "plugins:\n  fleet:\n    builtin: simulate\n    log_lines: 0\nengine:\n  synchronous: {sync}\n{}{extra}",
        if extra.contains("database:") {
            "  inputs_key: pg_inputs\n"
        } else {
            ""
        }
    );
    std::fs::write(dir.path().join("manent.yml"), manent).unwrap();
    std::fs::create_dir(dir.path().join("apps")).unwrap();
    let mut app = format!(
        "application: bench\nartifact: {{version: \"1\"}}\ndeploy: {{plugin: fleet}}\n\
         parallelism: {PARALLELISM}\nmax_retries: 0\nenvironments:\n  prod:\n    targets:\n"
    );
    for i in 0..targets() {
        app.push_str(&format!("      - {{name: t{i:05}}}\n"));
    }
    std::fs::write(dir.path().join("apps/bench.yml"), app).unwrap();
    let config = Config::load(&dir.path().join("manent.yml"), &manent::plugin::catalog()).unwrap();
    (dir, config)
}

struct Run {
    elapsed: Duration,
    checkpoints: i64,
    transactions_hint: i64,
    peak_rss_kib: u64,
}

fn reset_peak_rss() {
    // Linux: writing 5 resets VmHWM, so each run's peak is its own.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

async fn engine_run(sync: &str) -> Run {
    engine_run_with(sync, "").await
}

async fn engine_run_with(sync: &str, extra: &str) -> Run {
    let (dir, config) = fixture_with(sync, extra);
    assert_eq!(
        config.engine.synchronous,
        if sync == "full" {
            Synchronous::Full
        } else {
            Synchronous::Normal
        }
    );
    let spec = config.environment("bench", "prod").unwrap();
    reset_peak_rss();
    let started = Instant::now();
    let engine = Engine::start(&config).await.unwrap();
    let op = Operator {
        name: "bench".into(),
        client: None,
    };
    let sub = Submission::new(&op, None, &config.engine);
    let id = submit::deploy(engine.store().as_ref(), &spec, false, &sub)
        .await
        .unwrap()
        .id()
        .to_owned();
    engine.run(&id).await.unwrap();
    let row = engine.wait(&id).await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(row.status.as_str(), "SUCCESS", "{row:?}");
    let history = engine.store().history(&id).await.unwrap();
    engine.shutdown().await;
    if extra.contains("log_file") {
        let lines: usize = std::fs::read_dir(dir.path().join("logs"))
            .unwrap()
            .map(|f| {
                std::fs::read_to_string(f.unwrap().path())
                    .unwrap()
                    .lines()
                    .count()
            })
            .sum();
        assert!(lines > targets(), "the JSON log file has {lines} lines");
        println!("  (telemetry run: {lines} lines in the JSON log file)");
    }
    drop(dir);
    Run {
        elapsed,
        checkpoints: history.steps.len() as i64,
        transactions_hint: (history.steps.len() + history.attempts.len()) as i64,
        peak_rss_kib: peak_rss_kib(),
    }
}

/// The same plugin calls with no engine at all: what the work costs without durability.
async fn baseline() -> Duration {
    let (_dir, config) = fixture("full");
    let spec = config.environment("bench", "prod").unwrap();
    let factory = manent::plugin::builtin::factory("simulate").unwrap();
    let plugin = factory(&serde_json::json!({"log_lines": 0}), Logger::discard()).unwrap();
    let all: Vec<Target> = spec
        .targets
        .iter()
        .map(|t| Target {
            host: t.host.clone(),
            moniker: spec.moniker(t).unwrap(),
            labels: t.labels.clone(),
        })
        .collect();
    let req = manent::deploy::steps::request(
        &spec,
        "baseline",
        manent::deploy::steps::Call {
            targets: all,
            parallelism: PARALLELISM,
            secrets: Secrets::none(),
            step: None,
            processes: &manent::plugin::Processes::none(),
        },
    );
    let template = Request {
        targets: Vec::new(),
        ..req.clone()
    };
    let started = Instant::now();
    let (results, err) = for_each_target(&req, |t| {
        let plugin = plugin.clone();
        let mut one = template.clone();
        one.targets = vec![t];
        async move { plugin.deploy(&one).await.map(|r| r.targets[0].clone()) }
    })
    .await;
    assert!(err.is_none() && results.len() == targets());
    started.elapsed()
}

fn main() {
    if !smoke::begin("engine", Duration::from_secs(3 * 3600)) {
        return;
    }
    // `MANENT_BENCH_ONLY=reads`: the reads at scale alone (`postgres`: see below).
    if std::env::var("MANENT_BENCH_ONLY").is_ok_and(|o| o == "reads") {
        reads();
        return;
    }
    let rt = runtime::runtime();
    let base = rt.block_on(baseline());
    let full = rt.block_on(engine_run("full"));
    // `MANENT_BENCH_ONLY=postgres`: the PostgreSQL rows beside one SQLite run.
    if std::env::var("MANENT_BENCH_ONLY").is_ok_and(|o| o == "postgres") {
        shared(&rt, base, &full);
        return;
    }
    let normal = rt.block_on(engine_run("normal"));
    // Telemetry off and on, in turns (A B A B A B): the median of the per-round ratios.
    let mut rounds = Vec::new();
    let (mut off_best, mut on_best) = (Duration::MAX, Duration::MAX);
    for _ in 0..smoke::size(3, 1) {
        let off = rt.block_on(engine_run("full")).elapsed;
        let on = rt.block_on(engine_run_with("full", TELEMETRY)).elapsed;
        rounds.push(on.as_secs_f64() / off.as_secs_f64());
        off_best = off_best.min(off);
        on_best = on_best.min(on);
    }
    rounds.sort_by(f64::total_cmp);
    let per = |d: Duration| d.as_secs_f64() * 1000.0 / targets() as f64;
    println!(
        "simulate deploy: {} targets, parallelism {PARALLELISM}, zero simulated latency",
        targets()
    );
    println!(
        "baseline (plugin calls, no engine):  {:>8.1} ms total  {:.4} ms/target",
        base.as_secs_f64() * 1e3,
        per(base)
    );
    for (name, r) in [("synchronous=FULL", &full), ("synchronous=NORMAL", &normal)] {
        let overhead = per(r.elapsed) - per(base);
        println!(
            "{name:<19} {:>8.1} ms total  {:.4} ms/target-step overhead  {:>8.0} checkpoints/s  {:>8.0} step rows/s  peak RSS {:.1} MiB  ({:.1}x baseline)",
            r.elapsed.as_secs_f64() * 1e3,
            overhead,
            r.checkpoints as f64 / r.elapsed.as_secs_f64(),
            r.transactions_hint as f64 / r.elapsed.as_secs_f64(),
            r.peak_rss_kib as f64 / 1024.0,
            r.elapsed.as_secs_f64() / base.as_secs_f64()
        );
    }
    println!(
        "FULL / NORMAL time ratio: {:.2}",
        full.elapsed.as_secs_f64() / normal.elapsed.as_secs_f64()
    );
    println!(
        "metrics + JSON log file on vs off (synchronous=FULL, {} interleaved rounds): \
         {:.4} vs {:.4} ms/target-step overhead (best of each); on/off time ratio median {:.3} \
         (rounds {})",
        rounds.len(),
        per(on_best) - per(base),
        per(off_best) - per(base),
        rounds[rounds.len() / 2],
        rounds
            .iter()
            .map(|r| format!("{r:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("goal: < 0.5 ms overhead per target-step, < 100 MiB; telemetry on within 10 % of off");
    shared(&rt, base, &full);
    reads();
}

/// One command of the real binary: its wall time and peak RSS (KiB), the child's own as the
/// kernel reports it when reaping it (wait4) — no `/usr/bin/time` started in front of it, whose
/// own start would weigh on every row and lean each ratio towards 1×.
#[allow(
    unsafe_code,
    clippy::zombie_processes,
    reason = "wait4(2) reaps the child this function spawned"
)]
fn timed(dir: &std::path::Path, args: &[&str]) -> (Duration, Option<u64>) {
    let mut c = smoke::command(env!("CARGO_BIN_EXE_manent"));
    c.arg("--config")
        .arg(dir.join("manent.yml"))
        .args(args)
        .env("MANENT_LOG", "error")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let t0 = Instant::now();
    let child = c.spawn().unwrap();
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status = 0;
    // SAFETY: rusage is plain integers, valid zeroed.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: reaps this function's own child once (std's handle is never waited on after);
    // `status` and `usage` are live for the call.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let took = t0.elapsed();
    assert_eq!(reaped, pid, "wait4: {}", std::io::Error::last_os_error());
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "manent {args:?} failed ({status:#x})"
    );
    (took, u64::try_from(usage.ru_maxrss).ok())
}

/// The read verbs and the deploy at 1,000, 10,000 and 100,000 simulated targets (or the sizes
/// in MANENT_BENCH_READS, comma-separated): each one's time and peak RSS, and its cost per
/// target, against `manent validate` measured in the same run.
fn reads() {
    let sizes: Vec<usize> = std::env::var("MANENT_BENCH_READS")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| smoke::size(vec![1_000, 10_000, 100_000], vec![100]));
    small_deploys();
    println!("\nreads at scale (the manent binary; simulate, parallelism 100, zero latency):");
    for n in sizes {
        let mut app = String::from(
            "application: big\nartifact: {version: \"1\"}\ndeploy: {plugin: fleet}\n\
             parallelism: 100\nenvironments:\n  prod:\n    targets:\n",
        );
        for t in 0..n {
            app.push_str(&format!("      - {{name: t{t}}}\n"));
        }
        let dir = fleet("big", &app);
        let (validate, _) = timed(dir.path(), &["validate"]);
        let (deploy, deploy_rss) = timed(dir.path(), &["deploy", "big", "prod", "--yes"]);
        let db = manent::deploy::records::open(
            &dir.path().join(".manent/manent.db"),
            Synchronous::Full,
            false,
        )
        .unwrap();
        let id = runtime::runtime()
            .block_on(async {
                use manent::workflow::store::Store;
                db.workflows(manent::workflow::store::WorkflowQuery {
                    limit: 10,
                    ..Default::default()
                })
                .await
            })
            .unwrap()[0]
            .id
            .clone();
        drop(db);
        let mib =
            |k: Option<u64>| k.map_or("?".to_owned(), |k| format!("{:.0}", k as f64 / 1024.0));
        println!(
            "  {n:>7} targets: validate {:>7.0} ms; deploy {:>8.0} ms ({:.3} ms/target, {} MiB)",
            validate.as_secs_f64() * 1e3,
            deploy.as_secs_f64() * 1e3,
            deploy.as_secs_f64() * 1e3 / n as f64,
            mib(deploy_rss)
        );
        for args in [
            vec!["status"],
            vec!["status", id.as_str()],
            vec!["status", id.as_str(), "--json"],
            vec!["history", "big", "prod"],
            vec!["inbox"],
        ] {
            let (t, rss) = timed(dir.path(), &args);
            println!(
                "      {:<32} {:>7.0} ms  {:>5} MiB  ({:.1}x validate, {:.4} ms/target)",
                args.join(" ").replace(&id, "ID"),
                t.as_secs_f64() * 1e3,
                mib(rss),
                t.as_secs_f64() / validate.as_secs_f64(),
                t.as_secs_f64() * 1e3 / n as f64
            );
        }
        match console_first_screen(dir.path(), n) {
            Some((t, rss, floor)) => println!(
                "      {:<32} {:>7.0} ms  {:>5} MiB  ({:.1}x validate, {:.4} ms/target; \
                 a shell printing the same screen through tmux {:.0} ms: {:.1}x, +{:.0} ms)",
                "console: first screen",
                t.as_secs_f64() * 1e3,
                mib(rss),
                t.as_secs_f64() / validate.as_secs_f64(),
                t.as_secs_f64() * 1e3 / n as f64,
                floor.as_secs_f64() * 1e3,
                t.as_secs_f64() / floor.as_secs_f64(),
                (t.as_secs_f64() - floor.as_secs_f64()) * 1e3
            ),
            None => println!("      console: tmux is not installed here; its row skipped"),
        }
    }
    println!(
        "  goal at 100,000 targets: each read and the console's first screen < 1 s and < 200 MiB, \
         the deploy < 60 s"
    );
}

/// A directory with a zero-latency `simulate` fleet named `fleet` in manent.yml and
/// `descriptor` as apps/`name`.yml.
fn fleet(name: &str, descriptor: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("manent.yml"),
        "plugins:\n  fleet:\n    builtin: simulate\n    log_lines: 0\n",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("apps")).unwrap();
    std::fs::write(dir.path().join(format!("apps/{name}.yml")), descriptor).unwrap();
    dir
}

/// The command an operator runs most: a 2-target deploy on a zero-latency fleet, from the
/// process's start to its exit (the engine in the command's process), against `manent
/// validate` (the same process start and configuration read, no engine) in the same run,
/// interleaved.
fn small_deploys() {
    let dir = fleet(
        "web",
        "application: web\nartifact: {version: \"1\"}\ndeploy: {plugin: fleet}\n\
         environments:\n  prod:\n    targets:\n      - {name: web-1}\n      - {name: web-2}\n",
    );
    let rounds = smoke::size(30, 2);
    let (mut validate, mut deploy) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        validate.push(timed(dir.path(), &["validate"]).0);
        let version = format!("2.0.{i}");
        let args = ["deploy", "web", "prod", "--yes", "--version", &version];
        deploy.push(timed(dir.path(), &args).0);
    }
    let pct = |v: &mut Vec<Duration>, p: usize| {
        v.sort();
        v[(v.len() * p / 100).min(v.len() - 1)].as_secs_f64() * 1e3
    };
    let (v50, v95) = (pct(&mut validate, 50), pct(&mut validate, 95));
    let (d50, d95) = (pct(&mut deploy, 50), pct(&mut deploy, 95));
    println!(
        "\na 2-target deploy, zero latency, {rounds} runs (the manent binary, start to exit):"
    );
    println!("  manent validate           p50 {v50:>6.1} ms  p95 {v95:>6.1} ms");
    println!(
        "  manent deploy --yes       p50 {d50:>6.1} ms  p95 {d95:>6.1} ms  ({:.1}x / {:.1}x validate)",
        d50 / v50,
        d95 / v95
    );
}

/// A command in its own tmux server at 80×24, killed when dropped.
struct Pane {
    socket: PathBuf,
    started: Instant,
}

impl Pane {
    /// Starts `command`; None without tmux.
    fn start(socket: PathBuf, command: &str) -> Option<Pane> {
        smoke::tmux_server(socket.clone());
        let started = Instant::now();
        let pane = Pane { socket, started };
        let out = pane
            .tmux(&["new-session", "-d", "-x", "80", "-y", "24", command])
            .ok()?;
        assert!(out.status.success(), "tmux could not start {command}");
        Some(pane)
    }

    fn tmux(&self, args: &[&str]) -> std::io::Result<std::process::Output> {
        std::process::Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
    }

    fn pid(&self) -> String {
        let out = self.tmux(&["display", "-p", "#{pane_pid}"]).unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The time from the start to the first screen holding `marker`, and that screen.
    fn until(&self, marker: &str) -> (Duration, String) {
        while self.started.elapsed() < Duration::from_secs(120) {
            let screen = self.tmux(&["capture-pane", "-p"]).unwrap();
            let screen = String::from_utf8_lossy(&screen.stdout).into_owned();
            if screen.contains(marker) {
                return (self.started.elapsed(), screen);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        panic!("the screen never showed {marker:?}");
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// `manent console` in tmux at 80×24: the time from its start to the first screen that lists
/// the finished deployment of `n` targets (`n/n` in its DONE column), and the console's peak
/// RSS (KiB) by then; and, the baseline, the time a shell takes to print that same screen
/// through tmux. None without tmux.
fn console_first_screen(
    dir: &std::path::Path,
    n: usize,
) -> Option<(Duration, Option<u64>, Duration)> {
    let command = format!(
        "exec env MANENT_LOG=error {} --config {} console",
        env!("CARGO_BIN_EXE_manent"),
        dir.join("manent.yml").display()
    );
    let pane = Pane::start(dir.join("tmux.sock"), &command)?;
    let pid = pane.pid();
    let (took, screen) = pane.until(&format!("{n}/{n}"));
    let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?.to_owned();
            line.split_whitespace().nth(1)?.parse().ok()
        });
    drop(pane);
    // The hung-up console's engine has nothing to do and exits; wait for it, so the next size's
    // deploy has the machine to itself.
    let gone = Instant::now();
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && gone.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The same text, printed by a shell in a fresh tmux: what any program's first screen costs.
    let text = dir.join("screen.txt");
    std::fs::write(&text, screen.trim_end()).unwrap();
    let shell = format!("cat {}; exec sleep 600", text.display());
    let pane = Pane::start(dir.join("tmux-shell.sock"), &shell)?;
    let (floor, _) = pane.until(&format!("{n}/{n}"));
    Some((took, rss, floor))
}

/// The PostgreSQL rows: the same deploy, failover and recovery.
fn shared(rt: &tokio::runtime::Runtime, base: Duration, sqlite: &Run) {
    let Some(server) = pg::Postgres::start_durable() else {
        println!("\nPostgreSQL: not installed here (apt-get install postgresql); its rows skipped");
        return;
    };
    let per = |d: Duration| d.as_secs_f64() * 1000.0 / targets() as f64;
    let url = server.create_db("bench");
    let r = rt.block_on(engine_run_with(
        "full",
        &format!("database: \"{url}\"\n{PG_KEY}"),
    ));
    println!("\nPostgreSQL (fsync on, Unix socket, same machine):");
    for (name, r) in [("SQLite FULL", sqlite), ("PostgreSQL", &r)] {
        println!(
            "  {name:<12} {:>8.1} ms total  {:.4} ms/target-step overhead  {:>8.0} checkpoints/s  peak RSS {:.1} MiB",
            r.elapsed.as_secs_f64() * 1e3,
            per(r.elapsed) - per(base),
            r.checkpoints as f64 / r.elapsed.as_secs_f64(),
            r.peak_rss_kib as f64 / 1024.0,
        );
    }
    println!(
        "  PostgreSQL / SQLite FULL time ratio: {:.2}",
        r.elapsed.as_secs_f64() / sqlite.elapsed.as_secs_f64()
    );
    println!("  goal: ≤ 0.25 ms overhead per target-step on PostgreSQL");
    let failover = failover(&server);
    // A's last renewal came up to a third of the lease before the kill, so the takeover can
    // come in less than a lease from the kill.
    println!(
        "  failover: SIGKILL of engine A mid-deploy → engine B's first completed step: {:.2} s \
         (lease 3 s, renewed every 1 s; goal: at most lease + 2 s = 5 s)",
        failover.as_secs_f64(),
    );
    let on_pg = recovery(Some(&server));
    let on_sqlite = recovery(None);
    println!(
        "  recovery: {} deployments in flight at a SIGKILL, restarted → every one's interrupted \
         step started again: SQLite {:.0} ms, PostgreSQL {:.0} ms; → every one's next step \
         completed (each call takes 100–200 ms): SQLite {:.0} ms, PostgreSQL {:.0} ms (goal ≤ \
         150 ms, ≤ 300 ms)",
        in_flight(),
        on_sqlite.0.as_secs_f64() * 1e3,
        on_pg.0.as_secs_f64() * 1e3,
        on_sqlite.1.as_secs_f64() * 1e3,
        on_pg.1.as_secs_f64() * 1e3
    );
}

/// A configuration directory for the real binary: `apps` applications of `targets` simulated
/// targets each, one target at a time, each call taking 100–200 ms.
fn host(url: Option<&str>, id: &str, apps: usize, targets: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let database = url.map_or(String::new(), |u| format!("database: \"{u}\"\n{PG_KEY}"));
    std::fs::write(
        dir.path().join("manent.yml"),
        format!(
            "{database}plugins:\n  fleet:\n    builtin: simulate\n    log_lines: 0\n    \
             latency: {{min: 100ms, max: 200ms}}\nengine:\n  executor_id: {id}\n  lease: 3s\n{}",
            if url.is_some() {
                "  inputs_key: pg_inputs\n"
            } else {
                ""
            }
        ),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("apps")).unwrap();
    for a in 0..apps {
        let mut app = format!(
            "application: app{a:03}\nartifact: {{version: \"1\"}}\ndeploy: {{plugin: fleet}}\n\
             parallelism: 1\nmax_retries: 0\nenvironments:\n  prod:\n    targets:\n"
        );
        for t in 0..targets {
            app.push_str(&format!("      - {{name: t{t:03}}}\n"));
        }
        std::fs::write(dir.path().join(format!("apps/app{a:03}.yml")), app).unwrap();
    }
    dir
}

fn manent(dir: &std::path::Path, args: &[&str]) -> std::process::Command {
    let mut c = smoke::command(env!("CARGO_BIN_EXE_manent"));
    c.arg("--config")
        .arg(dir.join("manent.yml"))
        .args(args)
        .env("MANENT_LOG", "error")
        .env("USER", "bench")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    c
}

/// Completed target steps per deployment, and which engine completed each (from the database).
fn completed(url: Option<&str>, dir: &std::path::Path) -> Vec<(String, String, i64)> {
    counted(
        url,
        dir,
        "SELECT workflow_id, COALESCE(executor_id, ''), count(*) FROM operation_outputs \
         WHERE function_name LIKE 'deploy:%' GROUP BY workflow_id, executor_id",
    )
}

/// Attempts of target steps begun per deployment (the second column is empty).
fn begun(url: Option<&str>, dir: &std::path::Path) -> Vec<(String, String, i64)> {
    counted(
        url,
        dir,
        "SELECT workflow_id, '', count(*) FROM step_attempts \
         WHERE function_name LIKE 'deploy:%' GROUP BY workflow_id",
    )
}

/// Rows of (deployment, text, count) that `sql` selects.
fn counted(url: Option<&str>, dir: &std::path::Path, sql: &str) -> Vec<(String, String, i64)> {
    match url {
        Some(url) => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                tokio::spawn(conn);
                // Before the first engine created the schema there is nothing yet.
                client
                    .query(sql, &[])
                    .await
                    .map(|rows| {
                        rows.iter()
                            .map(|r| (r.get(0), r.get(1), r.get(2)))
                            .collect()
                    })
                    .unwrap_or_default()
            })
        }
        None => {
            let path = dir.join(".manent/manent.db");
            let Ok(c) = rusqlite::Connection::open_with_flags(
                &path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            ) else {
                return Vec::new();
            };
            let _ = c.busy_timeout(Duration::from_secs(5));
            let Ok(mut stmt) = c.prepare(sql) else {
                return Vec::new();
            };
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .map(|rows| rows.filter_map(Result::ok).collect())
                .unwrap_or_default()
        }
    }
}

/// Deployments in flight for the recovery rows.
fn in_flight() -> usize {
    smoke::size(100, 10)
}

fn kill9(child: &mut std::process::Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Engine A deploys; engine B is up; A is killed: the time until B completes a step.
fn failover(server: &pg::Postgres) -> Duration {
    let url = server.create_db("failover");
    let (a, b) = (host(Some(&url), "a", 1, 200), host(Some(&url), "b", 1, 200));
    let mut worker = manent(b.path(), &["worker"]).spawn().unwrap();
    let mut deploy = manent(a.path(), &["deploy", "app000", "prod", "--yes"])
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while completed(Some(&url), a.path())
        .iter()
        .map(|r| r.2)
        .sum::<i64>()
        < 5
    {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "engine A made no progress"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    kill9(&mut deploy);
    let killed = Instant::now();
    let by_b = || {
        completed(Some(&url), a.path())
            .iter()
            .any(|(_, e, n)| e == "b" && *n > 0)
    };
    while !by_b() {
        assert!(
            killed.elapsed() < Duration::from_secs(60),
            "engine B never took over"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = killed.elapsed();
    kill9(&mut worker);
    took
}

/// 100 deployments (10 in a smoke run) in flight in one engine, SIGKILL, restart: the time until
/// every one has started its interrupted step again, and until every one has completed its
/// next step.
fn recovery(server: Option<&pg::Postgres>) -> (Duration, Duration) {
    let url = server.map(|s| s.create_db("recovery"));
    let n = in_flight();
    let dir = host(url.as_deref(), "r", n, 20);
    let mut worker = manent(dir.path(), &["worker"]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // Submitted beside the running engine, which claims them.
    let rt = runtime::runtime();
    rt.block_on(async {
        let config =
            Config::load(&dir.path().join("manent.yml"), &manent::plugin::catalog()).unwrap();
        let db = manent::deploy::records::open_configured(&config, false)
            .await
            .unwrap();
        let op = Operator {
            name: "bench".into(),
            client: None,
        };
        let sub = Submission::new(&op, None, &config.engine);
        for a in 0..n {
            let spec = config.environment(&format!("app{a:03}"), "prod").unwrap();
            submit::deploy(db.as_ref(), &spec, false, &sub)
                .await
                .unwrap();
        }
    });
    let count = |rows: Vec<(String, String, i64)>| -> std::collections::HashMap<String, i64> {
        let mut m = std::collections::HashMap::new();
        for (id, _, n) in rows {
            *m.entry(id).or_default() += n;
        }
        m
    };
    let counts = || count(completed(url.as_deref(), dir.path()));
    let attempts = || count(begun(url.as_deref(), dir.path()));
    let t0 = Instant::now();
    loop {
        let c = counts();
        if c.len() == n && c.values().all(|n| *n >= 2) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the {n} deployments did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    kill9(&mut worker);
    let before = counts();
    let before_attempts = attempts();
    let mut worker = manent(dir.path(), &["worker"]).spawn().unwrap();
    let restarted = Instant::now();
    let mut started_again = None;
    loop {
        if started_again.is_none() {
            let now = attempts();
            if before_attempts
                .iter()
                .all(|(id, n)| now.get(id).is_some_and(|m| m > n))
            {
                started_again = Some(restarted.elapsed());
            }
        }
        let now = counts();
        if before
            .iter()
            .all(|(id, n)| now.get(id).is_some_and(|m| m > n))
        {
            break;
        }
        assert!(
            restarted.elapsed() < Duration::from_secs(120),
            "the deployments did not resume"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = restarted.elapsed();
    kill9(&mut worker);
    (started_again.unwrap_or(took), took)
}
