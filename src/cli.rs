//! The headless commands (design/architecture.md "Headless commands"): what the console does, for scripts and CI. Human output
//! by default, `--json` for machines, progress on stderr, and exit codes a script can trust.

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

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use clap_complete::ArgValueCandidates;

use crate::deploy::command::OperatorCommand;

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

/// manent: deploys as durable workflows, driven from a terminal.
#[derive(Debug, Parser)]
#[command(name = "manent", version, about, after_help = EXIT_CODES)]
pub struct Cli {
    /// The engine configuration.
    #[arg(
        long,
        global = true,
        env = "MANENT_CONFIG",
        default_value = "manent.yml"
    )]
    pub config: PathBuf,
    /// True when `--config` was given on the command line (not the default or the
    /// environment): `plugin test` reads it as the kit's file then.
    #[arg(skip)]
    pub config_given: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parses the process's arguments (exits with clap's message on bad usage).
    pub fn from_args() -> Self {
        use clap::{CommandFactory as _, FromArgMatches as _};
        let matches = Cli::command().get_matches();
        let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
        cli.config_given =
            matches.value_source("config") == Some(clap::parser::ValueSource::CommandLine);
        cli
    }
}

const EXIT_CODES: &str = "Exit codes: 0 done, 1 deployment failed, 2 bad input or conflict, \
3 cancelled (or reverted by an operator), 4 failed and rolled back (or reverted by its analysis), \
5 engine stopped before the end (it resumes at the next start), 6 engine or database unusable, 7 a \
canary waits for an operator.";

/// A verb.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check manent.yml and every descriptor without running anything.
    Validate(JsonArg),
    /// Print an artifact's sha256 as manent checks it (a directory's: of its manifest), for
    /// `artifact.sha256` or a line of `artifact.sha256s`.
    Digest(DigestArgs),
    /// Show the batches and monikers a deploy would use (starts no plugin).
    Plan(PlanArgs),
    /// Deploy an application to an environment.
    Deploy(DeployArgs),
    /// Roll an application's environment back to its previous release.
    Rollback(RollbackArgs),
    /// Show running and recent deployments, or one deployment in detail.
    Status(StatusArgs),
    /// Show an application's deployments, releases and operator actions in an environment.
    History(HistoryArgs),
    /// Stop a deployment at its next step boundary (running targets finish).
    Cancel(ControlArgs),
    /// Pause a deployment before its next batch.
    Pause(ControlArgs),
    /// Continue a paused, cancelled or interrupted deployment from its last checkpoint.
    Resume(ControlArgs),
    /// Run a deployment's failed targets again (all of them, or the ones named), with new
    /// attempts, and follow it.
    Retry(RetryArgs),
    /// Leave a target out of a deployment: it keeps its release; the deployment ends
    /// "deployed with N skipped".
    Skip(SkipArgs),
    /// Stop a deploy and roll back the targets it changed, and follow it (a canary: revert).
    Abort(ControlArgs),
    /// A canary: end the pause it waits at (or, with --full, skip the remaining steps and make
    /// the candidate the stable release).
    Promote(PromoteArgs),
    /// A canary: take the candidate out of traffic; the stable release stays live.
    Revert(ControlArgs),
    /// A canary: send this percentage of traffic to the candidate and hold the steps until
    /// `resume` or `promote`.
    Weight(WeightArgs),
    /// A canary: go back to the previous step's weight and hold.
    Back(ControlArgs),
    /// A canary whose router failed and waits for a decision: end it failed, leaving its
    /// traffic where the router has it (journaled; a reason is required). `revert` is the
    /// other way out.
    Abandon(AbandonArgs),
    /// Run an application's `test` hooks against what is live, each recorded passed or failed.
    Test(TestArgs),
    /// Lock an application's environment: deploys, rollbacks and canaries there are refused
    /// (naming you and your reason) until `unlock` or the expiry.
    Lock(LockArgs),
    /// Lift the lock on an application's environment.
    Unlock(UnlockArgs),
    /// What waits on a human: canaries at a gate, failed deployments awaiting a decision,
    /// paused and dead-lettered ones, locks about to expire.
    Inbox(JsonArg),
    /// Print a deployment's log lines.
    Logs(LogsArgs),
    /// Run the engine alone: resume interrupted deployments and run submitted ones until
    /// stopped.
    Worker(WorkerArgs),
    /// The system database: check it and the engines using it, or copy its history to another
    /// store (SQLite to PostgreSQL, and back).
    #[command(subcommand)]
    Db(DbCommand),
    /// Notifications set aside because their receiver refused them or they failed too often:
    /// list them, or send them again.
    #[command(subcommand)]
    Notify(NotifyCommand),
    /// List plugins: where each comes from, whether its binary matches its sha256, what it can do.
    Plugins(PluginsArgs),
    /// Write a new plugin project, or check a plugin binary against the contract.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// The interactive console: deployments, targets and logs live; deploy, pause, cancel, roll
    /// back from the keyboard.
    #[cfg(feature = "tui")]
    Console(ConsoleArgs),
    /// A self-contained demo: the console on a simulated fleet, deployed through a real plugin
    /// process, in a temporary directory.
    #[cfg(feature = "tui")]
    Demo(DemoArgs),
    /// Print the shell completion script: `manent completions bash > /etc/bash_completion.d/manent`
    /// (zsh: a `_manent` file on `$fpath`; fish: `~/.config/fish/completions/manent.fish`). It
    /// completes verbs and flags, and the applications, environments and deployment ids of the
    /// configuration the line names, asking the `manent` on PATH.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Write the manual pages, manent(1) and one per verb (manent-deploy(1), …), in DIR.
    Man {
        /// Where to write them (it must exist).
        dir: PathBuf,
    },
    /// Print the JSON Schema of manent.yml (`config`) or of an application file (`app`), for
    /// an editor: `manent schema app > ~/.config/manent/app.schema.json`, and in the file
    /// `# yaml-language-server: $schema=/home/you/.config/manent/app.schema.json`.
    Schema {
        /// Which file's schema.
        #[arg(value_enum)]
        of: SchemaOf,
    },
    /// Serve a built-in plugin over go-plugin's protocol (manent starts this itself).
    #[command(hide = true)]
    PluginServe {
        /// The built-in plugin.
        name: String,
    },
    /// An engine's watchdog (an engine on a shared database starts this itself).
    #[command(hide = true)]
    Watchdog {
        /// The engine's process records (`<database>.processes`).
        #[arg(long)]
        records: std::path::PathBuf,
        /// The engine's `engine.shared_group`, whose files rules the records follow.
        #[arg(long)]
        shared_group: Option<String>,
        /// Kill the engine's recorded processes after this long without a lease renewal.
        #[arg(long)]
        within_ms: u64,
    },
}

/// `console`
#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// Show everything, change nothing.
    #[arg(long)]
    pub readonly: bool,
    /// Theme: default, light, high-contrast, mono, or one of yours (NO_COLOR picks mono).
    #[arg(long)]
    pub theme: Option<String>,
    /// Draw on the main screen, not the alternate one (for terminals that garble it).
    #[arg(long)]
    pub no_alt_screen: bool,
    /// Colours: auto (from TERM and COLORTERM), none, 16, 256, truecolor.
    #[arg(long, env = "MANENT_COLORS", value_name = "DEPTH")]
    pub colors: Option<String>,
    /// Symbols: auto (from TERM and the locale), ascii (+-| borders), unicode.
    #[arg(long, env = "MANENT_GLYPHS", value_name = "SET")]
    pub glyphs: Option<String>,
}

/// `demo`
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Put the demo here (kept) instead of a temporary directory.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub console: ConsoleArgs,
}

/// `worker`
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Exit once every deployment has finished or waits for an operator.
    #[arg(long)]
    pub until_idle: bool,
}

/// `db …`
#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Connect, check the database, and list the engines using it (host, pid, heartbeat) with
    /// the deployments each runs.
    Check(JsonArg),
    /// Copy every deployment, release, journal entry and log line into another database,
    /// verified by row counts and checksums.
    Copy(DbCopyArgs),
}

/// `notify …`
#[derive(Debug, Subcommand)]
pub enum NotifyCommand {
    /// The parked notifications, each with its receiver, event, deployment and why.
    List(JsonArg),
    /// Send a parked notification (or every one) again.
    Retry(NotifyRetryArgs),
}

/// `notify retry`
#[derive(Debug, Args)]
pub struct NotifyRetryArgs {
    /// The notification's id (`manent notify list`).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub id: Option<i64>,
    /// Every parked notification.
    #[arg(long)]
    pub all: bool,
}

/// `db copy`
#[derive(Debug, Args)]
pub struct DbCopyArgs {
    /// The target: postgres://user:${secret:NAME}@host/db, sqlite:///path or a file path.
    #[arg(long)]
    pub to: String,
    /// Empty a target that has rows first.
    #[arg(long)]
    pub force: bool,
    /// For a PostgreSQL target: the secret (declared under `secrets:`) its engines will share
    /// as `engine.inputs_key`; the copied deployments are signed with it.
    #[arg(long, value_name = "SECRET")]
    pub inputs_key: Option<String>,
    #[command(flatten)]
    pub json: JsonArg,
}

/// `plugin …`
#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Write a plugin project: a main, a deployer whose every call says "not implemented", a
    /// README, a test and a kit file; it builds as written, and `manent plugin test` fails its
    /// `deploy` check until Deploy is written.
    New(PluginNewArgs),
    /// The conformance kit: start a plugin binary as the engine would and check the contract,
    /// each check named with pass, fail or skip and why.
    #[command(after_help = KIT_HELP)]
    Test(PluginTestArgs),
}

const KIT_HELP: &str = "Here `--config FILE` names the kit's file (YAML, every key optional), not \
manent.yml:\n  options: {dir: /srv/app}      # the plugin's options, as manent.yml gives them\n  \
args: []  env: {}\n  artifact: {type: tarball, name: web, version: \"1.4.2\", uri: \"file:///tmp/web.tgz\"}\n  \
targets: [{name: web-1, host: 10.0.0.5, labels: {}}]   # default: conformance-1, conformance-2\n  \
params: {}                     # deploy.params\n  invalid: {}                    # params it must refuse\n  \
slow: {delay_ms: 30000}        # params that make Deploy slow (cancellation)\n  \
not_idempotent: WHY            # it cannot tell a key's work is done\n  \
start_timeout: 10s  call_timeout: 60s\n\
Exit codes: 0 no check failed, 1 a check failed, 2 bad input. docs/plugins.md lists the checks.";

/// The languages `plugin new` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PluginLang {
    /// manent's Rust SDK.
    Rust,
    /// manent's Go SDK (hashicorp/go-plugin underneath).
    Go,
    /// manent's Python SDK (asyncio, grpclib).
    Python,
}

/// Which file `manent schema` describes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SchemaOf {
    /// manent.yml, the engine's configuration.
    Config,
    /// An application file (apps/*.yml).
    App,
}

/// `plugin new`
#[derive(Debug, Args)]
pub struct PluginNewArgs {
    /// The plugin's name (lowercase letters, digits and `-`); the binary is
    /// `manent-plugin-NAME`.
    pub name: String,
    /// Its language.
    #[arg(long, value_enum)]
    pub lang: PluginLang,
    /// Where to write it (default: ./manent-plugin-NAME); must not exist or be empty.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Where the SDK is, for the project's dependency on it (default: this manent's source
    /// tree when it is known, else the SDK's published name).
    #[arg(long, value_name = "PATH")]
    pub sdk: Option<PathBuf>,
}

/// `plugin test`
#[derive(Debug, Args)]
pub struct PluginTestArgs {
    /// The plugin binary.
    pub binary: PathBuf,
    /// The limit on the plugin's start (handshake to Configure answered).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub start_timeout: Option<std::time::Duration>,
    /// The limit on each call.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub call_timeout: Option<std::time::Duration>,
    #[command(flatten)]
    pub json: JsonArg,
}

/// `plugins`
#[derive(Debug, Args)]
pub struct PluginsArgs {
    /// Start external plugins to ask for their capabilities (stops them after).
    #[arg(long)]
    pub probe: bool,
    #[command(flatten)]
    pub json: JsonArg,
}

/// `--json`
#[derive(Debug, Args)]
pub struct JsonArg {
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Which application and environment.
#[derive(Debug, Args)]
pub struct Target {
    /// The application (`application:` in its descriptor).
    #[arg(add = ArgValueCandidates::new(complete::applications))]
    pub app: String,
    /// The environment.
    #[arg(add = ArgValueCandidates::new(complete::environments))]
    pub env: String,
    /// Use this descriptor file instead of the one in the apps directory.
    #[arg(short = 'f', long = "file")]
    pub file: Option<PathBuf>,
}

/// `plan`
#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub target: Target,
    /// Version to plan (overrides the descriptor's artifact.version).
    #[arg(long)]
    pub version: Option<String>,
    /// Where that version's artifact is, when artifact.uri has no {version} in it.
    #[arg(long, requires = "version")]
    pub uri: Option<String>,
    #[command(flatten)]
    pub json: JsonArg,
}

/// `digest`
#[derive(Debug, Args)]
pub struct DigestArgs {
    /// The artifact: a file or a directory.
    pub path: std::path::PathBuf,
    /// The version, to print a line of `artifact.sha256s` (`HEX  VERSION`).
    #[arg(long)]
    pub version: Option<String>,
}

/// `deploy`
#[derive(Debug, Args)]
pub struct DeployArgs {
    #[command(flatten)]
    pub target: Target,
    /// Version to deploy (overrides the descriptor's artifact.version).
    #[arg(long)]
    pub version: Option<String>,
    /// Where that version's artifact is, when artifact.uri has no {version} in it.
    #[arg(long, requires = "version")]
    pub uri: Option<String>,
    /// Plan, validate and ask the plugin what it would do; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation (required when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Why, for the audit journal.
    #[arg(long, value_parser = one_line)]
    pub reason: Option<String>,
    /// Deploy every target again, even those another deployment already recorded on this
    /// version (by default they stay `unchanged`); and go through a deploy lock (a break-glass,
    /// journaled). Needs --reason.
    #[arg(long, requires = "reason")]
    pub force: bool,
    /// Also print info-level log lines on stderr.
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// A canary: keep following through its pauses for an operator (by default the command
    /// exits 7 there, printing the verbs that move it on).
    #[arg(long)]
    pub wait: bool,
    #[command(flatten)]
    pub json: JsonArg,
}

/// `rollback`
#[derive(Debug, Args)]
pub struct RollbackArgs {
    #[command(flatten)]
    pub target: Target,
    /// Do not ask for confirmation (required when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Why, for the audit journal.
    #[arg(long, value_parser = one_line)]
    pub reason: Option<String>,
    /// Go through a deploy lock (a break-glass, journaled; needs --reason).
    #[arg(long, requires = "reason")]
    pub force: bool,
    /// Also print info-level log lines on stderr.
    #[arg(long, short = 'v')]
    pub verbose: bool,
    #[command(flatten)]
    pub json: JsonArg,
}

/// `test`
#[derive(Debug, Args)]
pub struct TestArgs {
    #[command(flatten)]
    pub target: Target,
    /// Test the candidate of this live canary (through its testers' route), not what is live.
    #[arg(long, value_name = "DEPLOYMENT")]
    pub candidate: Option<String>,
    /// Do not ask for confirmation (required when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Why, for the audit journal.
    #[arg(long, value_parser = one_line)]
    pub reason: Option<String>,
    /// Also print info-level log lines on stderr (the hooks' output).
    #[arg(long, short = 'v')]
    pub verbose: bool,
    #[command(flatten)]
    pub json: JsonArg,
}

/// `lock`
#[derive(Debug, Args)]
pub struct LockArgs {
    /// The application.
    #[arg(add = ArgValueCandidates::new(complete::applications))]
    pub app: String,
    /// The environment.
    #[arg(add = ArgValueCandidates::new(complete::environments))]
    pub env: String,
    /// Why: shown to whoever is refused.
    #[arg(long, value_parser = one_line)]
    pub reason: String,
    /// For how long (`30m`, `2h`); without it, until `manent unlock`.
    #[arg(long = "for", value_parser = humantime::parse_duration)]
    pub duration: Option<std::time::Duration>,
    /// Replace another operator's lock.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub json: JsonArg,
}

/// `unlock`
#[derive(Debug, Args)]
pub struct UnlockArgs {
    /// The application.
    #[arg(add = ArgValueCandidates::new(complete::applications))]
    pub app: String,
    /// The environment.
    #[arg(add = ArgValueCandidates::new(complete::environments))]
    pub env: String,
    /// Why, for the audit journal (required with `--force`).
    #[arg(long, value_parser = one_line)]
    pub reason: Option<String>,
    /// Lift another operator's lock (a break-glass, journaled; needs `--reason`).
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub json: JsonArg,
}

/// A reason, the one text an operator writes that others read in their terminals (the journal,
/// a lock's refusal, notifications): one line of printable text, no escape sequences.
fn one_line(s: &str) -> Result<String, String> {
    crate::operator::check_reason(s)?;
    Ok(s.to_owned())
}

/// `status`
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// A deployment id; without it, every live deployment and the most recent ones.
    #[arg(add = ArgValueCandidates::new(complete::deployments))]
    pub deployment: Option<String>,
    /// Keep showing the deployment until it ends (or waits for a decision), redrawn in place
    /// on a terminal, a line per change when piped; exits with its result code.
    #[arg(long, short = 'w', requires = "deployment")]
    pub watch: bool,
    #[command(flatten)]
    pub json: JsonArg,
}

/// `history`
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The application.
    #[arg(add = ArgValueCandidates::new(complete::applications))]
    pub app: String,
    /// The environment.
    #[arg(add = ArgValueCandidates::new(complete::environments))]
    pub env: String,
    /// Most recent deployments shown.
    #[arg(long, default_value_t = 20)]
    pub limit: u32,
    #[command(flatten)]
    pub json: JsonArg,
}

/// `cancel`, `pause`, `resume`
#[derive(Debug, Args)]
pub struct ControlArgs {
    /// The deployment id.
    #[arg(add = ArgValueCandidates::new(complete::deployments))]
    pub deployment: String,
    /// Why, for the audit journal.
    #[arg(long, value_parser = one_line)]
    pub reason: Option<String>,
    /// Also print info-level log lines on stderr (resume).
    #[arg(long, short = 'v')]
    pub verbose: bool,
    #[command(flatten)]
    pub json: JsonArg,
}

/// `abandon`
#[derive(Debug, Args)]
pub struct AbandonArgs {
    /// The deployment id.
    #[arg(add = ArgValueCandidates::new(complete::deployments))]
    pub deployment: String,
    /// Why it is left where it is (required: it is journaled).
    #[arg(long, value_parser = one_line)]
    pub reason: String,
    #[command(flatten)]
    pub json: JsonArg,
}

/// `retry`
#[derive(Debug, Args)]
pub struct RetryArgs {
    /// The deployment id.
    #[arg(add = ArgValueCandidates::new(complete::deployments))]
    pub deployment: String,
    /// Only these failed targets (default: every failed one).
    pub targets: Vec<String>,
    /// Why, for the audit journal.
    #[arg(long, value_parser = one_line)]
    pub reason: Option<String>,
    /// Also print info-level log lines on stderr.
    #[arg(long, short = 'v')]
    pub verbose: bool,
    #[command(flatten)]
    pub json: JsonArg,
}

/// `promote`
#[derive(Debug, Args)]
pub struct PromoteArgs {
    /// The deployment id.
    #[arg(add = ArgValueCandidates::new(complete::deployments))]
    pub deployment: String,
    /// Skip the remaining steps: the candidate becomes the stable release now.
    #[arg(long)]
    pub full: bool,
    /// Why, for the audit journal.
    #[arg(long, value_parser = one_line)]
    pub reason: Option<String>,
    /// Accepted as `deploy` takes it (promote asks nothing): scripts pass it everywhere.
    #[arg(long, short = 'y')]
    pub yes: bool,
    #[command(flatten)]
    pub json: JsonArg,
}

/// `weight`
#[derive(Debug, Args)]
pub struct WeightArgs {
    /// The deployment id.
    #[arg(add = ArgValueCandidates::new(complete::deployments))]
    pub deployment: String,
    /// Percentage of traffic for the candidate, 0 to 100.
    pub weight: u32,
    /// Why, for the audit journal.
    #[arg(long, value_parser = one_line)]
    pub reason: Option<String>,
    #[command(flatten)]
    pub json: JsonArg,
}

/// `skip`
#[derive(Debug, Args)]
pub struct SkipArgs {
    /// The deployment id.
    #[arg(add = ArgValueCandidates::new(complete::deployments))]
    pub deployment: String,
    /// The target to leave out.
    pub target: String,
    /// Why, for the audit journal.
    #[arg(long, value_parser = one_line)]
    pub reason: Option<String>,
    #[command(flatten)]
    pub json: JsonArg,
}

/// `logs`
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The deployment id.
    #[arg(add = ArgValueCandidates::new(complete::deployments))]
    pub deployment: String,
    /// Keep printing new lines until the deployment ends.
    #[arg(long, short = 'f')]
    pub follow: bool,
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
        Command::Promote(a) => {
            let cmd = OperatorCommand::Promote { full: a.full };
            control::canary(
                &cli.config,
                &a.deployment,
                &cmd,
                a.reason.as_deref(),
                a.json.json,
                out,
            )
            .await
        }
        Command::Revert(a) => {
            let cmd = OperatorCommand::Revert;
            control::canary(
                &cli.config,
                &a.deployment,
                &cmd,
                a.reason.as_deref(),
                a.json.json,
                out,
            )
            .await
        }
        Command::Weight(a) => {
            let cmd = OperatorCommand::Weight(a.weight);
            control::canary(
                &cli.config,
                &a.deployment,
                &cmd,
                a.reason.as_deref(),
                a.json.json,
                out,
            )
            .await
        }
        Command::Abandon(a) => {
            let cmd = OperatorCommand::Abandon;
            control::canary(
                &cli.config,
                &a.deployment,
                &cmd,
                Some(&a.reason),
                a.json.json,
                out,
            )
            .await
        }
        Command::Back(a) => {
            let cmd = OperatorCommand::Back;
            control::canary(
                &cli.config,
                &a.deployment,
                &cmd,
                a.reason.as_deref(),
                a.json.json,
                out,
            )
            .await
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
