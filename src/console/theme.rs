//! Themes as data (`themes/*.yml`): semantic slots such as `status.failed`, `production` and
//! `selection`, partial themes that `inherits:` another, the four bundled themes compiled in, user
//! themes from `$XDG_CONFIG_HOME/manent/themes/`, and `mono` for `NO_COLOR`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::str::FromStr;

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

use crate::deploy::state::{DeploymentState, Kind, TargetState};
use crate::plugin::Level;

/// Every slot a theme must define (after inheritance).
pub const SLOTS: &[&str] = &[
    "base",
    "muted",
    "border",
    "border_focus",
    "title",
    "header",
    "production",
    "environment",
    "selection",
    "key",
    "readonly",
    "notice.info",
    "notice.warn",
    "notice.error",
    "status.pending",
    "status.running",
    "status.retrying",
    "status.ok",
    "status.failed",
    "status.skipped",
    "status.cancelled",
    "status.interrupted",
    "status.rolled_back",
    "status.partial",
    "log.error",
    "log.warn",
    "log.info",
    "log.debug",
    "log.trace",
    "gauge",
    "canary.stable",
    "canary.candidate",
    "canary.pending",
];

/// The themes compiled into the binary.
pub const BUILTIN: &[(&str, &str)] = &[
    ("default", include_str!("../../themes/default.yml")),
    ("light", include_str!("../../themes/light.yml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.yml"),
    ),
    ("mono", include_str!("../../themes/mono.yml")),
];

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StyleSpec {
    #[serde(default)]
    fg: Option<String>,
    #[serde(default)]
    bg: Option<String>,
    #[serde(default)]
    bold: bool,
    #[serde(default)]
    dim: bool,
    #[serde(default)]
    italic: bool,
    #[serde(default)]
    underlined: bool,
    #[serde(default)]
    reversed: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    name: String,
    #[serde(default)]
    inherits: Option<String>,
    #[serde(default)]
    styles: BTreeMap<String, StyleSpec>,
}

/// Why a theme could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThemeError {
    /// No theme by that name.
    #[error("no theme `{0}` (bundled: default, light, high-contrast, mono; yours go in {1})")]
    Unknown(String, String),
    /// A file that does not parse.
    #[error("theme {0}: {1}")]
    Invalid(String, String),
    /// `inherits` loops.
    #[error("theme {0}: `inherits` loops back to itself")]
    Cycle(String),
}

/// A resolved theme.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    /// Its name.
    pub name: String,
    styles: BTreeMap<String, Style>,
    /// Slots a user theme set that no bundled theme knows (shown once as a notice).
    pub warnings: Vec<String>,
}

fn color(s: &str) -> Result<Color, String> {
    Color::from_str(s).map_err(|_| format!("`{s}` is not a colour (a name, #rrggbb or 0-255)"))
}

impl StyleSpec {
    fn style(&self) -> Result<Style, String> {
        let mut st = Style::default();
        if let Some(fg) = &self.fg {
            st = st.fg(color(fg)?);
        }
        if let Some(bg) = &self.bg {
            st = st.bg(color(bg)?);
        }
        for (on, m) in [
            (self.bold, Modifier::BOLD),
            (self.dim, Modifier::DIM),
            (self.italic, Modifier::ITALIC),
            (self.underlined, Modifier::UNDERLINED),
            (self.reversed, Modifier::REVERSED),
        ] {
            if on {
                st = st.add_modifier(m);
            }
        }
        Ok(st)
    }
}

/// Where user themes live.
pub fn user_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(|| PathBuf::from(".config"));
    base.join("manent").join("themes")
}

fn source(name: &str) -> Result<(String, String), ThemeError> {
    let user = user_dir().join(format!("{name}.yml"));
    if let Ok(text) = std::fs::read_to_string(&user) {
        return Ok((user.display().to_string(), text));
    }
    BUILTIN
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(n, t)| (format!("builtin:{n}"), (*t).to_owned()))
        .ok_or_else(|| ThemeError::Unknown(name.to_owned(), user_dir().display().to_string()))
}

impl Theme {
    /// Loads theme `name` (a user theme wins over a bundled one of the same name).
    pub fn load(name: &str) -> Result<Theme, ThemeError> {
        let mut chain: Vec<ThemeFile> = Vec::new();
        let mut next = Some(name.to_owned());
        while let Some(n) = next {
            if chain.iter().any(|t| t.name == n) {
                return Err(ThemeError::Cycle(name.to_owned()));
            }
            let (origin, text) = source(&n)?;
            let file: ThemeFile = yaml_serde::from_str(&text)
                .map_err(|e| ThemeError::Invalid(origin.clone(), e.to_string()))?;
            next = file.inherits.clone();
            chain.push(file);
        }
        let mut styles = BTreeMap::new();
        let mut warnings = Vec::new();
        for file in chain.iter().rev() {
            for (slot, spec) in &file.styles {
                if !SLOTS.contains(&slot.as_str()) {
                    warnings.push(format!(
                        "theme {}: unknown slot `{slot}` ignored",
                        file.name
                    ));
                    continue;
                }
                let st = spec
                    .style()
                    .map_err(|e| ThemeError::Invalid(file.name.clone(), format!("{slot}: {e}")))?;
                styles.insert(slot.clone(), st);
            }
        }
        Ok(Theme {
            name: name.to_owned(),
            styles,
            warnings,
        })
    }

    /// The theme for this terminal: `--theme` if given, else `mono` when `NO_COLOR` is set, else
    /// the configured one, else `default`.
    pub fn choose(flag: Option<&str>, configured: Option<&str>) -> Result<Theme, ThemeError> {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let name = flag
            .or(if no_color { Some("mono") } else { None })
            .or(configured)
            .unwrap_or("default");
        Theme::load(name)
    }

    /// Slots missing after inheritance (a bundled theme must have none).
    pub fn missing(&self) -> Vec<&'static str> {
        SLOTS
            .iter()
            .copied()
            .filter(|s| !self.styles.contains_key(*s))
            .collect()
    }

    /// The style of `slot` (base when unset).
    pub fn get(&self, slot: &str) -> Style {
        self.styles
            .get(slot)
            .or_else(|| self.styles.get("base"))
            .copied()
            .unwrap_or_default()
    }

    /// The style of a target's state.
    pub fn target(&self, state: TargetState) -> Style {
        use TargetState as T;
        self.get(match state {
            T::Deployed | T::Unchanged | T::RolledBack | T::Planned => "status.ok",
            T::Running | T::Candidate => "status.running",
            T::Reverted => "status.rolled_back",
            T::Retrying => "status.retrying",
            T::Failed | T::RollbackFailed => "status.failed",
            T::Skipped | T::NotStarted => "status.skipped",
            T::Unknown => "status.interrupted",
            T::Pending => "status.pending",
        })
    }

    /// The style of a deployment's state: a rolled-back or aborted deploy is neither pending
    /// nor a success.
    pub fn deployment(&self, state: DeploymentState, kind: Kind) -> Style {
        use DeploymentState as D;
        self.get(match state {
            D::Deployed | D::Planned | D::Passed => "status.ok",
            D::RolledBack if kind == Kind::Rollback => "status.ok",
            D::RolledBack | D::Aborted | D::Reverted => "status.rolled_back",
            D::DeployedWithSkips => "status.partial",
            D::Running | D::Queued => "status.running",
            D::Failed | D::FailedAwaiting | D::DeadLettered => "status.failed",
            D::Cancelled | D::Cancelling => "status.cancelled",
            D::Paused | D::Interrupted | D::CanaryPaused => "status.interrupted",
        })
    }

    /// The style of a log level.
    pub fn level(&self, level: Level) -> Style {
        self.get(match level {
            Level::Error => "log.error",
            Level::Warn => "log.warn",
            Level::Info => "log.info",
            Level::Debug => "log.debug",
            Level::Trace => "log.trace",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_theme_loads_with_every_slot_and_no_warning() {
        for (name, _) in BUILTIN {
            let t = Theme::load(name).unwrap();
            assert!(t.missing().is_empty(), "{name} misses {:?}", t.missing());
            assert!(t.warnings.is_empty(), "{name}: {:?}", t.warnings);
        }
        let mono = Theme::load("mono").unwrap();
        for slot in SLOTS {
            let st = mono.get(slot);
            assert!(
                st.fg.is_none() && st.bg.is_none(),
                "mono sets a colour in {slot}"
            );
        }
        assert!(
            mono.get("selection")
                .add_modifier
                .contains(Modifier::REVERSED)
        );
    }

    #[test]
    fn partial_themes_inherit_and_cycles_are_refused() {
        let light = Theme::load("light").unwrap();
        assert_eq!(
            light.get("production"),
            Theme::load("default").unwrap().get("production")
        );
        assert_ne!(
            light.get("selection"),
            Theme::load("default").unwrap().get("selection")
        );
        assert!(matches!(Theme::load("nope"), Err(ThemeError::Unknown(..))));
    }
}
