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
            .filter(|n| n.id > self.ui.last_notice)
            .cloned()
            .collect();
        // An error about this canary, or about no deployment (the engine went away): one about
        // another deployment is not this weight's answer.
        let refused = |id: &str| {
            fresh
                .iter()
                .any(|n| n.level == Level::Error && n.about.as_deref().is_none_or(|a| a == id))
        };
        let refused = self.ui.applying.as_ref().is_some_and(|a| refused(&a.id));
        for n in fresh {
            self.say(n.level, n.text);
        }
        self.ui.last_notice = s.notices.last().map_or(self.ui.last_notice, |n| n.id);
        let was_taking = self.deployment().is_some_and(taking_traffic);
        self.snap = s;
        // A weight sent is settled once the router is read back serving it (or the engine set
        // it and the router cannot be read: the strip says so), the engine took it and failed at
        // it (an error from before it took the command is not its answer), refused it, or the
        // canary ended.
        if let Some(a) = &self.ui.applying {
            let d = self.snap.deployments.iter().find(|d| d.id == a.id);
            let canary = d
                .filter(|d| d.status.is_live())
                .and_then(|d| d.canary.as_ref());
            // Read back from the router serving it (not manent's own record of it).
            let served = canary.is_some_and(|c| {
                !c.unread()
                    && (c.status.actual == Some(a.weight) || c.actual_weight() == Some(a.weight))
            });
            let settled = canary.is_none_or(|c| {
                served
                    || (c.status.weight == a.weight && c.unread())
                    || (c.status.router_error.is_some() && c.status.decisions.len() > a.decisions)
            });
            if settled && served && !refused {
                let (id, w) = (a.id.clone(), a.weight);
                self.say(
                    Level::Info,
                    format!(
                        "{id}: the router serves candidate {w}% / stable {}% (read back from it)",
                        100 - w.min(100)
                    ),
                );
            }
            if settled || refused {
                self.ui.applying = None;
            }
        }
        if self.ui.follow_next
            && let Some(id) = self
                .snap
                .deployments
                .iter()
                .find(|d| d.status.is_live())
                .map(|d| d.id.clone())
        {
            self.ui.follow_next = false;
            self.show(id);
        }
        if self
            .ui
            .follow_started
            .as_ref()
            .is_some_and(|(_, _, until)| self.ui.now > *until)
        {
            self.ui.follow_started = None;
        }
        // Finished already (a quick test run) or running: either way it is what was asked for.
        if let Some((subject, known, _)) = &self.ui.follow_started
            && let Some(id) = self
                .snap
                .deployments
                .iter()
                .find(|d| d.subject() == *subject && !known.contains(&d.id))
                .map(|d| d.id.clone())
        {
            self.ui.follow_started = None;
            self.show(id);
        }
        // What the demo said would happen has: the line goes.
        if self
            .snap
            .deployments
            .iter()
            .any(|d| d.state == crate::deploy::state::DeploymentState::CanaryPaused)
        {
            self.ui.until_gate = None;
        }
        // Every list's selection stays inside it.
        for f in Focus::LISTS {
            let len = self.list_len(f).unwrap_or(0);
            self.ui.lists.get_mut(f).clamp(len);
        }
        if self.ui.follow_targets {
            if let Some(row) = self.first_to_watch() {
                self.ui.lists.get_mut(Focus::Targets).row = row;
            }
            // The candidate is everywhere and the steps begin: the slider is what to watch.
            if self.ui.focus == Focus::Targets
                && !was_taking
                && self.deployment().is_some_and(taking_traffic)
            {
                self.ui.focus = Focus::Canary;
            }
        }
        if self.ui.screen == Screen::Home && !self.panels().contains(&self.ui.focus) {
            self.next_panel(0);
        }
    }
}
