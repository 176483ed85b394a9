//! Home: what waits on you, every application's environments, the live and recent deployments
//! and the journal. Columns give way by priority (ids keep their unique end, the verbs that
//! move a waiting deployment stay before anyone's padding); a filtered list says so in its
//! title; `z` gives the focused list the whole screen.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph};

use super::ViewCtx;
use super::list::{Column, ListPanel, Mark, filtered_title};
use crate::console::app::Focus;
use crate::console::layout::Col;
use crate::console::widgets::{clock, elapsed, panel, progress, state_word};
use crate::deploy::inbox::Item;
use crate::deploy::view::DeploymentView;
use crate::engine::handle::AppEnv;

pub fn render(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let inbox = ctx.app.inbox();
    if ctx.app.ui.zoom {
        match ctx.app.ui.focus {
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
    let rows: Vec<&Item> = items.iter().collect();
    let subject = widest(&rows, |i| i.subject.chars().count(), 8);
    let verbs = widest(&rows, |i| i.verbs.chars().count(), 10);
    // How to get there from where the keyboard is, exactly.
    let title = match app.way_to(Focus::Inbox) {
        Some(keys) => format!(" Waiting on you: {} · {keys}, Enter opens ", items.len()),
        None => format!(" Waiting on you: {} · Enter opens ", items.len()),
    };
    ListPanel::new(&rows, app.row(Focus::Inbox), title)
        .without_header()
        .columns(vec![
            Column::new("", Col::fixed(6), |i: &Item, _| {
                Cell::from(Span::styled(
                    i.waiting.as_str().to_owned(),
                    t.get("notice.warn"),
                ))
            }),
            Column::text("", Col::shrinks(subject, 10, 9), |i: &Item| {
                i.subject.clone()
            }),
            // The verbs carry the whole id: the column gives way to them.
            Column::id("", inner, &rows, 7, |i: &Item| i.deployment.as_deref()),
            Column::new("", Col::shrinks(40, 20, 6).fills(), |i: &Item, _| {
                Cell::from(i.what.clone())
            }),
            Column::new("", Col::shrinks(verbs, verbs, 5).drops(), |i: &Item, _| {
                Cell::from(Span::styled(i.verbs.clone(), t.get("muted")))
            }),
        ])
        .focus(app.ui.focus == Focus::Inbox, Mark::Focused)
        .render(frame, area, t);
}

/// The widest of `rows` as `width` measures them (`none` when there are none), for a column.
fn widest<T>(rows: &[&T], width: impl Fn(&T) -> usize, none: usize) -> u16 {
    let w = rows.iter().map(|r| width(r)).max().unwrap_or(none);
    u16::try_from(w).unwrap_or(u16::MAX)
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
    let name = widest(
        &apps,
        |a| a.application.chars().count() + a.environment.chars().count() + 10,
        20,
    );
    let filter = &app.ui.lists.get(Focus::Apps).filter;
    // Before the engine's first snapshot nothing is known yet: not "none".
    let title = if app.snap.seq == 0 {
        " Applications: reading… ".to_owned()
    } else {
        filtered_title("Applications", filter, apps.len(), app.snap.apps.len())
    };
    ListPanel::new(&apps, app.row(Focus::Apps), title)
        .columns(vec![
            Column::new("APPLICATION", Col::shrinks(name, 20, 1), |a: &AppEnv, _| {
                let env = Span::styled(
                    format!(" {} ", a.environment),
                    if a.production {
                        t.get("production")
                    } else {
                        t.get("environment")
                    },
                );
                let mut name = vec![Span::raw(format!("{} ", a.application)), env];
                if a.lock.is_some() {
                    name.push(Span::raw(" "));
                    name.push(Span::styled("LOCKED", t.get("production")));
                }
                Cell::from(Line::from(name))
            }),
            Column::new("VERSION", Col::shrinks(10, 8, 2), |a: &AppEnv, _| {
                Cell::from(a.version.clone())
            }),
            Column::new("LIVE", Col::shrinks(24, 10, 3), |a: &AppEnv, _| {
                Cell::from(if !a.live_read {
                    "reading…".to_owned()
                } else if a.live.is_empty() {
                    "-".to_owned()
                } else {
                    a.live.join(",")
                })
            }),
            Column::new("TARGETS", Col::fixed(7), |a: &AppEnv, _| {
                Cell::from(a.targets.to_string())
            }),
            Column::new("STRATEGY", Col::shrinks(12, 8, 4), |a: &AppEnv, _| {
                Cell::from(a.strategy.clone())
            }),
            Column::new("PLUGIN", Col::shrinks(14, 8, 5).drops(), |a: &AppEnv, _| {
                Cell::from(a.plugin.clone())
            }),
        ])
        .focus(app.ui.focus == Focus::Apps, Mark::Always)
        .render(frame, area, t);
}

fn render_deployments(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let (app, t) = (ctx.app, ctx.theme);
    let list = app.visible_deployments();
    let subject = widest(&list, |d| d.subject().chars().count(), 10);
    // `12/36`, or `100000/100000` for a large fleet (before the phase gives way).
    let done = widest(&list, |d| progress(d).chars().count(), 7).max(7);
    let filter = &app.ui.lists.get(Focus::Deployments).filter;
    let title = if app.snap.seq == 0 {
        " Deployments: reading… ".to_owned()
    } else if app.snap.deployments.is_empty() {
        " Deployments: none yet ".to_owned()
    } else {
        filtered_title(
            "Deployments",
            filter,
            list.len(),
            app.snap.deployments.len(),
        )
    };
    let now = app.ui.now;
    ListPanel::new(&list, app.row(Focus::Deployments), title)
        .columns(vec![
            Column::id("ID", area.width, &list, 1, |d: &DeploymentView| {
                Some(d.id.as_str())
            }),
            Column::new("KIND", Col::fixed(8), |d: &DeploymentView, _| {
                Cell::from(d.kind.to_string())
            }),
            Column::text(
                "APP/ENV",
                Col::shrinks(subject, 10, 5),
                DeploymentView::subject,
            ),
            Column::new(
                "VERSION",
                Col::shrinks(13, 8, 6),
                |d: &DeploymentView, _| Cell::from(d.version.clone()),
            ),
            Column::new("STATE", Col::fixed(15), |d: &DeploymentView, _| {
                Cell::from(Span::styled(state_word(d), t.deployment(d.state, d.kind)))
            }),
            Column::text("DONE", Col::shrinks(done, 7, 7), progress),
            Column::new(
                "PHASE",
                Col::shrinks(30, 16, 8).drops().fills(),
                |d: &DeploymentView, _| {
                    Cell::from(match &d.never_started {
                        Some(s) => format!("never started (by {})", s.by),
                        None => d
                            .phase
                            .as_ref()
                            .map(ToString::to_string)
                            .unwrap_or_default(),
                    })
                },
            ),
            Column::new(
                "STARTED",
                Col::shrinks(10, 10, 9).drops(),
                move |d: &DeploymentView, _| {
                    Cell::from(format!("{} ago", elapsed(now - d.created_at)))
                },
            ),
        ])
        .focus(app.ui.focus == Focus::Deployments, Mark::Focused)
        .render(frame, area, t);
}
