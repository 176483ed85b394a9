//! What a shell and `man` read of the command line, generated from its one definition (`Cli`),
//! so they cannot drift from it: `manent completions bash|zsh|fish` prints the completion
//! script, `manent man DIR` writes `manent(1)` and a page per verb (`manent-deploy(1)`, …),
//! each with the exit codes and the environment variables manent reads.

use std::io::Write as _;
use std::path::Path;

use clap::CommandFactory as _;

use super::output::Out;
use super::{Cli, exit};

/// The environment variables manent reads, for the pages' ENVIRONMENT section.
const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "MANENT_CONFIG",
        "the engine configuration, as --config (default manent.yml)",
    ),
    (
        "MANENT_COLORS, MANENT_GLYPHS",
        "the console's colours (none, 16, 256, truecolor) and symbols (ascii, unicode), as \
         --colors and --glyphs",
    ),
    (
        "NO_COLOR",
        "no colour in the console, whatever the terminal says",
    ),
    (
        "MANENT_PLUGIN_DEBUG",
        "a plugin started with it waits for a debugger before it serves",
    ),
    (
        "SUDO_USER, SSH_CONNECTION",
        "who acted, for the journal: taken only where the kernel agrees (the real user, the \
         sshd of this session); otherwise recorded as a claim",
    ),
];

/// The exit codes, for the pages' EXIT STATUS section.
const EXIT_STATUS: &[(u8, &str)] = &[
    (exit::OK, "done"),
    (
        exit::FAILED,
        "the deployment failed (or waits for a decision after a failure)",
    ),
    (
        exit::BAD_INPUT,
        "bad input, a refused command or a conflicting deployment",
    ),
    (
        exit::CANCELLED,
        "cancelled, aborted or reverted by an operator (0 for abort and revert themselves)",
    ),
    (
        exit::ROLLED_BACK,
        "failed and rolled back (atomic), or reverted by its analysis",
    ),
    (
        exit::INTERRUPTED,
        "the engine stopped before the end (it resumes at the next start)",
    ),
    (exit::ENGINE, "the engine or its database is unusable"),
    (exit::CANARY_WAITS, "a canary waits for an operator"),
];

/// The variable under which the shell asks `manent` itself what completes a line.
pub const COMPLETE_VAR: &str = "MANENT_COMPLETE";

/// `manent completions SHELL`: the completion script on stdout. It asks the `manent` on PATH
/// what completes the line being typed (`MANENT_COMPLETE=bash manent -- …`): the verbs and
/// flags from the command line's definition, and the applications, environments and
/// deployment ids of the configuration that line names (`super::complete`).
pub fn completions(shell: clap_complete::Shell, out: &mut Out) -> u8 {
    let shells = clap_complete::env::Shells::builtins();
    let Some(completer) = shells.completer(&shell.to_string()) else {
        out.error(format!(
            "{shell}: manent completes bash, zsh, fish, elvish and powershell"
        ));
        return exit::BAD_INPUT;
    };
    let mut script = Vec::new();
    if let Err(e) =
        completer.write_registration(COMPLETE_VAR, "manent", "manent", "manent", &mut script)
    {
        out.error(format!("the {shell} completion script: {e}"));
        return exit::ENGINE;
    }
    out.line(String::from_utf8_lossy(&script).trim_end());
    exit::OK
}

/// Answers the shell when it asks what completes a line (`MANENT_COMPLETE` set), then exits;
/// otherwise returns at once. Called before anything is written to stdout.
pub fn answer_completion() {
    clap_complete::CompleteEnv::with_factory(Cli::command)
        .var(COMPLETE_VAR)
        .complete();
}

/// `manent man DIR`: `manent.1` and `manent-VERB.1` for every verb shown, written in `DIR`
/// (which must exist); their names on stdout.
pub fn man(dir: &Path, out: &mut Out) -> u8 {
    if !dir.is_dir() {
        out.error(format!(
            "{}: not a directory (create it first: the pages are written there)",
            dir.display()
        ));
        return exit::BAD_INPUT;
    }
    let root = Cli::command();
    let mut pages = vec![("manent".to_owned(), root.clone())];
    for sub in root.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("manent-{}", sub.get_name());
        let page = sub
            .clone()
            .display_name(name.clone())
            .bin_name(format!("manent {}", sub.get_name()));
        pages.push((name, page));
    }
    for (name, cmd) in pages {
        let file = dir.join(format!("{name}.1"));
        if let Err(e) = write_page(&file, cmd) {
            out.error(format!("{}: {e}", file.display()));
            return exit::ENGINE;
        }
        out.line(file.display().to_string());
    }
    exit::OK
}

fn write_page(file: &Path, cmd: clap::Command) -> std::io::Result<()> {
    let versioned = cmd.get_version().is_some();
    let verbs = cmd.get_subcommands().any(|s| !s.is_hide_set());
    let man = clap_mangen::Man::new(cmd);
    let mut page = Vec::new();
    man.render_title(&mut page)?;
    man.render_name_section(&mut page)?;
    man.render_synopsis_section(&mut page)?;
    man.render_description_section(&mut page)?;
    man.render_options_section(&mut page)?;
    if verbs {
        man.render_subcommands_section(&mut page)?;
    }
    let mut roff = clap_mangen::roff::Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    for (code, what) in EXIT_STATUS {
        roff.control("TP", []);
        roff.text([clap_mangen::roff::bold(code.to_string())]);
        roff.text([clap_mangen::roff::roman(*what)]);
    }
    roff.control("SH", ["ENVIRONMENT"]);
    for (name, what) in ENVIRONMENT {
        roff.control("TP", []);
        roff.text([clap_mangen::roff::bold(*name)]);
        roff.text([clap_mangen::roff::roman(*what)]);
    }
    roff.to_writer(&mut page)?;
    if versioned {
        man.render_version_section(&mut page)?;
    }
    // Written beside it and renamed into place: a link another user left under that name is
    // replaced, never followed (a shared directory, a root shell).
    let dir = file.parent().unwrap_or(Path::new("."));
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)?;
    if let Err(e) = f
        .write_all(&page)
        .and_then(|()| std::fs::rename(&tmp, file))
    {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}
