//! Moving about: rows, pages, panels (only those on screen), opening what is selected, the
//! deployment screen's first target to watch, and Esc peeling one thing at a time.

use super::{App, FilterOf, Focus, Screen, snapshot};
use crate::console::app::dialog::{self, Modal};
use crate::deploy::state::{Kind, TargetState};
use crate::plugin::Level;

/// Rows a page moves.
const PAGE: usize = 10;

impl App {
    pub(super) fn move_by(&mut self, delta: isize) {
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
            Focus::Apps => self.app_row = step(self.app_row, self.visible_apps().len()),
            Focus::Deployments => {
                self.deployment_row = step(self.deployment_row, self.visible_deployments().len());
            }
            Focus::Targets => {
                self.target_row = step(self.target_row, self.visible_targets().len());
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

    pub(super) fn page(&mut self, dir: isize) {
        if self.focus == Focus::Logs {
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

    pub(super) fn top(&mut self) {
        match self.focus {
            Focus::Logs => {
                let rows = self.log_rows();
                self.logs.top(rows);
            }
            _ => self.move_by(-(isize::MAX / 2)),
        }
    }

    pub(super) fn bottom(&mut self) {
        match self.focus {
            Focus::Logs => self.logs.follow(),
            Focus::Targets => self.follow_targets = true,
            _ => self.move_by(isize::MAX / 2),
        }
    }

    /// The panels one can move between: only those on screen (hooks when there are some, the
    /// canary on a canary deployment).
    pub(super) fn panels(&self) -> Vec<Focus> {
        match self.screen {
            Screen::Home if self.inbox().is_empty() => vec![Focus::Apps, Focus::Deployments],
            Screen::Home => vec![Focus::Inbox, Focus::Apps, Focus::Deployments],
            Screen::Deployment(_) if self.deployment().is_some_and(|d| d.kind == Kind::Test) => {
                vec![Focus::Hooks, Focus::Logs]
            }
            Screen::Deployment(_) => {
                let d = self.deployment();
                let mut v = Vec::new();
                if d.is_some_and(|d| d.canary.is_some()) {
                    v.push(Focus::Canary);
                }
                v.extend([Focus::Targets, Focus::Logs]);
                if d.is_some_and(|d| !d.hooks.is_empty()) {
                    v.push(Focus::Hooks);
                }
                v
            }
        }
    }

    /// Moves the focus by `dir` panels (0: back onto a panel that is on screen). Leaving the
    /// canary panel drops a weight moved and not applied.
    pub(super) fn next_panel(&mut self, dir: i32) {
        let order = self.panels();
        let i = order.iter().position(|f| *f == self.focus).unwrap_or(0) as i32;
        let n = order.len() as i32;
        let next = order[usize::try_from((i + dir).rem_euclid(n)).unwrap_or(0)];
        if self.focus == Focus::Canary && next != Focus::Canary && self.pending().is_some() {
            self.pending_weight = None;
            self.say(
                Level::Info,
                "the pending weight was dropped (the canary panel lost the focus): nothing was sent",
            );
        }
        self.focus = next;
    }

    pub(super) fn open(&mut self) {
        match (&self.screen, self.focus) {
            (Screen::Home, Focus::Apps) => {
                if let Some(a) = self.visible_apps().get(self.app_row) {
                    let plan = dialog::plan::Plan::of(a);
                    self.modals.push(Modal::Plan(plan));
                }
            }
            (Screen::Home, Focus::Inbox) => {
                let Some(item) = self.inbox().into_iter().nth(self.inbox_row) else {
                    return;
                };
                match item.deployment {
                    Some(id) => self.show(id),
                    None => {
                        self.filters.apps.clear();
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
                if let Some(id) = self
                    .visible_deployments()
                    .get(self.deployment_row)
                    .map(|d| d.id.clone())
                {
                    self.show(id);
                }
            }
            (Screen::Deployment(id), Focus::Targets) => {
                if let Some(t) = self.selected_target() {
                    self.modals.push(Modal::Target(dialog::target::Target {
                        deployment: id.clone(),
                        name: t.name.clone(),
                        scroll: crate::console::scroll::Scroll::top(),
                    }));
                }
            }
            (Screen::Deployment(id), Focus::Hooks) => {
                let hook = self
                    .deployment()
                    .and_then(|d| d.hooks.get(self.hook_row))
                    .map(|h| (h.event, h.name.clone()));
                if let Some((event, name)) = hook {
                    self.modals.push(Modal::Hook(dialog::hook::Hook {
                        deployment: id.clone(),
                        event,
                        name,
                        scroll: crate::console::scroll::Scroll::top(),
                    }));
                }
            }
            (Screen::Deployment(_), _) => self.filter_target(),
        }
    }

    /// Opens deployment `id`'s screen, with its log lines, on the target to look at first. No
    /// filter follows from the screen before: the log pane and the targets start unfiltered.
    pub fn show(&mut self, id: String) {
        self.logs.filter = crate::console::logpane::LogFilter {
            deployment: Some(id.clone()),
            ..Default::default()
        };
        self.filters.targets.clear();
        self.logs.follow();
        self.screen = Screen::Deployment(id);
        self.hook_row = 0;
        self.zoom = false;
        self.pending_weight = None;
        self.focus = match self.deployment() {
            Some(d) if d.kind == Kind::Test => Focus::Hooks,
            Some(d) if d.canary.is_some() && snapshot::taking_traffic(d) => Focus::Canary,
            _ => Focus::Targets,
        };
        self.follow_targets = true;
        self.target_row = self.first_to_watch().unwrap_or(0);
    }

    /// The first target being worked on, failed, or still to come.
    pub(super) fn first_to_watch(&self) -> Option<usize> {
        self.visible_targets().iter().position(|t| {
            t.state.is_active() || t.state.is_failed() || t.state == TargetState::Pending
        })
    }

    /// Esc: drops one thing at a time — a weight not applied, an error read, the zoom, the
    /// focused list's filter (then the screen's other ones) — and only then leaves.
    pub(super) fn back(&mut self) {
        if self.pending().is_some() {
            self.pending_weight = None;
            self.say(
                Level::Info,
                "the pending weight was dropped: nothing was sent",
            );
            return;
        }
        if self.flash.take().is_some() {
            return;
        }
        if self.zoom {
            self.zoom = false;
            return;
        }
        if let Some(of) = self.focused_filter().filter(|of| self.filter_of(*of)) {
            self.set_filter(of, String::new());
            return;
        }
        let others: Vec<FilterOf> = match self.screen {
            Screen::Home => vec![FilterOf::Apps, FilterOf::Deployments],
            Screen::Deployment(_) => vec![FilterOf::Targets, FilterOf::Logs],
        };
        if let Some(of) = others.into_iter().find(|of| self.filter_of(*of)) {
            self.set_filter(of, String::new());
            return;
        }
        match &self.screen {
            Screen::Deployment(id) => {
                if let Some(row) = self.visible_deployments().iter().position(|d| &d.id == id) {
                    self.deployment_row = row;
                }
                self.screen = Screen::Home;
                self.focus = Focus::Deployments;
                self.logs.filter = Default::default();
                self.filters.targets.clear();
            }
            Screen::Home => self.say(Level::Info, "this is the home screen: q quits"),
        }
    }
}
