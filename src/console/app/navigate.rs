//! Moving about: rows and pages in any list, panels (only those on screen), a deployment's
//! screen opened on the target to watch first, and Esc peeling one thing at a time.

use super::{App, Focus, ListState, Screen};
use crate::deploy::state::TargetState;
use crate::plugin::Level;

/// Rows a page moves.
const PAGE: usize = 10;

impl App {
    pub(super) fn move_by(&mut self, delta: isize) {
        let focus = self.ui.focus;
        if focus == Focus::Logs {
            let rows = self.log_rows();
            if delta < 0 {
                self.logs.scroll_up(delta.unsigned_abs(), rows);
            } else {
                self.logs.scroll_down(delta.unsigned_abs(), rows);
            }
            return;
        }
        if let Some(len) = self.list_len(focus) {
            self.ui.lists.get_mut(focus).step(delta, len);
        }
        if focus == Focus::Targets {
            self.ui.follow_targets = false;
        }
    }

    pub(super) fn page(&mut self, dir: isize) {
        if self.ui.focus == Focus::Logs {
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
        match self.ui.focus {
            Focus::Logs => {
                let rows = self.log_rows();
                self.logs.top(rows);
            }
            _ => self.move_by(-(isize::MAX / 2)),
        }
    }

    pub(super) fn bottom(&mut self) {
        match self.ui.focus {
            Focus::Logs => self.logs.follow(),
            Focus::Targets => self.ui.follow_targets = true,
            _ => self.move_by(isize::MAX / 2),
        }
    }

    /// Moves the focus by `dir` panels (0: back onto a panel that is on screen). A weight moved
    /// and not applied stays pending: Enter applies it and Esc drops it from any panel.
    pub(super) fn next_panel(&mut self, dir: i32) {
        let order = self.panels();
        let i = order.iter().position(|f| *f == self.ui.focus).unwrap_or(0) as i32;
        let n = order.len() as i32;
        self.ui.focus = order[usize::try_from((i + dir).rem_euclid(n)).unwrap_or(0)];
    }

    /// Opens deployment `id`'s screen, with its log lines, on the target to look at first. No
    /// filter follows from the screen before: the log pane and the targets start unfiltered.
    pub fn show(&mut self, id: String) {
        self.logs.filter = crate::console::logpane::LogFilter {
            deployment: Some(id.clone()),
            ..Default::default()
        };
        *self.ui.lists.get_mut(Focus::Targets) = ListState::default();
        *self.ui.lists.get_mut(Focus::Hooks) = ListState::default();
        self.logs.follow();
        self.ui.screen = Screen::Deployment(id);
        self.ui.zoom = false;
        self.ui.pending_weight = None;
        self.ui.focus = self.first_panel();
        self.ui.follow_targets = true;
        self.ui.lists.get_mut(Focus::Targets).row = self.first_to_watch().unwrap_or(0);
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
            self.ui.pending_weight = None;
            self.say(
                Level::Info,
                "the pending weight was dropped: nothing was sent",
            );
            return;
        }
        if self.ui.flash.take().is_some() {
            return;
        }
        if self.ui.zoom {
            self.ui.zoom = false;
            return;
        }
        if let Some(of) = self.focused_filter().filter(|of| self.filter_of(*of)) {
            self.set_filter(of, String::new());
            return;
        }
        let others: Vec<Focus> = self.panels().into_iter().filter(|f| f.filtered()).collect();
        if let Some(of) = others.into_iter().find(|of| self.filter_of(*of)) {
            self.set_filter(of, String::new());
            return;
        }
        match &self.ui.screen {
            Screen::Deployment(id) => {
                if let Some(row) = self.visible_deployments().iter().position(|d| &d.id == id) {
                    self.ui.lists.get_mut(Focus::Deployments).row = row;
                }
                self.ui.screen = Screen::Home;
                self.ui.focus = Focus::Deployments;
                self.logs.filter = Default::default();
                self.ui.lists.get_mut(Focus::Targets).filter.clear();
            }
            Screen::Home => self.say(Level::Info, "this is the home screen: q quits"),
        }
    }
}
