//! External plugin costs: cold start (spawn → handshake → mutual TLS → health → Configure) and
//! no-op Deploy round trips (p50, p99), for the Rust SDK plugin and the Go plugin through
//! manent's host — and, as the anchor measured in the same run, the same plugins driven by a Go
//! host written with hashicorp/go-plugin. Run with `cargo bench --bench plugins` (needs Go for
//! the Go rows; they are skipped without it).

#![allow(
    clippy::unwrap_used,
    clippy::print_stdout,
    reason = "a benchmark's report"
)]

#[path = "../tests/support/go.rs"]
mod go;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use manent::moniker::Moniker;
use manent::plugin::external::{ExternalSpec, Host, Remote};
use manent::plugin::logger::Discard;
use manent::plugin::{Artifact, Deployer, Request, Secrets, Target};

const STARTS: usize = 10;
const CALLS: usize = 2000;

struct Figures {
    cold_p50_ms: f64,
    rtt_p50_ms: f64,
    rtt_p99_ms: f64,
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

fn request() -> Request {
    Request {
        deployment_id: "bench".into(),
        application: "b".into(),
        environment: "b".into(),
        artifact: Artifact {
            version: "1".into(),
            ..Artifact::default()
        },
        targets: vec![Target {
            host: "h".into(),
            moniker: Moniker::new("b", "b", "b", "h").unwrap(),
            labels: Default::default(),
        }],
        params: serde_json::json!({}),
        secrets: Secrets::none(),
        parallelism: 1,
        traffic: None,
        idempotency_key: "bench/1".into(),
        attempt: 1,
        processes: manent::plugin::Processes::none(),
    }
}

async fn manent_host(plugin: &Path) -> Figures {
    let mut cold = Vec::new();
    let mut rtt = Vec::new();
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
            let remote = Remote::new(host.clone(), p.capabilities.clone());
            let req = request();
            for _ in 0..CALLS {
                let t1 = Instant::now();
                remote.deploy(&req).await.unwrap();
                rtt.push(t1.elapsed().as_secs_f64() * 1e3);
            }
        }
        host.shutdown().await;
    }
    Figures {
        cold_p50_ms: pct(&mut cold, 0.5),
        rtt_p50_ms: pct(&mut rtt, 0.5),
        rtt_p99_ms: pct(&mut rtt, 0.99),
    }
}

fn go_host(host: &Path, plugin: &Path) -> Figures {
    let out = std::process::Command::new(host)
        .arg(plugin)
        .arg(CALLS.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    Figures {
        cold_p50_ms: v["cold_p50_ms"].as_f64().unwrap(),
        rtt_p50_ms: v["rtt_p50_ms"].as_f64().unwrap(),
        rtt_p99_ms: v["rtt_p99_ms"].as_f64().unwrap(),
    }
}

fn row(name: &str, f: &Figures, anchor: Option<&Figures>) {
    let ratio = anchor
        .map(|a| {
            format!(
                "  (vs go-plugin host: cold {:.2}x, p50 {:.2}x, p99 {:.2}x)",
                f.cold_p50_ms / a.cold_p50_ms,
                f.rtt_p50_ms / a.rtt_p50_ms,
                f.rtt_p99_ms / a.rtt_p99_ms
            )
        })
        .unwrap_or_default();
    println!(
        "{name:<34} cold start p50 {:>7.2} ms   Deploy p50 {:>6.3} ms  p99 {:>6.3} ms{ratio}",
        f.cold_p50_ms, f.rtt_p50_ms, f.rtt_p99_ms
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let rust_plugin = Path::new(env!("CARGO_BIN_EXE_manent-fixture-plugin"));
    println!(
        "no-op Deploy round trips ({CALLS} calls) and cold starts ({STARTS}), AutoMTLS over Unix sockets"
    );
    let rust_ours = rt.block_on(manent_host(rust_plugin));
    match go::go_fixture() {
        Some(go) => {
            let go_anchor = go_host(&go.host, &go.plugin);
            let rust_anchor = go_host(&go.host, rust_plugin);
            let go_ours = rt.block_on(manent_host(&go.plugin));
            row("go-plugin host   → Go plugin", &go_anchor, None);
            row("manent host      → Go plugin", &go_ours, Some(&go_anchor));
            row("go-plugin host   → Rust SDK plugin", &rust_anchor, None);
            row(
                "manent host      → Rust SDK plugin",
                &rust_ours,
                Some(&rust_anchor),
            );
        }
        None => row("manent host      → Rust SDK plugin", &rust_ours, None),
    }
    println!("goal: manent's host no slower than go-plugin's own host on the same plugin");
}
