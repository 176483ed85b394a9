//! Enter on a target: it in full — its state, the whole message, every attempt with its
//! idempotency key, and its own log lines — with retry, skip and "its lines only" at hand.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Reply, page, scrolled, total_rows, wrap};
use crate::console::action::Action;
use crate::console::app::App;
use crate::console::app::ViewCtx;
use crate::console::scroll::Scroll;
use crate::console::widgets::{clock, elapsed, fit, took};
use crate::deploy::view::TargetView;

const WIDTH: u16 = 110;

/// One target of a deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The deployment.
    pub deployment: String,
    /// The target's name.
    pub name: String,
    /// Where it is scrolled to.
    pub scroll: Scroll,
}

impl Target {
    /// The target it shows, as the snapshot has it now.
    fn find<'a>(&self, app: &'a App) -> Option<&'a TargetView> {
        app.snap
            .deployments
            .iter()
            .find(|d| d.id == self.deployment)?
            .targets
            .iter()
            .find(|x| x.name == self.name)
    }

    /// Applies a key.
    pub fn update(&mut self, action: &Action, app: &App) -> Reply {
        match action {
            Action::Dismiss => Reply::Close,
            Action::Retry | Action::Skip | Action::FilterTarget => Reply::Then(action.clone()),
            _ => {
                let (_, inner, room) = page(app.ui.size, width(app.ui.size.0));
                let total = total_rows(self.body(app, None, inner), inner);
                self.scroll.apply(action, total, room);
                Reply::Keep
            }
        }
    }

    fn body(&self, app: &App, ctx: Option<&ViewCtx<'_>>, inner: usize) -> Vec<Line<'static>> {
        let style = |slot: &str| ctx.map(|c| c.theme.get(slot)).unwrap_or_default();
        let Some(x) = self.find(app) else {
            return vec![Line::from("this target is no longer listed")];
        };
        let state = ctx.map(|c| c.theme.target(x.state)).unwrap_or_default();
        let mut body: Vec<Line<'static>> = vec![Line::from(vec![
            Span::styled(format!(" {} ", x.state.as_str().to_uppercase()), state),
            Span::raw(format!(
                "  batch {} · {} attempt(s){}",
                x.batch,
                x.attempts.len(),
                x.duration_ms
                    .map(|ms| format!(" · took {}", elapsed(i64::try_from(ms).unwrap_or(0))))
                    .unwrap_or_default()
            )),
        ])];
        body.extend(wrap(&x.message, inner).into_iter().map(Line::from));
        body.push(Line::from(""));
        body.push(Line::from(Span::styled(
            " #  ROUND  STARTED   TOOK    OUTCOME      IDEMPOTENCY KEY",
            style("muted"),
        )));
        body.extend(attempts(x, inner, style("notice.warn"), style("muted")));
        body.push(Line::from(""));
        body.push(Line::from(Span::styled(
            format!("LOG LINES of {}", self.name),
            style("muted"),
        )));
        body.extend(super::held_lines(app, ctx, inner, |l| {
            l.deployment_id.as_deref() == Some(self.deployment.as_str())
                && l.target.as_deref() == Some(self.name.as_str())
        }));
        body
    }

    /// Draws it.
    pub fn render(&self, f: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
        let w = width(area.width);
        let (_, inner, _) = page((area.width, area.height), w);
        let moniker = self
            .find(ctx.app)
            .map(|x| x.moniker.clone())
            .unwrap_or_default();
        let title = format!(
            " {} · {} ",
            self.name,
            fit(&moniker, inner.saturating_sub(8))
        );
        let hint = "r retry · s skip · f its logs in the pane · ↑↓ PgUp PgDn scroll · Esc";
        let body = self.body(ctx.app, Some(ctx), inner);
        scrolled(f, area, &title, body, (self.scroll, w, hint), ctx);
    }
}

fn width(columns: u16) -> u16 {
    columns.saturating_sub(4).min(WIDTH)
}

fn attempts(
    x: &TargetView,
    inner: usize,
    warn: ratatui::style::Style,
    muted: ratatui::style::Style,
) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let last = x.attempts.len().saturating_sub(1);
    for (i, a) in x.attempts.iter().enumerate() {
        let took = a.ended_at.map_or_else(
            || "…".into(),
            |e| took(u64::try_from(e - a.started_at).unwrap_or(0)),
        );
        // The last attempt of a failed target failed for good, whatever it was recorded as.
        let outcome = match a.outcome {
            Some(_) if i == last && x.state.is_failed() => "failed",
            Some(o) => o.as_str(),
            None => "running",
        };
        out.push(Line::from(format!(
            " {:<2} {:<6} {}  {:<7} {:<12} {}",
            a.attempt,
            a.round,
            clock(a.started_at),
            took,
            outcome,
            a.key
        )));
        if let Some(e) = &a.error {
            for l in wrap(e, inner.saturating_sub(4)) {
                out.push(Line::from(Span::styled(format!("    {l}"), warn)));
            }
        }
    }
    if out.is_empty() {
        out.push(Line::from(Span::styled(" none yet", muted)));
    }
    out
}
