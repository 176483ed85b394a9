//! What an on-call team's other tools read from manent (design/architecture.md "Observability"): Prometheus metrics and
//! the JSON log file.

pub mod logfile;
pub mod metrics;
