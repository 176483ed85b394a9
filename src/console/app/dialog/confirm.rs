//! A confirmation: what it does, where and to how many targets, with buttons named by their
//! effect (`Keep running` / `Cancel deploy`). It starts on the button that changes nothing,
//! ignores an Enter that arrives right after it opened (a held key), and — in production, or
//! through a lock — wants the environment's name typed (then a reason, required where it must
//! be journaled). The focused button is marked with text, so it shows without colour too.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Reply, buttons, frame};
use crate::console::action::Action;
use crate::console::app::ViewCtx;
use crate::engine::handle::Command;
use crate::plugin::Level;

/// An Enter this soon after a confirmation opened is a held key, not a decision.
pub const CONFIRM_GUARD_MS: i64 = 400;

/// Which button has the focus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// The one that changes nothing (the default).
    Cancel,
    /// The one that acts.
    Confirm,
}

impl Choice {
    /// The other one.
    pub fn flip(self) -> Choice {
        match self {
            Choice::Cancel => Choice::Confirm,
            Choice::Confirm => Choice::Cancel,
        }
    }
}

/// A confirmation.
#[derive(Debug, Clone, PartialEq)]
pub struct Confirm {
    /// One line: what, where, how many.
    pub title: String,
    /// More lines.
    pub lines: Vec<String>,
    /// The command it sends.
    pub command: Command,
    /// The focused button.
    pub choice: Choice,
    /// The button that acts (`Deploy`, `Cancel deploy`, …).
    pub yes: String,
    /// The button that changes nothing (`Cancel`, `Keep running`).
    pub no: String,
    /// The environment name to type, and what was typed.
    pub typed: Option<(String, String)>,
    /// A reason, for the journal.
    pub reason: String,
    /// When it opened (epoch ms).
    pub opened_at: i64,
    /// A key arrived before it could take one (within [`CONFIRM_GUARD_MS`] of opening: a held
    /// Enter, or what was typed ahead for the dialog before): dropped, and said.
    pub swallowed: bool,
    /// The environment is production.
    pub production: bool,
    /// Enter needs a reason (a break-glass through a lock, an abandoned canary).
    pub needs_reason: bool,
}

impl Confirm {
    /// A confirmation of `command`, on the button that changes nothing.
    pub fn new(
        title: String,
        lines: Vec<String>,
        command: Command,
        production: bool,
        now: i64,
    ) -> Self {
        Confirm {
            title,
            lines,
            command,
            choice: Choice::Cancel,
            yes: "Confirm".into(),
            no: "Cancel".into(),
            typed: None,
            reason: String::new(),
            opened_at: now,
            swallowed: false,
            production,
            needs_reason: false,
        }
    }

    /// Names the buttons by what they do.
    pub fn buttons(mut self, no: &str, yes: &str) -> Self {
        self.no = no.to_owned();
        self.yes = yes.to_owned();
        self
    }

    /// The environment's name must be typed.
    pub fn typed_in(mut self, environment: &str) -> Self {
        self.typed = Some((environment.to_owned(), String::new()));
        self
    }

    /// In production the environment's name must be typed: the last line says so (and that a
    /// reason follows, when one is required) and the dialog asks for it. Elsewhere nothing
    /// changes.
    pub fn typed_in_production(mut self, environment: &str) -> Self {
        if !self.production {
            return self;
        }
        let then = if self.needs_reason {
            ", then the reason"
        } else {
            " to confirm"
        };
        self.lines
            .push(format!("{environment} is production: type its name{then}"));
        self.typed_in(environment)
    }

    /// A reason must be typed (after the name, where one is asked).
    pub fn reason_required(mut self) -> Self {
        self.needs_reason = true;
        self
    }

    /// The command, with the reason typed into the dialog.
    pub fn command_with_reason(&self) -> Command {
        let reason = Some(self.reason.trim().to_owned()).filter(|r| !r.is_empty());
        let mut command = self.command.clone();
        match &mut command {
            Command::Deploy { reason: r, .. }
            | Command::Rollback { reason: r, .. }
            | Command::Operator { reason: r, .. }
            | Command::Test { reason: r, .. }
            | Command::LeaveUnwatched { reason: r, .. } => *r = reason,
            Command::LoadLogs { .. } | Command::Refresh => {}
        }
        command
    }

    /// Applies a key.
    pub fn update(&mut self, action: &Action, now: i64) -> Reply {
        // Too soon to be meant for this dialog: a held Enter, or keys typed ahead for what was
        // on screen before it (they would land in the reason).
        if now - self.opened_at < CONFIRM_GUARD_MS
            && matches!(action, Action::Submit | Action::Input(_))
        {
            self.swallowed = true;
            return Reply::Keep;
        }
        self.swallowed &= !matches!(action, Action::Submit | Action::Input(_));
        match action {
            Action::ChoiceToggle if self.typed.is_none() => self.choice = self.choice.flip(),
            // A typed confirmation: the name first; once it matches, the reason.
            Action::Input(ch) => match &mut self.typed {
                Some((expected, typed)) if typed != expected => typed.push(*ch),
                // What the journal would refuse is not typed in (a bidirectional override, an
                // invisible character).
                _ if crate::operator::check_reason(&ch.to_string()).is_err() => {}
                _ => self.reason.push(*ch),
            },
            Action::Backspace => {
                match &mut self.typed {
                    Some((_, typed)) if self.reason.is_empty() => typed.pop(),
                    _ => self.reason.pop(),
                };
            }
            Action::ClearInput => {
                self.reason.clear();
                if let Some((_, typed)) = &mut self.typed {
                    typed.clear();
                }
            }
            Action::Submit => return self.submit(),
            Action::Dismiss => {
                return Reply::CloseSaying(Level::Info, "cancelled: nothing was done".into());
            }
            _ => {}
        }
        Reply::Keep
    }

    fn submit(&self) -> Reply {
        let go = match &self.typed {
            Some((expected, typed)) if typed == expected => true,
            Some((expected, _)) => {
                return Reply::Say(
                    Level::Warn,
                    format!("type `{expected}` exactly to confirm (Esc cancels)"),
                );
            }
            None => self.choice == Choice::Confirm,
        };
        if !go {
            return Reply::CloseSaying(Level::Info, "cancelled: nothing was done".into());
        }
        if self.needs_reason && self.reason.trim().is_empty() {
            return Reply::Say(
                Level::Warn,
                "type why: the reason is journaled with the action (Esc cancels)".into(),
            );
        }
        Reply::Send(self.command_with_reason())
    }

    /// Its last line: what the keys do, or that a key came too soon and was ignored.
    fn hint(&self, keys: &'static str, ctx: &ViewCtx<'_>) -> Line<'static> {
        if self.swallowed {
            Line::from(Span::styled(
                "⚠ a key came too soon for this dialog and was ignored: read, then press it",
                ctx.theme.get("notice.warn"),
            ))
        } else {
            Line::from(Span::styled(keys, ctx.theme.get("muted")))
        }
    }

    /// Draws it.
    pub fn render(&self, f: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
        let t = ctx.theme;
        let mut lines = vec![Line::from(Span::styled(self.title.clone(), t.get("title")))];
        lines.extend(self.lines.iter().map(|l| {
            if (self.production && l.contains("PRODUCTION")) || l.starts_with("LOCKED") {
                Line::from(Span::styled(l.clone(), t.get("production")))
            } else {
                Line::from(l.clone())
            }
        }));
        lines.push(Line::from(""));
        let label = if self.needs_reason {
            "reason (required): "
        } else {
            "reason (optional): "
        };
        match &self.typed {
            Some((expected, typed)) => {
                let matched = typed == expected;
                let cursor = if matched { "" } else { "_" };
                lines.push(Line::from(vec![
                    Span::raw(format!("type {expected}: ")),
                    Span::styled(format!("{typed}{cursor}"), t.get("selection")),
                ]));
                let reason = if matched {
                    format!("{}_", self.reason)
                } else {
                    self.reason.clone()
                };
                lines.push(Line::from(vec![
                    Span::styled(label, t.get("muted")),
                    Span::raw(reason),
                ]));
                lines.push(self.hint("Enter confirms once the name matches · Esc cancels", ctx));
            }
            None => {
                lines.push(Line::from(vec![
                    Span::styled(label, t.get("muted")),
                    Span::raw(format!("{}_", self.reason)),
                ]));
                lines.push(buttons(self.choice, &self.no, &self.yes, ctx));
                lines.push(self.hint("←/→ choose · Enter · Esc changes nothing", ctx));
            }
        }
        let border = if self.production {
            "production"
        } else {
            "border_focus"
        };
        // Where to type and how to answer stay whatever the size: the body gives way first.
        let lines = super::fit_keeping(lines, 3, (area, 76), t.get("muted"));
        frame(f, area, " Confirm ", lines, (76, border), ctx);
    }
}
