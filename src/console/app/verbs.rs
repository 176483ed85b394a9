//! The command line's verbs, run on the selection as their keys would be: the same checks and
//! the same questions (a verb never skips a confirmation).

use super::{App, Focus, Screen};
use crate::console::action::Action;
use crate::console::app::dialog::command::Verb;
use crate::console::app::dialog::{self, Modal};
use crate::deploy::command::why_not;
use crate::deploy::state::Topic;
use crate::engine::handle::Command;
use crate::plugin::Level;

impl App {
    /// Runs `verb`.
    pub(super) fn run(&mut self, verb: Verb) -> Option<Command> {
        match verb {
            Verb::Deploy(None) => self.pick_version(),
            Verb::Deploy(Some(v)) => self.ask_deploy_version(v),
            Verb::DryRun => return self.dry_run(),
            Verb::Plan => {
                let a = self.selected_app().cloned();
                match a {
                    Some(a) => self.ui.modals.push(Modal::Plan(dialog::plan::Plan::of(&a))),
                    None => self.say(Level::Warn, "plan: select an application first"),
                }
            }
            Verb::Rollback => self.ask_rollback(),
            Verb::Test => self.ask_tests(),
            Verb::Cancel => self.ask_cancel(),
            Verb::Pause | Verb::Resume => return self.pause_or_resume(&verb),
            Verb::Retry(targets) => self.ask_retry(targets),
            Verb::Skip(target) => self.ask_skip(Some(target)),
            Verb::Abort => self.ask_abort(),
            Verb::Promote { full: false } => return self.act(Action::Promote),
            Verb::Promote { full: true } => return self.act(Action::PromoteFull),
            Verb::Revert => return self.act(Action::Revert),
            Verb::Weight(w) => self.weight_verb(w),
            Verb::Back => self.ask_back(),
            Verb::Abandon => self.ask_abandon(),
            Verb::Logs | Verb::Status => {
                let id = self.selected_deployment().map(|d| d.id.clone());
                let Some(id) = id else {
                    self.say(Level::Warn, "select a deployment first");
                    return None;
                };
                if self.ui.screen != Screen::Deployment(id.clone()) {
                    self.show(id);
                }
                if verb == Verb::Logs {
                    self.ui.focus = Focus::Logs;
                    self.ui.zoom = true;
                }
            }
            Verb::Inbox => {
                if self.inbox().is_empty() {
                    self.say(Level::Info, "nothing waits on you");
                    return None;
                }
                if let Screen::Deployment(_) = self.ui.screen {
                    self.ui.screen = Screen::Home;
                    self.logs.filter = Default::default();
                }
                self.ui.focus = Focus::Inbox;
                self.ui.lists.get_mut(Focus::Inbox).row = 0;
            }
            Verb::Messages => self
                .ui
                .modals
                .push(Modal::Messages(dialog::messages::Messages::default())),
            Verb::Help => self
                .ui
                .modals
                .push(Modal::Help(dialog::help::Help::default())),
            Verb::Quit => self.quit(),
        }
        None
    }

    /// `:pause` pauses only, `:resume` resumes only (Space toggles).
    fn pause_or_resume(&mut self, verb: &Verb) -> Option<Command> {
        let d = self.selected_deployment().cloned()?;
        let (topic, word) = if *verb == Verb::Pause {
            (Topic::Pause, "pause")
        } else {
            (Topic::Resume, "resume")
        };
        let stopped = matches!(
            d.state,
            crate::deploy::state::DeploymentState::Cancelled
                | crate::deploy::state::DeploymentState::Interrupted
                | crate::deploy::state::DeploymentState::DeadLettered
        );
        if d.takes(topic) || (topic == Topic::Resume && stopped) {
            return self.pause_resume();
        }
        self.say(Level::Warn, why_not(&d, word));
        None
    }

    /// `:weight N`: the split asked as the slider's Enter would.
    fn weight_verb(&mut self, w: u32) {
        let selected = self.selected_deployment().cloned();
        match selected {
            Some(d) if d.canary.is_some() => self.ask_weight_of(&d, w),
            Some(d) => self.say(
                Level::Warn,
                format!(
                    "weight {w} sets a canary's traffic: {} is a {}, not a canary — select one \
                     (or open it) first",
                    d.id, d.kind
                ),
            ),
            None => self.say(
                Level::Warn,
                format!("weight {w} sets a canary's traffic: select a canary (or open it) first"),
            ),
        }
    }
}
