//! The console (feature `tui`): a terminal UI over the engine handle. The engine never knows it
//! exists; this module reads `Snapshot`s and `LogLine`s and sends `Command`s.

pub mod action;
pub mod app;
pub mod keymap;
pub mod layout;
pub mod logpane;
pub mod run;
pub mod scroll;
pub mod session;
pub mod term;
pub mod theme;
pub mod view;
pub mod widgets;
