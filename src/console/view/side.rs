//! The wide screen's side column: the hooks (names with the room the column has), the canary
//! panel, and the deployment's particulars.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use super::ViewCtx;
use super::canary;
use super::hooks::{hook_table, hooks_panel};
use crate::console::app::Focus;
use crate::console::widgets::{clock, panel};
use crate::deploy::view::DeploymentView;

pub fn render(frame: &mut Frame<'_>, area: Rect, d: &DeploymentView, ctx: &ViewCtx<'_>) {
    let t = ctx.theme;
    let canary_rows = d.canary.as_ref().map_or(4, |c| {
        u16::try_from(c.plan.steps.len().min(10)).unwrap_or(10) + 7
    });
    let name_width = usize::from(area.width.saturating_sub(2))
        .saturating_sub(28)
        .max(9);
    let hook_lines = hook_table(d, ctx, name_width).len();
    let hook_rows = u16::try_from(hook_lines.clamp(2, 11)).unwrap_or(11) + 2;
    let [hooks, canary_area, info] = Layout::vertical([
        Constraint::Length(hook_rows),
        Constraint::Length(canary_rows),
        Constraint::Min(3),
    ])
    .areas(area);
    hooks_panel(frame, hooks, d, ctx, " Hooks ");
    canary_panel(frame, canary_area, d, ctx);
    let mut lines = vec![
        Line::from(vec![
            Span::styled("id ", t.get("muted")),
            Span::raw(d.id.clone()),
        ]),
        Line::from(vec![
            Span::styled("plugin ", t.get("muted")),
            Span::raw(d.plugin.clone()),
        ]),
        Line::from(vec![
            Span::styled("started ", t.get("muted")),
            Span::raw(clock(d.created_at)),
        ]),
    ];
    if d.runs > 1 {
        lines.push(Line::from(Span::styled(
            format!("resumed after {} crash(es)", d.runs - 1),
            t.get("notice.warn"),
        )));
    }
    if !d.pending_commands.is_empty() {
        lines.push(Line::from(format!(
            "waiting commands: {}",
            d.pending_commands.join(", ")
        )));
    }
    if let Some(r) = &d.report {
        lines.push(Line::from(Span::styled(
            r.message.clone(),
            t.deployment(d.state, d.kind),
        )));
    }
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: true }).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(t.get("border"))
                .title(Span::styled(" Deployment ", t.get("title"))),
        ),
        info,
    );
}

/// Every decision of the canary, each wrapped in full under a heading: when, what, who, why.
fn decision_lines(
    c: &crate::deploy::view::CanaryView,
    inner: usize,
    t: &crate::console::theme::Theme,
) -> Vec<Line<'static>> {
    if c.status.decisions.is_empty() {
        return Vec::new();
    }
    let mut out = vec![Line::from(Span::styled("decisions", t.get("title")))];
    for x in &c.status.decisions {
        let text = format!("{} {} by {}: {}", clock(x.at), x.action, x.by, x.why);
        out.extend(
            crate::console::app::dialog::wrap(&text, inner.max(20))
                .into_iter()
                .map(Line::from),
        );
    }
    out
}

/// The canary panel: the slider, the weights, where it is, its steps and the latest word (a
/// failed router call, drift, analysis); the panel whose arrows move the weight.
pub fn canary_panel(frame: &mut Frame<'_>, area: Rect, d: &DeploymentView, ctx: &ViewCtx<'_>) {
    let t = ctx.theme;
    let focused = ctx.app.ui.focus == Focus::Canary;
    let title = if focused {
        " Canary · ←→ weight, Enter applies "
    } else {
        " Canary "
    };
    match &d.canary {
        Some(c) => {
            let inner = usize::from(area.width.saturating_sub(2));
            let pending = ctx.app.pending();
            let mut lines = canary::slider(c, pending, inner, t);
            let applying = ctx.app.applying();
            lines.push(canary::weights(
                c,
                (pending, applying),
                d.status.is_live(),
                t,
            ));
            lines.push(canary::step_line(d, c, false, t));
            let traffic = canary::traffic(c, inner, t);
            let rows = usize::from(area.height.saturating_sub(7)).saturating_sub(traffic.len());
            lines.extend(traffic);
            // Zoomed: every decision taken, with who took it and why (its numbers), newest
            // last; the steps give them up to half the rows left.
            let decisions = if ctx.app.ui.zoom {
                decision_lines(c, inner, t)
            } else {
                Vec::new()
            };
            let shown = decisions.len().min(rows / 2);
            lines.extend(canary::steps(c, rows - shown, inner, t));
            if shown > 0 {
                // The heading, then the newest that fit.
                let mut decisions = decisions.into_iter();
                lines.extend(decisions.next());
                let rest: Vec<Line<'static>> = decisions.collect();
                let skip = rest.len().saturating_sub(shown - 1);
                lines.extend(rest.into_iter().skip(skip));
            }
            // The last word (an analysis' decision and its numbers) wraps into the rows the
            // rest leaves free.
            let extra = canary::extras(c, d.status.is_live(), ctx.app.ui.now, t);
            let block = panel(title, focused, t);
            let body = block.inner(area);
            frame.render_widget(block, area);
            let free = usize::from(body.height).saturating_sub(lines.len()).max(1);
            let needed = extra.width().div_ceil(inner.max(1)).max(1);
            let k = u16::try_from(needed.min(free)).unwrap_or(1);
            let top = Rect {
                height: body.height.saturating_sub(k),
                ..body
            };
            let bottom = Rect {
                y: top.y + top.height,
                height: body.height - top.height,
                ..body
            };
            frame.render_widget(Paragraph::new(lines), top);
            let extra = Paragraph::new(extra);
            let extra = if k > 1 {
                extra.wrap(Wrap { trim: true })
            } else {
                extra
            };
            frame.render_widget(extra, bottom);
        }
        None => frame.render_widget(
            Paragraph::new(vec![
                Line::from(Span::styled("candidate weight", t.get("muted"))),
                Line::from(format!("not a canary deployment ({})", d.kind)),
            ])
            .wrap(Wrap { trim: true })
            .block(panel(title, focused, t)),
            area,
        ),
    }
}
