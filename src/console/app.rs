//! The console's state and its one transition function. [`App`] is the engine's snapshot and
//! log lines beside the operator's [`UiState`]; `App::update` is synchronous: it changes only UI
//! state and returns at most one `Command` for the engine; the loop sends it. This file keeps
//! the state, the messages and the dispatch; the panels and their lists are in [`panels`],
//! moving about in [`navigate`], filters in [`lists`], every key in [`keys`], what the keys
//! that act ask in [`asks`], the command line's verbs in [`verbs`], what a new snapshot changes
//! in [`snapshot`], and every dialog in [`dialog`]. The screens
//! (`console::view`) read the app through [`ViewCtx`]; nothing here reads them.

mod asks;
pub mod dialog;
pub mod keys;
mod lists;
mod navigate;
mod panels;
mod snapshot;
mod verbs;

use std::collections::VecDeque;
use std::sync::Arc;

use ratatui::layout::Rect;

use self::dialog::Reply;
use super::action::Action;
use super::action::Mode;
use super::layout;
use super::logpane::LogPane;
use crate::deploy::view::{DeploymentView, TargetView};
use crate::engine::handle::{AppEnv, Command, Snapshot};
use crate::plugin::Level;

pub use self::dialog::confirm::CONFIRM_GUARD_MS;
pub use self::dialog::versions::{VersionChoice, Versions};
pub use self::dialog::{Choice, Confirm, Modal};
pub use lists::{headline, headline_rows};
pub use panels::{Focus, ListState, Lists};

/// How long an information message stays (the next key clears it sooner).
pub const FLASH_MS: i64 = 8_000;
/// How long a warning stays (the next key clears it sooner); errors stay until Esc.
pub const WARN_MS: i64 = 20_000;
/// Messages kept for `M`.
pub const MESSAGES: usize = 500;
/// How long a weight sent is shown as being set when the engine says nothing of it.
pub const APPLYING_MS: i64 = 30_000;

/// A canary weight sent to the engine, shown as being set until the engine answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applying {
    /// The deployment.
    pub id: String,
    /// The weight sent.
    pub weight: u32,
    /// When it was sent (epoch ms).
    pub at: i64,
    /// How many decisions the canary had recorded then: a router error from before the
    /// engine took the command is not its answer.
    pub decisions: usize,
}
const PAGE: usize = 10;

/// Which screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Screen {
    /// Applications and deployments.
    Home,
    /// One deployment.
    Deployment(String),
}

/// How long the console waits for a deployment it started to show before it stops looking.
const FOLLOW_STARTED_MS: i64 = 15_000;

/// A message at the bottom of the screen (and in `M`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flash {
    /// Text.
    pub text: String,
    /// Severity.
    pub level: Level,
    /// Epoch ms.
    pub at: i64,
}

/// Everything a screen or a dialog reads when it draws: the console and the colours.
#[derive(Debug, Clone, Copy)]
pub struct ViewCtx<'a> {
    /// The console.
    pub app: &'a App,
    /// Colours.
    pub theme: &'a super::theme::Theme,
}

/// The console: what the engine said (its snapshot and log lines) and what the operator did
/// with it (everything else, in [`UiState`]).
#[derive(Debug, Clone)]
pub struct App {
    /// The engine's latest state.
    pub snap: Arc<Snapshot>,
    /// The engine's log lines, and the pane's scroll and filter.
    pub logs: LogPane,
    /// Screens, panels, selections, dialogs, messages.
    pub ui: UiState,
}

/// What the operator did with the engine's state: where they are, what is selected and
/// filtered, the dialogs open, the messages said, and what the console waits for.
#[derive(Debug, Clone)]
pub struct UiState {
    /// The current screen.
    pub screen: Screen,
    /// Focused panel.
    pub focus: Focus,
    /// Every list panel's selection and filter.
    pub lists: Lists,
    /// Dialogs, topmost last.
    pub modals: Vec<Modal>,
    /// The message shown now.
    pub flash: Option<Flash>,
    /// Every message shown, oldest first (`M`).
    pub messages: VecDeque<Flash>,
    /// Changes nothing; says why.
    pub readonly: bool,
    /// Epoch ms, set by the loop (tests inject it).
    pub now: i64,
    /// The terminal's size (columns, rows).
    pub size: (u16, u16),
    /// The loop should end.
    pub should_quit: bool,
    /// Something changed since the last frame.
    pub dirty: bool,
    /// The terminal is to be cleared before the next frame (`Ctrl-L`).
    pub redraw: bool,
    /// Open the next live deployment that appears (the demo starts on its deploy).
    pub follow_next: bool,
    /// Open the deployment a command of this console starts: its subject, the deployments there
    /// were when it was sent, and until when to look (a start the engine refused opens nothing
    /// later).
    pub follow_started: Option<(String, Vec<String>, i64)>,
    /// Keep the first unfinished target in view (until the operator moves the selection).
    pub follow_targets: bool,
    /// Quitting stops this console's deployments instead of handing them to a worker (demo).
    pub stop_on_quit: bool,
    /// The operator quit leaving these live canaries unwatched, with this reason.
    pub leave_unwatched: Option<(Vec<String>, Option<String>)>,
    /// A canary weight moved with ←/→ and not applied yet: the deployment, the weight.
    pub pending_weight: Option<(String, u32)>,
    /// A weight sent to the engine and not yet read back from it.
    pub applying: Option<Applying>,
    /// The focused pane takes the whole screen.
    pub zoom: bool,
    /// Lines run on the command line, oldest first.
    pub command_history: Vec<String>,
    /// Text for the terminal's clipboard, taken by the loop (which writes it as OSC 52).
    pub clipboard: Option<String>,
    /// A line said until a canary waits at a gate (the demo's: what is about to happen stays
    /// on screen until it has), under any message.
    pub until_gate: Option<String>,
    /// Deployments whose earlier log lines were asked for.
    history_asked: std::collections::BTreeSet<String>,
    last_notice: u64,
}

impl UiState {
    fn new(readonly: bool, now: i64) -> Self {
        UiState {
            screen: Screen::Home,
            focus: Focus::Apps,
            lists: Lists::default(),
            modals: Vec::new(),
            flash: None,
            messages: VecDeque::new(),
            readonly,
            now,
            size: (80, 24),
            should_quit: false,
            dirty: true,
            redraw: false,
            follow_next: false,
            follow_started: None,
            follow_targets: true,
            stop_on_quit: false,
            leave_unwatched: None,
            pending_weight: None,
            applying: None,
            zoom: false,
            command_history: Vec::new(),
            clipboard: None,
            until_gate: None,
            history_asked: std::collections::BTreeSet::new(),
            last_notice: 0,
        }
    }
}

impl App {
    /// A console on an empty snapshot.
    pub fn new(readonly: bool, now: i64) -> Self {
        App {
            snap: Arc::new(Snapshot::default()),
            logs: LogPane::default(),
            ui: UiState::new(readonly, now),
        }
    }

    /// What has the keyboard.
    pub fn mode(&self) -> Mode {
        self.ui.modals.last().map_or(Mode::Normal, Modal::mode)
    }

    /// The deployment the deployment screen shows.
    pub fn deployment(&self) -> Option<&DeploymentView> {
        match &self.ui.screen {
            Screen::Deployment(id) => self.snap.deployments.iter().find(|d| &d.id == id),
            Screen::Home => None,
        }
    }

    /// The selected application/environment: on Home, the Applications panel's (when it has
    /// the focus); on a deployment's screen, the deployment's.
    pub fn selected_app(&self) -> Option<&AppEnv> {
        match self.deployment() {
            Some(d) => self.app_of(&d.application, &d.environment),
            None if self.ui.focus == Focus::Apps => {
                self.visible_apps().get(self.row(Focus::Apps)).copied()
            }
            None => None,
        }
    }

    /// The deploy lock on an application's environment, if any.
    pub fn lock_of(
        &self,
        application: &str,
        environment: &str,
    ) -> Option<&crate::deploy::records::Lock> {
        self.app_of(application, environment)?.lock.as_ref()
    }

    fn app_of(&self, application: &str, environment: &str) -> Option<&AppEnv> {
        self.snap
            .apps
            .iter()
            .find(|a| a.application == application && a.environment == environment)
    }

    /// The selected deployment (Home list or the deployment screen).
    pub fn selected_deployment(&self) -> Option<&DeploymentView> {
        self.deployment().or_else(|| match self.ui.focus {
            Focus::Deployments => self
                .visible_deployments()
                .get(self.row(Focus::Deployments))
                .copied(),
            Focus::Inbox => {
                let id = self
                    .inbox()
                    .get(self.row(Focus::Inbox))?
                    .deployment
                    .clone()?;
                self.snap.deployments.iter().find(|d| d.id == id)
            }
            _ => None,
        })
    }

    /// The selected target of the deployment screen.
    pub fn selected_target(&self) -> Option<&TargetView> {
        self.visible_targets()
            .get(self.row(Focus::Targets))
            .copied()
    }

    /// The message the status line shows now, and how serious it is: the last one said, else
    /// what the database refuses while it lasts. On a deployment's screen its id goes without
    /// saying.
    pub fn status(&self) -> Option<(Level, String)> {
        let (level, text) = match (&self.ui.flash, &self.snap.store_trouble) {
            (Some(f), _) => (f.level, f.text.clone()),
            (None, Some(t)) => (Level::Error, format!("⚠ {t}")),
            (None, None) => match &self.ui.until_gate {
                Some(t) => (Level::Info, t.clone()),
                None => return None,
            },
        };
        let text = match self.deployment() {
            Some(d) => text
                .strip_prefix(&format!("{}: ", d.id))
                .map_or(text.clone(), str::to_owned),
            None => text,
        };
        Some((level, text))
    }

    /// The rows the status line takes for the message shown now.
    pub fn status_rows(&self) -> u16 {
        let Some((_, text)) = self.status() else {
            return 0;
        };
        let width = usize::from(self.ui.size.0.saturating_sub(1)).max(20);
        let rows = dialog::wrap(&text, width).len();
        u16::try_from(rows.clamp(1, layout::STATUS_ROWS)).unwrap_or(1)
    }

    /// Where the deployment screen's panels are at the current size.
    pub fn deployment_layout(&self) -> Option<layout::Deployment> {
        let d = self.deployment()?;
        let [_, body, _, _] = layout::screen(
            Rect::new(0, 0, self.ui.size.0, self.ui.size.1),
            self.status_rows(),
        );
        let main = if body.width >= layout::WIDE {
            body.width.saturating_sub(layout::side_width(body.width))
        } else {
            body.width
        };
        Some(layout::deployment(
            body,
            d.targets.len(),
            headline_rows(d, main),
            d.canary.is_some(),
        ))
    }

    /// Log lines the log pane shows now.
    pub fn log_rows(&self) -> usize {
        if self.ui.zoom && self.ui.focus == Focus::Logs {
            let [_, body, _, _] = layout::screen(
                Rect::new(0, 0, self.ui.size.0, self.ui.size.1),
                self.status_rows(),
            );
            return layout::log_rows(body);
        }
        self.deployment_layout()
            .map_or(PAGE, |l| layout::log_rows(l.logs))
    }

    /// Shows `text` at the bottom and keeps it for `M`.
    pub fn say(&mut self, level: Level, text: impl Into<String>) {
        let f = Flash {
            text: text.into(),
            level,
            at: self.ui.now,
        };
        self.ui.messages.push_back(f.clone());
        while self.ui.messages.len() > MESSAGES {
            self.ui.messages.pop_front();
        }
        self.ui.flash = Some(f);
    }

    fn refuse_readonly(&mut self, what: &str) -> bool {
        if self.ui.readonly {
            self.say(
                Level::Warn,
                format!("read-only console: {what} is disabled (started with --readonly)"),
            );
        }
        self.ui.readonly
    }

    /// Applies `action`; returns the command to send, if any.
    pub fn update(&mut self, action: Action) -> Option<Command> {
        let command = self.apply(action);
        // A deployment shown for the first time: its log lines from before this console.
        if command.is_none()
            && let Screen::Deployment(id) = &self.ui.screen
            && !self.ui.history_asked.contains(id)
        {
            self.ui.history_asked.insert(id.clone());
            return Some(Command::LoadLogs { id: id.clone() });
        }
        command
    }

    fn apply(&mut self, action: Action) -> Option<Command> {
        let was_dirty = self.ui.dirty;
        self.ui.dirty = true;
        match action {
            Action::Tick(now) => {
                self.tick(now, was_dirty);
                None
            }
            Action::Resize(w, h) => {
                self.ui.size = (w, h);
                self.next_panel(0);
                None
            }
            Action::Snapshot(s) => {
                self.on_snapshot(s);
                None
            }
            Action::Log(line) => {
                self.logs.push(line);
                None
            }
            Action::LogsDropped(n) => {
                self.logs.dropped += n;
                None
            }
            Action::LogHistory(_, lines) => {
                self.logs.prepend(&lines);
                None
            }
            Action::Redraw => {
                self.ui.redraw = true;
                None
            }
            other => {
                // A key: an information or a warning had its moment; an error stays until Esc.
                if self
                    .ui
                    .flash
                    .as_ref()
                    .is_some_and(|f| f.level < Level::Error)
                {
                    self.ui.flash = None;
                }
                if self.ui.modals.is_empty() {
                    self.on_screen(other)
                } else {
                    self.on_modal(&other)
                }
            }
        }
    }

    /// Time passes: redraw only when something on screen shows it (a running clock changes
    /// once a second; an old message goes away).
    fn tick(&mut self, now: i64, was_dirty: bool) {
        let second = now / 1000 != self.ui.now / 1000;
        let clock = match &self.ui.screen {
            Screen::Deployment(_) => self.deployment().is_some_and(|d| d.status.is_live()),
            Screen::Home => self.snap.deployments.iter().any(|d| d.status.is_live()),
        };
        self.ui.now = now;
        let expired = self.ui.flash.as_ref().is_some_and(|f| match f.level {
            Level::Error => false,
            Level::Warn => now - f.at > WARN_MS,
            _ => now - f.at > FLASH_MS,
        });
        if expired {
            self.ui.flash = None;
        }
        // An answer that never comes (an engine gone) is not awaited on screen for ever.
        let stale = self
            .ui
            .applying
            .as_ref()
            .is_some_and(|a| now - a.at > APPLYING_MS);
        if stale {
            self.ui.applying = None;
        }
        // Time alone never un-dirties a frame still waiting to be drawn.
        self.ui.dirty = was_dirty || (second && clock) || expired || stale;
    }

    fn on_screen(&mut self, action: Action) -> Option<Command> {
        match action {
            Action::Help => self
                .ui
                .modals
                .push(Modal::Help(dialog::help::Help::default())),
            Action::EngineLog => self.ui.modals.push(Modal::EngineLog),
            Action::Messages => self
                .ui
                .modals
                .push(Modal::Messages(dialog::messages::Messages::default())),
            Action::CommandLine => {
                self.ui
                    .modals
                    .push(Modal::Command(dialog::command::CommandLine::with_history(
                        self.ui.command_history.clone(),
                    )))
            }
            Action::Quit => self.quit(),
            Action::Up => self.move_by(-1),
            Action::Down => self.move_by(1),
            Action::PageUp => self.page(-1),
            Action::PageDown => self.page(1),
            Action::Top => self.top(),
            Action::Bottom => self.bottom(),
            // On a live canary's screen the arrows move its slider whatever panel has the
            // keyboard (lists move with ↑↓); elsewhere they move the focus.
            Action::Left | Action::Right if self.slider() => {
                self.nudge(if action == Action::Left { -1 } else { 1 });
            }
            Action::Right | Action::NextPanel => self.next_panel(1),
            Action::Left | Action::PrevPanel => self.next_panel(-1),
            // A weight moved and not applied: Enter asks to apply it, whatever has the focus.
            Action::Open if self.pending().is_some() || self.ui.focus == Focus::Canary => {
                self.ask_weight();
            }
            Action::Open => self.open(),
            Action::Back => self.back(),
            Action::Zoom => self.ui.zoom = !self.ui.zoom,
            Action::Yank => self.yank(),
            Action::NextProblem | Action::PrevProblem => {
                let newer = action == Action::NextProblem;
                let rows = self.log_rows();
                if !self.logs.jump_to_problem(newer, rows) {
                    let way = if newer { "newer" } else { "older" };
                    self.say(
                        Level::Info,
                        format!("no {way} warning or error in the log pane (as it is filtered)"),
                    );
                }
            }
            Action::Wrap => {
                self.logs.wrap = !self.logs.wrap;
                let said = if self.logs.wrap {
                    "log lines wrap in full (w: cut them to the pane again)"
                } else {
                    "log lines are cut to the pane (w: wrap them in full)"
                };
                self.say(Level::Info, said);
            }

            Action::Search => self.search(),
            Action::CycleLevel => {
                self.logs.filter.min_level = match self.logs.filter.min_level {
                    None => Some(Level::Info),
                    Some(Level::Info) => Some(Level::Warn),
                    Some(Level::Warn) => Some(Level::Error),
                    _ => None,
                };
            }
            Action::FilterTarget => self.filter_target(),
            other => return self.act(other),
        }
        None
    }

    fn on_modal(&mut self, action: &Action) -> Option<Command> {
        let mut top = self.ui.modals.pop()?;
        let reply = top.update(action, self);
        match reply {
            Reply::Keep => self.ui.modals.push(top),
            Reply::Close => {}
            Reply::CloseSaying(level, text) => self.say(level, text),
            Reply::Say(level, text) => {
                self.ui.modals.push(top);
                self.say(level, text);
            }
            Reply::Send(command) => return Some(self.sent(command)),
            Reply::Then(Action::Quit) if matches!(top, Modal::Quit(_)) => {
                self.ui.should_quit = true
            }
            Reply::Then(action) => return self.on_screen(action),
            Reply::Open(next) => self.ui.modals.push(*next),
            Reply::Filter(of, text) => self.set_filter(of, text),
            Reply::FilterLive(of, text) => {
                self.ui.modals.push(top);
                self.set_filter(of, text);
            }
            Reply::Run(verb, line) => {
                if self.ui.command_history.last() != Some(&line) {
                    self.ui.command_history.push(line);
                }
                return self.run(verb);
            }
        }
        None
    }

    /// A confirmed command leaves: what it starts is opened once it shows.
    fn sent(&mut self, command: Command) -> Command {
        if let Command::LeaveUnwatched { ids, reason } = &command {
            // Journaled by the session as the console quits (its engine stops right after).
            self.ui.leave_unwatched = Some((ids.clone(), reason.clone()));
            self.ui.should_quit = true;
        }
        if let Command::Operator {
            id,
            command: crate::deploy::command::OperatorCommand::Weight(w),
            ..
        } = &command
        {
            self.ui.pending_weight = None;
            let decisions = self
                .snap
                .deployments
                .iter()
                .find(|d| d.id == *id)
                .and_then(|d| d.canary.as_ref())
                .map_or(0, |c| c.status.decisions.len());
            self.ui.applying = Some(Applying {
                id: id.clone(),
                weight: *w,
                at: self.ui.now,
                decisions,
            });
        }
        if let Command::Deploy {
            application,
            environment,
            ..
        }
        | Command::Rollback {
            application,
            environment,
            ..
        }
        | Command::Test {
            application,
            environment,
            ..
        } = &command
        {
            let known = self.snap.deployments.iter().map(|d| d.id.clone()).collect();
            self.ui.follow_started = Some((
                format!("{application}/{environment}"),
                known,
                self.ui.now + FOLLOW_STARTED_MS,
            ));
        }
        command
    }

    /// The deployment screen's canary, if it shows one.
    pub fn canary(&self) -> Option<&DeploymentView> {
        self.deployment().filter(|d| d.canary.is_some())
    }

    /// The arrows move the slider of the canary on screen (a live one).
    pub fn slider(&self) -> bool {
        self.canary().is_some_and(|d| d.status.is_live())
    }

    /// The pending weight of the canary on screen, if one was moved.
    pub fn pending(&self) -> Option<u32> {
        let d = self.canary()?;
        self.ui
            .pending_weight
            .as_ref()
            .filter(|(id, _)| *id == d.id)
            .map(|(_, w)| *w)
    }

    /// The weight sent for the canary on screen and not yet read back, if one is.
    pub fn applying(&self) -> Option<u32> {
        let d = self.canary()?;
        self.ui
            .applying
            .as_ref()
            .filter(|a| a.id == d.id)
            .map(|a| a.weight)
    }

    /// The command just sent never reached the engine (its queue was full).
    pub fn not_sent(&mut self) {
        self.ui.applying = None;
        self.say(
            Level::Warn,
            "the engine is busy: that command was not sent; press it again",
        );
    }

    /// The terminal is smaller than the console can be read in.
    pub fn too_small(&self) -> bool {
        self.ui.size.0 < layout::MIN.0 || self.ui.size.1 < layout::MIN.1
    }
}
