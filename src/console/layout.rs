//! Where each panel goes for a terminal size: one computation that the views draw into and the
//! app reads (how many log lines show, which panels exist to move between), so scrolling and
//! focus always match what is on screen; and how a table's columns give way, by priority, when
//! the width runs short.

use ratatui::layout::{Constraint, Layout, Rect};

/// A side column for hooks and canary from this width on.
pub const WIDE: u16 = 110;

/// Below this size (columns, rows) the console says it is too small instead of drawing panels
/// nobody can read.
pub const MIN: (u16, u16) = (60, 16);

/// The most rows a message takes at the bottom (the rest is one key away: `M`).
pub const STATUS_ROWS: usize = 5;

/// The screen's rows: header, body, status lines (as many as the message wraps to), key hints.
pub fn screen(area: Rect, status_rows: u16) -> [Rect; 4] {
    Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(4),
        Constraint::Length(status_rows),
        Constraint::Length(1),
    ])
    .areas(area)
}

/// The deployment screen's panels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deployment {
    /// The failure headline (empty unless the deployment failed, or its router did).
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

/// The side column's width: wider screens give hook names and the canary's steps room.
pub fn side_width(width: u16) -> u16 {
    match width {
        0..160 => 38,
        160..200 => 52,
        _ => 64,
    }
}

/// The most rows a failure headline takes (the rest: Enter on the target, or `M`).
pub const HEADLINE_ROWS: usize = 4;

/// The deployment screen in `body`, with `targets` targets, a failure headline of
/// `failure` rows, and a canary or not.
pub fn deployment(body: Rect, targets: usize, failure: u16, canary: bool) -> Deployment {
    let wide = body.width >= WIDE;
    let (main, side) = if wide {
        let [m, s] = Layout::horizontal([
            Constraint::Min(60),
            Constraint::Length(side_width(body.width)),
        ])
        .areas(body);
        (m, Some(s))
    } else {
        (body, None)
    };
    let rows = u16::try_from(targets).unwrap_or(u16::MAX).saturating_add(3);
    let [failure, targets, strip, logs] = Layout::vertical([
        Constraint::Length(failure),
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

/// A table column: the width it wants, the least it can take, and how early it gives way
/// (higher first); one that `drops` disappears once it is at its least and still too wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Col {
    /// Width wanted.
    pub want: u16,
    /// Width below which it is dropped or kept.
    pub min: u16,
    /// Gives way before columns with a lower number.
    pub gives: u8,
    /// May disappear.
    pub drops: bool,
    /// Takes what is left over.
    pub fills: bool,
}

impl Col {
    /// A column that keeps `width`.
    pub fn fixed(width: u16) -> Col {
        Col {
            want: width,
            min: width,
            gives: 0,
            drops: false,
            fills: false,
        }
    }

    /// A column that shrinks from `want` to `min`, giving way at `gives`.
    pub fn shrinks(want: u16, min: u16, gives: u8) -> Col {
        Col {
            want,
            min: min.min(want),
            gives,
            drops: false,
            fills: false,
        }
    }

    /// It may disappear.
    pub fn drops(mut self) -> Col {
        self.drops = true;
        self
    }

    /// It takes what is left over.
    pub fn fills(mut self) -> Col {
        self.fills = true;
        self
    }
}

/// The columns' widths in `width` (with `gap` between columns and `lead` before the first —
/// the selection marker): the wanted widths; then, highest `gives` first, each column shrinks
/// to its least and — if that is still too wide and it may — disappears; what is left over goes
/// to the filling one. A dropped column's width is 0.
pub fn columns(width: u16, gap: u16, lead: u16, cols: &[Col]) -> Vec<u16> {
    let mut w: Vec<u16> = cols.iter().map(|c| c.want).collect();
    let used = |w: &[u16]| -> u16 {
        let shown = w.iter().filter(|x| **x > 0).count();
        let gaps = u16::try_from(shown.saturating_sub(1)).unwrap_or(u16::MAX);
        w.iter()
            .fold(lead, |a, x| a.saturating_add(*x))
            .saturating_add(gaps.saturating_mul(gap))
    };
    let mut order: Vec<usize> = (0..cols.len()).collect();
    order.sort_by_key(|i| std::cmp::Reverse(cols[*i].gives));
    for &i in &order {
        let over = used(&w).saturating_sub(width);
        if over == 0 {
            break;
        }
        w[i] = w[i].saturating_sub(over).max(cols[i].min);
        if cols[i].drops && used(&w) > width {
            w[i] = 0;
        }
    }
    let spare = width.saturating_sub(used(&w));
    if let Some(i) = cols.iter().position(|c| c.fills)
        && w[i] > 0
    {
        w[i] = w[i].saturating_add(spare);
    }
    w
}

/// The widths as constraints.
pub fn constraints(widths: &[u16]) -> Vec<Constraint> {
    widths.iter().map(|w| Constraint::Length(*w)).collect()
}

/// The end of `id` that fits `width` (the unique suffix stays: `100000-aaaa`), the whole of it
/// when it fits.
pub fn id_cell(id: &str, width: u16) -> String {
    let n = id.chars().count();
    let w = usize::from(width);
    if n <= w {
        id.to_owned()
    } else {
        let tail: String = id.chars().skip(n - w).collect();
        tail.trim_start_matches('-').to_owned()
    }
}

/// An id column's width: the whole of the longest id where the table is wide, else the last
/// 11 characters (`100000-aaaa`, or 11 of a newer id's random part; the CLI takes either).
pub fn id_width<'a>(table: u16, ids: impl Iterator<Item = &'a str>) -> u16 {
    if table < 110 {
        return 11;
    }
    let longest = ids.map(|id| id.chars().count()).max().unwrap_or(24);
    u16::try_from(longest).unwrap_or(u16::MAX).max(11)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_give_way_by_priority_and_ids_keep_their_suffix() {
        // id (keeps 24, down to 11 last), subject (gives first), what (fills), verbs (drops
        // before the id is cut).
        let cols = [
            Col::shrinks(24, 11, 1),
            Col::shrinks(30, 10, 9),
            Col::shrinks(20, 20, 0).fills(),
            Col::shrinks(36, 36, 5).drops(),
        ];
        assert_eq!(columns(200, 1, 2, &cols), [24, 30, 105, 36]);
        assert_eq!(
            columns(100, 1, 2, &cols),
            [24, 15, 20, 36],
            "the subject gives first"
        );
        assert_eq!(
            columns(80, 1, 2, &cols),
            [24, 10, 42, 0],
            "the hint goes before the id"
        );
        assert_eq!(
            columns(50, 1, 2, &cols),
            [16, 10, 20, 0],
            "then the id keeps its end"
        );
        assert_eq!(id_cell("dep-20261202-060248-384f", 11), "060248-384f");
        assert_eq!(id_cell("dep-1", 11), "dep-1");
        let ids = [
            "dep-20261202-060248-384f",
            "dep-20261205-010657123-0k3q9xm2p4v8a",
        ];
        assert_eq!(
            id_width(120, ids.into_iter()),
            36,
            "a wide table shows the longest whole"
        );
        assert_eq!(id_width(120, ids[..1].iter().copied()), 24);
        assert_eq!(id_width(80, ids.into_iter()), 11);
        assert_eq!(id_cell(ids[1], 11), "0k3q9xm2p4v8a"[2..]);
    }
}
