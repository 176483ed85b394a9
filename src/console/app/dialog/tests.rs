//! `t` where a canary is live: which release the test hooks run against — the stable release
//! production serves, or the candidate through the testers' route.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::{Modal, Reply, asks, frame};
use crate::console::action::Action;
use crate::console::app::App;
use crate::console::app::ViewCtx;
use crate::deploy::flows::canary::tester_header;

/// The release picker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PickRelease {
    /// Application.
    pub application: String,
    /// Environment.
    pub environment: String,
    /// The live canary.
    pub canary: String,
    /// The highlighted row: 0 stable, 1 the candidate.
    pub selected: usize,
}

impl PickRelease {
    /// Applies a key.
    pub fn update(&mut self, action: &Action, app: &App) -> Reply {
        match action {
            Action::Up => self.selected = 0,
            Action::Down => self.selected = 1,
            Action::Dismiss => return Reply::Close,
            Action::Submit => {
                let Some(a) = app.snap.apps.iter().find(|a| {
                    a.application == self.application && a.environment == self.environment
                }) else {
                    return Reply::Close;
                };
                let version = app
                    .snap
                    .deployments
                    .iter()
                    .find(|d| d.id == self.canary)
                    .map(|d| d.version.clone())
                    .unwrap_or_default();
                let candidate =
                    (self.selected == 1).then_some((self.canary.as_str(), version.as_str()));
                let c = asks::tests(a, candidate, app.ui.now);
                return Reply::Open(Box::new(Modal::Confirm(c)));
            }
            _ => {}
        }
        Reply::Keep
    }

    /// Draws it.
    pub fn render(&self, f: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
        let t = ctx.theme;
        let app = ctx.app;
        let live = app
            .snap
            .apps
            .iter()
            .find(|a| a.application == self.application && a.environment == self.environment)
            .map(|a| a.live.join(", "))
            .unwrap_or_default();
        let d = app.snap.deployments.iter().find(|d| d.id == self.canary);
        let weight = d
            .and_then(|d| d.canary.as_ref())
            .map_or(0, |c| c.status.weight);
        let route = d
            .and_then(|d| d.canary.as_ref())
            .and_then(|c| tester_header(&c.status.testers))
            .map_or_else(
                || "no tester route yet: it cannot be reached apart from production".to_owned(),
                |(h, v)| format!("through the testers' header {h}: {v}"),
            );
        let rows = [
            format!(
                "stable {live}: what production serves ({}% of traffic)",
                100 - weight.min(100)
            ),
            format!(
                "candidate {} of {}: {route}",
                d.map(|d| d.version.as_str()).unwrap_or("?"),
                self.canary
            ),
        ];
        let mut lines = vec![Line::from(Span::styled(
            format!(
                "Run the test hooks of {} in {} against which release?",
                self.application, self.environment
            ),
            t.get("title"),
        ))];
        for (i, r) in rows.iter().enumerate() {
            let on = i == self.selected;
            lines.push(Line::from(Span::styled(
                format!("{} {r}", if on { "›" } else { " " }),
                if on {
                    t.get("selection")
                } else {
                    Style::default()
                },
            )));
        }
        lines.push(Line::from(Span::styled(
            "↑↓ choose · Enter (it asks first) · Esc",
            t.get("muted"),
        )));
        frame(f, area, " Test hooks ", lines, (80, "border_focus"), ctx);
    }
}
