//! Builds the Go fixture plugin (and the Go benchmark host) with Debian's Go packages, offline,
//! in GOPATH mode, from our own proto. Without Go the caller skips, except where
//! `MANENT_REQUIRE_GO` is set (CI), which turns a missing toolchain into a failure.

#![allow(dead_code, reason = "each test binary uses part of the support module")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The built binaries.
#[derive(Debug, Clone)]
pub struct GoBuild {
    pub plugin: PathBuf,
    pub host: PathBuf,
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn build(root: &Path, ws: &Path) -> GoBuild {
    let _ = std::fs::remove_dir_all(ws);
    for dir in ["src/manent-go-fixture", "src/manent-go-host"] {
        std::fs::create_dir_all(ws.join(dir)).unwrap();
    }
    run(
        Command::new("protoc")
            .current_dir(root)
            .arg("-Iproto")
            .arg(format!(
                "--go_out=plugins=grpc:{}",
                ws.join("src").display()
            ))
            .arg("proto/manent/plugin/v1/deployer.proto"),
        "protoc --go_out",
    );
    std::fs::copy(
        root.join("fixtures/go-plugin/main.go"),
        ws.join("src/manent-go-fixture/main.go"),
    )
    .unwrap();
    std::fs::copy(
        root.join("fixtures/go-plugin/host/main.go"),
        ws.join("src/manent-go-host/main.go"),
    )
    .unwrap();
    let gopath = format!("{}:/usr/share/gocode", ws.display());
    // Beside the workspace, so the next binary that builds the fixture (a bench after the
    // tests) compiles only what changed.
    let cache = ws.with_file_name("go-build-cache");
    for (pkg, out) in [
        ("manent-go-fixture", "go-fixture"),
        ("manent-go-host", "go-host"),
    ] {
        run(
            Command::new("go")
                .current_dir(ws.join("src").join(pkg))
                .env("GO111MODULE", "off")
                .env("GOPATH", &gopath)
                .env("GOCACHE", &cache)
                .env_remove("GOFLAGS")
                .args(["build", "-o"])
                .arg(ws.join(out))
                .arg("."),
            &format!("go build {pkg}"),
        );
    }
    GoBuild {
        plugin: ws.join("go-fixture"),
        host: ws.join("go-host"),
    }
}

/// The Go fixture, built once per test binary; None when Go is missing (and not required).
#[allow(clippy::print_stderr, reason = "a skipped test says why")]
pub fn go_fixture() -> Option<GoBuild> {
    static BUILT: OnceLock<Option<GoBuild>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let missing: Vec<&str> =
                ["go", "protoc", "protoc-gen-go"].into_iter().filter(|t| !on_path(t)).collect();
            let gopkg = Path::new("/usr/share/gocode/src/github.com/hashicorp/go-plugin").exists()
                && Path::new("/usr/share/gocode/src/google.golang.org/grpc").exists();
            if !missing.is_empty() || !gopkg {
                let why = format!(
                    "the Go interop fixture needs golang-go, golang-github-hashicorp-go-plugin-dev, \
                     golang-google-grpc-dev, golang-goprotobuf-dev and protobuf-compiler (missing: {missing:?}, \
                     go packages present: {gopkg})"
                );
                assert!(std::env::var_os("MANENT_REQUIRE_GO").is_none(), "{why}");
                eprintln!("skipped: {why}");
                return None;
            }
            let root = Path::new(env!("CARGO_MANIFEST_DIR"));
            let ws = Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-fixture");
            Some(build(root, &ws))
        })
        .clone()
}
