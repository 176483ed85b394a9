//! The console without a terminal: `App::update` for every key and every confirmation path, and
//! whole-screen snapshots with ratatui's `TestBackend` at 80×24 and 120×40, for each screen and
//! each theme, with time injected.

mod canary_keys;
mod edges;
mod fixture;
mod keys;
mod snapshots;
mod traffic;

use manent::config::Event;
use manent::console::action::Action;
use manent::console::app::{App, CONFIRM_GUARD_MS, Choice, Focus, Modal, Screen};
use manent::console::keymap::{self, Mode};
use manent::deploy::command::OperatorCommand;
use manent::deploy::state::{DeploymentState, Phase, Topic};
use manent::engine::handle::{Command, EngineMode};
use manent::plugin::Level;

const CANARY: &str = "dep-20261129-100500-dddd";

const RUNNING: &str = "dep-20261129-100000-aaaa";
const FAILED: &str = "dep-20261129-090000-bbbb";
const ROLLED_BACK: &str = "dep-20261129-080000-cccc";

fn op(id: &str, command: OperatorCommand, reason: Option<&str>) -> Option<Command> {
    Some(Command::Operator {
        id: id.into(),
        command,
        reason: reason.map(Into::into),
    })
}

fn confirm_of(app: &App) -> &manent::console::app::Confirm {
    match app.ui.modals.last() {
        Some(Modal::Confirm(c)) => c,
        other => panic!("no confirmation: {other:?}"),
    }
}

fn ctrl(app: &mut App, c: char) -> Option<Command> {
    let ev = crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Char(c),
        crossterm::event::KeyModifiers::CONTROL,
    );
    let action = keymap::action(app.mode(), ev)?;
    app.update(action)
}

fn key(app: &mut App, code: crossterm::event::KeyCode) -> Option<Command> {
    let ev = crossterm::event::KeyEvent::new(code, crossterm::event::KeyModifiers::NONE);
    let action = keymap::action(app.mode(), ev)?;
    app.update(action)
}

fn ch(app: &mut App, c: char) -> Option<Command> {
    key(app, crossterm::event::KeyCode::Char(c))
}

/// The screen `app` draws at `w`×`h`, as text.
fn text_of(app: &App, w: u16, h: u16) -> String {
    let theme = manent::console::theme::Theme::load("default").unwrap();
    let mut app = app.clone();
    app.update(Action::Resize(w, h));
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).unwrap();
    t.draw(|f| manent::console::view::render(f, &app, &theme))
        .unwrap();
    let b = t.backend().buffer();
    (0..h)
        .map(|y| {
            (0..w)
                .map(|x| b[(x, y)].symbol().to_owned())
                .collect::<String>()
                .trim_end()
                .to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn later(app: &mut App) {
    let t = app.ui.now + CONFIRM_GUARD_MS + 1;
    app.update(Action::Tick(t));
}
