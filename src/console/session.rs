//! `manent console`: opens the engine (in this process, or attached to the one that holds the
//! database), runs the terminal UI, and ends cleanly on every path: on quit, deployments this
//! console runs continue in a background worker; on hangup the engine keeps running headless
//! until its deployments finish or wait for an operator.

use std::path::Path;
use std::time::Duration;

use super::app::App;
use super::run::{self, Exit, TerminalGuard};
use super::theme::Theme;
use crate::cli::{Out, exit};
use crate::config::Config;
use crate::engine::Engine;
use crate::engine::handle::{self, Command};
use crate::operator::Operator;

/// How the console starts.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Change nothing.
    pub readonly: bool,
    /// `--theme`.
    pub theme: Option<String>,
    /// A command to send once the engine is up (the demo's deploy).
    pub start: Option<Command>,
    /// On quit, stop everything instead of handing deployments to a background worker.
    pub stop_on_quit: bool,
}

/// Routes tracing into the console's engine-log overlay: nothing but the UI may write to the
/// terminal while it is up.
pub fn init_tracing() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_env("MANENT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(tui_logger::TuiTracingSubscriberLayer)
        .try_init();
    let _ = tui_logger::init_logger(tui_logger::LevelFilter::Info);
}

/// Runs the console on `config`.
pub async fn console(config: Config, options: Options, out: &mut Out) -> u8 {
    let theme = match Theme::choose(options.theme.as_deref(), config.theme.as_deref()) {
        Ok(t) => t,
        Err(e) => {
            out.error(e);
            return exit::BAD_INPUT;
        }
    };
    let config_file = config.file.clone();
    let handle = match handle::open(config, Operator::from_env()).await {
        Ok(h) => h,
        Err(e) => {
            out.error(e);
            return exit::ENGINE;
        }
    };
    let mut app = App::new(options.readonly, crate::sys::now_ms());
    app.stop_on_quit = options.stop_on_quit;
    for w in &theme.warnings {
        tracing::warn!("{w}");
    }
    if let Some(cmd) = options.start.clone() {
        app.follow_next = true;
        let _ = handle.commands.send(cmd).await;
    }
    let ended = {
        let mut terminal = match run::init() {
            Ok(t) => t,
            Err(e) => {
                run::restore();
                out.error(format!("cannot open the terminal: {e}"));
                return exit::ENGINE;
            }
        };
        let _guard = TerminalGuard;
        let ended = run::run(
            &mut terminal,
            run::input(),
            &handle,
            &mut app,
            &theme,
            signals(),
        )
        .await;
        if matches!(ended, Ok(Exit::Hangup)) {
            // Before anything writes to the terminal that is gone (restoring it, a library's
            // last message): a failed write to stderr must not take the engine down.
            run::detach_from_terminal();
        }
        ended
    };
    let engine = handle.close().await;
    match ended {
        Ok(Exit::Quit) => finish_quit(engine, &config_file, options.stop_on_quit, out).await,
        Ok(Exit::Hangup) => {
            // No terminal any more: keep working headless until every deployment finishes or
            // waits for an operator (then it is durable, and the next console picks it up).
            if let Some(e) = engine {
                e.shutdown_within(HEADLESS, Duration::from_secs(300)).await;
            }
            exit::OK
        }
        Ok(Exit::Terminated) => {
            // Asked to stop: the engine's usual drain, then deployments stop at a step boundary
            // and resume at the next start.
            let Some(e) = engine else { return exit::OK };
            let live = e.active();
            if !live.is_empty() {
                out.note(format!("manent: stopping; draining {}…", live.join(", ")));
            }
            if e.shutdown().await > 0 {
                out.note("manent: stopped before the end; the next start resumes from the last checkpoint");
                exit::INTERRUPTED
            } else {
                exit::OK
            }
        }
        Ok(Exit::EngineGone) => {
            out.error("the engine stopped");
            exit::ENGINE
        }
        Err(e) => {
            out.error(format!("the terminal failed: {e}"));
            if let Some(e) = engine {
                e.shutdown().await;
            }
            exit::ENGINE
        }
    }
}

/// How long a console whose terminal hung up keeps its deployments running headless.
const HEADLESS: Duration = Duration::from_secs(24 * 3600);

/// SIGHUP (the terminal or ssh session is gone), or SIGTERM/SIGINT (asked to stop).
async fn signals() -> Exit {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut hup), Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::hangup()),
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = hup.recv() => Exit::Hangup,
        _ = term.recv() => Exit::Terminated,
        _ = int.recv() => Exit::Terminated,
    }
}

async fn finish_quit(engine: Option<Engine>, config_file: &Path, stop: bool, out: &mut Out) -> u8 {
    let Some(engine) = engine else {
        return exit::OK;
    };
    let live = engine.active();
    if live.is_empty() || stop {
        engine
            .shutdown_within(Duration::ZERO, Duration::from_secs(60))
            .await;
        return exit::OK;
    }
    // Hand the deployments over: stop at a step boundary (in-flight targets finish and are
    // recorded), then a detached worker resumes them from their checkpoints.
    out.note(format!(
        "manent: handing {} to a background worker…",
        live.join(", ")
    ));
    engine
        .shutdown_within(Duration::ZERO, Duration::from_secs(300))
        .await;
    match spawn_worker(config_file) {
        Ok(pid) => out.note(format!(
            "manent: {} continue in a background `manent worker` (pid {pid}); `manent console` shows them",
            live.join(", ")
        )),
        Err(e) => out.error(format!(
            "could not start a background worker ({e}); `manent resume ID` continues the deployments"
        )),
    }
    exit::OK
}

fn spawn_worker(config_file: &Path) -> std::io::Result<u32> {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let exe = std::env::current_exe()?;
    let child = std::process::Command::new(exe)
        .arg("--config")
        .arg(config_file)
        .arg("worker")
        .arg("--until-idle")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    Ok(child.id())
}
