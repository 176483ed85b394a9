//! Dialogs on top of a screen, one file each (its state, its keys and its drawing together, as
//! gitui's popups): confirmations, help, messages, the engine's log, the plan, the version
//! picker, a target's and a hook's detail, the quit question, the filter prompt, the command
//! line and the test picker. They are part of the app's state (`App::modal`); the screens call
//! [`render`] to draw the open one. A dialog reads the app and answers a key with a [`Reply`]
//! the app acts on; it never changes the app itself.

pub mod asks;
pub mod command;
pub mod confirm;
pub mod engine_log;
pub mod filter;
pub mod help;
pub mod hook;
pub mod messages;
pub mod plan;
pub mod quit;
pub mod target;
pub mod tests;
pub mod traffic;
pub mod versions;

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use super::{App, ViewCtx};
use crate::console::action::Action;
use crate::console::action::Mode;
use crate::console::scroll::Scroll;
use crate::engine::handle::Command;
use crate::plugin::Level;

pub use confirm::{Choice, Confirm};

/// A dialog.
#[derive(Debug, Clone, PartialEq)]
pub enum Modal {
    /// The keys of the screen beneath.
    Help(help::Help),
    /// Every message, in full.
    Messages(messages::Messages),
    /// The engine's own log.
    EngineLog,
    /// An action awaiting a decision.
    Confirm(Confirm),
    /// Leave the console.
    Quit(quit::Quit),
    /// The plan of an application's environment.
    Plan(plan::Plan),
    /// A filter being typed.
    Filter(filter::Filter),
    /// Which version to deploy.
    Versions(versions::Versions),
    /// One target of a deployment in full.
    Target(target::Target),
    /// One hook run in full.
    Hook(hook::Hook),
    /// The command line.
    Command(command::CommandLine),
    /// Which release the test hooks run against.
    Tests(tests::PickRelease),
}

/// What a dialog did with a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Stays open.
    Keep,
    /// Closes.
    Close,
    /// Closes, saying this.
    CloseSaying(Level, String),
    /// Closes, and the command goes to the engine.
    Send(Command),
    /// Closes, then the screen beneath takes this action.
    Then(Action),
    /// Closes, and this dialog opens instead.
    Open(Box<Modal>),
    /// Stays open, saying this.
    Say(Level, String),
    /// Closes, and the list (or the log pane) shows what matches this.
    Filter(crate::console::app::Focus, String),
    /// Stays open, and the list (or the log pane) shows what matches this meanwhile.
    FilterLive(crate::console::app::Focus, String),
    /// Closes, and the app runs this verb of the command line (the line, for its history).
    Run(command::Verb, String),
}

impl Modal {
    /// What has the keyboard while it is on top.
    pub fn mode(&self) -> Mode {
        match self {
            Modal::Help(_) | Modal::Messages(_) | Modal::EngineLog => Mode::Help,
            Modal::Confirm(c) if c.typed.is_some() => Mode::TypedConfirm,
            Modal::Confirm(_) | Modal::Quit(_) => Mode::Confirm,
            Modal::Plan(_) => Mode::Plan,
            Modal::Filter(_) => Mode::Prompt,
            Modal::Command(_) => Mode::Command,
            Modal::Versions(v) if v.typing.is_some() => Mode::Prompt,
            Modal::Versions(_) | Modal::Target(_) | Modal::Hook(_) | Modal::Tests(_) => Mode::List,
        }
    }

    /// Applies a key.
    pub fn update(&mut self, action: &Action, app: &App) -> Reply {
        match self {
            Modal::Help(h) => h.update(action, app),
            Modal::Messages(m) => m.update(action, app),
            Modal::EngineLog => engine_log::update(action),
            Modal::Confirm(c) => c.update(action, app.ui.now),
            Modal::Quit(q) => q.update(action, app.ui.now),
            Modal::Plan(p) => p.update(action, app),
            Modal::Filter(f) => f.update(action),
            Modal::Versions(v) => v.update(action, app),
            Modal::Target(t) => t.update(action, app),
            Modal::Hook(h) => h.update(action, app),
            Modal::Command(c) => c.update(action, app),
            Modal::Tests(t) => t.update(action, app),
        }
    }
}

/// Draws the dialog on top, if any.
pub fn render(frame: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
    let Some(top) = ctx.app.ui.modals.last() else {
        return;
    };
    match top {
        Modal::Help(h) => h.render(frame, area, ctx),
        Modal::Messages(m) => m.render(frame, area, ctx),
        Modal::EngineLog => engine_log::render(frame, area, ctx),
        Modal::Confirm(c) => c.render(frame, area, ctx),
        Modal::Quit(q) => q.render(frame, area, ctx),
        Modal::Plan(p) => p.render(frame, area, ctx),
        Modal::Filter(f) => f.render(frame, area, ctx),
        Modal::Versions(v) => v.render(frame, area, ctx),
        Modal::Target(t) => t.render(frame, area, ctx),
        Modal::Hook(h) => h.render(frame, area, ctx),
        Modal::Command(c) => c.render(frame, area, ctx),
        Modal::Tests(t) => t.render(frame, area, ctx),
    }
}

/// `> Keep running <   Cancel deploy`: the focused button marked with text, not only colour.
pub fn buttons(choice: Choice, no: &str, yes: &str, ctx: &ViewCtx<'_>) -> Line<'static> {
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

/// A bordered box of `width` columns at most, as high as its wrapped lines, in the middle of
/// `area`.
pub fn frame(
    frame: &mut Frame<'_>,
    area: Rect,
    title: &str,
    lines: Vec<Line<'_>>,
    (width, border): (u16, &str),
    ctx: &ViewCtx<'_>,
) {
    let w = width.min(area.width.saturating_sub(2));
    let inner_w = usize::from(w.saturating_sub(2)).max(1);
    let rows: usize = lines.iter().map(|l| rows_of(l, inner_w)).sum();
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

/// `lines` cut to what a [`frame`] of `width` columns shows in `area`, its last `keep` lines
/// always whole (where to type and how to answer). The body gives way from its end: blank
/// lines first, then rows, the last row shown saying how many more there are. The first line
/// (the question) stays.
pub fn fit_keeping<'a>(
    mut lines: Vec<Line<'a>>,
    keep: usize,
    (area, width): (Rect, u16),
    muted: Style,
) -> Vec<Line<'a>> {
    let inner_w = usize::from(width.min(area.width.saturating_sub(2)).saturating_sub(2)).max(1);
    let room = usize::from(area.height.saturating_sub(4));
    let rows = |ls: &[Line<'_>]| ls.iter().map(|l| rows_of(l, inner_w)).sum::<usize>();
    if rows(&lines) <= room || lines.len() <= keep + 1 {
        return lines;
    }
    let tail = lines.split_off(lines.len() - keep);
    let question = lines.remove(0);
    lines.retain(|l| l.spans.iter().any(|s| !s.content.trim().is_empty()));
    let body_room = room.saturating_sub(rows(&tail) + rows(std::slice::from_ref(&question)));
    let mut body: Vec<Line<'a>> = Vec::new();
    if rows(&lines) > body_room {
        // Row by row, each in its line's style; a row of the body gives way to the line
        // that says what was cut.
        let all: Vec<Line<'a>> = lines.iter().flat_map(|l| rows_styled(l, inner_w)).collect();
        let shown = body_room.saturating_sub(1);
        let cut = all.len() - shown;
        body.extend(all.into_iter().take(shown));
        let more = if cut == 1 { "row" } else { "rows" };
        body.push(Line::from(Span::styled(
            format!("… {cut} more {more} (a larger window shows them)"),
            muted,
        )));
    } else {
        body = lines;
    }
    let mut out = vec![question];
    out.extend(body);
    out.extend(tail);
    out
}

/// `line` as the rows it wraps to at `width`, each styled as its line's first span.
fn rows_styled<'a>(line: &Line<'_>, width: usize) -> Vec<Line<'a>> {
    let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
    let style = line
        .spans
        .first()
        .map_or(line.style, |s| line.style.patch(s.style));
    wrap(&text, width)
        .into_iter()
        .map(|r| Line::from(Span::styled(r, style)))
        .collect()
}

/// Rows a line takes wrapped at `width` (as ratatui wraps at word boundaries, a line may take
/// a row more than its length says: counted from the words).
pub fn rows_of(line: &Line<'_>, width: usize) -> usize {
    let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
    wrap(&text, width).len().max(1)
}

/// The geometry of a scrolled page in a screen of `size`: the dialog's width (at most
/// `width`), its inner width, and the rows its body shows.
pub fn page(size: (u16, u16), width: u16) -> (u16, usize, usize) {
    let w = width.min(size.0.saturating_sub(2));
    let inner = usize::from(w.saturating_sub(2)).max(1);
    let room = usize::from(size.1.saturating_sub(5)).max(1);
    (w, inner, room)
}

/// The body's lines, each made of as many rows as it wraps to, as rows of one line each (so
/// the scroller counts rows and the hint always shows).
pub fn rows(body: Vec<Line<'static>>, inner: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    for line in body {
        let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
        if text.chars().count() <= inner {
            out.push(line);
            continue;
        }
        // A long line keeps the style of its first span, wrapped at words.
        let style = line.spans.first().map(|s| s.style).unwrap_or_default();
        for part in wrap(&text, inner) {
            out.push(Line::from(Span::styled(part, style)));
        }
    }
    out
}

/// A page that scrolls: its rows from the scroller's offset, and a last line with the hint and
/// the position when it does not all fit.
pub fn scrolled(
    f: &mut Frame<'_>,
    area: Rect,
    title: &str,
    body: Vec<Line<'static>>,
    (scroll, width, hint): (Scroll, u16, &str),
    ctx: &ViewCtx<'_>,
) {
    let (w, inner, room) = page((area.width, area.height), width);
    let body = rows(body, inner);
    let total = body.len();
    let from = scroll.at(total, room);
    let mut lines: Vec<Line<'static>> = body.into_iter().skip(from).take(room).collect();
    lines.push(Line::from(Span::styled(
        format!("{hint}{}", scroll.position(total, room)),
        ctx.theme.get("muted"),
    )));
    frame(f, area, title, lines, (w, "border_focus"), ctx);
}

/// Rows of a scrolled page for the scroller (the same count `scrolled` draws).
pub fn total_rows(body: Vec<Line<'static>>, inner: usize) -> usize {
    rows(body, inner).len()
}

/// The log lines this console holds that `keep` picks, each wrapped under its time and level
/// (a target's detail, a hook's), or a line saying there are none here.
pub fn held_lines(
    app: &App,
    ctx: Option<&ViewCtx<'_>>,
    inner: usize,
    keep: impl Fn(&crate::plugin::LogLine) -> bool,
) -> Vec<Line<'static>> {
    let muted = ctx.map(|c| c.theme.get("muted")).unwrap_or_default();
    let mut out = Vec::new();
    for l in app.logs.lines().filter(|l| keep(l)) {
        let level = ctx.map(|c| c.theme.level(l.level)).unwrap_or_default();
        let mut rows = wrap(&l.message, inner.saturating_sub(15)).into_iter();
        out.push(Line::from(vec![
            Span::styled(crate::console::widgets::clock(l.at), muted),
            Span::styled(format!(" {:<5} ", l.level.as_str()), level),
            Span::raw(rows.next().unwrap_or_default()),
        ]));
        out.extend(rows.map(|r| Line::from(format!("{:15}{r}", ""))));
    }
    if out.is_empty() {
        out.push(Line::from(Span::styled(
            "none held by this console (`manent logs` has them all)",
            muted,
        )));
    }
    out
}

/// `text` cut into lines of at most `width` characters, at spaces where it can.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
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
    if out.is_empty() {
        out.push(String::new());
    }
    out
}

#[cfg(test)]
mod test_wrap {
    use super::*;

    #[test]
    fn words_wrap_and_long_words_are_cut() {
        assert_eq!(
            wrap("the router failed: nginx -t said no", 12),
            ["the router", "failed:", "nginx -t", "said no"]
        );
        assert_eq!(wrap("abcdefghijklmnop", 10), ["abcdefghij", "klmnop"]);
        assert_eq!(wrap("", 10), [""]);
    }
}
