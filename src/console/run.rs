//! The console's event loop and terminal lifecycle. Input first (`biased`), so keys stay
//! responsive while logs flood; a frame is drawn only when something changed, at most five times a
//! second for engine updates and at once for keys, within what the terminal can show
//! ([`Caps`]); the screen is cleared whole at start and on `Ctrl-L` (a reconnected ssh session
//! may hold another screen's remains); the terminal is restored on every exit path and on
//! panic.

use std::io;
use std::time::{Duration, Instant};

use crossterm::event::{Event, EventStream};
use futures::{Stream, StreamExt};
use ratatui::Terminal;
use ratatui::backend::Backend;
use tokio::sync::broadcast::error::RecvError;

use super::action::Action;
use super::app::App;
use super::keymap;
use super::term::Caps;
use super::theme::Theme;
use super::view;
use crate::engine::handle::EngineHandle;

/// Engine updates redraw at most this often; keys redraw at once.
pub const FRAME: Duration = Duration::from_millis(200);

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The operator quit.
    Quit,
    /// The terminal went away (hangup, closed input, a write it refused).
    Hangup,
    /// SIGTERM or SIGINT: asked to stop.
    Terminated,
    /// The engine ended.
    EngineGone,
}

/// Runs the console on `terminal` with input from `events` until it ends.
pub async fn run<B, S>(
    terminal: &mut Terminal<B>,
    mut events: S,
    handle: &EngineHandle,
    app: &mut App,
    (theme, caps): (&Theme, Caps),
    signals: impl std::future::Future<Output = Exit>,
) -> Exit
where
    B: Backend + io::Write,
    B::Error: Into<io::Error>,
    S: Stream<Item = io::Result<Event>> + Unpin,
{
    let mut snapshots = handle.snapshot.clone();
    let mut logs = handle.logs.subscribe();
    let mut history = handle.history.subscribe();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    tokio::pin!(signals);
    let mut last_draw: Option<Instant> = None;
    let mut keyed = true;
    // Drawn at once, not at the next frame: the first snapshot (the screen says "reading…"
    // until then), and the first after a key sent the engine a command (its answer).
    let mut awaited = true;
    if let Ok(size) = terminal.size() {
        app.update(Action::Resize(size.width, size.height));
    }
    // The first frame starts from a clean screen.
    app.ui.redraw = true;
    loop {
        if app.ui.redraw {
            // Whatever another program (or a dropped session) left on the terminal goes.
            if let Err(e) = terminal.clear() {
                return gone(e.into());
            }
            app.ui.redraw = false;
            app.ui.dirty = true;
        }
        if app.ui.dirty && (keyed || last_draw.is_none_or(|t| t.elapsed() >= FRAME)) {
            if let Err(e) = terminal.draw(|f| {
                view::render(f, app, theme);
                caps.apply(f.buffer_mut());
            }) {
                return gone(e.into());
            }
            app.ui.dirty = false;
            last_draw = Some(Instant::now());
        }
        // `y`: the terminal sets its clipboard (OSC 52; over ssh, and through tmux with
        // `set-clipboard on`).
        if let Some(text) = app.ui.clipboard.take()
            && let Err(e) = clipboard(terminal, &text)
        {
            return gone(e);
        }
        keyed = false;
        if app.ui.should_quit {
            return Exit::Quit;
        }
        tokio::select! {
            biased;
            ev = events.next() => match ev {
                Some(Ok(Event::Key(key))) => {
                    keyed = true;
                    app.update(Action::Tick(crate::sys::now_ms()));
                    if let Some(action) = keymap::action(app.mode(), key)
                        && let Some(cmd) = app.update(action)
                    {
                        // The engine never blocks the console: a full queue loses the command,
                        // and the operator is told so and presses again.
                        match handle.commands.try_send(cmd) {
                            Ok(()) => awaited = true,
                            Err(_) => app.not_sent(),
                        }
                    }
                }
                Some(Ok(Event::Resize(w, h))) => { app.update(Action::Resize(w, h)); keyed = true; }
                // The wheel is ↑/↓ three times over what has the keyboard (a dialog's page too).
                Some(Ok(Event::Mouse(m))) => {
                    let code = match m.kind {
                        crossterm::event::MouseEventKind::ScrollUp => Some(crossterm::event::KeyCode::Up),
                        crossterm::event::MouseEventKind::ScrollDown => Some(crossterm::event::KeyCode::Down),
                        _ => None,
                    };
                    if let Some(code) = code {
                        let key = crossterm::event::KeyEvent::new(code, crossterm::event::KeyModifiers::NONE);
                        for _ in 0..3 {
                            if let Some(action) = keymap::action(app.mode(), key) {
                                app.update(action);
                            }
                        }
                        keyed = true;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return Exit::Hangup,
            },
            exit = &mut signals => return exit,
            changed = snapshots.changed() => {
                if changed.is_err() {
                    return Exit::EngineGone;
                }
                let snap = snapshots.borrow_and_update().clone();
                keyed |= std::mem::take(&mut awaited);
                // A snapshot may open a deployment (the one just started), which asks for its
                // earlier log lines.
                if let Some(cmd) = app.update(Action::Snapshot(snap)) {
                    let _ = handle.commands.try_send(cmd);
                }
            }
            line = logs.recv() => match line {
                Ok(l) => {
                    app.update(Action::Log(l));
                    // Drain what is queued: one redraw for a burst.
                    while let Ok(l) = logs.try_recv() {
                        app.update(Action::Log(l));
                    }
                }
                Err(RecvError::Lagged(n)) => {
                    crate::telemetry::metrics::get().log_lines_dropped("subscriber", n);
                    app.update(Action::LogsDropped(n));
                }
                Err(RecvError::Closed) => return Exit::EngineGone,
            },
            h = history.recv() => if let Ok((id, lines)) = h {
                app.update(Action::LogHistory(id, lines));
            },
            // An update held back by the frame rate is drawn when its frame comes.
            () = frame_after(last_draw), if app.ui.dirty => {}
            _ = tick.tick() => { app.update(Action::Tick(crate::sys::now_ms())); }
        }
    }
}

/// Asks the terminal to put `text` on its clipboard: OSC 52, the text in base64.
fn clipboard<B: Backend + io::Write>(terminal: &mut Terminal<B>, text: &str) -> io::Result<()> {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(text);
    let out = terminal.backend_mut();
    io::Write::write_all(out, format!("\x1b]52;c;{encoded}\x07").as_bytes())?;
    io::Write::flush(out)
}

/// A write the terminal refused: a hung-up terminal often says so here before its hangup
/// signal or closed input arrives, and nothing can be shown on it any more, so it ends the
/// loop as a hangup (deployments go on headless), never as a failure that stops them.
fn gone(e: io::Error) -> Exit {
    tracing::warn!(error = %e, "the terminal refused a write; going on without it (as after a hangup)");
    Exit::Hangup
}

/// The console's terminal: stdout, colours said as the terminal reads them.
pub type Term = Terminal<ratatui::backend::CrosstermBackend<super::term::Out<io::Stdout>>>;

/// Raw mode and (unless `alt_screen` is off) the alternate screen, restored on panic too.
/// (ratatui's own helpers print with `eprintln!`, which panics when the terminal has hung up.)
pub fn init(alt_screen: bool, caps: Caps) -> io::Result<Term> {
    ALT_SCREEN.store(alt_screen, std::sync::atomic::Ordering::SeqCst);
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
    crossterm::terminal::enable_raw_mode()?;
    if alt_screen {
        crossterm::execute!(io::stdout(), crossterm::terminal::EnterAlternateScreen)?;
    }
    // The wheel scrolls the focused pane (k9s); text is selected with Shift held, as in
    // every terminal program that takes the mouse.
    crossterm::execute!(io::stdout(), crossterm::event::EnableMouseCapture)?;
    let out = super::term::Out::new(io::stdout(), caps);
    Terminal::new(ratatui::backend::CrosstermBackend::new(out))
}

/// Whether the console entered the alternate screen (restore leaves it, or clears the main one).
static ALT_SCREEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Leaves raw mode and the alternate screen (without one, clears what the console drew);
/// quietly does nothing on a terminal that is gone.
pub fn restore() {
    let _ = crossterm::execute!(io::stdout(), crossterm::event::DisableMouseCapture);
    let _ = crossterm::terminal::disable_raw_mode();
    if ALT_SCREEN.load(std::sync::atomic::Ordering::SeqCst) {
        let _ = crossterm::execute!(
            io::stdout(),
            crossterm::terminal::LeaveAlternateScreen,
            crossterm::cursor::Show
        );
    } else {
        let _ = crossterm::execute!(
            io::stdout(),
            crossterm::terminal::Clear(crossterm::terminal::ClearType::All),
            crossterm::cursor::MoveTo(0, 0),
            crossterm::cursor::Show
        );
    }
}

/// After a hangup: stdin, stdout and stderr point at `/dev/null`, so nothing that runs on
/// headless (or any library's last message) fails writing to a terminal that is gone.
pub fn detach_from_terminal() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        let _ = rustix::stdio::dup2_stdin(&null);
        let _ = rustix::stdio::dup2_stdout(&null);
        let _ = rustix::stdio::dup2_stderr(&null);
    }
}

/// Restores the terminal when dropped, whatever path leaves the console.
pub struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// The real terminal's input.
pub fn input() -> EventStream {
    EventStream::new()
}

/// Resolves when a frame may be drawn after one drawn at `last`.
async fn frame_after(last: Option<Instant>) {
    if let Some(t) = last {
        tokio::time::sleep_until(tokio::time::Instant::from_std(t + FRAME)).await;
    }
}
