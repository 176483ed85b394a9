//! Whole screens with ratatui's `TestBackend`: every screen at 80×24 and 120×40, every theme
//! with its styles, every dialog at both sizes in every theme.

use super::fixture::{app_on_deployment, app_on_home};
use super::*;
use crossterm::event::KeyCode::{BackTab, Down, Enter, Esc, Right, Tab};
use manent::console::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn draw(app: &App, theme: &str, w: u16, h: u16) -> Terminal<TestBackend> {
    let theme = Theme::load(theme).unwrap();
    let mut app = app.clone();
    app.update(Action::Resize(w, h));
    let app = &app;
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| manent::console::view::render(f, app, &theme))
        .unwrap();
    t
}

/// `app` at 120×40 in every theme, with its styles: snapshots `{theme}_{name}_120x40`.
fn every_theme_at_120x40(app: &App, name: &str) {
    for theme in ["default", "light", "high-contrast", "mono"] {
        let t = draw(app, theme, 120, 40);
        insta::assert_debug_snapshot!(format!("{theme}_{name}_120x40"), t.backend().buffer());
    }
}

/// On a database several engines share, the header says which engine runs the deployment,
/// in the warning colour once that engine has gone silent.
#[test]
fn on_a_shared_database_the_header_names_the_engine_running_the_deployment() {
    let mut app = app_on_deployment(RUNNING);
    let text = |app: &App| {
        let t = draw(app, "default", 80, 24);
        let b = t.backend().buffer();
        (0..b.area.width)
            .map(|x| b[(x, 0)].symbol().to_owned())
            .collect::<String>()
    };
    assert!(!text(&app).contains(" on "), "{}", text(&app));
    let mut snap = (*app.snap).clone();
    snap.owners.insert(
        RUNNING.to_owned(),
        manent::engine::handle::Owner {
            engine: "bastion-2".into(),
            detail: "pid 4242 on bastion-2".into(),
            silent: false,
        },
    );
    app.snap = std::sync::Arc::new(snap);
    let header = text(&app);
    assert!(header.contains("on bastion-2"), "{header}");
    let t = draw(&app, "default", 80, 24);
    let b = t.backend().buffer();
    let title: String = (0..b.area.width)
        .map(|x| b[(x, 1)].symbol().to_owned())
        .collect();
    assert!(
        title.contains("engine bastion-2, pid 4242 on bastion-2"),
        "{title}"
    );
    // Home says which engine this console runs and that others share the database.
    let mut home = super::fixture::app_on_home();
    let mut snap = (*home.snap).clone();
    snap.shared = Some(("bastion-1".into(), 3));
    home.snap = std::sync::Arc::new(snap);
    let header = text(&home);
    assert!(
        header.contains("engine bastion-1 here · 2 more on the shared database"),
        "{header}"
    );
}

fn screens() -> Vec<(&'static str, App)> {
    let home = app_on_home();
    let running = app_on_deployment("dep-20261129-100000-aaaa");
    let failed = app_on_deployment("dep-20261129-090000-bbbb");
    let rolled_back = app_on_deployment(ROLLED_BACK);
    let mut detail = app_on_deployment(FAILED);
    detail.ui.lists.get_mut(Focus::Targets).row = 6;
    key(&mut detail, Enter);
    let mut versions = fixture::app_on_quiet_home();
    key(&mut versions, Down);
    ch(&mut versions, 'D');
    let mut cancel = app_on_deployment(RUNNING);
    ch(&mut cancel, 'c');
    let mut help = app_on_deployment("dep-20261129-100000-aaaa");
    ch(&mut help, '?');
    let mut confirm = fixture::app_on_quiet_home();
    key(&mut confirm, Down);
    ch(&mut confirm, 'D');
    key(&mut confirm, Enter);
    key(&mut confirm, Right);
    later(&mut confirm);
    for c in "weekly release".chars() {
        ch(&mut confirm, c);
    }
    let mut typed = app_on_home();
    key(&mut typed, Down);
    ch(&mut typed, 'R');
    later(&mut typed);
    ch(&mut typed, 'p');
    let mut plan = app_on_home();
    key(&mut plan, Enter);
    let mut search = app_on_deployment("dep-20261129-100000-aaaa");
    ch(&mut search, '/');
    for c in "target:web-03 health".chars() {
        ch(&mut search, c);
    }
    let mut filtered = app_on_deployment("dep-20261129-100000-aaaa");
    filtered.logs.filter.parse_into("level:warn");
    let mut readonly = app_on_home();
    readonly.ui.readonly = true;
    ch(&mut readonly, 'D');
    let mut quit = app_on_home();
    ch(&mut quit, 'q');
    let canary = app_on_deployment(CANARY);
    let mut pending = app_on_deployment(CANARY);
    key(&mut pending, Right);
    key(&mut pending, Right);
    let mut weight = app_on_deployment(CANARY);
    for _ in 0..9 {
        key(&mut weight, Right);
    }
    key(&mut weight, Enter);
    let hooked = fixture::app_on_hooked();
    let mut hooks = fixture::app_on_hooked();
    key(&mut hooks, BackTab);
    key(&mut hooks, Down);
    let mut hook = fixture::app_on_hooked();
    key(&mut hook, BackTab);
    key(&mut hook, Enter);
    let mut test = fixture::app_on_hooked();
    ch(&mut test, 't');
    let mut test_run = fixture::app_on_test_run();
    key(&mut test_run, Down);
    let mut locked = fixture::app_on_locked_home();
    key(&mut locked, Down);
    let mut glass = fixture::app_on_locked_quiet_home();
    key(&mut glass, Down);
    ch(&mut glass, 'D');
    key(&mut glass, Enter);
    later(&mut glass);
    for c in "prodhotfix".chars() {
        ch(&mut glass, c);
    }
    vec![
        ("home_locked", locked),
        ("confirm_break_glass", glass),
        ("test_run", test_run),
        ("deployment_hooks", hooked),
        ("hooks_focused", hooks),
        ("hook_detail", hook),
        ("confirm_test", test),
        ("canary_paused", canary),
        ("canary_pending", pending),
        ("confirm_canary_weight", weight),
        ("every_state", fixture::app_with_every_state()),
        ("home", home),
        ("deployment_running", running),
        ("deployment_failed", failed),
        ("deployment_rolled_back", rolled_back),
        ("target_detail", detail),
        ("versions", versions),
        ("confirm_cancel", cancel),
        ("help", help),
        ("confirm_deploy", confirm),
        ("confirm_typed_rollback", typed),
        ("plan", plan),
        ("search", search),
        ("logs_filtered", filtered),
        ("readonly", readonly),
        ("quit", quit),
    ]
    .into_iter()
    .chain(edges())
    .collect()
}

/// The screens issue 19 added: a canary whose router failed, one held by hand, filters, the
/// zoom, messages, the command line, a console whose engine went away.
fn edges() -> Vec<(&'static str, App)> {
    let router_failed = fixture::app_on_router_failed();
    let held = fixture::app_on_held();
    let mut filtered_home = app_on_home();
    key(&mut filtered_home, Tab);
    ch(&mut filtered_home, '/');
    for c in "staging".chars() {
        ch(&mut filtered_home, c);
    }
    key(&mut filtered_home, Enter);
    let mut filtered_targets = app_on_deployment(FAILED);
    ch(&mut filtered_targets, '/');
    for c in "web-0".chars() {
        ch(&mut filtered_targets, c);
    }
    key(&mut filtered_targets, Enter);
    let mut zoomed = app_on_deployment(RUNNING);
    key(&mut zoomed, Tab);
    ch(&mut zoomed, 'z');
    let mut error = app_on_deployment(RUNNING);
    error.say(
        Level::Error,
        "dep-20261129-100000-aaaa: the deploy of shop 2.4.0 to prod was refused: version \
         \"$(id)\" is refused: it must start with a letter or a digit (versions are \
         letters, digits and . _ + ~ -, up to 128); nothing was recorded, nothing was started",
    );

    let mut gone = app_on_home();
    let mut s = (*gone.snap).clone();
    s.mode = Some(EngineMode::InProcess);
    s.engine_note = Some(
        "the engine this console was attached to (pid 4242) ended at 10:01:00: this \
         console runs the engine now"
            .into(),
    );
    gone.update(Action::Snapshot(std::sync::Arc::new(s)));
    vec![
        ("canary_router_failed", router_failed),
        ("canary_held", held),
        ("home_filtered", filtered_home),
        ("targets_filtered", filtered_targets),
        ("logs_zoomed", zoomed),
        ("error_message", error),
        ("engine_taken_over", gone),
    ]
}

/// Every dialog file's dialog, open on the screen it belongs to.
fn dialogs() -> Vec<(&'static str, App)> {
    let mut help = app_on_deployment(CANARY);
    ch(&mut help, '?');
    let mut messages = app_on_home();
    messages.say(Level::Info, "dry-run of shop 2.4.0 on staging requested");
    messages.say(
        Level::Error,
        "dep-20261129-110000-0001 has not been claimed by an engine after 5s: the engine of pid 4242 holds the database but has not taken it",
    );
    ch(&mut messages, 'M');
    let mut engine_log = app_on_home();
    ch(&mut engine_log, 'E');
    let mut confirm = app_on_deployment(FAILED);
    ch(&mut confirm, 'c');
    let mut traffic = fixture::app_on_held();
    ch(&mut traffic, 'p');
    let mut abandon = fixture::app_on_router_failed();
    ch(&mut abandon, 'X');
    let mut quit = app_on_home();
    ch(&mut quit, 'q');
    let mut plan = app_on_home();
    key(&mut plan, Enter);
    let mut filter = app_on_deployment(RUNNING);
    key(&mut filter, Tab);
    ch(&mut filter, '/');
    for c in "level:warn timeout".chars() {
        ch(&mut filter, c);
    }
    let mut versions = fixture::app_on_quiet_home();
    key(&mut versions, Down);
    ch(&mut versions, 'D');
    let mut target = app_on_deployment(FAILED);
    target.ui.lists.get_mut(Focus::Targets).row = 6;
    key(&mut target, Enter);
    let mut hook = fixture::app_on_hooked();
    key(&mut hook, BackTab);
    key(&mut hook, Enter);
    let mut command = app_on_deployment(CANARY);
    ch(&mut command, ':');
    for c in "re".chars() {
        ch(&mut command, c);
    }
    key(&mut command, Tab);
    let mut tests = app_on_deployment(CANARY);
    let mut s = (*tests.snap).clone();
    s.apps[1].tests = vec!["smoke".into()];
    tests.update(Action::Snapshot(std::sync::Arc::new(s)));
    ch(&mut tests, 't');
    vec![
        ("dialog_help", help),
        ("dialog_messages", messages),
        ("dialog_engine_log", engine_log),
        ("dialog_confirm", confirm),
        ("dialog_traffic", traffic),
        ("dialog_abandon", abandon),
        ("dialog_quit", quit),
        ("dialog_plan", plan),
        ("dialog_filter", filter),
        ("dialog_versions", versions),
        ("dialog_target", target),
        ("dialog_hook", hook),
        ("dialog_command", command),
        ("dialog_tests", tests),
    ]
}

#[test]
fn every_dialog_at_80x24_and_120x40_in_every_theme() {
    for (name, app) in dialogs() {
        assert!(!app.ui.modals.is_empty(), "{name} opens a dialog");
        for theme in ["default", "light", "high-contrast", "mono"] {
            for (w, h) in [(80, 24), (120, 40)] {
                let t = draw(&app, theme, w, h);
                insta::assert_debug_snapshot!(
                    format!("{theme}_{name}_{w}x{h}"),
                    t.backend().buffer()
                );
            }
        }
    }
}

#[test]
fn under_vt100_the_screen_has_16_colours_and_ascii_borders() {
    let caps = manent::console::term::Caps::from_env("vt100", "", "C");
    let app = app_on_deployment(CANARY);
    let mut t = draw(&app, "default", 80, 24);
    let theme = Theme::load("default").unwrap();
    t.draw(|f| {
        manent::console::view::render(f, &app, &theme);
        caps.apply(f.buffer_mut());
    })
    .unwrap();
    let b = t.backend().buffer();
    for cell in b.content() {
        assert!(cell.symbol().is_ascii(), "{:?}", cell.symbol());
        for c in [cell.fg, cell.bg] {
            assert!(
                !matches!(
                    c,
                    ratatui::style::Color::Rgb(..) | ratatui::style::Color::Indexed(_)
                ),
                "{c:?}"
            );
        }
    }
    insta::assert_snapshot!("vt100_canary_80x24", t.backend().to_string());
}

/// `--glyphs ascii` keeps what the symbols mean: a split before `->` after, `<=` a bound, a
/// sparkline in levels `_.-=#` — in every theme.
#[test]
fn ascii_glyphs_keep_arrows_bounds_and_sparklines_in_every_theme() {
    let caps = manent::console::term::Caps::from_env("vt100", "", "C");
    let mut app = canary_with_traffic();
    app.update(Action::Resize(80, 24));
    key(&mut app, Right);
    key(&mut app, Enter);
    for theme in ["default", "light", "high-contrast", "mono"] {
        let mut t = draw(&app, theme, 80, 24);
        let th = Theme::load(theme).unwrap();
        t.draw(|f| {
            manent::console::view::render(f, &app, &th);
            caps.apply(f.buffer_mut());
        })
        .unwrap();
        let text = t.backend().to_string();
        insta::assert_snapshot!(format!("{theme}_ascii_canary_weight_80x24"), text);
        assert!(text.contains("10% -> stable"), "{text}");
        assert!(text.is_ascii(), "{text}");
    }
    // The canary panel zoomed: its sparklines and bounds.
    key(&mut app, Esc);
    key(&mut app, Esc);
    app.ui.focus = Focus::Canary;
    app.update(Action::Zoom);
    let mut t = draw(&app, "default", 80, 24);
    let th = Theme::load("default").unwrap();
    t.draw(|f| {
        manent::console::view::render(f, &app, &th);
        caps.apply(f.buffer_mut());
    })
    .unwrap();
    let text = t.backend().to_string();
    insta::assert_snapshot!("ascii_canary_zoomed_80x24", text);
    assert!(text.contains("<=1%"), "{text}");
    assert!(text.contains("_"), "{text}");
}

#[test]
fn every_screen_at_80x24_and_120x40() {
    for (name, app) in screens() {
        for (w, h) in [(80, 24), (120, 40)] {
            let t = draw(&app, "default", w, h);
            insta::assert_snapshot!(format!("{name}_{w}x{h}"), t.backend().to_string());
        }
    }
}

#[test]
fn every_screen_in_every_theme_with_its_styles() {
    for theme in ["default", "light", "high-contrast", "mono"] {
        for (name, app) in screens() {
            let t = draw(&app, theme, 80, 24);
            insta::assert_debug_snapshot!(format!("{theme}_{name}"), t.backend().buffer());
        }
    }
}

#[test]
fn the_canary_panel_in_every_theme_at_120x40() {
    let mut app = app_on_deployment(CANARY);
    key(&mut app, Right);
    every_theme_at_120x40(&app, "canary_pending");
}

/// The canary of the fixture with ten minutes of what the router saw: the candidate's 5xx rate
/// bursting to 6% in its last readings against stable's 0.1%, its p99 a little above stable's,
/// judged by a router analysis (5xx ≤ 1%, p99 ≤ 120ms).
fn canary_with_traffic() -> App {
    use manent::config::{Analysis, CanaryStep, Check, RouterCheck};
    use manent::deploy::canary_status::{SlotFigures, TrafficPoint};
    let mut app = app_on_deployment(CANARY);
    let mut snap = (*app.snap).clone();
    let d = snap
        .deployments
        .iter_mut()
        .find(|d| d.id == CANARY)
        .unwrap();
    let c = d.canary.as_mut().unwrap();
    c.plan.steps[4] = CanaryStep::Analysis(Analysis {
        check: Check::Router(RouterCheck {
            max_error_rate: Some(10_000),
            max_p99: Some(std::time::Duration::from_millis(120)),
            min_requests: 100,
            window: std::time::Duration::from_secs(60),
        }),
        count: 3,
        interval: std::time::Duration::from_secs(10),
        failure_limit: 1,
        inconclusive_limit: 1,
    });
    c.traffic = (0..40u64)
        .map(|i| {
            let burst = i >= 32;
            TrafficPoint {
                at: super::fixture::NOW - 5_000 * (40 - i as i64),
                window_ms: 5_000,
                candidate: SlotFigures {
                    requests: 100 + i % 7,
                    errors: if burst { 6 } else { u64::from(i % 9 == 0) },
                    p99_ms: Some(if burst { 140 } else { 90 + (i % 5) as u32 }),
                },
                stable: SlotFigures {
                    requests: 900 + i % 11,
                    errors: u64::from(i % 10 == 0),
                    p99_ms: Some(80 + (i % 3) as u32),
                },
            }
        })
        .collect();
    // A reading with no request to the candidate is a gap, not a zero.
    c.traffic[20].candidate = SlotFigures::default();
    app.snap = std::sync::Arc::new(snap);
    app
}

#[test]
fn the_canary_traffic_charts_at_both_sizes_and_in_every_theme() {
    let app = canary_with_traffic();
    // 120×40: the side panel draws both charts; 80×24: the strip says the last numbers, and
    // the canary panel zoomed (Tab to it, z) draws the charts.
    let wide = draw(&app, "default", 120, 40).backend().to_string();
    insta::assert_snapshot!("canary_traffic_120x40", wide);
    let narrow = draw(&app, "default", 80, 24).backend().to_string();
    insta::assert_snapshot!("canary_traffic_80x24", narrow);
    assert!(
        narrow.contains("cand 5xx 5.77% p99 140ms · stable 5xx 0% p99 80ms"),
        "each figure says its slot: {narrow}"
    );
    let mut zoomed = app.clone();
    zoomed.update(Action::Resize(80, 24));
    zoomed.ui.focus = manent::console::app::Focus::Canary;
    zoomed.update(Action::Zoom);
    let z = draw(&zoomed, "default", 80, 24).backend().to_string();
    insta::assert_snapshot!("canary_traffic_zoomed_80x24", z);
    for needle in [
        "5.77% cand ≤1% over",
        "0% stable",
        "140ms cand ≤120ms over",
        "80ms stable",
    ] {
        assert!(z.contains(needle), "{needle:?} in\n{z}");
    }
    every_theme_at_120x40(&app, "canary_traffic");
}

#[test]
fn the_background_analysis_says_its_count_and_when_it_runs_next() {
    use manent::deploy::canary_status::{BackgroundStatus, Seen, Verdict};
    let mut app = canary_with_traffic();
    let mut snap = (*app.snap).clone();
    let d = snap
        .deployments
        .iter_mut()
        .find(|d| d.id == CANARY)
        .unwrap();
    d.canary.as_mut().unwrap().background = Some(BackgroundStatus {
        runs: 12,
        failures: 1,
        inconclusive: 0,
        failure_limit: 2,
        interval_ms: 10_000,
        last: Seen {
            verdict: Verdict::Fail,
            value: "5xx 5.77% > 1%".into(),
            excerpt: String::new(),
            duration_ms: 3,
            traffic: None,
        },
        at: app.ui.now - 3_000,
    });
    app.snap = std::sync::Arc::new(snap);
    // Unzoomed at 80×24, the strip's one line keeps the verdict: as many of its words as fit
    // after the numbers, never cut off.
    app.update(Action::Resize(80, 24));
    let text = draw(&app, "default", 80, 24).backend().to_string();
    insta::assert_snapshot!("canary_background_strip_80x24", text);
    let strip = text
        .lines()
        .find(|l| l.contains("set 10%"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        strip.contains("set 10% · router 10% · 5xx cand 5.77% · stable 0% · analysis failed"),
        "{text}"
    );
    // The canary panel zoomed at 80×24: the word wraps into the rows left.
    app.ui.focus = manent::console::app::Focus::Canary;
    app.update(Action::Zoom);
    let text = draw(&app, "default", 80, 24).backend().to_string();
    insta::assert_snapshot!("canary_background_zoomed_80x24", text);
    let flat: String = text
        .lines()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(['"', '│', '┃'], "");
    let flat = flat.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("background analysis failed, 1 of 12 failed (limit 2), next in 7s"),
        "{text}"
    );
}

#[test]
fn the_hooks_panel_in_every_theme_at_120x40() {
    let mut app = fixture::app_on_hooked();
    key(&mut app, BackTab);
    key(&mut app, Down);
    key(&mut app, Down);
    key(&mut app, Down);
    every_theme_at_120x40(&app, "hooks_focused");
}

#[test]
fn a_selection_below_the_fold_scrolls_the_targets_to_it() {
    let mut app = app_on_deployment("dep-20261129-100000-aaaa");
    app.ui.lists.get_mut(Focus::Targets).row = 30;
    let text = draw(&app, "default", 80, 24).backend().to_string();
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("› web-31"))
        .unwrap_or_else(|| panic!("web-31 is selected and shown:\n{text}"));
    assert!(
        lines[at + 1].starts_with("\"┗"),
        "it is the last row shown:\n{text}"
    );
    assert!(lines[at - 1].contains("web-30"), "{text}");
    assert!(
        lines[..at].iter().all(|l| !l.contains("web-01 ")),
        "the top scrolled away:\n{text}"
    );
    app.ui.lists.get_mut(Focus::Targets).row = 35;
    let text = draw(&app, "default", 80, 24).backend().to_string();
    assert!(text.contains("› web-36"), "the last target:\n{text}");
}

#[test]
fn a_rolled_back_deploy_is_not_drawn_in_the_pending_style() {
    for theme in ["default", "light", "high-contrast", "mono"] {
        let t = Theme::load(theme).unwrap();
        let state = manent::deploy::state::DeploymentState::RolledBack;
        let kind = manent::deploy::state::Kind::Deploy;
        assert_ne!(
            t.deployment(state, kind),
            t.get("status.pending"),
            "{theme}"
        );
        assert_ne!(t.deployment(state, kind), t.get("status.ok"), "{theme}");
    }
}

#[test]
fn the_footer_keeps_help_and_quit_at_80_columns() {
    for id in [RUNNING, FAILED] {
        let text = draw(&app_on_deployment(id), "default", 80, 24)
            .backend()
            .to_string();
        let footer = text.lines().last().unwrap();
        assert!(
            footer.contains("? help") && footer.contains("q quit"),
            "{footer}"
        );
    }
    let text = draw(&app_on_deployment(FAILED), "default", 80, 24)
        .backend()
        .to_string();
    assert!(
        text.lines()
            .nth(1)
            .unwrap()
            .contains("✗ web-07 failed: fleet on web-07"),
        "the failure reads first:\n{text}"
    );
}

#[test]
fn mono_keeps_the_selection_and_production_visible_without_colour() {
    let app = app_on_deployment("dep-20261129-100000-aaaa");
    let t = draw(&app, "mono", 80, 24);
    let buf = t.backend().buffer();
    let text = t.backend().to_string();
    assert!(
        text.contains("› web-01"),
        "the selected row is marked with text:\n{text}"
    );
    for cell in buf.content() {
        assert!(
            cell.fg == ratatui::style::Color::Reset && cell.bg == ratatui::style::Color::Reset,
            "mono uses no colour"
        );
    }
    let prod = text.lines().next().unwrap().find("PROD").unwrap();
    let cell = &buf.content()[prod];
    assert!(
        cell.modifier.contains(ratatui::style::Modifier::REVERSED),
        "production stands out: {cell:?}"
    );
}

/// A confirmation too tall for the screen gives up body lines, never where to type or how to
/// answer: at the smallest size the console draws (60×16), every confirmation keeps its
/// reason and its way out, and a break-glass under a long lock reason says what it cut.
#[test]
fn a_confirmation_too_tall_keeps_its_reason_and_esc_on_a_small_screen() {
    let mut glass = fixture::app_on_quiet_home_locked_because(
        "investigating 502s from the payment gateway after the 09:40 certificate rotation; \
         do not deploy until the gateway team has confirmed the new chain is served everywhere",
    );
    key(&mut glass, Down);
    ch(&mut glass, 'D');
    key(&mut glass, Enter);
    later(&mut glass);
    let all = screens()
        .into_iter()
        .chain(dialogs())
        .chain([("long_break_glass", glass)]);
    let mut seen = 0;
    for (name, app) in all {
        let t = draw(&app, "default", 60, 16);
        let text = t.backend().to_string();
        if !text.contains(" Confirm ") {
            continue;
        }
        seen += 1;
        assert!(text.contains("reason ("), "{name}:\n{text}");
        assert!(
            text.contains("Esc cancels") || text.contains("Esc changes nothing"),
            "{name}:\n{text}"
        );
        if name == "long_break_glass" {
            assert!(text.contains("type prod: _"), "{name}:\n{text}");
            assert!(text.contains("more rows (a larger"), "{name}:\n{text}");
            assert!(text.contains("LOCKED by bob"), "{name}:\n{text}");
            assert!(
                text.contains("Deploy shop 2.4.0 to prod"),
                "{name}:\n{text}"
            );
        }
    }
    assert!(seen >= 8, "{seen} confirmations drawn");
}
