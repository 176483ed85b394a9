//! Plugins compiled into manent: `exec` (templated commands), `remote-copy` (Capistrano-style
//! releases, also built as an external binary) and `simulate` (a simulated fleet for the demo
//! and the benchmarks).

pub mod exec;
pub mod remote_copy;
pub mod simulate;

use super::contract::Factory;

/// `s` in single quotes for `sh`, whatever it holds.
pub(crate) fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Names of the built-in plugins; `plugins:` entries may not reuse them for external plugins.
pub const NAMES: &[&str] = &["exec", "remote-copy", "simulate"];

/// The factory of built-in `name`.
pub fn factory(name: &str) -> Option<Factory> {
    match name {
        "exec" => Some(exec::factory),
        "remote-copy" => Some(remote_copy::factory),
        "simulate" => Some(simulate::factory),
        _ => None,
    }
}
