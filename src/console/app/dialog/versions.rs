//! `D`: which version to deploy — newest first, the cursor on the descriptor's; one deployed
//! before (an aborted or rolled-back one says so), or one typed and checked before any
//! confirmation.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::{Modal, Reply, asks, frame};
use crate::console::action::Action;
use crate::console::app::App;
use crate::console::app::ViewCtx;
use crate::deploy::state::DeploymentState;
use crate::deploy::view::DeploymentView;
use crate::engine::handle::AppEnv;
use crate::plugin::Level;

/// One version the picker offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionChoice {
    /// The version.
    pub version: String,
    /// Where it comes from, and whether it is live.
    pub note: String,
}

/// The version picker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versions {
    /// Application.
    pub application: String,
    /// Environment.
    pub environment: String,
    /// What it offers, newest first; the last row types another.
    pub choices: Vec<VersionChoice>,
    /// The highlighted row (`choices.len()`: "another version…").
    pub selected: usize,
    /// A version being typed.
    pub typing: Option<String>,
}

impl Versions {
    /// The choices for `a`, given the deployments known (an aborted version says so).
    pub fn of(a: &AppEnv, deployments: &[DeploymentView]) -> Versions {
        let note = |v: &str, from: &str| {
            let live = a.live_by_target.values().filter(|l| *l == v).count();
            let mut n = match live {
                0 => from.to_owned(),
                n if n == a.targets => format!("{from}, live on every target"),
                n => format!("{from}, live on {n} of {} targets", a.targets),
            };
            if let Some(how) = ended_badly(a, v, deployments) {
                n.push_str(&format!(" — its last deploy {how}"));
            }
            n
        };
        // Newest first, always in that order (what was deployed since the last look goes on
        // top, never between rows a hand knows); the cursor starts on the descriptor's.
        let mut choices: Vec<VersionChoice> = std::iter::once(&a.version)
            .chain(a.versions.iter().filter(|v| **v != a.version))
            .filter(|v| !v.is_empty())
            .map(|v| VersionChoice {
                version: v.clone(),
                note: if *v == a.version {
                    note(v, "the descriptor's")
                } else {
                    note(v, "deployed before")
                },
            })
            .collect();
        choices.sort_by(|x, y| crate::format::version_order(&y.version, &x.version));
        let selected = choices
            .iter()
            .position(|c| c.version == a.version)
            .unwrap_or(0);
        Versions {
            application: a.application.clone(),
            environment: a.environment.clone(),
            choices,
            selected,
            typing: None,
        }
    }

    /// Applies a key: a version chosen opens its confirmation.
    pub fn update(&mut self, action: &Action, app: &App) -> Reply {
        if let Some(text) = &mut self.typing {
            match action {
                Action::Input(c) => text.push(*c),
                Action::Backspace => {
                    text.pop();
                }
                Action::ClearInput => text.clear(),
                Action::Submit => {
                    let v = text.trim().to_owned();
                    // Refused here, before any confirmation asks about it.
                    if let Err(e) = crate::config::check_version(&v) {
                        return Reply::Say(Level::Error, e);
                    }
                    return self.chosen(v, app);
                }
                Action::Dismiss => self.typing = None,
                // ↑ goes back to the listed versions, as the hint says.
                Action::Up => {
                    self.typing = None;
                    self.selected = self.choices.len().saturating_sub(1);
                }
                _ => {}
            }
            return Reply::Keep;
        }
        let last = self.choices.len();
        match action {
            Action::Up => self.selected = self.selected.saturating_sub(1),
            Action::Down => self.selected = (self.selected + 1).min(last),
            Action::Top => self.selected = 0,
            Action::Bottom => self.selected = last,
            Action::Submit => match self.choices.get(self.selected) {
                Some(c) => return self.chosen(c.version.clone(), app),
                None => self.typing = Some(String::new()),
            },
            Action::Dismiss => return Reply::Close,
            _ => {}
        }
        Reply::Keep
    }

    fn chosen(&self, version: String, app: &App) -> Reply {
        let Some(a) = app
            .snap
            .apps
            .iter()
            .find(|a| a.application == self.application && a.environment == self.environment)
        else {
            return Reply::Close;
        };
        let awaiting = app
            .snap
            .deployments
            .iter()
            .find(|d| d.subject() == format!("{}/{}", a.application, a.environment))
            .filter(|d| d.state == DeploymentState::FailedAwaiting && !d.router_failed())
            .map(|d| (d.id.as_str(), d.version.as_str()));
        let c = asks::deploy(a, version, awaiting, app.ui.now);
        Reply::Open(Box::new(Modal::Confirm(c)))
    }

    /// Draws it.
    pub fn render(&self, f: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
        let t = ctx.theme;
        let mut lines = vec![Line::from(Span::styled(
            format!(
                "Which version of {} to {}?",
                self.application, self.environment
            ),
            t.get("title"),
        ))];
        for (i, c) in self.choices.iter().enumerate() {
            let on = i == self.selected && self.typing.is_none();
            let style = if on {
                t.get("selection")
            } else {
                Style::default()
            };
            lines.push(Line::from(vec![
                Span::styled(
                    format!("{} {:<16}", if on { "›" } else { " " }, c.version),
                    style,
                ),
                Span::styled(format!(" {}", c.note), t.get("muted")),
            ]));
        }
        let other = self.selected == self.choices.len();
        match &self.typing {
            Some(text) => lines.push(Line::from(vec![
                Span::raw("  version: "),
                Span::styled(format!("{text}_"), t.get("selection")),
            ])),
            None => lines.push(Line::from(Span::styled(
                format!("{} another version…", if other { "›" } else { " " }),
                if other {
                    t.get("selection")
                } else {
                    t.get("muted")
                },
            ))),
        }
        lines.push(Line::from(Span::styled(
            "↑↓ choose · Enter · Esc",
            t.get("muted"),
        )));
        frame(f, area, " Deploy ", lines, (76, "border_focus"), ctx);
    }
}

/// How the newest deployment of `version` to `a` ended, when it did not end deployed.
fn ended_badly(a: &AppEnv, version: &str, deployments: &[DeploymentView]) -> Option<String> {
    let subject = format!("{}/{}", a.application, a.environment);
    let d = deployments.iter().find(|d| {
        d.subject() == subject
            && d.version == version
            && matches!(
                d.kind,
                crate::deploy::state::Kind::Deploy | crate::deploy::state::Kind::Canary
            )
            && !d.status.is_live()
    })?;
    match d.state {
        DeploymentState::Aborted
        | DeploymentState::RolledBack
        | DeploymentState::Failed
        | DeploymentState::Reverted => Some(format!("{} ({})", d.state, d.id)),
        _ => None,
    }
}
