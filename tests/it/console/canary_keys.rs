//! A canary's keys from the keyboard: the slider's pending weight and Enter, the typed name
//! above `confirm_above`, promote, revert and back asked first, and refused where the canary
//! does not take them.

use super::*;
use crossterm::event::KeyCode::{Enter, Esc, Right, Tab};
use fixture::app_on_deployment;

#[test]
fn canary_and_hook_keys_explain_why_they_do_nothing_here() {
    let mut app = app_on_deployment("dep-20261129-100000-aaaa");
    app.update(Action::Resize(120, 40));
    for c in ['p', 'P', 'x', 'b', 't'] {
        assert_eq!(ch(&mut app, c), None);
        assert_eq!(app.ui.flash.as_ref().unwrap().level, Level::Warn, "{c}");
        assert!(app.ui.modals.is_empty(), "{c}");
    }
    assert!(
        app.ui
            .flash
            .as_ref()
            .unwrap()
            .text
            .contains("no test hooks")
    );
    // Not a canary: ←/→ move between panels.
    ch(&mut app, 'l');
    assert_eq!(app.ui.focus, Focus::Logs);
    ch(&mut app, 'h');
    assert_eq!(app.ui.focus, Focus::Targets);
    assert_eq!(app.ui.pending_weight, None);
}

#[test]
fn on_a_canary_the_slider_moves_a_pending_weight_that_enter_applies() {
    let mut app = app_on_deployment(CANARY);
    // A canary taking traffic opens on its panel: there ←/→ move the pending weight by the
    // slider's step.
    assert_eq!(app.ui.focus, Focus::Canary);
    key(&mut app, Right);
    key(&mut app, Right);
    assert_eq!(app.pending(), Some(20));
    assert_eq!(
        app.ui.focus,
        Focus::Canary,
        "the arrows moved the weight, not the focus"
    );
    key(&mut app, crossterm::event::KeyCode::Left);
    assert_eq!(app.pending(), Some(15));
    // Esc drops it (and stays on the deployment).
    key(&mut app, Esc);
    assert_eq!(app.pending(), None);
    assert_eq!(app.ui.screen, Screen::Deployment(CANARY.into()));
    // Back to the set weight: nothing pending.
    key(&mut app, Right);
    key(&mut app, crossterm::event::KeyCode::Left);
    assert_eq!(app.pending(), None);
    // Enter applies, after a confirmation naming the split before → after, the targets and
    // prod.
    key(&mut app, Right);
    key(&mut app, Right);
    key(&mut app, Right);
    assert_eq!(key(&mut app, Enter), None);
    let c = confirm_of(&app);
    assert!(
        c.title
            .contains("stable 90% / candidate 10% → stable 75% / candidate 25% (36 targets)"),
        "{}",
        c.title
    );
    assert!(c.typed.is_none(), "25% is under confirm_above");
    later(&mut app);
    key(&mut app, Right);
    assert_eq!(
        key(&mut app, Enter),
        op(CANARY, OperatorCommand::Weight(25), None)
    );
    assert_eq!(app.pending(), None, "sent: nothing pending any more");
    // From any panel of a live canary the arrows move its weight (the lists move with ↑↓);
    // Tab moves the focus and keeps what is pending, Enter applies it from there, Esc drops it.
    key(&mut app, Right);
    assert_eq!(app.pending(), Some(15));
    key(&mut app, Tab);
    assert_eq!(app.ui.focus, Focus::Targets);
    assert_eq!(app.pending(), Some(15), "kept: nothing was sent");
    key(&mut app, Right);
    assert_eq!(
        app.ui.focus,
        Focus::Targets,
        "→ moves the weight, not the focus"
    );
    assert_eq!(app.pending(), Some(20));
    assert_eq!(key(&mut app, Enter), None, "Enter asks first");
    let c = confirm_of(&app);
    assert!(c.title.contains("candidate 20%"), "{}", c.title);
    key(&mut app, Esc);
    assert!(app.ui.modals.is_empty());
    key(&mut app, Esc);
    assert_eq!(app.pending(), None, "Esc dropped it: nothing was sent");
}

#[test]
fn above_confirm_above_in_production_the_environment_is_typed() {
    let mut app = app_on_deployment(CANARY);
    for _ in 0..9 {
        key(&mut app, Right);
    }
    assert_eq!(app.pending(), Some(55));
    key(&mut app, Enter);
    assert_eq!(app.mode(), Mode::TypedConfirm);
    later(&mut app);
    for c in "pro".chars() {
        ch(&mut app, c);
    }
    assert_eq!(key(&mut app, Enter), None, "a wrong name sends nothing");
    ch(&mut app, 'd');
    assert_eq!(
        key(&mut app, Enter),
        op(CANARY, OperatorCommand::Weight(55), None)
    );
}

#[test]
fn promote_revert_and_back_ask_first_and_send_their_command() {
    for (k, command, typed) in [
        ('p', OperatorCommand::Promote { full: false }, false),
        ('P', OperatorCommand::Promote { full: true }, true),
        ('x', OperatorCommand::Revert, false),
        ('b', OperatorCommand::Back, false),
    ] {
        let mut app = app_on_deployment(CANARY);
        assert_eq!(ch(&mut app, k), None);
        assert!(
            matches!(app.ui.modals.last(), Some(Modal::Confirm(_))),
            "{k}"
        );
        later(&mut app);
        if typed {
            for c in "prod".chars() {
                ch(&mut app, c);
            }
        } else {
            assert_eq!(key(&mut app, Enter), None, "{k}: Cancel is the default");
            assert!(app.ui.modals.is_empty());
            ch(&mut app, k);
            later(&mut app);
            key(&mut app, Right);
        }
        assert_eq!(
            key(&mut app, Enter),
            op(CANARY, command.clone(), None),
            "{k}"
        );
    }
    // The revert dialog says what stays.
    let mut app = app_on_deployment(CANARY);
    ch(&mut app, 'x');
    let c = confirm_of(&app);
    assert_eq!((c.no.as_str(), c.yes.as_str()), ("Keep canary", "Revert"));
    assert!(
        c.lines
            .iter()
            .any(|l| l.contains("stable release stays live on 36 targets"))
    );
}

#[test]
fn canary_keys_are_refused_where_the_canary_does_not_take_them() {
    let mut app = app_on_deployment(CANARY);
    fixture::set_phase(&mut app, Phase::Promoting, DeploymentState::Running, &[]);
    key(&mut app, Right);
    assert_eq!(app.pending(), None);
    assert_eq!(app.ui.flash.as_ref().unwrap().level, Level::Warn);
    for k in ['p', 'x', 'b'] {
        assert_eq!(ch(&mut app, k), None);
        assert!(app.ui.modals.is_empty(), "{k}");
    }
    // Read-only: everything shows, nothing moves.
    let mut app = app_on_deployment(CANARY);
    app.ui.readonly = true;
    key(&mut app, Right);
    assert_eq!(app.pending(), None);
    assert!(app.ui.flash.as_ref().unwrap().text.contains("read-only"));
    assert_eq!(ch(&mut app, 'p'), None);
    assert!(app.ui.modals.is_empty());
}

#[test]
fn a_weight_sent_shows_as_being_set_until_the_engine_sets_it_fails_or_says_nothing() {
    use std::sync::Arc;
    let sent = |app: &mut App| {
        key(app, Right);
        key(app, Enter);
        later(app);
        key(app, Right);
        assert_eq!(
            key(app, Enter),
            op(CANARY, OperatorCommand::Weight(15), None)
        );
    };
    let mut app = app_on_deployment(CANARY);
    sent(&mut app);
    assert_eq!(app.applying(), Some(15));
    let screen = text_of(&app, 80, 24);
    assert!(
        screen.contains("set 10% · router 10% · setting 15%…"),
        "{screen}"
    );
    // Another snapshot that does not show it yet: still being set.
    app.update(Action::Snapshot(app.snap.clone()));
    assert_eq!(app.applying(), Some(15));
    // manent's own record of it is not the router's word: still being set.
    let mut s = (*app.snap).clone();
    let d = s.deployments.iter_mut().find(|d| d.id == CANARY).unwrap();
    d.canary.as_mut().unwrap().status.weight = 15;
    app.update(Action::Snapshot(Arc::new(s.clone())));
    assert_eq!(app.applying(), Some(15));
    // The engine set it and read the router back serving it: no longer "setting".
    let d = s.deployments.iter_mut().find(|d| d.id == CANARY).unwrap();
    d.canary.as_mut().unwrap().status.actual = Some(15);
    app.update(Action::Snapshot(Arc::new(s)));
    assert_eq!(app.applying(), None);
    assert!(!text_of(&app, 80, 24).contains("setting"));
    // What "said once the router serves it" promised is said.
    assert!(
        app.ui.flash.as_ref().is_some_and(|f| f
            .text
            .ends_with("the router serves candidate 15% / stable 85% (read back from it)")),
        "{:?}",
        app.ui.flash
    );
    // A router error the engine has not answered the command with yet (no decision noted
    // since it was sent) is not its answer.
    let mut app = app_on_deployment(CANARY);
    sent(&mut app);
    let mut s = (*app.snap).clone();
    let d = s.deployments.iter_mut().find(|d| d.id == CANARY).unwrap();
    let c = d.canary.as_mut().unwrap();
    c.status.router_error = Some("nginx -t refused".into());
    app.update(Action::Snapshot(Arc::new(s.clone())));
    assert_eq!(app.applying(), Some(15));
    // The engine took it (a decision noted) and the router failed at it: the failure shows.
    let d = s.deployments.iter_mut().find(|d| d.id == CANARY).unwrap();
    let c = d.canary.as_mut().unwrap();
    c.status
        .decisions
        .push(manent::deploy::canary_status::Decision {
            action: "weight".into(),
            by: "oncall".into(),
            why: String::new(),
            at: app.ui.now,
        });
    app.update(Action::Snapshot(Arc::new(s)));
    assert_eq!(app.applying(), None);
    // A weight sent, then an error notice (about `about`, if any).
    let noticed = |text: &str, about: Option<&str>| {
        let mut app = app_on_deployment(CANARY);
        sent(&mut app);
        let mut s = (*app.snap).clone();
        s.notices.push(manent::engine::handle::Notice {
            id: s.notices.last().map_or(1, |n| n.id + 1),
            at: app.ui.now,
            level: Level::Error,
            text: text.into(),
            about: about.map(str::to_owned),
        });
        app.update(Action::Snapshot(Arc::new(s)));
        app
    };
    // Refused by the engine (an error notice), or never sent (a full queue): said, not awaited.
    let app = noticed("weight refused", None);
    assert_eq!(app.applying(), None);
    // An error about another deployment is not this weight's answer.
    let app = noticed("dep-other could not be started", Some("dep-other"));
    assert_eq!(app.applying(), Some(15));
    let mut app = app_on_deployment(CANARY);
    sent(&mut app);
    app.not_sent();
    assert_eq!(app.applying(), None);
    assert!(app.ui.flash.as_ref().unwrap().text.contains("not sent"));
    // No answer at all (an engine gone): not shown as being set for ever.
    let mut app = app_on_deployment(CANARY);
    sent(&mut app);
    let t = app.ui.now + manent::console::app::APPLYING_MS + 1;
    app.update(Action::Tick(t));
    assert_eq!(app.applying(), None);
}

#[test]
fn a_router_that_cannot_be_read_is_not_shown_serving_what_it_said_last() {
    use std::sync::Arc;
    let mut app = app_on_deployment(CANARY);
    assert!(text_of(&app, 80, 24).contains("set 10% · router 10%"));
    let mut s = (*app.snap).clone();
    let d = s.deployments.iter_mut().find(|d| d.id == CANARY).unwrap();
    d.canary.as_mut().unwrap().actual = Some(manent::deploy::flows::canary::Actual {
        error: Some("the plugin did not answer within 10s".into()),
        at: app.ui.now,
        by_engine: true,
        ..Default::default()
    });
    app.update(Action::Snapshot(Arc::new(s)));
    let screen = text_of(&app, 80, 24);
    assert!(screen.contains("set 10% · router unread"), "{screen}");
    assert!(!screen.contains("router 10%"), "{screen}");
}
