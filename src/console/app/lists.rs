//! The lists a screen shows and their filters: each list (applications, deployments,
//! targets) and the log pane has its own, typed with `/` while it has the focus, said in its
//! title, cleared by Esc; none follows the operator into another deployment.

use super::{App, Focus, Screen};
use crate::console::app::dialog::{self, Modal};
use crate::console::layout;
use crate::deploy::view::{DeploymentView, TargetView};
use crate::engine::handle::AppEnv;
use crate::plugin::Level;

pub use crate::console::app::dialog::filter::Of as FilterOf;

impl App {
    /// The applications home lists (its filter applied).
    pub fn visible_apps(&self) -> Vec<&AppEnv> {
        self.snap
            .apps
            .iter()
            .filter(|a| {
                matches(
                    &self.filters.apps,
                    &[
                        &a.application,
                        &a.environment,
                        &a.version,
                        &a.strategy,
                        &a.plugin,
                        &a.live.join(" "),
                    ],
                )
            })
            .collect()
    }

    /// The deployments home lists (its filter applied).
    pub fn visible_deployments(&self) -> Vec<&DeploymentView> {
        self.snap
            .deployments
            .iter()
            .filter(|d| {
                let phase = d
                    .phase
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                matches(
                    &self.filters.deployments,
                    &[
                        &d.id,
                        &d.kind.to_string(),
                        &d.subject(),
                        &d.version,
                        d.state.as_str(),
                        &phase,
                        &d.operator,
                    ],
                )
            })
            .collect()
    }

    /// The targets the deployment screen lists (its filter applied).
    pub fn visible_targets(&self) -> Vec<&TargetView> {
        self.deployment().map_or_else(Vec::new, |d| {
            d.targets
                .iter()
                .filter(|t| {
                    matches(
                        &self.filters.targets,
                        &[&t.name, &t.moniker, t.state.as_str(), &t.message],
                    )
                })
                .collect()
        })
    }

    /// The list the focused panel filters with `/`.
    pub(super) fn focused_filter(&self) -> Option<FilterOf> {
        match self.focus {
            Focus::Apps => Some(FilterOf::Apps),
            Focus::Deployments => Some(FilterOf::Deployments),
            Focus::Targets => Some(FilterOf::Targets),
            Focus::Logs | Focus::Canary | Focus::Hooks => match self.screen {
                Screen::Deployment(_) => Some(FilterOf::Logs),
                Screen::Home => None,
            },
            Focus::Inbox => None,
        }
    }

    /// True when `of` filters anything now.
    pub fn filter_of(&self, of: FilterOf) -> bool {
        match of {
            FilterOf::Apps => !self.filters.apps.is_empty(),
            FilterOf::Deployments => !self.filters.deployments.is_empty(),
            FilterOf::Targets => !self.filters.targets.is_empty(),
            FilterOf::Logs => {
                let f = &self.logs.filter;
                f.source.is_some()
                    || f.target.is_some()
                    || f.min_level.is_some()
                    || !f.text.is_empty()
            }
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
            FilterOf::Apps => self.filters.apps.clone(),
            FilterOf::Deployments => self.filters.deployments.clone(),
            FilterOf::Targets => self.filters.targets.clone(),
            FilterOf::Logs => self.logs.filter.typed(),
        };
        self.modals
            .push(Modal::Filter(dialog::filter::Filter { of, text }));
    }

    /// Sets (or, empty, clears) the filter of `of`; the selection goes back to the first row.
    pub fn set_filter(&mut self, of: FilterOf, text: String) {
        match of {
            FilterOf::Apps => {
                self.filters.apps = text;
                self.app_row = 0;
            }
            FilterOf::Deployments => {
                self.filters.deployments = text;
                self.deployment_row = 0;
            }
            FilterOf::Targets => {
                self.filters.targets = text;
                self.target_row = 0;
                self.follow_targets = false;
            }
            FilterOf::Logs => {
                self.logs.filter.parse_into(&text);
                self.logs.follow();
            }
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

/// What an operator reads first on a deployment's screen: why it failed, or — a canary whose
/// router failed — the router's error, in full.
pub fn headline(d: &DeploymentView) -> Option<String> {
    if let Some(f) = d.headline_failure() {
        return Some(f);
    }
    if !d.router_failed() {
        return None;
    }
    let phase = d
        .phase
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    let lines = d
        .canary
        .as_ref()
        .map(|c| c.router_lines().join(" · "))
        .unwrap_or_default();
    Some(format!("{phase} — {lines}"))
}

/// The rows the headline takes in `width` columns.
pub fn headline_rows(d: &DeploymentView, width: u16) -> u16 {
    headline(d).map_or(0, |h| {
        let rows = dialog::wrap(&format!(" ✗ {h}"), usize::from(width).max(20)).len();
        u16::try_from(rows.clamp(1, layout::HEADLINE_ROWS)).unwrap_or(2)
    })
}

/// True when every word of `filter` is in one of `fields` (case-insensitive).
fn matches(filter: &str, fields: &[&str]) -> bool {
    filter.split_whitespace().all(|w| {
        let w = w.to_lowercase();
        fields.iter().any(|f| f.to_lowercase().contains(&w))
    })
}
