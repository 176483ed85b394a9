//! One list panel, drawn the same way wherever a list is: a bordered table whose columns give
//! way by priority (a column with no room left disappears with its header), ids that keep
//! their unique end, the selected row marked (`› `) and kept in view, and only the rows that
//! fit built (a fleet may have thousands of targets). A panel says what it lists and how each
//! column reads a row; the selection and the filter are the app's (`app::ListState`).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Span;
use ratatui::widgets::{Cell, Row, Table, TableState};

use crate::console::layout::{Col, columns, constraints, id_cell, id_width};
use crate::console::theme::Theme;
use crate::console::widgets::{fit, panel, row_highlight};

/// What a column shows of a row, in the width it was given.
type CellOf<'a, T> = Box<dyn Fn(&T, u16) -> Cell<'a> + 'a>;

/// One column: its header, how it gives way, and what a row shows in it.
pub struct Column<'a, T> {
    header: &'static str,
    col: Col,
    cell: CellOf<'a, T>,
}

impl<'a, T> Column<'a, T> {
    /// A column that shows `cell` of each row; it wants at least its header's width (a column
    /// of short names still says `TARGET`, not `TARGE`).
    pub fn new(header: &'static str, col: Col, cell: impl Fn(&T, u16) -> Cell<'a> + 'a) -> Self {
        let heading = u16::try_from(header.chars().count()).unwrap_or(u16::MAX);
        Column {
            header,
            col: Col {
                want: col.want.max(heading),
                ..col
            },
            cell: Box::new(cell),
        }
    }

    /// A column of text cut to its width (`…`).
    pub fn text(header: &'static str, col: Col, text: impl Fn(&T) -> String + 'a) -> Self {
        Column::new(header, col, move |row, w| {
            Cell::from(fit(&text(row), usize::from(w)))
        })
    }

    /// An id column: the longest id whole where the table (`table` columns) is wide, else each
    /// id's unique end; it shrinks to 11 characters, giving way at `gives`.
    pub fn id(
        header: &'static str,
        table: u16,
        rows: &[&T],
        gives: u8,
        id: impl Fn(&T) -> Option<&str> + 'a,
    ) -> Self {
        let want = id_width(table, rows.iter().filter_map(|r| id(r)));
        Column::new(header, Col::shrinks(want, 11, gives), move |row, w| {
            Cell::from(id_cell(id(row).unwrap_or("-"), w))
        })
    }
}

/// When the selected row is marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// Always (the screen's main list: it says which row the keys act on).
    Always,
    /// Only while the panel has the focus.
    Focused,
}

/// A list panel to draw: its rows (filtered), columns, title and selection.
pub struct ListPanel<'a, T> {
    rows: &'a [&'a T],
    columns: Vec<Column<'a, T>>,
    title: String,
    header: bool,
    selected: usize,
    focused: bool,
    mark: Mark,
}

impl<'a, T> ListPanel<'a, T> {
    /// A panel of `rows`, row `selected` selected, titled `title`.
    pub fn new(rows: &'a [&'a T], selected: usize, title: impl Into<String>) -> Self {
        ListPanel {
            rows,
            columns: Vec::new(),
            title: title.into(),
            header: true,
            selected,
            focused: false,
            mark: Mark::Always,
        }
    }

    /// Its columns, in order.
    pub fn columns(mut self, columns: Vec<Column<'a, T>>) -> Self {
        self.columns = columns;
        self
    }

    /// No header row.
    pub fn without_header(mut self) -> Self {
        self.header = false;
        self
    }

    /// It has the focus; its selection is marked as `mark` says.
    pub fn focus(mut self, focused: bool, mark: Mark) -> Self {
        self.focused = focused;
        self.mark = mark;
        self
    }

    /// Draws it in `area`.
    pub fn render(self, frame: &mut Frame<'_>, area: Rect, theme: &Theme) {
        let inner = area.width.saturating_sub(2);
        let cols: Vec<Col> = self.columns.iter().map(|c| c.col).collect();
        let widths = columns(inner, 1, 2, &cols);
        let shown: Vec<(&Column<'a, T>, u16)> = self
            .columns
            .iter()
            .zip(widths)
            .filter(|(_, w)| *w > 0)
            .collect();
        // Only the rows that fit are built, scrolled as ratatui would: the selected row at the
        // bottom once it passes the last visible one.
        let chrome = if self.header { 3 } else { 2 };
        let visible = usize::from(area.height.saturating_sub(chrome)).max(1);
        let selected = self.selected.min(self.rows.len().saturating_sub(1));
        let offset = (selected + 1).saturating_sub(visible);
        let rows = self.rows.iter().skip(offset).take(visible).map(|row| {
            Row::new(
                shown
                    .iter()
                    .map(|(c, w)| (c.cell)(row, *w))
                    .collect::<Vec<_>>(),
            )
        });
        let widths: Vec<u16> = shown.iter().map(|(_, w)| *w).collect();
        let mut table = Table::new(rows, constraints(&widths))
            .block(panel(
                fit(&self.title, usize::from(area.width.saturating_sub(4))),
                self.focused,
                theme,
            ))
            .row_highlight_style(row_highlight(self.focused, theme))
            .highlight_symbol("› ");
        if self.header {
            let header: Vec<Span<'_>> = shown.iter().map(|(c, _)| Span::raw(c.header)).collect();
            table = table.header(Row::new(header).style(theme.get("muted")));
        }
        let marked = self.focused || self.mark == Mark::Always;
        let mut state = TableState::default().with_selected(marked.then_some(selected - offset));
        frame.render_stateful_widget(table, area, &mut state);
    }
}

/// A list's title with its filter, when one is in force: how many of how many it shows, or
/// that none match.
pub fn filtered_title(name: &str, filter: &str, shown: usize, of: usize) -> String {
    if filter.is_empty() {
        format!(" {name} ")
    } else if shown == 0 {
        format!(" {name} · /{filter}: none match (Esc clears) ")
    } else {
        format!(" {name} · /{filter} · {shown} of {of} (Esc clears) ")
    }
}
