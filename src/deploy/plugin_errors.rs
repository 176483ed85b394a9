//! Where the plugin contract meets the durable engine: a plugin's error becomes a step's error
//! (`Permanent` and `Unimplemented` are never retried).

use crate::plugin::PluginError;
use crate::workflow::StepError;

impl From<PluginError> for StepError {
    fn from(e: PluginError) -> Self {
        if e.is_permanent() {
            StepError::Permanent(e.to_string())
        } else {
            StepError::Retryable(e.to_string())
        }
    }
}
