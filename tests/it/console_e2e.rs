//! The console in a real terminal: tmux runs `manent demo` (and `manent console`) at 80×24; the
//! tests press keys and read what a user sees with `capture-pane`. The edges of issue 19 (an
//! engine that goes away under an attached console, traffic keys, terminals, ids) are in
//! `console_e2e/edges.rs`.

mod edges;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::fleet;

const MANENT: &str = env!("CARGO_BIN_EXE_manent");

#[allow(clippy::print_stderr, reason = "a skipped test says why")]
fn skipped(why: &str) {
    eprintln!("skipped: {why}");
}

/// A private tmux server (its own socket), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(name: &str, command: &str, env: &[(&str, &str)]) -> Option<Tmux> {
        Tmux::start_sized(name, command, env, (80, 24))
    }

    fn start_sized(
        name: &str,
        command: &str,
        env: &[(&str, &str)],
        (w, h): (u16, u16),
    ) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            assert!(std::env::var_os("CI").is_none(), "tmux is required in CI");
            skipped("tmux is not installed");
            return None;
        }
        let socket = format!("manent-e2e-{name}-{}", std::process::id());
        let mut cmd = Command::new("tmux");
        cmd.args([
            "-L",
            &socket,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            &w.to_string(),
            "-y",
            &h.to_string(),
        ]);
        for (k, v) in env {
            cmd.arg("-e").arg(format!("{k}={v}"));
        }
        cmd.arg(format!("{command}; echo EXITED $?; sleep 600"));
        let ok = cmd.env_remove("TMUX").status().unwrap();
        assert!(ok.success());
        Some(Tmux { socket })
    }

    fn capture(&self) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn capture_styled(&self) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p", "-e"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            let ok = Command::new("tmux")
                .args(["-L", &self.socket, "send-keys", k])
                .status()
                .unwrap();
            assert!(ok.success());
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    fn wait_for(&self, what: &str, limit: Duration) -> String {
        let start = Instant::now();
        loop {
            let screen = self.capture();
            if screen.contains(what) {
                return screen;
            }
            assert!(
                start.elapsed() < limit,
                "timed out waiting for {what:?}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

const LONG: Duration = Duration::from_secs(60);
const SHORT: Duration = Duration::from_secs(10);

fn demo(dir: &Path, extra: &str) -> String {
    format!("{MANENT} demo --dir {} {extra}", dir.display())
}

fn deployments(dir: &Path) -> Vec<(String, String)> {
    let db = rusqlite::Connection::open(dir.join(".manent/manent.db")).unwrap();
    let mut stmt = db
        .prepare("SELECT workflow_id, status FROM workflow_status ORDER BY created_at")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn the_demos_canary_is_steered_and_promoted_from_the_keyboard_at_80x24() {
    let dir = tempfile::tempdir().unwrap();
    let Some(t) = Tmux::start("demo", &demo(dir.path(), ""), &[]) else {
        return;
    };
    t.wait_for("RUNNING", LONG);
    let screen = t.wait_for("candidate", LONG);
    assert!(
        screen.contains(" PROD ") && screen.contains("shop 2.4.0"),
        "{screen}"
    );
    // Plugin log lines stream in the log pane.
    t.wait_for("fleet web-", SHORT);
    t.keys(&["?"]);
    t.wait_for("Keys", SHORT);
    t.keys(&["Escape"]);
    t.keys(&["c"]);
    t.wait_for("Cancel canary of shop to prod (36 targets)?", SHORT);
    std::thread::sleep(Duration::from_millis(500));
    t.keys(&["Enter"]);
    t.wait_for("cancelled: nothing was done", SHORT);
    // The candidate everywhere, testers routed, 10%: it waits for the operator.
    let screen = t.wait_for("CANARY PAUSED", LONG);
    assert!(screen.lines().count() <= 24 && screen.lines().all(|l| l.chars().count() <= 80));
    assert!(
        screen.contains("candidate  10%") && screen.contains("paused until promoted"),
        "{screen}"
    );
    // The slider: a pending weight, applied with Enter after a confirmation.
    t.keys(&["Right", "Right"]);
    t.wait_for("pending 20%", SHORT);
    t.keys(&["Enter"]);
    t.wait_for("80% / candidate 20% (36 targets)?", SHORT);
    std::thread::sleep(Duration::from_millis(500));
    t.keys(&["Right", "Enter"]);
    let screen = t.wait_for("held at 20%", LONG);
    assert!(screen.contains("candidate  20%"), "{screen}");
    // Space resumes the steps where they were held — it changes traffic, so it asks first.
    t.keys(&["Space"]);
    t.wait_for("Resume the steps of the canary", SHORT);
    std::thread::sleep(Duration::from_millis(500));
    t.keys(&["Right", "Enter"]);
    t.wait_for("step 3/9: paused until promoted", LONG);
    // p promotes past the pause: 25%, then the analysis, then 50% and the next pause.
    t.keys(&["p"]);
    t.wait_for(
        "Promote the canary of shop 2.4.0 in prod past step 3/9:",
        SHORT,
    );
    std::thread::sleep(Duration::from_millis(500));
    t.keys(&["Right", "Enter"]);
    t.wait_for("analysis", LONG);
    let screen = t.wait_for("step 7/9: paused until promoted", LONG);
    assert!(screen.contains("candidate  50%"), "{screen}");
    // P promotes now: in production the environment's name is typed.
    t.keys(&["P"]);
    t.wait_for("in prod now, skipping its remaining", SHORT);
    std::thread::sleep(Duration::from_millis(500));
    t.keys(&["p", "r", "o", "d", "Enter"]);
    t.wait_for("DEPLOYED", LONG);
    let last = deployments(dir.path()).last().cloned().unwrap();
    assert_eq!(last.1, "SUCCESS", "{last:?}");
    t.keys(&["/", "w", "e", "b", "-", "0", "1", "Enter"]);
    let screen = t.wait_for("\"web-01\"", SHORT);
    assert!(screen.contains("Logs"), "{screen}");
    t.keys(&["q"]);
    let screen = t.wait_for("EXITED 0", LONG);
    assert!(screen.contains("manent demo: done"), "{screen}");
}

#[test]
fn without_colour_the_selection_and_production_still_show() {
    let dir = tempfile::tempdir().unwrap();
    let Some(t) = Tmux::start("nocolor", &demo(dir.path(), ""), &[("NO_COLOR", "1")]) else {
        return;
    };
    let screen = t.wait_for("RUNNING", LONG);
    assert!(
        screen.contains("› "),
        "the selected row is marked:\n{screen}"
    );
    let styled = t.capture_styled();
    assert!(
        colours(&styled).is_empty(),
        "colours with NO_COLOR: {:?}\n{styled:?}",
        colours(&styled)
    );
    assert!(
        styled.contains("\u{1b}[7m") || styled.contains(";7m"),
        "reverse video marks the selection"
    );
    t.keys(&["q"]);
    t.wait_for("Quit the console?", SHORT);
}

/// At 80×24, as an operator would: an application file edited while the console is open is
/// read again and said; back home, "Waiting on you" names the key that reaches it from where
/// the keyboard is, and that key then Enter opens the canary it names.
#[test]
fn an_edited_file_is_read_again_and_the_waiting_hint_leads_where_it_says() {
    let dir = tempfile::tempdir().unwrap();
    let Some(t) = Tmux::start("edited", &demo(dir.path(), ""), &[]) else {
        return;
    };
    t.wait_for("CANARY PAUSED", LONG);
    let file = dir.path().join("apps/shop.yml");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("\n# edited while the console is open\n");
    std::fs::write(&file, text).unwrap();
    t.wait_for("shop.yml changed: read again", SHORT);
    // Home, where the focus is on Deployments: Tab reaches what waits.
    t.keys(&["Escape", "Escape"]);
    let screen = t.wait_for("Waiting on you: 1", SHORT);
    let hint = screen
        .lines()
        .find(|l| l.contains("Waiting on you: 1"))
        .unwrap()
        .to_owned();
    let key = if hint.contains("· Tab, Enter opens") {
        "Tab"
    } else if hint.contains("· Shift-Tab, Enter opens") {
        "BTab"
    } else {
        panic!("the hint names a key: {hint}")
    };
    t.keys(&[key, "Enter"]);
    t.wait_for("CANARY PAUSED", SHORT);
    t.wait_for("Targets 36/36", SHORT);
}

/// At 80×24: `Tab` goes round the panels drawn, and every stop shows its marker (a panel that
/// is not drawn is never focused: the narrow screen's hooks take the log pane's place); `/`
/// filters the targets as each letter is typed, before Enter, and `Esc` gives the whole list
/// back.
#[test]
fn tab_stops_only_on_drawn_panels_and_slash_filters_as_you_type() {
    let dir = tempfile::tempdir().unwrap();
    let Some(t) = Tmux::start("tabfilter", &demo(dir.path(), ""), &[]) else {
        return;
    };
    t.wait_for("▶ Targets", LONG);
    let mut stops = Vec::new();
    for _ in 0..4 {
        t.keys(&["Tab"]);
        std::thread::sleep(Duration::from_millis(300));
        let screen = t.capture();
        let marked: Vec<&str> = screen.lines().filter(|l| l.contains('▶')).collect();
        assert_eq!(marked.len(), 1, "one panel marked after Tab:\n{screen}");
        let title = marked[0]
            .split('▶')
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or("")
            .to_owned();
        stops.push(title);
    }
    assert_eq!(
        stops.last().map(String::as_str),
        Some("Targets"),
        "{stops:?}"
    );
    assert!(stops.iter().any(|s| s == "Hooks"), "{stops:?}");
    assert!(stops.iter().any(|s| s == "Logs"), "{stops:?}");

    // Back on the targets: `/` and a name, no Enter.
    t.wait_for("web-03", SHORT);
    t.keys(&["/"]);
    t.wait_for("Filter", SHORT);
    t.keys(&["web-03"]);
    let start = Instant::now();
    loop {
        let screen = t.capture();
        // The targets panel's rows: from its title to its bottom border.
        let rows: Vec<&str> = screen
            .lines()
            .skip_while(|l| !l.contains("Targets"))
            .skip(2)
            .take_while(|l| !l.starts_with('┗') && !l.starts_with('└'))
            .filter(|l| l.contains("web-"))
            .collect();
        if !rows.is_empty() && rows.iter().all(|r| r.contains("web-03")) {
            break;
        }
        assert!(
            start.elapsed() < SHORT,
            "the targets filtered to web-03 as it was typed:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    t.keys(&["Escape"]);
    t.wait_for("web-04", SHORT);
}

/// `y` hands the terminal's clipboard what is selected through OSC 52: tmux with
/// `set-clipboard on` takes it into its paste buffer, as a terminal over ssh would.
#[test]
fn y_copies_the_selection_through_osc_52() {
    let dir = tempfile::tempdir().unwrap();
    let Some(t) = Tmux::start("yank", &demo(dir.path(), ""), &[]) else {
        return;
    };
    let ok = Command::new("tmux")
        .args(["-L", &t.socket, "set-option", "-g", "set-clipboard", "on"])
        .status()
        .unwrap();
    assert!(ok.success());
    t.wait_for("RUNNING", LONG);
    let screen = t.capture();
    let selected = screen
        .lines()
        .find_map(|l| l.split("› ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("a selected target:\n{screen}"))
        .to_owned();
    t.keys(&["y"]);
    t.wait_for("copied", SHORT);
    let start = Instant::now();
    let buffer = loop {
        let out = Command::new("tmux")
            .args(["-L", &t.socket, "show-buffer"])
            .output()
            .unwrap();
        let b = String::from_utf8_lossy(&out.stdout).into_owned();
        if !b.is_empty() || start.elapsed() > SHORT {
            break b;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        buffer, selected,
        "the selected target's name is on the clipboard"
    );
}

/// SGR colour parameters (30–37, 40–47, 90–97, 100–107, 38/48) in a captured screen; 39/49
/// (the default colours) are not colours.
fn colours(styled: &str) -> Vec<String> {
    let mut found = Vec::new();
    for seq in styled.split('\u{1b}').skip(1) {
        let Some(body) = seq.strip_prefix('[') else {
            continue;
        };
        let Some(end) = body.find('m') else { continue };
        for p in body[..end].split(';').filter_map(|p| p.parse::<u32>().ok()) {
            if matches!(p, 30..=38 | 40..=48 | 90..=97 | 100..=107) {
                found.push(body[..end].to_owned());
            }
        }
    }
    found
}

#[test]
fn read_only_shows_everything_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let Some(t) = Tmux::start("readonly", &demo(dir.path(), "--readonly"), &[]) else {
        return;
    };
    t.wait_for("READ-ONLY", LONG);
    let screen = t.wait_for("rolling 6", LONG);
    assert!(
        screen.contains("Applications") && screen.contains("shop"),
        "{screen}"
    );
    let before = deployments(dir.path());
    assert_eq!(before.len(), 2, "the demo's earlier release only");
    t.keys(&["Down", "D"]);
    t.wait_for("read-only console: deploying is disabled", SHORT);
    t.keys(&["R"]);
    t.wait_for("read-only console: rolling back is disabled", SHORT);
    t.keys(&["d"]);
    t.wait_for("read-only console: a dry-run", SHORT);
    assert_eq!(deployments(dir.path()), before, "nothing changed");
    t.keys(&["q"]);
    t.wait_for("EXITED 0", LONG);
}

#[test]
fn a_second_console_attaches_and_acts_through_the_mailbox() {
    let dir = tempfile::tempdir().unwrap();
    let Some(first) = Tmux::start("first", &demo(dir.path(), ""), &[]) else {
        return;
    };
    first.wait_for("RUNNING", LONG);
    let config = dir.path().join("manent.yml");
    let Some(second) = Tmux::start(
        "second",
        &format!("{MANENT} --config {} console", config.display()),
        &[],
    ) else {
        return;
    };
    let screen = second.wait_for("attached to the engine of pid", LONG);
    assert!(
        screen.contains("running"),
        "the first console's deploy shows:\n{screen}"
    );
    second.keys(&["Tab", "Enter"]);
    second.wait_for("Targets", SHORT);
    second.keys(&["c"]);
    second.wait_for("Cancel canary of shop to prod", SHORT);
    std::thread::sleep(Duration::from_millis(500));
    second.keys(&["Right", "Enter"]);
    second.wait_for("cancelled: it stops before its next step", SHORT);
    // The first console's engine receives it and stops the deploy.
    first.wait_for("CANCELLED", LONG);
    let live = deployments(dir.path());
    assert_eq!(live.last().unwrap().1, "CANCELLED");
    // Both consoles' journals show who did it.
    second.keys(&["Escape"]);
    second.wait_for(" cancel shop/prod", SHORT);
    first.keys(&["Escape"]);
    let screen = first.wait_for(" cancel shop/prod", SHORT);
    assert!(screen.contains(" canary shop/prod 2.4.0"), "{screen}");
    second.keys(&["q"]);
    second.wait_for("EXITED 0", LONG);
}

/// Processes whose command line contains `needle`, with their parent pids.
fn processes(needle: &str) -> Vec<(u32, u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // pid (comm) state ppid …; comm may hold spaces, so count from the last ')'.
        let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let mut fields = after.split_whitespace();
        let state = fields.next().unwrap_or("");
        let ppid = fields.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if cmdline.contains(needle) && state != "Z" {
            found.push((pid, ppid, cmdline));
        }
    }
    found
}

#[test]
fn a_hangup_keeps_the_deploy_running_headless_to_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let Some(t) = Tmux::start("hangup", &demo(dir.path(), ""), &[]) else {
        return;
    };
    t.wait_for("RUNNING", LONG);
    let needle = format!("demo --dir {}", dir.path().display());
    let console = processes(&needle)
        .into_iter()
        .find(|(_, _, c)| c.starts_with(MANENT))
        .expect("the demo's process");
    // The screen says RUNNING as soon as the deploy starts, maybe before its plugin does.
    let plugins = || -> Vec<u32> {
        processes("plugin-serve simulate")
            .into_iter()
            .filter(|(_, ppid, _)| *ppid == console.0)
            .map(|(pid, _, _)| pid)
            .collect()
    };
    fleet::wait_until(SHORT, "the demo's plugin process to run", || {
        !plugins().is_empty()
    });
    let plugins = plugins();
    // The terminal goes away, as when an ssh session drops.
    drop(t);
    fleet::wait_until(
        Duration::from_secs(120),
        "the canary to reach its pause headless and the console to exit",
        || {
            !std::path::Path::new(&format!("/proc/{}", console.0)).exists()
                || processes(&needle).is_empty()
        },
    );
    // It ran on until it waited for an operator, and waits there for the next engine.
    let last = deployments(dir.path()).last().cloned().unwrap();
    assert_eq!(last.1, "PENDING", "{last:?}");
    let out = Command::new(MANENT)
        .args(["--config"])
        .arg(dir.path().join("manent.yml"))
        .args(["status", &last.0, "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["state"], "canary_paused", "{v}");
    for pid in plugins {
        fleet::wait_until(Duration::from_secs(10), "the plugin to stop", || {
            !processes("plugin-serve simulate")
                .iter()
                .any(|(p, _, _)| *p == pid)
        });
    }
}

#[test]
fn quitting_hands_running_deployments_to_a_background_worker() {
    let dir = tempfile::tempdir().unwrap();
    // The demo's files, seeded; read-only so it starts nothing.
    let Some(demo) = Tmux::start("handover-setup", &demo(dir.path(), "--readonly"), &[]) else {
        return;
    };
    demo.wait_for("READ-ONLY", LONG);
    demo.keys(&["q"]);
    demo.wait_for("EXITED 0", LONG);
    let config = dir.path().join("manent.yml");
    let t = Tmux::start(
        "handover",
        &format!("{MANENT} --config {} console", config.display()),
        &[],
    )
    .unwrap();
    t.wait_for("rolling 6", LONG);
    // shop/staging is the second row (prod is a canary): deploy it, at the descriptor's
    // version.
    t.keys(&["Down", "D"]);
    t.wait_for("Which version of shop to staging?", SHORT);
    t.keys(&["Enter"]);
    t.wait_for("Deploy shop 2.4.0 to staging", SHORT);
    std::thread::sleep(Duration::from_millis(500));
    t.keys(&["Right", "Enter"]);
    t.wait_for(" running ", LONG);
    t.keys(&["q"]);
    t.wait_for("Quit the console?", SHORT);
    std::thread::sleep(Duration::from_millis(500));
    t.keys(&["Right", "Enter"]);
    let screen = t.wait_for("EXITED 0", LONG);
    // The note wraps at 80 columns where the terminal puts it.
    assert!(
        screen
            .replace('\n', "")
            .contains("continues in a background `manent worker`"),
        "{screen}"
    );
    // The worker finishes the deploy from its checkpoints, then exits.
    fleet::wait_until(
        Duration::from_secs(120),
        "the background worker to finish the deploy and exit",
        || {
            deployments(dir.path())
                .last()
                .is_some_and(|d| d.1 == "SUCCESS")
                && processes(&format!("--config {} worker", config.display())).is_empty()
        },
    );
}

/// A canary of `web` over the simulated fleet, with background analysis every second, that
/// waits at 15%.
fn judged_canary() -> fleet::Fixture {
    fleet::Fixture::new(
        "plugins:\n  fleet:\n    builtin: simulate\n    log_lines: 0\n    traffic: {rate: 100}\n",
        &[(
            "web",
            "application: web\nartifact: {version: \"2.0.0\"}\ndeploy: {plugin: fleet}\n\
             strategy:\n  canary:\n    analysis: {router: {max_error_rate: 5%, min_requests: 10, \
             window: 1m}, interval: 1s}\n    steps:\n      - weight: 15\n      - pause: {}\n\
             environments:\n  prod:\n    targets: [{name: web-1}, {name: web-2}]\n",
        )],
    )
}

/// The background analysis runs of `id` so far.
fn background_runs(fx: &fleet::Fixture, id: &str) -> u64 {
    fx.status(id)["canary"]["background"]["runs"]
        .as_u64()
        .unwrap_or(0)
}

/// After the console went away: a worker holds the canary and its background analysis runs on.
fn judged_by_a_worker(fx: &fleet::Fixture, id: &str) {
    fleet::wait_until(LONG, "a worker to hold the canary", || {
        !fx.workers().is_empty() && fx.status(id)["state"] == "canary_paused"
    });
    let before = background_runs(fx, id);
    fleet::wait_until(LONG, "the worker's background analysis to run", || {
        background_runs(fx, id) > before + 1
    });
    let status = fleet::text(&fx.run(&["status", id]).stdout);
    assert!(!status.contains("UNWATCHED"), "{status}");
    // status says which engine holds it: the worker.
    let workers = fx.workers();
    assert!(
        workers
            .iter()
            .any(|w| status.contains(&format!("run by the engine pid {w} on "))),
        "{workers:?} in {status}"
    );
}

#[test]
fn a_canary_at_its_gate_is_handed_to_a_worker_when_the_console_quits_or_hangs_up() {
    let fx = judged_canary();
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(7), "{}", fleet::said(&out));
    let id = fx.deployments().pop().unwrap();
    // The deploy handed its live canary to a worker, and said so.
    assert!(
        fleet::said(&out).contains("keeps judging it and watching the router"),
        "{}",
        fleet::said(&out)
    );
    judged_by_a_worker(&fx, &id);
    // With no engine, status and inbox say the canary is unwatched, and what fixes it.
    fx.stop_workers();
    let status = fleet::text(&fx.run(&["status", &id]).stdout);
    assert!(
        status.contains("UNWATCHED: no engine runs this live canary")
            && status.contains("manent worker"),
        "{status}"
    );
    let inbox = fleet::text(&fx.run(&["inbox"]).stdout);
    assert!(
        inbox.contains("UNWATCHED") && inbox.contains("router not read (no engine)"),
        "{inbox}"
    );
    // A console runs the engine now: `q` asks, naming the canary a worker will judge.
    let console = format!("{MANENT} --config {} console", fx.config().display());
    let Some(t) = Tmux::start("judge-quit", &console, &[]) else {
        return;
    };
    t.wait_for("paused: set 15%, router 15%", LONG);
    t.keys(&["q"]);
    let screen = t.wait_for("Quit the console?", SHORT);
    assert!(
        screen.replace('\n', "").contains("keeps judging it"),
        "{screen}"
    );
    std::thread::sleep(Duration::from_millis(500));
    t.keys(&["Right", "Enter"]);
    t.wait_for("EXITED 0", LONG);
    judged_by_a_worker(&fx, &id);
    // Again, and this time the terminal goes away (an ssh session dropped).
    fx.stop_workers();
    let t = Tmux::start("judge-hup", &console, &[]).unwrap();
    t.wait_for("paused: set 15%, router 15%", LONG);
    drop(t);
    judged_by_a_worker(&fx, &id);
    // Leaving it unwatched is a choice of its own: the environment typed, a reason, journaled.
    fx.stop_workers();
    let t = Tmux::start("judge-leave", &console, &[]).unwrap();
    t.wait_for("paused: set 15%, router 15%", LONG);
    t.keys(&["q"]);
    t.wait_for("U: leave it unwatched instead", SHORT);
    t.keys(&["U"]);
    t.wait_for("Quit and leave it unwatched?", SHORT);
    std::thread::sleep(Duration::from_millis(500));
    t.keys(&["p", "r", "o", "d", "Enter"]);
    for k in "watching it by hand".chars() {
        t.keys(&[&k.to_string()]);
    }
    t.keys(&["Enter"]);
    let screen = t.wait_for("EXITED 0", LONG);
    assert!(
        screen.replace('\n', "").contains("left UNWATCHED"),
        "{screen}"
    );
    std::thread::sleep(Duration::from_secs(2));
    assert!(fx.workers().is_empty(), "no worker was started");
    let status = fleet::text(&fx.run(&["status", &id]).stdout);
    assert!(status.contains("UNWATCHED"), "{status}");
    let history = fleet::text(&fx.run(&["history", "web", "prod"]).stdout);
    assert!(
        history.contains("unwatched") && history.contains("watching it by hand"),
        "{history}"
    );
}

#[test]
fn sigterm_restores_the_terminal_and_drains() {
    let dir = tempfile::tempdir().unwrap();
    let Some(t) = Tmux::start("sigterm", &demo(dir.path(), ""), &[]) else {
        return;
    };
    t.wait_for("RUNNING", LONG);
    let needle = format!("demo --dir {}", dir.path().display());
    let (pid, _, _) = processes(&needle)
        .into_iter()
        .find(|(_, _, c)| c.starts_with(MANENT))
        .expect("the demo's process");
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    // Back at the shell: the alternate screen is gone and the exit code says how it ended.
    let screen = t.wait_for("EXITED", LONG);
    assert!(
        screen.contains("EXITED 0") || screen.contains("EXITED 5"),
        "{screen}"
    );
    assert!(
        !screen.contains("Targets"),
        "the console's screen is gone:\n{screen}"
    );
    let last = deployments(dir.path()).last().cloned().unwrap();
    assert!(
        last.1 == "SUCCESS" || last.1 == "PENDING",
        "finished, or left to resume: {last:?}"
    );
}

#[test]
fn the_hooks_panel_shows_the_order_plan_and_history_show() {
    // Weights -5, 0, 5, 10 (two as strings, as Helm writes them); at weight 0 a command runs
    // before a wait, and names break the remaining tie.
    let hook = |name: &str, more: &str| {
        format!("  - name: {name}\n    events: [pre-deploy]\n{more}    command: 'true'\n")
    };
    let hooks = [
        hook("ten", "    weight: \"10\"\n"),
        hook("minus-five", "    weight: \"-5\"\n"),
        hook("b-zero", ""),
        hook("five", "    weight: 5\n"),
        hook("a-zero", "    weight: 0\n"),
        "  - name: aa-wait\n    events: [pre-deploy]\n    wait: {command: 'true', interval: 100ms}\n"
            .to_owned(),
    ]
    .concat();
    let app = format!(
        "application: web\nartifact: {{version: \"1.0.0\"}}\ndeploy:\n  plugin: simulate\nhooks:\n{hooks}environments:\n  prod:\n    targets: [{{name: a}}]\n"
    );
    let fx = fleet::Fixture::new("", &[("web", &app)]);
    let expected = ["minus-five", "a-zero", "b-zero", "aa-wait", "five", "ten"];
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", fleet::text(&out.stderr));
    // A list (history) is a summary of each deployment; the hooks are in the deployment's own.
    let h = fx.run(&["history", "web", "prod", "--json"]);
    let h: serde_json::Value = serde_json::from_slice(&h.stdout).unwrap();
    let id = h["deployments"][0]["id"].as_str().unwrap();
    let h = fx.run(&["status", id, "--json"]);
    let h: serde_json::Value = serde_json::from_slice(&h.stdout).unwrap();
    let names: Vec<&str> = h["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, expected, "history");
    let Some(t) = Tmux::start_sized(
        "hooks",
        &format!("{MANENT} --config {} console", fx.config().display()),
        &[],
        (120, 40),
    ) else {
        return;
    };
    t.wait_for("Deployments", LONG);
    t.keys(&["Tab", "Enter"]);
    let screen = t.wait_for("pre-deploy", SHORT);
    // The side panel's rows, top to bottom: each hook's name after its weight.
    let shown: Vec<String> = screen
        .lines()
        .filter_map(|l| {
            let side: String = l.chars().skip(83).collect();
            let f: Vec<&str> = side
                .trim_matches(|c| c == '│' || c == '┃' || c == ' ')
                .split_whitespace()
                .collect();
            (f.len() >= 3 && f[0].parse::<i32>().is_ok()).then(|| f[1].to_owned())
        })
        .collect();
    let expected: Vec<String> = expected
        .iter()
        .map(|n| {
            if n.chars().count() > 9 {
                format!("{}…", n.chars().take(8).collect::<String>())
            } else {
                (*n).to_owned()
            }
        })
        .collect();
    assert_eq!(shown, expected, "the console:\n{screen}");
    // Tab reaches the hooks; Enter opens the selected one's run.
    t.keys(&["BTab", "Down", "Enter"]);
    t.wait_for("hook a-zero", SHORT);
    t.keys(&["Escape", "q"]);
    t.wait_for("EXITED 0", LONG);
}
