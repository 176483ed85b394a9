//! Enter on an application: its plan for an environment — every target by batch, and what
//! each goes from and to — with the keys that act on it (deploy, dry-run, roll back).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Reply, frame};
use crate::console::action::Action;
use crate::console::app::App;
use crate::console::app::ViewCtx;
use crate::console::scroll::Scroll;
use crate::console::widgets::fit;
use crate::engine::handle::AppEnv;

/// The plan of an application's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Application.
    pub application: String,
    /// Environment.
    pub environment: String,
    /// Where it is scrolled to.
    pub scroll: Scroll,
    /// The descriptor file as it was read when the operator last looked at this plan.
    pub read: u64,
}

impl Plan {
    /// The plan of `a`.
    pub fn of(a: &AppEnv) -> Plan {
        Plan {
            application: a.application.clone(),
            environment: a.environment.clone(),
            scroll: Scroll::top(),
            read: a.read,
        }
    }

    /// The application's file was read again (edited) since the operator looked at this plan:
    /// what it shows now is not what they read.
    fn stale<'a>(&self, app: &'a App) -> Option<&'a AppEnv> {
        self.app_env(app).filter(|a| a.read != self.read)
    }

    fn app_env<'a>(&self, app: &'a App) -> Option<&'a AppEnv> {
        app.snap
            .apps
            .iter()
            .find(|a| a.application == self.application && a.environment == self.environment)
    }

    /// Applies a key: D/Enter, d and R act on the application it shows.
    pub fn update(&mut self, action: &Action, app: &App) -> Reply {
        match action {
            Action::Dismiss => Reply::Close,
            // A plan that changed under the operator's eyes is shown again before it acts.
            Action::Deploy | Action::DryRun | Action::Rollback if self.stale(app).is_some() => {
                let a = self.stale(app).map(|a| (a.read, a.file.clone()));
                let (read, file) = a.unwrap_or_default();
                self.read = read;
                Reply::Say(
                    crate::plugin::Level::Warn,
                    format!("{file} changed: this is the plan it says now; read it, then again"),
                )
            }
            Action::Deploy | Action::DryRun | Action::Rollback => Reply::Then(action.clone()),
            _ => {
                let total = self.app_env(app).map_or(0, |a| body(a).len());
                let room = rows(app.ui.size.1);
                self.scroll.apply(action, total, room);
                Reply::Keep
            }
        }
    }

    /// Draws it.
    pub fn render(&self, f: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
        let t = ctx.theme;
        let Some(a) = self.app_env(ctx.app) else {
            return;
        };
        let mut lines = vec![Line::from(vec![
            Span::styled(
                format!("{} {} → ", a.application, a.version),
                t.get("title"),
            ),
            Span::styled(
                format!(" {} ", a.environment),
                if a.production {
                    t.get("production")
                } else {
                    t.get("environment")
                },
            ),
            Span::raw(format!(
                "  {} targets · {} · plugin {}",
                a.targets, a.strategy, a.plugin
            )),
        ])];
        if self.stale(ctx.app).is_some() {
            lines.push(Line::from(Span::styled(
                format!("⚠ {} changed — Enter re-reads it", a.file),
                t.get("notice.warn"),
            )));
        }
        // A deploy that would take a target back to an older version says so before Enter.
        if let Some(w) = downgrade(a) {
            lines.push(Line::from(Span::styled(w, t.get("notice.warn"))));
        }
        let body = body(a);
        let room = rows(area.height);
        let from = self.scroll.at(body.len(), room);
        let position = self.scroll.position(body.len(), room);
        lines.extend(body.into_iter().skip(from).take(room).map(|(batch, l)| {
            if batch {
                Line::from(Span::styled(l, t.get("muted")))
            } else {
                Line::from(l)
            }
        }));
        lines.push(Line::from(Span::styled(
            format!("D/Enter deploy · d dry-run · R roll back · ↑↓ scroll · Esc{position}"),
            t.get("muted"),
        )));
        frame(f, area, " Plan ", lines, (76, "border_focus"), ctx);
    }
}

/// "⚠ a downgrade: …" when the version a deploy would take is older than one live on a target.
pub fn downgrade(a: &AppEnv) -> Option<String> {
    let newer: Vec<&String> = a
        .live_by_target
        .values()
        .filter(|v| crate::format::version_order(v, &a.version).is_gt())
        .collect();
    let newest = newer
        .iter()
        .max_by(|x, y| crate::format::version_order(x, y))?;
    Some(format!(
        "⚠ a downgrade: {} of {} targets run {newest}, newer than {}",
        newer.len(),
        a.targets,
        a.version
    ))
}

/// Rows of targets the plan shows at a screen height.
fn rows(height: u16) -> usize {
    usize::from(height.saturating_sub(8)).max(3)
}

/// `(is a batch header, text)`, batch by batch.
fn body(a: &AppEnv) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    for (i, batch) in a.batches.iter().enumerate() {
        out.push((true, format!("batch {}", i + 1)));
        for name in batch {
            let change = match a.live_by_target.get(name) {
                None if !a.live_read => format!("… → {}", a.version),
                Some(v) if *v == a.version => format!("{v} (unchanged)"),
                Some(v) => format!("{v} → {}", a.version),
                None => format!("new → {}", a.version),
            };
            out.push((false, format!("  {:<28} {change}", fit(name, 28))));
        }
    }
    out
}
