//! Verbs that only read: validate, plan, status, history, logs, inbox, plugins — one file each.
//! None starts a plugin process or an engine.

mod history;
mod inbox;
mod logs;
mod plan;
mod plugins;
mod status;
mod validate;

pub use self::history::history;
pub use self::inbox::inbox;
pub use self::logs::logs;
pub use self::plan::plan;
pub use self::plugins::plugins;
pub use self::status::status;
pub use self::validate::validate;

use super::exit;
use super::output::{self, Out};

/// The locks in force, one line each.
pub(super) fn print_locks(locks: &[crate::deploy::records::Lock], out: &mut Out) {
    if locks.is_empty() {
        return;
    }
    out.line("");
    for l in locks {
        let until = l.expires_at.map_or_else(
            || "until unlocked".to_owned(),
            |e| format!("until {}", output::time(e)),
        );
        out.line(format!(
            "locked  {:<22} by {} since {} {until}: {}",
            l.subject,
            l.owner(),
            output::time(l.since),
            l.reason
        ));
    }
}
/// What a read says when there is no database yet: nothing has run with this configuration.
pub(super) fn nothing_yet(
    config: &crate::config::Config,
    id: Option<&str>,
    json: bool,
    out: &mut Out,
) -> u8 {
    let db = output::database_shown(config);
    if let Some(id) = id {
        out.error(format!(
            "no deployment with id {id}: there is no database at {db} yet (nothing has run with \
             this configuration; is --config right?)"
        ));
        return exit::BAD_INPUT;
    }
    if json {
        out.json(&Vec::<()>::new());
    } else {
        out.line(format!("no deployments yet (no database at {db})"));
    }
    exit::OK
}
