//! Drawing: pure functions of the app state, the theme and the injected time. No I/O, no clock.

mod canary;
mod deployment;
mod home;
mod logs;
mod modal;
pub(crate) mod widgets;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::app::{App, Flash, Screen};
use super::layout;
use super::theme::Theme;
use crate::deploy::state::{DeploymentState, Topic};
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
    // The database refusing writes stays on screen while it lasts.
    let trouble = app.snap.store_trouble.as_ref().map(|t| Flash {
        text: format!("⚠ {t}"),
        level: crate::plugin::Level::Error,
        at: app.now,
    });
    let status = app.flash.as_ref().or(trouble.as_ref());
    let [header, body, flash, footer] = layout::screen(area, status.is_some());
    render_header(frame, header, &ctx);
    match &app.screen {
        Screen::Home => home::render(frame, body, &ctx),
        Screen::Deployment(_) => deployment::render(frame, body, &ctx),
    }
    if let Some(f) = status {
        let slot = match f.level {
            crate::plugin::Level::Error => "notice.error",
            crate::plugin::Level::Warn => "notice.warn",
            _ => "notice.info",
        };
        // On a deployment's screen its id goes without saying.
        let text = app
            .deployment()
            .and_then(|d| f.text.strip_prefix(&format!("{}: ", d.id)))
            .unwrap_or(&f.text);
        frame.render_widget(
            Paragraph::new(Line::from(Span::styled(
                format!(" {text}"),
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
                d.state.as_str().to_uppercase(),
                h.patch(theme.deployment(d.state, d.kind)),
            ));
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
            spans.push(sep.clone());
            let end = d.completed_at.unwrap_or(app.now);
            spans.push(Span::styled(widgets::elapsed(end - d.created_at), h));
            spans.push(sep.clone());
            spans.push(Span::styled(format!("by {}", d.operator), h));
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
    let app = ctx.app;
    let mut keys: Vec<(&str, &str)> = match app.screen {
        Screen::Home => {
            let mut k = vec![
                ("Enter", "plan/open"),
                ("D", "deploy"),
                ("R", "rollback"),
                ("d", "dry-run"),
                ("c", "cancel"),
            ];
            if app.selected_app().is_some_and(|a| !a.tests.is_empty()) {
                k.push(("t", "test"));
            }
            k.push(("Tab", "panel"));
            k
        }
        Screen::Deployment(_) => deployment_keys(app),
    };
    // `? help` and `q quit` always show; others go from the right when the line is full.
    let always = [("?", "help"), ("q", "quit")];
    let width = |k: &[(&str, &str)]| -> usize {
        k.iter()
            .map(|(k, w)| k.chars().count() + w.chars().count() + 3)
            .sum()
    };
    while !keys.is_empty() && width(&keys) + width(&always) > usize::from(area.width) {
        keys.pop();
    }
    keys.extend(always);
    let mut spans = Vec::new();
    for (k, what) in keys {
        spans.push(Span::styled(format!(" {k}"), ctx.theme.get("key")));
        spans.push(Span::styled(format!(" {what} "), ctx.theme.get("muted")));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The deployment screen's keys: what the deployment takes now first.
fn deployment_keys(app: &App) -> Vec<(&'static str, &'static str)> {
    let mut keys = Vec::new();
    if let Some(d) = app.deployment() {
        if app.pending().is_some() {
            keys.push(("Enter", "apply weight"));
            keys.push(("Esc", "drop it"));
        }
        if d.takes(Topic::Weight) {
            keys.push(("←→", "weight"));
        }
        if d.takes(Topic::Promote) {
            keys.push(("p", "promote"));
        }
        if d.takes(Topic::Revert) {
            keys.push(("x", "revert"));
        }
        if d.takes(Topic::Back)
            && d.canary
                .as_ref()
                .is_some_and(|c| c.status.back_to.is_some())
        {
            keys.push(("b", "back"));
        }
        if d.takes(Topic::Retry) {
            keys.push(("r", "retry"));
        }
        if d.takes(Topic::Skip) && d.state == DeploymentState::FailedAwaiting {
            keys.push(("s", "skip"));
        }
        if d.takes(Topic::Abort) {
            keys.push(("A", "abort"));
        }
        if d.takes(Topic::Resume) {
            keys.push(("Space", "resume"));
        } else if d.takes(Topic::Pause) {
            keys.push(("Space", if d.canary.is_some() { "hold" } else { "pause" }));
        }
        if d.status.is_live() {
            keys.push(("c", "cancel"));
        }
        if app.selected_app().is_some_and(|a| !a.tests.is_empty()) {
            keys.push(("t", "test"));
        }
    }
    if app.pending().is_none() {
        let enter = match app.focus {
            crate::console::app::Focus::Hooks => "hook",
            _ => "target",
        };
        keys.extend([("Enter", enter), ("Esc", "back")]);
    }
    keys.extend([("/", "filter"), ("Tab", "panel"), ("L", "level")]);
    keys
}
