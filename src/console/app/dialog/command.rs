//! `:`: a command line for the headless verbs, on the selected deployment (or application) —
//! `:weight 30`, `:promote`, `:rollback`, `:logs`, `:skip web-07`. Tab completes the verb and
//! its argument (targets, versions); ↑↓ recall earlier lines. A verb goes through the same
//! question its key asks: the command line never skips a confirmation.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Reply, frame};
use crate::console::action::Action;
use crate::console::app::App;
use crate::console::app::ViewCtx;
use crate::plugin::Level;

/// A verb the command line runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verb {
    /// `deploy [VERSION]`
    Deploy(Option<String>),
    /// `dry-run`
    DryRun,
    /// `plan`
    Plan,
    /// `rollback`
    Rollback,
    /// `test`
    Test,
    /// `cancel`
    Cancel,
    /// `pause`
    Pause,
    /// `resume`
    Resume,
    /// `retry [TARGET…]`
    Retry(Vec<String>),
    /// `skip TARGET`
    Skip(String),
    /// `abort`
    Abort,
    /// `promote [--full]`
    Promote { full: bool },
    /// `revert`
    Revert,
    /// `weight N`
    Weight(u32),
    /// `back`
    Back,
    /// `abandon`
    Abandon,
    /// `logs`: the log pane, zoomed.
    Logs,
    /// `status`: the selected deployment's screen.
    Status,
    /// `inbox`: what waits on you.
    Inbox,
    /// `messages`
    Messages,
    /// `help`
    Help,
    /// `quit`
    Quit,
}

/// Verbs, their arguments and what they do (completion and the hint list them).
pub const VERBS: &[(&str, &str, &str)] = &[
    (
        "abandon",
        "",
        "a canary whose router failed: end it where it is",
    ),
    ("abort", "", "stop and roll back what the deploy changed"),
    ("back", "", "canary: back to the previous step's weight"),
    ("cancel", "", "stop at the next step"),
    ("deploy", "[VERSION]", "deploy the selected application"),
    ("dry-run", "", "what a deploy would do"),
    ("help", "", "the keys"),
    ("inbox", "", "what waits on you"),
    ("logs", "", "the log pane, zoomed"),
    ("messages", "", "every message in full"),
    ("pause", "", "pause before the next batch / hold a canary"),
    ("plan", "", "the selected application's plan"),
    ("promote", "[--full]", "canary: past this step; --full: now"),
    ("quit", "", "leave the console"),
    ("resume", "", "resume"),
    ("retry", "[TARGET…]", "the failed targets again"),
    ("revert", "", "canary: the candidate out of traffic"),
    ("rollback", "", "roll the selected application back"),
    ("skip", "TARGET", "leave a target out"),
    ("status", "", "open the selected deployment"),
    ("test", "", "run the test hooks"),
    ("weight", "N", "canary: set the candidate's weight"),
];

/// The command line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommandLine {
    /// What is typed.
    pub text: String,
    /// Earlier lines, oldest first.
    pub history: Vec<String>,
    /// Where ↑↓ is in the history (`history.len()`: the line being typed).
    pub recalled: usize,
    /// What Tab offered last, when more than one thing fits.
    pub offered: Vec<String>,
}

impl CommandLine {
    /// An empty line, with the earlier ones to recall.
    pub fn with_history(history: Vec<String>) -> CommandLine {
        CommandLine {
            recalled: history.len(),
            history,
            ..CommandLine::default()
        }
    }

    /// Applies a key.
    pub fn update(&mut self, action: &Action, app: &App) -> Reply {
        match action {
            Action::Input(c) => {
                self.text.push(*c);
                self.offered.clear();
            }
            Action::Backspace => {
                self.text.pop();
                self.offered.clear();
            }
            Action::ClearInput => self.text.clear(),
            Action::Complete => self.complete(app),
            Action::Up if self.recalled > 0 => {
                self.recalled -= 1;
                self.text = self.history[self.recalled].clone();
            }
            Action::Down if self.recalled < self.history.len() => {
                self.recalled += 1;
                self.text = self.history.get(self.recalled).cloned().unwrap_or_default();
            }
            Action::Dismiss => return Reply::Close,
            Action::Submit if self.text.trim().is_empty() => return Reply::Close,
            Action::Submit => {
                return match parse(&self.text) {
                    Ok(verb) => Reply::Run(verb, self.text.trim().to_owned()),
                    Err(e) => Reply::Say(Level::Error, e),
                };
            }
            _ => {}
        }
        Reply::Keep
    }

    /// Tab: the verb, or its argument (a target of the deployment, a version of the
    /// application), as far as it is unique; the choices are listed when it is not.
    fn complete(&mut self, app: &App) {
        let ends_in_space = self.text.ends_with(' ');
        let words: Vec<&str> = self.text.split_whitespace().collect();
        let (done, word, choices): (String, String, Vec<String>) =
            match (words.as_slice(), ends_in_space) {
                ([] | [_], false) => (
                    String::new(),
                    words.first().map(|w| (*w).to_owned()).unwrap_or_default(),
                    VERBS.iter().map(|(v, _, _)| (*v).to_owned()).collect(),
                ),
                ([verb, rest @ ..], _) => {
                    let word = if ends_in_space {
                        String::new()
                    } else {
                        rest.last().map(|w| (*w).to_owned()).unwrap_or_default()
                    };
                    let kept = if ends_in_space {
                        rest
                    } else {
                        &rest[..rest.len().saturating_sub(1)]
                    };
                    let mut done = (*verb).to_owned();
                    for w in kept {
                        done.push(' ');
                        done.push_str(w);
                    }
                    (done, word, arguments(verb, app))
                }
                ([], true) => return,
            };
        let fits: Vec<String> = choices
            .into_iter()
            .filter(|c| c.starts_with(&word))
            .collect();
        let common = common_prefix(&fits);
        let head = if done.is_empty() {
            String::new()
        } else {
            format!("{done} ")
        };
        match fits.len() {
            0 => self.offered.clear(),
            1 => {
                self.text = format!("{head}{} ", fits[0]);
                self.offered.clear();
            }
            _ => {
                if common.len() > word.len() {
                    self.text = format!("{head}{common}");
                }
                self.offered = fits;
            }
        }
    }

    /// Draws it.
    pub fn render(&self, f: &mut Frame<'_>, area: Rect, ctx: &ViewCtx<'_>) {
        let t = ctx.theme;
        let target = ctx
            .app
            .selected_deployment()
            .map(|d| format!("on {}", d.id))
            .or_else(|| {
                ctx.app
                    .selected_app()
                    .map(|a| format!("on {}/{}", a.application, a.environment))
            })
            .unwrap_or_else(|| "nothing selected".to_owned());
        let mut lines = vec![Line::from(vec![
            Span::raw(":"),
            Span::styled(format!("{}_", self.text), t.get("selection")),
        ])];
        if self.offered.is_empty() {
            let first = self.text.split_whitespace().next().unwrap_or_default();
            let shown: Vec<String> = VERBS
                .iter()
                .filter(|(v, _, _)| v.starts_with(first))
                .map(|(v, args, _)| {
                    if args.is_empty() {
                        (*v).to_owned()
                    } else {
                        format!("{v} {args}")
                    }
                })
                .collect();
            lines.push(Line::from(Span::styled(shown.join(" · "), t.get("muted"))));
        } else {
            lines.push(Line::from(self.offered.join("  ")));
        }
        lines.push(Line::from(Span::styled(
            format!(
                "{target} · Tab completes · ↑↓ earlier lines · Enter runs (it asks first) · Esc"
            ),
            t.get("muted"),
        )));
        frame(f, area, " Command ", lines, (90, "border_focus"), ctx);
    }
}

/// What can follow `verb`: the deployment's targets, the application's versions, weights.
fn arguments(verb: &str, app: &App) -> Vec<String> {
    match verb {
        "skip" | "retry" => app
            .deployment()
            .or_else(|| app.selected_deployment())
            .map(|d| d.targets.iter().map(|t| t.name.clone()).collect())
            .unwrap_or_default(),
        "deploy" => app
            .selected_app()
            .map(|a| {
                let mut v = vec![a.version.clone()];
                v.extend(a.versions.iter().filter(|x| **x != a.version).cloned());
                v
            })
            .unwrap_or_default(),
        "promote" => vec!["--full".to_owned()],
        "weight" => (0..=100).step_by(5).map(|w| w.to_string()).collect(),
        _ => Vec::new(),
    }
}

fn common_prefix(words: &[String]) -> String {
    let Some(first) = words.first() else {
        return String::new();
    };
    let mut end = first.len();
    for w in &words[1..] {
        end = end.min(
            first
                .char_indices()
                .zip(w.chars())
                .take_while(|((_, a), b)| a == b)
                .last()
                .map_or(0, |((i, a), _)| i + a.len_utf8()),
        );
    }
    first[..end].to_owned()
}

/// Parses a command line.
pub fn parse(line: &str) -> Result<Verb, String> {
    let mut words = line.split_whitespace();
    let verb = words.next().unwrap_or_default();
    let rest: Vec<String> = words.map(str::to_owned).collect();
    let none = |v: Verb| {
        if rest.is_empty() {
            Ok(v)
        } else {
            Err(format!(
                "`{verb}` takes no argument (got `{}`)",
                rest.join(" ")
            ))
        }
    };
    match verb {
        "deploy" => match rest.as_slice() {
            [] => Ok(Verb::Deploy(None)),
            [v] => Ok(Verb::Deploy(Some(v.clone()))),
            _ => Err("`deploy` takes one version at most".into()),
        },
        "dry-run" | "dryrun" => none(Verb::DryRun),
        "plan" => none(Verb::Plan),
        "rollback" => none(Verb::Rollback),
        "test" => none(Verb::Test),
        "cancel" => none(Verb::Cancel),
        "pause" => none(Verb::Pause),
        "resume" => none(Verb::Resume),
        "retry" => Ok(Verb::Retry(rest)),
        "skip" => match rest.as_slice() {
            [t] => Ok(Verb::Skip(t.clone())),
            _ => Err("`skip` takes the target to leave out: `skip web-07` (Tab completes)".into()),
        },
        "abort" => none(Verb::Abort),
        "promote" => match rest.as_slice() {
            [] => Ok(Verb::Promote { full: false }),
            [f] if f == "--full" => Ok(Verb::Promote { full: true }),
            _ => Err("`promote` takes only --full".into()),
        },
        "revert" => none(Verb::Revert),
        "weight" => match rest.as_slice() {
            [n] => match n.trim_end_matches('%').parse::<u32>() {
                Ok(w) if w <= 100 => Ok(Verb::Weight(w)),
                _ => Err(format!(
                    "`weight` takes a percentage from 0 to 100, not `{n}`"
                )),
            },
            _ => Err("`weight` takes the candidate's percentage: `weight 30`".into()),
        },
        "back" => none(Verb::Back),
        "abandon" => none(Verb::Abandon),
        "logs" => none(Verb::Logs),
        "status" | "show" => none(Verb::Status),
        "inbox" => none(Verb::Inbox),
        "messages" => none(Verb::Messages),
        "help" => none(Verb::Help),
        "quit" | "q" => none(Verb::Quit),
        "history" | "lock" | "unlock" | "db" | "plugins" | "validate" | "worker" | "console"
        | "demo" => Err(format!(
            "`{verb}` runs in a shell, not in the console: `manent {verb} …` (the home screen \
             shows the journal and the locks)"
        )),
        other => {
            let near: Vec<&str> = VERBS
                .iter()
                .map(|(v, _, _)| *v)
                .filter(|v| strsim::levenshtein(v, other) <= 2)
                .collect();
            let hint = if near.is_empty() {
                "Tab lists the verbs".to_owned()
            } else {
                format!("did you mean {}?", near.join(" or "))
            };
            Err(format!("no verb `{other}`: {hint}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_parse_with_their_arguments_and_bad_input_says_why() {
        assert_eq!(parse("weight 30"), Ok(Verb::Weight(30)));
        assert_eq!(parse("weight 30%"), Ok(Verb::Weight(30)));
        assert!(parse("weight 130").unwrap_err().contains("0 to 100"));
        assert_eq!(parse("promote --full"), Ok(Verb::Promote { full: true }));
        assert_eq!(parse("skip web-07"), Ok(Verb::Skip("web-07".into())));
        assert_eq!(
            parse("retry web-01 web-02"),
            Ok(Verb::Retry(vec!["web-01".into(), "web-02".into()]))
        );
        assert!(
            parse("promot")
                .unwrap_err()
                .contains("did you mean promote?")
        );
        assert!(parse("lock").unwrap_err().contains("manent lock"));
        assert!(
            parse("revert now")
                .unwrap_err()
                .contains("takes no argument")
        );
    }

    #[test]
    fn common_prefixes_complete_as_far_as_they_are_unique() {
        assert_eq!(
            common_prefix(&["rollback".into(), "resume".into(), "retry".into()]),
            "r"
        );
        assert_eq!(common_prefix(&["retry".into(), "revert".into()]), "re");
        assert_eq!(common_prefix(&["web-01".into()]), "web-01");
    }
}
