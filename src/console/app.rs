//! The console's state and its one transition function. `App::update` is synchronous: it
//! changes only UI state and returns at most one `Command` for the engine; the loop sends it.
//! This file keeps the navigation (screens, panels, selections, filters, zoom, messages);
//! what the keys that act ask is in [`asks`], the command line's verbs in [`verbs`], what a new
//! snapshot changes in [`snapshot`], and every dialog in [`dialog`]. The screens
//! (`console::view`) read the app through [`ViewCtx`]; nothing here reads them.

mod asks;
pub mod dialog;
pub mod keys;
mod lists;
mod navigate;
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
pub use lists::{FilterOf, headline, headline_rows};

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

/// Which panel has the keyboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    /// Home: what waits on a human.
    Inbox,
    /// Home: applications and environments.
    Apps,
    /// Home: deployments.
    Deployments,
    /// Deployment: targets.
    Targets,
    /// Deployment: log lines.
    Logs,
    /// Deployment: lifecycle hooks.
    Hooks,
    /// Deployment: the canary (its slider takes ←/→).
    Canary,
}

impl Focus {
    /// The panel's name, as its title says it.
    pub fn name(self) -> &'static str {
        match self {
            Focus::Inbox => "Waiting on you",
            Focus::Apps => "Applications",
            Focus::Deployments => "Deployments",
            Focus::Targets => "Targets",
            Focus::Logs => "Logs",
            Focus::Hooks => "Hooks",
            Focus::Canary => "Canary",
        }
    }
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

/// Filters of the lists, each typed with `/` while the list has the focus.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    /// Home's applications.
    pub apps: String,
    /// Home's deployments.
    pub deployments: String,
    /// The deployment on screen's targets (cleared when another opens).
    pub targets: String,
}

/// Everything a screen or a dialog reads when it draws: the console and the colours.
#[derive(Debug, Clone, Copy)]
pub struct ViewCtx<'a> {
    /// The console.
    pub app: &'a App,
    /// Colours.
    pub theme: &'a super::theme::Theme,
}

/// The console.
#[derive(Debug, Clone)]
pub struct App {
    /// The engine's latest state.
    pub snap: Arc<Snapshot>,
    /// The log pane.
    pub logs: LogPane,
    /// The current screen.
    pub screen: Screen,
    /// Focused panel.
    pub focus: Focus,
    /// Selected application/environment on Home (in the filtered list).
    pub app_row: usize,
    /// Selected deployment on Home (in the filtered list).
    pub deployment_row: usize,
    /// Selected target on the deployment screen (in the filtered list).
    pub target_row: usize,
    /// Selected hook on the deployment screen.
    pub hook_row: usize,
    /// The selected row of home's "waiting on you" panel.
    pub inbox_row: usize,
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
    /// The lists' filters.
    pub filters: Filters,
    /// The focused pane takes the whole screen.
    pub zoom: bool,
    /// Lines run on the command line, oldest first.
    pub command_history: Vec<String>,
    /// Deployments whose earlier log lines were asked for.
    history_asked: std::collections::BTreeSet<String>,
    last_notice: u64,
}

impl App {
    /// A console on an empty snapshot.
    pub fn new(readonly: bool, now: i64) -> Self {
        App {
            snap: Arc::new(Snapshot::default()),
            logs: LogPane::default(),
            screen: Screen::Home,
            focus: Focus::Apps,
            app_row: 0,
            deployment_row: 0,
            target_row: 0,
            hook_row: 0,
            inbox_row: 0,
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
            filters: Filters::default(),
            zoom: false,
            command_history: Vec::new(),
            history_asked: std::collections::BTreeSet::new(),
            last_notice: 0,
        }
    }

    /// What has the keyboard.
    pub fn mode(&self) -> Mode {
        self.modals.last().map_or(Mode::Normal, Modal::mode)
    }

    /// The deployment the deployment screen shows.
    pub fn deployment(&self) -> Option<&DeploymentView> {
        match &self.screen {
            Screen::Deployment(id) => self.snap.deployments.iter().find(|d| &d.id == id),
            Screen::Home => None,
        }
    }

    /// The selected application/environment: on Home, the Applications panel's (when it has
    /// the focus); on a deployment's screen, the deployment's.
    pub fn selected_app(&self) -> Option<&AppEnv> {
        match self.deployment() {
            Some(d) => self.app_of(&d.application, &d.environment),
            None if self.focus == Focus::Apps => self.visible_apps().get(self.app_row).copied(),
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

    /// What waits on a human, most urgent first (home's first panel).
    pub fn inbox(&self) -> Vec<crate::deploy::inbox::Item> {
        let locks: Vec<_> = self
            .snap
            .apps
            .iter()
            .filter_map(|a| a.lock.clone())
            .collect();
        let mut items = crate::deploy::inbox::items(&self.snap.deployments, &locks, self.now);
        items.extend(crate::deploy::inbox::parked_items(&self.snap.parked));
        items
    }

    /// The selected deployment (Home list or the deployment screen).
    pub fn selected_deployment(&self) -> Option<&DeploymentView> {
        self.deployment().or_else(|| match self.focus {
            Focus::Deployments => self.visible_deployments().get(self.deployment_row).copied(),
            Focus::Inbox => {
                let id = self.inbox().get(self.inbox_row)?.deployment.clone()?;
                self.snap.deployments.iter().find(|d| d.id == id)
            }
            _ => None,
        })
    }

    /// The selected target of the deployment screen.
    pub fn selected_target(&self) -> Option<&TargetView> {
        self.visible_targets().get(self.target_row).copied()
    }

    /// The message the status line shows now, and how serious it is: the last one said, else
    /// what the database refuses while it lasts. On a deployment's screen its id goes without
    /// saying.
    pub fn status(&self) -> Option<(Level, String)> {
        let (level, text) = match (&self.flash, &self.snap.store_trouble) {
            (Some(f), _) => (f.level, f.text.clone()),
            (None, Some(t)) => (Level::Error, format!("⚠ {t}")),
            (None, None) => return None,
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
        let width = usize::from(self.size.0.saturating_sub(1)).max(20);
        let rows = dialog::wrap(&text, width).len();
        u16::try_from(rows.clamp(1, layout::STATUS_ROWS)).unwrap_or(1)
    }

    /// Where the deployment screen's panels are at the current size.
    pub fn deployment_layout(&self) -> Option<layout::Deployment> {
        let d = self.deployment()?;
        let [_, body, _, _] = layout::screen(
            Rect::new(0, 0, self.size.0, self.size.1),
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
        if self.zoom && self.focus == Focus::Logs {
            let [_, body, _, _] = layout::screen(
                Rect::new(0, 0, self.size.0, self.size.1),
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
            at: self.now,
        };
        self.messages.push_back(f.clone());
        while self.messages.len() > MESSAGES {
            self.messages.pop_front();
        }
        self.flash = Some(f);
    }

    fn refuse_readonly(&mut self, what: &str) -> bool {
        if self.readonly {
            self.say(
                Level::Warn,
                format!("read-only console: {what} is disabled (started with --readonly)"),
            );
        }
        self.readonly
    }

    /// Applies `action`; returns the command to send, if any.
    pub fn update(&mut self, action: Action) -> Option<Command> {
        let command = self.apply(action);
        // A deployment shown for the first time: its log lines from before this console.
        if command.is_none()
            && let Screen::Deployment(id) = &self.screen
            && !self.history_asked.contains(id)
        {
            self.history_asked.insert(id.clone());
            return Some(Command::LoadLogs { id: id.clone() });
        }
        command
    }

    fn apply(&mut self, action: Action) -> Option<Command> {
        let was_dirty = self.dirty;
        self.dirty = true;
        match action {
            Action::Tick(now) => {
                self.tick(now, was_dirty);
                None
            }
            Action::Resize(w, h) => {
                self.size = (w, h);
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
                self.redraw = true;
                None
            }
            other => {
                // A key: an information or a warning had its moment; an error stays until Esc.
                if self.flash.as_ref().is_some_and(|f| f.level < Level::Error) {
                    self.flash = None;
                }
                if self.modals.is_empty() {
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
        let second = now / 1000 != self.now / 1000;
        let clock = match &self.screen {
            Screen::Deployment(_) => self.deployment().is_some_and(|d| d.status.is_live()),
            Screen::Home => self.snap.deployments.iter().any(|d| d.status.is_live()),
        };
        self.now = now;
        let expired = self.flash.as_ref().is_some_and(|f| match f.level {
            Level::Error => false,
            Level::Warn => now - f.at > WARN_MS,
            _ => now - f.at > FLASH_MS,
        });
        if expired {
            self.flash = None;
        }
        // An answer that never comes (an engine gone) is not awaited on screen for ever.
        let stale = self
            .applying
            .as_ref()
            .is_some_and(|a| now - a.at > APPLYING_MS);
        if stale {
            self.applying = None;
        }
        // Time alone never un-dirties a frame still waiting to be drawn.
        self.dirty = was_dirty || (second && clock) || expired || stale;
    }

    fn on_screen(&mut self, action: Action) -> Option<Command> {
        match action {
            Action::Help => self.modals.push(Modal::Help(dialog::help::Help::default())),
            Action::EngineLog => self.modals.push(Modal::EngineLog),
            Action::Messages => self
                .modals
                .push(Modal::Messages(dialog::messages::Messages::default())),
            Action::CommandLine => {
                self.modals
                    .push(Modal::Command(dialog::command::CommandLine::with_history(
                        self.command_history.clone(),
                    )))
            }
            Action::Quit => self.quit(),
            Action::Up => self.move_by(-1),
            Action::Down => self.move_by(1),
            Action::PageUp => self.page(-1),
            Action::PageDown => self.page(1),
            Action::Top => self.top(),
            Action::Bottom => self.bottom(),
            // The canary panel's arrows move its slider; every other panel's move the focus.
            Action::Left | Action::Right if self.focus == Focus::Canary => {
                self.nudge(if action == Action::Left { -1 } else { 1 });
            }
            Action::Right | Action::NextPanel => self.next_panel(1),
            Action::Left | Action::PrevPanel => self.next_panel(-1),
            Action::Open if self.focus == Focus::Canary => self.ask_weight(),
            Action::Open => self.open(),
            Action::Back => self.back(),
            Action::Zoom => self.zoom = !self.zoom,
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
        let mut top = self.modals.pop()?;
        let reply = top.update(action, self);
        match reply {
            Reply::Keep => self.modals.push(top),
            Reply::Close => {}
            Reply::CloseSaying(level, text) => self.say(level, text),
            Reply::Say(level, text) => {
                self.modals.push(top);
                self.say(level, text);
            }
            Reply::Send(command) => return Some(self.sent(command)),
            Reply::Then(Action::Quit) if matches!(top, Modal::Quit(_)) => self.should_quit = true,
            Reply::Then(action) => return self.on_screen(action),
            Reply::Open(next) => self.modals.push(*next),
            Reply::Filter(of, text) => self.set_filter(of, text),
            Reply::Run(verb, line) => {
                if self.command_history.last() != Some(&line) {
                    self.command_history.push(line);
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
            self.leave_unwatched = Some((ids.clone(), reason.clone()));
            self.should_quit = true;
        }
        if let Command::Operator {
            id,
            command: crate::deploy::command::OperatorCommand::Weight(w),
            ..
        } = &command
        {
            self.pending_weight = None;
            let decisions = self
                .snap
                .deployments
                .iter()
                .find(|d| d.id == *id)
                .and_then(|d| d.canary.as_ref())
                .map_or(0, |c| c.status.decisions.len());
            self.applying = Some(Applying {
                id: id.clone(),
                weight: *w,
                at: self.now,
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
            self.follow_started = Some((
                format!("{application}/{environment}"),
                known,
                self.now + FOLLOW_STARTED_MS,
            ));
        }
        command
    }

    /// The deployment screen's canary, if it shows one.
    pub fn canary(&self) -> Option<&DeploymentView> {
        self.deployment().filter(|d| d.canary.is_some())
    }

    /// The pending weight of the canary on screen, if one was moved.
    pub fn pending(&self) -> Option<u32> {
        let d = self.canary()?;
        self.pending_weight
            .as_ref()
            .filter(|(id, _)| *id == d.id)
            .map(|(_, w)| *w)
    }

    /// The weight sent for the canary on screen and not yet read back, if one is.
    pub fn applying(&self) -> Option<u32> {
        let d = self.canary()?;
        self.applying
            .as_ref()
            .filter(|a| a.id == d.id)
            .map(|a| a.weight)
    }

    /// The command just sent never reached the engine (its queue was full).
    pub fn not_sent(&mut self) {
        self.applying = None;
        self.say(
            Level::Warn,
            "the engine is busy: that command was not sent; press it again",
        );
    }

    /// The terminal is smaller than the console can be read in.
    pub fn too_small(&self) -> bool {
        self.size.0 < layout::MIN.0 || self.size.1 < layout::MIN.1
    }
}
