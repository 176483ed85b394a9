//! Dialogs: help, confirmations (the focused button is marked with text, not only colour, so it
//! shows without colour too), the quit question, the plan, and the log filter prompt.

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use super::ViewCtx;
use super::widgets::fit;
use crate::console::app::{Choice, Modal};

pub fn render(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let Some(top) = ctx.app.modals.last() else {
        return;
    };
    match top {
        Modal::Help => help(frame, area, ctx),
        Modal::EngineLog => engine_log(frame, area, ctx),
        Modal::Confirm(c) => {
            let t = ctx.theme;
            let mut lines = vec![Line::from(Span::styled(c.title.clone(), t.get("title")))];
            lines.extend(c.lines.iter().map(|l| {
                if c.production && l.contains("PRODUCTION") {
                    Line::from(Span::styled(l.clone(), t.get("production")))
                } else {
                    Line::from(l.clone())
                }
            }));
            lines.push(Line::from(""));
            match &c.typed {
                Some((expected, typed)) => {
                    lines.push(Line::from(vec![
                        Span::raw(format!("type {expected}: ")),
                        Span::styled(format!("{typed}_"), t.get("selection")),
                    ]));
                    lines.push(Line::from(Span::styled(
                        "Enter confirms once it matches · Esc cancels",
                        t.get("muted"),
                    )));
                }
                None => {
                    lines.push(Line::from(vec![
                        Span::styled("reason (optional): ", t.get("muted")),
                        Span::raw(format!("{}_", c.reason)),
                    ]));
                    lines.push(buttons(c.choice, "Confirm", ctx));
                    lines.push(Line::from(Span::styled(
                        "←/→ choose · Enter · Esc cancels",
                        t.get("muted"),
                    )));
                }
            }
            let border = if c.production {
                "production"
            } else {
                "border_focus"
            };
            dialog(frame, area, " Confirm ", lines, 72, border, ctx);
        }
        Modal::Quit {
            choice, running, ..
        } => {
            let what = if ctx.app.stop_on_quit {
                format!(
                    "{} stops at its next step (a demo ends with its console).",
                    running.join(", ")
                )
            } else {
                format!(
                    "{} goes on in a background worker until it finishes or waits for an operator; \
                     `manent console` shows it again.",
                    running.join(", ")
                )
            };
            let lines = vec![
                Line::from(Span::styled("Quit the console?", ctx.theme.get("title"))),
                Line::from(what),
                Line::from(""),
                buttons(*choice, "Quit", ctx),
            ];
            dialog(frame, area, " Quit ", lines, 70, "border_focus", ctx);
        }
        Modal::Plan {
            application,
            environment,
            scroll,
        } => plan(frame, area, application, environment, *scroll, ctx),
        Modal::Search { text } => {
            let lines = vec![
                Line::from(vec![
                    Span::raw("/"),
                    Span::styled(format!("{text}_"), ctx.theme.get("selection")),
                ]),
                Line::from(Span::styled(
                    "words match the message; plugin:NAME target:NAME level:warn · Enter applies · Esc",
                    ctx.theme.get("muted"),
                )),
            ];
            dialog(frame, area, " Filter logs ", lines, 76, "border_focus", ctx);
        }
    }
}

fn buttons(choice: Choice, yes: &str, ctx: &ViewCtx<'_>) -> Line<'static> {
    let t = ctx.theme;
    let button = |label: &str, on: bool| {
        if on {
            Span::styled(format!("> {label} <"), t.get("selection"))
        } else {
            Span::styled(format!("  {label}  "), Style::default())
        }
    };
    Line::from(vec![
        button("Cancel", choice == Choice::Cancel),
        Span::raw("   "),
        button(yes, choice == Choice::Confirm),
    ])
}

fn dialog(
    frame: &mut Frame<'_>,
    area: Rect,
    title: &str,
    lines: Vec<Line<'_>>,
    width: u16,
    border: &str,
    ctx: &ViewCtx<'_>,
) {
    let w = width.min(area.width.saturating_sub(2));
    let inner_w = usize::from(w.saturating_sub(2)).max(1);
    let rows: usize = lines
        .iter()
        .map(|l| l.width().div_ceil(inner_w).max(1))
        .sum();
    let h = (u16::try_from(rows).unwrap_or(u16::MAX) + 2).min(area.height.saturating_sub(2));
    let [vert] = Layout::vertical([Constraint::Length(h)])
        .flex(Flex::Center)
        .areas(area);
    let [rect] = Layout::horizontal([Constraint::Length(w)])
        .flex(Flex::Center)
        .areas(vert);
    frame.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(ctx.theme.get(border))
        .title(Span::styled(title.to_owned(), ctx.theme.get("title")))
        .style(ctx.theme.get("base"));
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(block),
        rect,
    );
}

fn help(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let t = ctx.theme;
    let rows: &[(&str, &str)] = &[
        (
            "↑↓ jk PgUp PgDn g G",
            "move; in the logs, scroll (G/End follows)",
        ),
        ("Tab ←→ hl", "next / previous panel"),
        ("Enter", "open: plan, deployment; in targets, their logs"),
        ("Esc", "back to the list"),
        ("D", "deploy the selected application/environment"),
        ("d", "dry-run: what would a deploy do"),
        ("R", "roll back (production: type its name)"),
        ("c", "cancel the deployment at its next step"),
        ("Space", "pause before the next batch / resume"),
        ("p x ←→", "canary: promote, revert, traffic weight"),
        ("t", "run test hooks"),
        ("/", "filter logs: words plugin:X target:X level:warn"),
        ("L  f", "log level filter; the selected target only"),
        ("E", "the engine's own log (warnings, errors)"),
        ("?  q", "this help; quit"),
    ];
    let mut lines: Vec<Line<'_>> = rows
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!("{k:<20}"), t.get("key")),
                Span::raw(*what),
            ])
        })
        .collect();
    if ctx.app.readonly {
        lines.push(Line::from(Span::styled(
            "read-only: actions that change anything are disabled",
            t.get("readonly"),
        )));
    }
    dialog(frame, area, " Keys ", lines, 88, "border_focus", ctx);
}

fn plan(
    frame: &mut Frame<'_>,
    area: Rect,
    application: &str,
    environment: &str,
    scroll: usize,
    ctx: &ViewCtx<'_>,
) {
    let t = ctx.theme;
    let Some(a) = ctx
        .app
        .snap
        .apps
        .iter()
        .find(|a| a.application == application && a.environment == environment)
    else {
        return;
    };
    let mut lines = vec![Line::from(vec![
        Span::styled(
            format!("{} {} → ", a.application, a.version),
            t.get("title"),
        ),
        Span::styled(
            format!(" {} ", a.environment),
            if a.production {
                t.get("production")
            } else {
                t.get("environment")
            },
        ),
        Span::raw(format!(
            "  {} targets · {} · plugin {}",
            a.targets, a.strategy, a.plugin
        )),
    ])];
    let mut body = Vec::new();
    for (i, batch) in a.batches.iter().enumerate() {
        body.push(Line::from(Span::styled(
            format!("batch {}", i + 1),
            t.get("muted"),
        )));
        for name in batch {
            let change = match a.live_by_target.get(name) {
                Some(v) if *v == a.version => format!("{v} (unchanged)"),
                Some(v) => format!("{v} → {}", a.version),
                None => format!("new → {}", a.version),
            };
            body.push(Line::from(format!("  {:<28} {change}", fit(name, 28))));
        }
    }
    let room = usize::from(area.height.saturating_sub(8)).max(3);
    let scroll = scroll.min(body.len().saturating_sub(room));
    lines.extend(body.into_iter().skip(scroll).take(room));
    lines.push(Line::from(Span::styled(
        "D/Enter deploy · d dry-run · R roll back · ↑↓ scroll · Esc",
        t.get("muted"),
    )));
    dialog(frame, area, " Plan ", lines, 76, "border_focus", ctx);
}

/// The engine's own tracing output, captured by tui-logger while the console is up (nothing
/// else may write to the terminal).
fn engine_log(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let t = ctx.theme;
    let rect = area.inner(ratatui::layout::Margin {
        horizontal: 2,
        vertical: 2,
    });
    frame.render_widget(Clear, rect);
    let widget = tui_logger::TuiLoggerWidget::default()
        .block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(t.get("border_focus"))
                .title(Span::styled(" Engine log · Esc closes ", t.get("title"))),
        )
        .style(t.get("base"))
        .style_error(t.get("log.error"))
        .style_warn(t.get("log.warn"))
        .style_info(t.get("log.info"))
        .style_debug(t.get("log.debug"))
        .style_trace(t.get("log.trace"))
        .output_target(false)
        .output_file(false)
        .output_line(false);
    frame.render_widget(widget, rect);
}
