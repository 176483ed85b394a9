//! One deployment: the failure to read first (when it failed), its targets (moniker, batch,
//! status, attempt, time, last message), the hooks and canary panels, and its log lines.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState, Wrap};

use super::ViewCtx;
use super::canary;
use super::widgets::{clock, elapsed, fit, panel, row_highlight};
use crate::console::app::Focus;
use crate::console::layout;
use crate::deploy::state::TargetState;
use crate::deploy::view::DeploymentView;

pub fn render(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let Some(d) = ctx.app.deployment() else {
        frame.render_widget(
            Paragraph::new(" this deployment is no longer listed; Esc goes back"),
            area,
        );
        return;
    };
    let failure = d.headline_failure();
    let l = layout::deployment(area, d.targets.len(), failure.is_some(), d.canary.is_some());
    if let Some(f) = failure {
        // What failed, in the operator's first two lines; the rest is one Enter away.
        frame.render_widget(
            Paragraph::new(Line::from(Span::styled(
                format!(" ✗ {f}"),
                ctx.theme.get("status.failed"),
            )))
            .wrap(Wrap { trim: true }),
            l.failure,
        );
    }
    let (targets, strip, logs, side) = (l.targets, l.strip, l.logs, l.side);
    render_targets(frame, targets, d, ctx);
    if side.is_none() {
        let t = ctx.theme;
        match &d.canary {
            Some(c) => {
                let lines = canary::strip(d, c, usize::from(strip.width), ctx);
                frame.render_widget(Paragraph::new(lines), strip);
            }
            None => {
                let line = Line::from(vec![
                    Span::styled(" hooks ", t.get("muted")),
                    Span::raw("none defined"),
                    Span::styled("  canary ", t.get("muted")),
                    Span::raw(format!("not a canary deployment ({})", d.kind)),
                ]);
                frame.render_widget(Paragraph::new(line), strip);
            }
        }
    }
    super::logs::render(frame, logs, ctx);
    if let Some(side) = side {
        render_side(frame, side, d, ctx);
    }
}

fn render_targets(frame: &mut Frame<'_>, area: Rect, d: &DeploymentView, ctx: &ViewCtx<'_>) {
    let (app, t) = (ctx.app, ctx.theme);
    let wide = area.width >= 100;
    // Only the rows that fit are built (a fleet may have thousands), scrolled as ratatui would:
    // the selected row at the bottom once it passes the last visible one.
    let visible = usize::from(area.height.saturating_sub(3)).max(1);
    let selected = app.target_row.min(d.targets.len().saturating_sub(1));
    let offset = (selected + 1).saturating_sub(visible);
    let rows = d.targets.iter().skip(offset).take(visible).map(|x| {
        let took = match (x.duration_ms, x.state) {
            (Some(ms), _) => elapsed(i64::try_from(ms).unwrap_or(0)),
            (None, TargetState::Running) => "…".into(),
            _ => String::new(),
        };
        let name = if wide {
            x.moniker.clone()
        } else {
            x.name.clone()
        };
        Row::new(vec![
            Cell::from(name),
            Cell::from(x.batch.to_string()),
            Cell::from(Span::styled(x.state.as_str(), t.target(x.state))),
            Cell::from(if x.attempt == 0 {
                String::new()
            } else {
                x.attempt.to_string()
            }),
            Cell::from(took),
            Cell::from(x.message.clone()),
        ])
    });
    let widths = [
        Constraint::Length(if wide { 34 } else { 14 }),
        Constraint::Length(5),
        Constraint::Length(15),
        Constraint::Length(3),
        Constraint::Length(6),
        Constraint::Min(10),
    ];
    let focused = app.focus == Focus::Targets;
    let title = format!(
        " Targets {}/{} · batch size {} ",
        d.done(),
        d.targets.len(),
        batch_sizes(d)
    );
    let table = Table::new(rows, widths)
        .header(
            Row::new(vec![
                if wide { "MONIKER" } else { "TARGET" },
                "BATCH",
                "STATUS",
                "TRY",
                "TIME",
                "MESSAGE",
            ])
            .style(t.get("muted")),
        )
        .block(panel(
            fit(&title, usize::from(area.width.saturating_sub(4))),
            focused,
            t,
        ))
        .row_highlight_style(row_highlight(focused, t))
        .highlight_symbol("› ");
    let mut state = TableState::default().with_selected(Some(selected - offset));
    frame.render_stateful_widget(table, area, &mut state);
}

fn batch_sizes(d: &DeploymentView) -> String {
    let first = d.targets.iter().filter(|t| t.batch == 1).count();
    if d.batches <= 1 {
        d.targets.len().to_string()
    } else {
        format!("{first} × {}", d.batches)
    }
}

fn render_side(frame: &mut Frame<'_>, area: Rect, d: &DeploymentView, ctx: &ViewCtx<'_>) {
    let t = ctx.theme;
    let canary_rows = d.canary.as_ref().map_or(6, |c| {
        u16::try_from(c.plan.steps.len().min(10)).unwrap_or(10) + 7
    });
    let [hooks, canary_area, info] = Layout::vertical([
        Constraint::Length(5),
        Constraint::Length(canary_rows),
        Constraint::Min(3),
    ])
    .areas(area);
    let boxed = |title: &'static str, focus: Focus| panel(title, ctx.app.focus == focus, t);
    frame.render_widget(
        Paragraph::new(vec![
            Line::from(Span::styled(
                "EVENT  WEIGHT  KIND  NAME  STATUS",
                t.get("muted"),
            )),
            Line::from("none defined for this deployment"),
        ])
        .block(boxed(" Hooks ", Focus::Hooks)),
        hooks,
    );
    match &d.canary {
        Some(c) => {
            let inner = usize::from(canary_area.width.saturating_sub(2));
            let pending = ctx.app.pending();
            let mut lines = canary::slider(c, pending, inner, t);
            lines.push(canary::weights(c, pending, d.status.is_live(), t));
            lines.push(canary::step_line(d, c, false, t));
            let rows = usize::from(canary_area.height.saturating_sub(7));
            lines.extend(canary::steps(c, rows, inner, t));
            lines.push(canary::extras(c, t));
            frame.render_widget(
                Paragraph::new(lines).block(boxed(" Canary ", Focus::Canary)),
                canary_area,
            );
        }
        None => frame.render_widget(
            Paragraph::new(vec![
                Line::from(Span::styled("candidate weight", t.get("muted"))),
                Line::from(format!("not a canary deployment ({})", d.kind)),
            ])
            .wrap(Wrap { trim: true })
            .block(boxed(" Canary ", Focus::Canary)),
            canary_area,
        ),
    }
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
