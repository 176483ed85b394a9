//! Drawing: pure functions of the app state, the theme and the injected time. No I/O, no clock.

mod canary;
mod deployment;
mod home;
mod hooks;
pub mod list;
mod logs;
mod side;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

pub use super::app::ViewCtx;
use super::app::{App, Screen};
use super::layout;
use super::theme::Theme;
use super::widgets;
use crate::deploy::state::DeploymentState;
use crate::engine::handle::EngineMode;

/// Draws the whole screen.
pub fn render(frame: &mut Frame<'_>, app: &App, theme: &Theme) {
    let ctx = ViewCtx { app, theme };
    let area = frame.area();
    frame.render_widget(
        ratatui::widgets::Block::default().style(theme.get("base")),
        area,
    );
    if app.too_small() {
        render_too_small(frame, area, &ctx);
        return;
    }
    let [header, body, status, footer] = layout::screen(area, app.status_rows());
    render_header(frame, header, &ctx);
    match &app.ui.screen {
        Screen::Home => home::render(frame, body, &ctx),
        Screen::Deployment(_) => deployment::render(frame, body, &ctx),
    }
    if let Some((level, text)) = app.status() {
        render_status(frame, status, level, &text, &ctx);
    }
    render_footer(frame, footer, &ctx);
    super::app::dialog::render(frame, area, &ctx);
}

/// A screen too small to read panels in says so, and what to do.
fn render_too_small(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let (w, h) = ctx.app.ui.size;
    let text = format!(
        "The terminal is {w}×{h}: manent's console needs at least {}×{}. Enlarge the window          (or lower the font size). q quits; `manent status` prints the same in a shell.",
        layout::MIN.0,
        layout::MIN.1
    );
    frame.render_widget(
        Paragraph::new(Line::from(Span::styled(text, ctx.theme.get("notice.warn"))))
            .wrap(Wrap { trim: true }),
        area,
    );
}

/// The message shown now, wrapped over its rows; what does not fit is one key away (`M`).
fn render_status(
    frame: &mut Frame<'_>,
    area: Rect,
    level: crate::plugin::Level,
    text: &str,
    ctx: &ViewCtx<'_>,
) {
    let slot = match level {
        crate::plugin::Level::Error => "notice.error",
        crate::plugin::Level::Warn => "notice.warn",
        _ => "notice.info",
    };
    let width = usize::from(area.width.saturating_sub(1)).max(20);
    let mut rows = super::app::dialog::wrap(text, width);
    let room = usize::from(area.height).max(1);
    if rows.len() > room {
        rows.truncate(room);
        if let Some(last) = rows.last_mut() {
            let keep = width.saturating_sub(16);
            *last = format!(
                "{}… (M: in full)",
                widgets::fit(last, keep).trim_end_matches('…')
            );
        }
    }
    // An error stays until Esc: its last row says so.
    let dismiss = level == crate::plugin::Level::Error && ctx.app.ui.flash.is_some();
    let last = rows.len().saturating_sub(1);
    let lines: Vec<Line<'_>> = rows
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let mut spans = vec![Span::styled(format!(" {r}"), ctx.theme.get(slot))];
            if dismiss && i == last {
                spans.push(Span::styled("  Esc", ctx.theme.get("key")));
            }
            Line::from(spans)
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), area);
}

fn render_header(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let (app, theme) = (ctx.app, ctx.theme);
    let h = theme.get("header");
    let sep = Span::styled(" │ ", h);
    let mut spans = vec![Span::styled(
        " manent",
        h.add_modifier(ratatui::style::Modifier::BOLD),
    )];
    match app.deployment() {
        Some(d) => {
            spans.push(sep.clone());
            let badge = if d.production {
                "production"
            } else {
                "environment"
            };
            spans.push(Span::styled(
                format!(" {} ", d.environment.to_uppercase()),
                theme.get(badge),
            ));
            spans.push(Span::styled(format!(" {} {}", d.application, d.version), h));
            if let Some(lock) = app.lock_of(&d.application, &d.environment) {
                spans.push(sep.clone());
                spans.push(Span::styled(
                    format!("LOCKED by {}", lock.operator),
                    theme.get("production"),
                ));
            }
            spans.push(sep.clone());
            spans.push(Span::styled(d.kind.to_string(), h));
            spans.push(sep.clone());
            spans.push(Span::styled(
                widgets::state_word(d).to_uppercase(),
                h.patch(theme.deployment(d.state, d.kind)),
            ));
            // The phase gives way first when the line is full (the strip and the targets say
            // it too); who started it stays.
            let phase_at = spans.len();
            if d.state == DeploymentState::Running
                && let Some(p) = &d.phase
            {
                spans.push(Span::styled(format!(" {p}"), h));
            }
            // Which engine runs it, where several share the database: it is where its plugins'
            // processes are.
            if let Some(owner) = app.snap.owners.get(&d.id) {
                spans.push(sep.clone());
                let style = if owner.silent {
                    theme.get("production")
                } else {
                    h
                };
                spans.push(Span::styled(format!("on {}", owner.engine), style));
            }
            if let Some((note, alarm)) = engine_note(app) {
                spans.push(sep.clone());
                spans.push(Span::styled(
                    note,
                    if alarm { theme.get("production") } else { h },
                ));
            }
            spans.push(sep.clone());
            let end = d.completed_at.unwrap_or(app.ui.now);
            spans.push(Span::styled(widgets::elapsed(end - d.created_at), h));
            spans.push(sep.clone());
            spans.push(Span::styled(format!("by {}", d.operator), h));
            let width = |spans: &[Span<'_>]| -> usize {
                spans.iter().map(|s| s.content.chars().count()).sum()
            };
            let room = usize::from(area.width).saturating_sub(if app.ui.readonly { 11 } else { 0 });
            // "from 10.0.0.7" after the operator's name goes first…
            if width(&spans) > room
                && let Some(last) = spans.last_mut()
                && let Some((who, _)) = d.operator.split_once(" from ")
            {
                *last = Span::styled(format!("by {who}"), h);
            }
            // …then the phase (the strip and the targets say it too); who started it stays.
            if width(&spans) > room
                && d.state == DeploymentState::Running
                && spans
                    .get(phase_at)
                    .is_some_and(|s| s.content.starts_with(' '))
            {
                spans.remove(phase_at);
            }
        }
        None => {
            // A lock on the selected environment before anything else: it is why a deploy
            // would be refused.
            if let Some(a) = app.selected_app()
                && let Some(lock) = &a.lock
            {
                spans.push(sep.clone());
                spans.push(Span::styled(
                    format!(
                        "{}/{} LOCKED by {} since {}: {}",
                        a.application,
                        a.environment,
                        lock.owner(),
                        widgets::clock(lock.since),
                        lock.reason
                    ),
                    theme.get("production"),
                ));
            }
            spans.push(sep.clone());
            let engine = match (&app.snap.mode, &app.snap.shared) {
                (Some(EngineMode::InProcess), Some((me, n))) if *n > 1 => {
                    format!("engine {me} here · {} more on the shared database", n - 1)
                }
                (Some(EngineMode::InProcess), Some((me, _))) => {
                    format!("engine {me} here · shared database")
                }
                (Some(EngineMode::InProcess), None) => "engine in this console".to_owned(),
                (Some(EngineMode::Attached { holder }), _) => {
                    format!("attached to the engine of {holder}")
                }
                (None, _) => "starting".to_owned(),
            };
            spans.push(Span::styled(engine, h));
            if let Some((note, alarm)) = engine_note(app) {
                spans.push(sep.clone());
                spans.push(Span::styled(
                    note,
                    if alarm { theme.get("production") } else { h },
                ));
            }
            spans.push(sep.clone());
            spans.push(Span::styled(format!("operator {}", app.snap.operator), h));
        }
    }
    let used: usize = spans.iter().map(|s| s.content.chars().count()).sum();
    let badge = if app.ui.readonly { " READ-ONLY " } else { "" };
    let fill = usize::from(area.width).saturating_sub(used + badge.len());
    spans.push(Span::styled(" ".repeat(fill), h));
    if app.ui.readonly {
        spans.push(Span::styled(badge, theme.get("readonly")));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// What became of the engine this console attached to, short (the whole story is in `M`): the
/// engine moving here is how it goes when the other console quits, not an alarm.
fn engine_note(app: &App) -> Option<(String, bool)> {
    app.snap.engine_note.as_ref()?;
    Some(match &app.snap.mode {
        Some(EngineMode::InProcess) => ("engine now in this console (M)".to_owned(), false),
        _ => ("⚠ engine: see M".to_owned(), true),
    })
}

/// The keys that matter now, from the key table: `? help` and `q quit` always show; the others
/// go from the right when the line is full.
fn render_footer(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let all = super::app::keys::footer(ctx.app);
    let (always, mut keys): (Vec<_>, Vec<_>) = all.into_iter().partition(|(_, _, a)| *a);
    let width = |k: &[(String, &str, bool)]| -> usize {
        k.iter()
            .map(|(k, w, _)| k.chars().count() + w.chars().count() + 3)
            .sum()
    };
    while !keys.is_empty() && width(&keys) + width(&always) > usize::from(area.width) {
        keys.pop();
    }
    keys.extend(always);
    let mut spans = Vec::new();
    for (k, what, _) in keys {
        spans.push(Span::styled(format!(" {k}"), ctx.theme.get("key")));
        spans.push(Span::styled(format!(" {what} "), ctx.theme.get("muted")));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}
