//! The log pane: the filtered lines, following the newest or scrolled back, cut to the pane or
//! wrapped in full (`w`), with the filter and the count of lines the console could not keep up
//! with in its title.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::ViewCtx;
use crate::console::app::Focus;
use crate::console::widgets::{clock, fit, panel};

pub fn render(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let (app, t) = (ctx.app, ctx.theme);
    let pane = &app.logs;
    let height = usize::from(area.height.saturating_sub(2));
    let width = usize::from(area.width.saturating_sub(2));
    let mut title = String::from(" Logs ");
    title.push_str(if pane.following() {
        "· following "
    } else {
        "· scrolled back (End follows) "
    });
    let filter = pane.filter.describe();
    if !filter.is_empty() {
        title.push_str(&format!("· {filter} "));
    }
    if pane.dropped > 0 {
        title.push_str(&format!("· dropped {} ", pane.dropped));
    }
    if pane.wrap {
        title.push_str("· wrapped (w) ");
    }
    // Each line as its rows: cut to the pane, or (wrapped) in full, its further rows indented.
    let mut groups: Vec<Vec<Line<'_>>> = Vec::new();
    for l in pane.visible(height) {
        let who = match &l.target {
            Some(target) => format!("{} {target}", l.source),
            None => l.source.clone(),
        };
        let head = format!("{} {:<5} {} ", clock(l.at), l.level.as_str(), who);
        if !pane.wrap {
            let room = width.saturating_sub(head.chars().count());
            groups.push(vec![Line::from(vec![
                Span::styled(head, t.get("muted")),
                Span::styled(fit(&l.message, room), t.level(l.level)),
            ])]);
            continue;
        }
        let rows = crate::console::app::dialog::wrap(
            &format!("{head}{}", l.message),
            width.saturating_sub(2).max(20),
        );
        let group = rows
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                if i == 0 {
                    // The head keeps its muted style; the message's start its level's.
                    let cut = (0..=r.len().min(head.len()))
                        .rev()
                        .find(|i| r.is_char_boundary(*i))
                        .unwrap_or(0);
                    let (h, m) = r.split_at(cut);
                    Line::from(vec![
                        Span::styled(h.to_owned(), t.get("muted")),
                        Span::styled(m.to_owned(), t.level(l.level)),
                    ])
                } else {
                    Line::from(Span::styled(format!("  {r}"), t.level(l.level)))
                }
            })
            .collect();
        groups.push(group);
    }
    // The newest lines whole, as many as fit; a newest line longer than the pane shows its
    // start (Enter shows the pane over the whole screen).
    let mut lines: Vec<Line<'_>> = Vec::new();
    let mut used = 0;
    for g in groups.into_iter().rev() {
        if used + g.len() > height {
            if used == 0 {
                lines = g.into_iter().take(height).collect();
            }
            break;
        }
        used += g.len();
        lines.splice(0..0, g);
    }
    let focused = app.ui.focus == Focus::Logs;
    let block = panel(fit(&title, width), focused, t);
    let body = if lines.is_empty() {
        let filtered = app.filter_of(crate::console::app::Focus::Logs);
        let empty = if filtered {
            format!(
                " no log lines match /{} (Esc clears the filter)",
                pane.filter.typed()
            )
        } else {
            " no log lines yet".to_owned()
        };
        Paragraph::new(Line::from(Span::styled(empty, t.get("muted"))))
    } else {
        Paragraph::new(lines)
    };
    frame.render_widget(body.block(block), area);
}
