//! Keys to actions, by mode. Key repeat is dropped here, so a held key can never confirm a
//! dialog; dialogs take their keys before the screen does.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::action::Action;

/// What has the keyboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A screen, no dialog.
    Normal,
    /// The help overlay.
    Help,
    /// A confirmation: [Cancel] / [Confirm], and a reason to type.
    Confirm,
    /// A confirmation that needs the environment's name typed.
    TypedConfirm,
    /// A text prompt.
    Prompt,
    /// The command line (`:`): a prompt with completion and history.
    Command,
    /// The plan of an application's environment.
    Plan,
    /// A list to pick from (the version picker), or a scrollable page (a target's detail).
    List,
}

/// The action for `key` in `mode`, if any.
pub fn action(mode: Mode, key: KeyEvent) -> Option<Action> {
    if key.kind != KeyEventKind::Press {
        return None;
    }
    if key.modifiers.contains(KeyModifiers::CONTROL) {
        // Control keys never type a letter: Ctrl-U clears a prompt, as in a shell; Ctrl-L
        // redraws the whole screen everywhere, as in a shell.
        return match key.code {
            KeyCode::Char('l') => Some(Action::Redraw),
            KeyCode::Char('c') if mode == Mode::Normal => Some(Action::Quit),
            KeyCode::Char('c') => Some(Action::Dismiss),
            KeyCode::Char('u') if typing(mode) => Some(Action::ClearInput),
            KeyCode::Char('d') => Some(Action::PageDown),
            KeyCode::Char('b') => Some(Action::PageUp),
            _ => None,
        };
    }
    match mode {
        Mode::Help => match key.code {
            KeyCode::Esc | KeyCode::Enter | KeyCode::Char('?' | 'q' | 'E' | 'M') => {
                Some(Action::Dismiss)
            }
            KeyCode::Up | KeyCode::Char('k') => Some(Action::Up),
            KeyCode::Down | KeyCode::Char('j') => Some(Action::Down),
            KeyCode::PageUp => Some(Action::PageUp),
            KeyCode::PageDown | KeyCode::Char(' ') => Some(Action::PageDown),
            KeyCode::Home | KeyCode::Char('g') => Some(Action::Top),
            KeyCode::End | KeyCode::Char('G') => Some(Action::Bottom),
            _ => None,
        },
        Mode::List => match key.code {
            KeyCode::Esc | KeyCode::Char('q') => Some(Action::Dismiss),
            KeyCode::Enter => Some(Action::Submit),
            KeyCode::Up | KeyCode::Char('k') => Some(Action::Up),
            KeyCode::Down | KeyCode::Char('j') => Some(Action::Down),
            KeyCode::PageUp => Some(Action::PageUp),
            KeyCode::PageDown => Some(Action::PageDown),
            KeyCode::Home | KeyCode::Char('g') => Some(Action::Top),
            KeyCode::End | KeyCode::Char('G') => Some(Action::Bottom),
            KeyCode::Char('r') => Some(Action::Retry),
            KeyCode::Char('s') => Some(Action::Skip),
            KeyCode::Char('f') => Some(Action::FilterTarget),
            _ => None,
        },
        Mode::Confirm => match key.code {
            KeyCode::Left | KeyCode::Right | KeyCode::Tab | KeyCode::BackTab => {
                Some(Action::ChoiceToggle)
            }
            KeyCode::Enter => Some(Action::Submit),
            KeyCode::Esc => Some(Action::Dismiss),
            KeyCode::Backspace => Some(Action::Backspace),
            KeyCode::Char(c) => Some(Action::Input(c)),
            _ => None,
        },
        Mode::Command => match key.code {
            KeyCode::Enter => Some(Action::Submit),
            KeyCode::Esc => Some(Action::Dismiss),
            KeyCode::Backspace => Some(Action::Backspace),
            KeyCode::Tab => Some(Action::Complete),
            KeyCode::Up => Some(Action::Up),
            KeyCode::Down => Some(Action::Down),
            KeyCode::Char(c) => Some(Action::Input(c)),
            _ => None,
        },
        Mode::TypedConfirm | Mode::Prompt => match key.code {
            // A prompt with a list above it (the version picker) goes back to it.
            KeyCode::Up if mode == Mode::Prompt => Some(Action::Up),
            KeyCode::Enter => Some(Action::Submit),
            KeyCode::Esc => Some(Action::Dismiss),
            KeyCode::Backspace => Some(Action::Backspace),
            KeyCode::Char(c) => Some(Action::Input(c)),
            _ => None,
        },
        Mode::Plan => match key.code {
            KeyCode::Esc | KeyCode::Char('q') => Some(Action::Dismiss),
            KeyCode::Char('D') | KeyCode::Enter => Some(Action::Deploy),
            KeyCode::Char('d') => Some(Action::DryRun),
            KeyCode::Char('R') => Some(Action::Rollback),
            KeyCode::Up | KeyCode::Char('k') => Some(Action::Up),
            KeyCode::Down | KeyCode::Char('j') => Some(Action::Down),
            _ => None,
        },
        Mode::Normal => normal(key.code),
    }
}

fn typing(mode: Mode) -> bool {
    matches!(
        mode,
        Mode::Confirm | Mode::TypedConfirm | Mode::Prompt | Mode::Command
    )
}

fn normal(code: KeyCode) -> Option<Action> {
    Some(match code {
        KeyCode::Char('?') => Action::Help,
        KeyCode::Char('E') => Action::EngineLog,
        KeyCode::Char('M') => Action::Messages,
        KeyCode::Char('z') => Action::Zoom,
        KeyCode::Char(':') => Action::CommandLine,
        KeyCode::Char('X') => Action::Abandon,
        KeyCode::Char('q') => Action::Quit,
        KeyCode::Up | KeyCode::Char('k') => Action::Up,
        KeyCode::Down | KeyCode::Char('j') => Action::Down,
        KeyCode::Left | KeyCode::Char('h') => Action::Left,
        KeyCode::Right | KeyCode::Char('l') => Action::Right,
        KeyCode::PageUp => Action::PageUp,
        KeyCode::PageDown => Action::PageDown,
        KeyCode::Home | KeyCode::Char('g') => Action::Top,
        KeyCode::End | KeyCode::Char('G') => Action::Bottom,
        KeyCode::Tab => Action::NextPanel,
        KeyCode::BackTab => Action::PrevPanel,
        KeyCode::Enter => Action::Open,
        KeyCode::Esc => Action::Back,
        KeyCode::Char('D') => Action::Deploy,
        KeyCode::Char('d') => Action::DryRun,
        KeyCode::Char('R') => Action::Rollback,
        KeyCode::Char('c') => Action::Cancel,
        KeyCode::Char(' ') => Action::PauseResume,
        KeyCode::Char('r') => Action::Retry,
        KeyCode::Char('s') => Action::Skip,
        KeyCode::Char('A') => Action::Abort,
        KeyCode::Char('p') => Action::Promote,
        KeyCode::Char('P') => Action::PromoteFull,
        KeyCode::Char('x') => Action::Revert,
        KeyCode::Char('b') => Action::StepBack,
        KeyCode::Char('t') => Action::TestHooks,
        KeyCode::Char('/') => Action::Search,
        KeyCode::Char('L') => Action::CycleLevel,
        KeyCode::Char('f') => Action::FilterTarget,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn held_keys_and_releases_do_nothing() {
        let mut held = press(KeyCode::Enter);
        held.kind = KeyEventKind::Repeat;
        assert_eq!(action(Mode::Confirm, held), None);
        held.kind = KeyEventKind::Release;
        assert_eq!(action(Mode::Normal, held), None);
    }

    #[test]
    fn dialogs_take_their_keys_first() {
        assert_eq!(
            action(Mode::Confirm, press(KeyCode::Char('q'))),
            Some(Action::Input('q'))
        );
        assert_eq!(
            action(Mode::Normal, press(KeyCode::Char('q'))),
            Some(Action::Quit)
        );
        assert_eq!(
            action(Mode::Confirm, press(KeyCode::Tab)),
            Some(Action::ChoiceToggle)
        );
        assert_eq!(action(Mode::Help, press(KeyCode::Char('D'))), None);
        assert_eq!(
            action(Mode::Plan, press(KeyCode::Enter)),
            Some(Action::Deploy)
        );
        assert_eq!(
            action(
                Mode::Normal,
                KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)
            ),
            Some(Action::Quit)
        );
    }

    #[test]
    fn control_keys_never_type_letters() {
        let ctrl = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL);
        assert_eq!(action(Mode::Prompt, ctrl('u')), Some(Action::ClearInput));
        assert_eq!(
            action(Mode::TypedConfirm, ctrl('u')),
            Some(Action::ClearInput)
        );
        assert_eq!(action(Mode::Confirm, ctrl('w')), None);
        assert_eq!(action(Mode::Normal, ctrl('u')), None);
        assert_eq!(
            action(
                Mode::Normal,
                KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT)
            ),
            Some(Action::PrevPanel)
        );
        for mode in [Mode::Normal, Mode::Confirm, Mode::Command, Mode::Help] {
            assert_eq!(action(mode, ctrl('l')), Some(Action::Redraw), "{mode:?}");
        }
        assert_eq!(
            action(Mode::Command, press(KeyCode::Tab)),
            Some(Action::Complete)
        );
    }
}
