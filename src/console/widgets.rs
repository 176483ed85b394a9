//! Small formatting helpers shared by the screens and the dialogs.

use std::borrow::Cow;

use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::{Block, BorderType, Borders};

use crate::console::theme::Theme;
use crate::deploy::view::{DeploymentView, HookState};

/// A bordered panel whose border shows whether it has the focus — by its shape and a marker
/// before its title as well as by its colour, so it shows without colour (`NO_COLOR`, `mono`)
/// and in ASCII (`>`).
pub fn panel<'a>(title: impl Into<Cow<'a, str>>, focused: bool, theme: &Theme) -> Block<'a> {
    let title: Cow<'a, str> = title.into();
    if !focused {
        return Block::default()
            .borders(Borders::ALL)
            .border_style(theme.get("border"))
            .title(Span::styled(title, theme.get("title")));
    }
    Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Thick)
        .border_style(theme.get("border_focus"))
        .title(Span::styled(format!("▶{title}"), theme.get("title")))
}

/// The selected row's style: marked only in the panel that has the focus.
pub fn row_highlight(focused: bool, theme: &Theme) -> Style {
    if focused {
        theme.get("selection")
    } else {
        Style::default()
    }
}

/// `1m04s`, `2h03m`, `12s`.
pub fn elapsed(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// How long a short step took: `410ms`, `2.1s`, then as [`elapsed`] from ten seconds on (a hook
/// of a fraction of a second is not `0s`).
pub fn took(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms}ms"),
        1000..10_000 => format!("{}.{}s", ms / 1000, ms % 1000 / 100),
        _ => elapsed(i64::try_from(ms).unwrap_or(i64::MAX)),
    }
}

/// `HH:MM:SS` (UTC) of an epoch-ms time.
pub fn clock(ms: i64) -> String {
    let s = ms.max(0) / 1000 % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, (s % 3600) / 60, s % 60)
}

/// `12/36`: targets done of all; a canary taking traffic: its candidate's weight, `25%`.
pub fn progress(d: &DeploymentView) -> String {
    let counts = d.counts();
    match &d.canary {
        Some(c) if d.status.is_live() && counts.done == counts.total => {
            format!("{}%", c.status.weight)
        }
        _ if d.kind == crate::deploy::state::Kind::Test => {
            let passed = d
                .hooks
                .iter()
                .filter(|h| h.state == crate::deploy::view::HookState::Passed)
                .count();
            format!("{passed}/{}", d.hooks.len())
        }
        // A list's summary of a deployment whose report predates its counts.
        _ if counts.total == 0 => "-".into(),
        // Taken back: how many are on its version now (not how many it went through).
        _ if let Some((on, _)) = d.undone() => format!("{on}/{}", counts.total),
        _ => format!("{}/{}", counts.done, counts.total),
    }
}

/// Cuts `s` to `width` characters, marking the cut.
pub fn fit(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_owned()
    } else if width == 0 {
        String::new()
    } else {
        let mut out: String = s.chars().take(width - 1).collect();
        out.push('…');
        out
    }
}

/// The word for a deployment's state: a submission parked before it ever ran says so (it is
/// recorded as cancelled).
pub fn state_word(d: &DeploymentView) -> &'static str {
    if d.never_started.is_some() && d.state == crate::deploy::state::DeploymentState::Cancelled {
        "never started"
    } else {
        d.state.as_str()
    }
}

/// A hook's state style.
pub fn hook_style(s: HookState, t: &Theme) -> Style {
    t.get(match s {
        HookState::Pending => "status.pending",
        HookState::Running => "status.running",
        HookState::Retrying => "status.retrying",
        HookState::Passed => "status.ok",
        HookState::Failed => "status.failed",
    })
}
