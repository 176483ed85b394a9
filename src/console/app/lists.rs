//! The lists' filters: each list (applications, deployments, targets) and the log pane has its
//! own, typed with `/` while it has the focus, said in its title, cleared by Esc; none follows
//! the operator into another deployment. And what a deployment's screen says first (its
//! headline). What each list lists is `panels.rs`.

use super::{App, Focus, ListState, Screen};
use crate::console::app::dialog::{self, Modal};
use crate::console::layout;
use crate::deploy::state::{DeploymentState, TargetState};
use crate::deploy::view::DeploymentView;
use crate::plugin::Level;

impl App {
    /// The list the focused panel filters with `/`: its own, or — on a deployment's screen,
    /// from a panel that is not filtered — the log pane's.
    pub(super) fn focused_filter(&self) -> Option<Focus> {
        let f = self.ui.focus;
        match self.ui.screen {
            _ if f.filtered() => Some(f),
            Screen::Deployment(_) => Some(Focus::Logs),
            Screen::Home => None,
        }
    }

    /// True when list `f` is filtered now.
    pub fn filter_of(&self, f: Focus) -> bool {
        match f {
            Focus::Logs => {
                let l = &self.logs.filter;
                l.source.is_some()
                    || l.target.is_some()
                    || l.min_level.is_some()
                    || !l.text.is_empty()
            }
            f => !self.ui.lists.get(f).filter.is_empty(),
        }
    }

    /// `/`: the filter prompt for the focused list, pre-filled with the one in force.
    pub(super) fn search(&mut self) {
        let Some(of) = self.focused_filter() else {
            self.say(
                Level::Info,
                "/ filters a list: Tab to Applications or Deployments first (what waits on you \
                 is never filtered)",
            );
            return;
        };
        let text = match of {
            Focus::Logs => self.logs.filter.typed(),
            f => self.ui.lists.get(f).filter.clone(),
        };
        self.ui.modals.push(Modal::Filter(dialog::filter::Filter {
            of,
            was: text.clone(),
            text,
        }));
    }

    /// Sets (or, empty, clears) the filter of list `f`; the selection stays on the row it was
    /// on when that row is still shown, else goes to the first.
    pub fn set_filter(&mut self, f: Focus, text: String) {
        if f == Focus::Logs {
            self.logs.filter.parse_into(&text);
            self.logs.follow();
            return;
        }
        let key = self.selected_key(f);
        *self.ui.lists.get_mut(f) = ListState {
            row: 0,
            filter: text,
        };
        if let Some(row) = key.and_then(|k| self.row_of_key(f, &k)) {
            self.ui.lists.get_mut(f).row = row;
        }
        if f == Focus::Targets {
            self.ui.follow_targets = false;
        }
    }

    pub(super) fn filter_target(&mut self) {
        let name = self.selected_target().map(|t| t.name.clone());
        match (name, &self.logs.filter.target) {
            (Some(n), Some(cur)) if *cur == n => self.logs.filter.target = None,
            (Some(n), _) => self.logs.filter.target = Some(n),
            (None, _) => self.logs.filter.target = None,
        }
        self.logs.follow();
    }
}

/// What an operator reads first on a deployment's screen, marked (`✗`, `⚠`): why it failed;
/// a canary whose router failed: the router's error; a canary reverted by its analysis or by
/// manent: why; a live canary held by its analysis or by manent (router drift under
/// `on_drift: hold`): why — each in full, never only in a strip that cuts it.
pub fn headline(d: &DeploymentView) -> Option<String> {
    if let Some(f) = d.headline_failure() {
        return Some(format!("✗ {f}"));
    }
    if d.state == DeploymentState::DeadLettered {
        let at: Vec<String> = d
            .targets
            .iter()
            .filter(|t| matches!(t.state, TargetState::Unknown | TargetState::Running))
            .map(|t| t.name.clone())
            .collect();
        let at = crate::format::some_of(&at, 3)
            .map(|names| format!(" (cut off at {names})"))
            .unwrap_or_default();
        return Some(format!(
            "✗ dead-lettered: stopped after {} crashed runs{at}; nothing resumes it by \
             itself — Space runs it again from its last checkpoint",
            d.runs
        ));
    }
    let c = d.canary.as_ref()?;
    if d.router_failed() {
        let phase = d
            .phase
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        return Some(format!("✗ {phase} — {}", c.router_lines().join(" · ")));
    }
    let automatic = |by: &str| by == "analysis" || by == "manent";
    if d.reverted_automatically() {
        let why = c
            .status
            .decisions
            .iter()
            .rev()
            .find(|x| x.action == "revert")?;
        return Some(format!("✗ reverted by {}: {}", why.by, why.why));
    }
    if d.status.is_live()
        && let Some(h) = c.status.held_by().filter(|h| automatic(&h.by))
    {
        return Some(format!(
            "⚠ held by {}: {} — Space resumes, x reverts",
            h.by, h.why
        ));
    }
    None
}

/// The rows the headline takes in `width` columns.
pub fn headline_rows(d: &DeploymentView, width: u16) -> u16 {
    headline(d).map_or(0, |h| {
        let rows = dialog::wrap(&format!(" {h}"), usize::from(width).max(20)).len();
        u16::try_from(rows.clamp(1, layout::HEADLINE_ROWS)).unwrap_or(2)
    })
}
