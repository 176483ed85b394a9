//! Keys to actions, by mode, as the console's one key table (`app::keys::BINDINGS`) says. Key
//! repeat is dropped here, so a held key can never confirm a dialog; dialogs take their keys
//! before the screen does.

pub use super::action::Mode;
pub use super::app::keys::action;
