//! `manent plugin new NAME --lang rust|go|python`: a plugin project that builds and passes
//! `manent plugin test` as written — a main, a deployer whose every call says "not implemented"
//! as a Permanent error, a README and a test.

use std::path::{Path, PathBuf};

use crate::cli::output::Out;
use crate::cli::{PluginLang, PluginNewArgs, exit};

/// One file of a template: where it goes and its text with `{{…}}` placeholders.
type File = (&'static str, &'static str);

const RUST: &[File] = &[
    ("Cargo.toml", include_str!("templates/rust/Cargo.toml")),
    ("src/main.rs", include_str!("templates/rust/main.rs")),
    (
        "src/deployer.rs",
        include_str!("templates/rust/deployer.rs"),
    ),
    ("README.md", include_str!("templates/rust/README.md")),
    ("kit.yml", include_str!("templates/kit.yml")),
];

const GO: &[File] = &[
    ("go.mod", include_str!("templates/go/go.mod")),
    ("build.sh", include_str!("templates/go/build.sh")),
    ("kit.yml", include_str!("templates/kit.yml")),
    ("main.go", include_str!("templates/go/main.go")),
    ("deployer.go", include_str!("templates/go/deployer.go")),
    (
        "deployer_test.go",
        include_str!("templates/go/deployer_test.go"),
    ),
    ("README.md", include_str!("templates/go/README.md")),
];

const PYTHON: &[File] = &[
    ("plugin.py", include_str!("templates/python/plugin.py")),
    (
        "test_plugin.py",
        include_str!("templates/python/test_plugin.py"),
    ),
    ("install.sh", include_str!("templates/python/install.sh")),
    ("kit.yml", include_str!("templates/kit.yml")),
    ("README.md", include_str!("templates/python/README.md")),
];

/// A plugin name: what follows `manent-plugin-` in the binary's name.
fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "plugin name {name:?}: lowercase letters, digits and `-`, starting with a letter \
             (the binary is manent-plugin-NAME)"
        ))
    }
}

/// `web-deployer` → `WebDeployer`.
fn type_name(name: &str) -> String {
    name.split('-')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// Where manent's SDKs are: `--sdk`, else this manent's source tree when it is still there.
fn sdk_root(given: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = given {
        return Some(std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned()));
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR"));
    built.join("sdk").is_dir().then(|| built.to_owned())
}

fn render(text: &str, name: &str, sdk: &str, rust_dep: &str) -> String {
    text.replace("{{name}}", name)
        .replace("{{type}}", &type_name(name))
        .replace("{{sdk_sh}}", &crate::plugin::builtin::sh_quote(sdk))
        .replace("{{sdk}}", sdk)
        .replace("{{rust_dep}}", rust_dep)
}

/// Writes the project; refuses a directory that exists and is not empty.
pub fn new(a: &PluginNewArgs, out: &mut Out) -> u8 {
    if let Err(e) = check_name(&a.name) {
        out.error(e);
        return exit::BAD_INPUT;
    }
    let dir = a
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("manent-plugin-{}", a.name)));
    if std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some()) {
        out.error(format!(
            "{} exists and is not empty: give another --dir",
            dir.display()
        ));
        return exit::BAD_INPUT;
    }
    let sdk = sdk_root(a.sdk.as_deref());
    let sdk_text = sdk
        .as_ref()
        .map_or_else(|| "/path/to/manent".to_owned(), |p| p.display().to_string());
    let rust_dep = match &sdk {
        Some(p) => format!("path = {:?}", p.display().to_string()),
        None => "version = \"*\"".to_owned(),
    };
    let files = match a.lang {
        PluginLang::Rust => RUST,
        PluginLang::Go => GO,
        PluginLang::Python => PYTHON,
    };
    for (path, text) in files {
        let to = dir.join(path);
        let written = to
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&to, render(text, &a.name, &sdk_text, &rust_dep)));
        if let Err(e) = written {
            out.error(format!("cannot write {}: {e}", to.display()));
            return exit::FAILED;
        }
        if path.ends_with(".sh") {
            use std::os::unix::fs::PermissionsExt as _;
            let _ = std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755));
        }
    }
    let binary = format!("manent-plugin-{}", a.name);
    let (build, test) = match a.lang {
        PluginLang::Rust => ("cargo build".to_owned(), format!("target/debug/{binary}")),
        // Offline, with Debian's Go packages: GOPATH mode in a temporary workspace.
        PluginLang::Go => ("./build.sh".to_owned(), format!("./{binary}")),
        PluginLang::Python => ("./install.sh".to_owned(), format!("./{binary}")),
    };
    out.line(format!("wrote {} ({:?})", dir.display(), a.lang));
    if sdk.is_none() {
        out.line(
            "  the SDK's location is unknown: pass --sdk PATH (a manent checkout), or edit the \
             dependency on it",
        );
    }
    out.line(format!(
        "  cd {} && {build} && manent plugin test --config kit.yml {test}",
        dir.display()
    ));
    exit::OK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_binaries_and_types() {
        assert!(check_name("web-deployer").is_ok());
        assert!(check_name("Web").is_err());
        assert!(check_name("a/b").is_err());
        assert!(check_name("x-").is_err());
        assert_eq!(type_name("web-deployer"), "WebDeployer");
        assert_eq!(type_name("s3"), "S3");
    }
}
