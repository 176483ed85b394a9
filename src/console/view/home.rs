//! Home: every application's environments, and the live and recent deployments.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};

use super::ViewCtx;
use super::widgets::{clock, elapsed, fit, panel, progress, row_highlight};
use crate::console::app::Focus;

pub fn render(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    // What waits on a human comes first, when anything does.
    let inbox = ctx.app.inbox();
    let area = if inbox.is_empty() {
        area
    } else {
        let height = u16::try_from(inbox.len().min(4) + 2).unwrap_or(6);
        let [top, rest] =
            Layout::vertical([Constraint::Length(height), Constraint::Min(8)]).areas(area);
        render_inbox(frame, top, &inbox, ctx);
        rest
    };
    let apps_height = u16::try_from(ctx.app.snap.apps.len())
        .unwrap_or(u16::MAX)
        .saturating_add(3);
    let [top, bottom] =
        Layout::vertical([Constraint::Max(apps_height.max(5)), Constraint::Min(5)]).areas(area);
    render_apps(frame, top, ctx);
    // The journal takes what the deployments leave, up to eight entries, when there is room.
    let journal_rows = ctx.app.snap.journal.len().clamp(1, 8);
    let wanted_deployments = ctx.app.snap.deployments.len().max(1) + 3;
    let free = usize::from(bottom.height).saturating_sub(wanted_deployments.max(5));
    if free >= 3 {
        let height = u16::try_from(journal_rows.min(free - 2) + 2).unwrap_or(3);
        let [deployments, journal] =
            Layout::vertical([Constraint::Min(5), Constraint::Length(height)]).areas(bottom);
        render_deployments(frame, deployments, ctx);
        render_journal(frame, journal, ctx);
    } else {
        render_deployments(frame, bottom, ctx);
    }
}

/// "Waiting on you": decisions, canaries at a gate, paused and dead-lettered deployments,
/// locks about to expire; Enter jumps to one.
fn render_inbox(
    frame: &mut Frame<'_>,
    area: Rect,
    items: &[crate::deploy::inbox::Item],
    ctx: &ViewCtx<'_>,
) {
    let (app, t) = (ctx.app, ctx.theme);
    let wide = area.width >= 100;
    let rows = items.iter().map(|i| {
        let id = i.deployment.as_deref().map_or("-", |id| {
            if wide {
                id
            } else {
                id.get(id.len().saturating_sub(11)..).unwrap_or(id)
            }
        });
        let mut cells = vec![
            Cell::from(Span::styled(i.waiting.as_str(), t.get("notice.warn"))),
            Cell::from(fit(&i.subject, 18)),
            Cell::from(id.to_owned()),
            Cell::from(i.what.clone()),
        ];
        if wide {
            cells.push(Cell::from(Span::styled(i.verbs.clone(), t.get("muted"))));
        }
        Row::new(cells)
    });
    let mut widths = vec![
        Constraint::Length(6),
        Constraint::Length(18),
        Constraint::Length(if wide { 25 } else { 11 }),
        Constraint::Min(20),
    ];
    if wide {
        widths.push(Constraint::Length(40));
    }
    let focused = app.focus == Focus::Inbox;
    let title = format!(" Waiting on you: {} · Shift-Tab, Enter opens ", items.len());
    let table = Table::new(rows, widths)
        .block(panel(&title, focused, t))
        .row_highlight_style(row_highlight(focused, t))
        .highlight_symbol("› ");
    let selected = app.inbox_row.min(items.len().saturating_sub(1));
    let mut state = TableState::default().with_selected(focused.then_some(selected));
    frame.render_stateful_widget(table, area, &mut state);
}

/// Who did what, newest first: the audit journal `manent history` also shows.
fn render_journal(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let t = ctx.theme;
    let journal = &ctx.app.snap.journal;
    let title = if journal.is_empty() {
        " Journal: no operator actions yet "
    } else {
        " Journal "
    };
    let lines: Vec<Line<'_>> = journal
        .iter()
        .take(usize::from(area.height.saturating_sub(2)))
        .map(|j| {
            let who = match &j.client {
                Some(c) => format!("{}@{c}", j.operator),
                None => j.operator.clone(),
            };
            let mut spans = vec![
                Span::styled(clock(j.at), t.get("muted")),
                Span::raw(format!(" {who} ")),
                Span::styled(j.action.clone(), t.get("title")),
            ];
            if let Some(s) = &j.subject {
                spans.push(Span::raw(format!(" {s}")));
            }
            if let Some(d) = &j.detail {
                spans.push(Span::raw(format!(" {d}")));
            }
            if let Some(r) = &j.reason {
                spans.push(Span::styled(
                    format!(" \u{201c}{r}\u{201d}"),
                    t.get("muted"),
                ));
            }
            Line::from(spans)
        })
        .collect();
    frame.render_widget(
        Paragraph::new(lines).block(panel(title, false, ctx.theme)),
        area,
    );
}

fn render_apps(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let (app, t) = (ctx.app, ctx.theme);
    let wide = area.width >= 100;
    let rows = app.snap.apps.iter().map(|a| {
        let env = Span::styled(
            format!(" {} ", a.environment),
            if a.production {
                t.get("production")
            } else {
                t.get("environment")
            },
        );
        let live = if a.live.is_empty() {
            "-".to_owned()
        } else {
            a.live.join(",")
        };
        let mut name = vec![Span::raw(format!("{} ", a.application)), env];
        if a.lock.is_some() {
            name.push(Span::raw(" "));
            name.push(Span::styled("LOCKED", t.get("production")));
        }
        let mut cells = vec![
            Cell::from(Line::from(name)),
            Cell::from(a.version.clone()),
            Cell::from(live),
            Cell::from(a.targets.to_string()),
            Cell::from(a.strategy.clone()),
        ];
        if wide {
            cells.push(Cell::from(a.plugin.clone()));
        }
        Row::new(cells)
    });
    let mut header = vec!["APPLICATION", "VERSION", "LIVE", "TARGETS", "STRATEGY"];
    let mut widths = vec![
        Constraint::Min(20),
        Constraint::Length(10),
        Constraint::Min(10),
        Constraint::Length(7),
        Constraint::Length(10),
    ];
    if wide {
        header.push("PLUGIN");
        widths.push(Constraint::Length(14));
    }
    let focused = app.focus == Focus::Apps;
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(t.get("muted")))
        .block(panel(" Applications ", focused, t))
        .row_highlight_style(row_highlight(focused, t))
        .highlight_symbol("› ");
    let mut state = TableState::default().with_selected(Some(app.app_row));
    frame.render_stateful_widget(table, area, &mut state);
}

fn render_deployments(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let (app, t) = (ctx.app, ctx.theme);
    let wide = area.width >= 100;
    let rows = app.snap.deployments.iter().map(|d| {
        let mut cells = vec![
            // Narrow: the time and the suffix (HHMMSS-xxxx) tell deployments apart.
            Cell::from(if wide {
                d.id.clone()
            } else {
                let tail = d.id.len().saturating_sub(11);
                d.id.get(tail..).unwrap_or(&d.id).to_owned()
            }),
            Cell::from(d.kind.to_string()),
            Cell::from(fit(&d.subject(), 18)),
            Cell::from(d.version.clone()),
            Cell::from(Span::styled(
                d.state.as_str(),
                t.deployment(d.state, d.kind),
            )),
            Cell::from(progress(d)),
        ];
        if wide {
            cells.push(Cell::from(
                d.phase
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
            ));
            cells.push(Cell::from(format!(
                "{} ago",
                elapsed(app.now - d.created_at)
            )));
        }
        Row::new(cells)
    });
    let mut header = vec!["ID", "KIND", "APP/ENV", "VERSION", "STATE", "DONE"];
    let mut widths = vec![
        Constraint::Length(if wide { 25 } else { 11 }),
        Constraint::Length(8),
        Constraint::Min(10),
        Constraint::Length(13),
        Constraint::Length(15),
        Constraint::Length(7),
    ];
    if wide {
        header.extend(["PHASE", "STARTED"]);
        widths.extend([Constraint::Length(22), Constraint::Length(10)]);
    }
    let focused = app.focus == Focus::Deployments;
    let title = if app.snap.deployments.is_empty() {
        " Deployments: none yet "
    } else {
        " Deployments "
    };
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(t.get("muted")))
        .block(panel(title, focused, t))
        .row_highlight_style(row_highlight(focused, t))
        .highlight_symbol("› ");
    let mut state = TableState::default().with_selected(focused.then_some(app.deployment_row));
    frame.render_stateful_widget(table, area, &mut state);
}
