//! The console's costs, each against a baseline measured in the same run. Run with
//! `cargo bench --bench console`; under `cargo test`, a smoke run (see `support/smoke.rs`).
//!
//! 1. Frame time at 200×60 with 1,000 targets and 10,000 log lines, against an empty frame and
//!    the demo's 36 targets: the whole of `Terminal::draw` (the views, ratatui's diff, the escape
//!    sequences), one changed log line and a clock tick per frame.
//! 2. Bytes written to the terminal per second while the demo's deploy runs at 120×40, through
//!    the console's real event loop; the baseline is the same frames redrawn in full.
//! 3. Log lines per second from a plugin's stderr (a real plugin process writing as fast as it
//!    can) to the log pane and to the database; the baseline is the same plugin writing into a
//!    pipe nobody slow reads, so the ratio says whether manent ever made it wait.

#![allow(
    clippy::unwrap_used,
    clippy::print_stdout,
    reason = "a benchmark's report"
)]

#[path = "../tests/it/console/fixture.rs"]
mod fixture;

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use manent::config::Config;
use manent::console::action::Action;
use manent::console::app::App;
use manent::console::theme::Theme;
use manent::console::{run, view};
use manent::demo;
use manent::deploy::state::DeploymentState;
use manent::engine::handle::{self, Command};
use manent::operator::Operator;
use manent::plugin::{Level, LogLine};
use manent::workflow::store::WorkflowStatus;
use ratatui::backend::{Backend, ClearType, CrosstermBackend, WindowSize};
use ratatui::buffer::{Buffer, Cell};
use ratatui::layout::{Position, Rect, Size};
use ratatui::{Terminal, TerminalOptions, Viewport};

// What ships: manent's binary allocates with jemalloc.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[path = "../tests/it/support/go.rs"]
mod go;
#[path = "support/smoke.rs"]
mod smoke;

const MANENT: &str = env!("CARGO_BIN_EXE_manent");
const FIXTURE_PLUGIN: &str = env!("CARGO_BIN_EXE_manent-fixture-plugin");

fn main() {
    if !smoke::begin("console", Duration::from_secs(3600)) {
        return;
    }
    // `MANENT_BENCH_ONLY=flood` runs the log flood alone (for profiling).
    let only_flood = std::env::var("MANENT_BENCH_ONLY").as_deref() == Ok("flood");
    if !only_flood {
        frames();
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if !only_flood {
        rt.block_on(demo_bytes());
    }
    rt.block_on(log_flood());
}

/// Bytes written, nothing kept.
#[derive(Clone, Default)]
struct Counter(Arc<AtomicU64>);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Counter {
    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A terminal of a fixed size that counts what the console writes (ratatui's diff) and what a
/// full redraw of every frame would have written.
struct Metered {
    diffed: CrosstermBackend<Counter>,
    full: CrosstermBackend<Counter>,
    screen: Buffer,
    frames: Arc<AtomicU64>,
}

impl Metered {
    fn new(width: u16, height: u16) -> (Metered, Counter, Counter, Arc<AtomicU64>) {
        let (d, f) = (Counter::default(), Counter::default());
        let frames = Arc::new(AtomicU64::new(0));
        let m = Metered {
            diffed: CrosstermBackend::new(d.clone()),
            full: CrosstermBackend::new(f.clone()),
            screen: Buffer::empty(Rect::new(0, 0, width, height)),
            frames: frames.clone(),
        };
        (m, d, f, frames)
    }
}

/// What the console writes besides frames (its clipboard's OSC 52) goes to both counts.
impl io::Write for Metered {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        io::Write::write_all(&mut self.full, buf)?;
        io::Write::write_all(&mut self.diffed, buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::Write::flush(&mut self.full)?;
        io::Write::flush(&mut self.diffed)
    }
}

impl Backend for Metered {
    type Error = io::Error;

    fn draw<'a, I>(&mut self, content: I) -> io::Result<()>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        let changed: Vec<(u16, u16, &Cell)> = content.collect();
        for (x, y, c) in &changed {
            self.screen[(*x, *y)] = (*c).clone();
        }
        self.diffed.draw(changed.into_iter())
    }
    fn hide_cursor(&mut self) -> io::Result<()> {
        self.diffed.hide_cursor()
    }
    fn show_cursor(&mut self) -> io::Result<()> {
        self.diffed.show_cursor()
    }
    fn get_cursor_position(&mut self) -> io::Result<Position> {
        Ok(Position::ORIGIN)
    }
    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> io::Result<()> {
        self.diffed.set_cursor_position(position)
    }
    fn clear(&mut self) -> io::Result<()> {
        self.screen.reset();
        self.diffed.clear()
    }
    fn clear_region(&mut self, clear_type: ClearType) -> io::Result<()> {
        self.diffed.clear_region(clear_type)
    }
    fn size(&self) -> io::Result<Size> {
        Ok(self.screen.area.as_size())
    }
    fn window_size(&mut self) -> io::Result<WindowSize> {
        Ok(WindowSize {
            columns_rows: self.screen.area.as_size(),
            pixels: Size::default(),
        })
    }
    fn flush(&mut self) -> io::Result<()> {
        // A frame ends here: the full-redraw baseline writes every cell of it.
        self.frames.fetch_add(1, Ordering::Relaxed);
        let area = self.screen.area;
        let all = area
            .positions()
            .map(|p| (p.x, p.y, &self.screen[(p.x, p.y)]));
        self.full.draw(all)?;
        Backend::flush(&mut self.full)?;
        Backend::flush(&mut self.diffed)
    }
}

fn fixed(width: u16, height: u16) -> TerminalOptions {
    TerminalOptions {
        viewport: Viewport::Fixed(Rect::new(0, 0, width, height)),
    }
}

fn log_line(i: usize, at: i64) -> LogLine {
    let t = format!("web-{:04}", i % 1000 + 1);
    LogLine {
        at,
        level: [Level::Info, Level::Debug, Level::Warn][i % 3],
        source: "fleet".into(),
        deployment_id: Some("dep-20261129-100000-aaaa".into()),
        target: Some(t.clone()),
        moniker: None,
        message: format!("simulated deploy on {t}: checking health ({i})"),
        attrs: Default::default(),
    }
}

/// The fixture's running deployment grown to `n` targets in batches of 50, with 10,000 lines.
fn big_app(n: usize) -> App {
    let mut snap = fixture::snapshot();
    let d = &mut snap.deployments[0];
    let template = d.targets.clone();
    d.targets = (0..n)
        .map(|i| {
            let mut t = template[i % template.len()].clone();
            t.name = format!("web-{:04}", i + 1);
            t.moniker = format!("prod::shop::fleet::{}", t.name);
            t.batch = u32::try_from(i / 50 + 1).unwrap();
            t
        })
        .collect();
    d.batches = u32::try_from(n.div_ceil(50)).unwrap();
    let mut app = App::new(false, fixture::NOW);
    app.update(Action::Snapshot(Arc::new(snap)));
    for i in 0..10_000 {
        app.update(Action::Log(
            log_line(i, fixture::NOW - 10_000 + i as i64).into(),
        ));
    }
    app.show("dep-20261129-100000-aaaa".into());
    app
}

struct FrameStats {
    mean_ms: f64,
    p99_ms: f64,
}

/// Draws `frames` frames of `app` at `w`×`h`, each after one new log line and a clock tick.
fn time_frames(app: &mut App, theme: &Theme, empty: bool, frames: usize) -> FrameStats {
    let mut term =
        Terminal::with_options(CrosstermBackend::new(Counter::default()), fixed(200, 60)).unwrap();
    let mut times = Vec::with_capacity(frames);
    for i in 0..frames + 50 {
        let now = fixture::NOW + i as i64 * 1000;
        app.update(Action::Tick(now));
        app.update(Action::Log(log_line(10_000 + i, now).into()));
        let start = Instant::now();
        if empty {
            term.draw(|_| {}).unwrap();
        } else {
            term.draw(|f| view::render(f, app, theme)).unwrap();
        }
        if i >= 50 {
            times.push(start.elapsed().as_secs_f64() * 1000.0);
        }
    }
    times.sort_by(f64::total_cmp);
    FrameStats {
        mean_ms: times.iter().sum::<f64>() / times.len() as f64,
        p99_ms: times[times.len() * 99 / 100],
    }
}

fn frames() {
    let theme = Theme::load("default").unwrap();
    let (n, targets) = smoke::size((500, 1000), (20, 50));
    println!("frame time at 200x60 ({n} frames each, one new log line and a tick per frame):");
    let baseline = time_frames(&mut big_app(targets), &theme, true, n);
    let mut small = fixture::app_on_deployment("dep-20261129-100000-aaaa");
    let demo_size = time_frames(&mut small, &theme, false, n);
    let mut big = big_app(targets);
    let deployment = time_frames(&mut big, &theme, false, n);
    let mut filtered = big_app(targets);
    filtered.logs.filter.parse_into("level:warn web-0999");
    let searched = time_frames(&mut filtered, &theme, false, n);
    let mut home = big_app(targets);
    home.update(Action::Back);
    let home_t = time_frames(&mut home, &theme, false, n);
    let row = |name: &str, s: &FrameStats| {
        println!(
            "  {name:<52} mean {:>7.3} ms  p99 {:>7.3} ms  {:>5.1}x empty",
            s.mean_ms,
            s.p99_ms,
            s.mean_ms / baseline.mean_ms
        );
    };
    row("empty frame (baseline)", &baseline);
    row("deployment, 36 targets, 40 lines (the demo)", &demo_size);
    row(
        &format!("deployment, {targets} targets, 10,000 lines, following"),
        &deployment,
    );
    row(
        "same, log filter `level:warn web-0999` over 10,000",
        &searched,
    );
    row(
        &format!("home, with the {targets}-target deployment"),
        &home_t,
    );
}

/// The demo's files, served by the `manent` binary this benchmark was built with.
async fn demo_config(dir: &Path) -> Config {
    let d = demo::prepare(Some(dir), Path::new(MANENT), true)
        .await
        .unwrap();
    Config::load(&d.config, &manent::plugin::catalog()).unwrap()
}

fn bench_operator() -> Operator {
    Operator {
        name: "bench".into(),
        client: None,
    }
}

async fn demo_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let config = demo_config(dir.path()).await;
    let h = handle::open(config, bench_operator()).await.unwrap();
    let (backend, diffed, full, frames) = Metered::new(120, 40);
    let mut term = Terminal::with_options(backend, fixed(120, 40)).unwrap();
    let theme = Theme::load("default").unwrap();
    let mut app = App::new(false, manent::sys::now_ms());
    app.ui.follow_next = true;
    // Ends the loop when the demo's deploy has finished; marks where the steady state starts
    // (the deploy running, the first full paint done).
    let mut snaps = h.snapshot.clone();
    let steady = Arc::new(std::sync::Mutex::new(None::<(Instant, u64, u64, u64)>));
    let (d2, f2, fr2, steady2) = (diffed.clone(), full.clone(), frames.clone(), steady.clone());
    let finished = async move {
        let mut seen_running = false;
        // The demo's deploy is a canary: it ends its part when the candidate is on every
        // target and it waits at its first weight for the operator (or when it settles).
        let bound = Instant::now() + Duration::from_secs(180);
        loop {
            assert!(
                Instant::now() < bound,
                "the demo's deploy did not reach its first pause within 3 minutes"
            );
            let _ = tokio::time::timeout(Duration::from_millis(250), snaps.changed()).await;
            let snap = snaps.borrow_and_update().clone();
            let Some(d) = snap.deployments.iter().find(|d| d.version == "2.4.0") else {
                continue;
            };
            let waits = matches!(
                d.state,
                DeploymentState::CanaryPaused
                    | DeploymentState::Paused
                    | DeploymentState::FailedAwaiting
            );
            let running =
                matches!(d.status, WorkflowStatus::Pending | WorkflowStatus::Enqueued) && !waits;
            if running && !seen_running {
                seen_running = true;
                tokio::time::sleep(Duration::from_secs(1)).await;
                *steady2.lock().unwrap() = Some((
                    Instant::now(),
                    d2.get(),
                    f2.get(),
                    fr2.load(Ordering::Relaxed),
                ));
            }
            if seen_running && !running {
                return run::Exit::Hangup;
            }
        }
    };
    let started = Instant::now();
    let ended = run::run(
        &mut term,
        futures::stream::pending(),
        &h,
        &mut app,
        (&theme, manent::console::term::Caps::default()),
        finished,
    )
    .await;
    let total = started.elapsed();
    let (t0, d0, f0, fr0) = steady.lock().unwrap().unwrap();
    let secs = t0.elapsed().as_secs_f64();
    let (d, f, fr) = (
        diffed.get() - d0,
        full.get() - f0,
        frames.load(Ordering::Relaxed) - fr0,
    );
    println!(
        "\nterminal output at 120x40 while the demo's canary goes to 36 targets ({:.1} s, {ended:?}):",
        total.as_secs_f64()
    );
    println!(
        "  steady state ({secs:.1} s, {fr} frames, {:.1} frames/s): manent writes {:.1} KB/s; \
         redrawing every frame in full would write {:.1} KB/s ({:.1}x more)",
        fr as f64 / secs,
        d as f64 / secs / 1000.0,
        f as f64 / secs / 1000.0,
        f as f64 / d.max(1) as f64
    );
    println!(
        "  whole run including the first paint: {:.1} KB in {:.1} s",
        diffed.get() as f64 / 1000.0,
        total.as_secs_f64()
    );
    if let Some(engine) = h.close().await {
        engine.shutdown().await;
    }
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// The fixture plugin writing `n` lines into a pipe that a thread drains: how fast it writes
/// when nothing makes it wait, and the longest any one line waited. Microseconds.
fn unhindered_write_us(n: u64) -> (u64, u64) {
    let mut child = smoke::command(FIXTURE_PLUGIN)
        .env("FIXTURE_START", "flood")
        .env("FIXTURE_FLOOD", n.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let drain = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        while err.read(&mut buf).unwrap_or(0) > 0 {}
    });
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child.wait().unwrap();
    drain.join().unwrap();
    two_numbers(&out)
}

fn two_numbers(s: &str) -> (u64, u64) {
    let mut it = s.split_whitespace().map(|n| n.parse().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

fn flood_fixture(dir: &Path, n: u64) -> (Config, PathBuf) {
    let ledger = dir.join("ledger");
    std::fs::write(
        dir.join("manent.yml"),
        format!("plugins:\n  flood:\n    external:\n      command: {FIXTURE_PLUGIN}\n"),
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("apps")).unwrap();
    std::fs::write(
        dir.join("apps/flood.yml"),
        format!(
            "application: flood\nartifact: {{version: \"1\"}}\ndeploy:\n  plugin: flood\n  \
             params: {{log_lines: {n}, ledger: {}}}\nmax_retries: 0\nenvironments:\n  prod:\n    \
             targets: [{{name: web-01}}]\n",
            ledger.display()
        ),
    )
    .unwrap();
    (
        Config::load(&dir.join("manent.yml"), &manent::plugin::catalog()).unwrap(),
        ledger,
    )
}

async fn log_flood() {
    println!("\nlog lines from a plugin's stderr to the log pane and the database:");
    for n in smoke::size(vec![200_000u64, 1_000_000], vec![2_000]) {
        let (unhindered, unhindered_longest) = unhindered_write_us(n);
        let dir = tempfile::tempdir().unwrap();
        let (config, ledger) = flood_fixture(dir.path(), n);
        let db = config.database.clone();
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        let rss_before = peak_rss_mib();
        let h = handle::open(config, bench_operator()).await.unwrap();
        // The console's side: every line into an App's log pane, as the event loop does.
        let mut rx = h.logs.subscribe();
        let pane = tokio::spawn(async move {
            let mut app = App::new(false, manent::sys::now_ms());
            let (mut got, mut dropped, mut first, mut last) = (0u64, 0u64, None, None);
            loop {
                match rx.recv().await {
                    Ok(l) if l.source == "flood" && l.message.starts_with("fixture line") => {
                        first.get_or_insert_with(Instant::now);
                        got += 1;
                        app.update(Action::Log(l));
                        if got + dropped >= n {
                            last = Some(Instant::now());
                            break;
                        }
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(k)) => {
                        dropped += k;
                        app.update(Action::LogsDropped(k));
                    }
                    Err(_) => break,
                }
            }
            (got, dropped, first, last, app.logs.len())
        });
        h.commands
            .send(Command::Deploy {
                application: "flood".into(),
                environment: "prod".into(),
                version: None,
                dry_run: false,
                reason: None,
                force: false,
            })
            .await
            .unwrap();
        let (got, dropped, first, last, kept) =
            tokio::time::timeout(Duration::from_secs(300), pane)
                .await
                .expect("every line reaches the pane or is counted as dropped")
                .unwrap();
        let (first, last) = (first.unwrap(), last.unwrap());
        // The database: every line stored.
        let conn = rusqlite::Connection::open(&db).unwrap();
        // Until every line is stored — or, when the store fell behind and counted lines as not
        // stored (its bounded queue), until the count stops moving: never for ever.
        let (mut stored, mut moved) = (0u64, Instant::now());
        let stored_at = loop {
            // A cheap question (the newest row id, not a scan): the poll must not slow the
            // writer it measures.
            let c: i64 = conn
                .query_row("SELECT COALESCE(MAX(id), 0) FROM logs", [], |r| r.get(0))
                .unwrap_or(0);
            let c = u64::try_from(c).unwrap_or(0);
            if c >= n {
                break Instant::now();
            }
            if c != stored {
                (stored, moved) = (c, Instant::now());
            } else if moved.elapsed() > Duration::from_secs(10) {
                println!("  the database stopped at {c} rows of {n}: the rest were not stored");
                break moved;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let (wrote_us, longest_us) = loop {
            let text = std::fs::read_to_string(&ledger).unwrap_or_default();
            if let Some(line) = text.lines().find_map(|l| l.strip_prefix("logged ")) {
                break two_numbers(line.split_once(' ').unwrap().1);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let peak = peak_rss_mib();
        let pane_s = (last - first).as_secs_f64();
        let db_s = (stored_at - first).as_secs_f64();
        println!(
            "  {n} lines: log pane {:.0} lines/s ({got} shown, {dropped} dropped by the pane, \
             {kept} kept), database {:.0} lines/s",
            (got + dropped) as f64 / pane_s,
            n as f64 / db_s
        );
        println!(
            "    the plugin wrote them in {:.0} ms through manent, {:.0} ms into a bare pipe \
             ({:.2}x); the longest any line waited: {:.1} ms through manent, {:.1} ms into the \
             bare pipe",
            wrote_us as f64 / 1000.0,
            unhindered as f64 / 1000.0,
            wrote_us as f64 / unhindered as f64,
            longest_us as f64 / 1000.0,
            unhindered_longest as f64 / 1000.0,
        );
        println!(
            "    peak memory {:.0} MiB (+{:.0} MiB while flooding)",
            peak,
            peak - rss_before
        );
        // The anchor: go-plugin's own host reading the same flood from the same plugin.
        if let Some(go) = go::go_fixture() {
            let ledger = dir.path().join("go-ledger");
            let out = smoke::command(&go.host)
                .arg(FIXTURE_PLUGIN)
                .args(["flood", &n.to_string()])
                .arg(&ledger)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = std::fs::read_to_string(&ledger).unwrap_or_default();
            if let Some(line) = text.lines().find_map(|l| l.strip_prefix("logged ")) {
                let (go_us, go_longest) = two_numbers(line.split_once(' ').unwrap().1);
                println!(
                    "    through go-plugin's own host: {:.0} ms ({:.2}x the bare pipe; manent \
                     {:.2}x of it), the longest any line waited {:.1} ms",
                    go_us as f64 / 1000.0,
                    go_us as f64 / unhindered as f64,
                    wrote_us as f64 / go_us as f64,
                    go_longest as f64 / 1000.0
                );
            }
        }
        if let Some(engine) = h.close().await {
            engine.shutdown().await;
        }
    }
}
