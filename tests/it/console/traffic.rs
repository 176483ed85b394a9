//! Every key that changes production traffic asks, naming the split before → after: the
//! slider, Space resuming a held canary, promote (which never lowers traffic), back; and a
//! canary whose router failed shows the router's error in full and offers its four ways out.

use super::*;
use crossterm::event::KeyCode::{Enter, Esc, Left, Right};
use fixture::{HELD, ROUTER_FAILED, app_on_deployment, app_on_held, app_on_router_failed};

#[test]
fn space_on_a_held_canary_asks_naming_the_split_before_and_after() {
    let mut app = app_on_held();
    assert_eq!(ch(&mut app, ' '), None, "nothing is sent before a decision");
    let c = confirm_of(&app);
    assert!(
        c.title.starts_with(
            "Resume the steps of the canary of shop 2.4.0 in prod: stable 30% / candidate 70% →"
        ),
        "{}",
        c.title
    );
    // Held during the pause at step 3: resumed, it waits at that pause again, at 70%.
    assert!(
        c.title.contains("until step 3/9 (a pause until promoted)"),
        "{}",
        c.title
    );
    assert_eq!(
        (c.no.as_str(), c.yes.as_str()),
        ("Keep holding", "Resume steps")
    );
    later(&mut app);
    assert_eq!(key(&mut app, Enter), None, "the default changes nothing");
    ch(&mut app, ' ');
    later(&mut app);
    key(&mut app, Right);
    assert_eq!(
        key(&mut app, Enter),
        op(HELD, OperatorCommand::Resume, None)
    );
}

#[test]
fn promote_at_a_hand_set_70_never_lowers_traffic_and_says_which_steps_it_passes() {
    let mut app = app_on_held();
    ch(&mut app, 'p');
    let c = confirm_of(&app);
    // Steps 4 (25%) and 6 (50%) are below 70%: passed over; the next gate is step 7.
    assert!(
        c.title
            .contains("stable 30% / candidate 70% → stable 30% / candidate 70% until step 7/9"),
        "{}",
        c.title
    );
    assert!(
        c.lines.iter().any(|l| l.contains(
            "step 4 (weight 25%), step 6 (weight 50%) passed over: the candidate takes 70%, \
             set by hand, and promoting never lowers its traffic"
        )),
        "{:?}",
        c.lines
    );
    // Without a hand-set weight the next step's weight is named.
    let mut app = app_on_deployment(CANARY);
    ch(&mut app, 'p');
    let c = confirm_of(&app);
    assert!(
        c.title
            .ends_with("stable 90% / candidate 10% → stable 75% / candidate 25% (step 4/9)?"),
        "{}",
        c.title
    );
}

#[test]
fn back_and_revert_name_the_split_before_and_after() {
    let mut app = app_on_held();
    ch(&mut app, 'b');
    assert!(
        confirm_of(&app)
            .title
            .contains("stable 30% / candidate 70% → stable 90% / candidate 10%"),
        "{}",
        confirm_of(&app).title
    );
    key(&mut app, Esc);
    ch(&mut app, 'x');
    assert!(
        confirm_of(&app)
            .title
            .contains("stable 30% / candidate 70% → stable 100% / candidate 0%"),
        "{}",
        confirm_of(&app).title
    );
}

#[test]
fn a_canary_whose_router_failed_shows_the_error_and_offers_retry_revert_weight_abandon() {
    let mut app = app_on_router_failed();
    let d = app.deployment().unwrap().clone();
    let headline = manent::console::app::headline(&d).unwrap();
    assert!(
        headline.contains("nginx: [emerg] host not found in upstream")
            && headline.ends_with("then retry"),
        "in full: {headline}"
    );
    // r: the router's call again, not the targets.
    ch(&mut app, 'r');
    let c = confirm_of(&app);
    assert!(
        c.title
            .starts_with("Retry the router's failed call (set weight 25%)"),
        "{}",
        c.title
    );
    assert!(c.lines[0].contains("web-17.internal:8080"), "{:?}", c.lines);
    // Where the failed call left it is said as now, not as where the retry goes.
    assert!(!c.title.contains(" to stable"), "{}", c.title);
    assert!(c.lines[1].starts_with("now: stable "), "{:?}", c.lines);
    later(&mut app);
    key(&mut app, Right);
    assert_eq!(
        key(&mut app, Enter),
        op(
            ROUTER_FAILED,
            OperatorCommand::Retry {
                targets: Vec::new()
            },
            None
        )
    );
    // A: not what it takes; it says which keys are.
    ch(&mut app, 'A');
    assert!(
        app.ui
            .flash
            .as_ref()
            .unwrap()
            .text
            .contains("X (abandon it, with a reason)"),
        "{:?}",
        app.ui.flash
    );
    // The slider: a weight through the router instead.
    app.ui.focus = Focus::Canary;
    key(&mut app, Left);
    key(&mut app, Left);
    assert_eq!(app.pending(), Some(0));
    key(&mut app, Enter);
    assert!(
        confirm_of(&app)
            .lines
            .iter()
            .any(|l| l.contains("router failed its last call"))
    );
    key(&mut app, Esc);
    // X: abandon, in production the environment's name, then a reason — required.
    ch(&mut app, 'X');
    assert_eq!(app.mode(), Mode::TypedConfirm);
    assert!(confirm_of(&app).needs_reason);
    later(&mut app);
    for c in "prod".chars() {
        ch(&mut app, c);
    }
    assert_eq!(key(&mut app, Enter), None, "no reason: nothing sent");
    assert!(app.ui.flash.as_ref().unwrap().text.contains("type why"));
    for c in "router broken, fixing by hand".chars() {
        ch(&mut app, c);
    }
    assert_eq!(
        key(&mut app, Enter),
        op(
            ROUTER_FAILED,
            OperatorCommand::Abandon,
            Some("router broken, fixing by hand")
        )
    );
    // Help lists its keys.
    ch(&mut app, '?');
    let Some(Modal::Help(_)) = app.ui.modals.last() else {
        panic!("no help")
    };
    let sections = manent::console::app::dialog::help::sections(&app);
    assert!(
        sections
            .iter()
            .any(|(t, keys)| t.starts_with("Canary whose router failed")
                && keys.iter().any(|(k, _)| *k == "X")),
        "{sections:?}"
    );
}

#[test]
fn the_slider_moves_the_way_its_arrow_points() {
    let mut app = app_on_deployment(CANARY);
    assert_eq!(app.ui.focus, Focus::Canary);
    let marker = |app: &App| {
        let theme = manent::console::theme::Theme::load("default").unwrap();
        let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(80, 24)).unwrap();
        t.draw(|f| manent::console::view::render(f, app, &theme))
            .unwrap();
        let b = t.backend().buffer();
        (0..b.area.height)
            .find_map(|y| (0..b.area.width).find(|x| b[(*x, y)].symbol() == "┃"))
            .expect("the pending weight's marker")
    };
    key(&mut app, Right);
    let at_15 = marker(&app);
    key(&mut app, Right);
    let at_20 = marker(&app);
    assert!(
        at_20 > at_15,
        "→ (more candidate) moves it right: {at_15} → {at_20}"
    );
    key(&mut app, Left);
    key(&mut app, Left);
    key(&mut app, Left);
    assert!(marker(&app) < at_15, "← moves it left");
    key(&mut app, Esc);
    assert_eq!(app.pending(), None);
}

/// Why a canary was reverted by its analysis, or is held by manent, stays on top of its screen
/// like a failure, in full as far as four lines go (at 80×24 and 60×16); an operator's own
/// hold is no banner.
#[test]
fn why_a_canary_was_reverted_or_is_held_stays_on_top_in_full() {
    use manent::deploy::canary_status::Decision;
    use manent::workflow::store::WorkflowStatus;
    let why = "background analysis (router traffic over 20s: 5xx 5.77% on the candidate, \
               over its limit of 1%; stable 0%): failed 2 of 12 runs, over the limit of 2";
    let with = |app: &mut App, f: &dyn Fn(&mut manent::deploy::view::DeploymentView)| {
        let mut s = (*app.snap).clone();
        f(s.deployments.iter_mut().find(|d| d.id == CANARY).unwrap());
        app.update(Action::Snapshot(std::sync::Arc::new(s)));
    };
    let mut app = app_on_deployment(CANARY);
    with(&mut app, &|d| {
        d.state = DeploymentState::Reverted;
        d.status = WorkflowStatus::Success;
        d.phase = None;
        let c = d.canary.as_mut().unwrap();
        c.status.decisions.push(Decision {
            action: "revert".into(),
            by: "analysis".into(),
            why: why.into(),
            at: fixture::NOW,
        });
    });
    for (w, h) in [(80, 24), (60, 16)] {
        let screen = text_of(&app, w, h);
        let top: String = screen
            .lines()
            .skip(1)
            .take(4)
            .map(|l| l.trim_matches(|c| c == '"' || c == ' '))
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            top.starts_with("✗ reverted by analysis: background"),
            "{screen}"
        );
        assert!(
            top.contains("over the limit of 2"),
            "in full at {w}x{h}:\n{screen}"
        );
    }
    // Held by manent (router drift under on_drift: hold): a warning banner, with the way on.
    let mut app = app_on_deployment(CANARY);
    let drift = "the router serves candidate 30%, not the 10% manent set (someone edited \
                 nginx.conf by hand?): the steps wait";
    with(&mut app, &|d| {
        let c = d.canary.as_mut().unwrap();
        c.status.held = true;
        c.status.decisions.push(Decision {
            action: "pause".into(),
            by: "manent".into(),
            why: drift.into(),
            at: fixture::NOW,
        });
    });
    let screen = text_of(&app, 80, 24);
    assert!(
        screen.contains("⚠ held by manent: the router serves candidate 30%"),
        "{screen}"
    );
    assert!(screen.contains("Space resumes, x reverts"), "{screen}");
    // An operator's hold is theirs to remember: no banner.
    let mut app = app_on_deployment(CANARY);
    with(&mut app, &|d| {
        let c = d.canary.as_mut().unwrap();
        c.status.held = true;
        c.status.decisions.push(Decision {
            action: "pause".into(),
            by: "alice".into(),
            why: "lunch".into(),
            at: fixture::NOW,
        });
    });
    assert!(!text_of(&app, 80, 24).contains("held by"));
    // `z` on the canary: every decision, with who took it and why.
    app.ui.focus = Focus::Canary;
    app.update(Action::Zoom);
    let screen = text_of(&app, 80, 24);
    assert!(screen.contains("decisions"), "{screen}");
    assert!(screen.contains("pause by alice: lunch"), "{screen}");
}
