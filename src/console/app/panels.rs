//! The console's panels in one place: which there are ([`Focus`]), which of them a screen
//! shows and in what order, what each list panel lists and how its filter reads a row, and
//! what Enter does in it. Every list keeps its selection and filter in a [`ListState`]; moving,
//! paging, filtering and keeping the selection inside the list after a new snapshot are the
//! same code for all of them (`navigate.rs`, `lists.rs`, `snapshot.rs`).
//!
//! A new list panel is a variant here (its name, its rows, what Enter does, where it sits), its
//! columns in a `view::list::ListPanel`, and its place in its screen's layout
//! (`view/home.rs` or `view/deployment.rs`).

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::{App, Screen, snapshot};
use crate::console::app::dialog::{self, Modal};
use crate::deploy::inbox::Item;
use crate::deploy::state::Kind;
use crate::deploy::view::{DeploymentView, HookView, TargetView};
use crate::engine::handle::AppEnv;

/// Which panel has the keyboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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
    /// The panels that are lists.
    pub const LISTS: [Focus; 5] = [
        Focus::Inbox,
        Focus::Apps,
        Focus::Deployments,
        Focus::Targets,
        Focus::Hooks,
    ];

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

    /// What its rows are, in the operator's words (a filter's title: "Filter targets").
    pub fn rows(self) -> &'static str {
        match self {
            Focus::Inbox => "what waits on you",
            Focus::Apps => "applications",
            Focus::Deployments => "deployments",
            Focus::Targets => "targets",
            Focus::Logs => "log lines",
            Focus::Hooks => "hooks",
            Focus::Canary => "the canary",
        }
    }

    /// What Enter does on its selected row, as the footer says it (none: it does something
    /// else there, or nothing).
    pub fn opens(self) -> Option<&'static str> {
        match self {
            Focus::Inbox => Some("go there"),
            Focus::Apps => Some("plan"),
            Focus::Deployments => Some("open"),
            Focus::Targets => Some("target"),
            Focus::Hooks => Some("hook"),
            Focus::Logs => Some("whole"),
            Focus::Canary => None,
        }
    }

    /// `/` filters it (what waits on a human is never hidden).
    pub fn filtered(self) -> bool {
        matches!(
            self,
            Focus::Apps | Focus::Deployments | Focus::Targets | Focus::Logs
        )
    }
}

/// One list panel's selection (a row of the list as filtered) and filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListState {
    /// The selected row.
    pub row: usize,
    /// The words it is filtered by (empty: none).
    pub filter: String,
}

impl ListState {
    /// Moves the selection by `delta` rows in a list of `len`, staying inside it.
    pub fn step(&mut self, delta: isize, len: usize) {
        self.row = if len == 0 {
            0
        } else {
            self.row.saturating_add_signed(delta).min(len - 1)
        };
    }

    /// Keeps the selection inside a list that now has `len` rows.
    pub fn clamp(&mut self, len: usize) {
        self.row = self.row.min(len.saturating_sub(1));
    }
}

/// Every list panel's state, by panel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lists(BTreeMap<Focus, ListState>);

static UNTOUCHED: ListState = ListState {
    row: 0,
    filter: String::new(),
};

impl Lists {
    /// Panel `f`'s state.
    pub fn get(&self, f: Focus) -> &ListState {
        self.0.get(&f).unwrap_or(&UNTOUCHED)
    }

    /// Panel `f`'s state, to change.
    pub fn get_mut(&mut self, f: Focus) -> &mut ListState {
        self.0.entry(f).or_default()
    }
}

/// True when every word of `filter` is in one of `fields` (case-insensitive).
fn matches(filter: &str, fields: &[&str]) -> bool {
    filter.split_whitespace().all(|w| {
        let w = w.to_lowercase();
        fields.iter().any(|f| f.to_lowercase().contains(&w))
    })
}

impl App {
    /// The selected row of list `f`.
    pub fn row(&self, f: Focus) -> usize {
        self.ui.lists.get(f).row
    }

    /// The panels one can move between, in order: only those on screen (hooks when there are
    /// some, the canary on a canary deployment; a test run's hooks are its main list).
    pub fn panels(&self) -> Vec<Focus> {
        match self.ui.screen {
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

    /// The key that takes the focus to panel `f` from the focused one in the fewest presses
    /// (`Tab`, `Shift-Tab`, either twice), or none when it has it or is not on screen.
    pub fn way_to(&self, f: Focus) -> Option<&'static str> {
        let order = self.panels();
        let to = order.iter().position(|p| *p == f)?;
        let from = order.iter().position(|p| *p == self.ui.focus)?;
        let n = order.len();
        let ahead = (to + n - from) % n;
        let back = (from + n - to) % n;
        match (ahead, back) {
            (0, _) => None,
            (1, _) => Some("Tab"),
            (_, 1) => Some("Shift-Tab"),
            (2, _) => Some("Tab Tab"),
            _ => Some("Shift-Tab Shift-Tab"),
        }
    }

    /// How many rows list `f` shows now (its filter applied); none for a panel that is not a
    /// list.
    pub(super) fn list_len(&self, f: Focus) -> Option<usize> {
        Some(match f {
            Focus::Inbox => self.inbox().len(),
            Focus::Apps => self.visible_apps().len(),
            Focus::Deployments => self.visible_deployments().len(),
            Focus::Targets => self.visible_targets().len(),
            Focus::Hooks => self.visible_hooks().len(),
            Focus::Logs | Focus::Canary => return None,
        })
    }

    /// What the selected row of list `f` is (an id, a name), to find it again in the list
    /// filtered another way.
    pub(super) fn selected_key(&self, f: Focus) -> Option<String> {
        let row = self.row(f);
        match f {
            Focus::Inbox => self.inbox().get(row).map(|i| i.subject.clone()),
            Focus::Apps => self
                .visible_apps()
                .get(row)
                .map(|a| format!("{}/{}", a.application, a.environment)),
            Focus::Deployments => self.visible_deployments().get(row).map(|d| d.id.clone()),
            Focus::Targets => self.visible_targets().get(row).map(|t| t.name.clone()),
            Focus::Hooks => self.visible_hooks().get(row).map(|h| h.name.clone()),
            Focus::Logs | Focus::Canary => None,
        }
    }

    /// The row of list `f` whose key is `key`, as it is filtered now.
    pub(super) fn row_of_key(&self, f: Focus, key: &str) -> Option<usize> {
        match f {
            Focus::Inbox => self.inbox().iter().position(|i| i.subject == key),
            Focus::Apps => self
                .visible_apps()
                .iter()
                .position(|a| format!("{}/{}", a.application, a.environment) == key),
            Focus::Deployments => self.visible_deployments().iter().position(|d| d.id == key),
            Focus::Targets => self.visible_targets().iter().position(|t| t.name == key),
            Focus::Hooks => self.visible_hooks().iter().position(|h| h.name == key),
            Focus::Logs | Focus::Canary => None,
        }
    }

    /// `items` with list `f`'s filter applied, each read as the words of `fields`.
    fn filtered<'a, T, const N: usize>(
        &self,
        f: Focus,
        items: impl IntoIterator<Item = &'a T>,
        fields: impl Fn(&'a T) -> [Cow<'a, str>; N],
    ) -> Vec<&'a T> {
        let filter = &self.ui.lists.get(f).filter;
        items
            .into_iter()
            .filter(|item| {
                filter.is_empty() || {
                    let fields = fields(item);
                    let fields: [&str; N] = std::array::from_fn(|i| fields[i].as_ref());
                    matches(filter, &fields)
                }
            })
            .collect()
    }

    /// The applications home lists (its filter applied).
    pub fn visible_apps(&self) -> Vec<&AppEnv> {
        self.filtered(Focus::Apps, &self.snap.apps, |a| {
            [
                Cow::Borrowed(a.application.as_str()),
                Cow::Borrowed(&a.environment),
                Cow::Borrowed(&a.version),
                Cow::Borrowed(&a.strategy),
                Cow::Borrowed(&a.plugin),
                Cow::Owned(a.live.join(" ")),
            ]
        })
    }

    /// The deployments home lists (its filter applied).
    pub fn visible_deployments(&self) -> Vec<&DeploymentView> {
        self.filtered(Focus::Deployments, &self.snap.deployments, |d| {
            [
                Cow::Borrowed(d.id.as_str()),
                Cow::Owned(d.kind.to_string()),
                Cow::Owned(d.subject()),
                Cow::Borrowed(&d.version),
                Cow::Borrowed(d.state.as_str()),
                Cow::Owned(
                    d.phase
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default(),
                ),
                Cow::Borrowed(&d.operator),
            ]
        })
    }

    /// The targets the deployment screen lists (its filter applied).
    pub fn visible_targets(&self) -> Vec<&TargetView> {
        let Some(d) = self.deployment() else {
            return Vec::new();
        };
        self.filtered(Focus::Targets, &d.targets, |t| {
            [
                Cow::Borrowed(t.name.as_str()),
                Cow::Borrowed(&t.moniker),
                Cow::Borrowed(t.state.as_str()),
                Cow::Borrowed(&t.message),
            ]
        })
    }

    /// The hooks the deployment screen lists.
    pub fn visible_hooks(&self) -> Vec<&HookView> {
        self.deployment()
            .map_or_else(Vec::new, |d| d.hooks.iter().collect())
    }

    /// What waits on a human, most urgent first (home's first panel).
    pub fn inbox(&self) -> Vec<Item> {
        let locks: Vec<_> = self
            .snap
            .apps
            .iter()
            .filter_map(|a| a.lock.clone())
            .collect();
        let mut items = crate::deploy::inbox::items(&self.snap.deployments, &locks, self.ui.now);
        items.extend(crate::deploy::inbox::parked_items(&self.snap.parked));
        items
    }

    /// Enter: opens what the focused panel has selected.
    pub(super) fn open(&mut self) {
        match (&self.ui.screen, self.ui.focus) {
            (Screen::Home, Focus::Apps) => {
                if let Some(a) = self.visible_apps().get(self.row(Focus::Apps)) {
                    let plan = dialog::plan::Plan::of(a);
                    self.ui.modals.push(Modal::Plan(plan));
                }
            }
            (Screen::Home, Focus::Inbox) => {
                let Some(item) = self.inbox().into_iter().nth(self.row(Focus::Inbox)) else {
                    return;
                };
                match item.deployment {
                    Some(id) => self.show(id),
                    None => {
                        self.ui.lists.get_mut(Focus::Apps).filter.clear();
                        if let Some(row) = self.snap.apps.iter().position(|a| {
                            format!("{}/{}", a.application, a.environment) == item.subject
                        }) {
                            self.ui.lists.get_mut(Focus::Apps).row = row;
                            self.ui.focus = Focus::Apps;
                        }
                    }
                }
            }
            (Screen::Home, _) => {
                if let Some(id) = self
                    .visible_deployments()
                    .get(self.row(Focus::Deployments))
                    .map(|d| d.id.clone())
                {
                    self.show(id);
                }
            }
            (Screen::Deployment(id), Focus::Targets) => {
                if let Some(t) = self.selected_target() {
                    self.ui.modals.push(Modal::Target(dialog::target::Target {
                        deployment: id.clone(),
                        name: t.name.clone(),
                        scroll: crate::console::scroll::Scroll::top(),
                    }));
                }
            }
            (Screen::Deployment(id), Focus::Hooks) => {
                let hook = self
                    .visible_hooks()
                    .get(self.row(Focus::Hooks))
                    .map(|h| (h.event, h.name.clone()));
                if let Some((event, name)) = hook {
                    self.ui.modals.push(Modal::Hook(dialog::hook::Hook {
                        deployment: id.clone(),
                        event,
                        name,
                        scroll: crate::console::scroll::Scroll::top(),
                    }));
                }
            }
            // The log pane: its lines whole, over the whole screen.
            (Screen::Deployment(_), Focus::Logs) => {
                self.ui.zoom = true;
                self.logs.wrap = true;
            }
            (Screen::Deployment(_), _) => self.filter_target(),
        }
    }

    /// `y`: what the focused panel has selected, as text to paste — a deployment's id, an
    /// application's `app/env`, a target's or a hook's name, the newest log line shown — for the
    /// loop to hand the terminal's clipboard (OSC 52: over ssh and tmux too).
    pub(super) fn yank(&mut self) {
        let text = match (&self.ui.screen, self.ui.focus) {
            (Screen::Home, Focus::Apps) => self
                .selected_app()
                .map(|a| format!("{}/{}", a.application, a.environment)),
            (Screen::Deployment(_), Focus::Targets) => {
                self.selected_target().map(|t| t.name.clone())
            }
            (Screen::Deployment(_), Focus::Hooks) => self
                .visible_hooks()
                .get(self.row(Focus::Hooks))
                .map(|h| h.name.clone()),
            (Screen::Deployment(_), Focus::Logs) => {
                self.logs.visible(1).first().map(|l| l.message.clone())
            }
            _ => self.selected_deployment().map(|d| d.id.clone()),
        };
        match text {
            Some(t) => {
                let shown = crate::console::widgets::fit(&t, 60);
                self.say(
                    crate::plugin::Level::Info,
                    format!("copied {shown} (to your terminal's clipboard, through OSC 52)"),
                );
                self.ui.clipboard = Some(t);
            }
            None => self.say(
                crate::plugin::Level::Info,
                "y copies what is selected: nothing is",
            ),
        }
    }

    /// The panel a deployment's screen opens on: a test run's hooks, a canary taking traffic,
    /// else its targets.
    pub(super) fn first_panel(&self) -> Focus {
        match self.deployment() {
            Some(d) if d.kind == Kind::Test => Focus::Hooks,
            Some(d) if d.canary.is_some() && snapshot::taking_traffic(d) => Focus::Canary,
            _ => Focus::Targets,
        }
    }
}
