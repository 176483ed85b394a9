//! `manent console`: opens the engine (in this process, or attached to the one that holds the
//! database), runs the terminal UI, and ends cleanly on every path: on quit, deployments this
//! console runs continue in a background worker; on hangup the engine keeps running headless
//! until its deployments finish or wait for an operator.

use std::path::Path;
use std::time::Duration;

use super::app::App;
use super::run::{self, Exit, TerminalGuard};
use super::theme::Theme;
use crate::config::Config;
use crate::engine::handle;
use crate::engine::{Engine, judge};
use crate::operator::Operator;

/// How the console starts.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Change nothing.
    pub readonly: bool,
    /// `--theme`.
    pub theme: Option<String>,
    /// Open the first live deployment and say this about it (the demo's deploy).
    pub open_first: Option<String>,
    /// On quit, stop everything instead of handing deployments to a background worker.
    pub stop_on_quit: bool,
    /// Draw on the main screen (for terminals that garble the alternate one).
    pub no_alt_screen: bool,
    /// `--colors`: auto, none, 16, 256, truecolor.
    pub colors: Option<String>,
    /// `--glyphs`: auto, ascii, unicode.
    pub glyphs: Option<String>,
}

/// Routes tracing into the console's engine-log overlay: nothing but the UI may write to the
/// terminal while it is up.
pub fn init_tracing() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_env("MANENT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::registry()
        .with(crate::telemetry::logfile::layer())
        .with(filter)
        .with(tui_logger::TuiTracingSubscriberLayer)
        .try_init();
    let _ = tui_logger::init_logger(tui_logger::LevelFilter::Info);
}

/// How a console session ended; the caller turns it into an exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The operator quit; deployments still running went on in a background worker (or, for
    /// the demo, stopped).
    Quit,
    /// The terminal went away; the engine ran headless until nothing was left to do.
    HungUp,
    /// Asked to stop (SIGTERM, SIGINT); `interrupted` when deployments had to stop before
    /// their end (they resume at the next start).
    Terminated { interrupted: bool },
    /// The console could not run: a bad option (`--theme`).
    BadInput(String),
    /// The engine or the terminal failed.
    Failed(String),
}

/// Runs the console on `config`; `note` prints a line for the operator once the terminal is
/// back to normal (stderr for `manent console`).
pub async fn console(config: Config, options: Options, note: &mut dyn FnMut(String)) -> Ended {
    let theme = match Theme::choose(options.theme.as_deref(), config.theme.as_deref()) {
        Ok(t) => t,
        Err(e) => return Ended::BadInput(e.to_string()),
    };
    let caps = match super::term::Caps::detect(options.colors.as_deref(), options.glyphs.as_deref())
    {
        Ok(c) => c,
        Err(e) => return Ended::BadInput(e.to_string()),
    };
    let config_file = config.file.clone();
    let handle = match handle::open(config, Operator::from_env()).await {
        Ok(h) => h,
        Err(e) => return Ended::Failed(e.to_string()),
    };
    let mut app = App::new(options.readonly, crate::sys::now_ms());
    app.ui.stop_on_quit = options.stop_on_quit;
    for w in &theme.warnings {
        tracing::warn!("{w}");
    }
    if let Some(text) = options.open_first.clone() {
        app.ui.follow_next = true;
        app.ui.until_gate = Some(text);
    }
    let ended = {
        let mut terminal = match run::init(!options.no_alt_screen, caps) {
            Ok(t) => t,
            Err(e) => {
                run::restore();
                return Ended::Failed(format!("cannot open the terminal: {e}"));
            }
        };
        let _guard = TerminalGuard;
        let ended = run::run(
            &mut terminal,
            run::input(),
            &handle,
            &mut app,
            (&theme, caps),
            signals(),
        )
        .await;
        if ended == Exit::Hangup {
            // A hangup whose terminal is still there (`kill -HUP`, a multiplexer) gets it back
            // sane; on one that is gone the writes fail at once, quietly. Then nothing that runs
            // on headless writes to it: a failed write to stderr must not take the engine down.
            run::restore();
            run::detach_from_terminal();
        }
        ended
    };
    let engine = handle.close().await;
    match ended {
        Exit::Quit => {
            let left = app.ui.leave_unwatched.take();
            if let (Some((ids, reason)), Some(e)) = (&left, &engine) {
                journal_unwatched(e, ids, reason.as_deref(), note).await;
            }
            finish_quit(
                engine,
                &config_file,
                (options.stop_on_quit, left.is_some()),
                note,
            )
            .await;
            Ended::Quit
        }
        Exit::Hangup => {
            // No terminal any more: keep working headless until every deployment finishes or
            // waits for an operator (then it is durable, and the next console picks it up);
            // a live canary is then handed to a worker (nobody can be told: no terminal).
            if let Some(e) = engine {
                let (config, store, ran) = (e.config().clone(), e.store().clone(), e.active());
                e.finish_within(HEADLESS, Duration::from_secs(300)).await;
                if !options.stop_on_quit {
                    let handed = judge::hand_over_unwatched(&config, store.as_ref(), &ran).await;
                    if let Some(line) = judge::said(&handed) {
                        tracing::warn!("{line}");
                    }
                }
            }
            Ended::HungUp
        }
        Exit::Terminated => {
            // Asked to stop: the engine's usual drain, then deployments stop at a step boundary
            // and resume at the next start.
            let Some(e) = engine else {
                return Ended::Terminated { interrupted: false };
            };
            let live = e.active();
            if !live.is_empty() {
                note(format!(
                    "manent: stopping; draining {}… (again to stop at once)",
                    live.join(", ")
                ));
            }
            e.exit_on_second_signal(5);
            let (config, store, ran) = (e.config().clone(), e.store().clone(), e.active());
            let abandoned = e.shutdown().await > 0;
            // Stopped at a step boundary (steps in flight finished): still to resume.
            let mut unfinished = Vec::new();
            for id in &ran {
                if let Ok(Some(row)) = store.workflow(id).await
                    && row.status.is_live()
                {
                    unfinished.push(id.clone());
                }
            }
            let interrupted = abandoned || !unfinished.is_empty();
            if interrupted {
                note(format!(
                    "manent: stopped before the end of {}; the next engine resumes from the last \
                     checkpoint (`manent resume ID` now)",
                    if unfinished.is_empty() {
                        "its deployments".to_owned()
                    } else {
                        unfinished.join(", ")
                    }
                ));
            }
            // Live canaries are not left unwatched by a stop either (a demo's end with it).
            if !options.stop_on_quit {
                let handed = judge::hand_over_unwatched(&config, store.as_ref(), &ran).await;
                if let Some(line) = judge::said(&handed) {
                    note(line);
                }
            }
            Ended::Terminated { interrupted }
        }
        Exit::EngineGone => Ended::Failed("the engine stopped".into()),
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

/// Journals that the operator quit leaving `ids` (live canaries) with no engine, and says so.
async fn journal_unwatched(
    engine: &Engine,
    ids: &[String],
    reason: Option<&str>,
    note: &mut dyn FnMut(String),
) {
    let operator = Operator::from_env();
    for id in ids {
        let subject = crate::deploy::view::load(engine.store().as_ref(), id)
            .await
            .ok()
            .flatten()
            .map(|v| v.subject());
        let entry = crate::deploy::records::JournalEntry::by(
            &operator,
            "unwatched",
            Some(id),
            subject.as_deref(),
            Some(
                "left a live canary with no engine: nothing judges it or watches its router".into(),
            ),
            reason,
        );
        if let Err(e) = engine.store().journal(entry).await {
            tracing::warn!(deployment = %id, error = %e, "could not journal leaving it unwatched");
        }
    }
    note(format!(
        "manent: {} left UNWATCHED, as you asked (journaled): `manent worker` judges {} again",
        ids.join(", "),
        if ids.len() == 1 { "it" } else { "them" }
    ));
}

async fn finish_quit(
    engine: Option<Engine>,
    config_file: &Path,
    (stop, unwatched): (bool, bool),
    note: &mut dyn FnMut(String),
) {
    let Some(engine) = engine else {
        return;
    };
    // What goes on by itself needs a worker, and so does a live canary (judged and watched
    // while it waits) unless the operator chose to leave it unwatched; a deployment waiting on
    // a decision waits in the database, and whoever decides starts an engine.
    let mut live = engine.going();
    if !unwatched {
        for j in engine.judged() {
            if !live.contains(&j) {
                live.push(j);
            }
        }
    }
    if live.is_empty() || stop {
        engine
            .shutdown_within(Duration::ZERO, Duration::from_secs(60))
            .await;
        return;
    }
    // Hand the deployments over: stop at a step boundary (in-flight targets finish and are
    // recorded), then a detached worker resumes them from their checkpoints.
    note(format!(
        "manent: handing {} to a background worker…",
        live.join(", ")
    ));
    engine
        .shutdown_within(Duration::ZERO, Duration::from_secs(300))
        .await;
    match judge::spawn_worker(config_file) {
        Ok(pid) => note(format!(
            "manent: {} {} in a background `manent worker` (pid {pid}), which judges live \
             canaries and watches their routers; `manent console` shows {}",
            live.join(", "),
            if live.len() == 1 {
                "continues"
            } else {
                "continue"
            },
            if live.len() == 1 { "it" } else { "them" },
        )),
        Err(e) => note(format!(
            "manent: could not start a background worker ({e}); nothing judges a live canary \
             until `manent worker` runs; `manent resume ID` continues the deployments"
        )),
    }
}
