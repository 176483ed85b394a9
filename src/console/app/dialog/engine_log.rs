//! `E`: the engine's own tracing output, captured by tui-logger while the console is up
//! (nothing else may write to the terminal). An attached console's engine runs elsewhere: it
//! says where its log is.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Margin, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use super::Reply;
use crate::console::action::Action;
use crate::console::app::ViewCtx;
use crate::engine::handle::EngineMode;

/// Applies a key.
pub fn update(action: &Action) -> Reply {
    if *action == Action::Dismiss {
        Reply::Close
    } else {
        Reply::Keep
    }
}

/// Draws it.
pub fn render(f: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let t = ctx.theme;
    let rect = area.inner(Margin {
        horizontal: 2,
        vertical: 2,
    });
    f.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.get("border_focus"))
        .title(Span::styled(" Engine log · Esc closes ", t.get("title")))
        .style(t.get("base"));
    let inner = block.inner(rect);
    f.render_widget(block, rect);
    let about = match &ctx.app.snap.mode {
        Some(EngineMode::Attached { holder }) => format!(
            "this console is attached: the engine runs in {holder}, and its log is that \
             process's (its JSON log file when `log_file` is set). Its warnings and errors about \
             deployments are in M."
        ),
        _ => "the engine's own warnings and errors since the console opened (often none); a \
              deployment's lines — its plugins, its analysis runs — are in its log pane, and M \
              has every message in full"
            .to_owned(),
    };
    let [head, rest] = Layout::vertical([Constraint::Length(3), Constraint::Min(1)]).areas(inner);
    f.render_widget(
        Paragraph::new(Line::from(Span::styled(about, t.get("muted")))).wrap(Wrap { trim: true }),
        head,
    );
    let widget = tui_logger::TuiLoggerWidget::default()
        .style(t.get("base"))
        .style_error(t.get("log.error"))
        .style_warn(t.get("log.warn"))
        .style_info(t.get("log.info"))
        .style_debug(t.get("log.debug"))
        .style_trace(t.get("log.trace"))
        .output_target(false)
        .output_file(false)
        .output_line(false);
    f.render_widget(widget, rest);
}
