//! The deploy workflows, each a flow over one [`Run`](super::run::Run): a deploy or dry-run
//! ([`deploy`]), a rollback ([`rollback`]), a canary ([`canary`]) and a run of the `test`
//! hooks ([`test`]). A canary passes the run the commands it takes where it is; the others
//! take the run's own ([`Run::batch_commands`](super::run::Run::batch_commands)).

pub mod canary;
pub mod deploy;
pub mod rollback;
pub mod test;
