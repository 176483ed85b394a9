//! Enter on a hook: its run in full — its message, output, what its delete policy did, and its
//! own log lines.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Reply, page, scrolled, total_rows, wrap};
use crate::console::action::Action;
use crate::console::app::App;
use crate::console::app::ViewCtx;
use crate::console::scroll::Scroll;
use crate::console::widgets::{fit, took};

const WIDTH: u16 = 110;

/// One hook run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// The deployment.
    pub deployment: String,
    /// When it runs.
    pub event: crate::config::Event,
    /// Its name.
    pub name: String,
    /// Where it is scrolled to.
    pub scroll: Scroll,
}

impl Hook {
    /// The run it shows, as the snapshot has it now.
    fn find<'a>(&self, app: &'a App) -> Option<&'a crate::deploy::view::HookView> {
        app.snap
            .deployments
            .iter()
            .find(|d| d.id == self.deployment)?
            .hooks
            .iter()
            .find(|h| h.event == self.event && h.name == self.name)
    }

    /// Applies a key.
    pub fn update(&mut self, action: &Action, app: &App) -> Reply {
        if *action == Action::Dismiss {
            return Reply::Close;
        }
        let (_, inner, room) = page(app.ui.size, width(app.ui.size.0));
        let total = total_rows(self.body(app, None, inner), inner);
        self.scroll.apply(action, total, room);
        Reply::Keep
    }

    fn body(&self, app: &App, ctx: Option<&ViewCtx<'_>>, inner: usize) -> Vec<Line<'static>> {
        let style = |slot: &str| ctx.map(|c| c.theme.get(slot)).unwrap_or_default();
        let Some(h) = self.find(app) else {
            return vec![Line::from("this hook is no longer listed")];
        };
        let state = ctx
            .map(|c| crate::console::widgets::hook_style(h.state, c.theme))
            .unwrap_or_default();
        let mut body: Vec<Line<'static>> = vec![Line::from(vec![
            Span::styled(format!(" {} ", h.state.as_str().to_uppercase()), state),
            Span::raw(format!(
                "  {} · weight {} · {} · attempt {}{}",
                h.event,
                h.weight,
                h.kind,
                h.attempt,
                h.duration_ms
                    .map(|ms| format!(" · took {}", took(ms)))
                    .unwrap_or_default()
            )),
        ])];
        body.extend(wrap(&h.message, inner).into_iter().map(Line::from));
        if !h.deletes.is_empty() {
            body.push(Line::from(""));
            body.push(Line::from(Span::styled(
                "DELETE POLICY ACTIONS",
                style("muted"),
            )));
            body.extend(h.deletes.iter().map(|d| Line::from(format!("  {d}"))));
        }
        if !h.output.is_empty() {
            body.push(Line::from(""));
            body.push(Line::from(Span::styled(
                "OUTPUT (its last lines)",
                style("muted"),
            )));
            for l in h.output.lines() {
                body.extend(wrap(l, inner).into_iter().map(Line::from));
            }
        }
        body.push(Line::from(""));
        body.push(Line::from(Span::styled(
            format!("LOG LINES of hook:{}", self.name),
            style("muted"),
        )));
        let source = format!("hook:{}", self.name);
        body.extend(super::held_lines(app, ctx, inner, |l| {
            l.deployment_id.as_deref() == Some(self.deployment.as_str()) && l.source == source
        }));
        body
    }

    /// Draws it.
    pub fn render(&self, f: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
        let w = width(area.width);
        let (_, inner, _) = page((area.width, area.height), w);
        let moniker = self
            .find(ctx.app)
            .map(|h| h.moniker.clone())
            .unwrap_or_default();
        let title = format!(
            " hook {} · {} ",
            self.name,
            fit(&moniker, inner.saturating_sub(8))
        );
        let body = self.body(ctx.app, Some(ctx), inner);
        let hint = "↑↓ PgUp PgDn scroll · Esc";
        scrolled(f, area, &title, body, (self.scroll, w, hint), ctx);
    }
}

fn width(columns: u16) -> u16 {
    columns.saturating_sub(4).min(WIDTH)
}
