//! The console at its edges: messages that wrap and stay, the message history, filters per
//! list, zoom, the command line, a screen too small, deploys refused at once, the test
//! picker, quitting, a submission that never started, an engine that went away.

use super::*;
use crossterm::event::KeyCode::{BackTab, Down, Enter, Esc, Tab, Up};
use fixture::{NOW, app_on_deployment, app_on_home, app_on_quiet_home};

const REFUSAL: &str = "version \"$(id)\" is refused: it must start with a letter or a digit \
    (versions are letters, digits and . _ + ~ -, up to 128) — and while we are at it this \
    message goes on to say everything an operator at 3 am needs to read in full, which is \
    more than one line of an 80-column terminal can hold: the end of it must be readable too";

/// The first frame comes before the engine's first snapshot: it says the lists are being
/// read, never that there are none.
#[test]
fn the_first_frame_says_reading_until_the_first_snapshot_then_what_there_is() {
    let first = App::new(false, NOW);
    let screen = text_of(&first, 80, 24);
    assert!(screen.contains("Applications: reading…"), "{screen}");
    assert!(screen.contains("Deployments: reading…"), "{screen}");
    assert!(!screen.contains("none yet"), "{screen}");
    let mut empty = App::new(false, NOW);
    let s = manent::engine::handle::Snapshot {
        seq: 1,
        ..Default::default()
    };
    empty.update(Action::Snapshot(std::sync::Arc::new(s)));
    let screen = text_of(&empty, 80, 24);
    assert!(screen.contains("Deployments: none yet"), "{screen}");
    assert!(!screen.contains("reading…"), "{screen}");
    let screen = text_of(&app_on_home(), 80, 24);
    assert!(
        !screen.contains("reading…") && !screen.contains("none yet"),
        "{screen}"
    );
}

#[test]
fn a_long_refusal_is_readable_in_full_at_80x24_stays_until_esc_and_is_kept_for_m() {
    let mut app = app_on_home();
    app.say(Level::Error, REFUSAL);
    let screen = text_of(&app, 80, 24);
    let joined: String = screen.lines().map(str::trim).collect::<Vec<_>>().join(" ");
    assert!(
        joined.contains("the end of it must be readable too"),
        "{screen}"
    );
    // Keys and time do not take an error away; Esc does.
    key(&mut app, Down);
    app.update(Action::Tick(NOW + 3_600_000));
    assert!(app.ui.flash.is_some(), "an error stays until dismissed");
    key(&mut app, Esc);
    assert!(app.ui.flash.is_none());
    // M shows it again, in full, with everything else said.
    ch(&mut app, 'M');
    assert_eq!(app.mode(), Mode::Help);
    let screen = text_of(&app, 80, 24);
    assert!(screen.contains("Messages, oldest first"), "{screen}");
    assert!(screen.contains("readable too"), "{screen}");
    key(&mut app, Esc);
    assert!(app.ui.modals.is_empty());
    // An information goes with the next key.
    app.say(Level::Info, "dry-run requested");
    key(&mut app, Down);
    assert!(app.ui.flash.is_none());
}

#[test]
fn help_lists_every_key_of_the_screen_and_scrolls_to_the_last() {
    let mut app = app_on_deployment(CANARY);
    ch(&mut app, '?');
    let sections = manent::console::app::dialog::help::sections(&app);
    let keys: Vec<&str> = sections
        .iter()
        .flat_map(|(_, k)| k.iter().map(|(k, _)| k.as_str()))
        .collect();
    for k in [
        "?", "M", "E", "/", "z", ":", "Ctrl-L", "Esc", "c", "Space", "p", "P", "x", "b", "t",
    ] {
        assert!(
            keys.iter()
                .any(|x| x.split_whitespace().any(|w| w == k) || *x == k),
            "help misses {k}: {keys:?}"
        );
    }
    assert!(
        sections
            .iter()
            .any(|(t, _)| t.starts_with("Canary (focused)")),
        "the focused panel's keys: {sections:?}"
    );
    // At 80×24 it scrolls to its last line.
    ch(&mut app, 'G');
    let screen = text_of(&app, 80, 24);
    assert!(
        screen.contains("Esc Enter ? q E M     close it"),
        "{screen}"
    );
}

#[test]
fn filters_belong_to_the_focused_list_and_esc_clears_them_before_leaving() {
    let mut app = app_on_home();
    key(&mut app, Tab);
    assert_eq!(app.ui.focus, Focus::Deployments);
    ch(&mut app, '/');
    for c in "staging".chars() {
        ch(&mut app, c);
    }
    key(&mut app, Enter);
    assert_eq!(app.ui.lists.get(Focus::Deployments).filter, "staging");
    assert!(
        app.visible_deployments()
            .iter()
            .all(|d| d.environment == "staging")
    );
    assert!(
        app.logs.filter.text.is_empty(),
        "the log pane is not filtered"
    );
    let screen = text_of(&app, 80, 24);
    assert!(
        screen.contains("/staging"),
        "the list says it is filtered:\n{screen}"
    );
    // Into a deployment: no filter follows.
    key(&mut app, Enter);
    assert!(matches!(app.ui.screen, Screen::Deployment(_)));
    assert!(!app.filter_of(Focus::Logs) && !app.filter_of(Focus::Targets));
    // Targets filtered there; Esc clears it, then leaves.
    ch(&mut app, '/');
    for c in "web-07".chars() {
        ch(&mut app, c);
    }
    key(&mut app, Enter);
    assert_eq!(app.visible_targets().len(), 1);
    key(&mut app, Esc);
    assert!(
        matches!(app.ui.screen, Screen::Deployment(_)),
        "Esc cleared the filter first"
    );
    assert!(app.ui.lists.get(Focus::Targets).filter.is_empty());
    key(&mut app, Esc);
    assert_eq!(app.ui.screen, Screen::Home);
    // Home: the deployments' filter, then nothing.
    key(&mut app, Esc);
    assert!(app.ui.lists.get(Focus::Deployments).filter.is_empty());
    // An empty filtered list says what to do.
    ch(&mut app, '/');
    for c in "nothing-like-this".chars() {
        ch(&mut app, c);
    }
    key(&mut app, Enter);
    let screen = text_of(&app, 80, 24);
    assert!(screen.contains("none match (Esc clears)"), "{screen}");
}

#[test]
fn reopening_the_log_filter_keeps_it_as_typed() {
    let mut app = app_on_deployment(RUNNING);
    key(&mut app, Tab);
    ch(&mut app, '/');
    for c in "level:warn".chars() {
        ch(&mut app, c);
    }
    key(&mut app, Enter);
    let before = app.logs.filter.clone();
    ch(&mut app, '/');
    key(&mut app, Enter);
    assert_eq!(
        app.logs.filter, before,
        "Enter on the pre-filled prompt changes nothing"
    );
    assert_eq!(app.logs.filter.min_level, Some(Level::Warn));
    assert!(app.logs.filter.text.is_empty());
}

#[test]
fn z_zooms_the_focused_pane_and_esc_or_z_gives_the_screen_back() {
    let mut app = app_on_deployment(RUNNING);
    key(&mut app, Tab);
    ch(&mut app, 'z');
    assert!(app.ui.zoom);
    let screen = text_of(&app, 80, 24);
    assert!(!screen.contains("TARGET "), "only the logs:\n{screen}");
    assert!(screen.contains("Logs"), "{screen}");
    assert!(
        app.log_rows() > 15,
        "the pane has the rows: {}",
        app.log_rows()
    );
    key(&mut app, Esc);
    assert!(!app.ui.zoom);
    assert!(matches!(app.ui.screen, Screen::Deployment(_)));
    ch(&mut app, 'z');
    ch(&mut app, 'z');
    assert!(!app.ui.zoom);
}

#[test]
fn the_command_line_completes_and_runs_verbs_through_their_questions() {
    let mut app = app_on_deployment(CANARY);
    ch(&mut app, ':');
    assert_eq!(app.mode(), Mode::Command);
    for c in "wei".chars() {
        ch(&mut app, c);
    }
    key(&mut app, Tab);
    let Some(Modal::Command(line)) = app.ui.modals.last() else {
        panic!("no command line")
    };
    assert_eq!(line.text, "weight ");
    for c in "30".chars() {
        ch(&mut app, c);
    }
    assert_eq!(key(&mut app, Enter), None, "it asks first");
    let c = confirm_of(&app);
    assert!(
        c.title.contains("→ stable 70% / candidate 30%"),
        "{}",
        c.title
    );
    key(&mut app, Esc);
    // A typo says what it may have meant; the line stays open.
    ch(&mut app, ':');
    for c in "promot".chars() {
        ch(&mut app, c);
    }
    key(&mut app, Enter);
    assert!(
        app.ui
            .flash
            .as_ref()
            .unwrap()
            .text
            .contains("did you mean promote?")
    );
    assert_eq!(app.mode(), Mode::Command);
    key(&mut app, Esc);
    // Up recalls the last line; :logs zooms the log pane.
    ch(&mut app, ':');
    key(&mut app, Up);
    let Some(Modal::Command(line)) = app.ui.modals.last() else {
        panic!("no command line")
    };
    assert_eq!(line.text, "weight 30");
    key(&mut app, Esc);
    ch(&mut app, ':');
    for c in "logs".chars() {
        ch(&mut app, c);
    }
    key(&mut app, Enter);
    assert_eq!((app.ui.focus, app.ui.zoom), (Focus::Logs, true));
    // skip completes the deployment's targets.
    let mut app = app_on_deployment(FAILED);
    ch(&mut app, ':');
    for c in "skip web-0".chars() {
        ch(&mut app, c);
    }
    key(&mut app, Tab);
    let Some(Modal::Command(line)) = app.ui.modals.last() else {
        panic!("no command line")
    };
    assert!(line.offered.contains(&"web-07".to_owned()), "{line:?}");
}

#[test]
fn a_terminal_below_the_minimum_says_so() {
    let app = app_on_home();
    let screen = text_of(&app, 40, 12);
    let joined = screen.replace('\n', " ");
    assert!(joined.contains("The terminal is 40×12"), "{screen}");
    assert!(joined.contains("needs at least 60×16"), "{screen}");
}

#[test]
fn deploying_where_a_canary_is_live_is_refused_at_once_in_full() {
    let mut app = app_on_home();
    key(&mut app, Down);
    assert_eq!(ch(&mut app, 'D'), None);
    assert!(
        app.ui.modals.is_empty(),
        "no version picker, no confirmation"
    );
    let text = &app.ui.flash.as_ref().unwrap().text;
    assert!(text.contains("shop/prod has a live"), "{text}");
    assert!(text.contains("would change nothing"), "{text}");
    // D on a deployment's row acts on its application: refused the same way, for it.
    key(&mut app, Tab);
    assert_eq!(app.ui.focus, Focus::Deployments);
    app.ui.flash = None;
    ch(&mut app, 'D');
    assert!(
        app.ui
            .flash
            .as_ref()
            .unwrap()
            .text
            .contains("shop/prod has a live"),
        "{:?}",
        app.ui.flash
    );
}

#[test]
fn a_bad_typed_version_is_refused_before_any_question() {
    let mut app = fixture::app_on_quiet_home();
    key(&mut app, Down);
    ch(&mut app, 'D');
    ch(&mut app, 'G');
    key(&mut app, Enter);
    for c in "$(id)".chars() {
        ch(&mut app, c);
    }
    key(&mut app, Enter);
    assert!(
        matches!(app.ui.modals.last(), Some(Modal::Versions(_))),
        "still picking"
    );
    assert_eq!(app.ui.flash.as_ref().unwrap().level, Level::Error);
    assert!(app.ui.flash.as_ref().unwrap().text.contains("is refused"));
}

#[test]
fn t_where_a_canary_is_live_asks_which_release_to_test() {
    let mut app = app_on_deployment(CANARY);
    let mut s = (*app.snap).clone();
    s.apps[1].tests = vec!["smoke".into()];
    app.update(Action::Snapshot(std::sync::Arc::new(s)));
    ch(&mut app, 't');
    assert!(matches!(app.ui.modals.last(), Some(Modal::Tests(_))));
    key(&mut app, Down);
    key(&mut app, Enter);
    let c = confirm_of(&app);
    assert!(
        c.title.contains("against the candidate 2.4.0 of"),
        "{}",
        c.title
    );
    later(&mut app);
    key(&mut app, crossterm::event::KeyCode::Right);
    for c in "pro".chars() {
        ch(&mut app, c);
    }
    let sent = key(&mut app, Enter);
    assert!(
        matches!(&sent, Some(Command::Test { candidate: Some(c), .. }) if c == CANARY),
        "{sent:?}"
    );
}

#[test]
fn a_submission_never_started_waits_in_the_inbox_and_space_asks_to_start_it() {
    let mut app = app_on_home();
    let mut s = (*app.snap).clone();
    let mut d = fixture::running();
    d.id = "dep-20261129-110000-0001".into();
    d.environment = "eu1".into();
    d.application = "api".into();
    d.status = manent::workflow::store::WorkflowStatus::Cancelled;
    d.state = DeploymentState::Cancelled;
    d.accepts = Vec::new();
    d.created_at = NOW - 1_000;
    d.never_started = Some(manent::workflow::store::Submitter {
        by: "alice".into(),
        pid: 4242,
        host: "bastion-1".into(),
        identity: None,
        at: NOW - 1_000,
    });
    s.deployments.push(d);
    app.update(Action::Snapshot(std::sync::Arc::new(s)));
    let item = app
        .inbox()
        .into_iter()
        .find(|i| i.subject == "api/eu1")
        .expect("in the inbox");
    assert!(
        item.what
            .contains("submitted by alice (pid 4242 on bastion-1), never started"),
        "{item:?}"
    );
    // Jump there; Space asks to start it, naming who submitted it.
    key(&mut app, BackTab);
    while app.inbox()[app.row(Focus::Inbox)].subject != "api/eu1" {
        key(&mut app, Down);
    }
    key(&mut app, Enter);
    ch(&mut app, ' ');
    let c = confirm_of(&app);
    assert!(c.title.contains("submitted by alice at"), "{}", c.title);
    assert_eq!(c.yes, "Start it");
}

#[test]
fn quitting_with_only_waiting_deployments_needs_no_worker_and_unclaimed_ones_warn() {
    let mut app = app_on_home();
    let mut s = (*app.snap).clone();
    s.deployments
        .retain(|d| d.state.is_waiting() || !d.status.is_live());
    s.mode = Some(EngineMode::InProcess);
    // A live canary waits too, but its candidate takes traffic: it needs a judge.
    app.update(Action::Snapshot(std::sync::Arc::new(s.clone())));
    ch(&mut app, 'q');
    assert!(
        !app.ui.should_quit,
        "a live canary is not left without a question"
    );
    let screen = text_of(&app, 80, 24);
    assert!(
        screen.contains("shop/prod canary of 2.4.0 at 10%: a background worker keeps judging it"),
        "{screen}"
    );
    let mut app = app_on_home();
    s.deployments.retain(|d| !d.needs_judge());
    app.update(Action::Snapshot(std::sync::Arc::new(s.clone())));
    ch(&mut app, 'q');
    assert!(
        app.ui.should_quit,
        "waiting deployments wait in the database: quit at once"
    );
    let mut app = app_on_home();
    s.unclaimed = vec!["dep-20261129-110500-0002".into()];
    s.mode = Some(EngineMode::Attached {
        holder: "pid 4242 on bastion-1".into(),
    });
    app.update(Action::Snapshot(std::sync::Arc::new(s)));
    ch(&mut app, 'q');
    assert!(!app.ui.should_quit);
    let screen = text_of(&app, 80, 24);
    assert!(screen.contains("never started"), "{screen}");
}

#[test]
fn the_header_says_when_the_engine_it_attached_to_went_away() {
    let mut app = app_on_home();
    let mut s = (*app.snap).clone();
    s.engine_note = Some(
        "the engine this console was attached to (pid 4242) ended at 10:01:00: this \
         console runs the engine now"
            .into(),
    );
    app.update(Action::Snapshot(std::sync::Arc::new(s)));
    let screen = text_of(&app, 120, 40);
    let header = screen.lines().next().unwrap();
    assert!(
        header.contains("engine now in this console (M)"),
        "{screen}"
    );
    assert!(!header.contains('⚠'), "not an alarm: {header}");
}

#[test]
fn deploying_over_a_failed_deploy_says_whether_it_retries_or_replaces_it() {
    let mut app = app_on_home();
    // shop/staging: its 2.4.0 deploy failed on web-07 and waits for a decision.
    ch(&mut app, 'D');
    key(&mut app, Enter);
    let c = confirm_of(&app);
    assert!(
        c.lines
            .iter()
            .any(|l| l.ends_with("this retries its failed targets")),
        "{:?}",
        c.lines
    );
    key(&mut app, Esc);
    ch(&mut app, 'D');
    key(&mut app, Down);
    key(&mut app, Enter);
    let c = confirm_of(&app);
    assert!(
        c.lines
            .iter()
            .any(|l| l.ends_with("this deploy cancels it and replaces it")),
        "{:?}",
        c.lines
    );
}

#[test]
fn log_filters_search_level_target_and_scroll() {
    let mut app = app_on_deployment("dep-20261129-100000-aaaa");
    // `/` filters the focused panel: the logs.
    key(&mut app, Tab);
    assert_eq!(app.ui.focus, Focus::Logs);
    ch(&mut app, '/');
    assert_eq!(app.mode(), Mode::Prompt);
    for c in "plugin:fleet health".chars() {
        ch(&mut app, c);
    }
    key(&mut app, crossterm::event::KeyCode::Backspace);
    key(&mut app, Enter);
    assert_eq!(app.logs.filter.source.as_deref(), Some("fleet"));
    assert_eq!(app.logs.filter.text, "healt");
    ch(&mut app, '/');
    key(&mut app, Esc);
    assert_eq!(app.logs.filter.text, "healt", "Esc keeps the filter");
    for expected in [
        Some(Level::Info),
        Some(Level::Warn),
        Some(Level::Error),
        None,
    ] {
        ch(&mut app, 'L');
        assert_eq!(app.logs.filter.min_level, expected);
    }
    key(&mut app, BackTab);
    key(&mut app, Down);
    ch(&mut app, 'f');
    assert_eq!(app.logs.filter.target.as_deref(), Some("web-02"));
    ch(&mut app, 'f');
    assert_eq!(app.logs.filter.target, None, "again: all targets");
    key(&mut app, Tab);
    assert_eq!(app.ui.focus, Focus::Logs);
    app.logs.filter = Default::default();
    app.logs.filter.deployment = Some("dep-20261129-100000-aaaa".into());
    key(&mut app, crossterm::event::KeyCode::PageUp);
    assert!(!app.logs.following());
    ch(&mut app, 'G');
    assert!(app.logs.following());
    // `g` reaches the very first line at 80x24, whatever the pane's height.
    ch(&mut app, 'g');
    let rows = app.log_rows();
    assert_eq!(
        app.logs.visible(rows)[0].at,
        NOW - 60_000,
        "the oldest line shows"
    );
}

#[test]
fn a_parked_notification_waits_in_homes_inbox_with_the_verb_that_sends_it_again() {
    let mut app = app_on_home();
    let mut s = (*app.snap).clone();
    s.seq += 1;
    s.parked = vec![manent::deploy::records::Parked {
        row: manent::deploy::records::OutboxRow {
            id: 42,
            receiver: "chatops".into(),
            workflow_id: "dep-20261129-100000-aaaa".into(),
            mark: "started".into(),
            event: "started".into(),
            body: "{}".into(),
            attempts: 1,
            next_at: NOW,
        },
        parked_at: NOW - 60_000,
        error: "400 Bad Request".into(),
    }];
    app.update(Action::Snapshot(std::sync::Arc::new(s)));
    let inbox = app.inbox();
    let item = inbox
        .iter()
        .find(|i| i.subject == "chatops")
        .expect("the parked notification is in the inbox");
    assert!(item.what.contains("400 Bad Request"), "{}", item.what);
    assert_eq!(item.verbs, "manent notify retry 42");
    let screen = text_of(&app, 120, 40);
    assert!(screen.contains("chatops"), "{screen}");
}

/// A finished deployment is listed as a list reads it (its counts from its report) and read
/// whole once opened: until the whole arrives its screen says it is reading, never "0/0" or
/// "none defined"; then its targets show.
#[test]
fn a_finished_deployment_listed_as_a_summary_says_it_is_reading_until_it_is_whole() {
    let whole = fixture::rolled_back();
    let id = whole.id.clone();
    let mut summary = whole.clone();
    summary.targets.clear();
    summary.hooks.clear();
    summary.summary = true;
    summary.target_counts = Some(manent::deploy::TargetCounts {
        done: whole.done(),
        total: whole.targets.len(),
    });
    let mut app = app_on_home();
    let mut s = (*app.snap).clone();
    s.deployments.retain(|d| d.id != id);
    s.deployments.push(summary);
    app.update(Action::Snapshot(std::sync::Arc::new(s.clone())));
    let home = text_of(&app, 80, 24);
    let progress = format!("{}/{}", whole.done(), whole.targets.len());
    let row = home
        .lines()
        .find(|l| l.contains(&id[id.len() - 4..]))
        .unwrap_or_default();
    assert!(row.contains(&progress), "{progress} in the list:\n{home}");
    app.show(id.clone());
    assert_eq!(
        app.update(Action::Tick(NOW)),
        Some(manent::engine::handle::Command::LoadLogs { id: id.clone() }),
        "opening it asks for it whole"
    );
    let reading = text_of(&app, 80, 24);
    assert!(reading.contains("reading them…"), "{reading}");
    assert!(
        reading.contains("reading its hooks and targets"),
        "{reading}"
    );
    assert!(!reading.contains("none defined"), "{reading}");
    s.deployments.retain(|d| d.id != id);
    s.deployments.push(whole.clone());
    app.update(Action::Snapshot(std::sync::Arc::new(s)));
    let shown = text_of(&app, 80, 24);
    assert!(!shown.contains("reading"), "{shown}");
    assert!(shown.contains(&whole.targets[0].name), "{shown}");
}

#[test]
fn live_releases_not_read_yet_say_so_and_deploy_and_rollback_wait_for_them() {
    // The first screen comes before a fleet's live releases are read.
    let mut app = app_on_quiet_home();
    let mut s = (*app.snap).clone();
    for a in &mut s.apps {
        a.live_read = false;
        a.live.clear();
        a.live_by_target.clear();
        a.rollback = manent::deploy::releases::Transitions::default();
        a.versions.clear();
    }
    app.update(Action::Snapshot(std::sync::Arc::new(s.clone())));
    let home = text_of(&app, 80, 24);
    let row = home.lines().find(|l| l.contains("staging")).unwrap();
    assert!(
        row.contains("reading…"),
        "LIVE says it is being read:\n{home}"
    );
    for (c, what) in [('R', "R (roll back)"), ('D', "D (deploy)")] {
        assert_eq!(ch(&mut app, c), None);
        assert!(
            app.ui.modals.is_empty(),
            "{what}: no question on unknown releases"
        );
        let said = &app.ui.flash.as_ref().unwrap().text;
        assert_eq!(
            said,
            &format!(
                "{what}: the live releases of shop/staging are still being read — press it \
                 again in a moment"
            ),
            "not 'nothing to roll back'"
        );
    }
    // Once read, the same keys ask.
    for a in &mut s.apps {
        a.live_read = true;
    }
    app.update(Action::Snapshot(std::sync::Arc::new(s)));
    assert!(!text_of(&app, 80, 24).contains("reading…"));
    ch(&mut app, 'D');
    assert!(!app.ui.modals.is_empty(), "the version picker opens");
}

/// Focus you can see, keys that cannot surprise: at 80×24 the hooks, focused, are drawn as a
/// panel (Tab never stops on one that is not); the focused panel is marked by its border and a
/// `▶` before its title, not by colour alone.
#[test]
fn at_80x24_tab_to_hooks_draws_them_and_the_focus_is_marked_without_colour() {
    let mut app = fixture::app_on_hooked();
    app.update(Action::Resize(80, 24));
    for _ in 0..4 {
        if app.ui.focus == Focus::Hooks {
            break;
        }
        key(&mut app, Tab);
    }
    assert_eq!(app.ui.focus, Focus::Hooks);
    let screen = text_of(&app, 80, 24);
    assert!(
        screen.contains("┏▶ Hooks · Enter opens one · Tab: logs"),
        "{screen}"
    );
    assert_eq!(
        screen.matches('▶').count(),
        1,
        "one panel has the focus:\n{screen}"
    );
    assert!(
        screen.contains('›'),
        "the selected hook is marked:\n{screen}"
    );
    key(&mut app, Tab);
    let screen = text_of(&app, 80, 24);
    assert!(!screen.contains("Hooks · Enter opens one"), "{screen}");
}

/// "Waiting on you" says the key that reaches it from where the keyboard is, and that key then
/// Enter opens the deployment it names.
#[test]
fn the_waiting_hint_names_the_key_that_reaches_it_from_the_focused_panel() {
    let mut app = app_on_home();
    let first = app.inbox()[0].clone();
    let id = first.deployment.clone().expect("a deployment waits");
    // Back from a deployment: the focus is on Deployments.
    app.show(id.clone());
    key(&mut app, Esc);
    assert_eq!(app.ui.focus, Focus::Deployments);
    let screen = text_of(&app, 80, 24);
    assert!(
        screen.contains("Waiting on you: 2 · Tab, Enter opens"),
        "{screen}"
    );
    key(&mut app, Tab);
    assert_eq!(app.ui.focus, Focus::Inbox);
    assert!(text_of(&app, 80, 24).contains("Waiting on you: 2 · Enter opens"));
    key(&mut app, Enter);
    assert_eq!(app.ui.screen, Screen::Deployment(id));
    // From Applications it is one Shift-Tab.
    let mut app = app_on_home();
    assert_eq!(app.ui.focus, Focus::Apps);
    assert!(text_of(&app, 80, 24).contains("Waiting on you: 2 · Shift-Tab, Enter opens"));
    key(&mut app, BackTab);
    assert_eq!(app.ui.focus, Focus::Inbox);
}

/// A plan whose version is older than one live on a target says it is a downgrade before
/// Enter deploys it.
#[test]
fn a_plan_that_would_downgrade_says_so() {
    let mut app = app_on_quiet_home();
    let mut s = (*app.snap).clone();
    let a = s
        .apps
        .iter_mut()
        .find(|a| a.application == "shop" && a.environment == "prod")
        .unwrap();
    a.live_read = true;
    let first = a.batches[0][0].clone();
    a.live_by_target.insert(first, "2.10.0".into());
    app.update(Action::Snapshot(std::sync::Arc::new(s)));
    while app.selected_app().is_none_or(|a| a.environment != "prod") {
        key(&mut app, Down);
    }
    key(&mut app, Enter);
    let screen = text_of(&app, 80, 24);
    assert!(
        screen.contains("⚠ a downgrade: 1 of 36 targets run 2.10.0, newer than 2.4.0"),
        "{screen}"
    );
    // The same plan without it says nothing of the kind.
    let mut app = app_on_quiet_home();
    while app.selected_app().is_none_or(|a| a.environment != "prod") {
        key(&mut app, Down);
    }
    key(&mut app, Enter);
    assert!(!text_of(&app, 80, 24).contains("downgrade"));
}

/// A plan whose application file was read again (edited) while it was open says so, and its
/// first Enter shows the plan the file says now instead of deploying it.
#[test]
fn a_plan_whose_file_changed_says_so_and_enter_rereads_it_first() {
    let mut app = app_on_quiet_home();
    while app.selected_app().is_none_or(|a| a.environment != "prod") {
        key(&mut app, Down);
    }
    key(&mut app, Enter);
    assert!(matches!(app.ui.modals.last(), Some(Modal::Plan(_))));
    assert!(!text_of(&app, 80, 24).contains("changed"));
    let mut s = (*app.snap).clone();
    for a in &mut s.apps {
        a.read = 7;
        a.version = "2.5.0".into();
    }
    app.update(Action::Snapshot(std::sync::Arc::new(s)));
    let screen = text_of(&app, 80, 24);
    assert!(
        screen.contains("⚠ shop.yml changed — Enter re-reads it"),
        "{screen}"
    );
    assert!(
        screen.contains("shop 2.5.0"),
        "it shows what the file says now: {screen}"
    );
    assert_eq!(key(&mut app, Enter), None);
    assert!(
        matches!(app.ui.modals.last(), Some(Modal::Plan(_))),
        "still the plan: nothing deployed"
    );
    assert!(
        app.ui
            .flash
            .as_ref()
            .unwrap()
            .text
            .contains("shop.yml changed")
    );
    assert!(!text_of(&app, 80, 24).contains("Enter re-reads it"));
    key(&mut app, Enter);
    assert!(
        matches!(app.ui.modals.last(), Some(Modal::Versions(_))),
        "read: Enter goes on to the version"
    );
}

/// Log lines are cut to the pane until `w` wraps them in full; Enter on the log pane shows its
/// lines whole over the whole screen.
#[test]
fn w_wraps_log_lines_in_full_and_enter_on_the_logs_opens_them_whole() {
    let mut app = app_on_deployment("dep-20261129-100000-aaaa");
    let long = "upstream web-07 answered 502 Bad Gateway three times in a row while the health \
                check said it was fine: the load balancer's pool still lists the old address \
                10.0.0.17, which nothing answers on since the last rebuild END-OF-LINE";
    let mut line = fixture::logs().pop().unwrap();
    line.message = long.into();
    line.at = NOW;
    app.update(Action::Log(std::sync::Arc::new(line)));
    while app.ui.focus != Focus::Logs {
        key(&mut app, Tab);
    }
    let screen = text_of(&app, 80, 24);
    assert!(
        !screen.contains("END-OF-LINE"),
        "cut to the pane:\n{screen}"
    );
    ch(&mut app, 'w');
    let screen = text_of(&app, 80, 24);
    assert!(screen.contains("END-OF-LINE"), "wrapped in full:\n{screen}");
    assert!(screen.contains("wrapped (w)"), "{screen}");
    ch(&mut app, 'w');
    assert!(!text_of(&app, 80, 24).contains("END-OF-LINE"));
    key(&mut app, Enter);
    assert!(app.ui.zoom && app.logs.wrap);
    let screen = text_of(&app, 80, 24);
    assert!(
        screen.contains("END-OF-LINE") && !screen.contains("Targets"),
        "{screen}"
    );
}

/// The version picker lists newest first whatever the descriptor says, its cursor on the
/// descriptor's version (marked): a version deployed since the last look goes on top, never
/// between rows a hand knows.
#[test]
fn the_version_picker_is_newest_first_with_the_cursor_on_the_descriptors() {
    let mut app = app_on_quiet_home();
    let mut s = (*app.snap).clone();
    for a in &mut s.apps {
        a.version = "2.2.5".into();
        a.versions = vec!["2.10.0".into(), "2.2.0".into(), "2.3.0".into()];
    }
    app.update(Action::Snapshot(std::sync::Arc::new(s)));
    key(&mut app, Down);
    ch(&mut app, 'D');
    let Some(Modal::Versions(v)) = app.ui.modals.last() else {
        panic!("the picker")
    };
    let order: Vec<&str> = v.choices.iter().map(|c| c.version.as_str()).collect();
    assert_eq!(order, ["2.10.0", "2.3.0", "2.2.5", "2.2.0"]);
    assert_eq!(v.choices[v.selected].version, "2.2.5");
    assert!(v.choices[v.selected].note.starts_with("the descriptor's"));
}

/// A picker open while the snapshot moves on (a deploy ended: a version more to offer) keeps
/// its rows as they were when it opened: what is under the cursor is what Enter picks.
#[test]
fn the_version_picker_keeps_its_rows_while_open() {
    let mut app = app_on_quiet_home();
    let mut s = (*app.snap).clone();
    for a in &mut s.apps {
        a.version = "2.2.5".into();
        a.versions = vec!["2.2.0".into(), "2.3.0".into()];
    }
    app.update(Action::Snapshot(std::sync::Arc::new(s.clone())));
    key(&mut app, Down);
    ch(&mut app, 'D');
    let rows = |app: &App| match app.ui.modals.last() {
        Some(Modal::Versions(v)) => (
            v.choices
                .iter()
                .map(|c| c.version.clone())
                .collect::<Vec<_>>(),
            v.choices[v.selected].version.clone(),
        ),
        _ => panic!("the picker"),
    };
    let before = rows(&app);
    for a in &mut s.apps {
        a.versions.push("2.4.0".into());
    }
    app.update(Action::Snapshot(std::sync::Arc::new(s)));
    assert_eq!(rows(&app), before);
    key(&mut app, Down);
    assert_eq!(rows(&app).1, "2.2.0", "{:?}", rows(&app));
}

/// Words that are cut say less than they should: a column of short names is still headed
/// TARGET, and the header keeps who started the deployment (their address and then the phase
/// give way first).
#[test]
fn short_names_keep_their_heading_and_the_header_keeps_who_started_it() {
    let mut app = app_on_deployment("dep-20261129-100000-aaaa");
    let mut s = (*app.snap).clone();
    for d in &mut s.deployments {
        for (i, t) in d.targets.iter_mut().enumerate() {
            t.name = format!("w{i}");
        }
    }
    app.update(Action::Snapshot(std::sync::Arc::new(s)));
    let screen = text_of(&app, 80, 24);
    assert!(screen.contains("TARGET BATCH"), "{screen}");
    let header = screen.lines().next().unwrap();
    assert!(header.contains("by alice"), "{header}");
    assert!(header.contains("RUNNING batch 2/6"), "{header}");
}

/// A rollback that leaves targets where they are names them.
#[test]
fn a_rollback_names_the_targets_it_leaves_where_they_are() {
    let mut app = app_on_home();
    let mut s = (*app.snap).clone();
    for a in s.apps.iter_mut().filter(|a| a.environment == "prod") {
        a.rollback.0[0].targets = a.targets - 1;
        a.rollback_stays = vec!["web-2".into()];
    }
    app.update(Action::Snapshot(std::sync::Arc::new(s)));
    while app
        .selected_app()
        .is_none_or(|a| a.rollback_stays.is_empty())
    {
        key(&mut app, Down);
    }
    ch(&mut app, 'R');
    let c = confirm_of(&app);
    assert!(
        c.lines
            .iter()
            .any(|l| l == "web-2 has no earlier release with another version and stays"),
        "{:?}",
        c.lines
    );
}

/// `/` filters as it is typed (k9s): the list under the prompt follows each key; Enter keeps
/// the filter, Esc puts back the one in force before.
#[test]
fn slash_filters_as_you_type_and_esc_puts_back_the_filter_before() {
    let mut app = app_on_home();
    key(&mut app, Tab);
    assert_eq!(app.ui.focus, Focus::Deployments);
    let all = app.visible_deployments().len();
    ch(&mut app, '/');
    for c in "stag".chars() {
        ch(&mut app, c);
    }
    assert!(
        matches!(app.ui.modals.last(), Some(Modal::Filter(_))),
        "still typing"
    );
    let shown = app.visible_deployments().len();
    assert!(shown < all && shown > 0, "{shown} of {all}");
    key(&mut app, Esc);
    assert!(app.ui.modals.is_empty());
    assert_eq!(
        app.visible_deployments().len(),
        all,
        "Esc put back no filter"
    );
    ch(&mut app, '/');
    for c in "stag".chars() {
        ch(&mut app, c);
    }
    key(&mut app, Enter);
    assert_eq!(app.ui.lists.get(Focus::Deployments).filter, "stag");
    // Again: Esc puts back "stag", not nothing.
    ch(&mut app, '/');
    ch(&mut app, 'x');
    assert_eq!(app.visible_deployments().len(), 0);
    key(&mut app, Esc);
    assert_eq!(app.visible_deployments().len(), shown);
}

/// Filtering, and Esc clearing a filter, keep the selection on the row it was on (it moved to
/// the first row, and `f` then filtered the logs to the wrong target).
#[test]
fn a_filter_set_or_cleared_keeps_the_selected_row() {
    let mut app = app_on_home();
    key(&mut app, Tab);
    key(&mut app, Down);
    key(&mut app, Down);
    let chosen = app.selected_deployment().unwrap().id.clone();
    assert!(
        app.selected_deployment()
            .unwrap()
            .subject()
            .ends_with("staging")
    );
    ch(&mut app, '/');
    for c in "staging".chars() {
        ch(&mut app, c);
    }
    key(&mut app, Enter);
    assert_eq!(app.selected_deployment().unwrap().id, chosen);
    key(&mut app, Esc);
    assert!(app.ui.lists.get(Focus::Deployments).filter.is_empty());
    assert_eq!(app.selected_deployment().unwrap().id, chosen, "still on it");
}

/// The demo's opening line stays until what it announces happens (a canary waiting at its
/// gate), under any message, whatever keys are pressed meanwhile.
#[test]
fn the_demos_line_stays_until_the_canary_waits_at_its_gate() {
    let mut app = app_on_quiet_home();
    app.ui.until_gate = Some("demo: shop 2.4.0 goes to prod as a canary".into());
    let mut s = (*app.snap).clone();
    s.deployments
        .retain(|d| d.state != DeploymentState::CanaryPaused);
    app.update(Action::Snapshot(std::sync::Arc::new(s)));
    key(&mut app, Down);
    app.update(Action::Tick(NOW + 60_000));
    assert!(text_of(&app, 80, 24).contains("goes to prod as a canary"));
    app.update(Action::Snapshot(std::sync::Arc::new(fixture::snapshot())));
    assert!(!text_of(&app, 80, 24).contains("goes to prod as a canary"));
}

/// A dead-lettered deployment says on top why it stopped, where, and the key that runs it
/// again; the footer offers it, and Space asks before resuming.
#[test]
fn a_dead_lettered_deployment_says_why_and_space_resumes_it() {
    use manent::deploy::state::{DeploymentState, TargetState};
    use manent::workflow::store::WorkflowStatus;
    let id = "dep-20261129-100000-aaaa";
    let mut app = app_on_deployment(id);
    let mut s = (*app.snap).clone();
    for d in s.deployments.iter_mut().filter(|d| d.id == id) {
        d.state = DeploymentState::DeadLettered;
        d.status = WorkflowStatus::MaxRecoveryAttemptsExceeded;
        d.runs = 3;
        d.accepts.clear();
        for t in d
            .targets
            .iter_mut()
            .filter(|t| t.state == TargetState::Running)
        {
            t.state = TargetState::Unknown;
        }
    }
    app.update(Action::Snapshot(std::sync::Arc::new(s)));
    let screen = text_of(&app, 80, 24);
    assert!(
        screen.contains("✗ dead-lettered: stopped after 3 crashed runs (cut off at"),
        "{screen}"
    );
    assert!(screen.contains("Space runs it again"), "{screen}");
    assert!(screen.contains("Space resume"), "{screen}");
    ch(&mut app, ' ');
    let c = confirm_of(&app);
    assert!(c.title.starts_with("Resume"), "{}", c.title);
}
