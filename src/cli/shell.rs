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

/// `manent schema config|app`: the JSON Schema on stdout.
pub fn schema(of: super::SchemaOf, out: &mut Out) -> u8 {
    let schema = match of {
        super::SchemaOf::Config => crate::config::schema::config(),
        super::SchemaOf::App => crate::config::schema::app(),
    };
    match serde_json::to_string_pretty(&schema) {
        Ok(text) => {
            out.line(text);
            exit::OK
        }
        Err(e) => {
            out.error(format!("the schema: {e}"));
            exit::ENGINE
        }
    }
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
    let file = dir.join("manent-yml.5");
    if let Err(e) = write_atomically(&file, &files_page()) {
        out.error(format!("{}: {e}", file.display()));
        return exit::ENGINE;
    }
    out.line(file.display().to_string());
    exit::OK
}

/// `manent-yml(5)`: every key of manent.yml and of an application file, with its type and
/// what it does, walked from their schemas (so from the loader's own types).
fn files_page() -> Vec<u8> {
    use clap_mangen::roff::{Roff, bold, italic, roman};
    let mut roff = Roff::new();
    let version = env!("CARGO_PKG_VERSION");
    roff.control("TH", ["MANENT-YML", "5", "", &format!("manent {version}")]);
    roff.control("SH", ["NAME"]);
    roff.text([roman(
        "manent-yml - manent's engine configuration (manent.yml) and application files",
    )]);
    roff.control("SH", ["DESCRIPTION"]);
    roff.text([roman(
        "manent.yml configures the engine: its database, plugins, secret sources and \
         settings. Each application file in its apps directory describes one application: \
         what is deployed, by which plugin, to which environments and targets, how. Both are \
         YAML; `manent validate` checks them and names file:line:col, and `manent schema \
         config|app` prints their JSON Schema for an editor. The keys below are written as \
         paths: a.b is b under a, a.NAME.b is b under any name, a[].b is b in each item of a \
         list.",
    )]);
    for (title, schema) in [
        ("MANENT.YML", crate::config::schema::config()),
        ("APPLICATION FILES", crate::config::schema::app()),
    ] {
        roff.control("SH", [title]);
        let root = serde_json::to_value(&schema).unwrap_or_default();
        let mut rows = Vec::new();
        keys(&root, &root, "", 0, &mut rows);
        for (path, kind, what) in rows {
            roff.control("TP", []);
            roff.text([bold(path), roman(" "), italic(kind)]);
            roff.text([roman(what)]);
        }
    }
    roff.control("SH", ["SEE ALSO"]);
    roff.text([roman("manent(1), manent-validate(1), manent-schema(1)")]);
    roff.render().into_bytes()
}

/// The definition a `$ref` names (`#/definitions/NAME`, or `#/$defs/NAME`): its name and schema.
fn definition<'a>(
    root: &'a serde_json::Value,
    r: &str,
) -> Option<(&'a str, &'a serde_json::Value)> {
    let (section, name) = r.strip_prefix("#/")?.split_once('/')?;
    root.get(section)?
        .as_object()?
        .get_key_value(name)
        .map(|(k, v)| (k.as_str(), v))
}

/// What `node` stands for, the `$ref` of a plain reference or of one wrapped in `allOf: [X]`
/// (draft 7 keeps a reference's siblings beside it that way) or `anyOf: [X, null]`.
fn referred(node: &serde_json::Value) -> Option<&str> {
    if let Some(r) = node.get("$ref").and_then(|r| r.as_str()) {
        return Some(r);
    }
    let wrapped = |key: &str| node.get(key).and_then(|a| a.as_array());
    match (
        wrapped("allOf").map(Vec::as_slice),
        wrapped("anyOf").map(Vec::as_slice),
    ) {
        (Some([one]), _) => referred(one),
        (_, Some([one, null])) if null.get("type").and_then(|t| t.as_str()) == Some("null") => {
            referred(one)
        }
        _ => None,
    }
}

/// `node` resolved through its reference, if it is one.
fn resolved<'a>(root: &'a serde_json::Value, node: &'a serde_json::Value) -> &'a serde_json::Value {
    if let Some((_, def)) = referred(node).and_then(|r| definition(root, r)) {
        return resolved(root, def);
    }
    if let Some(any) = node.get("anyOf").and_then(|a| a.as_array())
        && let [one, null] = any.as_slice()
        && null.get("type").and_then(|t| t.as_str()) == Some("null")
    {
        return resolved(root, one);
    }
    node
}

/// The name of the definition `node` refers to (itself or as `anyOf: [X, null]`), for a
/// value of a named form: Duration, Size, Rate, Version…
fn form_of(root: &serde_json::Value, node: &serde_json::Value) -> Option<String> {
    let (name, _) = definition(root, referred(node)?)?;
    // A section or a spec is a map of its own keys, listed below it.
    (!name.ends_with("Section") && !name.ends_with("Spec") && !name.ends_with("Decl"))
        .then(|| name.to_owned())
}

/// What a value is, in a word or two.
fn kind_of(node: &serde_json::Value) -> String {
    let consts: Vec<&str> = node
        .get("oneOf")
        .and_then(|o| o.as_array())
        .map(|o| {
            o.iter()
                .filter_map(|v| v.get("const").and_then(|c| c.as_str()))
                .collect()
        })
        .unwrap_or_default();
    if !consts.is_empty() {
        return consts.join(" | ");
    }
    let types: Vec<&str> = match node.get("type") {
        Some(serde_json::Value::String(t)) => vec![t.as_str()],
        Some(serde_json::Value::Array(ts)) => ts
            .iter()
            .filter_map(|t| t.as_str())
            .filter(|t| *t != "null")
            .collect(),
        _ => Vec::new(),
    };
    if let Some(values) = node.get("enum").and_then(|e| e.as_array()) {
        let v: Vec<&str> = values.iter().filter_map(|v| v.as_str()).collect();
        return v.join(" | ");
    }
    match types.as_slice() {
        ["object"] if node.get("properties").is_none() => "map".into(),
        ["array"] => "list".into(),
        [] if node.get("oneOf").is_some() => "one of several forms".into(),
        [] => "any".into(),
        ts => ts.join(" or "),
    }
}

/// Rows (path, kind, description) for `node`'s keys, depth first.
fn keys(
    root: &serde_json::Value,
    node: &serde_json::Value,
    at: &str,
    depth: usize,
    rows: &mut Vec<(String, String, String)>,
) {
    let node = resolved(root, node);
    let Some(props) = node.get("properties").and_then(|p| p.as_object()) else {
        return;
    };
    for (key, child) in props {
        let path = if at.is_empty() {
            key.clone()
        } else {
            format!("{at}.{key}")
        };
        let target = resolved(root, child);
        let what = child
            .get("description")
            .or_else(|| target.get("description"))
            .and_then(|d| d.as_str())
            .unwrap_or("")
            .replace('\n', " ");
        let kind = if target.get("properties").is_some() {
            "map, its keys below".to_owned()
        } else {
            // Values listed say more than their form's name.
            let kind = kind_of(target);
            match form_of(root, child) {
                Some(form) if !kind.contains(" | ") => form,
                _ => kind,
            }
        };
        rows.push((path.clone(), kind, what));
        if depth >= 4 {
            continue;
        }
        keys(root, target, &path, depth + 1, rows);
        if let Some(each) = target.get("additionalProperties").filter(|a| a.is_object()) {
            keys(root, each, &format!("{path}.NAME"), depth + 1, rows);
        }
        if let Some(item) = target.get("items") {
            keys(root, item, &format!("{path}[]"), depth + 1, rows);
        }
    }
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
    write_atomically(file, &page)
}

/// Written beside it and renamed into place: a link another user left under that name is
/// replaced, never followed (a shared directory, a root shell).
fn write_atomically(file: &Path, page: &[u8]) -> std::io::Result<()> {
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
    if let Err(e) = f.write_all(page).and_then(|()| std::fs::rename(&tmp, file)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}
