//! `manent`: parses the command line and runs the verb. Nothing else lives here.

use std::process::ExitCode;

use clap::Parser;
use manent::cli::{Cli, Out, exit};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The engine's own warnings (a dead-lettered deployment, a database that refuses writes) go
    // to stderr; MANENT_LOG=debug shows more.
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("MANENT_LOG").unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
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
    let code = runtime.block_on(manent::cli::run(cli, &mut out));
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    ExitCode::from(code)
}
