//! The headless commands (design/architecture.md "Headless commands"): what the console does, for scripts and CI. Human output
//! by default, `--json` for machines, progress on stderr, and exit codes a script can trust.

mod args;
mod complete;
mod control;
mod db;
mod follow;
mod inspect;
mod notify;
mod notify_systemd;
pub mod output;
mod plugin;
mod run;
mod shell;
pub use shell::answer_completion;

use crate::deploy::command::OperatorCommand;

pub use args::*;
pub use output::Out;

/// Exit codes.
pub mod exit {
    /// The deployment succeeded (or the command did what it was asked).
    pub const OK: u8 = 0;
    /// The deployment failed.
    pub const FAILED: u8 = 1;
    /// Bad input: usage, configuration, unknown deployment, conflicting deployment.
    pub const BAD_INPUT: u8 = 2;
    /// The deployment was cancelled (or the confirmation declined).
    pub const CANCELLED: u8 = 3;
    /// The deployment failed and the targets it changed were rolled back (`atomic`).
    pub const ROLLED_BACK: u8 = 4;
    /// The engine stopped before the deployment finished; it resumes at the next start.
    pub const INTERRUPTED: u8 = 5;
    /// The engine could not run: database unusable, dead-lettered deployment.
    pub const ENGINE: u8 = 6;
    /// A canary waits for an operator (a `pause: {}` step, or held): promote, revert, weight,
    /// back or resume moves it on.
    pub const CANARY_WAITS: u8 = 7;
}

#[cfg(feature = "tui")]
async fn demo(a: DemoArgs, out: &mut Out) -> u8 {
    out.note("manent demo: preparing a simulated fleet and deploying its earlier release…");
    let manent = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            out.error(format!("the demo could not find its own binary: {e}"));
            return exit::ENGINE;
        }
    };
    let demo = match crate::demo::prepare(a.dir.as_deref(), &manent, !a.console.readonly).await {
        Ok(d) => d,
        Err(e) => {
            out.error(format!("the demo could not start: {e}"));
            return exit::ENGINE;
        }
    };
    let Some(config) = output::load_config(&demo.config, None, out) else {
        return exit::BAD_INPUT;
    };
    let options = crate::console::session::Options {
        readonly: a.console.readonly,
        theme: a.console.theme,
        open_first: (!a.console.readonly).then(|| crate::demo::STARTED.to_owned()),
        stop_on_quit: true,
        no_alt_screen: a.console.no_alt_screen,
        colors: a.console.colors,
        glyphs: a.console.glyphs,
    };
    let code = console(config, options, out).await;
    out.note(format!(
        "manent demo: done (its files were in {})",
        demo.dir.display()
    ));
    code
}

/// Runs the console and says how it ended, as an exit code.
#[cfg(feature = "tui")]
async fn console(
    config: crate::config::Config,
    options: crate::console::session::Options,
    out: &mut Out,
) -> u8 {
    use crate::console::session::Ended;
    let ended = crate::console::session::console(config, options, &mut |s| out.note(s)).await;
    match ended {
        Ended::Quit | Ended::HungUp | Ended::Terminated { interrupted: false } => exit::OK,
        Ended::Terminated { interrupted: true } => exit::INTERRUPTED,
        Ended::BadInput(e) => {
            out.error(e);
            exit::BAD_INPUT
        }
        Ended::Failed(e) => {
            out.error(e);
            exit::ENGINE
        }
    }
}

/// Runs a parsed command line; returns the exit code.
impl Command {
    /// The deployment id the verb takes, if it takes one. Every verb is named here (no
    /// catch-all): a new verb that takes an id cannot silently miss its resolution.
    fn deployment_mut(&mut self) -> Option<&mut String> {
        match self {
            Command::Status(a) => a.deployment.as_mut(),
            Command::Cancel(a)
            | Command::Pause(a)
            | Command::Resume(a)
            | Command::Abort(a)
            | Command::Revert(a)
            | Command::Back(a) => Some(&mut a.deployment),
            Command::Retry(a) => Some(&mut a.deployment),
            Command::Skip(a) => Some(&mut a.deployment),
            Command::Promote(a) => Some(&mut a.deployment),
            Command::Weight(a) => Some(&mut a.deployment),
            Command::Abandon(a) => Some(&mut a.deployment),
            Command::Logs(a) => Some(&mut a.deployment),
            Command::Test(a) => a.candidate.as_mut(),
            Command::Validate(_)
            | Command::Digest(_)
            | Command::Plan(_)
            | Command::Deploy(_)
            | Command::Rollback(_)
            | Command::History(_)
            | Command::Lock(_)
            | Command::Unlock(_)
            | Command::Inbox(_)
            | Command::Worker(_)
            | Command::Db(_)
            | Command::Notify(_)
            | Command::Plugins(_)
            | Command::Plugin(_)
            | Command::PluginServe { .. }
            | Command::Completions { .. }
            | Command::Man { .. }
            | Command::Schema { .. }
            | Command::Watchdog { .. } => None,
            #[cfg(feature = "tui")]
            Command::Console(_) | Command::Demo(_) => None,
        }
    }
}

/// A canary verb as the one operator command it sends.
struct CanaryVerb<'a> {
    deployment: &'a str,
    cmd: OperatorCommand,
    reason: Option<&'a str>,
    json: bool,
}

impl Command {
    /// `promote`, `revert`, `weight`, `abandon` and `back`: one call each, told apart by the
    /// command they send.
    fn canary(&self) -> Option<CanaryVerb<'_>> {
        let (deployment, cmd, reason, json) = match self {
            Command::Promote(a) => (
                &a.deployment,
                OperatorCommand::Promote { full: a.full },
                a.reason.as_deref(),
                a.json.json,
            ),
            Command::Revert(a) => (
                &a.deployment,
                OperatorCommand::Revert,
                a.reason.as_deref(),
                a.json.json,
            ),
            Command::Weight(a) => (
                &a.deployment,
                OperatorCommand::Weight(a.weight),
                a.reason.as_deref(),
                a.json.json,
            ),
            Command::Abandon(a) => (
                &a.deployment,
                OperatorCommand::Abandon,
                Some(a.reason.as_str()),
                a.json.json,
            ),
            Command::Back(a) => (
                &a.deployment,
                OperatorCommand::Back,
                a.reason.as_deref(),
                a.json.json,
            ),
            _ => return None,
        };
        Some(CanaryVerb {
            deployment,
            cmd,
            reason,
            json,
        })
    }
}

/// Every verb takes a deployment id as the console shows it: whole, or a unique start or end
/// (`060248-384f`). Ambiguous: the matches are listed and nothing runs (exit 2). A database
/// that cannot be opened is left to the verb to say.
async fn resolve_id(
    config_path: &std::path::Path,
    typed: &mut String,
    out: &mut Out,
) -> Result<(), u8> {
    use crate::deploy::ids::{Found, resolve};
    // manent.yml alone: the descriptors are the verb's to read, if it needs them.
    let Ok(config) = crate::config::Config::load_settings(config_path, &crate::plugin::catalog())
    else {
        return Ok(());
    };
    // Only a database that is there: resolving an id never creates one (the verb then says
    // what is missing).
    let Ok(Some(store)) = output::existing_store(&config).await else {
        return Ok(());
    };
    match resolve(store.as_ref(), typed).await {
        Ok(Found::One(id)) => *typed = id,
        Ok(Found::Many(ids)) => {
            let shown: Vec<&str> = ids.iter().take(10).map(String::as_str).collect();
            out.error(format!(
                "`{typed}` names {} deployments: {}{} — type more of the id",
                ids.len(),
                shown.join(", "),
                if ids.len() > 10 { ", …" } else { "" }
            ));
            return Err(exit::BAD_INPUT);
        }
        Ok(Found::Nothing) | Err(_) => {}
    }
    Ok(())
}

pub async fn run(mut cli: Cli, out: &mut Out) -> u8 {
    follow::mark_began();
    if let Some(id) = cli.command.deployment_mut()
        && let Err(code) = resolve_id(&cli.config, id, out).await
    {
        return code;
    }
    match cli.command {
        Command::Validate(a) => inspect::validate(&cli.config, a.json, out).await,
        Command::Completions { shell } => shell::completions(shell, out),
        Command::Man { dir } => shell::man(&dir, out),
        Command::Schema { of } => shell::schema(of, out),
        Command::Digest(a) => match crate::deploy::artifact::digest(&a.path) {
            Ok(d) => {
                out.line(format!(
                    "{d}  {}",
                    a.version
                        .clone()
                        .unwrap_or_else(|| a.path.display().to_string())
                ));
                exit::OK
            }
            Err(e) => {
                out.error(format!("{}: {e}", a.path.display()));
                exit::BAD_INPUT
            }
        },
        Command::Plan(a) => inspect::plan(&cli.config, &a, out).await,
        Command::Deploy(a) => run::deploy(&cli.config, &a, out).await,
        Command::Rollback(a) => run::rollback(&cli.config, &a, out).await,
        Command::Status(a) => inspect::status(&cli.config, &a, out).await,
        Command::History(a) => inspect::history(&cli.config, &a, out).await,
        Command::Cancel(a) => control::cancel(&cli.config, &a, out).await,
        Command::Pause(a) => control::pause(&cli.config, &a, out).await,
        Command::Resume(a) => control::resume(&cli.config, &a, out).await,
        Command::Retry(a) => control::retry(&cli.config, &a, out).await,
        Command::Skip(a) => control::skip(&cli.config, &a, out).await,
        Command::Abort(a) => control::abort(&cli.config, &a, out).await,
        Command::Promote(_)
        | Command::Revert(_)
        | Command::Weight(_)
        | Command::Abandon(_)
        | Command::Back(_) => {
            let Some(c) = cli.command.canary() else {
                unreachable!("a canary verb")
            };
            control::canary(&cli.config, c.deployment, &c.cmd, c.reason, c.json, out).await
        }
        Command::Logs(a) => inspect::logs(&cli.config, &a, out).await,
        Command::Test(a) => run::test(&cli.config, &a, out).await,
        Command::Lock(a) => control::lock(&cli.config, &a, out).await,
        Command::Unlock(a) => control::unlock(&cli.config, &a, out).await,
        Command::Inbox(a) => inspect::inbox(&cli.config, a.json, out).await,
        Command::Worker(a) => run::worker(&cli.config, a.until_idle, out).await,
        Command::Db(DbCommand::Check(a)) => db::check(&cli.config, a.json, out).await,
        Command::Db(DbCommand::Copy(a)) => db::copy_to(&cli.config, &a, out).await,
        Command::Notify(NotifyCommand::List(a)) => notify::list(&cli.config, a.json, out).await,
        Command::Notify(NotifyCommand::Retry(a)) => notify::retry(&cli.config, a.id, out).await,
        Command::Plugins(a) => inspect::plugins(&cli.config, &a, out).await,
        Command::Plugin(PluginCommand::Test(a)) => {
            let file = cli.config_given.then_some(cli.config.as_path());
            plugin::test(&a, file, out).await
        }
        Command::Plugin(PluginCommand::New(a)) => plugin::new(&a, out),
        #[cfg(feature = "tui")]
        Command::Console(a) => {
            // The descriptors are read while the engine opens (engine::handle::open).
            let Some(config) = output::load_settings(&cli.config, out) else {
                return exit::BAD_INPUT;
            };
            let options = crate::console::session::Options {
                readonly: a.readonly,
                theme: a.theme,
                no_alt_screen: a.no_alt_screen,
                colors: a.colors,
                glyphs: a.glyphs,
                ..Default::default()
            };
            console(config, options, out).await
        }
        #[cfg(feature = "tui")]
        Command::Demo(a) => demo(a, out).await,
        Command::PluginServe { name } => {
            out.error(format!(
                "plugin-serve {name}: only manent starts this, with go-plugin's handshake"
            ));
            exit::BAD_INPUT
        }
        Command::Watchdog {
            records,
            shared_group,
            within_ms,
        } => {
            match crate::engine::watchdog::main(
                &records,
                shared_group.as_deref(),
                std::time::Duration::from_millis(within_ms),
            ) {
                Ok(()) => exit::OK,
                Err(e) => {
                    out.error(format!("watchdog: {e}"));
                    exit::ENGINE
                }
            }
        }
    }
}
