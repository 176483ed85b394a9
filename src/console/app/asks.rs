//! The keys that act: each checks that it means something here (read-only, what the deployment
//! takes now) and says why when it does not, then opens the question it asks (a dialog) or —
//! pausing a running deployment, a dry-run — acts at once. Every key that changes production
//! traffic asks, naming the split before → after.

use super::{App, Focus, Screen};
use crate::console::action::Action;
use crate::console::app::dialog::{self, Confirm, Modal, asks, traffic};
use crate::deploy::command::{OperatorCommand, why_not};
use crate::deploy::state::{DeploymentState, Topic};
use crate::deploy::view::DeploymentView;
use crate::engine::handle::{AppEnv, Command, EngineMode};
use crate::plugin::Level;

impl App {
    /// A key that acts on the selection.
    pub(super) fn act(&mut self, action: Action) -> Option<Command> {
        match action {
            Action::Deploy => self.pick_version(),
            Action::DryRun => return self.dry_run(),
            Action::Rollback => self.ask_rollback(),
            Action::Cancel => self.ask_cancel(),
            Action::PauseResume => return self.pause_resume(),
            Action::Retry => self.ask_retry(Vec::new()),
            Action::Skip => self.ask_skip(None),
            Action::Abort => self.ask_abort(),
            Action::Promote => self.ask_canary(Topic::Promote, traffic::promote),
            Action::PromoteFull => self.ask_canary(Topic::Promote, traffic::promote_full),
            Action::Revert => self.ask_canary(Topic::Revert, traffic::revert),
            Action::StepBack => self.ask_back(),
            Action::Abandon => self.ask_abandon(),
            Action::TestHooks => self.ask_tests(),
            _ => {}
        }
        None
    }

    pub(super) fn confirm(&mut self, confirm: Confirm) {
        self.ui.modals.retain(|m| {
            !matches!(
                m,
                Modal::Plan(_) | Modal::Versions(_) | Modal::Tests(_) | Modal::Command(_)
            )
        });
        self.ui.modals.push(Modal::Confirm(confirm));
    }

    /// The application a key for an application means: the one selected, else the selected
    /// deployment's (on the deployment screen, the deployment's).
    fn target_app(&mut self, what: &str) -> Option<AppEnv> {
        if let Some(a) = self.selected_app() {
            return Some(a.clone());
        }
        // A deployment's row: its application's environment.
        if let Some(a) = self
            .selected_deployment()
            .and_then(|d| self.app_of(&d.application, &d.environment))
        {
            return Some(a.clone());
        }
        let hint = match self.ui.focus {
            Focus::Deployments | Focus::Inbox => format!(
                "{what}: this row's application is not among those listed (its descriptor was \
                 left out: `manent validate` says why)"
            ),
            _ => format!("{what}: select an application in Applications first"),
        };
        self.say(Level::Warn, hint);
        None
    }

    /// False (and says so) while `a`'s live releases are still being read: what is live and
    /// where a rollback goes are not known for a moment after the console opens.
    fn releases_known(&mut self, a: &AppEnv, what: &str) -> bool {
        if !a.live_read {
            self.say(
                Level::Info,
                format!(
                    "{what}: the live releases of {}/{} are still being read — press it again \
                     in a moment",
                    a.application, a.environment
                ),
            );
        }
        a.live_read
    }

    fn selected_or_say(&mut self, what: &str) -> Option<DeploymentView> {
        let d = self.selected_deployment().cloned();
        if d.is_none() {
            let hint = if self.ui.screen == Screen::Home && self.ui.focus == Focus::Apps {
                format!("{what} acts on a deployment: Tab to Deployments (or open one with Enter)")
            } else {
                format!("{what}: select a deployment first")
            };
            self.say(Level::Warn, hint);
        }
        d
    }

    /// `D`: which version to deploy — unless another deployment of it is live and deploying
    /// now changes nothing or is refused (said at once, in full, before any question).
    pub(super) fn pick_version(&mut self) {
        if self.refuse_readonly("deploying") {
            return;
        }
        let Some(a) = self.target_app("D (deploy)") else {
            return;
        };
        if !self.releases_known(&a, "D (deploy)") {
            return;
        }
        if let Some(why) = self.busy_with(&a) {
            self.say(Level::Warn, why);
            return;
        }
        self.ui.modals.retain(|m| !matches!(m, Modal::Plan(_)));
        let v = dialog::versions::Versions::of(&a, &self.snap.deployments);
        self.ui.modals.push(Modal::Versions(v));
    }

    /// Why a deploy of `a` would change nothing or be refused now: a live deployment of it
    /// that does not wait for a decision.
    fn busy_with(&self, a: &AppEnv) -> Option<String> {
        let subject = format!("{}/{}", a.application, a.environment);
        let live = self.snap.deployments.iter().find(|d| {
            d.subject() == subject
                && d.status.is_live()
                && d.kind != crate::deploy::state::Kind::Test
                && (d.state != DeploymentState::FailedAwaiting || d.router_failed())
        })?;
        let now = live
            .phase
            .as_ref()
            .map_or_else(|| live.state.to_string(), ToString::to_string);
        let steer = if live.canary.is_some() {
            "steer it (p promote, x revert, a weight in its canary panel, Space) or cancel it \
             (c) first"
        } else {
            "wait for it, or cancel it (c) first"
        };
        Some(format!(
            "{subject} has a live {} of {} ({}: {now}): deploying again would change nothing \
             (the same version) or be refused (another) — {steer}",
            live.kind, live.version, live.id
        ))
    }

    /// A version typed on the command line: checked, then asked like a picked one.
    pub(super) fn ask_deploy_version(&mut self, version: String) {
        if self.refuse_readonly("deploying") {
            return;
        }
        let Some(a) = self.target_app("deploy") else {
            return;
        };
        if !self.releases_known(&a, "deploy") {
            return;
        }
        if let Some(why) = self.busy_with(&a) {
            self.say(Level::Warn, why);
            return;
        }
        if let Err(e) = crate::config::check_version(&version) {
            self.say(Level::Error, e);
            return;
        }
        let subject = format!("{}/{}", a.application, a.environment);
        let awaiting = self
            .snap
            .deployments
            .iter()
            .find(|d| d.subject() == subject)
            .filter(|d| d.state == DeploymentState::FailedAwaiting && !d.router_failed())
            .map(|d| (d.id.clone(), d.version.clone()));
        let awaiting = awaiting.as_ref().map(|(i, v)| (i.as_str(), v.as_str()));
        let c = asks::deploy(&a, version, awaiting, self.ui.now);
        self.confirm(c);
    }

    pub(super) fn dry_run(&mut self) -> Option<Command> {
        if self.refuse_readonly("a dry-run (it records a deployment)") {
            return None;
        }
        let a = self.target_app("d (dry-run)")?;
        self.ui.modals.retain(|m| !matches!(m, Modal::Plan(_)));
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

    pub(super) fn ask_rollback(&mut self) {
        if self.refuse_readonly("rolling back") {
            return;
        }
        let Some(a) = self.target_app("R (roll back)") else {
            return;
        };
        if !self.releases_known(&a, "R (roll back)") {
            return;
        }
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
        let c = asks::rollback(&a, self.ui.now);
        self.confirm(c);
    }

    pub(super) fn ask_cancel(&mut self) {
        if self.refuse_readonly("cancelling") {
            return;
        }
        let Some(d) = self.selected_or_say("c (cancel)") else {
            return;
        };
        if !d.status.is_live() {
            self.say(
                Level::Warn,
                format!("{} is not running ({})", d.id, d.state),
            );
            return;
        }
        let c = asks::cancel(&d, self.ui.now);
        self.confirm(c);
    }

    /// Space: pause a running deployment or hold a canary's steps (at once: nothing moves);
    /// resume a paused deployment (at once) or a held canary (asks: its traffic may change);
    /// start a stopped one again (asks).
    pub(super) fn pause_resume(&mut self) -> Option<Command> {
        let d = self.selected_or_say("Space (pause/resume)")?;
        if self.refuse_readonly("pausing and resuming") {
            return None;
        }
        let act = |command| Command::Operator {
            id: d.id.clone(),
            command,
            reason: None,
        };
        if d.takes(Topic::Resume) {
            if d.canary.is_some() {
                let c = traffic::resume_held(&d, self.ui.now);
                self.confirm(c);
                return None;
            }
            return Some(act(OperatorCommand::Resume));
        }
        if d.takes(Topic::Pause) {
            return Some(act(OperatorCommand::Pause));
        }
        if matches!(
            d.state,
            DeploymentState::Cancelled
                | DeploymentState::Interrupted
                | DeploymentState::DeadLettered
        ) {
            // Starting a stopped deployment again is a decision: it asks, like a deploy.
            let c = asks::resume(&d, self.ui.now);
            self.confirm(c);
            return None;
        }
        self.say(Level::Warn, why_not(&d, "pause"));
        None
    }

    /// `r`: the failed targets again (`only` these, the selected one when it failed, or every
    /// failed one); on a canary whose router failed, the router's call.
    pub(super) fn ask_retry(&mut self, only: Vec<String>) {
        if self.refuse_readonly("retrying") {
            return;
        }
        let Some(d) = self.selected_or_say("r (retry)") else {
            return;
        };
        if !d.takes(Topic::Retry) {
            self.say(Level::Warn, why_not(&d, "retry"));
            return;
        }
        if d.router_failed() {
            let c = traffic::retry_router(&d, self.ui.now);
            self.confirm(c);
            return;
        }
        let only = if only.is_empty() {
            self.selected_target()
                .filter(|t| t.state.is_failed())
                .map(|t| t.name.clone())
        } else {
            // Several named: one question for them all (a single name is the usual case).
            only.first().cloned()
        };
        let c = asks::retry(&d, only, self.ui.now);
        self.confirm(c);
    }

    /// `s`: leave a target out (`named`, else the selected one).
    pub(super) fn ask_skip(&mut self, named: Option<String>) {
        if self.refuse_readonly("skipping a target") {
            return;
        }
        let d = self
            .deployment()
            .or_else(|| self.selected_deployment())
            .cloned();
        let t = match (&d, named) {
            (Some(d), Some(n)) => d.targets.iter().find(|t| t.name == n).cloned(),
            _ => self.selected_target().cloned(),
        };
        let (Some(d), Some(t)) = (d, t) else {
            self.say(
                Level::Warn,
                "s leaves a target out: open a deployment and select the target first",
            );
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
            .app_of(&d.application, &d.environment)
            .and_then(|a| a.live_by_target.get(&t.name).cloned());
        let c = asks::skip(&d, &t, live, self.ui.now);
        self.confirm(c);
    }

    pub(super) fn ask_abort(&mut self) {
        if self.refuse_readonly("aborting") {
            return;
        }
        let Some(d) = self.selected_or_say("A (abort)") else {
            return;
        };
        if d.router_failed() {
            self.say(
                Level::Warn,
                format!(
                    "{}'s router failed: it waits for r (retry the call), x (revert), a weight \
                     (←→ Enter in its canary panel) or X (abandon it, with a reason)",
                    d.id
                ),
            );
            return;
        }
        if !d.takes(Topic::Abort) {
            self.say(Level::Warn, why_not(&d, "abort"));
            return;
        }
        let c = asks::abort(&d, self.ui.now);
        self.confirm(c);
    }

    /// The canary panel's ←/→: the pending weight moves by the canary's slider step (Enter
    /// applies it).
    pub(super) fn nudge(&mut self, dir: i32) {
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
            self.ui.pending_weight = None;
        } else {
            self.ui.pending_weight = Some((d.id.clone(), to));
        }
    }

    /// Enter in the canary panel: the moved weight's split, to confirm.
    pub(super) fn ask_weight(&mut self) {
        let Some(d) = self.canary().cloned() else {
            return;
        };
        let Some(w) = self.pending() else {
            self.say(
                Level::Info,
                "←/→ move the canary's weight by a slider step first; Enter then asks to apply it",
            );
            return;
        };
        self.ask_weight_of(&d, w);
    }

    pub(super) fn ask_weight_of(&mut self, d: &DeploymentView, w: u32) {
        if self.refuse_readonly("setting the canary's weight") {
            return;
        }
        if !d.takes(Topic::Weight) {
            self.say(Level::Warn, why_not(d, "weight"));
            return;
        }
        let c = traffic::weight(d, w, self.ui.now);
        self.confirm(c);
    }

    /// `p`, `P`, `x`: a canary's promote or revert, asked first.
    pub(super) fn ask_canary(&mut self, topic: Topic, dialog: fn(&DeploymentView, i64) -> Confirm) {
        let Some(d) = self.selected_or_say(topic.as_str()) else {
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
        self.ui.pending_weight = None;
        let c = dialog(&d, self.ui.now);
        self.confirm(c);
    }

    /// `X`: a canary whose router failed ends where its traffic is, with a reason.
    pub(super) fn ask_abandon(&mut self) {
        let Some(d) = self.selected_or_say("X (abandon)") else {
            return;
        };
        if self.refuse_readonly("abandoning a canary") {
            return;
        }
        if !d.takes(Topic::Abandon) {
            self.say(
                Level::Warn,
                format!(
                    "X abandons a canary whose router failed and waits for a decision; {} is {}",
                    d.id, d.state
                ),
            );
            return;
        }
        let c = traffic::abandon(&d, self.ui.now);
        self.confirm(c);
    }

    /// `t`: the test hooks of the selected application and environment, asked first; where a
    /// canary is live, which release they run against is asked before.
    pub(super) fn ask_tests(&mut self) {
        if self.refuse_readonly("running the test hooks (it records a run)") {
            return;
        }
        let Some(a) = self.target_app("t (test hooks)") else {
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
        let subject = format!("{}/{}", a.application, a.environment);
        let canary = self
            .snap
            .deployments
            .iter()
            .find(|d| d.subject() == subject && d.canary.is_some() && d.status.is_live())
            .map(|d| d.id.clone());
        if let Some(canary) = canary {
            self.ui
                .modals
                .push(Modal::Tests(dialog::tests::PickRelease {
                    application: a.application.clone(),
                    environment: a.environment.clone(),
                    canary,
                    selected: 0,
                }));
            return;
        }
        let c = asks::tests(&a, None, self.ui.now);
        self.confirm(c);
    }

    /// `b`: back to the previous step's weight.
    pub(super) fn ask_back(&mut self) {
        let Some(d) = self
            .selected_deployment()
            .filter(|d| d.canary.is_some())
            .cloned()
        else {
            self.say(
                Level::Warn,
                "b steps a canary back: select or open a canary deployment first",
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
                self.ui.pending_weight = None;
                let c = traffic::back(&d, to, self.ui.now);
                self.confirm(c);
            }
        }
    }

    /// `q`: at once, unless this console's engine runs deployments that go on by themselves
    /// or live canaries (a worker carries them on and judges them), or something it handed
    /// over was never claimed.
    pub(super) fn quit(&mut self) {
        let here = self.snap.mode == Some(EngineMode::InProcess);
        let running: Vec<String> = self
            .snap
            .deployments
            .iter()
            .filter(|d| here && d.status.is_live() && !d.state.is_waiting() && !d.needs_judge())
            .map(|d| d.id.clone())
            .collect();
        let live: Vec<&crate::deploy::view::DeploymentView> = self
            .snap
            .deployments
            .iter()
            .filter(|d| here && !self.ui.stop_on_quit && d.needs_judge())
            .collect();
        let judged: Vec<(String, String)> = live
            .iter()
            .map(|d| (d.id.clone(), crate::engine::judge::named(d)))
            .collect();
        let environment = live
            .first()
            .map(|d| d.environment.clone())
            .unwrap_or_default();
        let unclaimed = self.snap.unclaimed.clone();
        if running.is_empty() && judged.is_empty() && unclaimed.is_empty() {
            self.ui.should_quit = true;
        } else {
            self.ui.modals.push(Modal::Quit(dialog::quit::Quit {
                opened_at: self.ui.now,
                choice: dialog::Choice::Cancel,
                running,
                judged,
                environment,
                unclaimed,
                stops: self.ui.stop_on_quit,
            }));
        }
    }
}
