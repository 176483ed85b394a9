//! One deployment: what to read first (why it failed, or why its router did), its targets
//! (name, batch, status, attempt, time, last message; filtered with `/`), the hooks and canary
//! panels, and its log lines. `z` gives the focused panel the whole screen.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph};

use super::hooks::{hook_strip, hooks_panel};
use super::list::{Column, ListPanel, Mark};
use super::{ViewCtx, canary, side};
use crate::console::app::{self, Focus};
use crate::console::layout::{self, Col};
use crate::console::widgets::{elapsed, fit, took};
use crate::deploy::state::{Kind, TargetState};
use crate::deploy::view::{DeploymentView, HookState, HookView, TargetView};

use crate::console::widgets::hook_style;

pub fn render(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let Some(d) = ctx.app.deployment() else {
        frame.render_widget(
            Paragraph::new(" this deployment is no longer listed; Esc goes back"),
            area,
        );
        return;
    };
    if ctx.app.ui.zoom {
        render_zoomed(frame, area, d, ctx);
        return;
    }
    let test = d.kind == Kind::Test;
    let rows = if test { d.hooks.len() } else { d.targets.len() };
    let main = if area.width >= layout::WIDE {
        area.width.saturating_sub(layout::side_width(area.width))
    } else {
        area.width
    };
    let l = layout::deployment(area, rows, app::headline_rows(d, main), d.canary.is_some());
    if let Some(f) = app::headline(d) {
        // What failed, in the operator's first lines, in full as far as they go; the rest is
        // one Enter (the target) or M away.
        let width = usize::from(l.failure.width).max(20);
        let mut rows = crate::console::app::dialog::wrap(&format!(" {f}"), width);
        let room = usize::from(l.failure.height);
        if rows.len() > room {
            rows.truncate(room);
            if let Some(last) = rows.last_mut() {
                let keep = width.saturating_sub(16);
                *last = format!("{}… (M: in full)", fit(last, keep).trim_end_matches('…'));
            }
        }
        let style = ctx.theme.get(if f.starts_with('⚠') {
            "notice.warn"
        } else {
            "status.failed"
        });
        let lines: Vec<Line<'_>> = rows
            .into_iter()
            .map(|r| Line::from(Span::styled(r, style)))
            .collect();
        frame.render_widget(Paragraph::new(lines), l.failure);
    }
    let (targets, strip, logs, side) = (l.targets, l.strip, l.logs, l.side);
    if test {
        // A test run touches no target: its hooks are the main table.
        render_test_hooks(frame, targets, d, ctx);
        frame.render_widget(
            Paragraph::new(Line::from(Span::styled(
                format!(
                    " the test hooks against {}; no target is touched",
                    d.version
                ),
                ctx.theme.get("muted"),
            ))),
            strip,
        );
    } else {
        render_targets(frame, targets, d, ctx);
        if side.is_none() {
            render_strip(frame, strip, d, ctx);
        }
    }
    // A narrow screen has no side column: the hooks, focused, take the log pane's place (Tab
    // never stops on a panel that is not drawn; Tab again brings the logs back).
    if side.is_none() && !test && ctx.app.ui.focus == Focus::Hooks {
        hooks_panel(frame, logs, d, ctx, " Hooks · Enter opens one · Tab: logs ");
        return;
    }
    super::logs::render(frame, logs, ctx);
    if let Some(side) = side {
        side::render(frame, side, d, ctx);
    }
}

/// The focused panel alone, over the whole body.
fn render_zoomed(frame: &mut Frame<'_>, area: Rect, d: &DeploymentView, ctx: &ViewCtx<'_>) {
    match ctx.app.ui.focus {
        Focus::Logs => super::logs::render(frame, area, ctx),
        Focus::Canary => side::canary_panel(frame, area, d, ctx),
        Focus::Hooks if d.kind == Kind::Test => render_test_hooks(frame, area, d, ctx),
        Focus::Hooks => hooks_panel(frame, area, d, ctx, " Hooks · z: back "),
        _ => render_targets(frame, area, d, ctx),
    }
}

/// The narrow screen's strip: the canary (the panel its arrows move) and the hooks.
fn render_strip(frame: &mut Frame<'_>, strip: Rect, d: &DeploymentView, ctx: &ViewCtx<'_>) {
    let t = ctx.theme;
    let hooks_focused = ctx.app.ui.focus == Focus::Hooks;
    match &d.canary {
        Some(c) => {
            // The hooks' count, or the one at work, after the weights: Tab shows them.
            let hooks = (!d.hooks.is_empty() && !hooks_focused).then(|| hook_strip(d, ctx, true));
            let reserve = hooks.as_ref().map_or(0, |h| 2 + h.width());
            let mut lines = canary::strip(d, c, (usize::from(strip.width), reserve), ctx);
            if let Some(l) = lines.last_mut()
                && !d.hooks.is_empty()
            {
                match hooks {
                    Some(h) => {
                        l.spans.push(Span::styled(" ·", t.get("muted")));
                        l.spans.extend(h.spans);
                    }
                    None => *l = hook_strip(d, ctx, false),
                }
            }
            frame.render_widget(Paragraph::new(lines), strip);
        }
        None => {
            let line = if d.is_summary() {
                Line::from(Span::styled(
                    " reading its hooks and targets…",
                    t.get("muted"),
                ))
            } else if d.hooks.is_empty() {
                Line::from(vec![
                    Span::styled(" hooks ", t.get("muted")),
                    Span::raw(if d.per_target_hooks.is_empty() {
                        "none defined".to_owned()
                    } else {
                        format!("per target: {}", d.per_target_hooks.join(", "))
                    }),
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

fn render_targets(frame: &mut Frame<'_>, area: Rect, d: &DeploymentView, ctx: &ViewCtx<'_>) {
    let (app, t) = (ctx.app, ctx.theme);
    let list = app.visible_targets();
    let wide = area.width >= 100;
    let name = list
        .iter()
        .map(|x| {
            if wide {
                x.moniker.chars().count()
            } else {
                x.name.chars().count()
            }
        })
        .max()
        .unwrap_or(10);
    // On a shared database: the engine that runs it, where its plugins' processes are.
    let engine = app
        .snap
        .owners
        .get(&d.id)
        .map(|o| format!("· engine {}, {} ", o.engine, o.detail))
        .unwrap_or_default();
    let filter = &app.ui.lists.get(Focus::Targets).filter;
    let filter = if filter.is_empty() {
        String::new()
    } else {
        format!("· /{filter} {} shown (Esc clears) ", list.len())
    };
    let counts = d.counts();
    let title = if d.is_summary() {
        // Shown for a moment: a finished deployment is read whole once it is opened.
        if counts.total == 0 {
            " Targets · reading them… ".to_owned()
        } else {
            format!(" Targets {}/{} · reading them… ", counts.done, counts.total)
        }
    } else if let Some((on, back)) = d.undone() {
        // Taken back: the count says what is on its version now, not what it went through.
        format!(
            " Targets {on}/{} on {} · {back} taken back {filter}{engine}",
            counts.total, d.version
        )
    } else {
        format!(
            " Targets {}/{} · batch size {} {filter}{engine}",
            counts.done,
            counts.total,
            batch_sizes(d)
        )
    };
    ListPanel::new(&list, app.row(Focus::Targets), title)
        .columns(vec![
            Column::text(
                if wide { "MONIKER" } else { "TARGET" },
                Col::shrinks(u16::try_from(name).unwrap_or(40).min(48), 10, 5),
                move |x: &TargetView| {
                    if wide {
                        x.moniker.clone()
                    } else {
                        x.name.clone()
                    }
                },
            ),
            Column::new("BATCH", Col::fixed(5), |x: &TargetView, _| {
                Cell::from(x.batch.to_string())
            }),
            Column::new("STATUS", Col::fixed(15), |x: &TargetView, _| {
                Cell::from(Span::styled(x.state.as_str(), t.target(x.state)))
            }),
            Column::new("TRY", Col::fixed(3), |x: &TargetView, _| {
                Cell::from(attempt(x.attempt))
            }),
            Column::new("TIME", Col::fixed(6), |x: &TargetView, _| {
                Cell::from(match (x.duration_ms, x.state) {
                    (Some(ms), _) => elapsed(i64::try_from(ms).unwrap_or(0)),
                    (None, TargetState::Running) => "…".into(),
                    _ => String::new(),
                })
            }),
            Column::new(
                "MESSAGE",
                Col::shrinks(10, 10, 0).fills(),
                |x: &TargetView, _| Cell::from(x.message.clone()),
            ),
        ])
        .focus(app.ui.focus == Focus::Targets, Mark::Always)
        .render(frame, area, t);
}

/// An attempt's number; none before the first.
fn attempt(n: u32) -> String {
    if n == 0 { String::new() } else { n.to_string() }
}

/// A test run's hooks, as the targets table shows a deploy's targets.
fn render_test_hooks(frame: &mut Frame<'_>, area: Rect, d: &DeploymentView, ctx: &ViewCtx<'_>) {
    let (app, t) = (ctx.app, ctx.theme);
    let wide = area.width >= 100;
    let hooks = app.visible_hooks();
    let passed = d
        .hooks
        .iter()
        .filter(|h| h.state == HookState::Passed)
        .count();
    let title = format!(" Test hooks {passed}/{} passed ", d.hooks.len());
    ListPanel::new(&hooks, app.row(Focus::Hooks), title)
        .columns(vec![
            Column::new(
                if wide { "MONIKER" } else { "HOOK" },
                Col::fixed(if wide { 34 } else { 14 }),
                move |h: &HookView, _| {
                    Cell::from(if wide {
                        h.moniker.clone()
                    } else {
                        h.name.clone()
                    })
                },
            ),
            Column::new("KIND", Col::fixed(7), |h: &HookView, _| {
                Cell::from(h.kind.clone())
            }),
            Column::new("STATUS", Col::fixed(9), |h: &HookView, _| {
                Cell::from(Span::styled(h.state.as_str(), hook_style(h.state, t)))
            }),
            Column::new("TRY", Col::fixed(3), |h: &HookView, _| {
                Cell::from(attempt(h.attempt))
            }),
            Column::new("TIME", Col::fixed(6), |h: &HookView, _| {
                Cell::from(match (h.duration_ms, h.state) {
                    (Some(ms), _) => took(ms),
                    (None, HookState::Running) => "…".into(),
                    _ => String::new(),
                })
            }),
            Column::new(
                "MESSAGE",
                Col::shrinks(10, 10, 0).fills(),
                |h: &HookView, _| Cell::from(h.message.clone()),
            ),
        ])
        .focus(app.ui.focus == Focus::Hooks, Mark::Always)
        .render(frame, area, t);
}

fn batch_sizes(d: &DeploymentView) -> String {
    let first = d.targets.iter().filter(|t| t.batch == 1).count();
    if d.batches <= 1 {
        d.targets.len().to_string()
    } else {
        format!("{first} × {}", d.batches)
    }
}
