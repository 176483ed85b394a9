//! What a new snapshot changes on screen: the engine's notices become messages, a deployment
//! this console started (or the demo's) opens once it shows, selections stay inside the lists,
//! and a canary that starts taking traffic gets the focus while the operator has not moved it.

use std::sync::Arc;

use super::{App, Focus, Screen};
use crate::deploy::state::Phase;
use crate::deploy::view::DeploymentView;
use crate::engine::handle::Snapshot;
use crate::plugin::Level;

/// A canary whose candidate takes (or is about to take) traffic: its panel is what matters.
pub fn taking_traffic(d: &DeploymentView) -> bool {
    d.status.is_live() && matches!(d.phase, Some(Phase::Canary { .. } | Phase::Promoting))
}

impl App {
    pub(super) fn on_snapshot(&mut self, s: Arc<Snapshot>) {
        let fresh: Vec<_> = s
            .notices
            .iter()
            .filter(|n| n.id > self.last_notice)
            .cloned()
            .collect();
        // An error about this canary, or about no deployment (the engine went away): one about
        // another deployment is not this weight's answer.
        let refused = |id: &str| {
            fresh
                .iter()
                .any(|n| n.level == Level::Error && n.about.as_deref().is_none_or(|a| a == id))
        };
        let refused = self.applying.as_ref().is_some_and(|a| refused(&a.id));
        for n in fresh {
            self.say(n.level, n.text);
        }
        self.last_notice = s.notices.last().map_or(self.last_notice, |n| n.id);
        let was_taking = self.deployment().is_some_and(taking_traffic);
        self.snap = s;
        // A weight sent is settled once the router is read back serving it (or the engine set
        // it and the router cannot be read: the strip says so), the engine took it and failed at
        // it (an error from before it took the command is not its answer), refused it, or the
        // canary ended.
        if let Some(a) = &self.applying {
            let settled = self
                .snap
                .deployments
                .iter()
                .find(|d| d.id == a.id)
                .is_none_or(|d| {
                    !d.status.is_live()
                        || d.canary.as_ref().is_none_or(|c| {
                            ((c.status.actual == Some(a.weight)
                                || c.actual_weight() == Some(a.weight))
                                && !c.unread())
                                || (c.status.weight == a.weight && c.unread())
                                || (c.status.router_error.is_some()
                                    && c.status.decisions.len() > a.decisions)
                        })
                });
            if settled || refused {
                self.applying = None;
            }
        }
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
        self.app_row = self
            .app_row
            .min(self.visible_apps().len().saturating_sub(1));
        self.deployment_row = self
            .deployment_row
            .min(self.visible_deployments().len().saturating_sub(1));
        let targets = self.visible_targets().len();
        self.target_row = self.target_row.min(targets.saturating_sub(1));
        if self.follow_targets {
            if let Some(row) = self.first_to_watch() {
                self.target_row = row;
            }
            // The candidate is everywhere and the steps begin: the slider is what to watch.
            if self.focus == Focus::Targets
                && !was_taking
                && self.deployment().is_some_and(taking_traffic)
            {
                self.focus = Focus::Canary;
            }
        }
        if self.screen == Screen::Home && !self.panels().contains(&self.focus) {
            self.next_panel(0);
        }
    }
}
