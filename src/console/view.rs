//! Drawing: pure functions of the app state, the theme and the injected time. No I/O, no clock.

mod deployment;
mod home;
mod logs;
mod modal;
mod widgets;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::app::{App, Screen};
use super::theme::Theme;
use crate::engine::handle::EngineMode;

/// Everything a view reads.
#[derive(Debug, Clone, Copy)]
pub struct ViewCtx<'a> {
    /// The console.
    pub app: &'a App,
    /// Colours.
    pub theme: &'a Theme,
}

/// Draws the whole screen.
pub fn render(frame: &mut Frame<'_>, app: &App, theme: &Theme) {
    let ctx = ViewCtx { app, theme };
    let area = frame.area();
    frame.render_widget(
        ratatui::widgets::Block::default().style(theme.get("base")),
        area,
    );
    let has_flash = app.flash.is_some();
    let [header, body, flash, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(4),
        Constraint::Length(u16::from(has_flash)),
        Constraint::Length(1),
    ])
    .areas(area);
    render_header(frame, header, &ctx);
    match &app.screen {
        Screen::Home => home::render(frame, body, &ctx),
        Screen::Deployment(_) => deployment::render(frame, body, &ctx),
    }
    if let Some(f) = &app.flash {
        let slot = match f.level {
            crate::plugin::Level::Error => "notice.error",
            crate::plugin::Level::Warn => "notice.warn",
            _ => "notice.info",
        };
        frame.render_widget(
            Paragraph::new(Line::from(Span::styled(
                format!(" {}", f.text),
                theme.get(slot),
            ))),
            flash,
        );
    }
    render_footer(frame, footer, &ctx);
    modal::render(frame, area, &ctx);
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
            spans.push(sep.clone());
            spans.push(Span::styled(widgets::kind_of(d), h));
            spans.push(sep.clone());
            let state = widgets::state_of(d);
            spans.push(Span::styled(
                state.to_uppercase(),
                h.patch(theme.status(&state)),
            ));
            if let Some(p) = d
                .phase
                .as_deref()
                .filter(|p| !matches!(*p, "done" | "failed") && *p != state)
            {
                spans.push(Span::styled(format!(" {p}"), h));
            }
            spans.push(sep.clone());
            let end = d.completed_at.unwrap_or(app.now);
            spans.push(Span::styled(widgets::elapsed(end - d.created_at), h));
            spans.push(sep.clone());
            spans.push(Span::styled(format!("by {}", d.operator), h));
        }
        None => {
            spans.push(sep.clone());
            let engine = match &app.snap.mode {
                Some(EngineMode::InProcess) => "engine in this console".to_owned(),
                Some(EngineMode::Attached { holder }) => {
                    format!("attached to the engine of {holder}")
                }
                None => "starting".to_owned(),
            };
            spans.push(Span::styled(engine, h));
            spans.push(sep.clone());
            spans.push(Span::styled(format!("operator {}", app.snap.operator), h));
        }
    }
    let used: usize = spans.iter().map(|s| s.content.chars().count()).sum();
    let badge = if app.readonly { " READ-ONLY " } else { "" };
    let fill = usize::from(area.width).saturating_sub(used + badge.len());
    spans.push(Span::styled(" ".repeat(fill), h));
    if app.readonly {
        spans.push(Span::styled(badge, theme.get("readonly")));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn render_footer(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let keys: &[(&str, &str)] = match ctx.app.screen {
        Screen::Home => &[
            ("Enter", "plan/open"),
            ("D", "deploy"),
            ("d", "dry-run"),
            ("R", "rollback"),
            ("c", "cancel"),
            ("Tab", "panel"),
            ("?", "help"),
            ("q", "quit"),
        ],
        Screen::Deployment(_) => &[
            ("Space", "pause/resume"),
            ("c", "cancel"),
            ("R", "rollback"),
            ("/", "filter"),
            ("L", "level"),
            ("f", "target"),
            ("Tab", "panel"),
            ("Esc", "back"),
            ("?", "help"),
            ("q", "quit"),
        ],
    };
    let mut spans = Vec::new();
    for (k, what) in keys {
        spans.push(Span::styled(format!(" {k}"), ctx.theme.get("key")));
        spans.push(Span::styled(format!(" {what} "), ctx.theme.get("muted")));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}
