//! A deployment's hooks: the narrow screen's one-line strip, and the side panel's table
//! grouped by event in the order they run (names get the room the panel has).

use ratatui::text::{Line, Span};

use super::ViewCtx;
use crate::console::app::Focus;
use crate::console::widgets::hook_style;
use crate::console::widgets::{fit, took};
use crate::deploy::view::{DeploymentView, HookState};

/// The narrow screen's hooks line: how many ran and the one running (or the selected one, with
/// the focus on hooks: ↑↓ choose, Enter opens it).
///
/// `brief` (after a canary's weights): the count, and a hook only while one is at work or failed.
pub fn hook_strip(d: &DeploymentView, ctx: &ViewCtx<'_>, brief: bool) -> Line<'static> {
    let t = ctx.theme;
    let done = d
        .hooks
        .iter()
        .filter(|h| matches!(h.state, HookState::Passed | HookState::Failed))
        .count();
    let focused = ctx.app.ui.focus == Focus::Hooks;
    let shown = if focused {
        d.hooks.get(
            ctx.app
                .row(Focus::Hooks)
                .min(d.hooks.len().saturating_sub(1)),
        )
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
pub fn hook_table(
    d: &DeploymentView,
    ctx: &ViewCtx<'_>,
    name_width: usize,
) -> Vec<(Option<usize>, Line<'static>)> {
    let t = ctx.theme;
    let mut out = vec![(
        None,
        Line::from(Span::styled(
            format!(" WGT {:<name_width$} KIND STATUS   # TIME", "NAME"),
            t.get("muted"),
        )),
    )];
    if d.hooks.is_empty() {
        let said = if d.per_target_hooks.is_empty() {
            "none defined for this deployment".to_owned()
        } else {
            format!(
                "per target only ({}): each target's line says how they went",
                d.per_target_hooks.join(", ")
            )
        };
        out.push((None, Line::from(said)));
        return out;
    }
    let focused = ctx.app.ui.focus == Focus::Hooks;
    let selected = ctx.app.row(Focus::Hooks).min(d.hooks.len() - 1);
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
                "{mark}{:>3} {:<name_width$} {:<4} ",
                h.weight,
                fit(&h.name, name_width),
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

/// The hooks as a bordered panel in `area`: the header stays, the rows scroll to keep the
/// selected hook in sight.
pub fn hooks_panel(
    frame: &mut ratatui::Frame<'_>,
    area: ratatui::layout::Rect,
    d: &DeploymentView,
    ctx: &ViewCtx<'_>,
    title: &str,
) {
    let name_width = usize::from(area.width.saturating_sub(2))
        .saturating_sub(28)
        .max(9);
    let rows = usize::from(area.height.saturating_sub(3)).max(1);
    let selected = ctx
        .app
        .row(Focus::Hooks)
        .min(d.hooks.len().saturating_sub(1));
    let mut lines = hook_table(d, ctx, name_width).into_iter();
    let mut shown: Vec<Line<'static>> = lines.next().map(|(_, l)| l).into_iter().collect();
    let body: Vec<(Option<usize>, Line<'static>)> = lines.collect();
    let at = body
        .iter()
        .position(|(i, _)| *i == Some(selected))
        .unwrap_or(0);
    let first = (at + 1).saturating_sub(rows);
    shown.extend(body.into_iter().skip(first).take(rows).map(|(_, l)| l));
    let focused = ctx.app.ui.focus == Focus::Hooks;
    frame.render_widget(
        ratatui::widgets::Paragraph::new(shown).block(crate::console::widgets::panel(
            title.to_owned(),
            focused,
            ctx.theme,
        )),
        area,
    );
}
