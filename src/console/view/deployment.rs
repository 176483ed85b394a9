//! One deployment: the failure to read first (when it failed), its targets (moniker, batch,
//! status, attempt, time, last message), the hooks and canary panels, and its log lines.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState, Wrap};

use super::ViewCtx;
use super::canary;
use super::widgets::{clock, elapsed, fit, panel, row_highlight, took};
use crate::console::app::Focus;
use crate::console::layout;
use crate::deploy::state::{Kind, TargetState};
use crate::deploy::view::{DeploymentView, HookState};

pub fn render(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let Some(d) = ctx.app.deployment() else {
        frame.render_widget(
            Paragraph::new(" this deployment is no longer listed; Esc goes back"),
            area,
        );
        return;
    };
    let failure = d.headline_failure();
    let test = d.kind == Kind::Test;
    let rows = if test { d.hooks.len() } else { d.targets.len() };
    let l = layout::deployment(area, rows, failure.is_some(), d.canary.is_some());
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
    if test {
        // A test run touches no target: its hooks are the main table.
        render_test_hooks(frame, targets, d, ctx);
        frame.render_widget(
            Paragraph::new(Line::from(Span::styled(
                format!(
                    " the test hooks against the live release {}; no target is touched",
                    d.version
                ),
                ctx.theme.get("muted"),
            ))),
            strip,
        );
        super::logs::render(frame, logs, ctx);
        if let Some(side) = side {
            render_side(frame, side, d, ctx);
        }
        return;
    }
    render_targets(frame, targets, d, ctx);
    if side.is_none() {
        let t = ctx.theme;
        let hooks_focused = ctx.app.focus == Focus::Hooks;
        match &d.canary {
            Some(c) => {
                let mut lines = canary::strip(d, c, usize::from(strip.width), ctx);
                if let Some(l) = lines.last_mut()
                    && !d.hooks.is_empty()
                {
                    if hooks_focused {
                        *l = hook_strip(d, ctx, false);
                    } else {
                        // The hooks' count, or the one at work, after the weights: Tab shows them.
                        l.spans.push(Span::styled(" ·", t.get("muted")));
                        l.spans.extend(hook_strip(d, ctx, true).spans);
                    }
                }
                frame.render_widget(Paragraph::new(lines), strip);
            }
            None => {
                let line = if d.hooks.is_empty() {
                    Line::from(vec![
                        Span::styled(" hooks ", t.get("muted")),
                        Span::raw("none defined"),
                        Span::styled("  canary ", t.get("muted")),
                        Span::raw(format!("not a canary deployment ({})", d.kind)),
                    ])
                } else {
                    hook_strip(d, ctx, false)
                };
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
    // On a shared database: the engine that runs it, where its plugins' processes are.
    let engine = app
        .snap
        .owners
        .get(&d.id)
        .map(|o| format!("· engine {}, {} ", o.engine, o.detail))
        .unwrap_or_default();
    let title = format!(
        " Targets {}/{} · batch size {} {engine}",
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

/// A test run's hooks, as the targets table shows a deploy's targets.
fn render_test_hooks(frame: &mut Frame<'_>, area: Rect, d: &DeploymentView, ctx: &ViewCtx<'_>) {
    let (app, t) = (ctx.app, ctx.theme);
    let wide = area.width >= 100;
    let visible = usize::from(area.height.saturating_sub(3)).max(1);
    let selected = app.hook_row.min(d.hooks.len().saturating_sub(1));
    let offset = (selected + 1).saturating_sub(visible);
    let rows = d.hooks.iter().skip(offset).take(visible).map(|h| {
        let took = match (h.duration_ms, h.state) {
            (Some(ms), _) => took(ms),
            (None, HookState::Running) => "…".into(),
            _ => String::new(),
        };
        Row::new(vec![
            Cell::from(if wide {
                h.moniker.clone()
            } else {
                h.name.clone()
            }),
            Cell::from(h.kind.clone()),
            Cell::from(Span::styled(h.state.as_str(), hook_style(h.state, t))),
            Cell::from(if h.attempt == 0 {
                String::new()
            } else {
                h.attempt.to_string()
            }),
            Cell::from(took),
            Cell::from(h.message.clone()),
        ])
    });
    let widths = [
        Constraint::Length(if wide { 34 } else { 14 }),
        Constraint::Length(7),
        Constraint::Length(9),
        Constraint::Length(3),
        Constraint::Length(6),
        Constraint::Min(10),
    ];
    let focused = app.focus == Focus::Hooks;
    let passed = d
        .hooks
        .iter()
        .filter(|h| h.state == HookState::Passed)
        .count();
    let title = format!(" Test hooks {passed}/{} passed ", d.hooks.len());
    let table = Table::new(rows, widths)
        .header(
            Row::new(vec![
                if wide { "MONIKER" } else { "HOOK" },
                "KIND",
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

/// A hook's state style.
pub fn hook_style(s: HookState, t: &crate::console::theme::Theme) -> ratatui::style::Style {
    t.get(match s {
        HookState::Pending => "status.pending",
        HookState::Running => "status.running",
        HookState::Retrying => "status.retrying",
        HookState::Passed => "status.ok",
        HookState::Failed => "status.failed",
    })
}

/// The narrow screen's hooks line: how many ran and the one running (or the selected one, with
/// the focus on hooks: ↑↓ choose, Enter opens it).
///
/// `brief` (after a canary's weights): the count, and a hook only while one is at work or failed.
fn hook_strip(d: &DeploymentView, ctx: &ViewCtx<'_>, brief: bool) -> Line<'static> {
    let t = ctx.theme;
    let done = d
        .hooks
        .iter()
        .filter(|h| matches!(h.state, HookState::Passed | HookState::Failed))
        .count();
    let focused = ctx.app.focus == Focus::Hooks;
    let shown = if focused {
        d.hooks
            .get(ctx.app.hook_row.min(d.hooks.len().saturating_sub(1)))
    } else {
        let busy = d
            .hooks
            .iter()
            .find(|h| matches!(h.state, HookState::Running | HookState::Retrying))
            .or_else(|| d.hooks.iter().find(|h| h.state == HookState::Failed));
        if brief {
            busy
        } else {
            busy.or_else(|| d.hooks.iter().rev().find(|h| h.state != HookState::Pending))
                .or_else(|| d.hooks.first())
        }
    };
    let mut spans = vec![Span::styled(
        format!(" hooks {done}/{} ", d.hooks.len()),
        if focused {
            t.get("selection")
        } else {
            t.get("muted")
        },
    )];
    if let Some(h) = shown {
        spans.push(Span::raw(format!(
            "{}{} {} ",
            if focused { "› " } else { "" },
            h.event,
            h.name
        )));
        spans.push(Span::styled(h.state.as_str(), hook_style(h.state, t)));
        if h.attempt > 1 {
            spans.push(Span::styled(format!(" try {}", h.attempt), t.get("muted")));
        }
        if let Some(ms) = h.duration_ms {
            spans.push(Span::styled(format!(" {}", took(ms)), t.get("muted")));
        }
        if focused {
            spans.push(Span::styled("  ↑↓ Enter", t.get("muted")));
        }
    }
    Line::from(spans)
}

/// The side panel's hooks, grouped by event in the order they run: a header, then per event its
/// name and its hooks (weight, name, kind, state, attempt, time), each line with the hook it
/// shows.
fn hook_table(d: &DeploymentView, ctx: &ViewCtx<'_>) -> Vec<(Option<usize>, Line<'static>)> {
    let t = ctx.theme;
    let mut out = vec![(
        None,
        Line::from(Span::styled(
            " WGT NAME      KIND STATUS   # TIME",
            t.get("muted"),
        )),
    )];
    if d.hooks.is_empty() {
        out.push((None, Line::from("none defined for this deployment")));
        return out;
    }
    let focused = ctx.app.focus == Focus::Hooks;
    let selected = ctx.app.hook_row.min(d.hooks.len() - 1);
    let mut event = None;
    for (i, h) in d.hooks.iter().enumerate() {
        if event != Some(h.event) {
            event = Some(h.event);
            out.push((
                None,
                Line::from(Span::styled(h.event.as_str(), t.get("title"))),
            ));
        }
        let mark = if focused && i == selected { "›" } else { " " };
        let line = Line::from(vec![
            Span::raw(format!(
                "{mark}{:>3} {:<9} {:<4} ",
                h.weight,
                fit(&h.name, 9),
                if h.kind == "command" { "cmd" } else { &h.kind }
            )),
            Span::styled(format!("{:<8} ", h.state.as_str()), hook_style(h.state, t)),
            Span::raw(if h.attempt == 0 {
                "  ".to_owned()
            } else {
                format!("{} ", h.attempt)
            }),
            Span::styled(h.duration_ms.map(took).unwrap_or_default(), t.get("muted")),
        ]);
        out.push((
            Some(i),
            if focused && i == selected {
                line.style(t.get("selection"))
            } else {
                line
            },
        ));
    }
    out
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
    let canary_rows = d.canary.as_ref().map_or(4, |c| {
        u16::try_from(c.plan.steps.len().min(10)).unwrap_or(10) + 7
    });
    let hook_lines = hook_table(d, ctx);
    let hook_rows = u16::try_from(hook_lines.len().clamp(2, 11)).unwrap_or(11) + 2;
    let [hooks, canary_area, info] = Layout::vertical([
        Constraint::Length(hook_rows),
        Constraint::Length(canary_rows),
        Constraint::Min(3),
    ])
    .areas(area);
    let boxed = |title: &'static str, focus: Focus| panel(title, ctx.app.focus == focus, t);
    // The header stays; the rows scroll to keep the selected hook in sight.
    let rows = usize::from(hooks.height.saturating_sub(3)).max(1);
    let selected = ctx.app.hook_row.min(d.hooks.len().saturating_sub(1));
    let mut lines = hook_lines.into_iter();
    let mut shown: Vec<Line<'static>> = lines.next().map(|(_, l)| l).into_iter().collect();
    let body: Vec<(Option<usize>, Line<'static>)> = lines.collect();
    let at = body
        .iter()
        .position(|(i, _)| *i == Some(selected))
        .unwrap_or(0);
    let first = (at + 1).saturating_sub(rows);
    shown.extend(body.into_iter().skip(first).take(rows).map(|(_, l)| l));
    frame.render_widget(
        Paragraph::new(shown).block(boxed(" Hooks ", Focus::Hooks)),
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
