//! Keys on every screen: moving, opening, confirming, the log pane's filters and scrolling.

use super::*;
use crossterm::event::KeyCode::{BackTab, Down, Enter, Esc, Right, Tab, Up};
use fixture::{NOW, app_on_deployment, app_on_home, snapshot};

#[test]
fn help_opens_and_closes() {
    let mut app = app_on_home();
    ch(&mut app, '?');
    assert_eq!(app.mode(), Mode::Help);
    assert_eq!(ch(&mut app, 'D'), None, "dialogs take their keys first");
    key(&mut app, Esc);
    assert!(app.ui.modals.is_empty());
    // Help scrolls: at 60x15 every key is reachable.
    app.update(Action::Resize(60, 15));
    ch(&mut app, '?');
    key(&mut app, Down);
    key(&mut app, Down);
    assert!(
        matches!(&app.ui.modals[..], [Modal::Help(h)] if h.scroll.offset == 2),
        "{:?}",
        app.ui.modals
    );
    ch(&mut app, 'G');
    key(&mut app, Esc);
    ch(&mut app, 'E');
    assert_eq!(app.ui.modals, vec![Modal::EngineLog]);
    ch(&mut app, 'E');
    assert!(app.ui.modals.is_empty());
}

#[test]
fn moving_focus_and_opening() {
    let mut app = app_on_home();
    key(&mut app, Down);
    key(&mut app, Down);
    key(&mut app, Down);
    assert_eq!(app.row(Focus::Apps), 2, "stops at the last application");
    key(&mut app, Up);
    assert_eq!(app.row(Focus::Apps), 1);
    key(&mut app, Tab);
    assert_eq!(app.ui.focus, Focus::Deployments);
    ch(&mut app, 'l');
    assert_eq!(
        app.ui.focus,
        Focus::Inbox,
        "l moves to the next panel (wraps to the top: what waits on you)"
    );
    ch(&mut app, 'l');
    key(&mut app, Enter);
    assert!(matches!(app.ui.modals.last(), Some(Modal::Plan(p)) if p.environment == "prod"));
    key(&mut app, Esc);
    key(&mut app, Tab);
    key(&mut app, Enter);
    assert_eq!(
        app.ui.screen,
        Screen::Deployment("dep-20261129-100000-aaaa".into())
    );
    assert_eq!(
        app.logs.filter.deployment.as_deref(),
        Some("dep-20261129-100000-aaaa")
    );
    key(&mut app, Esc);
    assert_eq!(app.ui.screen, Screen::Home);
    assert_eq!(app.ui.focus, Focus::Deployments);
}

#[test]
fn deploying_asks_first_defaults_to_cancel_and_ignores_a_held_enter() {
    let mut app = fixture::app_on_quiet_home();
    key(&mut app, Down);
    // D asks which version first: the descriptor's is on top.
    assert_eq!(ch(&mut app, 'D'), None);
    assert_eq!(app.mode(), Mode::List);
    assert_eq!(key(&mut app, Enter), None);
    let c = confirm_of(&app);
    assert_eq!(
        c.title,
        "Deploy shop 2.4.0 to prod: 36 targets in 6 batches?"
    );
    assert_eq!((c.no.as_str(), c.yes.as_str()), ("Cancel", "Deploy"));
    assert_eq!(c.choice, Choice::Cancel);
    assert!(
        c.lines
            .iter()
            .any(|l| l.contains("PROD IS A PRODUCTION ENVIRONMENT"))
    );
    // An Enter right after the dialog opened is a held key: nothing happens.
    assert_eq!(key(&mut app, Enter), None);
    assert_eq!(app.ui.modals.len(), 1);
    // Enter on the default button cancels.
    later(&mut app);
    assert_eq!(key(&mut app, Enter), None);
    assert!(app.ui.modals.is_empty());
    assert_eq!(
        app.ui.flash.as_ref().unwrap().text,
        "cancelled: nothing was done"
    );
    // Choosing Confirm, typing a reason, then Enter deploys.
    ch(&mut app, 'D');
    key(&mut app, Enter);
    key(&mut app, Right);
    // What is typed before the dialog could be read is not its reason.
    ch(&mut app, 'x');
    assert!(confirm_of(&app).reason.is_empty() && confirm_of(&app).swallowed);
    later(&mut app);
    for c in "hotfix 123".chars() {
        ch(&mut app, c);
    }
    let cmd = key(&mut app, Enter);
    assert_eq!(
        cmd,
        Some(Command::Deploy {
            application: "shop".into(),
            environment: "prod".into(),
            version: Some("2.4.0".into()),
            dry_run: false,
            reason: Some("hotfix 123".into()),
            force: false,
        })
    );
    // Esc cancels too.
    ch(&mut app, 'D');
    key(&mut app, Enter);
    key(&mut app, Esc);
    assert!(app.ui.modals.is_empty());
}

/// Typing another version, ↑ goes back to the list (the hint says ↑↓ choose) and Enter then
/// takes the listed version, not the half-typed one.
#[test]
fn up_while_typing_a_version_goes_back_to_the_listed_ones() {
    let mut app = fixture::app_on_quiet_home();
    key(&mut app, Down);
    ch(&mut app, 'D');
    ch(&mut app, 'G');
    key(&mut app, Enter);
    assert_eq!(app.mode(), Mode::Prompt);
    ch(&mut app, '9');
    key(&mut app, Up);
    assert_ne!(app.mode(), Mode::Prompt);
    key(&mut app, Enter);
    let c = confirm_of(&app);
    assert!(
        c.title.starts_with("Deploy shop 2.2.0 to prod"),
        "{}",
        c.title
    );
}

#[test]
fn the_version_picker_offers_earlier_releases_a_typed_one_and_warns_when_it_is_live() {
    let mut app = fixture::app_on_quiet_home();
    key(&mut app, Down);
    ch(&mut app, 'D');
    let Some(Modal::Versions(v)) = app.ui.modals.last() else {
        panic!("no picker")
    };
    let offered: Vec<(&str, &str)> = v
        .choices
        .iter()
        .map(|c| (c.version.as_str(), c.note.as_str()))
        .collect();
    assert_eq!(
        offered,
        [
            ("2.4.0", "the descriptor's"),
            ("2.3.0", "deployed before, live on every target"),
            ("2.2.0", "deployed before"),
        ]
    );
    // An earlier release, already live everywhere: the confirmation says what a deploy of it
    // does (each target recorded on it stays unchanged), as `manent deploy` does.
    key(&mut app, Down);
    key(&mut app, Enter);
    let c = confirm_of(&app);
    assert!(
        c.title.starts_with("Deploy shop 2.3.0 to prod"),
        "{}",
        c.title
    );
    assert!(
        c.lines.iter().any(|l| l.starts_with(
            "2.3.0 is already live on every target: each target recorded on it stays unchanged"
        )),
        "{:?}",
        c.lines
    );
    key(&mut app, Esc);
    // Another version, typed; Ctrl-U clears what was typed.
    ch(&mut app, 'D');
    ch(&mut app, 'G');
    key(&mut app, Enter);
    assert_eq!(app.mode(), Mode::Prompt);
    for c in "9.9".chars() {
        ch(&mut app, c);
    }
    ctrl(&mut app, 'u');
    for c in "2.5.0-rc1".chars() {
        ch(&mut app, c);
    }
    key(&mut app, Enter);
    assert!(
        confirm_of(&app)
            .title
            .starts_with("Deploy shop 2.5.0-rc1 to prod")
    );
    key(&mut app, Right);
    later(&mut app);
    assert!(matches!(
        key(&mut app, Enter),
        Some(Command::Deploy { version: Some(v), .. }) if v == "2.5.0-rc1"
    ));
}

#[test]
fn a_production_rollback_wants_the_environment_name_typed() {
    let mut app = app_on_home();
    key(&mut app, Down);
    ch(&mut app, 'R');
    assert_eq!(app.mode(), Mode::TypedConfirm);
    assert_eq!(
        confirm_of(&app).title,
        "Roll back shop in prod: 36 targets: 2.3.0 → 2.2.0?",
        "where each target goes, before confirming"
    );
    later(&mut app);
    ch(&mut app, 'x');
    ctrl(&mut app, 'u');
    for c in "pro".chars() {
        ch(&mut app, c);
    }
    assert_eq!(
        key(&mut app, Enter),
        None,
        "a partial name does not confirm"
    );
    assert!(
        app.ui
            .flash
            .as_ref()
            .unwrap()
            .text
            .contains("type `prod` exactly")
    );
    ch(&mut app, 'd');
    let cmd = key(&mut app, Enter);
    assert_eq!(
        cmd,
        Some(Command::Rollback {
            application: "shop".into(),
            environment: "prod".into(),
            reason: None,
            force: false,
        })
    );
    // Staging has a failed deploy waiting for a decision: abort is what undoes it.
    key(&mut app, Up);
    assert_eq!(ch(&mut app, 'R'), None);
    assert!(
        app.ui
            .flash
            .as_ref()
            .unwrap()
            .text
            .contains("waits for a decision: A on it aborts"),
        "{:?}",
        app.ui.flash
    );
    // Once that is settled, staging (not production) gets an ordinary confirmation.
    let mut s = (*app.snap).clone();
    s.deployments[1].state = DeploymentState::Failed;
    app.update(Action::Snapshot(std::sync::Arc::new(s)));
    ch(&mut app, 'R');
    assert_eq!(app.mode(), Mode::Confirm);
    key(&mut app, Esc);
    // Nothing to go back to: said at once, no dialog.
    key(&mut app, Down);
    key(&mut app, Down);
    assert_eq!(ch(&mut app, 'R'), None);
    assert!(app.ui.modals.is_empty());
    assert!(
        app.ui
            .flash
            .as_ref()
            .unwrap()
            .text
            .starts_with("nothing to roll back on api/eu1"),
        "{:?}",
        app.ui.flash
    );
}

#[test]
fn cancel_pause_and_resume_act_on_the_selected_deployment() {
    let mut app = app_on_deployment(RUNNING);
    ch(&mut app, 'c');
    let c = confirm_of(&app);
    assert_eq!(c.title, "Cancel deploy of shop to prod (36 targets)?");
    assert_eq!(
        (c.no.as_str(), c.yes.as_str()),
        ("Keep running", "Cancel deploy"),
        "buttons say what they do"
    );
    key(&mut app, Tab);
    later(&mut app);
    assert_eq!(
        key(&mut app, Enter),
        op(RUNNING, OperatorCommand::Cancel, None)
    );
    assert_eq!(ch(&mut app, ' '), op(RUNNING, OperatorCommand::Pause, None));
    // In its last batch there is nothing to pause before: refused with the reason.
    let mut last = app_on_deployment(RUNNING);
    fixture::set_phase(
        &mut last,
        Phase::Batch { batch: 6, of: 6 },
        DeploymentState::Running,
        &[Topic::Skip, Topic::Abort],
    );
    assert_eq!(ch(&mut last, ' '), None);
    assert!(
        last.ui
            .flash
            .as_ref()
            .unwrap()
            .text
            .contains("last batch (6/6)"),
        "{:?}",
        last.ui.flash
    );
    // A paused deployment resumes at once.
    let mut paused = app_on_deployment(RUNNING);
    fixture::set_phase(
        &mut paused,
        Phase::Paused { before: 3, of: 6 },
        DeploymentState::Paused,
        &[Topic::Resume, Topic::Skip, Topic::Abort],
    );
    assert_eq!(
        ch(&mut paused, ' '),
        op(RUNNING, OperatorCommand::Resume, None)
    );
    // A cancelled one asks first, like a deploy.
    let mut cancelled = app_on_deployment(RUNNING);
    let mut s = (*cancelled.snap).clone();
    s.deployments[0].status = manent::workflow::store::WorkflowStatus::Cancelled;
    s.deployments[0].state = DeploymentState::Cancelled;
    s.deployments[0].accepts.clear();
    cancelled.update(Action::Snapshot(std::sync::Arc::new(s)));
    assert_eq!(ch(&mut cancelled, ' '), None);
    let c = confirm_of(&cancelled);
    assert_eq!(c.title, "Resume deploy of shop 2.4.0 to prod (cancelled)?");
    key(&mut cancelled, Right);
    later(&mut cancelled);
    assert_eq!(
        key(&mut cancelled, Enter),
        op(RUNNING, OperatorCommand::Resume, None)
    );
    // A finished one says so.
    let mut done = app_on_deployment(ROLLED_BACK);
    assert_eq!(ch(&mut done, ' '), None);
    assert!(
        done.ui
            .flash
            .as_ref()
            .unwrap()
            .text
            .contains("has finished")
    );
    assert_eq!(ch(&mut done, 'c'), None);
    assert!(
        done.ui.modals.is_empty(),
        "no confirmation for a deployment that is not running"
    );
    assert!(
        done.ui
            .flash
            .as_ref()
            .unwrap()
            .text
            .contains("not running (rolled back)")
    );
}

#[test]
fn a_failed_target_is_read_in_full_and_retried_skipped_or_aborted() {
    let mut app = app_on_deployment(FAILED);
    app.ui.lists.get_mut(Focus::Targets).row = 6;
    // Enter: the target in full, every attempt with its idempotency key.
    key(&mut app, Enter);
    assert_eq!(
        app.ui.modals,
        vec![Modal::Target(
            manent::console::app::dialog::target::Target {
                deployment: FAILED.into(),
                name: "web-07".into(),
                scroll: Default::default(),
            }
        )]
    );
    assert_eq!(app.mode(), Mode::List);
    // r from there: retry this target, confirmed.
    ch(&mut app, 'r');
    let c = confirm_of(&app);
    assert_eq!(c.title, "Retry web-07 in shop/staging?");
    key(&mut app, Right);
    later(&mut app);
    for c in "flaky lb".chars() {
        ch(&mut app, c);
    }
    assert_eq!(
        key(&mut app, Enter),
        op(
            FAILED,
            OperatorCommand::Retry {
                targets: vec!["web-07".into()]
            },
            Some("flaky lb")
        )
    );
    // s: leave it out.
    ch(&mut app, 's');
    let c = confirm_of(&app);
    assert_eq!(c.title, "Skip web-07 in deploy of shop 2.4.0 to staging?");
    assert!(c.lines[0].starts_with("it keeps 2.3.0"), "{:?}", c.lines);
    key(&mut app, Right);
    later(&mut app);
    assert_eq!(
        key(&mut app, Enter),
        op(
            FAILED,
            OperatorCommand::Skip {
                target: "web-07".into()
            },
            None
        )
    );
    // A: abort and roll back what it changed (staging: no typing).
    ch(&mut app, 'A');
    let c = confirm_of(&app);
    assert_eq!(
        c.title,
        "Abort the deploy of shop 2.4.0 to staging and roll back the 6 targets it changed?"
    );
    assert_eq!(c.yes, "Abort");
    key(&mut app, Right);
    later(&mut app);
    assert_eq!(
        key(&mut app, Enter),
        op(FAILED, OperatorCommand::Abort, None)
    );
    // Where they do not apply, the keys say why.
    let mut running = app_on_deployment(RUNNING);
    ch(&mut running, 'r');
    assert!(running.ui.modals.is_empty());
    assert!(
        running
            .ui
            .flash
            .as_ref()
            .unwrap()
            .text
            .contains("no failed target waiting for a decision"),
        "{:?}",
        running.ui.flash
    );
    // Aborting production wants its name typed.
    ch(&mut running, 'A');
    assert_eq!(running.mode(), Mode::TypedConfirm);
}

#[test]
fn messages_last_until_the_next_key_and_tab_stops_only_where_panels_show() {
    let mut app = app_on_home();
    app.ui.readonly = true;
    ch(&mut app, 'D');
    assert!(app.ui.flash.is_some());
    key(&mut app, Down);
    assert!(app.ui.flash.is_none(), "the next key clears an old message");
    // Home: Tab and Shift-Tab between the inbox and the two lists.
    key(&mut app, Tab);
    assert_eq!(app.ui.focus, Focus::Deployments);
    key(&mut app, BackTab);
    assert_eq!(app.ui.focus, Focus::Apps);
    key(&mut app, BackTab);
    assert_eq!(app.ui.focus, Focus::Inbox);
    key(&mut app, BackTab);
    assert_eq!(app.ui.focus, Focus::Deployments);
    // Nothing waiting: no inbox stop.
    let mut quiet = app_on_home();
    let mut s = (*quiet.snap).clone();
    s.deployments.retain(|d| !d.state.is_live());
    quiet.update(Action::Snapshot(std::sync::Arc::new(s)));
    key(&mut quiet, BackTab);
    assert_eq!(quiet.ui.focus, Focus::Deployments);
    // 80 columns show targets and logs only: no invisible stops.
    let mut d = app_on_deployment(RUNNING);
    key(&mut d, Tab);
    assert_eq!(d.ui.focus, Focus::Logs);
    key(&mut d, Tab);
    assert_eq!(d.ui.focus, Focus::Targets);
    d.update(Action::Resize(120, 40));
    key(&mut d, BackTab);
    assert_eq!(
        d.ui.focus,
        Focus::Logs,
        "no hooks, not a canary: nothing else"
    );
    // A canary: its panel is a stop at any width (the side panel, or the narrow strip).
    let mut c = app_on_deployment(CANARY);
    c.update(Action::Resize(120, 40));
    assert_eq!(
        c.ui.focus,
        Focus::Canary,
        "it opens on the canary taking traffic"
    );
    key(&mut c, BackTab);
    assert_eq!(c.ui.focus, Focus::Logs);
    key(&mut c, Tab);
    c.update(Action::Resize(80, 24));
    assert_eq!(
        c.ui.focus,
        Focus::Canary,
        "narrowed: the strip is the canary panel"
    );
    // Hooks are a stop at any width: the narrow screen's hooks line takes ↑↓ and Enter.
    let mut h = fixture::app_on_hooked();
    key(&mut h, BackTab);
    assert_eq!(h.ui.focus, Focus::Hooks);
    h.update(Action::Resize(120, 40));
    assert_eq!(h.ui.focus, Focus::Hooks);
}

#[test]
fn the_hooks_panel_selects_a_hook_and_enter_opens_it() {
    let mut app = fixture::app_on_hooked();
    key(&mut app, Tab);
    key(&mut app, Tab);
    assert_eq!(app.ui.focus, Focus::Hooks);
    for _ in 0..3 {
        key(&mut app, Down);
    }
    assert_eq!(app.row(Focus::Hooks), 3);
    key(&mut app, Enter);
    match app.ui.modals.last() {
        Some(Modal::Hook(h)) => {
            assert_eq!((h.event, h.name.as_str()), (Event::PostDeploy, "smoke"));
        }
        other => panic!("no hook detail: {other:?}"),
    }
    assert_eq!(app.mode(), Mode::List);
    key(&mut app, Esc);
    assert!(app.ui.modals.is_empty());
    // The selection stops at the last hook.
    for _ in 0..10 {
        key(&mut app, Down);
    }
    assert_eq!(app.row(Focus::Hooks), 4);
}

#[test]
fn t_asks_then_runs_the_test_hooks_and_readonly_refuses() {
    let mut app = fixture::app_on_hooked();
    assert_eq!(ch(&mut app, 't'), None);
    let c = confirm_of(&app);
    assert!(
        c.title.contains("test hooks of shop in staging"),
        "{}",
        c.title
    );
    assert!(c.title.contains("(smoke)"), "{}", c.title);
    assert!(c.lines.iter().any(|l| l.contains("no target is touched")));
    later(&mut app);
    assert_eq!(key(&mut app, Enter), None, "Cancel is the default");
    assert!(app.ui.modals.is_empty());
    ch(&mut app, 't');
    later(&mut app);
    key(&mut app, Right);
    assert_eq!(
        key(&mut app, Enter),
        Some(Command::Test {
            application: "shop".into(),
            environment: "staging".into(),
            reason: None,
            candidate: None,
        })
    );
    // The run it starts opens, though it finished before the console saw it running.
    let mut snap = (*app.snap).clone();
    let mut run = fixture::hooked();
    run.id = "dep-20261129-100900-ffff".into();
    run.kind = manent::deploy::state::Kind::Test;
    run.status = manent::workflow::store::WorkflowStatus::Success;
    snap.deployments.insert(0, run.clone());
    app.update(Action::Snapshot(std::sync::Arc::new(snap.clone())));
    assert_eq!(app.ui.screen, Screen::Deployment(run.id.clone()));
    // A start the engine refused opens nothing when, much later, another run appears.
    let mut refused = fixture::app_on_hooked();
    ch(&mut refused, 't');
    later(&mut refused);
    key(&mut refused, Right);
    assert!(key(&mut refused, Enter).is_some());
    refused.update(Action::Tick(refused.ui.now + 60_000));
    refused.update(Action::Snapshot(std::sync::Arc::new(snap)));
    assert_eq!(
        refused.ui.screen,
        Screen::Deployment(fixture::HOOKED.into())
    );
    let mut ro = fixture::app_on_hooked();
    ro.ui.readonly = true;
    assert_eq!(ch(&mut ro, 't'), None);
    assert!(ro.ui.modals.is_empty());
    assert!(ro.ui.flash.as_ref().unwrap().text.contains("read-only"));
}

#[test]
fn a_locked_environment_shows_its_lock_and_deploys_only_through_a_typed_break_glass() {
    let mut app = fixture::app_on_locked_quiet_home();
    key(&mut app, Down);
    ch(&mut app, 'D');
    key(&mut app, Enter);
    assert_eq!(app.mode(), Mode::TypedConfirm);
    let c = confirm_of(&app);
    assert!(
        c.lines.iter().any(
            |l| l.starts_with("LOCKED by bob on bastion-2") && l.contains("investigating 502s")
        ),
        "{:?}",
        c.lines
    );
    later(&mut app);
    for c in "prod".chars() {
        ch(&mut app, c);
    }
    // The name alone is not enough: a break-glass needs its reason.
    assert_eq!(key(&mut app, Enter), None);
    assert!(
        app.ui.flash.as_ref().unwrap().text.contains("type why"),
        "{:?}",
        app.ui.flash
    );
    for c in "hotfix".chars() {
        ch(&mut app, c);
    }
    // Backspace takes the reason first, then the name.
    key(&mut app, crossterm::event::KeyCode::Backspace);
    ch(&mut app, 'x');
    assert_eq!(
        key(&mut app, Enter),
        Some(Command::Deploy {
            application: "shop".into(),
            environment: "prod".into(),
            version: Some("2.4.0".into()),
            dry_run: false,
            reason: Some("hotfix".into()),
            force: true,
        })
    );
    // Staging is not locked: its dialog is the ordinary one.
    key(&mut app, Up);
    ch(&mut app, 'D');
    key(&mut app, Enter);
    assert_eq!(app.mode(), Mode::Confirm);
    assert!(!confirm_of(&app).needs_reason);
}

#[test]
fn the_inbox_lists_what_waits_most_urgent_first_and_enter_jumps_to_it() {
    let mut app = fixture::app_on_locked_home();
    let items = app.inbox();
    let kinds: Vec<&str> = items.iter().map(|i| i.waiting.as_str()).collect();
    assert_eq!(
        kinds,
        ["decide", "canary"],
        "the lock expires in 50m: not yet"
    );
    assert!(items[0].what.contains("failed on web-07"), "{:?}", items[0]);
    assert_eq!(items[0].verbs, format!("manent retry|skip|abort {FAILED}"));
    // A lock within 30 minutes of its expiry joins the end of the list.
    app.ui.now += 25 * 60 * 1000;
    let items = app.inbox();
    assert_eq!(items.len(), 3);
    assert!(
        items[2]
            .what
            .starts_with("lock expires in 25m: bob on bastion-2 (investigating 502s)"),
        "{:?}",
        items[2]
    );
    key(&mut app, BackTab);
    assert_eq!(app.ui.focus, Focus::Inbox);
    key(&mut app, Down);
    key(&mut app, Enter);
    assert_eq!(app.ui.screen, Screen::Deployment(CANARY.into()));
    key(&mut app, Esc);
    key(&mut app, BackTab);
    key(&mut app, BackTab);
    assert_eq!(app.ui.focus, Focus::Inbox);
    key(&mut app, Down);
    key(&mut app, Down);
    key(&mut app, Enter);
    assert_eq!(app.ui.focus, Focus::Apps, "a lock: its environment's row");
    assert_eq!(app.row(Focus::Apps), 1);
}

#[test]
fn dry_run_needs_no_confirmation() {
    let mut app = app_on_home();
    let cmd = ch(&mut app, 'd');
    assert!(
        matches!(cmd, Some(Command::Deploy { dry_run: true, ref environment, .. }) if environment == "staging")
    );
    key(&mut app, Enter);
    assert_eq!(
        ch(&mut app, 'd').map(|c| matches!(c, Command::Deploy { dry_run: true, .. })),
        Some(true)
    );
    assert!(app.ui.modals.is_empty(), "the plan closes");
}

#[test]
fn readonly_changes_nothing_and_says_why() {
    let mut app = app_on_home();
    app.ui.readonly = true;
    for c in ['D', 'd', 'R'] {
        assert_eq!(ch(&mut app, c), None);
        assert!(app.ui.modals.is_empty(), "{c} opened a dialog");
        assert!(
            app.ui
                .flash
                .as_ref()
                .unwrap()
                .text
                .starts_with("read-only console:"),
            "{c}"
        );
    }
    let mut d = app_on_deployment("dep-20261129-100000-aaaa");
    d.ui.readonly = true;
    for c in [' ', 'c', 'A', 's'] {
        assert_eq!(ch(&mut d, c), None);
        assert!(d.ui.modals.is_empty());
        assert!(
            d.ui.flash.as_ref().unwrap().text.contains("--readonly"),
            "{c}"
        );
    }
}

#[test]
fn quitting_asks_when_this_console_runs_deployments() {
    let mut app = app_on_home();
    ch(&mut app, 'q');
    assert!(matches!(app.ui.modals.last(), Some(Modal::Quit { .. })));
    assert_eq!(key(&mut app, Enter), None);
    assert!(!app.ui.should_quit, "a held Enter does not quit");
    later(&mut app);
    key(&mut app, Enter);
    assert!(!app.ui.should_quit, "Cancel is the default");
    ch(&mut app, 'q');
    key(&mut app, Right);
    later(&mut app);
    key(&mut app, Enter);
    assert!(app.ui.should_quit);
    // Attached to another engine, nothing of ours runs: quit at once.
    let mut attached = app_on_home();
    let mut s = (*attached.snap).clone();
    s.mode = Some(EngineMode::Attached {
        holder: "pid 7 on bastion".into(),
    });
    attached.update(Action::Snapshot(std::sync::Arc::new(s)));
    ch(&mut attached, 'q');
    assert!(attached.ui.should_quit);
}

#[test]
fn notices_flash_once_and_time_redraws_only_what_shows_it() {
    let mut app = app_on_home();
    let mut s = snapshot();
    s.notices.push(manent::engine::handle::Notice {
        id: 1,
        at: NOW,
        level: Level::Error,
        text: "boom".into(),
        about: None,
    });
    app.update(Action::Snapshot(std::sync::Arc::new(s.clone())));
    assert_eq!(app.ui.flash.as_ref().unwrap().text, "boom");
    app.ui.flash = None;
    app.update(Action::Snapshot(std::sync::Arc::new(s)));
    assert!(app.ui.flash.is_none(), "an old notice does not flash again");
    app.ui.dirty = false;
    app.update(Action::Tick(NOW + 100));
    assert!(!app.ui.dirty, "same second: nothing to redraw");
    app.update(Action::Tick(NOW + 1000));
    assert!(app.ui.dirty, "a running deployment's clock moved");
    app.update(Action::LogsDropped(5));
    assert_eq!(app.logs.dropped, 5);
}

#[test]
fn a_tick_never_drops_a_change_still_waiting_to_be_drawn() {
    // Found by the tmux test: a snapshot arriving between frames was lost by the next tick.
    let mut app = fixture::app_on_home();
    app.ui.dirty = false;
    let mut s = (*app.snap).clone();
    s.deployments.clear();
    app.update(Action::Snapshot(std::sync::Arc::new(s)));
    app.update(Action::Tick(app.ui.now + 100));
    assert!(app.ui.dirty);
}
