//! The Python SDK (sdk/python) installed into a virtual environment once per test binary, and
//! the Python fixture plugin (fixtures/python-plugin/plugin.py) as an executable that the host
//! can start with its cleared environment: the venv's interpreter named by absolute path in its
//! shebang. Without python3 (and its venv module) the caller skips, except where
//! `MANENT_REQUIRE_PYTHON` is set (CI), which turns a missing interpreter into a failure.
//!
//! The venv is kept under `CARGO_TARGET_TMPDIR/python-sdk` and reused while the SDK's sources
//! hash the same; `pip` fetches grpclib, protobuf and cryptography (wheels) the first time.
//! `MANENT_PIP_ARGS` adds arguments to that `pip install` (e.g. `--no-index --find-links DIR`).

#![allow(dead_code, reason = "each test binary uses part of the support module")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use super::go::{on_path, run};

/// The SDK's files that go into the package (what pip installs), relative, sorted.
fn sources(sdk: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if name == "build"
                || name == "__pycache__"
                || name == ".venv"
                || name.ends_with(".egg-info")
                || name.ends_with(".pyc")
            {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out);
            } else if let Ok(rel) = path.strip_prefix(root) {
                out.push(rel.to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(sdk, sdk, &mut out);
    out.sort();
    out
}

fn sources_hash(sdk: &Path, files: &[PathBuf]) -> String {
    let mut h = Sha256::new();
    for f in files {
        h.update(f.to_string_lossy().as_bytes());
        h.update([0]);
        h.update(std::fs::read(sdk.join(f)).unwrap_or_default());
        h.update([0]);
    }
    format!("{:x}", h.finalize())
}

/// A venv with the SDK installed (made or reused); its Python.
fn install(sdk: &Path, dir: &Path) -> PathBuf {
    let files = sources(sdk);
    let hash = sources_hash(sdk, &files);
    let venv = dir.join("venv");
    let python = venv.join("bin/python");
    let stamp = venv.join("manent-sdk.sha256");
    if python.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == hash) {
        return python;
    }
    let _ = std::fs::remove_dir_all(dir);
    // A copy, so that pip's in-tree build leaves nothing behind in the work tree.
    let src = dir.join("src");
    for f in &files {
        let to = src.join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(sdk.join(f), &to).unwrap();
    }
    run(
        Command::new("python3").arg("-m").arg("venv").arg(&venv),
        "python3 -m venv (Debian: apt-get install python3-venv)",
    );
    let mut pip = Command::new(&python);
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]);
    if let Ok(extra) = std::env::var("MANENT_PIP_ARGS") {
        pip.args(extra.split_whitespace());
    }
    run(pip.arg(&src), "pip install sdk/python");
    std::fs::write(&stamp, &hash).unwrap();
    python
}

/// The Python fixture plugin, an executable on the SDK's venv; None when python3 is missing
/// (and not required).
#[allow(clippy::print_stderr, reason = "a skipped test says why")]
pub fn python_fixture() -> Option<PathBuf> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let usable = on_path("python3")
                && Command::new("python3")
                    .args([
                        "-c",
                        "import sys, venv, ensurepip; assert sys.version_info >= (3, 9)",
                    ])
                    .output()
                    .is_ok_and(|o| o.status.success());
            if !usable {
                let why = "the Python SDK tests need python3 >= 3.9 with its venv module \
                           (Debian: python3 python3-venv) and PyPI or MANENT_PIP_ARGS for \
                           grpclib, protobuf and cryptography";
                assert!(std::env::var_os("MANENT_REQUIRE_PYTHON").is_none(), "{why}");
                eprintln!("skipped: {why}");
                return None;
            }
            let root = Path::new(env!("CARGO_MANIFEST_DIR"));
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-sdk");
            let python = install(&root.join("sdk/python"), &dir);
            let code =
                std::fs::read_to_string(root.join("fixtures/python-plugin/plugin.py")).unwrap();
            let launcher = dir.join("pyfix");
            let tmp = dir.join("pyfix.tmp");
            std::fs::write(&tmp, format!("#!{}\n{code}", python.display())).unwrap();
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
            std::fs::rename(&tmp, &launcher).unwrap();
            Some(launcher)
        })
        .clone()
}

/// The copy of sdk/python the venv was installed from (`pip install` it elsewhere without
/// building in the work tree); call [`python_fixture`] first.
pub fn sdk_copy() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-sdk/src")
}

/// The venv's interpreter (the SDK and its dependencies installed); call [`python_fixture`]
/// first.
pub fn venv_python() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-sdk/venv/bin/python")
}

/// `script` as an executable on the SDK's venv, at `to` (the host clears the environment, so
/// the interpreter is named by its absolute path).
pub fn launcher(script: &Path, to: &Path) {
    let code = std::fs::read_to_string(script).unwrap();
    let code = code.strip_prefix("#!").map_or(code.as_str(), |c| {
        c.split_once('\n').map_or("", |(_, rest)| rest)
    });
    std::fs::write(to, format!("#!{}\n{code}", venv_python().display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).unwrap();
}
