//! `?`: every key of the screen beneath — what works everywhere, the screen's own keys, the
//! focused panel's (arrows mean one thing per panel, and it says which), a canary's, a canary
//! whose router failed, and the dialogs' — in a page that scrolls. The rows are the key
//! table's (`app::keys`): the help cannot name a key the keymap does not have.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Reply, page, scrolled, total_rows};
use crate::console::action::Action;
use crate::console::app::ViewCtx;
use crate::console::app::{App, Focus, Screen, keys};
use crate::console::scroll::Scroll;

const WIDTH: u16 = 92;
const KEY: usize = 22;

/// The help page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Help {
    /// Where it is scrolled to.
    pub scroll: Scroll,
}

/// One section of the page: its title and its rows (keys, what they do).
pub type Section = (String, Vec<(String, &'static str)>);

/// The keys of the screen `app` shows, in sections, as the key table says them.
pub fn sections(app: &App) -> Vec<Section> {
    let mut order = vec![(keys::Section::Everywhere, false)];
    match app.ui.screen {
        Screen::Home => order.extend([
            (keys::Section::Home, false),
            (keys::Section::Selected, false),
        ]),
        Screen::Deployment(_) => {
            order.push((keys::Section::Deployment, false));
            // Every panel's keys, the focused one first: arrows mean one thing per panel.
            let d = app.deployment();
            let mut panels: Vec<Focus> = vec![app.ui.focus];
            for f in [Focus::Canary, Focus::Targets, Focus::Hooks, Focus::Logs] {
                let shown = match f {
                    Focus::Canary => d.is_some_and(|d| d.canary.is_some()),
                    Focus::Hooks => d.is_some_and(|d| !d.hooks.is_empty()),
                    _ => true,
                };
                if shown && !panels.contains(&f) {
                    panels.push(f);
                }
            }
            order.extend(
                panels
                    .into_iter()
                    .map(|f| (keys::Section::Panel(f), f == app.ui.focus)),
            );
            if d.is_some_and(|d| d.canary.is_some()) {
                order.push((keys::Section::Canary, false));
            }
            if d.is_some_and(crate::deploy::view::DeploymentView::router_failed) {
                order.push((keys::Section::RouterFailed, false));
            }
        }
    }
    order.extend(
        [
            keys::Section::Confirm,
            keys::Section::Prompt,
            keys::Section::List,
            keys::Section::Plan,
            keys::Section::Page,
        ]
        .map(|s| (s, false)),
    );
    order
        .into_iter()
        .map(|(s, focused)| (s.title(focused), keys::section(s)))
        .filter(|(_, rows)| !rows.is_empty())
        .collect()
}

/// The page's lines at `inner` columns: each key's description wrapped under itself; keys
/// wider than their column take a line of their own.
fn body(app: &App, ctx: Option<&ViewCtx<'_>>, inner: usize) -> Vec<Line<'static>> {
    let style = |slot: &str| ctx.map(|c| c.theme.get(slot)).unwrap_or_default();
    let mut lines = Vec::new();
    for (title, keys) in sections(app) {
        lines.push(Line::from(Span::styled(title, style("title"))));
        for (k, what) in keys {
            let mut rows = super::wrap(what, inner.saturating_sub(KEY)).into_iter();
            if k.chars().count() >= KEY {
                lines.push(Line::from(Span::styled(k, style("key"))));
                lines.extend(rows.map(|r| Line::from(format!("{:KEY$}{r}", ""))));
                continue;
            }
            lines.push(Line::from(vec![
                Span::styled(format!("{k:<KEY$}"), style("key")),
                Span::raw(rows.next().unwrap_or_default()),
            ]));
            lines.extend(rows.map(|r| Line::from(format!("{:KEY$}{r}", ""))));
        }
    }
    if app.ui.readonly {
        lines.push(Line::from(Span::styled(
            "read-only: the keys that change anything say so and do nothing",
            style("readonly"),
        )));
    }
    lines
}

impl Help {
    /// Applies a key.
    pub fn update(&mut self, action: &Action, app: &App) -> Reply {
        if *action == Action::Dismiss {
            return Reply::Close;
        }
        let (_, inner, room) = page(app.ui.size, WIDTH);
        let total = total_rows(body(app, None, inner), inner);
        self.scroll.apply(action, total, room);
        Reply::Keep
    }

    /// Draws it.
    pub fn render(&self, f: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
        let title = match ctx.app.ui.screen {
            Screen::Home => " Keys · home ",
            Screen::Deployment(_) => " Keys · this deployment ",
        };
        let hint = "↑↓ PgUp PgDn scroll · Esc closes";
        let (_, inner, _) = page((area.width, area.height), WIDTH);
        scrolled(
            f,
            area,
            title,
            body(ctx.app, Some(ctx), inner),
            (self.scroll, WIDTH, hint),
            ctx,
        );
    }
}
