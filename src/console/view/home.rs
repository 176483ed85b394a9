//! Home: what waits on you, every application's environments, the live and recent deployments
//! and the journal. Columns give way by priority (ids keep their unique end, the verbs that
//! move a waiting deployment stay before anyone's padding); a filtered list says so in its
//! title; `z` gives the focused list the whole screen.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};

use super::ViewCtx;
use crate::console::app::Focus;
use crate::console::layout::{Col, columns, constraints, id_cell, id_width};
use crate::console::widgets::{clock, elapsed, fit, panel, progress, row_highlight, state_word};

pub fn render(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let inbox = ctx.app.inbox();
    if ctx.app.zoom {
        match ctx.app.focus {
            Focus::Inbox if !inbox.is_empty() => render_inbox(frame, area, &inbox, ctx),
            Focus::Apps => render_apps(frame, area, ctx),
            _ => render_deployments(frame, area, ctx),
        }
        return;
    }
    // What waits on a human comes first, when anything does.
    let area = if inbox.is_empty() {
        area
    } else {
        let height = u16::try_from(inbox.len().min(4) + 2).unwrap_or(6);
        let [top, rest] =
            Layout::vertical([Constraint::Length(height), Constraint::Min(8)]).areas(area);
        render_inbox(frame, top, &inbox, ctx);
        rest
    };
    let apps_height = u16::try_from(ctx.app.visible_apps().len())
        .unwrap_or(u16::MAX)
        .saturating_add(3);
    let [top, bottom] =
        Layout::vertical([Constraint::Max(apps_height.max(5)), Constraint::Min(5)]).areas(area);
    render_apps(frame, top, ctx);
    // The journal takes what the deployments leave, up to eight entries, when there is room.
    let journal_rows = ctx.app.snap.journal.len().clamp(1, 8);
    let wanted_deployments = ctx.app.visible_deployments().len().max(1) + 3;
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

/// A list's title with its filter, when one is in force.
fn titled(name: &str, filter: &str, shown: usize, of: usize) -> String {
    if filter.is_empty() {
        format!(" {name} ")
    } else {
        format!(" {name} · /{filter} · {shown} of {of} (Esc clears) ")
    }
}

/// "Waiting on you": decisions, canaries at a gate, paused and dead-lettered deployments,
/// submissions never started, locks about to expire; Enter jumps to one.
fn render_inbox(
    frame: &mut Frame<'_>,
    area: Rect,
    items: &[crate::deploy::inbox::Item],
    ctx: &ViewCtx<'_>,
) {
    let (app, t) = (ctx.app, ctx.theme);
    let inner = area.width.saturating_sub(2);
    let subject = items
        .iter()
        .map(|i| i.subject.chars().count())
        .max()
        .unwrap_or(8);
    let verbs = items
        .iter()
        .map(|i| i.verbs.chars().count())
        .max()
        .unwrap_or(10);
    let w = columns(
        inner,
        1,
        2,
        &[
            Col::fixed(6),
            Col::shrinks(to16(subject), 10, 9),
            // The verbs carry the whole id: the column gives way to them.
            Col::shrinks(
                id_width(inner, items.iter().filter_map(|i| i.deployment.as_deref())),
                11,
                7,
            ),
            Col::shrinks(40, 20, 6).fills(),
            Col::shrinks(to16(verbs), to16(verbs), 5).drops(),
        ],
    );
    let rows = items.iter().map(|i| {
        let id = i.deployment.as_deref().unwrap_or("-");
        let mut cells = vec![
            Cell::from(Span::styled(i.waiting.as_str(), t.get("notice.warn"))),
            Cell::from(fit(&i.subject, usize::from(w[1]))),
            Cell::from(id_cell(id, w[2])),
            Cell::from(i.what.clone()),
        ];
        if w[4] > 0 {
            cells.push(Cell::from(Span::styled(i.verbs.clone(), t.get("muted"))));
        }
        Row::new(cells)
    });
    let focused = app.focus == Focus::Inbox;
    let title = format!(" Waiting on you: {} · Shift-Tab, Enter opens ", items.len());
    let widths: Vec<u16> = w.iter().copied().filter(|x| *x > 0).collect();
    let table = Table::new(rows, constraints(&widths))
        .block(panel(&title, focused, t))
        .row_highlight_style(row_highlight(focused, t))
        .highlight_symbol("› ");
    let selected = app.inbox_row.min(items.len().saturating_sub(1));
    let mut state = TableState::default().with_selected(focused.then_some(selected));
    frame.render_stateful_widget(table, area, &mut state);
}

fn to16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
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
    let apps = app.visible_apps();
    let name = apps
        .iter()
        .map(|a| a.application.chars().count() + a.environment.chars().count() + 10)
        .max()
        .unwrap_or(20);
    let w = columns(
        area.width.saturating_sub(2),
        1,
        2,
        &[
            Col::shrinks(to16(name), 20, 1),
            Col::shrinks(10, 8, 2),
            Col::shrinks(24, 10, 3),
            Col::fixed(7),
            Col::shrinks(12, 8, 4),
            Col::shrinks(14, 8, 5).drops(),
        ],
    );
    let rows = apps.iter().map(|a| {
        let env = Span::styled(
            format!(" {} ", a.environment),
            if a.production {
                t.get("production")
            } else {
                t.get("environment")
            },
        );
        let live = if !a.live_read {
            "reading…".to_owned()
        } else if a.live.is_empty() {
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
        if w[5] > 0 {
            cells.push(Cell::from(a.plugin.clone()));
        }
        Row::new(cells)
    });
    let mut header = vec!["APPLICATION", "VERSION", "LIVE", "TARGETS", "STRATEGY"];
    if w[5] > 0 {
        header.push("PLUGIN");
    }
    let focused = app.focus == Focus::Apps;
    // Before the engine's first snapshot nothing is known yet: not "none".
    let title = if app.snap.seq == 0 {
        " Applications: reading… ".to_owned()
    } else if apps.is_empty() && !app.filters.apps.is_empty() {
        format!(
            " Applications · /{}: none match (Esc clears) ",
            app.filters.apps
        )
    } else {
        titled(
            "Applications",
            &app.filters.apps,
            apps.len(),
            app.snap.apps.len(),
        )
    };
    let widths: Vec<u16> = w.iter().copied().filter(|x| *x > 0).collect();
    let table = Table::new(rows, constraints(&widths))
        .header(Row::new(header).style(t.get("muted")))
        .block(panel(title, focused, t))
        .row_highlight_style(row_highlight(focused, t))
        .highlight_symbol("› ");
    let mut state = TableState::default().with_selected(Some(app.app_row));
    frame.render_stateful_widget(table, area, &mut state);
}

fn render_deployments(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let (app, t) = (ctx.app, ctx.theme);
    let list = app.visible_deployments();
    let subject = list
        .iter()
        .map(|d| d.subject().chars().count())
        .max()
        .unwrap_or(10);
    let done = list
        .iter()
        .map(|d| progress(d).chars().count())
        .max()
        .map_or(7, |n| u16::try_from(n).unwrap_or(u16::MAX).max(7));
    let w = columns(
        area.width.saturating_sub(2),
        1,
        2,
        &[
            Col::shrinks(
                id_width(area.width, list.iter().map(|d| d.id.as_str())),
                11,
                1,
            ),
            Col::fixed(8),
            Col::shrinks(to16(subject), 10, 5),
            Col::shrinks(13, 8, 6),
            Col::fixed(15),
            // `12/36`, or `100000/100000` for a large fleet (before the phase gives way).
            Col::shrinks(done, 7, 7),
            Col::shrinks(30, 16, 8).drops().fills(),
            Col::shrinks(10, 10, 9).drops(),
        ],
    );
    let rows = list.iter().map(|d| {
        let mut cells = vec![
            Cell::from(id_cell(&d.id, w[0])),
            Cell::from(d.kind.to_string()),
            Cell::from(fit(&d.subject(), usize::from(w[2]))),
            Cell::from(d.version.clone()),
            Cell::from(Span::styled(state_word(d), t.deployment(d.state, d.kind))),
            Cell::from(fit(&progress(d), usize::from(w[5]))),
        ];
        if w[6] > 0 {
            let phase = match &d.never_started {
                Some(s) => format!("never started (by {})", s.by),
                None => d
                    .phase
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
            };
            cells.push(Cell::from(phase));
        }
        if w[7] > 0 {
            cells.push(Cell::from(format!(
                "{} ago",
                elapsed(app.now - d.created_at)
            )));
        }
        Row::new(cells)
    });
    let mut header = vec!["ID", "KIND", "APP/ENV", "VERSION", "STATE", "DONE"];
    if w[6] > 0 {
        header.push("PHASE");
    }
    if w[7] > 0 {
        header.push("STARTED");
    }
    let focused = app.focus == Focus::Deployments;
    let title = if app.snap.seq == 0 {
        " Deployments: reading… ".to_owned()
    } else if app.snap.deployments.is_empty() {
        " Deployments: none yet ".to_owned()
    } else if list.is_empty() {
        format!(
            " Deployments · /{}: none match (Esc clears) ",
            app.filters.deployments
        )
    } else {
        titled(
            "Deployments",
            &app.filters.deployments,
            list.len(),
            app.snap.deployments.len(),
        )
    };
    let widths: Vec<u16> = w.iter().copied().filter(|x| *x > 0).collect();
    let table = Table::new(rows, constraints(&widths))
        .header(Row::new(header).style(t.get("muted")))
        .block(panel(title, focused, t))
        .row_highlight_style(row_highlight(focused, t))
        .highlight_symbol("› ");
    let mut state = TableState::default().with_selected(focused.then_some(app.deployment_row));
    frame.render_stateful_widget(table, area, &mut state);
}
