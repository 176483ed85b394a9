//! `manent status`: every deployment, or one in full; `--watch` redraws it until it ends.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::{nothing_yet, print_locks};
use crate::cli::output::{self, Out};
use crate::cli::{StatusArgs, exit};
use crate::deploy::records::Db;
use crate::deploy::view::{self, DeploymentView};

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
            let read =
                crate::deploy::flows::canary::watch::read_without_engine(&config, &*store, id)
                    .await
                    .unwrap_or_else(|e| crate::deploy::flows::canary::Actual {
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
            if v.status.is_live()
                && engine_running
                && let Some(holder) = holder(&*store, id).await
            {
                out.line(format!("run by the engine {holder}"));
            }
        }
        return exit::OK;
    }
    let views = view::summaries(&*store, view::Listed::Recent(20)).await;
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
            if v.unwatched {
                "UNWATCHED".to_owned()
            } else {
                v.state_with(engine_running).to_string()
            },
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
        let ended = crate::cli::follow::settled(&v, crate::cli::follow::Expect::End)
            || state == crate::deploy::state::DeploymentState::Interrupted
            || state == crate::deploy::state::DeploymentState::DeadLettered;
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
            return crate::cli::follow::code_of(&v, crate::cli::follow::Expect::End);
        }
        tokio::time::sleep(WATCH_EVERY).await;
    }
}

/// The engine that runs `id` now: `pid 4242 on bastion-1`, if its lease is fresh.
async fn holder(store: &dyn Db, id: &str) -> Option<String> {
    let row = store.workflow(id).await.ok().flatten()?;
    let executor = row.executor_id?;
    let engines = store.engines().await.ok()?;
    let e = engines.iter().find(|e| e.executor_id == executor)?;
    Some(format!("pid {} on {}", e.pid, e.host))
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
    if v.unwatched {
        out.line(format!(
            "UNWATCHED: no engine runs this live canary — nothing judges the candidate or \
             watches the router. `manent worker` takes it up (in the background: `manent worker \
             --until-idle &`); `manent revert {}` takes the candidate out",
            v.id
        ));
    }
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
    if state == crate::deploy::state::DeploymentState::DeadLettered {
        out.line(format!(
            "it stopped after crashing runs in a row and is not resumed by itself: `manent \
             resume {}` runs it again from its last checkpoint",
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
        Some(_) if c.unread() => line.push_str(" (the router could not be read)"),
        Some(a) if a != s.weight => line.push_str(&format!(" (the router serves {a}%: drift)")),
        Some(a) => line.push_str(&format!(" (the router serves {a}%, read back)")),
        None => {}
    }
    match s.held_by() {
        Some(d) if d.by == "manent" => line.push_str(&format!(", held by manent ({})", d.why)),
        Some(d) if d.by == "analysis" => line.push_str(", held by its analysis"),
        Some(d) => line.push_str(&format!(", held by {}", d.by)),
        None if s.held => line.push_str(", held by an operator"),
        None => {}
    }
    if let Some(p) = s.scale {
        line.push_str(&format!(", scale {p}%"));
    }
    if let Some(h) = crate::deploy::flows::canary::tester_header(&s.testers).filter(|_| !retired) {
        line.push_str(&format!(", testers send `{}: {}`", h.0, h.1));
    }
    out.line(line);
    if live {
        for l in c.router_lines() {
            out.line(format!("  {l}"));
        }
    }
    // What the router saw last, both slots side by side.
    if let Some(p) = c.traffic.last() {
        let slot = |f: &crate::deploy::canary_status::SlotFigures| {
            format!(
                "5xx {} p99 {} over {} requests",
                f.error_rate().map_or("—".into(), |r| format!(
                    "{}%",
                    crate::config::values::percent_text(r)
                )),
                f.p99_ms.map_or("—".into(), |p| format!("{p} ms")),
                f.requests
            )
        };
        out.line(format!(
            "traffic (last {}, read {}): candidate {}; stable {}",
            output::duration(p.window_ms),
            output::time(p.at),
            slot(&p.candidate),
            slot(&p.stable)
        ));
    }
    if let (Some(b), Some(a)) = (&c.background, &c.plan.analysis) {
        out.line(format!(
            "background analysis ({}, every {}): {} of {} runs failed (limit {}); last {}: {}",
            a.check,
            output::duration(b.interval_ms),
            b.failures,
            b.runs,
            b.failure_limit,
            b.last.verdict.as_str(),
            b.last.value
        ));
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
