//! Verbs that only read: validate, plan, status, history, logs. None starts a plugin process or
//! an engine.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::output::{self, Out, existing_store, load_config, print_errors};
use super::{HistoryArgs, LogsArgs, PlanArgs, StatusArgs, exit};
use crate::config::{ConfigError, EnvSpec};
use crate::deploy::plan;
use crate::deploy::records::Db;
use crate::deploy::records::{JournalEntry, ReleaseRecord};
use crate::deploy::releases;
use crate::deploy::view::{self, DeploymentView};
use crate::plugin::logger::Discard;
use crate::plugin::{Registry, Request, Secrets};
use crate::workflow::StoreError;
use crate::workflow::store::WorkflowQuery;

#[derive(Serialize)]
struct Validation {
    ok: bool,
    applications: usize,
    environments: usize,
    targets: usize,
    problems: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

/// What validate can tell of the secret sources: a `file:` that is not a readable regular file
/// is an error; an unset `env:` variable a warning (the engine that deploys may have it), which
/// becomes an error when a plugin asks for it. A value it can read that is shorter than 8
/// characters is refused (`engine.allow_short_secrets` lets a test fixture have one). No value
/// is shown.
fn check_secrets(config: &crate::config::Config) -> (Vec<ConfigError>, Vec<String>) {
    use crate::plugin::secrets::SHORT;
    let (mut problems, mut warnings) = (Vec::new(), Vec::new());
    let text = config.manent_text().unwrap_or_default();
    let at = |needle: &str| crate::config::locate_text(&text, needle);
    for (name, source) in &config.secrets {
        let value = match source {
            crate::config::SecretRef::Env(var) => match std::env::var(var) {
                Ok(v) => Some(v),
                Err(_) => {
                    warnings.push(format!(
                        "{}: secret `{name}`: the environment variable {var} is not set here; a \
                         deploy that reads it fails unless the engine's environment has it",
                        config.file.display()
                    ));
                    None
                }
            },
            crate::config::SecretRef::File(path) => {
                let read = match std::fs::metadata(path) {
                    Err(e) => Err(e.to_string()),
                    Ok(m) if !m.is_file() => {
                        Err("not a regular file (a FIFO or a device is refused)".into())
                    }
                    Ok(m) if m.len() > 1 << 20 => Err("larger than 1 MiB".into()),
                    Ok(_) => std::fs::read_to_string(path).map_err(|e| e.to_string()),
                };
                match read {
                    Ok(v) => Some(v.trim_end_matches(['\n', '\r']).to_owned()),
                    Err(why) => {
                        problems.push(ConfigError::located(
                            &config.file,
                            at(&format!("file:{path}")),
                            format!("secrets.{name}: {path} cannot be read: {why}"),
                        ));
                        None
                    }
                }
            }
            crate::config::SecretRef::Literal(v) => Some(v.clone()),
        };
        if let Some(v) = value
            && v.chars().count() < SHORT
            && !config.engine.allow_short_secrets
        {
            problems.push(ConfigError {
                file: config.file.clone(),
                position: at(&format!("{name}:")),
                message: format!(
                    "secrets.{name}: its value is {} characters; a secret needs at least {SHORT} \
                     (a short one is guessed, and redacting it would hide ordinary words)",
                    v.chars().count()
                ),
                hint: Some(
                    "use a longer secret; a test fixture may set `engine: {allow_short_secrets: \
                     true}`"
                        .into(),
                ),
            });
        }
    }
    (problems, warnings)
}

/// `${secret:NAME}` in exec's `env:` (manent.yml) and `params.env` (the descriptor) is read
/// through the deploy's secrets: each NAME must be declared and listed under `deploy.secrets`.
fn check_exec_secret_refs(
    config: &crate::config::Config,
    registry: &Registry,
    spec: &EnvSpec,
    d: &crate::config::Descriptor,
) -> Vec<ConfigError> {
    let is_exec = registry
        .decl(&spec.plugin)
        .and_then(|decl| decl.builtin.as_deref())
        == Some("exec");
    if !is_exec {
        return Vec::new();
    }
    let env_of = |v: Option<&serde_json::Value>| -> Vec<(String, String)> {
        v.and_then(|v| v.get("env"))
            .and_then(|e| e.as_object())
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    };
    let options = registry.decl(&spec.plugin).map(|decl| decl.options.clone());
    let mut problems = Vec::new();
    let sources = [
        (
            "params.env",
            env_of(Some(&spec.params)),
            &d.file,
            d.text.clone(),
        ),
        (
            "plugins.exec.env",
            env_of(options.as_ref()),
            &config.file,
            config.manent_text().unwrap_or_default(),
        ),
    ];
    for (where_, env, file, text) in sources {
        for (k, v) in env {
            let names = match crate::config::values::secret_refs(&v) {
                Ok(n) => n,
                Err(e) => {
                    problems.push(ConfigError::located(
                        file,
                        crate::config::locate_text(&text, "${secret:"),
                        format!("{where_}.{k}: {e}"),
                    ));
                    continue;
                }
            };
            for name in names {
                let problem = if !config.secrets.contains_key(&name) {
                    Some((
                        format!("{where_}.{k} reads ${{secret:{name}}}, which is not declared"),
                        format!(
                            "declare it under `secrets:` in manent.yml, e.g. `{name}: env:{}`",
                            name.to_uppercase()
                        ),
                    ))
                } else if !spec.secrets.contains(&name) {
                    Some((
                        format!(
                            "{where_}.{k} reads ${{secret:{name}}}, which {} does not list \
                             under deploy.secrets (environment {})",
                            d.file.display(),
                            spec.environment
                        ),
                        format!(
                            "add `secrets: [{name}]` under `deploy:` in {}",
                            d.file.display()
                        ),
                    ))
                } else {
                    None
                };
                if let Some((message, hint)) = problem {
                    problems.push(ConfigError {
                        file: file.clone(),
                        position: crate::config::locate_text(&text, &format!("${{secret:{name}}}")),
                        message,
                        hint: Some(hint),
                    });
                }
            }
        }
    }
    problems
}

/// `manent validate`: every file, every environment's plan, and built-in plugins' own checks.
pub async fn validate(config_path: &Path, json: bool, out: &mut Out) -> u8 {
    let config = match crate::config::Config::load(config_path, &crate::plugin::catalog()) {
        Ok(c) => c,
        Err(e) => {
            if json {
                let problems = e.0.iter().map(ToString::to_string).collect();
                out.json(&Validation {
                    ok: false,
                    applications: 0,
                    environments: 0,
                    targets: 0,
                    problems,
                    warnings: Vec::new(),
                });
            } else {
                print_errors(&e, out);
            }
            return exit::BAD_INPUT;
        }
    };
    let mut problems: Vec<ConfigError> = config.problems.clone();
    let (secret_problems, warnings) = check_secrets(&config);
    problems.extend(secret_problems);
    let registry = Registry::new(&config, Arc::new(Discard));
    let (mut envs, mut targets) = (0, 0);
    for d in &config.descriptors {
        for env in d.spec.environments.keys() {
            let spec = match config.environment(&d.spec.application, env) {
                Ok(s) => s,
                Err(e) => {
                    problems.extend(e.0);
                    continue;
                }
            };
            envs += 1;
            targets += spec.targets.len();
            problems.extend(check_exec_secret_refs(&config, &registry, &spec, d));
            if let Err(e) = check_with_plugin(&registry, &spec).await {
                let at = config.locate_in(&d.file, &e, "params:");
                problems.push(ConfigError::located(
                    &d.file,
                    at,
                    format!("environments.{env}: {e}"),
                ));
            }
        }
    }
    // One broken file can surface once per environment; say it once.
    let mut seen = std::collections::BTreeSet::new();
    problems.retain(|p| seen.insert(p.to_string()));
    let ok = problems.is_empty();
    if json {
        out.json(&Validation {
            ok,
            applications: config.applications().len(),
            environments: envs,
            targets,
            problems: problems.iter().map(ToString::to_string).collect(),
            warnings,
        });
    } else {
        for w in &warnings {
            out.note(format!("warning: {w}"));
        }
        for p in &problems {
            out.note(format!("error: {p}"));
        }
        if ok {
            out.line(format!(
                "ok: {} ({} applications, {envs} environments, {targets} targets, {} plugins)",
                config.file.display(),
                config.applications().len(),
                registry.names().count()
            ));
        }
    }
    if ok { exit::OK } else { exit::BAD_INPUT }
}

/// Plans `spec` and, for built-in plugins, asks the plugin to validate it (no secrets, no
/// side effects). External plugins are never started by validation.
async fn check_with_plugin(registry: &Registry, spec: &EnvSpec) -> Result<(), String> {
    let plan = plan::compute(spec)?;
    let builtin = registry
        .decl(&spec.plugin)
        .is_some_and(|d| d.builtin.is_some());
    if !builtin {
        return Ok(());
    }
    let handle = registry
        .get(&spec.plugin)
        .await
        .map_err(|e| e.to_string())?;
    let targets = plan.request_targets();
    let req: Request = crate::deploy::steps::request(
        spec,
        "validate",
        targets,
        spec.parallelism,
        Secrets::none(),
        None,
        &crate::plugin::Processes::none(),
    );
    handle
        .deployer
        .validate(&req)
        .await
        .map_err(|e| e.to_string())
}

#[derive(Serialize)]
struct PlanOut<'a> {
    application: &'a str,
    environment: &'a str,
    production: bool,
    version: &'a str,
    plugin: &'a str,
    strategy: &'a crate::config::Strategy,
    parallelism: u32,
    batches: Vec<BatchOut>,
    hooks: &'a [crate::deploy::plan::PlannedHook],
}

#[derive(Serialize)]
struct BatchOut {
    index: u32,
    targets: Vec<TargetOut>,
}

#[derive(Serialize)]
struct TargetOut {
    moniker: String,
    host: String,
    live: Option<String>,
}

/// `manent plan`
pub async fn plan(config_path: &Path, a: &PlanArgs, out: &mut Out) -> u8 {
    let Some(config) = load_config(config_path, a.target.file.as_deref(), out) else {
        return exit::BAD_INPUT;
    };
    let Some((spec, p)) = output::resolve(
        &config,
        &a.target.app,
        &a.target.env,
        a.version.as_deref(),
        out,
    ) else {
        return exit::BAD_INPUT;
    };
    let live = match existing_store(&config).await {
        Ok(Some(store)) => match store.releases(&spec.subject()).await {
            Ok(rows) => releases::live_versions(rows),
            Err(e) => return output::db_error(&output::database_shown(&config), &e, out),
        },
        Ok(None) => BTreeMap::new(),
        Err(e) => return output::db_error(&output::database_shown(&config), &e, out),
    };
    let batches = p
        .batches
        .iter()
        .map(|b| BatchOut {
            index: b.index,
            targets: b
                .targets
                .iter()
                .map(|t| TargetOut {
                    moniker: t.moniker.to_string(),
                    host: t.host.clone(),
                    live: live.get(&t.moniker.to_string()).cloned(),
                })
                .collect(),
        })
        .collect::<Vec<_>>();
    if a.json.json {
        out.json(&PlanOut {
            application: &spec.application,
            environment: &spec.environment,
            production: spec.production,
            version: &spec.artifact.version,
            plugin: &spec.plugin,
            strategy: &spec.strategy,
            parallelism: spec.parallelism,
            batches,
            hooks: &p.hooks,
        });
        return exit::OK;
    }
    let strategy = spec.strategy.describe();
    out.line(format!(
        "{} {} → {}{} ({}): {}, {strategy}, plugin {}, parallelism {}{}",
        spec.application,
        if spec.artifact.version.is_empty() {
            "(no version)"
        } else {
            &spec.artifact.version
        },
        spec.environment,
        if spec.production { " [production]" } else { "" },
        spec.descriptor.display(),
        plan::size(p.len(), p.batches.len()),
        spec.plugin,
        spec.parallelism,
        if spec.atomic { ", atomic" } else { "" },
    ));
    for b in &batches {
        out.line(format!("batch {}", b.index));
        for t in &b.targets {
            let change = match &t.live {
                Some(v) if *v == spec.artifact.version => format!("{v} (unchanged)"),
                Some(v) => format!("{v} → {}", spec.artifact.version),
                None => format!("new → {}", spec.artifact.version),
            };
            out.line(format!("  {:<40} {:<20} {change}", t.moniker, t.host));
        }
    }
    print_hooks_plan(&p, out);
    exit::OK
}

/// The hooks at each event, in the order they run (weight, kind, name).
fn print_hooks_plan(p: &crate::deploy::plan::Plan, out: &mut Out) {
    if p.hooks.is_empty() {
        return;
    }
    out.line("hooks, in the order they run at each event:");
    for event in crate::config::hooks::EVENTS {
        let at: Vec<_> = p.hooks_at(event).collect();
        if at.is_empty() {
            continue;
        }
        out.line(format!("  {event}"));
        for (i, h) in at.iter().enumerate() {
            out.line(format!(
                "    {}. {:<24} {:<8} weight {:<6} {}",
                i + 1,
                h.name,
                h.kind,
                h.weight,
                h.moniker
            ));
        }
    }
}

/// What a list shows of the deployments of `rows` (no targets: `status ID` has them), each
/// read from its row and events; a read error is an error, not a gap.
async fn views(
    store: &dyn Db,
    rows: Vec<crate::workflow::store::WorkflowRow>,
) -> Result<Vec<DeploymentView>, StoreError> {
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        out.push(view::summary_of_row(store, r).await?);
    }
    Ok(out)
}

#[derive(Serialize)]
struct Inbox {
    items: Vec<crate::deploy::inbox::Item>,
    locks: Vec<crate::deploy::records::Lock>,
}

/// `manent inbox`: what waits on a human, most urgent first, and the locks in force.
pub async fn inbox(config_path: &Path, json: bool, out: &mut Out) -> u8 {
    let Some(config) = output::load_settings(config_path, out) else {
        return exit::BAD_INPUT;
    };
    let store = match existing_store(&config).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            if json {
                out.json(&Inbox {
                    items: Vec::new(),
                    locks: Vec::new(),
                });
            } else {
                out.line("nothing waits on you (no deployments yet)");
            }
            return exit::OK;
        }
        Err(e) => return output::db_error(&output::database_shown(&config), &e, out),
    };
    let now = crate::sys::now_ms();
    let query = WorkflowQuery {
        subject: None,
        live_only: false,
        limit: 500,
        heads: true,
    };
    let loaded = match store.workflows(query).await {
        Ok(rows) => match views(&*store, rows).await {
            Ok(v) => store.locks(now).await.map(|l| (v, l)),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    let (views, locks) = match loaded {
        Ok(x) => x,
        Err(e) => return output::db_error(&output::database_shown(&config), &e, out),
    };
    let mut items = crate::deploy::inbox::items(&views, &locks, now);
    match store.parked(100).await {
        Ok(p) => items.extend(crate::deploy::inbox::parked_items(&p)),
        Err(e) => return output::db_error(&output::database_shown(&config), &e, out),
    }
    if json {
        out.json(&Inbox { items, locks });
        return exit::OK;
    }
    if items.is_empty() {
        out.line("nothing waits on you");
    }
    for i in &items {
        out.line(format!(
            "{:<7} {:<22} {:<26} {}",
            i.waiting.as_str(),
            i.subject,
            i.deployment.as_deref().unwrap_or("-"),
            i.what
        ));
        out.line(format!("{:<7} {:<22} {:<26} → {}", "", "", "", i.verbs));
    }
    print_locks(&locks, out);
    exit::OK
}

/// The locks in force, one line each.
fn print_locks(locks: &[crate::deploy::records::Lock], out: &mut Out) {
    if locks.is_empty() {
        return;
    }
    out.line("");
    for l in locks {
        let until = l.expires_at.map_or_else(
            || "until unlocked".to_owned(),
            |e| format!("until {}", output::time(e)),
        );
        out.line(format!(
            "locked  {:<22} by {} since {} {until}: {}",
            l.subject,
            l.owner(),
            output::time(l.since),
            l.reason
        ));
    }
}

/// `manent status [ID]`
pub async fn status(config_path: &Path, a: &StatusArgs, out: &mut Out) -> u8 {
    let Some(config) = output::load_settings(config_path, out) else {
        return exit::BAD_INPUT;
    };
    // A read never creates the database: with none yet, nothing has run here.
    let store = match output::read_store(&config, out).await {
        Ok(Some(s)) => s,
        Ok(None) => return nothing_yet(&config, a.deployment.as_deref(), a.json.json, out),
        Err(code) => return code,
    };
    let engine_running = output::engine_running(&config, &*store).await;
    if let Some(id) = &a.deployment
        && a.watch
    {
        return watch(&config, &*store, id, a.json.json, out).await;
    }
    if let Some(id) = &a.deployment {
        let v = match view::load(&*store, id).await {
            Ok(Some(v)) => v,
            Ok(None) => {
                if let Err(e) = output::verify(&*store).await {
                    return output::db_error(&output::database_shown(&config), &e, out);
                }
                out.error(format!("no deployment with id {id} (see `manent status`)"));
                return exit::BAD_INPUT;
            }
            Err(e) => return output::db_error(&output::database_shown(&config), &e, out),
        };
        let mut v = v.honest(engine_running);
        // With no engine watching, a live canary's router is read now: what it serves, not
        // what it served when an engine last looked.
        if !engine_running
            && v.status.is_live()
            && let Some(c) = v.canary.as_mut()
            && c.status.routing.as_ref().is_some_and(|r| !r.retired)
        {
            let read = crate::deploy::canary::watch::read_without_engine(&config, &*store, id)
                .await
                .unwrap_or_else(|e| crate::deploy::canary::Actual {
                    error: Some(e),
                    at: crate::sys::now_ms(),
                    by_engine: false,
                    ..Default::default()
                });
            c.actual = Some(read);
        }
        if a.json.json {
            out.json(&v);
        } else {
            print_view(&v, engine_running, out);
        }
        return exit::OK;
    }
    let query = WorkflowQuery {
        subject: None,
        live_only: false,
        limit: 20,
        heads: true,
    };
    let views = match store.workflows(query).await {
        Ok(rows) => views(&*store, rows).await,
        Err(e) => Err(e),
    };
    let views: Vec<DeploymentView> = match views {
        Ok(v) => v.into_iter().map(|v| v.honest(engine_running)).collect(),
        Err(e) => return output::db_error(&output::database_shown(&config), &e, out),
    };
    if views.is_empty()
        && let Err(e) = output::verify(&*store).await
    {
        return output::db_error(&output::database_shown(&config), &e, out);
    }
    if a.json.json {
        out.json(&views);
        return exit::OK;
    }
    let locks = store.locks(crate::sys::now_ms()).await.unwrap_or_default();
    if views.is_empty() {
        out.line("no deployments yet");
        print_locks(&locks, out);
        return exit::OK;
    }
    out.line(format!(
        "{:<26} {:<9} {:<22} {:<16} {:<16} {:<24} {}",
        "ID", "KIND", "APP/ENV", "VERSION", "STATE", "PHASE", "STARTED"
    ));
    for v in &views {
        out.line(format!(
            "{:<26} {:<9} {:<22} {:<16} {:<16} {:<24} {}",
            v.id,
            v.kind,
            v.subject(),
            v.version,
            v.state_with(engine_running),
            v.phase
                .as_ref()
                .map_or_else(|| "-".into(), ToString::to_string),
            output::time(v.created_at)
        ));
    }
    print_locks(&locks, out);
    exit::OK
}

/// A `Write` whose bytes can be read back (a redraw is built whole, then written at once).
#[derive(Clone, Default)]
struct Buffer(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut b) = self.0.lock() {
            b.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    fn take(&self) -> String {
        self.0
            .lock()
            .map(|mut b| String::from_utf8_lossy(&std::mem::take(&mut *b)).into_owned())
            .unwrap_or_default()
    }
}

/// The terminal's width and height (80×24 when they cannot be told).
fn terminal_size() -> (usize, usize) {
    #[cfg(feature = "tui")]
    if let Ok((cols, rows)) = crossterm::terminal::size() {
        return (usize::from(cols.max(20)), usize::from(rows.max(6)));
    }
    (80, 24)
}

/// How often `--watch` reads the deployment again.
const WATCH_EVERY: Duration = Duration::from_millis(500);

/// `manent status ID --watch`: the deployment, again at every change, until it ends or waits
/// for a decision; exits with its result code (as `deploy` would).
async fn watch(
    config: &crate::config::Config,
    store: &dyn Db,
    id: &str,
    json: bool,
    out: &mut Out,
) -> u8 {
    use std::io::IsTerminal;
    let tty = !json && std::io::stdout().is_terminal();
    let mut last = String::new();
    loop {
        let v = match view::load(store, id).await {
            Ok(Some(v)) => v,
            Ok(None) => {
                out.error(format!("no deployment with id {id} (see `manent status`)"));
                return exit::BAD_INPUT;
            }
            Err(e) => return output::db_error(&output::database_shown(config), &e, out),
        };
        let engine_running = output::engine_running(config, store).await;
        let v = v.honest(engine_running);
        let state = v.state;
        let ended = super::follow::settled(&v, super::follow::Expect::End)
            || state == crate::deploy::state::DeploymentState::Interrupted;
        if tty {
            let buf = Buffer::default();
            let mut screen = Out::to(buf.clone(), std::io::sink());
            print_view(&v, engine_running, &mut screen);
            let full = buf.take();
            // While it runs, what fits the terminal (the state on top stays in sight); at the
            // end, all of it.
            let text = if ended {
                full
            } else {
                let (cols, rows) = terminal_size();
                // Room for the "more" line and the footer, and no scroll from the last newline.
                let mut left = rows.saturating_sub(4);
                let mut shown = String::new();
                let mut hidden = 0;
                for line in full.lines() {
                    // A line wider than the terminal takes more than one row.
                    let takes = line.chars().count().div_ceil(cols).max(1);
                    if hidden > 0 || takes > left {
                        hidden += 1;
                        continue;
                    }
                    left -= takes;
                    shown.push_str(line);
                    shown.push('\n');
                }
                if hidden > 0 {
                    shown.push_str(&format!(
                        "… {hidden} more lines (all of them once it ends)\n"
                    ));
                }
                format!("{shown}watching {id}: Ctrl-C stops watching (it goes on)")
            };
            if text != last {
                // Home, clear, the whole view: one write, so it never flickers half-drawn.
                out.raw(&format!("\x1b[H\x1b[2J{text}"));
                last = text;
            }
        } else if !json {
            let done = v.done();
            let line = format!(
                "{}  {}  {}  {done}/{} targets",
                output::time(crate::sys::now_ms()),
                state,
                v.phase
                    .as_ref()
                    .map_or_else(|| "-".into(), ToString::to_string),
                v.targets.len()
            );
            // A line per change (the time aside).
            let key = line.split_once("  ").map_or("", |(_, k)| k).to_owned();
            if key != last {
                out.line(line);
                last = key;
            }
        }
        if ended {
            if json {
                out.json(&v);
            } else if !tty {
                print_view(&v, engine_running, out);
            }
            if state == crate::deploy::state::DeploymentState::Interrupted {
                return exit::INTERRUPTED;
            }
            return super::follow::code_of(&v, super::follow::Expect::End);
        }
        tokio::time::sleep(WATCH_EVERY).await;
    }
}

fn print_view(v: &DeploymentView, engine_running: bool, out: &mut Out) {
    let state = v.state_with(engine_running);
    out.line(format!(
        "{}  {} of {} {} to {}{}  by {}",
        v.id,
        v.kind,
        v.application,
        v.version,
        v.environment,
        if v.production { " [production]" } else { "" },
        v.operator
    ));
    out.line(format!(
        "state {state}  phase {}  started {}{}{}",
        v.phase
            .as_ref()
            .map_or_else(|| "-".into(), ToString::to_string),
        output::time(v.created_at),
        v.completed_at
            .map(|t| format!("  ended {}", output::time(t)))
            .unwrap_or_default(),
        if v.runs > 1 {
            format!("  resumed after {} crash(es)", v.runs - 1)
        } else {
            String::new()
        }
    ));
    if let Some(r) = &v.report
        && !r.message.is_empty()
    {
        out.line(r.message.clone());
    } else if let Some(f) = v.failure() {
        out.line(f);
    }
    if state == crate::deploy::state::DeploymentState::Interrupted {
        out.line(format!(
            "no engine is running it: `manent resume {}` continues it",
            v.id
        ));
    }
    if !v.accepts.is_empty() {
        let takes: Vec<&str> = v.accepts.iter().map(|t| t.as_str()).collect();
        out.line(format!("takes now: {}", takes.join(", ")));
    }
    if !v.pending_commands.is_empty() {
        out.line(format!(
            "commands waiting: {}",
            v.pending_commands.join(", ")
        ));
    }
    if let Some(c) = &v.canary {
        print_canary(c, v.status.is_live(), out);
    }
    if !v.hooks.is_empty() {
        out.line(format!(
            "{:<14} {:<6} {:<24} {:<8} {:<9} {:<8} {:<9} {}",
            "HOOK EVENT", "WEIGHT", "NAME", "KIND", "STATE", "ATTEMPT", "TIME", "MESSAGE"
        ));
        for h in &v.hooks {
            let deletes = if h.deletes.is_empty() {
                String::new()
            } else {
                format!(" [delete {}]", h.deletes.join("; "))
            };
            out.line(format!(
                "{:<14} {:<6} {:<24} {:<8} {:<9} {:<8} {:<9} {}{deletes}",
                h.event.as_str(),
                h.weight,
                h.name,
                h.kind,
                h.state.as_str(),
                h.attempt,
                h.duration_ms
                    .map(output::duration)
                    .unwrap_or_else(|| "-".into()),
                h.message
            ));
        }
    }
    out.line(format!(
        "{:<6} {:<40} {:<16} {:<8} {:<9} {}",
        "BATCH", "MONIKER", "STATE", "ATTEMPT", "TIME", "MESSAGE"
    ));
    for t in &v.targets {
        out.line(format!(
            "{:<6} {:<40} {:<16} {:<8} {:<9} {}",
            t.batch,
            t.moniker,
            t.state,
            t.attempt,
            t.duration_ms
                .map(output::duration)
                .unwrap_or_else(|| "-".into()),
            t.message
        ));
    }
}

/// A canary's split, steps (the current one marked), analysis runs and decisions.
fn print_canary(c: &crate::deploy::view::CanaryView, live: bool, out: &mut Out) {
    let s = &c.status;
    let mut line = format!(
        "canary: candidate {}% / stable {}%",
        s.weight,
        100 - s.weight.min(100)
    );
    let retired = s.routing.as_ref().is_some_and(|r| r.retired);
    match c.actual_weight().filter(|_| live && !retired) {
        Some(a) if a != s.weight => line.push_str(&format!(" (the router serves {a}%: drift)")),
        Some(a) => line.push_str(&format!(" (the router serves {a}%, read back)")),
        None => {}
    }
    if s.held {
        line.push_str(", held by an operator");
    }
    if let Some(p) = s.scale {
        line.push_str(&format!(", scale {p}%"));
    }
    if let Some(h) = crate::deploy::canary::tester_header(&s.testers).filter(|_| !retired) {
        line.push_str(&format!(", testers send `{}: {}`", h.0, h.1));
    }
    out.line(line);
    if live {
        for l in c.router_lines() {
            out.line(format!("  {l}"));
        }
    }
    for (i, step) in c.plan.steps.iter().enumerate() {
        let n = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let mark = if n == s.step { "›" } else { " " };
        let runs: Vec<String> = s
            .runs
            .iter()
            .filter(|r| r.step == n)
            .map(|r| format!("{} {}", r.seen.verdict.as_str(), r.seen.value))
            .collect();
        let runs = if runs.is_empty() {
            String::new()
        } else {
            format!("  [{}]", runs.join("; "))
        };
        out.line(format!("  {mark} {n:>2}  {step}{runs}"));
    }
    for d in &s.decisions {
        let why = if d.why.is_empty() {
            String::new()
        } else {
            format!(": {}", d.why)
        };
        out.line(format!(
            "  {} {} by {}{why}",
            output::time(d.at),
            d.action,
            d.by
        ));
    }
}

#[derive(Serialize)]
struct HistoryOut {
    subject: String,
    deployments: Vec<DeploymentView>,
    releases: Vec<ReleaseRecord>,
    journal: Vec<JournalEntry>,
}

/// `manent history APP ENV`
pub async fn history(config_path: &Path, a: &HistoryArgs, out: &mut Out) -> u8 {
    // The descriptors are read only when the database has nothing of this subject, to say
    // whether it is configured at all (a typo) or has not been deployed yet.
    let Some(config) = output::load_settings(config_path, out) else {
        return exit::BAD_INPUT;
    };
    let unknown = |out: &mut Out| {
        let Some(full) = load_config(config_path, None, out) else {
            return Some(exit::BAD_INPUT);
        };
        if let Err(e) = full.environment(&a.app, &a.env) {
            print_errors(&e, out);
            return Some(exit::BAD_INPUT);
        }
        None
    };
    let subject = format!("{}/{}", a.app, a.env);
    let store = match existing_store(&config).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            if let Some(code) = unknown(out) {
                return code;
            }
            out.line(format!("no deployments of {subject} yet"));
            return exit::OK;
        }
        Err(e) => return output::db_error(&output::database_shown(&config), &e, out),
    };
    let read = async {
        let rows = store
            .workflows(WorkflowQuery {
                subject: Some(subject.clone()),
                live_only: false,
                limit: a.limit,
                heads: true,
            })
            .await?;
        let deployments = views(&*store, rows).await?;
        let releases = store.releases(&subject).await?;
        let journal = store
            .journal_entries(Some(&subject), None, u32::MAX)
            .await?;
        if deployments.is_empty() {
            output::verify(&*store).await?;
        }
        Ok::<_, StoreError>((deployments, releases, journal))
    };
    let (deployments, releases, journal) = match read.await {
        Ok(t) => t,
        Err(e) => return output::db_error(&output::database_shown(&config), &e, out),
    };
    if deployments.is_empty()
        && releases.is_empty()
        && let Some(code) = unknown(out)
    {
        return code;
    }
    if a.json.json {
        out.json(&HistoryOut {
            subject,
            deployments,
            releases,
            journal,
        });
        return exit::OK;
    }
    let engine_running = output::engine_running(&config, &*store).await;
    if deployments.is_empty() {
        out.line(format!("no deployments of {subject} yet"));
        return exit::OK;
    }
    out.line(format!("deployments of {subject}, newest first:"));
    for v in &deployments {
        out.line(format!(
            "  {}  {:<8} {:<16} {:<16} by {:<16} {}",
            output::time(v.created_at),
            v.kind,
            v.version,
            v.state_with(engine_running),
            v.operator,
            v.id
        ));
        let ran: Vec<String> = v
            .hooks
            .iter()
            .filter(|h| h.state != view::HookState::Pending)
            .map(|h| format!("{} {} {}", h.event, h.name, h.state.as_str()))
            .collect();
        if !ran.is_empty() {
            out.line(format!("      hooks: {}", ran.join(", ")));
        }
    }
    out.line("live releases:");
    for (m, l) in releases::live(releases) {
        let Some(r) = l.current else { continue };
        out.line(format!(
            "  {m:<40} {:<10} since {} ({})",
            r.version,
            output::time(r.recorded_at),
            r.deployment_id
        ));
    }
    out.line("operator actions, newest first:");
    for j in &journal {
        out.line(format!(
            "  {}  {:<9} {:<24} {}{}{}{}",
            output::time(j.at),
            j.action,
            j.workflow_id.as_deref().unwrap_or("-"),
            j.operator,
            j.client
                .as_deref()
                .map(|c| format!(" from {c}"))
                .unwrap_or_default(),
            j.detail
                .as_deref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default(),
            j.reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ));
    }
    exit::OK
}

/// What a read says when there is no database yet: nothing has run with this configuration.
fn nothing_yet(config: &crate::config::Config, id: Option<&str>, json: bool, out: &mut Out) -> u8 {
    let db = output::database_shown(config);
    if let Some(id) = id {
        out.error(format!(
            "no deployment with id {id}: there is no database at {db} yet (nothing has run with \
             this configuration; is --config right?)"
        ));
        return exit::BAD_INPUT;
    }
    if json {
        out.json(&Vec::<()>::new());
    } else {
        out.line(format!("no deployments yet (no database at {db})"));
    }
    exit::OK
}

/// `manent logs ID [-f]`
pub async fn logs(config_path: &Path, a: &LogsArgs, out: &mut Out) -> u8 {
    let Some(config) = output::load_settings(config_path, out) else {
        return exit::BAD_INPUT;
    };
    let store = match output::read_store(&config, out).await {
        Ok(Some(s)) => s,
        Ok(None) => return nothing_yet(&config, Some(&a.deployment), false, out),
        Err(code) => return code,
    };
    if let Err(code) = output::view(&*store, &a.deployment, out).await {
        return code;
    }
    let mut after = 0;
    loop {
        let lines = match store.logs(&a.deployment, after, None, 5000).await {
            Ok(l) => l,
            Err(e) => {
                out.error(e);
                return exit::ENGINE;
            }
        };
        let n = lines.len();
        for l in lines {
            after = l.id;
            let who = l.target.map(|t| format!(" {t}:")).unwrap_or_default();
            out.line(format!(
                "{} {:<5} [{}]{who} {}",
                output::time(l.at),
                l.level,
                l.source,
                l.message
            ));
        }
        if n == 5000 {
            continue;
        }
        let live = store
            .workflow(&a.deployment)
            .await
            .ok()
            .flatten()
            .is_some_and(|r| r.status.is_live());
        if !a.follow || !live {
            return exit::OK;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[derive(Serialize)]
struct PluginRow {
    name: String,
    kind: &'static str,
    path: String,
    sha256: String,
    capabilities: Option<Vec<String>>,
    problem: Option<String>,
}

/// `manent plugins [--probe]`: every plugin, where it comes from, whether its binary matches
/// its pin, and its capabilities (external ones only when `--probe` starts them).
pub async fn plugins(config_path: &Path, a: &super::PluginsArgs, out: &mut Out) -> u8 {
    let Some(config) = load_config(config_path, None, out) else {
        return exit::BAD_INPUT;
    };
    let registry = Registry::new(&config, Arc::new(Discard));
    let mut rows = Vec::new();
    // Declared and built in; found on the search path; and what descriptors name — a plugin
    // a deploy would use is listed (and probed) even if nothing declares it.
    let mut names: Vec<String> = registry.names().map(str::to_owned).collect();
    names.extend(crate::plugin::external::activation::discoverable(
        config.plugin_dir.as_deref(),
    ));
    for d in &config.descriptors {
        names.push(d.spec.deploy.plugin.0.clone());
        for env in d.spec.environments.values() {
            if let Some(deploy) = &env.deploy {
                names.push(deploy.plugin.0.clone());
            }
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    names.retain(|n| seen.insert(n.clone()));
    for name in names {
        let row = match registry.resolve(&name) {
            Some(crate::plugin::registry::Resolved::Builtin(b)) => {
                let caps = registry
                    .get(&name)
                    .await
                    .map(|h| h.capabilities.0.iter().cloned().collect());
                PluginRow {
                    name,
                    kind: "builtin",
                    path: format!("builtin:{b}"),
                    sha256: "-".into(),
                    problem: caps.as_ref().err().map(ToString::to_string),
                    capabilities: caps.ok(),
                }
            }
            Some(
                crate::plugin::registry::Resolved::External(spec)
                | crate::plugin::registry::Resolved::Discovered(spec),
            ) => {
                let pin = crate::plugin::external::activation::check(
                    &name,
                    &spec.command,
                    spec.sha256.as_deref(),
                );
                let (sha256, mut problem) = match &pin {
                    Ok(crate::plugin::external::activation::Pin::Verified) => {
                        ("verified".to_owned(), None)
                    }
                    Ok(crate::plugin::external::activation::Pin::Unpinned) => {
                        let sum = crate::plugin::external::activation::sha256_file(&spec.command)
                            .unwrap_or_else(|e| e.to_string());
                        (format!("not pinned ({sum})"), None)
                    }
                    Err(e) => ("-".to_owned(), Some(e.to_string())),
                };
                let mut capabilities = None;
                if a.probe && problem.is_none() {
                    match registry.get(&name).await {
                        Ok(h) => capabilities = Some(h.capabilities.0.iter().cloned().collect()),
                        Err(e) => problem = Some(e.to_string()),
                    }
                }
                PluginRow {
                    name,
                    kind: "external",
                    path: spec.command.display().to_string(),
                    sha256,
                    capabilities,
                    problem,
                }
            }
            None => PluginRow {
                problem: Some(format!(
                    "no plugin `{name}`: a descriptor uses it, but manent.yml does not declare \
                     it and no `manent-plugin-{name}` is on PATH or in plugin_dir"
                )),
                name,
                kind: "missing",
                path: "-".into(),
                sha256: "-".into(),
                capabilities: None,
            },
        };
        rows.push(row);
    }
    registry.shutdown().await;
    let ok = rows.iter().all(|r| r.problem.is_none());
    if a.json.json {
        out.json(&rows);
    } else {
        out.line(format!(
            "{:<16} {:<9} {:<50} {:<12} {}",
            "NAME", "KIND", "PATH", "SHA256", "CAPABILITIES"
        ));
        for r in &rows {
            let caps = match &r.capabilities {
                Some(c) => c.join(", "),
                None if r.kind == "external" => "(start it with --probe to ask)".into(),
                None => "-".into(),
            };
            let sha = if r.sha256.starts_with("not pinned") {
                "not pinned"
            } else {
                r.sha256.as_str()
            };
            out.line(format!(
                "{:<16} {:<9} {:<50} {:<12} {caps}",
                r.name, r.kind, r.path, sha
            ));
            if let Some(p) = &r.problem {
                out.line(format!("  error: {p}"));
            }
        }
    }
    if ok { exit::OK } else { exit::BAD_INPUT }
}
