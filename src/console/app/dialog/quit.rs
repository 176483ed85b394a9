//! Quitting while this console's engine runs deployments (they go on in a background worker,
//! or stop for the demo) or live canaries (a background worker goes on judging them and
//! watching their routers), or while something it handed to another engine was never claimed
//! (it will not start by itself once this console is gone).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::confirm::CONFIRM_GUARD_MS;
use super::{Choice, Reply, buttons, frame};
use crate::console::action::Action;
use crate::console::app::ViewCtx;

/// The quit question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quit {
    /// When it opened (epoch ms).
    pub opened_at: i64,
    /// The focused button.
    pub choice: Choice,
    /// Deployments that go on by themselves in this console's engine.
    pub running: Vec<String>,
    /// Live canaries this console's engine judges: their ids, and what the operator reads
    /// (`web/prod canary of 2.0.0 at 15%`). None for the demo, which stops them.
    pub judged: Vec<(String, String)>,
    /// The environment to type to leave them unwatched.
    pub environment: String,
    /// Deployments this console submitted that no engine claimed yet.
    pub unclaimed: Vec<String>,
    /// Quitting stops them (the demo) instead of handing them to a worker.
    pub stops: bool,
}

impl Quit {
    /// Applies a key; `Then(Quit)` leaves.
    pub fn update(&mut self, action: &Action, now: i64) -> Reply {
        match action {
            Action::ChoiceToggle => self.choice = self.choice.flip(),
            Action::Submit if now - self.opened_at < CONFIRM_GUARD_MS => {}
            Action::Submit if self.choice == Choice::Confirm => return Reply::Then(Action::Quit),
            Action::Submit | Action::Dismiss => return Reply::Close,
            // Leaving a live canary unwatched is a choice of its own: the environment typed,
            // a reason, journaled.
            Action::Input('U') if !self.judged.is_empty() => {
                return Reply::Open(Box::new(super::Modal::Confirm(self.leave_unwatched(now))));
            }
            _ => {}
        }
        Reply::Keep
    }

    /// The confirmation that quits leaving the live canaries with no engine.
    fn leave_unwatched(&self, now: i64) -> super::confirm::Confirm {
        let command = crate::engine::handle::Command::LeaveUnwatched {
            ids: self.judged.iter().map(|(id, _)| id.clone()).collect(),
            reason: None,
        };
        let mut lines: Vec<String> = self.judged.iter().map(|(_, c)| c.clone()).collect();
        lines.push(
            "Nothing judges the candidate or watches the router until an engine runs \
             (`manent worker`); `manent status` says UNWATCHED meanwhile."
                .into(),
        );
        lines.push(format!(
            "Type {} to confirm, then the reason (journaled).",
            self.environment
        ));
        super::confirm::Confirm::new(
            "Quit and leave it unwatched?".into(),
            lines,
            command,
            true,
            now,
        )
        .buttons("Stay", "Quit, unwatched")
        .reason_required()
        .typed_in(&self.environment)
    }

    /// Draws it.
    pub fn render(&self, f: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
        let mut lines = vec![Line::from(Span::styled(
            "Quit the console?",
            ctx.theme.get("title"),
        ))];
        if !self.running.is_empty() {
            lines.push(Line::from(if self.stops {
                format!(
                    "{} stops at its next step (a demo ends with its console).",
                    self.running.join(", ")
                )
            } else {
                format!(
                    "{} goes on in a background worker until it finishes or waits for an \
                     operator; `manent console` shows it again.",
                    self.running.join(", ")
                )
            }));
        }
        for (_, c) in &self.judged {
            lines.push(Line::from(format!(
                "{c}: a background worker keeps judging it and watching the router; `manent \
                 console` shows it again."
            )));
        }
        if !self.judged.is_empty() {
            lines.push(Line::from(Span::styled(
                "U: leave it unwatched instead (you type the environment; journaled)",
                ctx.theme.get("hint"),
            )));
        }
        if !self.unclaimed.is_empty() {
            lines.push(Line::from(Span::styled(
                format!(
                    "{} was handed to an engine that has not taken it: once you quit it does \
                     not start by itself — it waits in the inbox as never started.",
                    self.unclaimed.join(", ")
                ),
                ctx.theme.get("notice.warn"),
            )));
        }
        lines.push(Line::from(""));
        lines.push(buttons(self.choice, "Stay", "Quit", ctx));
        frame(f, area, " Quit ", lines, (72, "border_focus"), ctx);
    }
}
