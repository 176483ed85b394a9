//! `manent demo`: a self-contained demo in a temporary directory — a simulated fleet of three
//! dozen targets, deployed through a real external plugin process (this very binary serving
//! the `simulate` plugin over go-plugin's protocol, pinned by its sha256), its slots, router,
//! testers and scale simulated. An earlier release is deployed first, quickly, so rolling back
//! has somewhere to go; then the demo itself (journaled as `demo`, not as the person watching)
//! starts the canary the console opens on: it pauses at 10% until the operator promotes it.

use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::engine::Engine;
use crate::engine::request::{Asked, Request, Requests};
use crate::operator::Operator;

/// The demo's directory (deleted at the end unless it was given).
#[derive(Debug)]
pub struct Demo {
    /// Where it lives.
    pub dir: PathBuf,
    /// Its manent.yml.
    pub config: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

fn manent_yml(exe: &Path, sha256: &str, fast: bool) -> String {
    let (latency, lines, failures) = if fast {
        ("{min: 0ms, max: 0ms}", 0, 0.0)
    } else {
        ("{min: 500ms, max: 2500ms}", 3, 0.04)
    };
    // The router's simulated traffic: the candidate a little slower than stable, and (not in
    // the quick demo the tests drive) a burst of 5xx 150s after it first takes traffic, which
    // the background analysis catches unless the operator has promoted or reverted by then.
    let burst = if fast {
        ""
    } else {
        ", burst: {after: 150s, lasting: 90s, error_rate: 0.08}"
    };
    format!(
        "# manent demo: a simulated fleet, deployed through a real external plugin process.\n\
         database: .manent/manent.db\n\
         plugins:\n  fleet:\n    external:\n      command: {exe}\n      args: [plugin-serve, simulate]\n      sha256: {sha256}\n\
         \x20   latency: {latency}\n    log_lines: {lines}\n    failure_rate: {failures}\n\
         \x20   traffic: {{rate: 300, stable: {{error_rate: 0.001, p99: 80ms}}, candidate: \
         {{error_rate: 0.002, p99: 95ms{burst}}}}}\n\
         engine:\n  drain_timeout: 30s\n",
        exe = exe.display()
    )
}

const APP: &str = "# A web shop on a simulated fleet: nothing real is touched.
application: shop
artifact: {type: container, name: shop, version: \"2.4.0\"}
deploy:
  plugin: fleet
strategy:
  rolling: {batch_size: 6}
parallelism: 3
max_retries: 3
backoff: {base: 500ms, max: 2s}
# Hooks run around the deploy in weight order; `t` in the console runs the test ones.
hooks:
  - name: migrate
    events: [pre-deploy]
    weight: \"-5\"
    command: \"echo simulated: schema migration for $MANENT_VERSION\"
  - name: warm-cache
    events: [pre-promote]
    command: \"echo simulated: caches warmed on the candidate\"
  - name: smoke
    events: [post-deploy, test]
    weight: 5
    command: \"echo simulated: smoke test of $MANENT_VERSION passed\"
  - name: notify
    events: [post-rollback]
    command: \"echo simulated: told the on-call channel about the rollback\"
environments:
  staging:
    targets:
";

/// prod is a canary: testers first, 10% until promoted, the router's traffic analysed at 25%,
/// 50% until promoted; a background analysis of the traffic all along.
const PROD: &str = "  prod:
    strategy:
      canary:
        slider_step: 5
        confirm_above: 50
        watch: 2s
        analysis: {router: {max_error_rate: 2%, max_p99: 150ms, min_requests: 50, window: 20s}, interval: 5s, failure_limit: 2}
        steps:
          - testers: {}
          - weight: 10
          - pause: {}
          - weight: 25
          - analysis: {router: {max_error_rate: 1%, max_p99: 150ms, min_requests: 100, window: 15s}, count: 3, interval: 5s}
          - weight: 50
          - pause: {}
          - scale: 100
          - weight: 100
    targets:
";

fn app_yml() -> String {
    let mut s = APP.to_owned();
    for i in 1..=12 {
        s.push_str(&format!(
            "      - {{name: stg-{i:02}, labels: {{zone: z{}}}}}\n",
            i % 3
        ));
    }
    s.push_str(PROD);
    for i in 1..=36 {
        s.push_str(&format!(
            "      - {{name: web-{i:02}, labels: {{zone: z{}}}}}\n",
            i % 3
        ));
    }
    s
}

/// Writes the demo into `dir` (or a temporary directory), deploys its earlier release and,
/// with `start`, submits the deploy the console opens on. `manent` is the binary that serves
/// the plugin (`manent plugin-serve simulate`): the running one, for `manent demo`.
pub async fn prepare(dir: Option<&Path>, manent: &Path, start: bool) -> Result<Demo, String> {
    let (dir, temp) = match dir {
        Some(d) => {
            let made = !d.exists();
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
            if made {
                set_mode(d, 0o755)?;
            }
            (d.to_owned(), None)
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("manent-demo-")
                .tempdir()
                .map_err(|e| e.to_string())?;
            (t.path().to_owned(), Some(t))
        }
    };
    let exe = manent;
    let sha = crate::plugin::external::activation::sha256_file(exe).map_err(|e| e.to_string())?;
    // Its files are written 0644 in a 0755 directory whatever the umask: a configuration
    // others could write is not obeyed (a group-writable one from a umask of 002 included).
    let apps = dir.join("apps");
    std::fs::create_dir_all(&apps).map_err(|e| e.to_string())?;
    set_mode(&apps, 0o755)?;
    let config = dir.join("manent.yml");
    for (file, text) in [
        (apps.join("shop.yml"), app_yml()),
        (dir.join("seed.yml"), manent_yml(exe, &sha, true)),
        (config.clone(), manent_yml(exe, &sha, false)),
    ] {
        std::fs::write(&file, text).map_err(|e| e.to_string())?;
        set_mode(&file, 0o644)?;
    }
    seed(&dir.join("seed.yml")).await?;
    if start {
        start_deploy(&config).await?;
    }
    Ok(Demo {
        dir,
        config,
        _temp: temp,
    })
}

/// Who the demo's own actions are journaled as.
fn demo_operator() -> Operator {
    Operator {
        name: "demo".into(),
        client: None,
    }
}

fn set_mode(path: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// What the console says when it opens on the demo's deploy.
pub const STARTED: &str = "demo: shop 2.4.0 goes to prod as a canary; it waits at 10% (p promotes)";

/// Deploys shop 2.3.0 everywhere, as fast as the simulator goes.
async fn seed(config: &Path) -> Result<(), String> {
    let config = Config::load(config, &crate::plugin::catalog()).map_err(|e| e.to_string())?;
    let engine = Engine::start(&config).await.map_err(|e| e.to_string())?;
    let op = demo_operator();
    let requests = Requests::new(&config, engine.store().as_ref(), &op, Some(&engine));
    let asked = Asked {
        reason: Some("demo: the release before"),
        force: false,
    };
    for env in ["staging", "prod"] {
        let mut spec = config.environment("shop", env).map_err(|e| e.to_string())?;
        spec.artifact.version = "2.3.0".into();
        // The release before goes everywhere at once, canary or not.
        spec.strategy = crate::config::Strategy::All;
        let id = requests
            .start(&spec, Request::Deploy, asked)
            .await
            .map_err(|e| e.to_string())?;
        engine.run(id.id()).await.map_err(|e| e.to_string())?;
        engine.wait(id.id()).await.map_err(|e| e.to_string())?;
    }
    engine.shutdown().await;
    Ok(())
}

/// Submits the deploy of 2.4.0 to prod the console opens on; the console's engine runs it.
async fn start_deploy(config: &Path) -> Result<(), String> {
    let config = Config::load(config, &crate::plugin::catalog()).map_err(|e| e.to_string())?;
    let db = crate::deploy::records::open(&config.database, config.engine.synchronous, false)
        .map_err(|e| e.to_string())?;
    let spec = config
        .environment("shop", "prod")
        .map_err(|e| e.to_string())?;
    let op = demo_operator();
    let asked = Asked {
        reason: Some("started by `manent demo` to show a deploy"),
        force: false,
    };
    Requests::new(&config, &db, &op, None)
        .start(&spec, Request::Deploy, asked)
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}
