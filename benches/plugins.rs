//! External plugin costs through manent's go-plugin host, against hashicorp/go-plugin's own Go
//! host on the same plugins — one on raw go-plugin (no SDK), one on manent's Go SDK, one on its
//! Rust SDK, one on its Python SDK — measured in the same run:
//! cold start (spawn → handshake → mutual TLS → health → Configure), a no-op Deploy of one
//! target (p50, p99), a Deploy of 100 targets in one call, and 100 calls at once on one process.
//!
//! A 2-core machine is noisy, so the hosts take turns: every round runs go-plugin's host, then
//! manent's (the order swapped every other round), on a fresh plugin process each, each plugin
//! in turn; a row reports the median of the per-round ratios and their spread. The Go SDK's cost
//! over raw go-plugin is the same: per-round ratios of the two plugins under manent's host. The requests are field for field the
//! same (their encoded sizes are checked), and the machine's load is printed.
//!
//! `cargo bench --bench plugins` (needs Go for the anchor; without it only manent's figures).
//! `MANENT_BENCH_ROUNDS` (default 7), `MANENT_BENCH_CALLS` (default 2000); for profiling
//! manent's side alone, `MANENT_BENCH_MODES=single` (or `batch100`, `concurrent100`, comma
//! separated), `MANENT_BENCH_PLUGIN=raw` (or `go`, `rust`, `python`, comma separated) and
//! `MANENT_BENCH_ANCHOR=0`. Under
//! `cargo test`, a smoke run: one round of 100 calls (see `support/smoke.rs`).

#![allow(
    clippy::unwrap_used,
    clippy::print_stdout,
    reason = "a benchmark's report"
)]

#[path = "support/runtime.rs"]
mod runtime;
#[path = "support/smoke.rs"]
mod smoke;

#[path = "../tests/it/support/go.rs"]
mod go;
#[path = "../tests/it/support/python.rs"]
mod python;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use manent::moniker::Moniker;
use manent::plugin::external::{ExternalSpec, Host, Remote};
use manent::plugin::logger::Discard;
use manent::plugin::{Artifact, Deployer, Request, Secrets, Target};

// What ships: manent's binary allocates with jemalloc.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Cold starts per round (their median is the round's figure).
const STARTS: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Single,
    Batch100,
    Concurrent100,
}

impl Mode {
    fn arg(self) -> &'static str {
        match self {
            Mode::Single => "single",
            Mode::Batch100 => "batch100",
            Mode::Concurrent100 => "concurrent100",
        }
    }

    fn targets(self) -> usize {
        if self == Mode::Batch100 { 100 } else { 1 }
    }

    /// Calls per round for a budget of `calls` single calls.
    fn calls(self, calls: usize) -> usize {
        match self {
            Mode::Single | Mode::Concurrent100 => calls,
            Mode::Batch100 => (calls / 20).max(10),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Mode::Single => "Deploy, 1 target",
            Mode::Batch100 => "Deploy, 100 targets in one call",
            Mode::Concurrent100 => "100 concurrent Deploys, 1 process",
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Figures {
    cold_p50_ms: f64,
    rtt_p50_ms: f64,
    rtt_p99_ms: f64,
    calls_per_s: f64,
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn spec(command: &Path) -> ExternalSpec {
    ExternalSpec {
        name: "bench".into(),
        command: command.to_owned(),
        args: Vec::new(),
        sha256: None,
        env: Default::default(),
        start_timeout: Duration::from_secs(30),
        options: serde_json::json!({}),
    }
}

/// The request the Go host sends too (fixtures/go-plugin/host/main.go's `request`).
fn request(n: usize) -> Request {
    Request {
        deployment_id: "bench".into(),
        application: "b".into(),
        environment: "b".into(),
        artifact: Artifact {
            version: "1".into(),
            ..Artifact::default()
        },
        targets: (0..n)
            .map(|i| {
                let h = format!("h{i:03}");
                Target {
                    moniker: Moniker::new("b", "b", "b", &h).unwrap(),
                    host: h,
                    labels: Default::default(),
                }
            })
            .collect(),
        params: serde_json::json!({}),
        secrets: Secrets::none(),
        parallelism: u32::try_from(n).unwrap(),
        traffic: None,
        routing: None,
        idempotency_key: "bench/1".into(),
        attempt: 1,
        processes: manent::plugin::Processes::none(),
    }
}

fn request_bytes(n: usize) -> usize {
    prost::Message::encoded_len(&manent::plugin::external::proto::request_to_wire(
        &request(n),
        0,
    ))
}

/// manent's host, its calls made from a spawned task as the engine's deploy steps are (a call
/// made from `block_on`'s own thread would cross to the runtime's workers every time).
async fn manent_host(plugin: std::path::PathBuf, mode: Mode, calls: usize) -> Figures {
    tokio::spawn(manent_host_calls(plugin, mode, calls))
        .await
        .unwrap()
}

async fn manent_host_calls(plugin: std::path::PathBuf, mode: Mode, calls: usize) -> Figures {
    let plugin = plugin.as_path();
    let mut cold = Vec::new();
    let mut rtt = Vec::new();
    let mut wall = Duration::ZERO;
    for i in 0..STARTS {
        let t0 = Instant::now();
        let host = Arc::new(Host::new(
            spec(plugin),
            Arc::new(Discard),
            manent::plugin::Processes::none(),
        ));
        let p = host.process().await.unwrap();
        cold.push(t0.elapsed().as_secs_f64() * 1e3);
        if i == 0 {
            let remote = Arc::new(Remote::new(host.clone(), p.capabilities.clone()));
            let req = Arc::new(request(mode.targets()));
            let w0 = Instant::now();
            if mode == Mode::Concurrent100 {
                let mut tasks = Vec::new();
                for _ in 0..100 {
                    let (remote, req) = (remote.clone(), req.clone());
                    tasks.push(tokio::spawn(async move {
                        let mut mine = Vec::with_capacity(calls / 100);
                        for _ in 0..calls / 100 {
                            let t1 = Instant::now();
                            remote.deploy(&req).await.unwrap();
                            mine.push(t1.elapsed().as_secs_f64() * 1e3);
                        }
                        mine
                    }));
                }
                for t in tasks {
                    rtt.extend(t.await.unwrap());
                }
            } else {
                for _ in 0..calls {
                    let t1 = Instant::now();
                    remote.deploy(&req).await.unwrap();
                    rtt.push(t1.elapsed().as_secs_f64() * 1e3);
                }
            }
            wall = w0.elapsed();
        }
        host.shutdown().await;
    }
    Figures {
        cold_p50_ms: pct(&mut cold, 0.5),
        rtt_p50_ms: pct(&mut rtt, 0.5),
        rtt_p99_ms: pct(&mut rtt, 0.99),
        calls_per_s: rtt.len() as f64 / wall.as_secs_f64(),
    }
}

fn go_host(host: &Path, plugin: &Path, mode: Mode, calls: usize) -> Figures {
    let out = smoke::command(host)
        .arg(plugin)
        .args([mode.arg(), &calls.to_string(), &STARTS.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bytes = v["request_bytes"].as_f64().unwrap() as usize;
    assert_eq!(
        bytes,
        request_bytes(mode.targets()),
        "the Go host's request differs from manent's"
    );
    Figures {
        cold_p50_ms: v["cold_p50_ms"].as_f64().unwrap(),
        rtt_p50_ms: v["rtt_p50_ms"].as_f64().unwrap(),
        rtt_p99_ms: v["rtt_p99_ms"].as_f64().unwrap(),
        calls_per_s: v["calls_per_s"].as_f64().unwrap(),
    }
}

/// The median of `v` and its spread (min–max).
fn median(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    if !smoke::begin("plugins", Duration::from_secs(3600)) {
        return;
    }
    let rt = runtime::runtime();
    let rounds = env_usize("MANENT_BENCH_ROUNDS", smoke::size(7, 1)).max(1);
    let calls = env_usize("MANENT_BENCH_CALLS", smoke::size(2000, 100)).max(100);
    let rust_plugin = Path::new(env!("CARGO_BIN_EXE_manent-fixture-plugin"));
    println!(
        "go-plugin protocol, AutoMTLS over Unix sockets; {rounds} interleaved rounds; request \
         {} bytes (1 target), {} bytes (100 targets); load average before: {}",
        request_bytes(1),
        request_bytes(100),
        loadavg()
    );
    let anchor = std::env::var("MANENT_BENCH_ANCHOR").map_or(true, |v| v != "0");
    let modes = std::env::var("MANENT_BENCH_MODES").unwrap_or_default();
    let only = std::env::var("MANENT_BENCH_PLUGIN").unwrap_or_default();
    let go = go::go_fixture();
    let mut plugins: Vec<(&str, std::path::PathBuf)> = Vec::new();
    if let Some(g) = &go {
        plugins.push(("raw go-plugin", g.raw.clone()));
        plugins.push(("Go SDK", g.plugin.clone()));
    }
    plugins.push(("Rust SDK", rust_plugin.to_owned()));
    if let Some(p) = python::python_fixture() {
        plugins.push(("Python SDK", p));
    }
    let keys = |name: &str| match name {
        "raw go-plugin" => "raw",
        "Go SDK" => "go",
        "Rust SDK" => "rust",
        _ => "python",
    };
    plugins.retain(|(name, _)| only.is_empty() || only.split(',').any(|o| o == keys(name)));
    let go = go.filter(|_| anchor);
    for mode in [Mode::Single, Mode::Batch100, Mode::Concurrent100] {
        if !modes.is_empty() && !modes.split(',').any(|m| m == mode.arg()) {
            continue;
        }
        let n = mode.calls(calls);
        println!("\n{} ({n} calls a round)", mode.label());
        let mut ours: Vec<Vec<Figures>> = vec![Vec::new(); plugins.len()];
        let mut anchors: Vec<Vec<Figures>> = vec![Vec::new(); plugins.len()];
        for r in 0..rounds {
            for (i, (_, plugin)) in plugins.iter().enumerate() {
                let run_go = |a: &mut Vec<Figures>| {
                    if let Some(g) = &go {
                        a.push(go_host(&g.host, plugin, mode, n));
                    }
                };
                if r % 2 == 0 {
                    run_go(&mut anchors[i]);
                    ours[i].push(rt.block_on(manent_host(plugin.clone(), mode, n)));
                } else {
                    ours[i].push(rt.block_on(manent_host(plugin.clone(), mode, n)));
                    run_go(&mut anchors[i]);
                }
            }
        }
        for (i, (name, _)) in plugins.iter().enumerate() {
            report(name, mode, &ours[i], &anchors[i]);
        }
        let raw = plugins.iter().position(|(n, _)| *n == "raw go-plugin");
        let sdk = plugins.iter().position(|(n, _)| *n == "Go SDK");
        if let (Some(raw), Some(sdk)) = (raw, sdk) {
            println!(
                "  Go SDK ÷ raw go-plugin under manent's host, median of rounds (spread): cold {}  \
                 p50 {}  p99 {}",
                ratio(&ours[sdk], &ours[raw], |f| f.cold_p50_ms),
                ratio(&ours[sdk], &ours[raw], |f| f.rtt_p50_ms),
                ratio(&ours[sdk], &ours[raw], |f| f.rtt_p99_ms),
            );
        }
    }
    println!("\nload average after: {}", loadavg());
    println!(
        "goals: manent host ÷ go-plugin host ≤ 0.8× at p50 and p99; cold start ≤ 0.8×; the Go \
         SDK adds ≤ 5% to raw go-plugin's call time (p50)"
    );
}

fn report(plugin: &str, mode: Mode, ours: &[Figures], anchor: &[Figures]) {
    let pick = |v: &[Figures], f: fn(&Figures) -> f64| {
        let mut x: Vec<f64> = v.iter().map(f).collect();
        median(&mut x).0
    };
    let fmt_row = |who: &str, v: &[Figures]| {
        println!(
            "  {who:<16} {plugin:<16} cold p50 {:>6.2} ms  p50 {:>7.3} ms  p99 {:>7.3} ms  {:>8.0} calls/s",
            pick(v, |f| f.cold_p50_ms),
            pick(v, |f| f.rtt_p50_ms),
            pick(v, |f| f.rtt_p99_ms),
            pick(v, |f| f.calls_per_s),
        );
    };
    if !anchor.is_empty() {
        fmt_row("go-plugin host", anchor);
    }
    fmt_row("manent host", ours);
    if anchor.is_empty() {
        return;
    }
    let throughput = if mode == Mode::Concurrent100 {
        format!(
            "  wall per call {}",
            ratio(ours, anchor, |f| 1.0 / f.calls_per_s.max(f64::MIN_POSITIVE))
        )
    } else {
        String::new()
    };
    println!(
        "  manent ÷ go-plugin, median of rounds (spread): cold {}  p50 {}  p99 {}{throughput}",
        ratio(ours, anchor, |f| f.cold_p50_ms),
        ratio(ours, anchor, |f| f.rtt_p50_ms),
        ratio(ours, anchor, |f| f.rtt_p99_ms),
    );
}

/// The median of the per-round ratios `a ÷ b` of a figure, and their spread.
fn ratio(a: &[Figures], b: &[Figures], f: fn(&Figures) -> f64) -> String {
    let mut r: Vec<f64> = a.iter().zip(b).map(|(x, y)| f(x) / f(y)).collect();
    let (m, lo, hi) = median(&mut r);
    format!("{m:.2}× ({lo:.2}–{hi:.2})")
}
