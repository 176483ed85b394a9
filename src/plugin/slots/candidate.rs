//! Deploying the candidate on one target: the artifact directory copied into the slot's root
//! (label `<slot>_root`, swapped in by renames), or `params.deploy_command` run.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde::Deserialize;

use crate::plugin::{PluginError, Request, Target};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// A shell command that deploys the candidate on one target, instead of copying the
    /// artifact (`MANENT_SLOT`, `MANENT_SLOT_ADDRESS`, `MANENT_SLOT_ROOT`, `MANENT_TARGET`,
    /// `MANENT_VERSION`, `MANENT_ARTIFACT` in its environment).
    #[serde(default)]
    pub deploy_command: Option<String>,
}

/// The descriptor's `deploy.params` for `plugin` (`nginx`, `haproxy`).
pub fn params(req: &Request, plugin: &str) -> Result<Params, PluginError> {
    if req.params.is_null() {
        return Ok(Params::default());
    }
    serde_json::from_value(req.params.clone())
        .map_err(|e| PluginError::Permanent(format!("{plugin} plugin params: {e}")))
}

/// One target's candidate: the artifact copied into the slot's root, or the command run.
pub async fn deploy(
    req: &Request,
    t: &Target,
    slot: &str,
    plugin: &str,
) -> Result<String, PluginError> {
    let address = t.labels.get(slot).cloned().unwrap_or_default();
    let root = t.labels.get(&format!("{}_root", slot)).cloned();
    let artifact = req
        .artifact
        .uri
        .replace("{version}", &req.artifact.version)
        .trim_start_matches("file://")
        .to_owned();
    if let Some(command) = params(req, plugin)?.deploy_command {
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(&command)
            .env("MANENT_SLOT", slot)
            .env("MANENT_SLOT_ADDRESS", &address)
            .env("MANENT_SLOT_ROOT", root.as_deref().unwrap_or(""))
            .env("MANENT_TARGET", t.name())
            .env("MANENT_VERSION", &req.artifact.version)
            .env("MANENT_ARTIFACT", &artifact)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let out = cmd
            .output()
            .await
            .map_err(|e| PluginError::Failed(format!("cannot run the deploy command: {e}")))?;
        if !out.status.success() {
            return Err(PluginError::Failed(format!(
                "the deploy command failed on {} ({}): {}",
                t.name(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        return Ok(format!(
            "{} on the {} slot ({address})",
            req.artifact.version, slot
        ));
    }
    let Some(root) = root else {
        return Err(PluginError::Permanent(format!(
            "target {} has no `{}_root` label and the descriptor gives no \
             params.deploy_command: say where the {} slot's files go, or how to deploy it",
            t.name(),
            slot,
            slot
        )));
    };
    if artifact.is_empty() {
        return Err(PluginError::Permanent(
            "artifact.uri is empty: give the directory to copy (`{version}` is replaced)".into(),
        ));
    }
    let (from, to) = (PathBuf::from(&artifact), PathBuf::from(&root));
    tokio::task::spawn_blocking(move || replace_dir(&from, &to))
        .await
        .map_err(|e| PluginError::Failed(format!("copy task: {e}")))?
        .map_err(PluginError::Failed)?;
    Ok(format!(
        "{} in {root} (the {} slot, {address})",
        req.artifact.version, slot
    ))
}

/// Replaces directory `to` with a copy of `from`: copied beside it, then swapped by renames.
fn replace_dir(from: &Path, to: &Path) -> Result<(), String> {
    if !from.is_dir() {
        return Err(format!(
            "artifact {} is not a directory (artifact.uri names the build to copy)",
            from.display()
        ));
    }
    let new = to.with_extension("manent-new");
    let old = to.with_extension("manent-old");
    let _ = std::fs::remove_dir_all(&new);
    copy_tree(from, &new)
        .map_err(|e| format!("copying {} to {}: {e}", from.display(), new.display()))?;
    let _ = std::fs::remove_dir_all(&old);
    if to.exists() {
        std::fs::rename(to, &old).map_err(|e| format!("moving {} aside: {e}", to.display()))?;
    }
    std::fs::rename(&new, to).map_err(|e| format!("putting {} in place: {e}", to.display()))?;
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let dest = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &dest)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &dest)?;
        } else {
            std::fs::copy(entry.path(), &dest)?;
        }
    }
    Ok(())
}
