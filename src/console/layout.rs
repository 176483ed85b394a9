//! Where each panel goes for a terminal size: one computation that the views draw into and the
//! app reads (how many log lines show, which panels exist to move between), so scrolling and
//! focus always match what is on screen.

use ratatui::layout::{Constraint, Layout, Rect};

/// A side column for hooks and canary from this width on.
pub const WIDE: u16 = 110;

/// The screen's rows: header, body, status line (when there is a message), key hints.
pub fn screen(area: Rect, status_line: bool) -> [Rect; 4] {
    Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(4),
        Constraint::Length(u16::from(status_line)),
        Constraint::Length(1),
    ])
    .areas(area)
}

/// The deployment screen's panels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deployment {
    /// The failure headline, two lines (empty unless the deployment failed).
    pub failure: Rect,
    /// The targets table.
    pub targets: Rect,
    /// The hooks/canary strip of a narrow screen (one line; three for a canary).
    pub strip: Rect,
    /// The log pane.
    pub logs: Rect,
    /// Hooks, canary and details, on a wide screen.
    pub side: Option<Rect>,
}

/// The deployment screen in `body`, with `targets` targets, a failure headline or not, and a
/// canary or not.
pub fn deployment(body: Rect, targets: usize, failure: bool, canary: bool) -> Deployment {
    let wide = body.width >= WIDE;
    let (main, side) = if wide {
        let [m, s] = Layout::horizontal([Constraint::Min(60), Constraint::Length(38)]).areas(body);
        (m, Some(s))
    } else {
        (body, None)
    };
    let rows = u16::try_from(targets).unwrap_or(u16::MAX).saturating_add(3);
    let [failure, targets, strip, logs] = Layout::vertical([
        Constraint::Length(if failure { 2 } else { 0 }),
        Constraint::Max(rows.max(5).min(main.height / 2 + 2)),
        Constraint::Length(match (side.is_none(), canary) {
            (false, _) => 0,
            (true, false) => 1,
            (true, true) => 3,
        }),
        Constraint::Min(4),
    ])
    .areas(main);
    Deployment {
        failure,
        targets,
        strip,
        logs,
        side,
    }
}

/// Log lines visible in a bordered log pane of `area`.
pub fn log_rows(area: Rect) -> usize {
    usize::from(area.height.saturating_sub(2)).max(1)
}
