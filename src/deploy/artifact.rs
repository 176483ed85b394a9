//! The version is the artifact: what a deployment ships is settled when it is asked for, and
//! checked before anything is copied.
//!
//! - `{version}` in `artifact.uri` is replaced by the version deployed, for every plugin.
//! - A version other than the descriptor's needs a uri that depends on it (`{version}`) or one
//!   given for it (`--uri`): otherwise every version would ship the same bytes.
//! - The expected digest is the descriptor's `sha256` for its own version, else the line of
//!   `sha256s` for the version deployed (a file only this user or root may write). A local
//!   artifact (a path, or `file://`) is digested when the deployment is asked for: a mismatch
//!   is refused then, and the digest — expected or not — is recorded with the deployment (and
//!   its releases). The run checks it again before any target is touched, so a build changed
//!   between the request and the run is not shipped (one changed while batches copy is not
//!   checked again per target).
//!
//! A directory's digest is the sha256 of its manifest: one line per entry under it, sorted by
//! path, `d MODE PATH`, `f MODE SHA256 PATH` or `l TARGET PATH` (mode in octal) —
//! `manent digest PATH` prints it.

use std::io::Read as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::config::EnvSpec;

/// The placeholder replaced by the version.
pub const VERSION: &str = "{version}";

/// Sets the version `spec` deploys (`None`: the descriptor's), and the uri that ships it
/// (`uri`: one given for this deployment), with `{version}` replaced. Refuses a version whose
/// uri would ship another version's bytes.
pub fn with_version(
    spec: &mut EnvSpec,
    version: Option<&str>,
    uri: Option<&str>,
) -> Result<(), String> {
    let own = spec.artifact.version.clone();
    if let Some(v) = version {
        crate::config::check_version(v)?;
        spec.artifact.version = v.to_owned();
    }
    if let Some(u) = uri {
        spec.artifact.uri = u.to_owned();
    }
    let other = spec.artifact.version != own;
    if other
        && uri.is_none()
        && !spec.artifact.uri.is_empty()
        && !spec.artifact.uri.contains(VERSION)
    {
        return Err(format!(
            "artifact.uri `{}` ships the same bytes for every version, so --version {} would \
             ship {own}'s: write {VERSION} in it ({}), or give --uri for this version",
            spec.artifact.uri,
            spec.artifact.version,
            spec.descriptor.display()
        ));
    }
    spec.artifact.uri = spec.artifact.uri.replace(VERSION, &spec.artifact.version);
    // The descriptor's digest is its own version's; another version's is in `sha256s`.
    if other {
        spec.artifact.sha256 = String::new();
    }
    Ok(())
}

/// The local path `uri` names (an absolute path, or `file://…`), if it names one: anything
/// else (`https://…`, an image reference) is the plugin's to fetch.
pub fn local_path(uri: &str) -> Option<PathBuf> {
    let p = uri.strip_prefix("file://").unwrap_or(uri);
    p.starts_with('/').then(|| PathBuf::from(p))
}

/// The digest `spec`'s version is expected to have: the descriptor's `sha256`, else its line
/// in the `sha256s` file. `Err` when that file cannot be read or says nothing of the version
/// (a version it does not list is not shipped on trust).
pub fn expected(spec: &EnvSpec) -> Result<Option<String>, String> {
    if !spec.artifact.sha256.is_empty() {
        return Ok(Some(spec.artifact.sha256.to_ascii_lowercase()));
    }
    let Some(file) = &spec.digests else {
        return Ok(None);
    };
    // What ships is decided by this file: another user who could write it could bless any build.
    let bytes = crate::sys::files::read_trusted(file, 4 << 20)
        .map_err(|e| format!("artifact.sha256s {}: {e}", file.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        if let (Some(hex), Some(v)) = (words.next(), words.next())
            && v.trim_start_matches('*') == spec.artifact.version
        {
            return Ok(Some(hex.to_ascii_lowercase()));
        }
    }
    Err(format!(
        "artifact.sha256s {} has no digest for version {}: add its line (`manent digest \
         {}` prints it) before shipping it",
        file.display(),
        spec.artifact.version,
        spec.artifact.uri
    ))
}

/// Digests the local artifact of `spec` and checks it against what it is expected to be; the
/// digest is kept in `spec.artifact.sha256` (recorded with the deployment and its releases).
/// A uri that is not local is left to the plugin (with the expected digest, when there is one).
pub fn pin(spec: &mut EnvSpec) -> Result<(), String> {
    let expected = expected(spec)?;
    let Some(path) = local_path(&spec.artifact.uri) else {
        if let Some(e) = expected {
            spec.artifact.sha256 = e;
        }
        return Ok(());
    };
    let actual = digest(&path).map_err(|e| {
        format!(
            "artifact {} (version {}) cannot be read: {e}",
            path.display(),
            spec.artifact.version
        )
    })?;
    if let Some(e) = expected
        && e != actual
    {
        return Err(format!(
            "artifact {} has sha256 {actual}, but {} {} is expected to be {e}: nothing was \
             copied (rebuild it, or correct the digest)",
            path.display(),
            spec.application,
            spec.artifact.version
        ));
    }
    spec.artifact.sha256 = actual;
    Ok(())
}

/// Checks the local artifact still has the digest recorded when the deployment was asked
/// for (once, before the first target).
pub fn verify(spec: &EnvSpec) -> Result<(), String> {
    let Some(path) = local_path(&spec.artifact.uri) else {
        return Ok(());
    };
    if spec.artifact.sha256.is_empty() {
        return Ok(());
    }
    let actual = digest(&path).map_err(|e| format!("artifact {}: {e}", path.display()))?;
    if actual == spec.artifact.sha256 {
        Ok(())
    } else {
        Err(format!(
            "artifact {} changed since the deployment was asked for (sha256 {actual}, recorded \
             {}): nothing was copied; deploy again to ship what is there now",
            path.display(),
            spec.artifact.sha256
        ))
    }
}

/// The sha256 of a file's bytes, or of a directory's manifest (see the module's docs).
pub fn digest(path: &Path) -> std::io::Result<String> {
    // The artifact itself may be named through a link (`/builds/current`), as the plugins
    // follow it; links inside a directory are part of its manifest.
    let meta = std::fs::metadata(path)?;
    if meta.is_file() {
        return file_digest(path);
    }
    if !meta.is_dir() {
        return Err(std::io::Error::other("not a file or a directory"));
    }
    let mut entries = Vec::new();
    walk(path, Path::new(""), &mut entries)?;
    entries.sort();
    let mut h = Sha256::new();
    for e in entries {
        h.update(e.as_bytes());
        h.update(b"\n");
    }
    Ok(format!("{:x}", h.finalize()))
}

fn file_digest(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(format!("{:x}", h.finalize()));
        }
        h.update(&buf[..n]);
    }
}

/// The manifest lines of everything under `root/rel`.
fn walk(root: &Path, rel: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(root.join(rel))? {
        let entry = entry?;
        let path = rel.join(entry.file_name());
        let meta = std::fs::symlink_metadata(root.join(&path))?;
        let mode = meta.permissions().mode() & 0o7777;
        let shown = path.display();
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(root.join(&path))?;
            out.push(format!("l {} {shown}", target.display()));
        } else if meta.is_dir() {
            out.push(format!("d {mode:o} {shown}"));
            walk(root, &path, out)?;
        } else if meta.is_file() {
            out.push(format!(
                "f {mode:o} {} {shown}",
                file_digest(&root.join(&path))?
            ));
        } else {
            return Err(std::io::Error::other(format!(
                "{shown} is neither a file, a directory nor a link"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(uri: &str) -> EnvSpec {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("apps")).unwrap();
        std::fs::write(
            dir.path().join("manent.yml"),
            "plugins:\n  x: {builtin: simulate}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("apps/web.yml"),
            format!(
                "application: web\nartifact: {{version: \"1.0.0\", uri: \"{uri}\"}}\n\
                 deploy: {{plugin: x}}\nenvironments:\n  prod:\n    targets: [{{name: a}}]\n"
            ),
        )
        .unwrap();
        let config =
            crate::config::Config::load(&dir.path().join("manent.yml"), &crate::plugin::catalog())
                .unwrap();
        config.environment("web", "prod").unwrap()
    }

    #[test]
    fn another_version_needs_a_uri_that_depends_on_it() {
        let mut s = spec("/builds/current");
        let err = with_version(&mut s, Some("2.0.0"), None).unwrap_err();
        assert!(
            err.contains("ships the same bytes for every version") && err.contains("{version}"),
            "{err}"
        );
        let mut s = spec("/builds/current");
        with_version(&mut s, Some("2.0.0"), Some("/builds/2.0.0")).unwrap();
        assert_eq!(s.artifact.uri, "/builds/2.0.0");
        let mut s = spec("/builds/{version}");
        with_version(&mut s, Some("2.0.0"), None).unwrap();
        assert_eq!(s.artifact.uri, "/builds/2.0.0");
        // Its own version needs nothing.
        let mut s = spec("/builds/current");
        with_version(&mut s, None, None).unwrap();
        assert_eq!(s.artifact.uri, "/builds/current");
    }

    #[test]
    fn a_digest_is_pinned_checked_against_the_expected_and_again_before_copying() {
        let dir = tempfile::tempdir().unwrap();
        let build = dir.path().join("2.0.0");
        std::fs::create_dir_all(build.join("bin")).unwrap();
        std::fs::write(build.join("bin/app"), "v2").unwrap();
        std::os::unix::fs::symlink("bin/app", build.join("app")).unwrap();
        let d = digest(&build).unwrap();
        assert_eq!(d.len(), 64);
        let mut s = spec(&format!("{}/{{version}}", dir.path().display()));
        with_version(&mut s, Some("2.0.0"), None).unwrap();
        pin(&mut s).unwrap();
        assert_eq!(s.artifact.sha256, d, "recorded");
        verify(&s).unwrap();
        // Changed after it was asked for: not shipped.
        std::fs::write(build.join("bin/app"), "v2, rebuilt").unwrap();
        let err = verify(&s).unwrap_err();
        assert!(
            err.contains("changed since the deployment was asked for"),
            "{err}"
        );
        // A digests file that lists another digest: refused, nothing copied.
        let sums = dir.path().join("SHA256SUMS");
        std::fs::write(&sums, format!("# builds\n{}  2.0.0\n", "0".repeat(64))).unwrap();
        let mut s = spec(&format!("{}/{{version}}", dir.path().display()));
        s.digests = Some(sums.clone());
        with_version(&mut s, Some("2.0.0"), None).unwrap();
        let err = pin(&mut s).unwrap_err();
        assert!(err.contains("nothing was copied"), "{err}");
        // One that does not list the version: refused.
        let mut s = spec(&format!("{}/{{version}}", dir.path().display()));
        s.digests = Some(sums);
        with_version(&mut s, Some("3.0.0"), None).unwrap();
        let err = pin(&mut s).unwrap_err();
        assert!(err.contains("has no digest for version 3.0.0"), "{err}");
    }

    #[test]
    fn a_directory_digest_covers_names_modes_contents_and_links() {
        let dir = tempfile::tempdir().unwrap();
        let b = dir.path().join("b");
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(b.join("f"), "x").unwrap();
        let first = digest(&b).unwrap();
        std::fs::set_permissions(b.join("f"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let moded = digest(&b).unwrap();
        assert_ne!(first, moded);
        std::fs::rename(b.join("f"), b.join("g")).unwrap();
        assert_ne!(digest(&b).unwrap(), moded);
        assert_eq!(digest(&b).unwrap(), digest(&b).unwrap());
    }
}
