//! `?`: every key of the screen beneath — what works everywhere, the screen's own keys, the
//! focused panel's (arrows mean one thing per panel, and it says which), a canary's and a
//! canary whose router failed — in a page that scrolls.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Reply, page, scrolled, total_rows};
use crate::console::action::Action;
use crate::console::app::ViewCtx;
use crate::console::app::{App, Focus, Screen};
use crate::console::scroll::Scroll;

const WIDTH: u16 = 92;
const KEY: usize = 22;

/// The help page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Help {
    /// Where it is scrolled to.
    pub scroll: Scroll,
}

type Section = (&'static str, Vec<(&'static str, &'static str)>);

/// The keys of the screen `app` shows, in sections.
pub fn sections(app: &App) -> Vec<Section> {
    let mut out: Vec<Section> = vec![(
        "Everywhere",
        vec![
            ("?", "this help (↑↓ PgUp PgDn g G scroll it)"),
            (
                "q  Ctrl-C",
                "quit (asks while this console runs deployments)",
            ),
            (
                "Esc",
                "drops a pending weight, then a message, the zoom, the filter; then back",
            ),
            (
                "M",
                "messages: everything this console said, and warnings, in full",
            ),
            ("E", "the engine's own log"),
            (
                "/",
                "filter the focused list or the log pane (Esc clears it)",
            ),
            (
                "z",
                "zoom the focused pane to the whole screen (again: back)",
            ),
            (
                ":",
                "command line: a verb on the selected deployment (Tab completes)",
            ),
            ("Ctrl-L", "clear the terminal and draw everything again"),
            (
                "Ctrl-U",
                "clear what is typed in a prompt or a confirmation",
            ),
        ],
    )];
    match app.screen {
        Screen::Home => out.extend(home()),
        Screen::Deployment(_) => out.extend(deployment(app)),
    }
    out.push((
        "In a confirmation",
        vec![
            ("←→  Tab", "choose the button (the default changes nothing)"),
            (
                "Enter",
                "press it (ignored for the first 400 ms: a held key)",
            ),
            (
                "type",
                "a reason for the journal; in production the environment's name first",
            ),
            ("Esc", "changes nothing"),
        ],
    ));
    out
}

fn home() -> Vec<Section> {
    vec![
        (
            "Home",
            vec![
                ("Tab  Shift-Tab  ←→ hl", "the next / previous panel"),
                ("↑↓ jk  PgUp PgDn  g G", "move in the focused list"),
                (
                    "Enter",
                    "an application: its plan; a deployment: open it; waiting: go there",
                ),
                (
                    "D",
                    "deploy the application selected in Applications (pick the version)",
                ),
                ("d", "dry-run: what a deploy would do"),
                (
                    "R",
                    "roll back the selected application: says where each target goes",
                ),
                (
                    "t",
                    "run its test hooks (a live canary: against stable or the candidate)",
                ),
            ],
        ),
        (
            "On a selected deployment (Deployments, Waiting on you)",
            vec![
                ("c", "cancel it at its next step"),
                (
                    "Space",
                    "pause / resume (resuming a held canary asks first)",
                ),
                (
                    "r  s  A",
                    "retry the failed targets; skip; abort and roll back",
                ),
                (
                    "p  P  x  b",
                    "canary: promote; promote now; revert; back a step",
                ),
                ("X", "canary whose router failed: abandon it, with a reason"),
            ],
        ),
    ]
}

fn deployment(app: &App) -> Vec<Section> {
    let mut out = vec![(
        "This deployment",
        vec![
            ("Tab  Shift-Tab", "the next / previous panel"),
            (
                "←→ hl",
                "the next / previous panel (in the canary panel: its weight)",
            ),
            ("c", "cancel it at its next step"),
            ("Space", "pause before the next batch / resume"),
            (
                "r",
                "retry the failed targets (the selected one if it failed)",
            ),
            ("s", "skip the selected target: it keeps its release"),
            ("A", "abort: stop and roll back what the deploy changed"),
            ("D  R  d  t", "deploy again; roll back; dry-run; test hooks"),
        ],
    )];
    // Every panel's keys, the focused one first: arrows mean one thing per panel.
    let d = app.deployment();
    let mut panels: Vec<Focus> = vec![app.focus];
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
    for f in panels {
        if let Some(section) = panel(f, f == app.focus) {
            out.push(section);
        }
    }
    if d.is_some_and(|d| d.canary.is_some()) {
        out.push((
            "Canary",
            vec![
                (
                    "Tab to Canary, ←→ Enter",
                    "set a weight by hand (asks; then the steps hold)",
                ),
                (
                    "Space",
                    "hold the steps / resume them (asks: names the split after)",
                ),
                (
                    "p",
                    "promote past the step it waits at (never lowers its traffic)",
                ),
                (
                    "P",
                    "promote now: the remaining steps skipped (production: type its name)",
                ),
                ("x", "revert: the candidate leaves traffic"),
                ("b", "back to the previous step's weight, and hold"),
                ("t", "run the test hooks against stable or the candidate"),
            ],
        ));
    }
    if d.is_some_and(crate::deploy::view::DeploymentView::router_failed) {
        out.push((
            "Canary whose router failed (it waits for you)",
            vec![
                ("r", "retry the router's failed call"),
                ("x", "revert: the candidate out of every pool"),
                ("←→ Enter", "set a weight through the router instead"),
                (
                    "X",
                    "abandon it where its traffic is (a reason is required)",
                ),
            ],
        ));
    }
    out
}

/// The page's lines at `inner` columns: each key's description wrapped under itself.
/// One panel's keys (`focused`: said so in its title).
fn panel(f: Focus, focused: bool) -> Option<Section> {
    let (title, focused_title, keys) = match f {
        Focus::Targets => (
            "Targets",
            "Targets (focused)",
            vec![
                (
                    "↑↓ jk  PgUp PgDn  g G",
                    "select a target (G: follow the one at work)",
                ),
                ("←→ hl", "the next / previous panel"),
                (
                    "Enter",
                    "the target in full: message, attempts, its log lines",
                ),
                ("f", "the log pane shows only its lines (again: all)"),
            ],
        ),
        Focus::Hooks => (
            "Hooks",
            "Hooks (focused)",
            vec![
                ("↑↓ jk", "select a hook"),
                ("←→ hl", "the next / previous panel"),
                (
                    "Enter",
                    "its run in full: message, output, delete actions, log lines",
                ),
            ],
        ),
        Focus::Logs => (
            "Logs",
            "Logs (focused)",
            vec![
                ("↑↓ jk  PgUp PgDn", "scroll (scrolling up stops following)"),
                ("g  G End", "the oldest line; follow the newest again"),
                ("←→ hl", "the next / previous panel"),
                ("Enter  f", "only the selected target's lines (again: all)"),
                ("L", "level: all → info → warn → error"),
                ("/", "words, plugin:NAME target:NAME level:warn"),
            ],
        ),
        Focus::Canary => (
            "Canary",
            "Canary (focused)",
            vec![
                (
                    "←  →  h l",
                    "a pending weight, one slider step less / more candidate",
                ),
                ("Enter", "apply it: asks, naming the split before → after"),
                ("Esc", "drop the pending weight (nothing was sent)"),
            ],
        ),
        Focus::Apps | Focus::Deployments | Focus::Inbox => return None,
    };
    Some((if focused { focused_title } else { title }, keys))
}

fn body(app: &App, ctx: Option<&ViewCtx<'_>>, inner: usize) -> Vec<Line<'static>> {
    let style = |slot: &str| ctx.map(|c| c.theme.get(slot)).unwrap_or_default();
    let mut lines = Vec::new();
    for (title, keys) in sections(app) {
        lines.push(Line::from(Span::styled(title, style("title"))));
        for (k, what) in keys {
            let mut rows = super::wrap(what, inner.saturating_sub(KEY)).into_iter();
            lines.push(Line::from(vec![
                Span::styled(format!("{k:<KEY$}"), style("key")),
                Span::raw(rows.next().unwrap_or_default()),
            ]));
            lines.extend(rows.map(|r| Line::from(format!("{:KEY$}{r}", ""))));
        }
    }
    if app.readonly {
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
        let (_, inner, room) = page(app.size, WIDTH);
        let total = total_rows(body(app, None, inner), inner);
        self.scroll.apply(action, total, room);
        Reply::Keep
    }

    /// Draws it.
    pub fn render(&self, f: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
        let title = match ctx.app.screen {
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
