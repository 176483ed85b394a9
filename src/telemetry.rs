//! What an on-call team's other tools read from manent (DESIGN §10): Prometheus metrics and
//! the JSON log file.

pub mod logfile;
pub mod metrics;
