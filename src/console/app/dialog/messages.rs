//! `M`: every message this console showed (what each action did, every refusal and error, the
//! engine's notices) and the warning and error lines of the deployments' logs, oldest first, in
//! full — wrapped, never cut — so a reason that flashed past at 80 columns can be read.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Reply, page, scrolled, total_rows};
use crate::console::action::Action;
use crate::console::app::App;
use crate::console::app::ViewCtx;
use crate::console::scroll::Scroll;
use crate::console::widgets::clock;
use crate::plugin::Level;

const WIDTH: u16 = 120;

/// The message history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Messages {
    /// Where it is scrolled to (opens on the newest).
    pub scroll: Scroll,
}

impl Default for Messages {
    fn default() -> Self {
        Messages {
            scroll: Scroll { offset: usize::MAX },
        }
    }
}

/// One entry: when, how serious, from where, what.
fn entries(app: &App) -> Vec<(i64, Level, String, String)> {
    let mut out: Vec<(i64, Level, String, String)> = app
        .ui
        .messages
        .iter()
        .map(|m| (m.at, m.level, "console".to_owned(), m.text.clone()))
        .collect();
    out.extend(
        app.logs
            .lines()
            .filter(|l| l.level >= Level::Warn)
            .map(|l| {
                let from = match (&l.deployment_id, &l.target) {
                    (Some(d), Some(t)) => format!("{} {t}", short(d)),
                    (Some(d), None) => short(d),
                    (None, _) => l.source.clone(),
                };
                (l.at, l.level, from, l.message.clone())
            }),
    );
    out.sort_by_key(|e| e.0);
    // What the deployment on screen failed with, in full (its headline is cut at the top).
    if let Some(d) = app.deployment()
        && let Some(h) = crate::console::app::headline(d)
    {
        out.push((app.ui.now, Level::Error, short(&d.id), h));
    }
    out
}

/// `100000-aaaa`: enough of an id to tell deployments apart (the CLI takes it too).
fn short(id: &str) -> String {
    id.get(id.len().saturating_sub(11)..)
        .unwrap_or(id)
        .to_owned()
}

/// The page's lines at `inner` columns, each message wrapped under its own text.
fn body(app: &App, ctx: Option<&ViewCtx<'_>>, inner: usize) -> Vec<Line<'static>> {
    let entries = entries(app);
    if entries.is_empty() {
        return vec![Line::from(
            "nothing yet: what this console does and why shows here",
        )];
    }
    let muted = ctx.map(|c| c.theme.get("muted")).unwrap_or_default();
    let mut out = Vec::new();
    for (at, level, from, text) in entries {
        let style = ctx.map(|c| c.theme.level(level)).unwrap_or_default();
        out.push(Line::from(Span::styled(
            format!("{} {:<5} {from}", clock(at), level.as_str()),
            muted,
        )));
        for row in super::wrap(&text, inner.saturating_sub(INDENT)) {
            out.push(Line::from(Span::styled(
                format!("{:INDENT$}{row}", ""),
                style,
            )));
        }
    }
    out
}

/// Columns a message's text is indented by, under its time.
const INDENT: usize = 2;

impl Messages {
    /// Applies a key.
    pub fn update(&mut self, action: &Action, app: &App) -> Reply {
        if *action == Action::Dismiss {
            return Reply::Close;
        }
        let (_, inner, room) = page(app.ui.size, WIDTH);
        let total = total_rows(body(app, None, inner), inner);
        self.scroll.apply(action, total, room);
        Reply::Keep
    }

    /// Draws it.
    pub fn render(&self, f: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
        let hint = "↑↓ PgUp PgDn g G scroll · Esc closes";
        let (_, inner, _) = page((area.width, area.height), WIDTH);
        scrolled(
            f,
            area,
            " Messages, oldest first ",
            body(ctx.app, Some(ctx), inner),
            (self.scroll, WIDTH, hint),
            ctx,
        );
    }
}
