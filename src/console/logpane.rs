//! The log pane's model: a bounded buffer of log lines (memory stays flat however much plugins
//! log), filters by deployment, plugin, target, level and text, and follow-or-scroll. Rendering
//! reads it; only `App::update` changes it.

use std::collections::VecDeque;

use crate::plugin::{Level, LogLine};

/// Lines kept; older ones are dropped (the database keeps them all: `manent logs`).
pub const CAPACITY: usize = 20_000;

/// What the pane shows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogFilter {
    /// Only this deployment's lines (and the engine's own).
    pub deployment: Option<String>,
    /// Only this plugin (`source`).
    pub source: Option<String>,
    /// Only this target.
    pub target: Option<String>,
    /// Lines at or above this level.
    pub min_level: Option<Level>,
    /// Lines containing this text (case-insensitive).
    pub text: String,
}

impl LogFilter {
    /// Parses what the operator typed after `/`: words are matched as text, except
    /// `plugin:NAME`, `target:NAME` and `level:warn`. It replaces the whole filter (but the
    /// deployment): what is not typed is not filtered.
    pub fn parse_into(&mut self, typed: &str) {
        self.source = None;
        self.target = None;
        self.min_level = None;
        let mut words = Vec::new();
        for w in typed.split_whitespace() {
            if let Some(p) = w.strip_prefix("plugin:") {
                self.source = Some(p.to_owned());
            } else if let Some(t) = w.strip_prefix("target:") {
                self.target = Some(t.to_owned());
            } else if let Some(l) = w.strip_prefix("level:").and_then(Level::parse) {
                self.min_level = Some(l);
            } else {
                words.push(w);
            }
        }
        self.text = words.join(" ");
    }

    /// What is set, as it would be typed after `/` (the prompt is pre-filled with it, and
    /// Enter keeps it as it is): `plugin:fleet level:warn timeout`.
    pub fn typed(&self) -> String {
        let mut parts = Vec::new();
        if let Some(s) = &self.source {
            parts.push(format!("plugin:{s}"));
        }
        if let Some(t) = &self.target {
            parts.push(format!("target:{t}"));
        }
        if let Some(l) = self.min_level {
            parts.push(format!("level:{}", l.as_str()));
        }
        if !self.text.is_empty() {
            parts.push(self.text.clone());
        }
        parts.join(" ")
    }

    /// What is set, for the pane's title: `plugin:fleet level≥warn "timeout"`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(s) = &self.source {
            parts.push(format!("plugin:{s}"));
        }
        if let Some(t) = &self.target {
            parts.push(format!("target:{t}"));
        }
        if let Some(l) = self.min_level {
            parts.push(format!("level≥{}", l.as_str()));
        }
        if !self.text.is_empty() {
            parts.push(format!("\"{}\"", self.text));
        }
        parts.join(" ")
    }

    /// True when `line` passes.
    pub fn matches(&self, line: &LogLine) -> bool {
        if let Some(d) = &self.deployment
            && line.deployment_id.as_deref().is_some_and(|l| l != d)
        {
            return false;
        }
        if self.source.as_deref().is_some_and(|s| s != line.source) {
            return false;
        }
        if self
            .target
            .as_deref()
            .is_some_and(|t| line.target.as_deref() != Some(t))
        {
            return false;
        }
        if self.min_level.is_some_and(|l| line.level < l) {
            return false;
        }
        self.text.is_empty() || contains_ignore_case(&line.message, &self.text)
    }
}

fn contains_ignore_case(hay: &str, needle: &str) -> bool {
    hay.to_lowercase().contains(&needle.to_lowercase())
}

/// The pane.
#[derive(Debug, Clone)]
pub struct LogPane {
    lines: VecDeque<std::sync::Arc<LogLine>>,
    capacity: usize,
    /// Lines the console could not keep up with (the broadcast dropped them).
    pub dropped: u64,
    /// Current filter.
    pub filter: LogFilter,
    /// Matching lines hidden below the view when scrolled back (0: following).
    pub offset: usize,
    /// Long lines wrap onto the rows below instead of being cut (`w`).
    pub wrap: bool,
}

impl Default for LogPane {
    fn default() -> Self {
        LogPane::with_capacity(CAPACITY)
    }
}

impl LogPane {
    /// A pane keeping at most `capacity` lines.
    pub fn with_capacity(capacity: usize) -> Self {
        LogPane {
            lines: VecDeque::new(),
            capacity,
            dropped: 0,
            filter: LogFilter::default(),
            offset: 0,
            wrap: false,
        }
    }

    /// Adds a line; a scrolled-back view stays where it is (until the lines it shows age out).
    pub fn push(&mut self, line: impl Into<std::sync::Arc<LogLine>>) {
        let line = line.into();
        if self.lines.len() == self.capacity {
            self.lines.pop_front();
        }
        if self.offset > 0 && self.filter.matches(&line) {
            self.offset = (self.offset + 1).min(self.lines.len());
        }
        self.lines.push_back(line);
    }

    /// Puts a deployment's earlier lines before everything held (they are older than what
    /// arrived live); the oldest go first when the pane is full.
    pub fn prepend(&mut self, older: &[LogLine]) {
        let room = self.capacity.saturating_sub(self.lines.len());
        let skip = older.len().saturating_sub(room);
        for l in older[skip..].iter().rev() {
            self.lines.push_front(std::sync::Arc::new(l.clone()));
        }
    }

    /// Every line held, oldest first (a target's detail reads its own).
    pub fn lines(&self) -> impl Iterator<Item = &LogLine> {
        self.lines.iter().map(|l| &**l)
    }

    /// Lines held.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// True with no lines.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// True when the newest line is in view.
    pub fn following(&self) -> bool {
        self.offset == 0
    }

    /// The `height` matching lines to show, oldest first. Scrolled back past the oldest line
    /// (lines aged out during a flood), the oldest lines show.
    pub fn visible(&self, height: usize) -> Vec<&LogLine> {
        let matching = self.newest_first();
        let skip = self.offset.min(matching.len().saturating_sub(height));
        let mut out: Vec<&LogLine> = matching.into_iter().skip(skip).take(height).collect();
        out.reverse();
        out
    }

    /// The lines the filter lets through, newest first.
    fn newest_first(&self) -> Vec<&LogLine> {
        self.lines
            .iter()
            .rev()
            .map(|l| &**l)
            .filter(|l| self.filter.matches(l))
            .collect()
    }

    fn matching(&self) -> usize {
        self.lines.iter().filter(|l| self.filter.matches(l)).count()
    }

    /// Scrolls back `n` lines (stops at the oldest).
    pub fn scroll_up(&mut self, n: usize, height: usize) {
        let max = self.matching().saturating_sub(height);
        self.offset = (self.offset + n).min(max);
    }

    /// Scrolls forward `n` lines (back to following at the newest).
    pub fn scroll_down(&mut self, n: usize, height: usize) {
        let max = self.matching().saturating_sub(height);
        self.offset = self.offset.min(max).saturating_sub(n);
    }

    /// Jumps to the oldest line.
    pub fn top(&mut self, height: usize) {
        self.offset = self.matching().saturating_sub(height);
    }

    /// Follows the newest line again.
    pub fn follow(&mut self) {
        self.offset = 0;
    }

    /// Scrolls to the next warning or error (`newer`: below the bottom line shown, else above
    /// it), which becomes the bottom line; false when there is none that way.
    pub fn jump_to_problem(&mut self, newer: bool, height: usize) -> bool {
        let matching = self.newest_first();
        let max = matching.len().saturating_sub(height);
        let at = self.offset.min(max);
        let problem = |i: &usize| matching[*i].level >= Level::Warn;
        let found = if newer {
            (0..at).rev().find(problem)
        } else {
            (at + 1..matching.len()).find(problem)
        };
        match found {
            Some(i) => {
                self.offset = i;
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(i: usize, level: Level, source: &str, target: Option<&str>) -> LogLine {
        LogLine {
            at: i as i64,
            level,
            source: source.into(),
            deployment_id: Some("dep-1".into()),
            target: target.map(Into::into),
            moniker: None,
            message: format!("line {i}"),
            attrs: Default::default(),
        }
    }

    #[test]
    fn n_and_shift_n_jump_between_warnings_and_errors() {
        let mut p = LogPane::with_capacity(100);
        for i in 0..50 {
            let level = match i {
                10 => Level::Error,
                30 => Level::Warn,
                _ => Level::Info,
            };
            p.push(line(i, level, "fleet", None));
        }
        // Following, 5 rows: N goes back to line 30 at the bottom, then to line 10.
        assert!(p.jump_to_problem(false, 5));
        assert_eq!(p.visible(5).last().unwrap().message, "line 30");
        assert!(p.jump_to_problem(false, 5));
        assert_eq!(p.visible(5).last().unwrap().message, "line 10");
        assert!(!p.jump_to_problem(false, 5), "none older");
        // n comes forward again.
        assert!(p.jump_to_problem(true, 5));
        assert_eq!(p.visible(5).last().unwrap().message, "line 30");
        assert!(!p.jump_to_problem(true, 5), "none newer");
    }

    #[test]
    fn bounded_filtered_and_scrollable() {
        let mut p = LogPane::with_capacity(100);
        for i in 0..150 {
            let level = if i % 10 == 0 {
                Level::Warn
            } else {
                Level::Info
            };
            p.push(line(
                i,
                level,
                if i % 2 == 0 { "a" } else { "b" },
                Some(if i % 3 == 0 { "t1" } else { "t2" }),
            ));
        }
        assert_eq!(p.len(), 100, "memory is bounded");
        assert_eq!(
            p.visible(3).iter().map(|l| l.at).collect::<Vec<_>>(),
            [147, 148, 149]
        );
        p.filter.parse_into("plugin:a level:warn");
        assert_eq!(
            p.visible(10).iter().map(|l| l.at).collect::<Vec<_>>(),
            [50, 60, 70, 80, 90, 100, 110, 120, 130, 140]
        );
        assert_eq!(p.filter.describe(), "plugin:a level≥warn");
        // Reopened, the prompt holds what was typed, and Enter keeps the same filter.
        let again = p.filter.typed();
        assert_eq!(again, "plugin:a level:warn");
        let before = p.filter.clone();
        p.filter.parse_into(&again);
        assert_eq!(p.filter, before);
        p.filter = LogFilter::default();
        p.filter.parse_into("target:t1 LINE 14");
        assert_eq!(
            p.visible(10).iter().map(|l| l.at).collect::<Vec<_>>(),
            [141, 144, 147]
        );
        p.filter = LogFilter::default();
        p.scroll_up(5, 3);
        assert_eq!(
            p.visible(3).iter().map(|l| l.at).collect::<Vec<_>>(),
            [142, 143, 144]
        );
        p.push(line(150, Level::Info, "a", None));
        assert_eq!(
            p.visible(3).iter().map(|l| l.at).collect::<Vec<_>>(),
            [142, 143, 144],
            "scrolled back stays put"
        );
        p.follow();
        assert_eq!(p.visible(1)[0].at, 150);
        p.top(3);
        assert_eq!(p.visible(3)[0].at, 51);
    }

    #[test]
    fn a_flood_past_the_top_still_shows_the_oldest_lines() {
        let mut p = LogPane::with_capacity(50);
        for i in 0..50 {
            p.push(line(i, Level::Info, "a", None));
        }
        p.top(10);
        assert_eq!(p.visible(10)[0].at, 0);
        // The flood goes on while the operator reads the top: old lines age out.
        for i in 50..500 {
            p.push(line(i, Level::Info, "a", None));
        }
        let shown = p.visible(10);
        assert_eq!(
            shown.len(),
            10,
            "never \"no log lines match\" with no filter"
        );
        assert_eq!(shown[0].at, 450, "the oldest line still held");
        p.scroll_down(1, 10);
        assert_eq!(p.visible(10)[0].at, 451, "one key moves one line at once");
        p.top(10);
        assert_eq!(p.visible(10)[0].at, 450);
    }
}
