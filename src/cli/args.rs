//! The command line's definition: every verb, its arguments and their help, for clap (and for
//! what is generated from it: completions, man pages). What each verb does is in the files
//! beside this one.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use clap_complete::ArgValueCandidates;

use super::complete;

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
