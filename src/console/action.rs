//! What the operator (or the world) asks the console to do: intents as data, produced by the
//! key table (`app::keys`) and by the event loop, consumed by `App::update`; and the modes that
//! decide what a key means.

use std::sync::Arc;

use crate::engine::handle::Snapshot;
use crate::plugin::LogLine;

/// One intent.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Move up (a row, or a line of log when the log pane has focus).
    Up,
    /// Move down.
    Down,
    /// A page up.
    PageUp,
    /// A page down.
    PageDown,
    /// To the first row / the oldest log line.
    Top,
    /// To the last row / follow the newest log line.
    Bottom,
    /// Focus the next panel.
    NextPanel,
    /// Focus the previous panel (`Shift-Tab`).
    PrevPanel,
    /// `←`: in the canary panel, the pending weight down a slider step; elsewhere the previous
    /// panel.
    Left,
    /// `→`: in the canary panel, the pending weight up a slider step; elsewhere the next panel.
    Right,
    /// Open what is selected.
    Open,
    /// Back: drops what is pending, a message, the zoom or the filter first, then leaves.
    Back,
    /// The help overlay.
    Help,
    /// The engine's own log (warnings, errors), captured while the console is up.
    EngineLog,
    /// Every message this console showed, and the engine's warnings and errors, in full.
    Messages,
    /// Leave the console.
    Quit,
    /// Deploy the selected application and environment.
    Deploy,
    /// Ask the plugin what a deploy would do.
    DryRun,
    /// Roll the selected environment back.
    Rollback,
    /// Cancel the selected deployment.
    Cancel,
    /// Pause or resume the selected deployment.
    PauseResume,
    /// Run the failed targets again (a canary whose router failed: the router call).
    Retry,
    /// Leave the selected target out.
    Skip,
    /// Stop and roll back what the deployment changed.
    Abort,
    /// Promote the canary.
    Promote,
    /// Revert the canary.
    Revert,
    /// Promote the canary now, skipping its remaining steps.
    PromoteFull,
    /// Back to the canary's previous step's weight.
    StepBack,
    /// A canary whose router failed: end it where its traffic is, with a reason.
    Abandon,
    /// Run the test hooks.
    TestHooks,
    /// Filter the focused list or the log pane (`/`).
    Search,
    /// Next log level filter.
    CycleLevel,
    /// Show only the selected target's log lines (again: all).
    FilterTarget,
    /// The focused pane takes the whole screen (again: back).
    Zoom,
    /// Log lines wrap in full (again: cut to the pane).
    Wrap,
    /// Copy the selection (an id, a name, the newest log line) to the clipboard (`y`).
    Yank,
    /// The log pane: to the next newer warning or error (`n`).
    NextProblem,
    /// The log pane: to the next older warning or error (`N`).
    PrevProblem,
    /// The command line (`:`): a headless verb on the selected deployment.
    CommandLine,
    /// Complete the word being typed (`Tab` on the command line).
    Complete,
    /// Clear the terminal and draw everything again (`Ctrl-L`).
    Redraw,
    /// A typed character (prompts, confirmations).
    Input(char),
    /// Delete the last typed character.
    Backspace,
    /// Clear what was typed (`Ctrl-U`).
    ClearInput,
    /// Move between `[Cancel]` and `[Confirm]`.
    ChoiceToggle,
    /// Enter in a dialog.
    Submit,
    /// Esc in a dialog.
    Dismiss,
    /// Time passes (epoch ms).
    Tick(i64),
    /// The terminal's size (columns, rows), at start and on every resize.
    Resize(u16, u16),
    /// A new snapshot from the engine.
    Snapshot(Arc<Snapshot>),
    /// A log line.
    Log(std::sync::Arc<LogLine>),
    /// Log lines the console could not keep up with.
    LogsDropped(u64),
    /// A deployment's log lines from before the console opened, oldest first.
    LogHistory(String, Arc<Vec<LogLine>>),
}

/// What has the keyboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A screen, no dialog.
    Normal,
    /// The help overlay.
    Help,
    /// A confirmation: `[Cancel]` / `[Confirm]`, and a reason to type.
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
