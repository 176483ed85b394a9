//! What the operator (or the world) asks the console to do: intents as data, produced by the
//! keymap and by the event loop, consumed by `App::update`.

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
    /// `←`: on a canary, the pending weight down a slider step; elsewhere the previous panel.
    Left,
    /// `→`: on a canary, the pending weight up a slider step; elsewhere the next panel.
    Right,
    /// Open what is selected.
    Open,
    /// Back to the list.
    Back,
    /// The help overlay.
    Help,
    /// The engine's own log (warnings, errors), captured while the console is up.
    EngineLog,
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
    /// Run the failed targets again.
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
    /// Run the test hooks.
    TestHooks,
    /// Filter the log pane (`/`).
    Search,
    /// Next log level filter.
    CycleLevel,
    /// Show only the selected target's log lines (again: all).
    FilterTarget,
    /// A typed character (prompts, confirmations).
    Input(char),
    /// Delete the last typed character.
    Backspace,
    /// Clear what was typed (`Ctrl-U`).
    ClearInput,
    /// Move between [Cancel] and [Confirm].
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
