//! Before a plugin binary runs: it must exist, be executable and match its pinned sha256 —
//! checked at activation and again at every start. Undeclared plugins are found as
//! `manent-plugin-<name>` in the plugin directory or on PATH.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::plugin::error::PluginError;

/// The sha256 of a file, hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// What activation found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pin {
    /// The binary matches the pinned sha256.
    Verified,
    /// No sha256 pins it (a warning; the binary is not hashed).
    Unpinned,
}

/// Checks plugin `name`'s binary. A missing, unexecutable or changed binary is a permanent
/// error that says what to do.
pub fn check(name: &str, command: &Path, sha256: Option<&str>) -> Result<Pin, PluginError> {
    let shown = command.display();
    let meta = std::fs::metadata(command).map_err(|e| {
        PluginError::Permanent(format!(
            "plugin {name}: {shown} cannot be used ({e}): build or install it, or fix \
             `external.command` in manent.yml"
        ))
    })?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(PluginError::Permanent(format!(
            "plugin {name}: {shown} is not an executable file: `chmod +x {shown}`"
        )));
    }
    let Some(expected) = sha256 else {
        return Ok(Pin::Unpinned);
    };
    let actual = sha256_file(command)
        .map_err(|e| PluginError::Permanent(format!("plugin {name}: cannot read {shown}: {e}")))?;
    match expected {
        expected if expected.eq_ignore_ascii_case(&actual) => Ok(Pin::Verified),
        expected => Err(PluginError::Permanent(format!(
            "plugin {name}: {shown} has sha256 {actual}, but manent.yml pins {expected}: the \
             binary changed since it was pinned. If the new binary is trusted, put its sha256 \
             (`sha256sum {shown}`) in manent.yml"
        ))),
    }
}

/// `manent-plugin-<name>` in `plugin_dir`, else on PATH.
pub fn discover(name: &str, plugin_dir: Option<&Path>) -> Option<PathBuf> {
    let file = format!("manent-plugin-{name}");
    let path_dirs = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>());
    plugin_dir
        .map(Path::to_owned)
        .into_iter()
        .chain(path_dirs.unwrap_or_default())
        .map(|d| d.join(&file))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The names of the undeclared plugins `discover` would find: every executable
/// `manent-plugin-<name>` in the plugin directory and on PATH.
pub fn discoverable(plugin_dir: Option<&Path>) -> Vec<String> {
    let path_dirs = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>());
    let mut names: Vec<String> = plugin_dir
        .map(Path::to_owned)
        .into_iter()
        .chain(path_dirs.unwrap_or_default())
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|entries| entries.flatten())
        .filter_map(|e| {
            let name = e
                .file_name()
                .to_str()?
                .strip_prefix("manent-plugin-")?
                .to_owned();
            let m = std::fs::metadata(e.path()).ok()?;
            (m.is_file() && m.permissions().mode() & 0o111 != 0 && !name.is_empty()).then_some(name)
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_existence_mode_and_digest() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("p");
        assert!(
            check("p", &bin, None)
                .unwrap_err()
                .to_string()
                .contains("cannot be used")
        );
        std::fs::write(&bin, b"#!/bin/sh\n").unwrap();
        assert!(
            check("p", &bin, None)
                .unwrap_err()
                .to_string()
                .contains("chmod +x")
        );
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let sum = sha256_file(&bin).unwrap();
        assert_eq!(check("p", &bin, Some(&sum)).unwrap(), Pin::Verified);
        assert_eq!(check("p", &bin, None).unwrap(), Pin::Unpinned);
        let err = check("p", &bin, Some(&"0".repeat(64)))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("changed since it was pinned") && err.contains("sha256sum"),
            "{err}"
        );
        assert_eq!(discover("p", Some(dir.path())), None);
        std::fs::copy(&bin, dir.path().join("manent-plugin-p")).unwrap();
        assert_eq!(
            discover("p", Some(dir.path())),
            Some(dir.path().join("manent-plugin-p"))
        );
    }
}
