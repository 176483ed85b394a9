//! Builds the Go plugins (the SDK fixture, the raw go-plugin fixture, the SDK's systemd-unit
//! example) and the Go benchmark host with Debian's Go packages, offline, in GOPATH mode, in one
//! workspace: the Go SDK (sdk/go, with its committed generated proto code) is copied to
//! `$WS/src/manent.dev/sdk/go`, where its module path resolves in GOPATH mode too. Without Go
//! the caller skips, except where `MANENT_REQUIRE_GO` is set (CI), which turns a missing
//! toolchain into a failure.

#![allow(dead_code, reason = "each test binary uses part of the support module")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The built binaries.
#[derive(Debug, Clone)]
pub struct GoBuild {
    /// fixtures/go-plugin: the fixture written with the Go SDK.
    pub plugin: PathBuf,
    /// fixtures/go-plugin/host: hashicorp/go-plugin's own host, for the benchmark.
    pub host: PathBuf,
    /// fixtures/go-plugin-raw: a minimal plugin written directly on go-plugin.
    pub raw: PathBuf,
    /// sdk/go/examples/systemd-unit.
    pub example: PathBuf,
}

/// True when `tool` is on PATH.
pub fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// Runs `cmd`; a failure fails the test with its output.
pub fn run(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&path, &to.join(entry.file_name()));
        } else {
            std::fs::copy(&path, to.join(entry.file_name())).unwrap();
        }
    }
}

/// The generated Go code in sdk/go/proto/pluginv1 is committed (module users need no protoc);
/// when protoc and protoc-gen-go are here it must match what they generate from the proto.
#[allow(clippy::print_stderr, reason = "a stale file outside CI is a warning")]
fn check_generated(root: &Path, ws: &Path) {
    if !on_path("protoc") || !on_path("protoc-gen-go") {
        return;
    }
    let generated = ws.join("gen");
    std::fs::create_dir_all(&generated).unwrap();
    run(
        Command::new("protoc")
            .current_dir(root)
            .arg("-Iproto")
            .arg(format!("--go_out=plugins=grpc:{}", generated.display()))
            .arg("proto/manent/plugin/v1/deployer.proto"),
        "protoc --go_out",
    );
    let fresh =
        std::fs::read(generated.join("manent.dev/sdk/go/proto/pluginv1/deployer.pb.go")).unwrap();
    let committed = std::fs::read(root.join("sdk/go/proto/pluginv1/deployer.pb.go")).unwrap();
    if fresh != committed {
        let why = "sdk/go/proto/pluginv1/deployer.pb.go differs from what protoc generates from \
                   proto/manent/plugin/v1/deployer.proto: regenerate it (sdk/go/README.md says how)";
        assert!(std::env::var_os("MANENT_REQUIRE_GO").is_none(), "{why}");
        eprintln!("warning: {why}");
    }
}

fn build(root: &Path, ws: &Path) -> GoBuild {
    let _ = std::fs::remove_dir_all(ws);
    copy_dir(&root.join("sdk/go"), &ws.join("src/manent.dev/sdk/go"));
    for (from, pkg) in [
        ("fixtures/go-plugin/main.go", "manent-go-fixture"),
        ("fixtures/go-plugin-raw/main.go", "manent-go-raw"),
        ("fixtures/go-plugin/host/main.go", "manent-go-host"),
    ] {
        std::fs::create_dir_all(ws.join("src").join(pkg)).unwrap();
        std::fs::copy(root.join(from), ws.join("src").join(pkg).join("main.go")).unwrap();
    }
    check_generated(root, ws);
    let gopath = format!("{}:/usr/share/gocode", ws.display());
    // Beside the workspace, so the next binary that builds the fixture (a bench after the
    // tests) compiles only what changed.
    let cache = ws.with_file_name("go-build-cache");
    for (pkg, out) in [
        ("manent-go-fixture", "go-fixture"),
        ("manent-go-raw", "go-raw"),
        ("manent-go-host", "go-host"),
        ("manent.dev/sdk/go/examples/systemd-unit", "systemd-unit"),
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
        raw: ws.join("go-raw"),
        example: ws.join("systemd-unit"),
    }
}

/// The Go binaries, built once per test binary; None when Go is missing (and not required).
#[allow(clippy::print_stderr, reason = "a skipped test says why")]
pub fn go_fixture() -> Option<GoBuild> {
    static BUILT: OnceLock<Option<GoBuild>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let missing: Vec<&str> = ["go"].into_iter().filter(|t| !on_path(t)).collect();
            let gopkg = Path::new("/usr/share/gocode/src/github.com/hashicorp/go-plugin").exists()
                && Path::new("/usr/share/gocode/src/google.golang.org/grpc").exists()
                && Path::new("/usr/share/gocode/src/github.com/golang/protobuf").exists();
            if !missing.is_empty() || !gopkg {
                let why = format!(
                    "the Go interop fixtures need golang-go, golang-github-hashicorp-go-plugin-dev, \
                     golang-google-grpc-dev and golang-goprotobuf-dev (missing: {missing:?}, \
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

/// Builds (and `go test`s) the Go project in `dir` as package `name` of the fixtures'
/// workspace, where the SDK is; the binary. Call [`go_fixture`] first.
pub fn build_project(dir: &Path, name: &str) -> PathBuf {
    let ws = Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-fixture");
    let pkg = ws.join("src").join(name);
    let _ = std::fs::remove_dir_all(&pkg);
    copy_dir(dir, &pkg);
    let gopath = format!("{}:/usr/share/gocode", ws.display());
    let cache = ws.with_file_name("go-build-cache");
    let out = ws.join(name);
    for args in [
        vec!["test", "."],
        vec!["build", "-o", out.to_str().unwrap(), "."],
    ] {
        run(
            Command::new("go")
                .current_dir(&pkg)
                .env("GO111MODULE", "off")
                .env("GOPATH", &gopath)
                .env("GOCACHE", &cache)
                .env_remove("GOFLAGS")
                .args(&args),
            &format!("go {} {name}", args[0]),
        );
    }
    out
}

/// `go vet` and `go test` on the Go SDK's packages as the fixtures' workspace holds them; call
/// [`go_fixture`] first. The combined output, for assertion messages, and whether both passed.
pub fn test_sdk() -> (bool, String) {
    let ws = Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-fixture");
    let gopath = format!("{}:/usr/share/gocode", ws.display());
    let cache = ws.with_file_name("go-build-cache");
    let mut log = String::new();
    let mut ok = true;
    for verb in ["vet", "test"] {
        let out = Command::new("go")
            .current_dir(ws.join("src/manent.dev/sdk/go"))
            .env("GO111MODULE", "off")
            .env("GOPATH", &gopath)
            .env("GOCACHE", &cache)
            .env_remove("GOFLAGS")
            .args([verb, "./..."])
            .output()
            .unwrap();
        ok &= out.status.success();
        log.push_str(&String::from_utf8_lossy(&out.stdout));
        log.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    (ok, log)
}
