//! Trust in a configuration, as git's `safe.directory` and OpenSSH's StrictModes have it: a
//! `manent.yml` or application file says what the engine runs, as this user, and where its
//! secrets go (a database URL's password, a webhook's token), so it is obeyed only when no
//! one else could have written it. The file must be this user's or root's and writable by no
//! one else — not even a declared `engine.shared_group`, whose members could otherwise change
//! what the engine runs (its owner's private group aside) — and so
//! must every directory above it, as written and after its links (a world-writable directory
//! only with the sticky bit, as `/tmp`; a group-writable one only for the owner's private
//! group, as a umask of 002 makes); a symbolic link on the way must be this user's or root's. Otherwise every verb refuses before a secret is read or a database opened, naming
//! the file, its owner and mode, and the fix. Nothing is repaired.
//!
//! A reviewed shared setup is trusted by naming it: `MANENT_TRUSTED_CONFIG` lists the files
//! or directories (colon-separated, as written or resolved) whose ownership is accepted as it
//! is; each use says so on stderr.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::ConfigError;
use crate::sys::account;
use crate::sys::files::shell_word;

/// The variable that names configurations trusted whoever owns them.
pub const TRUSTED: &str = "MANENT_TRUSTED_CONFIG";

const GROUP_WRITE: u32 = 0o020;
const OTHER_WRITE: u32 = 0o002;

/// Checks configuration file `path` (`meta`: what was read, from its descriptor) and the
/// directories above it.
pub fn check(path: &Path, meta: &std::fs::Metadata) -> Result<(), ConfigError> {
    if let Some(named) = trusted_by_name(path) {
        if let Err(e) = untrusted(path, meta) {
            // Once per file and process: a console reads its files again.
            static SAID: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
            let first = SAID
                .lock()
                .map(|mut s| {
                    let new = !s.contains(&path.to_path_buf());
                    if new {
                        s.push(path.to_path_buf());
                    }
                    new
                })
                .unwrap_or(true);
            if first {
                tracing::warn!(
                    "trusting {} as {TRUSTED} names it ({}), though {}",
                    path.display(),
                    named.display(),
                    e.message
                );
            }
        }
        return Ok(());
    }
    untrusted(path, meta)
}

/// The entry of [`TRUSTED`] that covers `path`, if one does.
fn trusted_by_name(path: &Path) -> Option<PathBuf> {
    let list = std::env::var_os(TRUSTED)?;
    let written = std::path::absolute(path).ok()?;
    let real = std::fs::canonicalize(path).ok();
    std::env::split_paths(&list)
        .filter(|p| p.is_absolute())
        .find(|p| {
            let plain = !written
                .components()
                .any(|c| c == std::path::Component::ParentDir);
            (plain && written.starts_with(p))
                || real.as_ref().is_some_and(|r| {
                    r.starts_with(p) || std::fs::canonicalize(p).is_ok_and(|c| r.starts_with(c))
                })
        })
}

fn untrusted(path: &Path, meta: &std::fs::Metadata) -> Result<(), ConfigError> {
    let me = crate::sys::euid();
    let mode = meta.mode() & 0o7777;
    let group_ok = |gid: u32| account::private_group(meta.uid(), gid);
    let owner_ok = |uid: u32| uid == me || uid == 0;
    if !owner_ok(meta.uid())
        || mode & OTHER_WRITE != 0
        || (mode & GROUP_WRITE != 0 && !group_ok(meta.gid()))
    {
        return Err(refused(path, path, meta, "it", me));
    }
    // The directories above it, as written (a link on the way is someone's too) and as they
    // resolve.
    match crate::sys::files::unsafe_ancestor(path, me, None, false) {
        Some((at, m, true)) => Err(refused(path, &at, &m, "a link above it", me)),
        Some((at, m, false)) => Err(refused(path, &at, &m, "a directory above it", me)),
        None => Ok(()),
    }
}

fn refused(file: &Path, at: &Path, meta: &std::fs::Metadata, which: &str, me: u32) -> ConfigError {
    let mode = meta.mode() & 0o7777;
    let whose = if me == 0 {
        "root's".to_owned()
    } else {
        format!("{}'s or root's", account::user_shown(me))
    };
    let subject = if which == "it" {
        String::new()
    } else {
        format!("{which}, {}, is ", at.display())
    };
    let mut fix = Vec::new();
    if ![0, me].contains(&meta.uid()) {
        fix.push(format!(
            "chown {} {}",
            account::user_by_id(me).map_or_else(|| me.to_string(), |u| u.name),
            shell_word(at)
        ));
    }
    if mode & (GROUP_WRITE | OTHER_WRITE) != 0 {
        fix.push(format!("chmod go-w {}", shell_word(at)));
    }
    let fix = if fix.is_empty() {
        String::new()
    } else {
        format!(
            "if you did not make it so, find out who did; if it is yours: `{}`; ",
            fix.join(" && ")
        )
    };
    ConfigError::file(
        file,
        format!(
            "not trusted: {subject}owned by {}, group {}, mode {mode:04o}; a configuration says \
             what manent runs as {} and where its secrets go, so only {whose} files are obeyed, \
             in directories no one else can write",
            account::user_shown(meta.uid()),
            account::group_shown(meta.gid()),
            account::user_shown(me),
        ),
    )
    .with_hint(format!(
        "{fix}a shared setup you reviewed: {TRUSTED}={}",
        shell_word(at)
    ))
}
