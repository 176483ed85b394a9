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
    let mut lines: Vec<Line<'_>> = Vec::new();
    for l in pane.visible(height) {
        let who = match &l.target {
            Some(target) => format!("{} {target}", l.source),
            None => l.source.clone(),
        };
        let head = format!("{} {:<5} {} ", clock(l.at), l.level.as_str(), who);
        let room = width.saturating_sub(head.chars().count());
        if !pane.wrap {
            lines.push(Line::from(vec![
                Span::styled(head, t.get("muted")),
                Span::styled(fit(&l.message, room), t.level(l.level)),
            ]));
            continue;
        }
        // Wrapped: the message in full, its further rows under its first.
        let rows = crate::console::app::dialog::wrap(&l.message, room.max(20));
        let indent = " ".repeat(width.saturating_sub(room.max(20)).min(head.chars().count()));
        for (i, r) in rows.into_iter().enumerate() {
            let lead = if i == 0 { head.clone() } else { indent.clone() };
            lines.push(Line::from(vec![
                Span::styled(lead, t.get("muted")),
                Span::styled(r, t.level(l.level)),
            ]));
        }
    }
    // The newest rows are the ones that show (a wrapped line's start may scroll off the top).
    let extra = lines.len().saturating_sub(height);
    lines.drain(..extra);
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
