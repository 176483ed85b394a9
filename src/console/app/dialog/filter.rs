//! `/`: a filter for the focused list (applications, deployments, targets) or the log pane,
//! pre-filled with the one in force, in the words it was typed in (so Enter keeps it as it is);
//! the list filters as it is typed, and Esc puts back the filter from before.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Reply, frame};
use crate::console::action::Action;
use crate::console::app::{Focus, ViewCtx};

/// The filter being typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// What it filters.
    pub of: Focus,
    /// What is typed.
    pub text: String,
    /// The filter in force when it opened (Esc puts it back).
    pub was: String,
}

impl Filter {
    /// Applies a key.
    /// Applies a key: the list filters as it is typed (k9s); Enter keeps it, Esc puts back
    /// the one in force before.
    pub fn update(&mut self, action: &Action) -> Reply {
        match action {
            Action::Input(c) => self.text.push(*c),
            Action::Backspace => {
                self.text.pop();
            }
            Action::ClearInput => self.text.clear(),
            Action::Submit => return Reply::Filter(self.of, self.text.trim().to_owned()),
            Action::Dismiss => return Reply::Filter(self.of, self.was.clone()),
            _ => return Reply::Keep,
        }
        Reply::FilterLive(self.of, self.text.trim().to_owned())
    }

    /// Draws it.
    pub fn render(&self, f: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
        let hint = match self.of {
            Focus::Logs => {
                "words match the message; plugin:NAME target:NAME level:warn · as you type · \
                 Enter keeps it · Esc undoes"
            }
            _ => "words match any column · filters as you type · Enter keeps it · Esc undoes",
        };
        let lines = vec![
            Line::from(vec![
                Span::raw("/"),
                Span::styled(format!("{}_", self.text), ctx.theme.get("selection")),
            ]),
            Line::from(Span::styled(hint, ctx.theme.get("muted"))),
        ];
        let title = format!(" Filter {} ", self.of.rows());
        frame(f, area, &title, lines, (76, "border_focus"), ctx);
    }
}
