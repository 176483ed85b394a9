//! Dialogs: help, confirmations (the focused button is marked with text, not only colour, so it
//! shows without colour too), the quit question, the plan, and the log filter prompt.

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use super::ViewCtx;
use super::widgets::{clock, elapsed, fit};
use crate::console::app::{Choice, Modal, Versions};
use crate::deploy::view::TargetView;

pub fn render(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let Some(top) = ctx.app.modals.last() else {
        return;
    };
    match top {
        Modal::Help { scroll } => help(frame, area, *scroll, ctx),
        Modal::EngineLog => engine_log(frame, area, ctx),
        Modal::Confirm(c) => {
            let t = ctx.theme;
            let mut lines = vec![Line::from(Span::styled(c.title.clone(), t.get("title")))];
            lines.extend(c.lines.iter().map(|l| {
                if (c.production && l.contains("PRODUCTION")) || l.starts_with("LOCKED") {
                    Line::from(Span::styled(l.clone(), t.get("production")))
                } else {
                    Line::from(l.clone())
                }
            }));
            lines.push(Line::from(""));
            match &c.typed {
                Some((expected, typed)) => {
                    let matched = typed == expected;
                    let cursor = if matched { "" } else { "_" };
                    lines.push(Line::from(vec![
                        Span::raw(format!("type {expected}: ")),
                        Span::styled(format!("{typed}{cursor}"), t.get("selection")),
                    ]));
                    let label = if c.needs_reason {
                        "reason (required): "
                    } else {
                        "reason (optional): "
                    };
                    let reason = if matched {
                        format!("{}_", c.reason)
                    } else {
                        c.reason.clone()
                    };
                    lines.push(Line::from(vec![
                        Span::styled(label, t.get("muted")),
                        Span::raw(reason),
                    ]));
                    lines.push(Line::from(Span::styled(
                        "Enter confirms once the name matches · Esc cancels",
                        t.get("muted"),
                    )));
                }
                None => {
                    lines.push(Line::from(vec![
                        Span::styled("reason (optional): ", t.get("muted")),
                        Span::raw(format!("{}_", c.reason)),
                    ]));
                    lines.push(buttons(c.choice, &c.no, &c.yes, ctx));
                    lines.push(Line::from(Span::styled(
                        "←/→ choose · Enter · Esc changes nothing",
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
                buttons(*choice, "Stay", "Quit", ctx),
            ];
            dialog(frame, area, " Quit ", lines, 70, "border_focus", ctx);
        }
        Modal::Plan {
            application,
            environment,
            scroll,
        } => plan(frame, area, application, environment, *scroll, ctx),
        Modal::Versions(v) => versions(frame, area, v, ctx),
        Modal::Target {
            deployment,
            name,
            scroll,
        } => target(frame, area, deployment, name, *scroll, ctx),
        Modal::Hook {
            deployment,
            event,
            name,
            scroll,
        } => hook(frame, area, deployment, *event, name, *scroll, ctx),
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

fn buttons(choice: Choice, no: &str, yes: &str, ctx: &ViewCtx<'_>) -> Line<'static> {
    let t = ctx.theme;
    let button = |label: &str, on: bool| {
        if on {
            Span::styled(format!("> {label} <"), t.get("selection"))
        } else {
            Span::styled(format!("  {label}  "), Style::default())
        }
    };
    Line::from(vec![
        button(no, choice == Choice::Cancel),
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

fn help(frame: &mut Frame<'_>, area: Rect, scroll: usize, ctx: &ViewCtx<'_>) {
    let t = ctx.theme;
    let rows: &[(&str, &str)] = &[
        (
            "↑↓ jk PgUp PgDn g G",
            "move; in the logs, scroll (G/End follows)",
        ),
        (
            "Tab Shift-Tab ←→ hl",
            "next / previous panel (←→ move a canary's weight)",
        ),
        ("Enter", "open: plan, deployment; on a target, its details"),
        ("Esc", "back to the list"),
        (
            "D",
            "deploy: pick the version (descriptor's, earlier, typed)",
        ),
        ("d", "dry-run: what would a deploy do"),
        ("R", "roll back: shows where each target goes first"),
        ("c", "cancel the deployment at its next step"),
        (
            "Space",
            "pause before the next batch / resume (a canary: hold)",
        ),
        (
            "r",
            "retry the failed targets (the selected one if it failed)",
        ),
        ("s", "skip the selected target: it keeps its release"),
        ("A", "abort: stop and roll back what the deploy changed"),
        (
            "←→ Enter",
            "canary: move the weight, then apply it (Esc drops)",
        ),
        ("p  P", "canary: promote past this step; promote now"),
        ("x  b", "canary: revert; back to the previous step's weight"),
        ("t", "run test hooks"),
        ("/", "filter logs: words plugin:X target:X level:warn"),
        ("L  f", "log level filter; the selected target only"),
        ("E", "the engine's own log (warnings, errors)"),
        ("Ctrl-U", "clear what is typed in a prompt"),
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
    scrolled(
        frame,
        area,
        " Keys ",
        lines,
        scroll,
        88,
        "↑↓ scroll · Esc closes",
        ctx,
    );
}

/// A dialog whose body scrolls: as much as fits from `scroll`, with a hint on the last line
/// and the position when it does not all fit.
#[allow(clippy::too_many_arguments, reason = "a dialog's parts")]
fn scrolled(
    frame: &mut Frame<'_>,
    area: Rect,
    title: &str,
    body: Vec<Line<'_>>,
    scroll: usize,
    width: u16,
    hint: &str,
    ctx: &ViewCtx<'_>,
) {
    // Rows each line takes once wrapped in the dialog, so the hint always shows.
    let inner = usize::from(width.min(area.width.saturating_sub(2)).saturating_sub(2)).max(1);
    let rows = |l: &Line<'_>| l.width().div_ceil(inner).max(1);
    let room = usize::from(area.height.saturating_sub(5)).max(1);
    let total = body.len();
    // The last scroll position that still fills the dialog.
    let mut last = total;
    let mut used = 0;
    while last > 0 && used + rows(&body[last - 1]) <= room {
        used += rows(&body[last - 1]);
        last -= 1;
    }
    let scroll = scroll.min(last);
    let mut lines: Vec<Line<'_>> = Vec::new();
    let mut used = 0;
    for l in body.into_iter().skip(scroll) {
        if used + rows(&l) > room {
            break;
        }
        used += rows(&l);
        lines.push(l);
    }
    let shown = lines.len();
    let more = if shown < total {
        format!("  ({}–{} of {total})", scroll + 1, scroll + shown)
    } else {
        String::new()
    };
    lines.push(Line::from(Span::styled(
        format!("{hint}{more}"),
        ctx.theme.get("muted"),
    )));
    dialog(frame, area, title, lines, width, "border_focus", ctx);
}

fn versions(frame: &mut Frame<'_>, area: Rect, v: &Versions, ctx: &ViewCtx<'_>) {
    let t = ctx.theme;
    let mut lines = vec![Line::from(Span::styled(
        format!("Which version of {} to {}?", v.application, v.environment),
        t.get("title"),
    ))];
    for (i, c) in v.choices.iter().enumerate() {
        let on = i == v.selected && v.typing.is_none();
        let style = if on {
            t.get("selection")
        } else {
            Style::default()
        };
        lines.push(Line::from(vec![
            Span::styled(
                format!("{} {:<16}", if on { "›" } else { " " }, c.version),
                style,
            ),
            Span::styled(format!(" {}", c.note), t.get("muted")),
        ]));
    }
    let other = v.selected == v.choices.len();
    match &v.typing {
        Some(text) => lines.push(Line::from(vec![
            Span::raw("  version: "),
            Span::styled(format!("{text}_"), t.get("selection")),
        ])),
        None => lines.push(Line::from(Span::styled(
            format!("{} another version…", if other { "›" } else { " " }),
            if other {
                t.get("selection")
            } else {
                t.get("muted")
            },
        ))),
    }
    lines.push(Line::from(Span::styled(
        "↑↓ choose · Enter · Esc",
        t.get("muted"),
    )));
    dialog(frame, area, " Deploy ", lines, 64, "border_focus", ctx);
}

/// One target in full: state, the whole message, every attempt, its own log lines.
fn target(
    frame: &mut Frame<'_>,
    area: Rect,
    deployment: &str,
    name: &str,
    scroll: usize,
    ctx: &ViewCtx<'_>,
) {
    let t = ctx.theme;
    let Some(d) = ctx.app.snap.deployments.iter().find(|d| d.id == deployment) else {
        return;
    };
    let Some(x) = d.targets.iter().find(|x| x.name == name) else {
        return;
    };
    let width = area.width.saturating_sub(4).min(110);
    let inner = usize::from(width.saturating_sub(2));
    let mut body: Vec<Line<'_>> = vec![Line::from(vec![
        Span::styled(
            format!(" {} ", x.state.as_str().to_uppercase()),
            t.target(x.state),
        ),
        Span::raw(format!(
            "  batch {} · {} attempt(s){}",
            x.batch,
            x.attempts.len(),
            x.duration_ms
                .map(|ms| format!(" · took {}", elapsed(i64::try_from(ms).unwrap_or(0))))
                .unwrap_or_default()
        )),
    ])];
    for l in wrap(&x.message, inner) {
        body.push(Line::from(l));
    }
    body.push(Line::from(""));
    body.push(Line::from(Span::styled(
        " #  ROUND  STARTED   TOOK    OUTCOME      IDEMPOTENCY KEY",
        t.get("muted"),
    )));
    body.extend(attempts(x, inner, ctx));
    body.push(Line::from(""));
    body.push(Line::from(Span::styled(
        format!("LOG LINES of {name}"),
        t.get("muted"),
    )));
    let mut logged = 0;
    for l in ctx.app.logs.lines().filter(|l| {
        l.deployment_id.as_deref() == Some(deployment) && l.target.as_deref() == Some(name)
    }) {
        logged += 1;
        let mut lines = wrap(&l.message, inner.saturating_sub(15)).into_iter();
        body.push(Line::from(vec![
            Span::styled(clock(l.at), t.get("muted")),
            Span::styled(format!(" {:<5} ", l.level.as_str()), t.level(l.level)),
            Span::raw(lines.next().unwrap_or_default()),
        ]));
        for more in lines {
            body.push(Line::from(format!("{:15}{more}", "")));
        }
    }
    if logged == 0 {
        body.push(Line::from(Span::styled(
            "none held by this console (`manent logs` has them all)",
            t.get("muted"),
        )));
    }
    let title = format!(
        " {} · {} ",
        x.name,
        fit(&x.moniker, inner.saturating_sub(8))
    );
    let hint = "r retry · s skip · f its logs in the pane · ↑↓ PgUp PgDn scroll · Esc";
    scrolled(frame, area, &title, body, scroll, width, hint, ctx);
}

fn hook(
    frame: &mut Frame<'_>,
    area: Rect,
    deployment: &str,
    event: crate::config::Event,
    name: &str,
    scroll: usize,
    ctx: &ViewCtx<'_>,
) {
    let t = ctx.theme;
    let Some(d) = ctx.app.snap.deployments.iter().find(|d| d.id == deployment) else {
        return;
    };
    let Some(h) = d.hooks.iter().find(|h| h.event == event && h.name == name) else {
        return;
    };
    let width = area.width.saturating_sub(4).min(110);
    let inner = usize::from(width.saturating_sub(2));
    let mut body: Vec<Line<'_>> = vec![Line::from(vec![
        Span::styled(
            format!(" {} ", h.state.as_str().to_uppercase()),
            super::deployment::hook_style(h.state, t),
        ),
        Span::raw(format!(
            "  {} · weight {} · {} · attempt {}{}",
            h.event,
            h.weight,
            h.kind,
            h.attempt,
            h.duration_ms
                .map(|ms| format!(" · took {}", super::widgets::took(ms)))
                .unwrap_or_default()
        )),
    ])];
    for l in wrap(&h.message, inner) {
        body.push(Line::from(l));
    }
    if !h.deletes.is_empty() {
        body.push(Line::from(""));
        body.push(Line::from(Span::styled(
            "DELETE POLICY ACTIONS",
            t.get("muted"),
        )));
        for d in &h.deletes {
            body.push(Line::from(format!("  {d}")));
        }
    }
    if !h.output.is_empty() {
        body.push(Line::from(""));
        body.push(Line::from(Span::styled(
            "OUTPUT (its last lines)",
            t.get("muted"),
        )));
        for l in h.output.lines() {
            for w in wrap(l, inner) {
                body.push(Line::from(w));
            }
        }
    }
    body.push(Line::from(""));
    body.push(Line::from(Span::styled(
        format!("LOG LINES of hook:{name}"),
        t.get("muted"),
    )));
    let source = format!("hook:{name}");
    let mut logged = 0;
    for l in ctx
        .app
        .logs
        .lines()
        .filter(|l| l.deployment_id.as_deref() == Some(deployment) && l.source == source)
    {
        logged += 1;
        let mut lines = wrap(&l.message, inner.saturating_sub(15)).into_iter();
        body.push(Line::from(vec![
            Span::styled(clock(l.at), t.get("muted")),
            Span::styled(format!(" {:<5} ", l.level.as_str()), t.level(l.level)),
            Span::raw(lines.next().unwrap_or_default()),
        ]));
        for more in lines {
            body.push(Line::from(format!("{:15}{more}", "")));
        }
    }
    if logged == 0 {
        body.push(Line::from(Span::styled(
            "none held by this console (`manent logs` has them all)",
            t.get("muted"),
        )));
    }
    let title = format!(
        " hook {} · {} ",
        h.name,
        fit(&h.moniker, inner.saturating_sub(8))
    );
    let hint = "↑↓ PgUp PgDn scroll · Esc";
    scrolled(frame, area, &title, body, scroll, width, hint, ctx);
}

fn attempts<'a>(x: &TargetView, inner: usize, ctx: &ViewCtx<'_>) -> Vec<Line<'a>> {
    let t = ctx.theme;
    let mut out = Vec::new();
    let last = x.attempts.len().saturating_sub(1);
    for (i, a) in x.attempts.iter().enumerate() {
        let took = a
            .ended_at
            .map(|e| took(e - a.started_at))
            .unwrap_or_else(|| "…".into());
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
                out.push(Line::from(Span::styled(
                    format!("    {l}"),
                    t.get("notice.warn"),
                )));
            }
        }
    }
    if out.is_empty() {
        out.push(Line::from(Span::styled(" none yet", t.get("muted"))));
    }
    out
}

/// `350ms` under a second, else as `elapsed`.
fn took(ms: i64) -> String {
    if ms < 1000 {
        format!("{}ms", ms.max(0))
    } else {
        elapsed(ms)
    }
}

/// `text` cut into lines of at most `width` characters, at spaces where it can.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(10);
    let mut out = Vec::new();
    for para in text.lines() {
        let mut line = String::new();
        for word in para.split(' ') {
            let mut word = word.to_owned();
            while word.chars().count() > width {
                if !line.is_empty() {
                    out.push(std::mem::take(&mut line));
                }
                let head: String = word.chars().take(width).collect();
                word = word.chars().skip(width).collect();
                out.push(head);
            }
            if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
                out.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(&word);
        }
        out.push(line);
    }
    out
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
