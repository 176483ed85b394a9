//! How a plugin call fails: retryable by default, `Permanent` when a retry would fail the same
//! way (gRPC `ABORTED` on the wire), `Unimplemented` for an optional call a plugin lacks.

/// A failed plugin call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    /// May succeed if tried again (a flaky host, a timeout).
    #[error("{0}")]
    Failed(String),
    /// Will fail the same way every time: the step fails at once, without retries.
    #[error("{0}")]
    Permanent(String),
    /// The plugin does not implement this optional call.
    #[error("{0}")]
    Unimplemented(String),
}

impl PluginError {
    /// A retryable failure.
    pub fn failed(msg: impl std::fmt::Display) -> Self {
        PluginError::Failed(msg.to_string())
    }

    /// True when retrying cannot help.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            PluginError::Permanent(_) | PluginError::Unimplemented(_)
        )
    }

    /// Prefixes the message with context, keeping the kind.
    pub fn context(self, what: impl std::fmt::Display) -> Self {
        match self {
            PluginError::Failed(m) => PluginError::Failed(format!("{what}: {m}")),
            PluginError::Permanent(m) => PluginError::Permanent(format!("{what}: {m}")),
            PluginError::Unimplemented(m) => PluginError::Unimplemented(format!("{what}: {m}")),
        }
    }
}

/// Marks an error as permanent: the step fails at once and is not retried (the Go
/// SDK's `plugin.Permanent(err)`: design/plugin-contract.md "Errors").
#[allow(
    non_snake_case,
    reason = "the contract's name for it, as in the Go SDK"
)]
pub fn Permanent(err: impl std::fmt::Display) -> PluginError {
    PluginError::Permanent(err.to_string())
}
