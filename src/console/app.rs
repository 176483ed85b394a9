//! The console's state and its one transition function. `App::update` is synchronous: it
//! changes only UI state and returns at most one `Command` for the engine; the loop sends it.
//! Destructive actions go through a confirmation ([`dialogs`]) that names the environment,
//! application and targets, starts on the button that changes nothing, ignores an Enter that
//! arrives right after it opened (a held key), and in production wants the environment's name
//! typed.

mod dialogs;

use std::sync::Arc;

use ratatui::layout::Rect;

use super::action::Action;
use super::keymap::Mode;
use super::layout;
use super::logpane::LogPane;
use crate::deploy::command::{OperatorCommand, why_not};
use crate::deploy::state::{DeploymentState, Kind, TargetState, Topic};
use crate::deploy::view::{DeploymentView, TargetView};
use crate::engine::handle::{AppEnv, Command, EngineMode, Snapshot};
use crate::plugin::Level;

pub use dialogs::{Choice, Confirm, VersionChoice, Versions};

/// An Enter this soon after a confirmation opened is a held key, not a decision.
pub const CONFIRM_GUARD_MS: i64 = 400;
/// How long a status-line message stays (the next key clears it sooner).
pub const FLASH_MS: i64 = 6_000;
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
    /// Deployment: the canary.
    Canary,
}

/// A dialog on top of the screen.
#[derive(Debug, Clone, PartialEq)]
pub enum Modal {
    /// Keys, scrolled by `scroll` lines.
    Help { scroll: usize },
    /// The engine's own log.
    EngineLog,
    /// An action awaiting a decision.
    Confirm(Confirm),
    /// Leave while this console's engine still runs deployments.
    Quit {
        opened_at: i64,
        choice: Choice,
        running: Vec<String>,
    },
    /// The plan of an application's environment.
    Plan {
        application: String,
        environment: String,
        scroll: usize,
    },
    /// The log filter being typed.
    Search { text: String },
    /// Which version to deploy.
    Versions(Versions),
    /// One target of a deployment in full: message, attempts, its log lines.
    Target {
        deployment: String,
        name: String,
        scroll: usize,
    },
    /// One hook run in full: its message, output, delete actions, its log lines.
    Hook {
        deployment: String,
        event: crate::config::Event,
        name: String,
        scroll: usize,
    },
}

/// How long the console waits for a deployment it started to show before it stops looking.
const FOLLOW_STARTED_MS: i64 = 15_000;

/// A message at the bottom of the screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flash {
    /// Text.
    pub text: String,
    /// Severity.
    pub level: Level,
    /// Epoch ms.
    pub at: i64,
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
    /// Selected application/environment on Home.
    pub app_row: usize,
    /// Selected deployment on Home.
    pub deployment_row: usize,
    /// Selected target on the deployment screen.
    pub target_row: usize,
    /// Selected hook on the deployment screen.
    pub hook_row: usize,
    /// The selected row of home's "waiting on you" panel.
    pub inbox_row: usize,
    /// Dialogs, topmost last.
    pub modals: Vec<Modal>,
    /// The latest message.
    pub flash: Option<Flash>,
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
    /// A canary weight moved with ←/→ and not applied yet: the deployment, the weight.
    pub pending_weight: Option<(String, u32)>,
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
            readonly,
            now,
            size: (80, 24),
            should_quit: false,
            dirty: true,
            follow_next: false,
            follow_started: None,
            follow_targets: true,
            stop_on_quit: false,
            pending_weight: None,
            history_asked: std::collections::BTreeSet::new(),
            last_notice: 0,
        }
    }

    /// What has the keyboard.
    pub fn mode(&self) -> Mode {
        match self.modals.last() {
            None => Mode::Normal,
            Some(Modal::Help { .. } | Modal::EngineLog) => Mode::Help,
            Some(Modal::Confirm(c)) if c.typed.is_some() => Mode::TypedConfirm,
            Some(Modal::Confirm(_) | Modal::Quit { .. }) => Mode::Confirm,
            Some(Modal::Plan { .. }) => Mode::Plan,
            Some(Modal::Search { .. }) => Mode::Prompt,
            Some(Modal::Versions(v)) if v.typing.is_some() => Mode::Prompt,
            Some(Modal::Versions(_) | Modal::Target { .. } | Modal::Hook { .. }) => Mode::List,
        }
    }

    /// The deployment the deployment screen shows.
    pub fn deployment(&self) -> Option<&DeploymentView> {
        match &self.screen {
            Screen::Deployment(id) => self.snap.deployments.iter().find(|d| &d.id == id),
            Screen::Home => None,
        }
    }

    /// The selected application/environment (Home), or the deployment's.
    pub fn selected_app(&self) -> Option<&AppEnv> {
        match self.deployment() {
            Some(d) => self.app_of(&d.application, &d.environment),
            None => self.snap.apps.get(self.app_row),
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
        crate::deploy::inbox::items(&self.snap.deployments, &locks, self.now)
    }

    /// The selected deployment (Home list or the deployment screen).
    pub fn selected_deployment(&self) -> Option<&DeploymentView> {
        self.deployment().or_else(|| match self.focus {
            Focus::Deployments => self.snap.deployments.get(self.deployment_row),
            Focus::Inbox => {
                let id = self.inbox().get(self.inbox_row)?.deployment.clone()?;
                self.snap.deployments.iter().find(|d| d.id == id)
            }
            _ => None,
        })
    }

    /// The selected target of the deployment screen.
    pub fn selected_target(&self) -> Option<&TargetView> {
        self.deployment()?.targets.get(self.target_row)
    }

    /// Where the deployment screen's panels are at the current size.
    pub fn deployment_layout(&self) -> Option<layout::Deployment> {
        let d = self.deployment()?;
        let [_, body, _, _] = layout::screen(
            Rect::new(0, 0, self.size.0, self.size.1),
            self.flash.is_some() || self.snap.store_trouble.is_some(),
        );
        Some(layout::deployment(
            body,
            d.targets.len(),
            d.headline_failure().is_some(),
            d.canary.is_some(),
        ))
    }

    /// Log lines the log pane shows now.
    pub fn log_rows(&self) -> usize {
        self.deployment_layout()
            .map_or(PAGE, |l| layout::log_rows(l.logs))
    }

    fn say(&mut self, level: Level, text: impl Into<String>) {
        self.flash = Some(Flash {
            text: text.into(),
            level,
            at: self.now,
        });
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
                // Redraw for time only when something on screen shows it: a running clock
                // changes once a second; an old flash goes away.
                let second = now / 1000 != self.now / 1000;
                let clock = match &self.screen {
                    Screen::Deployment(_) => self.deployment().is_some_and(|d| d.status.is_live()),
                    Screen::Home => self.snap.deployments.iter().any(|d| d.status.is_live()),
                };
                self.now = now;
                let expired = self.flash.as_ref().is_some_and(|f| now - f.at > FLASH_MS);
                if expired {
                    self.flash = None;
                }
                // Time alone never un-dirties a frame still waiting to be drawn.
                self.dirty = was_dirty || (second && clock) || expired;
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
            other => {
                // A key: the last message had its moment.
                self.flash = None;
                if self.modals.is_empty() {
                    self.on_screen(other)
                } else {
                    self.on_modal(other)
                }
            }
        }
    }

    fn on_snapshot(&mut self, s: Arc<Snapshot>) {
        if let Some(n) = s.notices.iter().rev().find(|n| n.id > self.last_notice) {
            self.flash = Some(Flash {
                text: n.text.clone(),
                level: n.level,
                at: self.now,
            });
        }
        self.last_notice = s.notices.last().map_or(self.last_notice, |n| n.id);
        self.snap = s;
        if self.follow_next
            && let Some(id) = self
                .snap
                .deployments
                .iter()
                .find(|d| d.status.is_live())
                .map(|d| d.id.clone())
        {
            self.follow_next = false;
            self.show(id);
        }
        if self
            .follow_started
            .as_ref()
            .is_some_and(|(_, _, until)| self.now > *until)
        {
            self.follow_started = None;
        }
        // Finished already (a quick test run) or running: either way it is what was asked for.
        if let Some((subject, known, _)) = &self.follow_started
            && let Some(id) = self
                .snap
                .deployments
                .iter()
                .find(|d| d.subject() == *subject && !known.contains(&d.id))
                .map(|d| d.id.clone())
        {
            self.follow_started = None;
            self.show(id);
        }
        self.app_row = self.app_row.min(self.snap.apps.len().saturating_sub(1));
        self.deployment_row = self
            .deployment_row
            .min(self.snap.deployments.len().saturating_sub(1));
        let targets = self.deployment().map_or(0, |d| d.targets.len());
        self.target_row = self.target_row.min(targets.saturating_sub(1));
        if self.follow_targets
            && let Some(row) = self.first_to_watch()
        {
            self.target_row = row;
        }
    }

    fn on_screen(&mut self, action: Action) -> Option<Command> {
        match action {
            Action::Help => self.modals.push(Modal::Help { scroll: 0 }),
            Action::EngineLog => self.modals.push(Modal::EngineLog),
            Action::Quit => self.quit(),
            Action::Up => self.move_by(-1),
            Action::Down => self.move_by(1),
            Action::PageUp => self.page(-1),
            Action::PageDown => self.page(1),
            Action::Top => self.top(),
            Action::Bottom => self.bottom(),
            // On a canary ←/→ move its traffic slider; elsewhere (and Tab always) the panels.
            Action::Left | Action::Right if self.canary().is_some() => {
                self.nudge(if action == Action::Left { -1 } else { 1 });
            }
            Action::Right | Action::NextPanel => self.next_panel(1),
            Action::Left | Action::PrevPanel => self.next_panel(-1),
            Action::Open if self.pending().is_some() => self.ask_weight(),
            Action::Open => self.open(),
            Action::Back if self.pending().is_some() => {
                self.pending_weight = None;
                self.say(
                    Level::Info,
                    "the pending weight was dropped: nothing was sent",
                );
            }
            Action::Back => self.back(),
            Action::Deploy => self.pick_version(),
            Action::DryRun => return self.dry_run(),
            Action::Rollback => self.ask_rollback(),
            Action::Cancel => self.ask_cancel(),
            Action::PauseResume => return self.pause_resume(),
            Action::Retry => self.ask_retry(),
            Action::Skip => self.ask_skip(),
            Action::Abort => self.ask_abort(),
            Action::Promote => self.ask_canary(Topic::Promote, dialogs::promote),
            Action::PromoteFull => self.ask_canary(Topic::Promote, dialogs::promote_full),
            Action::Revert => self.ask_canary(Topic::Revert, dialogs::revert),
            Action::StepBack => self.ask_back(),
            Action::TestHooks => self.ask_tests(),
            Action::Search => self.modals.push(Modal::Search {
                text: self.logs.filter.describe(),
            }),
            Action::CycleLevel => {
                self.logs.filter.min_level = match self.logs.filter.min_level {
                    None => Some(Level::Info),
                    Some(Level::Info) => Some(Level::Warn),
                    Some(Level::Warn) => Some(Level::Error),
                    _ => None,
                };
            }
            Action::FilterTarget => self.filter_target(),
            _ => {}
        }
        None
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

    /// ←/→: the pending weight moves by the canary's slider step (applied with Enter).
    fn nudge(&mut self, dir: i32) {
        let Some(d) = self.canary().cloned() else {
            return;
        };
        if self.refuse_readonly("moving the canary's traffic") {
            return;
        }
        if !d.takes(Topic::Weight) {
            self.say(Level::Warn, why_not(&d, "weight"));
            return;
        }
        let Some(c) = &d.canary else { return };
        let from = self.pending().unwrap_or(c.status.weight);
        let step = i32::try_from(c.plan.slider_step).unwrap_or(5);
        let to = u32::try_from((i32::try_from(from).unwrap_or(0) + dir * step).clamp(0, 100))
            .unwrap_or(0);
        if to == c.status.weight {
            self.pending_weight = None;
        } else {
            self.pending_weight = Some((d.id.clone(), to));
        }
    }

    /// Enter on a moved slider: the split to confirm.
    fn ask_weight(&mut self) {
        let (Some(d), Some(w)) = (self.canary().cloned(), self.pending()) else {
            return;
        };
        if self.refuse_readonly("setting the canary's weight") {
            return;
        }
        if !d.takes(Topic::Weight) {
            self.say(Level::Warn, why_not(&d, "weight"));
            return;
        }
        let c = dialogs::weight(&d, w, self.now);
        self.confirm(c);
    }

    /// `p`, `P`, `x`: a canary's promote or revert, asked first.
    fn ask_canary(&mut self, topic: Topic, dialog: fn(&DeploymentView, i64) -> Confirm) {
        let Some(d) = self.selected_deployment().cloned() else {
            self.say(Level::Warn, "select a deployment first");
            return;
        };
        if d.canary.is_none() {
            self.say(
                Level::Warn,
                format!(
                    "{} is a {}, not a canary: {} moves a canary's traffic",
                    d.id,
                    d.kind,
                    topic.as_str()
                ),
            );
            return;
        }
        if self.refuse_readonly(topic.as_str()) {
            return;
        }
        if !d.takes(topic) {
            self.say(Level::Warn, why_not(&d, topic.as_str()));
            return;
        }
        self.pending_weight = None;
        let c = dialog(&d, self.now);
        self.confirm(c);
    }

    /// `t`: the test hooks of the selected application and environment, asked first.
    fn ask_tests(&mut self) {
        if self.refuse_readonly("running the test hooks (it records a run)") {
            return;
        }
        let Some(a) = self.plan_or_selected_app().cloned() else {
            self.say(Level::Warn, "select an application and environment first");
            return;
        };
        if a.tests.is_empty() {
            self.say(
                Level::Warn,
                format!(
                    "{}/{} has no test hooks (a hook with `events: [test]`)",
                    a.application, a.environment
                ),
            );
            return;
        }
        let c = dialogs::tests(&a, self.now);
        self.confirm(c);
    }

    /// `b`: back to the previous step's weight.
    fn ask_back(&mut self) {
        let Some(d) = self.canary().cloned() else {
            self.say(
                Level::Warn,
                "b steps a canary back: open a canary deployment first",
            );
            return;
        };
        if self.refuse_readonly("stepping the canary back") {
            return;
        }
        let to = d.canary.as_ref().and_then(|c| c.status.back_to);
        match to {
            _ if !d.takes(Topic::Back) => self.say(Level::Warn, why_not(&d, "back")),
            None => self.say(
                Level::Warn,
                format!(
                    "{} has set no weight yet: there is nothing to go back to",
                    d.id
                ),
            ),
            Some(to) => {
                self.pending_weight = None;
                let c = dialogs::back(&d, to, self.now);
                self.confirm(c);
            }
        }
    }

    fn quit(&mut self) {
        let running: Vec<String> = if self.snap.mode == Some(EngineMode::InProcess) {
            self.snap
                .deployments
                .iter()
                .filter(|d| d.status.is_live() && !d.state.is_waiting())
                .map(|d| d.id.clone())
                .collect()
        } else {
            Vec::new()
        };
        if running.is_empty() {
            self.should_quit = true;
        } else {
            self.modals.push(Modal::Quit {
                opened_at: self.now,
                choice: Choice::Cancel,
                running,
            });
        }
    }

    fn move_by(&mut self, delta: isize) {
        let step = |row: usize, len: usize| -> usize {
            if len == 0 {
                0
            } else {
                row.saturating_add_signed(delta).min(len - 1)
            }
        };
        let rows = self.log_rows();
        match self.focus {
            Focus::Inbox => self.inbox_row = step(self.inbox_row, self.inbox().len()),
            Focus::Apps => self.app_row = step(self.app_row, self.snap.apps.len()),
            Focus::Deployments => {
                self.deployment_row = step(self.deployment_row, self.snap.deployments.len())
            }
            Focus::Targets => {
                let len = self.deployment().map_or(0, |d| d.targets.len());
                self.target_row = step(self.target_row, len);
                self.follow_targets = false;
            }
            Focus::Logs if delta < 0 => self.logs.scroll_up(delta.unsigned_abs(), rows),
            Focus::Logs => self.logs.scroll_down(delta.unsigned_abs(), rows),
            Focus::Hooks => {
                let len = self.deployment().map_or(0, |d| d.hooks.len());
                self.hook_row = step(self.hook_row, len);
            }
            Focus::Canary => {}
        }
    }

    fn page(&mut self, dir: isize) {
        if self.focus == Focus::Logs
            || matches!(self.screen, Screen::Deployment(_)) && self.focus != Focus::Targets
        {
            let rows = self.log_rows();
            if dir < 0 {
                self.logs.scroll_up(rows, rows);
            } else {
                self.logs.scroll_down(rows, rows);
            }
        } else {
            self.move_by(dir * PAGE as isize);
        }
    }

    fn top(&mut self) {
        match self.focus {
            Focus::Logs => {
                let rows = self.log_rows();
                self.logs.top(rows);
            }
            _ => self.move_by(-(isize::MAX / 2)),
        }
    }

    fn bottom(&mut self) {
        match self.focus {
            Focus::Logs => self.logs.follow(),
            Focus::Targets => self.follow_targets = true,
            _ => self.move_by(isize::MAX / 2),
        }
    }

    /// The panels one can move between: only those on screen (hooks when there are some, the
    /// canary's side panel on a wide screen).
    fn panels(&self) -> Vec<Focus> {
        match self.screen {
            Screen::Home if self.inbox().is_empty() => vec![Focus::Apps, Focus::Deployments],
            Screen::Home => vec![Focus::Inbox, Focus::Apps, Focus::Deployments],
            Screen::Deployment(_) if self.deployment().is_some_and(|d| d.kind == Kind::Test) => {
                vec![Focus::Hooks, Focus::Logs]
            }
            Screen::Deployment(_) => {
                let mut v = vec![Focus::Targets, Focus::Logs];
                let d = self.deployment();
                if d.is_some_and(|d| !d.hooks.is_empty()) {
                    v.push(Focus::Hooks);
                }
                if self.size.0 >= layout::WIDE && d.is_some_and(|d| d.canary.is_some()) {
                    v.push(Focus::Canary);
                }
                v
            }
        }
    }

    /// Moves the focus by `dir` panels (0: back onto a panel that is on screen).
    fn next_panel(&mut self, dir: i32) {
        let order = self.panels();
        let i = order.iter().position(|f| *f == self.focus).unwrap_or(0) as i32;
        let n = order.len() as i32;
        self.focus = order[usize::try_from((i + dir).rem_euclid(n)).unwrap_or(0)];
    }

    fn open(&mut self) {
        match (&self.screen, self.focus) {
            (Screen::Home, Focus::Apps) => {
                if let Some(a) = self.snap.apps.get(self.app_row) {
                    self.modals.push(Modal::Plan {
                        application: a.application.clone(),
                        environment: a.environment.clone(),
                        scroll: 0,
                    });
                }
            }
            (Screen::Home, Focus::Inbox) => {
                let Some(item) = self.inbox().into_iter().nth(self.inbox_row) else {
                    return;
                };
                match item.deployment {
                    Some(id) => self.show(id),
                    None => {
                        if let Some(row) = self.snap.apps.iter().position(|a| {
                            format!("{}/{}", a.application, a.environment) == item.subject
                        }) {
                            self.app_row = row;
                            self.focus = Focus::Apps;
                        }
                    }
                }
            }
            (Screen::Home, _) => {
                if let Some(d) = self.snap.deployments.get(self.deployment_row) {
                    self.show(d.id.clone());
                }
            }
            (Screen::Deployment(id), Focus::Targets) => {
                if let Some(t) = self.selected_target() {
                    self.modals.push(Modal::Target {
                        deployment: id.clone(),
                        name: t.name.clone(),
                        scroll: 0,
                    });
                }
            }
            (Screen::Deployment(id), Focus::Hooks) => {
                let hook = self
                    .deployment()
                    .and_then(|d| d.hooks.get(self.hook_row))
                    .map(|h| (h.event, h.name.clone()));
                if let Some((event, name)) = hook {
                    self.modals.push(Modal::Hook {
                        deployment: id.clone(),
                        event,
                        name,
                        scroll: 0,
                    });
                }
            }
            (Screen::Deployment(_), _) => self.filter_target(),
        }
    }

    /// Opens deployment `id`'s screen, with its log lines, on the target to look at first.
    pub fn show(&mut self, id: String) {
        self.logs.filter.deployment = Some(id.clone());
        self.logs.filter.target = None;
        self.logs.follow();
        self.screen = Screen::Deployment(id);
        self.hook_row = 0;
        self.focus = if self.deployment().is_some_and(|d| d.kind == Kind::Test) {
            Focus::Hooks
        } else {
            Focus::Targets
        };
        self.follow_targets = true;
        self.target_row = self.first_to_watch().unwrap_or(0);
    }

    /// The first target being worked on, failed, or still to come.
    fn first_to_watch(&self) -> Option<usize> {
        self.deployment()?.targets.iter().position(|t| {
            t.state.is_active() || t.state.is_failed() || t.state == TargetState::Pending
        })
    }

    fn back(&mut self) {
        if let Screen::Deployment(id) = &self.screen {
            if let Some(row) = self.snap.deployments.iter().position(|d| &d.id == id) {
                self.deployment_row = row;
            }
            self.screen = Screen::Home;
            self.focus = Focus::Deployments;
            self.logs.filter.deployment = None;
        }
    }

    fn filter_target(&mut self) {
        let name = self.selected_target().map(|t| t.name.clone());
        match (name, &self.logs.filter.target) {
            (Some(n), Some(cur)) if *cur == n => self.logs.filter.target = None,
            (Some(n), _) => self.logs.filter.target = Some(n),
            (None, _) => self.logs.filter.target = None,
        }
        self.logs.follow();
    }

    fn confirm(&mut self, confirm: Confirm) {
        self.modals
            .retain(|m| !matches!(m, Modal::Plan { .. } | Modal::Versions(_)));
        self.modals.push(Modal::Confirm(confirm));
    }

    fn plan_or_selected_app(&self) -> Option<&AppEnv> {
        if let Some(Modal::Plan {
            application,
            environment,
            ..
        }) = self.modals.last()
        {
            return self.app_of(application, environment);
        }
        self.selected_app()
    }

    /// `D`: which version to deploy.
    fn pick_version(&mut self) {
        if self.refuse_readonly("deploying") {
            return;
        }
        let Some(a) = self.plan_or_selected_app().cloned() else {
            self.say(Level::Warn, "select an application and environment first");
            return;
        };
        self.modals.retain(|m| !matches!(m, Modal::Plan { .. }));
        self.modals.push(Modal::Versions(Versions::of(&a)));
    }

    fn ask_deploy(&mut self, a: &AppEnv, version: String) {
        let c = dialogs::deploy(a, version, self.now);
        self.confirm(c);
    }

    fn dry_run(&mut self) -> Option<Command> {
        if self.refuse_readonly("a dry-run (it records a deployment)") {
            return None;
        }
        let a = self.plan_or_selected_app()?.clone();
        self.modals.retain(|m| !matches!(m, Modal::Plan { .. }));
        self.say(
            Level::Info,
            format!(
                "dry-run of {} {} on {} requested",
                a.application, a.version, a.environment
            ),
        );
        Some(Command::Deploy {
            application: a.application,
            environment: a.environment,
            version: None,
            dry_run: true,
            reason: None,
            force: false,
        })
    }

    fn ask_rollback(&mut self) {
        if self.refuse_readonly("rolling back") {
            return;
        }
        let Some(a) = self.plan_or_selected_app().cloned() else {
            self.say(Level::Warn, "select an application and environment first");
            return;
        };
        if a.rollback.is_empty() {
            self.say(
                Level::Warn,
                format!(
                    "nothing to roll back on {}/{}: no target has an earlier release with \
                     another version",
                    a.application, a.environment
                ),
            );
            return;
        }
        let awaiting = self.snap.deployments.iter().find(|d| {
            d.application == a.application
                && d.environment == a.environment
                && d.state == DeploymentState::FailedAwaiting
        });
        if let Some(d) = awaiting {
            let hint = if d.takes(Topic::Abort) {
                "A on it aborts and rolls back what it changed"
            } else {
                "decide on it first (r retry, s skip)"
            };
            self.say(
                Level::Warn,
                format!("{} failed and waits for a decision: {hint}", d.id),
            );
            return;
        }
        let c = dialogs::rollback(&a, self.now);
        self.confirm(c);
    }

    fn ask_cancel(&mut self) {
        if self.refuse_readonly("cancelling") {
            return;
        }
        let Some(d) = self.selected_deployment().cloned() else {
            self.say(Level::Warn, "select a deployment first");
            return;
        };
        if !d.status.is_live() {
            self.say(
                Level::Warn,
                format!("{} is not running ({})", d.id, d.state),
            );
            return;
        }
        let c = dialogs::cancel(&d, self.now);
        self.confirm(c);
    }

    fn pause_resume(&mut self) -> Option<Command> {
        let d = self.selected_deployment()?.clone();
        if self.refuse_readonly("pausing and resuming") {
            return None;
        }
        let act = |command| Command::Operator {
            id: d.id.clone(),
            command,
            reason: None,
        };
        if d.takes(Topic::Resume) {
            return Some(act(OperatorCommand::Resume));
        }
        if d.takes(Topic::Pause) {
            return Some(act(OperatorCommand::Pause));
        }
        if matches!(
            d.state,
            DeploymentState::Cancelled | DeploymentState::Interrupted
        ) {
            // Starting a stopped deployment again is a decision: it asks, like a deploy.
            let c = dialogs::resume(&d, self.now);
            self.confirm(c);
            return None;
        }
        self.say(Level::Warn, why_not(&d, "pause"));
        None
    }

    fn ask_retry(&mut self) {
        if self.refuse_readonly("retrying") {
            return;
        }
        let Some(d) = self.selected_deployment().cloned() else {
            self.say(Level::Warn, "select a deployment first");
            return;
        };
        if !d.takes(Topic::Retry) {
            self.say(Level::Warn, why_not(&d, "retry"));
            return;
        }
        let only = self
            .selected_target()
            .filter(|t| t.state.is_failed())
            .map(|t| t.name.clone());
        let c = dialogs::retry(&d, only, self.now);
        self.confirm(c);
    }

    fn ask_skip(&mut self) {
        if self.refuse_readonly("skipping a target") {
            return;
        }
        let (Some(d), Some(t)) = (self.deployment().cloned(), self.selected_target().cloned())
        else {
            self.say(Level::Warn, "open a deployment and select a target first");
            return;
        };
        if !d.takes(Topic::Skip) {
            self.say(Level::Warn, why_not(&d, "skip"));
            return;
        }
        if t.state.is_done() || t.state.is_active() {
            self.say(
                Level::Warn,
                format!(
                    "{} is {}: only targets that have not deployed can be left out",
                    t.name, t.state
                ),
            );
            return;
        }
        let live = self
            .selected_app()
            .and_then(|a| a.live_by_target.get(&t.name).cloned());
        let c = dialogs::skip(&d, &t, live, self.now);
        self.confirm(c);
    }

    fn ask_abort(&mut self) {
        if self.refuse_readonly("aborting") {
            return;
        }
        let Some(d) = self.selected_deployment().cloned() else {
            self.say(Level::Warn, "select a deployment first");
            return;
        };
        if !d.takes(Topic::Abort) {
            self.say(Level::Warn, why_not(&d, "abort"));
            return;
        }
        let c = dialogs::abort(&d, self.now);
        self.confirm(c);
    }

    fn on_modal(&mut self, action: Action) -> Option<Command> {
        let log_rows = self.log_rows();
        let top = self.modals.last_mut()?;
        match top {
            Modal::Help { scroll } => {
                match action {
                    Action::Dismiss => {
                        self.modals.pop();
                    }
                    Action::Up => *scroll = scroll.saturating_sub(1),
                    Action::Down => *scroll += 1,
                    Action::PageUp => *scroll = scroll.saturating_sub(PAGE),
                    Action::PageDown => *scroll += PAGE,
                    Action::Top => *scroll = 0,
                    Action::Bottom => *scroll = usize::MAX / 2,
                    _ => {}
                }
                None
            }
            Modal::EngineLog => {
                if matches!(action, Action::Dismiss) {
                    self.modals.pop();
                }
                None
            }
            Modal::Search { text } => match action {
                Action::Input(c) => {
                    text.push(c);
                    None
                }
                Action::Backspace => {
                    text.pop();
                    None
                }
                Action::ClearInput => {
                    text.clear();
                    None
                }
                Action::Submit => {
                    let typed = text.clone();
                    self.modals.pop();
                    self.logs.filter.parse_into(&typed);
                    self.logs.follow();
                    None
                }
                Action::Dismiss => {
                    self.modals.pop();
                    None
                }
                _ => None,
            },
            Modal::Plan { scroll, .. } => match action {
                Action::Dismiss => {
                    self.modals.pop();
                    None
                }
                Action::Up => {
                    *scroll = scroll.saturating_sub(1);
                    None
                }
                Action::Down => {
                    *scroll += 1;
                    None
                }
                Action::Deploy => {
                    self.pick_version();
                    None
                }
                Action::DryRun => self.dry_run(),
                Action::Rollback => {
                    self.ask_rollback();
                    None
                }
                _ => None,
            },
            Modal::Versions(v) => {
                let chosen = v.update(action);
                match chosen {
                    dialogs::Picked::Version(version) => {
                        let (app, env) = (v.application.clone(), v.environment.clone());
                        if let Some(a) = self.app_of(&app, &env).cloned() {
                            self.ask_deploy(&a, version);
                        }
                    }
                    dialogs::Picked::Closed => {
                        self.modals.pop();
                    }
                    dialogs::Picked::Nothing => {}
                }
                None
            }
            Modal::Hook { scroll, .. } => {
                match action {
                    Action::Dismiss => {
                        self.modals.pop();
                    }
                    Action::Up => *scroll = scroll.saturating_sub(1),
                    Action::Down => *scroll += 1,
                    Action::PageUp => *scroll = scroll.saturating_sub(log_rows),
                    Action::PageDown => *scroll += log_rows,
                    Action::Top => *scroll = 0,
                    Action::Bottom => *scroll = usize::MAX / 2,
                    _ => {}
                }
                None
            }
            Modal::Target { scroll, .. } => {
                match action {
                    Action::Dismiss => {
                        self.modals.pop();
                    }
                    Action::Up => *scroll = scroll.saturating_sub(1),
                    Action::Down => *scroll += 1,
                    Action::PageUp => *scroll = scroll.saturating_sub(log_rows),
                    Action::PageDown => *scroll += log_rows,
                    Action::Top => *scroll = 0,
                    Action::Bottom => *scroll = usize::MAX / 2,
                    Action::Retry => {
                        self.modals.pop();
                        self.ask_retry();
                    }
                    Action::Skip => {
                        self.modals.pop();
                        self.ask_skip();
                    }
                    Action::FilterTarget => {
                        self.modals.pop();
                        self.filter_target();
                    }
                    _ => {}
                }
                None
            }
            Modal::Quit {
                opened_at, choice, ..
            } => match action {
                Action::ChoiceToggle => {
                    *choice = choice.flip();
                    None
                }
                Action::Submit if self.now - *opened_at < CONFIRM_GUARD_MS => None,
                Action::Submit => {
                    let go = *choice == Choice::Confirm;
                    self.modals.pop();
                    self.should_quit = go;
                    None
                }
                Action::Dismiss => {
                    self.modals.pop();
                    None
                }
                _ => None,
            },
            Modal::Confirm(c) => {
                let now = self.now;
                match action {
                    Action::ChoiceToggle if c.typed.is_none() => {
                        c.choice = c.choice.flip();
                        None
                    }
                    // A typed confirmation: the name first; once it matches, the reason.
                    Action::Input(ch) => {
                        match &mut c.typed {
                            Some((expected, typed)) if typed != expected => typed.push(ch),
                            // What the journal would refuse is not typed in (a bidirectional
                            // override, an invisible character).
                            _ if crate::operator::check_reason(&ch.to_string()).is_err() => {}
                            _ => c.reason.push(ch),
                        }
                        None
                    }
                    Action::Backspace => {
                        match &mut c.typed {
                            Some((_, typed)) if c.reason.is_empty() => typed.pop(),
                            _ => c.reason.pop(),
                        };
                        None
                    }
                    Action::ClearInput => {
                        c.reason.clear();
                        if let Some((_, typed)) = &mut c.typed {
                            typed.clear();
                        }
                        None
                    }
                    Action::Submit if now - c.opened_at < CONFIRM_GUARD_MS => None,
                    Action::Submit => self.submit_confirm(),
                    Action::Dismiss => {
                        self.modals.pop();
                        self.say(Level::Info, "cancelled: nothing was done");
                        None
                    }
                    _ => None,
                }
            }
        }
    }

    fn submit_confirm(&mut self) -> Option<Command> {
        let Some(Modal::Confirm(c)) = self.modals.last().cloned() else {
            return None;
        };
        let go = match &c.typed {
            Some((expected, typed)) if typed == expected => true,
            Some((expected, _)) => {
                self.say(
                    Level::Warn,
                    format!("type `{expected}` exactly to confirm (Esc cancels)"),
                );
                return None;
            }
            None => c.choice == Choice::Confirm,
        };
        if go && c.needs_reason && c.reason.trim().is_empty() {
            self.say(
                Level::Warn,
                "the environment is locked: type why you go through the lock (Esc cancels)",
            );
            return None;
        }
        self.modals.pop();
        if !go {
            self.say(Level::Info, "cancelled: nothing was done");
            return None;
        }
        let command = c.command_with_reason();
        if matches!(
            &command,
            Command::Operator {
                command: OperatorCommand::Weight(_),
                ..
            }
        ) {
            self.pending_weight = None;
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
            // Open what the command starts, once it shows.
            let known = self.snap.deployments.iter().map(|d| d.id.clone()).collect();
            self.follow_started = Some((
                format!("{application}/{environment}"),
                known,
                self.now + FOLLOW_STARTED_MS,
            ));
        }
        Some(command)
    }
}
