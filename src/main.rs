//! `manent`: parses the command line and runs the verb. Nothing else lives here.

use std::process::ExitCode;

use manent::cli::{Cli, Command, Out, exit};
use tracing_subscriber::EnvFilter;

/// jemalloc: with glibc's allocator, malloc and free were a third of the host's CPU on a flooding
/// plugin's lines (many threads allocating and freeing small strings). jemalloc took 90-105k
/// lines/s to 114-127k, the plugin's slowdown from 2.9-4.0x to 2.2-2.7x, and the flood's peak
/// memory from 84-99 MiB to 52-63 MiB (`MANENT_BENCH_ONLY=flood cargo bench --bench console`),
/// with the engine benchmark's memory unchanged (mimalloc, tried too, was as fast but kept
/// 50 % more memory).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    // A shell asking what completes a line is answered and nothing else runs.
    manent::cli::answer_completion();
    let cli = Cli::from_args();
    if let Command::PluginServe { name } = &cli.command
        && let Some(factory) = manent::plugin::builtin::factory(name)
    {
        // A built-in served as an external plugin process (the demo's fleet); never returns.
        manent::plugin::external::serve(factory);
    }
    if let Command::Watchdog {
        records,
        shared_group,
        within_ms,
    } = &cli.command
    {
        // An engine's watchdog: no runtime, no tracing, one thread reading the engine's beats.
        let within = std::time::Duration::from_millis(*within_ms);
        return match manent::engine::watchdog::main(records, shared_group.as_deref(), within) {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::from(exit::ENGINE),
        };
    }
    init_tracing(&cli.command);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            #[expect(clippy::print_stderr, reason = "nothing else can report it")]
            {
                eprintln!("manent: cannot start the async runtime: {e}");
            }
            return ExitCode::from(exit::ENGINE);
        }
    };
    let mut out = Out::std();
    let mut code = runtime.block_on(manent::cli::run(cli, &mut out));
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    // A deploy may have gone well while its log did not reach the database: never silently.
    if let Some(why) = manent::engine::log_path_failure() {
        out.error(format!(
            "the log path failed: {why}; the stored log is not whole"
        ));
        if code == manent::cli::exit::OK {
            code = manent::cli::exit::ENGINE;
        }
    }
    ExitCode::from(code)
}

/// Where the engine's own warnings go (a dead-lettered deployment, a database that refuses
/// writes): the console's engine-log overlay while a terminal UI is up (nothing else may write
/// to the terminal then), stderr otherwise. MANENT_LOG=debug shows more.
fn init_tracing(command: &Command) {
    #[cfg(feature = "tui")]
    if matches!(command, Command::Console(_) | Command::Demo(_)) {
        manent::console::session::init_tracing();
        return;
    }
    let _ = command;
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    // Colour only on a terminal (and not under NO_COLOR): a log file or a pipe gets plain text.
    use std::io::IsTerminal;
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false)
        .with_filter(
            EnvFilter::try_from_env("MANENT_LOG").unwrap_or_else(|_| EnvFilter::new("warn")),
        );
    // The JSON log file's layer comes first; an engine switches it on (log_file: in manent.yml).
    tracing_subscriber::registry()
        .with(manent::telemetry::logfile::layer())
        .with(stderr)
        .init();
}
