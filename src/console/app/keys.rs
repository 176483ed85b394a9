//! Every key of the console in one table, [`BINDINGS`]: what it does, in which modes, where the
//! help lists it and what the footer says of it when. The keymap (`console::keymap`), the footer
//! (`console::view`) and the help (`dialog::help`) are read from it, so none can say a key the
//! others do not know. A row may bind several keys (`↑↓ k j`) and several actions (`Tab`,
//! `Shift-Tab`); one key may appear in several rows (in several sections of the help) as long as
//! it means the same action in the same mode — a test checks that.
//!
//! The table's order is the footer's order; the help groups its rows by section, each in table
//! order.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::{App, Focus, Screen};
use crate::console::action::{Action, Mode};
use crate::deploy::state::{DeploymentState, Topic};
use crate::deploy::view::DeploymentView;

/// A key as the table writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A key without Control (Shift is part of the character: `D`, `Shift-Tab`).
    Code(KeyCode),
    /// Control and a letter.
    Ctrl(char),
    /// Any character typed (a prompt, a reason).
    Typed,
}

impl Key {
    /// How the help and the footer write it.
    pub fn label(self) -> String {
        match self {
            Key::Code(code) => match code {
                KeyCode::Up => "↑".into(),
                KeyCode::Down => "↓".into(),
                KeyCode::Left => "←".into(),
                KeyCode::Right => "→".into(),
                KeyCode::Enter => "Enter".into(),
                KeyCode::Esc => "Esc".into(),
                KeyCode::Tab => "Tab".into(),
                KeyCode::BackTab => "Shift-Tab".into(),
                KeyCode::Backspace => "Backspace".into(),
                KeyCode::PageUp => "PgUp".into(),
                KeyCode::PageDown => "PgDn".into(),
                KeyCode::Home => "Home".into(),
                KeyCode::End => "End".into(),
                KeyCode::Char(' ') => "Space".into(),
                KeyCode::Char(c) => c.to_string(),
                other => format!("{other:?}"),
            },
            Key::Ctrl(c) => format!("Ctrl-{}", c.to_ascii_uppercase()),
            Key::Typed => "type".into(),
        }
    }

    fn arrow(self) -> bool {
        matches!(
            self,
            Key::Code(KeyCode::Up | KeyCode::Down | KeyCode::Left | KeyCode::Right)
        )
    }
}

/// Where the help lists a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// On every screen.
    Everywhere,
    /// Home.
    Home,
    /// Home, on the deployment selected in Deployments or Waiting on you.
    Selected,
    /// The deployment screen.
    Deployment,
    /// One panel of the deployment screen.
    Panel(Focus),
    /// A canary deployment's screen.
    Canary,
    /// A canary whose router failed.
    RouterFailed,
    /// A confirmation.
    Confirm,
    /// A prompt (a filter, a version typed) or the command line.
    Prompt,
    /// A list to pick from, or a target's or a hook's page.
    List,
    /// An application's plan.
    Plan,
    /// This help, the messages, the engine's log.
    Page,
}

impl Section {
    /// Its title in the help (`focused`: the panel that has the keyboard says so).
    pub fn title(self, focused: bool) -> String {
        let name = match self {
            Section::Everywhere => "Everywhere",
            Section::Home => "Home",
            Section::Selected => "On a selected deployment (Deployments, Waiting on you)",
            Section::Deployment => "This deployment",
            Section::Panel(f) => f.name(),
            Section::Canary => "Canary",
            Section::RouterFailed => "Canary whose router failed (it waits for you)",
            Section::Confirm => "In a confirmation",
            Section::Prompt => "In a prompt (a filter, a version) and on the command line",
            Section::List => "In a list or a page (versions, a target, a hook)",
            Section::Plan => "In a plan",
            Section::Page => "In this help, the messages and the engine's log",
        };
        if focused {
            format!("{name} (focused)")
        } else {
            name.to_owned()
        }
    }
}

/// What the footer says of a row: always, or when the console is in a state (and then what).
#[derive(Clone, Copy)]
pub enum Footer {
    /// Never shown in the footer.
    No,
    /// Always shown, last to give way.
    Always(&'static str),
    /// Shown with the label this returns, when it returns one.
    When(fn(&App) -> Option<&'static str>),
}

impl std::fmt::Debug for Footer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Footer::No => f.write_str("No"),
            Footer::Always(l) => write!(f, "Always({l:?})"),
            Footer::When(_) => f.write_str("When(..)"),
        }
    }
}

/// One row of the table.
#[derive(Debug, Clone)]
pub struct Binding {
    /// The keys and what each does.
    pub keys: &'static [(Key, Action)],
    /// The modes in which they do it.
    pub modes: &'static [Mode],
    /// Where the help lists the row.
    pub section: Section,
    /// What the help says of it.
    pub help: &'static str,
    /// What the footer says of it.
    pub footer: Footer,
}

impl Binding {
    /// The help's way of writing its keys: arrows together (`↑↓`), the rest apart.
    pub fn label(&self) -> String {
        let mut out = String::new();
        let mut last_arrow = false;
        for (k, _) in self.keys {
            let arrow = k.arrow();
            let joined = arrow && last_arrow;
            if !out.is_empty() && !joined {
                out.push(' ');
            }
            out.push_str(&k.label());
            last_arrow = arrow;
        }
        out
    }

    /// The footer's way: its arrows alone (`←→`), else its first key.
    pub fn short(&self) -> String {
        let arrows: String = self
            .keys
            .iter()
            .filter(|(k, _)| k.arrow())
            .map(|(k, _)| k.label())
            .collect();
        if arrows.is_empty() {
            self.keys
                .first()
                .map(|(k, _)| k.label())
                .unwrap_or_default()
        } else {
            arrows
        }
    }
}

const fn ch(c: char) -> Key {
    Key::Code(KeyCode::Char(c))
}
const UP: Key = Key::Code(KeyCode::Up);
const DOWN: Key = Key::Code(KeyCode::Down);
const LEFT: Key = Key::Code(KeyCode::Left);
const RIGHT: Key = Key::Code(KeyCode::Right);
const ENTER: Key = Key::Code(KeyCode::Enter);
const ESC: Key = Key::Code(KeyCode::Esc);
const TAB: Key = Key::Code(KeyCode::Tab);
const BACKTAB: Key = Key::Code(KeyCode::BackTab);
const PGUP: Key = Key::Code(KeyCode::PageUp);
const PGDN: Key = Key::Code(KeyCode::PageDown);
const HOME: Key = Key::Code(KeyCode::Home);
const END: Key = Key::Code(KeyCode::End);
const BACKSPACE: Key = Key::Code(KeyCode::Backspace);

const NORMAL: &[Mode] = &[Mode::Normal];
const TYPING: &[Mode] = &[
    Mode::Confirm,
    Mode::TypedConfirm,
    Mode::Prompt,
    Mode::Command,
];
const DIALOGS: &[Mode] = &[
    Mode::Help,
    Mode::Confirm,
    Mode::TypedConfirm,
    Mode::Prompt,
    Mode::Command,
    Mode::Plan,
    Mode::List,
];
const ALL: &[Mode] = &[
    Mode::Normal,
    Mode::Help,
    Mode::Confirm,
    Mode::TypedConfirm,
    Mode::Prompt,
    Mode::Command,
    Mode::Plan,
    Mode::List,
];

/// Moving in a list: a row, a page, the ends.
const MOVE: &[(Key, Action)] = &[
    (UP, Action::Up),
    (DOWN, Action::Down),
    (ch('k'), Action::Up),
    (ch('j'), Action::Down),
    (PGUP, Action::PageUp),
    (PGDN, Action::PageDown),
    (ch('g'), Action::Top),
    (ch('G'), Action::Bottom),
    (HOME, Action::Top),
    (END, Action::Bottom),
];

/// The deployment the keys that act on one mean now: the one on screen, or the one selected
/// on home (not while Applications has the keyboard); none in a read-only console.
fn subject(app: &App) -> Option<&DeploymentView> {
    if app.ui.readonly || (app.ui.screen == Screen::Home && app.ui.focus == Focus::Apps) {
        return None;
    }
    app.selected_deployment()
}

/// The subject takes `topic` and its router has not failed (that takes its own keys).
fn takes(app: &App, topic: Topic) -> bool {
    subject(app).is_some_and(|d| !d.router_failed() && d.takes(topic))
}

fn router_failed(app: &App) -> bool {
    subject(app).is_some_and(DeploymentView::router_failed)
}

fn home_apps(app: &App) -> bool {
    !app.ui.readonly && app.ui.screen == Screen::Home && app.ui.focus == Focus::Apps
}

fn on_deployment(app: &App) -> bool {
    matches!(app.ui.screen, Screen::Deployment(_))
}

fn focused(app: &App, focus: Focus) -> bool {
    on_deployment(app) && app.ui.focus == focus
}

/// Every key of the console, in the footer's order.
pub const BINDINGS: &[Binding] = &[
    // The focused panel's own keys first.
    Binding {
        keys: &[(ENTER, Action::Open)],
        modes: NORMAL,
        section: Section::Home,
        help: "an application: its plan; a deployment: open it; waiting: go there",
        // What Enter does in the focused panel, as the panel says it (a weight pending: apply it).
        footer: Footer::When(|app| {
            if app.pending().is_some() {
                None
            } else {
                app.ui.focus.opens()
            }
        }),
    },
    Binding {
        keys: &[(ENTER, Action::Open)],
        modes: NORMAL,
        section: Section::Panel(Focus::Targets),
        help: "the target in full: message, attempts, its log lines",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ENTER, Action::Open)],
        modes: NORMAL,
        section: Section::Panel(Focus::Hooks),
        help: "its run in full: message, output, delete actions, log lines",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ENTER, Action::Open)],
        modes: NORMAL,
        section: Section::Panel(Focus::Canary),
        help: "apply the pending weight (from any panel): asks, naming the split before → after",
        footer: Footer::When(|app| {
            (!app.ui.readonly && app.pending().is_some()).then_some("apply weight")
        }),
    },
    Binding {
        keys: &[(ESC, Action::Back)],
        modes: NORMAL,
        section: Section::Panel(Focus::Canary),
        help: "drop the pending weight (nothing was sent)",
        footer: Footer::When(|app| {
            (!app.ui.readonly && app.pending().is_some()).then_some("drop it")
        }),
    },
    Binding {
        keys: &[
            (LEFT, Action::Left),
            (RIGHT, Action::Right),
            (ch('h'), Action::Left),
            (ch('l'), Action::Right),
        ],
        modes: NORMAL,
        section: Section::Panel(Focus::Canary),
        help: "a pending weight: one slider step less / more candidate (from any panel of a \
               live canary)",
        footer: Footer::When(|app| {
            let weighs = app.deployment().is_some_and(|d| d.takes(Topic::Weight));
            let free = !app.ui.readonly && app.pending().is_none();
            (app.slider() && free && weighs).then_some("weight")
        }),
    },
    Binding {
        keys: &[
            (UP, Action::Up),
            (DOWN, Action::Down),
            (ch('k'), Action::Up),
            (ch('j'), Action::Down),
            (PGUP, Action::PageUp),
            (PGDN, Action::PageDown),
        ],
        modes: NORMAL,
        section: Section::Panel(Focus::Logs),
        help: "scroll (scrolling up stops following)",
        footer: Footer::When(|app| focused(app, Focus::Logs).then_some("scroll")),
    },
    Binding {
        keys: &[
            (ch('g'), Action::Top),
            (ch('G'), Action::Bottom),
            (HOME, Action::Top),
            (END, Action::Bottom),
        ],
        modes: NORMAL,
        section: Section::Panel(Focus::Logs),
        help: "the oldest line; follow the newest again",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ENTER, Action::Open)],
        modes: NORMAL,
        section: Section::Panel(Focus::Logs),
        help: "the lines whole: the pane over the whole screen, wrapped (Esc back)",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('w'), Action::Wrap)],
        modes: NORMAL,
        section: Section::Panel(Focus::Logs),
        help: "wrap long lines in full (again: cut them to the pane)",
        footer: Footer::When(|app| focused(app, Focus::Logs).then_some("wrap")),
    },
    Binding {
        keys: &[(ch('f'), Action::FilterTarget)],
        modes: NORMAL,
        section: Section::Panel(Focus::Logs),
        help: "only the selected target's lines (again: all)",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('L'), Action::CycleLevel)],
        modes: NORMAL,
        section: Section::Panel(Focus::Logs),
        help: "level: all → info → warn → error",
        footer: Footer::When(|app| focused(app, Focus::Logs).then_some("level")),
    },
    Binding {
        keys: &[
            (ch('n'), Action::NextProblem),
            (ch('N'), Action::PrevProblem),
        ],
        modes: NORMAL,
        section: Section::Panel(Focus::Logs),
        help: "the next newer / older warning or error (scrolls there)",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('/'), Action::Search)],
        modes: NORMAL,
        section: Section::Panel(Focus::Logs),
        help: "words, plugin:NAME target:NAME level:warn",
        footer: Footer::No,
    },
    Binding {
        keys: MOVE,
        modes: NORMAL,
        section: Section::Panel(Focus::Targets),
        help: "select a target (G: follow the one at work)",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('f'), Action::FilterTarget)],
        modes: NORMAL,
        section: Section::Panel(Focus::Targets),
        help: "the log pane shows only its lines (again: all)",
        footer: Footer::No,
    },
    Binding {
        keys: MOVE,
        modes: NORMAL,
        section: Section::Panel(Focus::Hooks),
        help: "select a hook",
        footer: Footer::No,
    },
    // Home's keys for an application.
    Binding {
        keys: MOVE,
        modes: NORMAL,
        section: Section::Home,
        help: "move in the focused list",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('D'), Action::Deploy)],
        modes: NORMAL,
        section: Section::Home,
        help: "deploy the application selected in Applications (pick the version)",
        footer: Footer::When(|app| home_apps(app).then_some("deploy")),
    },
    Binding {
        keys: &[(ch('R'), Action::Rollback)],
        modes: NORMAL,
        section: Section::Home,
        help: "roll back the selected application: says where each target goes",
        footer: Footer::When(|app| home_apps(app).then_some("rollback")),
    },
    Binding {
        keys: &[(ch('d'), Action::DryRun)],
        modes: NORMAL,
        section: Section::Home,
        help: "dry-run: what a deploy would do",
        footer: Footer::When(|app| home_apps(app).then_some("dry-run")),
    },
    Binding {
        keys: &[(ch('t'), Action::TestHooks)],
        modes: NORMAL,
        section: Section::Home,
        help: "run its test hooks (a live canary: against stable or the candidate)",
        footer: Footer::When(|app| {
            let tests = app.selected_app().is_some_and(|a| !a.tests.is_empty());
            (home_apps(app) && tests).then_some("test")
        }),
    },
    // What the deployment in question takes now.
    Binding {
        keys: &[(ch('r'), Action::Retry)],
        modes: NORMAL,
        section: Section::RouterFailed,
        help: "retry the router's failed call",
        footer: Footer::When(|app| router_failed(app).then_some("retry router")),
    },
    Binding {
        keys: &[(ch('p'), Action::Promote)],
        modes: NORMAL,
        section: Section::Selected,
        help: "canary: promote past the step it waits at",
        footer: Footer::When(|app| takes(app, Topic::Promote).then_some("promote")),
    },
    Binding {
        keys: &[(ch('P'), Action::PromoteFull)],
        modes: NORMAL,
        section: Section::Selected,
        help: "canary: promote now, its remaining steps skipped",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('x'), Action::Revert)],
        modes: NORMAL,
        section: Section::Selected,
        help: "canary: revert",
        footer: Footer::When(|app| {
            subject(app)
                .is_some_and(|d| d.takes(Topic::Revert))
                .then_some("revert")
        }),
    },
    Binding {
        keys: &[(ch('b'), Action::StepBack)],
        modes: NORMAL,
        section: Section::Selected,
        help: "canary: back to the previous step's weight",
        footer: Footer::When(|app| {
            let back = subject(app)
                .and_then(|d| d.canary.as_ref())
                .is_some_and(|c| c.status.back_to.is_some());
            (takes(app, Topic::Back) && back).then_some("back")
        }),
    },
    Binding {
        keys: &[(ch('r'), Action::Retry)],
        modes: NORMAL,
        section: Section::Selected,
        help: "retry the failed targets",
        footer: Footer::When(|app| takes(app, Topic::Retry).then_some("retry")),
    },
    Binding {
        keys: &[(ch('s'), Action::Skip)],
        modes: NORMAL,
        section: Section::Selected,
        help: "skip a failed target: it keeps its release",
        footer: Footer::When(|app| {
            let waits = subject(app).is_some_and(|d| d.state == DeploymentState::FailedAwaiting);
            (takes(app, Topic::Skip) && waits).then_some("skip")
        }),
    },
    Binding {
        keys: &[(ch('A'), Action::Abort)],
        modes: NORMAL,
        section: Section::Selected,
        help: "abort: stop and roll back what it changed",
        footer: Footer::When(|app| takes(app, Topic::Abort).then_some("abort")),
    },
    Binding {
        keys: &[(ch(' '), Action::PauseResume)],
        modes: NORMAL,
        section: Section::Selected,
        help: "pause / resume (resuming a held canary asks first); a submission never \
               started: start it",
        footer: Footer::When(|app| {
            let d = subject(app).filter(|d| !d.router_failed())?;
            if d.takes(Topic::Resume) {
                Some("resume")
            } else if d.takes(Topic::Pause) {
                Some(if d.canary.is_some() { "hold" } else { "pause" })
            } else if d.never_started.is_some() && d.state == DeploymentState::Cancelled {
                Some("start it")
            } else if d.state == DeploymentState::DeadLettered {
                Some("resume")
            } else {
                None
            }
        }),
    },
    Binding {
        keys: &[(ch('c'), Action::Cancel)],
        modes: NORMAL,
        section: Section::Selected,
        help: "cancel it at its next step",
        footer: Footer::When(|app| {
            subject(app)
                .is_some_and(|d| !d.router_failed() && d.status.is_live())
                .then_some("cancel")
        }),
    },
    Binding {
        keys: &[(ch('X'), Action::Abandon)],
        modes: NORMAL,
        section: Section::Selected,
        help: "a canary whose router failed: abandon it, with a reason",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('x'), Action::Revert)],
        modes: NORMAL,
        section: Section::RouterFailed,
        help: "revert: the candidate out of every pool",
        footer: Footer::No,
    },
    Binding {
        keys: &[
            (LEFT, Action::Left),
            (RIGHT, Action::Right),
            (ENTER, Action::Open),
        ],
        modes: NORMAL,
        section: Section::RouterFailed,
        help: "set a weight through the router instead (←→, then Enter)",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('X'), Action::Abandon)],
        modes: NORMAL,
        section: Section::RouterFailed,
        help: "abandon it where its traffic is (a reason is required)",
        footer: Footer::When(|app| router_failed(app).then_some("abandon")),
    },
    // The deployment screen's keys, as its help says them.
    Binding {
        keys: &[(ch('c'), Action::Cancel)],
        modes: NORMAL,
        section: Section::Deployment,
        help: "cancel it at its next step",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch(' '), Action::PauseResume)],
        modes: NORMAL,
        section: Section::Deployment,
        help: "pause before the next batch / resume",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('r'), Action::Retry)],
        modes: NORMAL,
        section: Section::Deployment,
        help: "retry the failed targets (the selected one if it failed)",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('s'), Action::Skip)],
        modes: NORMAL,
        section: Section::Deployment,
        help: "skip the selected target: it keeps its release",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('A'), Action::Abort)],
        modes: NORMAL,
        section: Section::Deployment,
        help: "abort: stop and roll back what the deploy changed",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('D'), Action::Deploy)],
        modes: NORMAL,
        section: Section::Deployment,
        help: "deploy its application again (pick the version)",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('R'), Action::Rollback)],
        modes: NORMAL,
        section: Section::Deployment,
        help: "roll its application back",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('d'), Action::DryRun)],
        modes: NORMAL,
        section: Section::Deployment,
        help: "dry-run its application",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('t'), Action::TestHooks)],
        modes: NORMAL,
        section: Section::Deployment,
        help: "run its application's test hooks",
        footer: Footer::When(|app| {
            let tests = app.selected_app().is_some_and(|a| !a.tests.is_empty());
            (!app.ui.readonly && on_deployment(app) && tests).then_some("test")
        }),
    },
    // A canary's keys, as its help says them.
    Binding {
        keys: &[(ch(' '), Action::PauseResume)],
        modes: NORMAL,
        section: Section::Canary,
        help: "hold the steps / resume them (asks: names the split after)",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('p'), Action::Promote)],
        modes: NORMAL,
        section: Section::Canary,
        help: "promote past the step it waits at (never lowers its traffic)",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('P'), Action::PromoteFull)],
        modes: NORMAL,
        section: Section::Canary,
        help: "promote now: the remaining steps skipped (production: type its name)",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('x'), Action::Revert)],
        modes: NORMAL,
        section: Section::Canary,
        help: "revert: the candidate leaves traffic",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('b'), Action::StepBack)],
        modes: NORMAL,
        section: Section::Canary,
        help: "back to the previous step's weight, and hold",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('t'), Action::TestHooks)],
        modes: NORMAL,
        section: Section::Canary,
        help: "run the test hooks against stable or the candidate",
        footer: Footer::No,
    },
    // Everywhere: the footer's last words.
    Binding {
        keys: &[(ch('/'), Action::Search)],
        modes: NORMAL,
        section: Section::Everywhere,
        help: "filter the focused list or the log pane (Esc clears it)",
        footer: Footer::When(|_| Some("filter")),
    },
    Binding {
        keys: &[(TAB, Action::NextPanel), (BACKTAB, Action::PrevPanel)],
        modes: NORMAL,
        section: Section::Everywhere,
        help: "the next / previous panel",
        footer: Footer::When(|_| Some("panel")),
    },
    Binding {
        keys: &[
            (LEFT, Action::Left),
            (RIGHT, Action::Right),
            (ch('h'), Action::Left),
            (ch('l'), Action::Right),
        ],
        modes: NORMAL,
        section: Section::Everywhere,
        help: "the previous / next panel (a live canary's screen: its weight)",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('z'), Action::Zoom)],
        modes: NORMAL,
        section: Section::Everywhere,
        help: "zoom the focused pane to the whole screen (again: back)",
        footer: Footer::When(|app| on_deployment(app).then_some("zoom")),
    },
    Binding {
        keys: &[(ch('M'), Action::Messages)],
        modes: NORMAL,
        section: Section::Everywhere,
        help: "messages: everything this console said, and warnings, in full",
        footer: Footer::When(|_| Some("messages")),
    },
    Binding {
        keys: &[(ESC, Action::Back)],
        modes: NORMAL,
        section: Section::Everywhere,
        help: "drops a pending weight, then a message, the zoom, the filter; then back",
        footer: Footer::When(|app| on_deployment(app).then_some("back")),
    },
    Binding {
        keys: &[(ch('?'), Action::Help)],
        modes: NORMAL,
        section: Section::Everywhere,
        help: "this help",
        footer: Footer::Always("help"),
    },
    Binding {
        keys: &[(ch('q'), Action::Quit), (Key::Ctrl('c'), Action::Quit)],
        modes: NORMAL,
        section: Section::Everywhere,
        help: "quit (asks while this console runs deployments)",
        footer: Footer::Always("quit"),
    },
    Binding {
        keys: &[(ch('y'), Action::Yank)],
        modes: NORMAL,
        section: Section::Everywhere,
        help: "copy what is selected (an id, a name, the newest log line) to your terminal's \
               clipboard: OSC 52, over ssh and tmux too",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('E'), Action::EngineLog)],
        modes: NORMAL,
        section: Section::Everywhere,
        help: "the engine's own log",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch(':'), Action::CommandLine)],
        modes: NORMAL,
        section: Section::Everywhere,
        help: "command line: a verb on the selected deployment (Tab completes)",
        footer: Footer::No,
    },
    Binding {
        keys: &[(Key::Ctrl('l'), Action::Redraw)],
        modes: ALL,
        section: Section::Everywhere,
        help: "clear the terminal and draw everything again",
        footer: Footer::No,
    },
    Binding {
        keys: &[
            (Key::Ctrl('d'), Action::PageDown),
            (Key::Ctrl('b'), Action::PageUp),
        ],
        modes: ALL,
        section: Section::Everywhere,
        help: "a page down / up",
        footer: Footer::No,
    },
    Binding {
        keys: &[(Key::Ctrl('c'), Action::Dismiss)],
        modes: DIALOGS,
        section: Section::Everywhere,
        help: "in a dialog: close it, changing nothing",
        footer: Footer::No,
    },
    Binding {
        keys: &[(Key::Ctrl('u'), Action::ClearInput)],
        modes: TYPING,
        section: Section::Everywhere,
        help: "clear what is typed in a prompt or a confirmation",
        footer: Footer::No,
    },
    // Dialogs.
    Binding {
        keys: &[
            (LEFT, Action::ChoiceToggle),
            (RIGHT, Action::ChoiceToggle),
            (TAB, Action::ChoiceToggle),
            (BACKTAB, Action::ChoiceToggle),
        ],
        modes: &[Mode::Confirm],
        section: Section::Confirm,
        help: "choose the button (the default changes nothing)",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ENTER, Action::Submit)],
        modes: &[Mode::Confirm, Mode::TypedConfirm],
        section: Section::Confirm,
        help: "press it (ignored for the first 400 ms: a held key)",
        footer: Footer::No,
    },
    Binding {
        keys: &[
            (Key::Typed, Action::Input(' ')),
            (BACKSPACE, Action::Backspace),
        ],
        modes: &[Mode::Confirm, Mode::TypedConfirm],
        section: Section::Confirm,
        help: "a reason for the journal; in production the environment's name first",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ESC, Action::Dismiss)],
        modes: &[Mode::Confirm, Mode::TypedConfirm],
        section: Section::Confirm,
        help: "changes nothing",
        footer: Footer::No,
    },
    Binding {
        keys: &[
            (Key::Typed, Action::Input(' ')),
            (BACKSPACE, Action::Backspace),
        ],
        modes: &[Mode::Prompt, Mode::Command],
        section: Section::Prompt,
        help: "what to filter by, the version, the command",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ENTER, Action::Submit)],
        modes: &[Mode::Prompt, Mode::Command],
        section: Section::Prompt,
        help: "apply it (a filter left empty clears it); run the command",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ESC, Action::Dismiss)],
        modes: &[Mode::Prompt, Mode::Command],
        section: Section::Prompt,
        help: "close it, changing nothing",
        footer: Footer::No,
    },
    Binding {
        keys: &[(TAB, Action::Complete)],
        modes: &[Mode::Command],
        section: Section::Prompt,
        help: "the command line: complete the word",
        footer: Footer::No,
    },
    Binding {
        keys: &[(UP, Action::Up), (DOWN, Action::Down)],
        modes: &[Mode::Command],
        section: Section::Prompt,
        help: "the command line: the commands run before",
        footer: Footer::No,
    },
    Binding {
        keys: &[(UP, Action::Up)],
        modes: &[Mode::Prompt],
        section: Section::Prompt,
        help: "a version typed: back to the list above it",
        footer: Footer::No,
    },
    Binding {
        keys: MOVE,
        modes: &[Mode::List],
        section: Section::List,
        help: "move in it",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ENTER, Action::Submit)],
        modes: &[Mode::List],
        section: Section::List,
        help: "pick the selected row",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('r'), Action::Retry), (ch('s'), Action::Skip)],
        modes: &[Mode::List],
        section: Section::List,
        help: "a failed target's page: retry it; skip it",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('f'), Action::FilterTarget)],
        modes: &[Mode::List],
        section: Section::List,
        help: "a target's page: the log pane shows only its lines",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ESC, Action::Dismiss), (ch('q'), Action::Dismiss)],
        modes: &[Mode::List],
        section: Section::List,
        help: "close it",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('D'), Action::Deploy), (ENTER, Action::Deploy)],
        modes: &[Mode::Plan],
        section: Section::Plan,
        help: "deploy it (pick the version)",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('d'), Action::DryRun)],
        modes: &[Mode::Plan],
        section: Section::Plan,
        help: "dry-run: what a deploy would do",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ch('R'), Action::Rollback)],
        modes: &[Mode::Plan],
        section: Section::Plan,
        help: "roll it back",
        footer: Footer::No,
    },
    Binding {
        keys: &[
            (UP, Action::Up),
            (DOWN, Action::Down),
            (ch('k'), Action::Up),
            (ch('j'), Action::Down),
        ],
        modes: &[Mode::Plan],
        section: Section::Plan,
        help: "scroll it",
        footer: Footer::No,
    },
    Binding {
        keys: &[(ESC, Action::Dismiss), (ch('q'), Action::Dismiss)],
        modes: &[Mode::Plan],
        section: Section::Plan,
        help: "close it",
        footer: Footer::No,
    },
    Binding {
        keys: &[
            (UP, Action::Up),
            (DOWN, Action::Down),
            (ch('k'), Action::Up),
            (ch('j'), Action::Down),
            (PGUP, Action::PageUp),
            (PGDN, Action::PageDown),
            (ch(' '), Action::PageDown),
            (ch('g'), Action::Top),
            (ch('G'), Action::Bottom),
            (HOME, Action::Top),
            (END, Action::Bottom),
        ],
        modes: &[Mode::Help],
        section: Section::Page,
        help: "scroll it",
        footer: Footer::No,
    },
    Binding {
        keys: &[
            (ESC, Action::Dismiss),
            (ENTER, Action::Dismiss),
            (ch('?'), Action::Dismiss),
            (ch('q'), Action::Dismiss),
            (ch('E'), Action::Dismiss),
            (ch('M'), Action::Dismiss),
        ],
        modes: &[Mode::Help],
        section: Section::Page,
        help: "close it",
        footer: Footer::No,
    },
];

/// The action for `key` in `mode`, if any. Key repeat and release are dropped, so a held key
/// can never confirm a dialog; Control never types a letter.
pub fn action(mode: Mode, key: KeyEvent) -> Option<Action> {
    if key.kind != KeyEventKind::Press {
        return None;
    }
    let wanted = if key.modifiers.contains(KeyModifiers::CONTROL) {
        match key.code {
            KeyCode::Char(c) => Key::Ctrl(c.to_ascii_lowercase()),
            _ => return None,
        }
    } else {
        Key::Code(key.code)
    };
    let rows = || BINDINGS.iter().filter(|b| b.modes.contains(&mode));
    let exact = rows()
        .flat_map(|b| b.keys.iter())
        .find(|(k, _)| *k == wanted)
        .map(|(_, a)| a.clone());
    if exact.is_some() {
        return exact;
    }
    match wanted {
        Key::Code(KeyCode::Char(c))
            if rows().any(|b| b.keys.iter().any(|(k, _)| *k == Key::Typed)) =>
        {
            Some(Action::Input(c))
        }
        _ => None,
    }
}

/// The footer's keys now, in the table's order: the key as the footer writes it, what it does,
/// and whether it stays when the line is full.
pub fn footer(app: &App) -> Vec<(String, &'static str, bool)> {
    BINDINGS
        .iter()
        .filter(|b| b.modes.contains(&Mode::Normal))
        .filter_map(|b| match b.footer {
            Footer::No => None,
            Footer::Always(label) => Some((b.short(), label, true)),
            Footer::When(f) => f(app).map(|label| (b.short(), label, false)),
        })
        .collect()
}

/// The rows of one section, each as the help writes it (keys, what they do).
pub fn section(section: Section) -> Vec<(String, &'static str)> {
    BINDINGS
        .iter()
        .filter(|b| b.section == section)
        .map(|b| (b.label(), b.help))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    /// Every action a key can ask for. A new variant of `Action` fails to compile in `keyed`
    /// until it is sorted: a key's action goes here too, and the test below wants it bound.
    const KEYED: &[Action] = &[
        Action::Up,
        Action::Down,
        Action::PageUp,
        Action::PageDown,
        Action::Top,
        Action::Bottom,
        Action::NextPanel,
        Action::PrevPanel,
        Action::Left,
        Action::Right,
        Action::Open,
        Action::Back,
        Action::Help,
        Action::EngineLog,
        Action::Messages,
        Action::Quit,
        Action::Deploy,
        Action::DryRun,
        Action::Rollback,
        Action::Cancel,
        Action::PauseResume,
        Action::Retry,
        Action::Skip,
        Action::Abort,
        Action::Promote,
        Action::Revert,
        Action::PromoteFull,
        Action::StepBack,
        Action::Abandon,
        Action::TestHooks,
        Action::Search,
        Action::CycleLevel,
        Action::FilterTarget,
        Action::Zoom,
        Action::Wrap,
        Action::Yank,
        Action::NextProblem,
        Action::PrevProblem,
        Action::CommandLine,
        Action::Complete,
        Action::Redraw,
        Action::Input(' '),
        Action::Backspace,
        Action::ClearInput,
        Action::ChoiceToggle,
        Action::Submit,
        Action::Dismiss,
    ];

    /// True for the actions a key asks for; false for those the loop makes.
    fn keyed(a: &Action) -> bool {
        match a {
            Action::Tick(_)
            | Action::Resize(..)
            | Action::Snapshot(_)
            | Action::Log(_)
            | Action::LogsDropped(_)
            | Action::LogHistory(..) => false,
            Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom
            | Action::NextPanel
            | Action::PrevPanel
            | Action::Left
            | Action::Right
            | Action::Open
            | Action::Back
            | Action::Help
            | Action::EngineLog
            | Action::Messages
            | Action::Quit
            | Action::Deploy
            | Action::DryRun
            | Action::Rollback
            | Action::Cancel
            | Action::PauseResume
            | Action::Retry
            | Action::Skip
            | Action::Abort
            | Action::Promote
            | Action::Revert
            | Action::PromoteFull
            | Action::StepBack
            | Action::Abandon
            | Action::TestHooks
            | Action::Search
            | Action::CycleLevel
            | Action::FilterTarget
            | Action::Zoom
            | Action::Wrap
            | Action::Yank
            | Action::NextProblem
            | Action::PrevProblem
            | Action::CommandLine
            | Action::Complete
            | Action::Redraw
            | Action::Input(_)
            | Action::Backspace
            | Action::ClearInput
            | Action::ChoiceToggle
            | Action::Submit
            | Action::Dismiss => true,
        }
    }

    #[test]
    fn every_action_a_key_asks_for_has_a_key_and_a_line_of_help() {
        for a in KEYED {
            assert!(keyed(a), "{a:?}");
            let rows: Vec<&Binding> = BINDINGS
                .iter()
                .filter(|b| b.keys.iter().any(|(_, x)| x == a))
                .collect();
            assert!(!rows.is_empty(), "no key does {a:?}");
            assert!(rows.iter().all(|b| !b.help.is_empty()), "{a:?}");
        }
    }

    #[test]
    fn a_key_means_one_thing_in_a_mode() {
        let modes = [
            Mode::Normal,
            Mode::Help,
            Mode::Confirm,
            Mode::TypedConfirm,
            Mode::Prompt,
            Mode::Command,
            Mode::Plan,
            Mode::List,
        ];
        for mode in modes {
            let mut seen: Vec<(Key, &Action)> = Vec::new();
            for b in BINDINGS.iter().filter(|b| b.modes.contains(&mode)) {
                for (k, a) in b.keys {
                    if let Some((_, before)) = seen.iter().find(|(s, _)| s == k) {
                        assert_eq!(*before, a, "{mode:?}: {} means two things", k.label());
                    }
                    seen.push((*k, a));
                }
            }
        }
    }

    #[test]
    fn held_keys_and_releases_do_nothing() {
        let mut held = press(KeyCode::Enter);
        held.kind = KeyEventKind::Repeat;
        assert_eq!(action(Mode::Confirm, held), None);
        held.kind = KeyEventKind::Release;
        assert_eq!(action(Mode::Normal, held), None);
    }

    #[test]
    fn dialogs_take_their_keys_first() {
        assert_eq!(
            action(Mode::Confirm, press(KeyCode::Char('q'))),
            Some(Action::Input('q'))
        );
        assert_eq!(
            action(Mode::Normal, press(KeyCode::Char('q'))),
            Some(Action::Quit)
        );
        assert_eq!(
            action(Mode::Confirm, press(KeyCode::Tab)),
            Some(Action::ChoiceToggle)
        );
        assert_eq!(action(Mode::Help, press(KeyCode::Char('D'))), None);
        assert_eq!(
            action(Mode::Plan, press(KeyCode::Enter)),
            Some(Action::Deploy)
        );
        assert_eq!(
            action(
                Mode::Normal,
                KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)
            ),
            Some(Action::Quit)
        );
        assert_eq!(
            action(
                Mode::Confirm,
                KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)
            ),
            Some(Action::Dismiss)
        );
    }

    #[test]
    fn control_keys_never_type_letters() {
        let ctrl = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL);
        assert_eq!(action(Mode::Prompt, ctrl('u')), Some(Action::ClearInput));
        assert_eq!(
            action(Mode::TypedConfirm, ctrl('u')),
            Some(Action::ClearInput)
        );
        assert_eq!(action(Mode::Confirm, ctrl('w')), None);
        assert_eq!(action(Mode::Normal, ctrl('u')), None);
        assert_eq!(
            action(
                Mode::Normal,
                KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT)
            ),
            Some(Action::PrevPanel)
        );
        assert_eq!(
            action(
                Mode::Normal,
                KeyEvent::new(KeyCode::Char('D'), KeyModifiers::SHIFT)
            ),
            Some(Action::Deploy)
        );
        for mode in [Mode::Normal, Mode::Confirm, Mode::Command, Mode::Help] {
            assert_eq!(action(mode, ctrl('l')), Some(Action::Redraw), "{mode:?}");
        }
        assert_eq!(
            action(Mode::Command, press(KeyCode::Tab)),
            Some(Action::Complete)
        );
        assert_eq!(
            action(Mode::Prompt, press(KeyCode::Char(' '))),
            Some(Action::Input(' '))
        );
    }

    #[test]
    fn labels_read_as_keys() {
        let b = BINDINGS
            .iter()
            .find(|b| b.section == Section::Panel(Focus::Canary) && b.help.contains("slider"))
            .unwrap();
        assert_eq!(b.label(), "←→ h l");
        assert_eq!(b.short(), "←→");
        assert_eq!(Key::Ctrl('c').label(), "Ctrl-C");
        assert_eq!(ch(' ').label(), "Space");
    }
}
