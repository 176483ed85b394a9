//! What manent-plugin-{{name}} does. Each call says "not implemented" until you write it: a
//! Permanent error fails the step at once (a retry cannot help); any other error is retried.
//! Optional calls (dry run, current release, rollback, canary slots and routing) are offered by
//! implementing their trait and returning `Some(self)` from the matching accessor of
//! `Deployer` (see `manent::plugin::contract`).

use std::sync::Arc;

use async_trait::async_trait;
use manent::plugin::{DeployResult, Deployer, Logger, Permanent, PluginError, Request};

/// The plugin, as configured from its options in manent.yml.
pub struct {{type}} {
    log: Logger,
}

/// Called at every start with the plugin's options (`plugins: {{name}}: options:`) and the
/// logger manent shows in its log pane (hclog JSON on stderr).
pub fn factory(options: &serde_json::Value, log: Logger) -> Result<Arc<dyn Deployer>, PluginError> {
    let _ = options;
    Ok(Arc::new({{type}} { log }))
}

#[async_trait]
impl Deployer for {{type}} {
    /// Checks a request before any target is touched (no secrets, 30 s at most).
    async fn validate(&self, req: &Request) -> Result<(), PluginError> {
        if req.params.get("delay_ms").is_some_and(|v| !v.is_u64()) {
            return Err(Permanent("params.delay_ms: a number of milliseconds"));
        }
        self.log.debug(&format!("validate {} {}", req.application, req.artifact.version));
        Ok(())
    }

    /// Deploys `req.artifact` to `req.targets`; the same `req.idempotency_key` may come again
    /// after a crash, and must then find the work done (answer `TargetStatus::Unchanged`).
    /// Lines logged during a call name its deployment, so `manent logs` shows them.
    async fn deploy(&self, req: &Request) -> Result<DeployResult, PluginError> {
        self.log.info(&format!("deploy {} to {} targets", req.artifact.version, req.targets.len()));
        // `delay_ms` (the kit file's `slow:`) waits before the work. A cancelled call is
        // dropped at an await: never block the task (std::thread::sleep, blocking I/O).
        let delay = req.params.get("delay_ms").and_then(serde_json::Value::as_u64);
        tokio::time::sleep(std::time::Duration::from_millis(delay.unwrap_or(0))).await;
        Err(Permanent("{{name}}: deploy is not implemented yet"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_factory_builds_the_plugin() {
        assert!(factory(&serde_json::json!({}), Logger::discard()).is_ok());
    }
}
