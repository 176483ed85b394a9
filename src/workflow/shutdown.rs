//! How far the engine's shutdown has got: what a run and a store retry watch (design/durable-workflows.md B.11).

/// How far the engine's shutdown has got (design/durable-workflows.md B.11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Normal operation.
    Running,
    /// Waiting for runs to finish or park; parked runs leave now (a console whose terminal
    /// went away keeps its deployments going this way).
    Draining,
    /// Asked to stop (SIGTERM, Ctrl-C): no step or attempt starts; the steps in flight finish,
    /// parked runs leave now, and each run resumes at the next start.
    Stopping,
    /// Drain timed out: runs stop at their next step boundary.
    Hard,
}
