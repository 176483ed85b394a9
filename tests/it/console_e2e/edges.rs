//! Issue 19 in a real terminal: an attached console whose engine goes away runs the engine
//! itself; a submission whose console went away before any engine claimed it waits for an
//! operator; traffic keys ask and never lower traffic; the slider moves the way its arrow
//! points; a long refusal reads in full at 80×24; a short id from the screen works in the CLI;
//! the terminal starts clean, says only 16 colours under TERM=vt100, and comes back after a
//! SIGHUP.

use super::*;

fn status(dir: &Path, id: &str) -> serde_json::Value {
    let out = Command::new(MANENT)
        .arg("--config")
        .arg(dir.join("manent.yml"))
        .args(["status", id, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The screen's words as one line: rows joined, box edges dropped (a dialog wraps its text).
fn joined(screen: &str) -> String {
    screen
        .lines()
        .map(|l| l.trim_matches(|c: char| c == '│' || c == '┃' || c == '|' || c.is_whitespace()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Waits until `what` shows, wrapped or not.
fn wait_joined(t: &Tmux, what: &str, limit: Duration) -> String {
    let start = Instant::now();
    loop {
        let screen = t.capture();
        if joined(&screen).contains(what) {
            return screen;
        }
        assert!(
            start.elapsed() < limit,
            "timed out waiting for {what:?}; the screen:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn console(dir: &Path) -> String {
    format!(
        "cd {} && {MANENT} --config {} console",
        dir.display(),
        dir.join("manent.yml").display()
    )
}

/// The demo's files with nothing running (read-only: it starts nothing).
fn seeded(name: &str) -> Option<tempfile::TempDir> {
    let dir = tempfile::tempdir().unwrap();
    let t = Tmux::start(name, &demo(dir.path(), "--readonly"), &[])?;
    t.wait_for("READ-ONLY", LONG);
    t.keys(&["q"]);
    t.wait_for("EXITED 0", LONG);
    Some(dir)
}

fn pid_of(needle: &str) -> u32 {
    processes(needle)
        .into_iter()
        .find(|(_, _, c)| c.starts_with(MANENT))
        .map(|(pid, _, _)| pid)
        .unwrap_or_else(|| panic!("no process {needle}"))
}

fn signal(pid: u32, sig: &str) {
    assert!(
        Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
}

#[test]
fn an_attached_console_whose_engine_goes_away_runs_the_engine_and_its_deploy() {
    let Some(dir) = seeded("life-setup") else {
        return;
    };
    let Some(first) = Tmux::start("life-first", &console(dir.path()), &[]) else {
        return;
    };
    first.wait_for("engine in this console", LONG);
    let second = Tmux::start("life-second", &console(dir.path()), &[]).unwrap();
    second.wait_for("attached to the engine of pid", LONG);
    // The engine it attached to goes away.
    first.keys(&["q"]);
    first.wait_for("EXITED 0", LONG);
    // The other console quit: the engine moves here, said plainly, not as an alarm.
    let screen = second.wait_for("engine now in this console", SHORT);
    assert!(screen.contains("ended at"), "said why:\n{screen}");
    assert!(!screen.contains('⚠'), "{screen}");
    // A deploy from it runs.
    second.keys(&["Down", "D"]);
    second.wait_for("Which version of shop to staging?", SHORT);
    second.keys(&["Enter"]);
    second.wait_for("Deploy shop 2.4.0 to staging", SHORT);
    std::thread::sleep(Duration::from_millis(500));
    second.keys(&["Right", "Enter"]);
    second.wait_for("DEPLOYED", LONG);
    assert_eq!(deployments(dir.path()).last().unwrap().1, "SUCCESS");
    second.keys(&["q"]);
    second.wait_for("EXITED 0", LONG);
}

#[test]
fn a_submission_whose_console_went_away_unclaimed_waits_for_an_operator() {
    let Some(dir) = seeded("orphan-setup") else {
        return;
    };
    let Some(engine) = Tmux::start("orphan-engine", &console(dir.path()), &[]) else {
        return;
    };
    engine.wait_for("engine in this console", LONG);
    let holder = pid_of(&format!(
        "--config {} console",
        dir.path().join("manent.yml").display()
    ));
    let attached = Tmux::start("orphan-attached", &console(dir.path()), &[]).unwrap();
    attached.wait_for("attached to the engine of pid", LONG);
    // The engine holds the database but takes nothing (stopped): the submission waits, and
    // the console says why within its bound.
    signal(holder, "-STOP");
    attached.keys(&["Down", "D"]);
    attached.wait_for("Which version of shop to staging?", SHORT);
    attached.keys(&["Enter"]);
    attached.wait_for("Deploy shop 2.4.0 to staging", SHORT);
    std::thread::sleep(Duration::from_millis(500));
    attached.keys(&["Right", "Enter"]);
    wait_joined(
        &attached,
        "has not been claimed by an engine after 5s",
        SHORT,
    );
    // Its console goes away; quitting says what that means.
    attached.keys(&["q"]);
    wait_joined(
        &attached,
        "once you quit it does not start by itself",
        SHORT,
    );
    std::thread::sleep(Duration::from_millis(500));
    attached.keys(&["Right", "Enter"]);
    attached.wait_for("EXITED 0", LONG);
    signal(holder, "-KILL");
    drop(engine);
    let id = deployments(dir.path()).last().unwrap().0.clone();
    // The next console runs the engine: the submission does not start; it waits in the inbox.
    let next = Tmux::start("orphan-next", &console(dir.path()), &[]).unwrap();
    let screen = next.wait_for("never started", LONG);
    assert!(screen.contains("submitted by"), "{screen}");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        deployments(dir.path()).last().unwrap(),
        &(id.clone(), "CANCELLED".to_owned()),
        "nothing started it"
    );
    // An operator starts it: asked, then it runs.
    next.keys(&["BTab", "Enter"]);
    next.wait_for("NEVER STARTED", SHORT);
    next.keys(&["Space"]);
    wait_joined(&next, "and never started?", SHORT);
    std::thread::sleep(Duration::from_millis(500));
    next.keys(&["Right", "Enter"]);
    next.wait_for("DEPLOYED", LONG);
    next.keys(&["q"]);
    next.wait_for("EXITED 0", LONG);
}

#[test]
fn traffic_keys_ask_promote_never_lowers_traffic_and_the_marker_follows_its_arrow() {
    let dir = tempfile::tempdir().unwrap();
    let Some(t) = Tmux::start("traffic", &demo(dir.path(), ""), &[]) else {
        return;
    };
    t.wait_for("CANARY PAUSED", LONG);
    let marker = |screen: &str| {
        screen
            .lines()
            .find_map(|l| l.chars().position(|c| c == '┃'))
            .expect("the pending weight's marker")
    };
    t.keys(&["Right"]);
    let at_15 = marker(&t.wait_for("pending 15%", SHORT));
    t.keys(&["Right"]);
    let at_20 = marker(&t.wait_for("pending 20%", SHORT));
    assert!(at_20 > at_15, "→ moves the marker right: {at_15} → {at_20}");
    // 70% by hand (typed: above confirm_above in production).
    for _ in 0..10 {
        t.keys(&["Right"]);
    }
    t.wait_for("pending 70%", SHORT);
    t.keys(&["Enter"]);
    t.wait_for("type prod to confirm", SHORT);
    std::thread::sleep(Duration::from_millis(500));
    t.keys(&["p", "r", "o", "d", "Enter"]);
    t.wait_for("held at 70%", LONG);
    let id = deployments(dir.path()).last().unwrap().0.clone();
    // A long refusal reads in full at 80×24: deploying prod while this canary is live.
    t.keys(&["Escape"]);
    t.wait_for("Applications", SHORT);
    t.keys(&["BTab", "D"]);
    let screen = wait_joined(&t, "or cancel it (c) first", SHORT);
    assert!(joined(&screen).contains("has a live canary"), "{screen}");
    // The id as the 80-column screen shows it works in the CLI.
    let short = &id[id.len() - 11..];
    assert!(screen.contains(short), "{short} on screen:\n{screen}");
    assert_eq!(status(dir.path(), short)["id"], id.as_str());
    t.keys(&["Tab", "Enter"]);
    t.wait_for("held at 70%", SHORT);
    // Promote at 70% with a 25% step next: it passes over, and says so first.
    t.keys(&["p"]);
    wait_joined(&t, "passed over", SHORT);
    std::thread::sleep(Duration::from_millis(500));
    t.keys(&["Right", "Enter"]);
    t.wait_for("step 7/9: paused until promoted", LONG);
    let v = status(dir.path(), &id);
    assert_eq!(v["canary"]["status"]["weight"], 70, "{v}");
    // Space on a held canary asks.
    t.keys(&["Right", "Enter"]);
    t.wait_for("type prod to confirm", SHORT);
    std::thread::sleep(Duration::from_millis(500));
    t.keys(&["p", "r", "o", "d", "Enter"]);
    t.wait_for("held at 75%", LONG);
    t.keys(&["Space"]);
    t.wait_for("Resume the steps of the canary", SHORT);
    t.keys(&["Escape"]);
    t.keys(&["q"]);
    t.wait_for("EXITED 0", LONG);
}

#[test]
fn the_terminal_starts_clean_says_16_colours_to_vt100_and_comes_back_after_a_hangup() {
    let dir = tempfile::tempdir().unwrap();
    // What a dropped session left on the terminal, then the console (without the alternate
    // screen, which would hide the remains).
    let noise = "for i in $(seq 1 40); do echo OLD-SESSION-REMAINS-$i; done";
    let cmd = format!(
        "{noise}; env TERM=vt100 {}",
        demo(dir.path(), "--no-alt-screen")
    );
    let Some(t) = Tmux::start("terminal", &cmd, &[]) else {
        return;
    };
    let screen = t.wait_for("CANARY PAUSED", LONG);
    assert!(
        !screen.contains("OLD-SESSION-REMAINS"),
        "cleared at start:\n{screen}"
    );
    let styled = t.capture_styled();
    for sgr in ["38;5;", "48;5;", "38;2;", "48;2;"] {
        assert!(
            !styled.contains(sgr),
            "a 256-colour SGR under vt100 ({sgr}):\n{styled:?}"
        );
    }
    assert!(
        screen.lines().all(|l| l.is_ascii()),
        "ASCII borders under vt100:\n{screen}"
    );
    // Ctrl-L draws everything again.
    t.keys(&["C-l"]);
    t.wait_for("CANARY PAUSED", SHORT);
    // SIGHUP with the terminal still there: it is given back sane (no alternate screen, the
    // cursor shown) while the engine finishes headless.
    let pid = pid_of(&format!("demo --dir {}", dir.path().display()));
    signal(pid, "-HUP");
    let screen = t.wait_for("EXITED", LONG);
    assert!(!screen.contains("CANARY PAUSED"), "{screen}");
    let out = Command::new("tmux")
        .args(["-L", &t.socket, "display", "-p", "#{cursor_flag}"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "1",
        "the cursor shows"
    );
}
