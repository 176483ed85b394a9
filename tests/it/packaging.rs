//! The Debian package, for real on this machine (as root): built from the test build with
//! `packaging/build-deb`, installed with `dpkg -i`, its worker started as its unit starts it
//! (the `manent` user, `NOTIFY_SOCKET`), an operator of the `manent` group deploying through it,
//! upgraded with an administrator's edit of the configuration kept, and purged.

use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::support::fleet::{said, text};

const OPERATOR: &str = "manent-op";
const CONFIG: &str = "/etc/manent/manent.yml";

fn skipped(why: &str) -> bool {
    assert!(
        std::env::var_os("CI").is_none(),
        "the package test needs {why} in CI"
    );
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("packaging: skipped: {why}\n").as_bytes(),
    );
    true
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {}", said(&out));
    out
}

/// `args` as `user` with that user's groups (setpriv execs in place: its pid is manent's).
fn as_user(user: &str, args: &[&str]) -> Command {
    let mut c = Command::new("setpriv");
    c.args(["--reuid", user, "--regid", user, "--init-groups", "--"])
        .args(args)
        .current_dir("/")
        .env_remove("MANENT_TRUSTED_CONFIG");
    c
}

/// Builds the package from the test build (compressed fast: it is installed here and gone); its
/// path.
fn build(extra: &[&str]) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = run(Command::new(root.join("packaging/build-deb"))
        .args(["--profile", "dev", "--fast"])
        .args(extra));
    let path = text(&out.stdout).trim().lines().last().unwrap().to_owned();
    PathBuf::from(path)
}

fn installed_version() -> Option<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f", "${Version} ${db:Status-Abbrev}", "manent"])
        .output()
        .ok()?;
    let v = text(&out.stdout);
    v.contains(" ii")
        .then(|| v.split_whitespace().next().unwrap().to_owned())
}

fn mode_owner(path: &str) -> (u32, String, String) {
    let m = std::fs::metadata(path).unwrap();
    let name = |id: u32, file: &str| {
        std::fs::read_to_string(file)
            .unwrap()
            .lines()
            .find(|l| l.split(':').nth(2) == Some(&id.to_string()))
            .and_then(|l| l.split(':').next())
            .unwrap_or("?")
            .to_owned()
    };
    (
        m.mode() & 0o7777,
        name(m.uid(), "/etc/passwd"),
        name(m.gid(), "/etc/group"),
    )
}

/// The worker started as its unit starts it, with a listener in systemd's place: returns it
/// once it said READY=1, and when.
fn worker(dir: &Path) -> (std::process::Child, Instant) {
    let socket = dir.join("notify");
    let listener = UnixDatagram::bind(&socket).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    listener
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut child = as_user("manent", &["/usr/bin/manent", "--config", CONFIG, "worker"])
        .env("NOTIFY_SOCKET", &socket)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 4096];
    let ready = loop {
        match listener.recv(&mut buf) {
            Ok(n) if String::from_utf8_lossy(&buf[..n]).contains("READY=1") => {
                break Instant::now();
            }
            Ok(_) => {}
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the worker never said READY=1: {e}");
            }
        }
    };
    (child, ready)
}

fn stop(mut child: std::process::Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

#[test]
fn the_debian_package_installs_runs_its_worker_upgrades_and_purges() {
    if !crate::support::is_root() {
        // As the second-user tests do: installing a package needs root, wherever it runs.
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"packaging: skipped: dpkg -i needs root\n",
        );
        return;
    }
    for (tool, args, from) in [
        ("cargo", ["deb", "--version"], "cargo install cargo-deb"),
        ("dpkg-shlibdeps", ["--version", ""], "dpkg-dev"),
    ] {
        let has = Command::new(tool)
            .args(args.iter().filter(|a| !a.is_empty()))
            .output()
            .is_ok_and(|o| o.status.success());
        if !has && skipped(&format!("{tool} ({from})")) {
            return;
        }
    }
    if installed_version().is_some() {
        run(Command::new("dpkg").args(["--purge", "manent"]));
    }
    let first = build(&[]);
    let size = std::fs::metadata(&first).unwrap().len();

    // Installed: the binaries, the user, the configuration the group reads, the state.
    let dir = tempfile::tempdir().unwrap();
    let began = Instant::now();
    run(Command::new("dpkg").arg("-i").arg(&first));
    let install = began.elapsed();
    let out = run(Command::new("/usr/bin/manent").arg("--version"));
    assert!(
        text(&out.stdout).starts_with(&format!("manent {}", env!("CARGO_PKG_VERSION"))),
        "{}",
        text(&out.stdout)
    );
    for plugin in ["remote-copy", "nginx", "haproxy"] {
        assert!(Path::new(&format!("/usr/bin/manent-plugin-{plugin}")).exists());
    }
    assert_eq!(mode_owner(CONFIG), (0o640, "root".into(), "manent".into()));
    assert_eq!(
        mode_owner("/var/lib/manent/db"),
        (0o2770, "manent".into(), "manent".into())
    );
    assert_eq!(
        mode_owner("/var/lib/manent"),
        (0o755, "root".into(), "root".into())
    );
    for shipped in [
        "/usr/share/man/man1/manent.1.gz",
        "/usr/share/man/man1/manent-deploy.1.gz",
        "/usr/share/man/man5/manent-yml.5.gz",
        "/usr/share/manent/schema/app.schema.json",
        "/usr/share/bash-completion/completions/manent",
        "/usr/share/zsh/vendor-completions/_manent",
        "/usr/share/fish/vendor_completions.d/manent.fish",
        "/usr/lib/sysusers.d/manent.conf",
    ] {
        assert!(Path::new(shipped).exists(), "{shipped}");
    }
    let out = run(Command::new("/usr/bin/manent").args(["--config", CONFIG, "validate"]));
    assert!(text(&out.stdout).starts_with("ok: "), "{}", said(&out));
    let out = run(Command::new("systemd-analyze")
        .args(["verify", "/usr/lib/systemd/system/manent-worker.service"]));
    assert_eq!(text(&out.stderr), "", "systemd-analyze verify");

    // The worker as its unit runs it, then an operator in the group deploys through it.
    let spawned = Instant::now();
    let (worker_process, ready) = worker(dir.path());
    let to_ready = ready - spawned;
    if Command::new("id")
        .arg(OPERATOR)
        .output()
        .unwrap()
        .status
        .success()
    {
        run(Command::new("usermod").args(["-aG", "manent", OPERATOR]));
    } else {
        run(Command::new("useradd").args(["-M", "-G", "manent", OPERATOR]));
    }
    let out = run(&mut as_user(
        OPERATOR,
        &[
            "/usr/bin/manent",
            "--config",
            CONFIG,
            "deploy",
            "example",
            "staging",
            "--yes",
        ],
    ));
    let all = said(&out);
    assert!(all.contains("runs the work"), "handed to the worker: {all}");
    assert!(all.contains("would go to localhost"), "{all}");
    stop(worker_process);

    // Upgraded: the administrator's edit of the configuration and its mode stay, and so does
    // the database.
    let mut config = std::fs::read_to_string(CONFIG).unwrap();
    config.push_str("# edited by the administrator\n");
    std::fs::write(CONFIG, &config).unwrap();
    let second = build(&["--deb-revision", "2"]);
    run(Command::new("dpkg")
        .args(["--force-confold", "-i"])
        .arg(&second));
    assert_eq!(
        installed_version().as_deref(),
        Some(format!("{}-2", env!("CARGO_PKG_VERSION")).as_str())
    );
    assert_eq!(std::fs::read_to_string(CONFIG).unwrap(), config);
    assert_eq!(mode_owner(CONFIG), (0o640, "root".into(), "manent".into()));
    let out = run(&mut as_user(
        OPERATOR,
        &["/usr/bin/manent", "--config", CONFIG, "status"],
    ));
    assert!(
        text(&out.stdout).contains("example/staging"),
        "{}",
        said(&out)
    );

    // Purged: nothing of it left but the user (Debian keeps system users).
    run(Command::new("dpkg").args(["--purge", "manent"]));
    for gone in ["/usr/bin/manent", "/etc/manent", "/var/lib/manent"] {
        assert!(!Path::new(gone).exists(), "{gone} after purge");
    }
    let overrides = run(Command::new("dpkg-statoverride").arg("--list"));
    assert!(!text(&overrides.stdout).contains(CONFIG));
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "packaging: the package (debug build) is {:.1} MB; dpkg -i takes {} ms, the worker \
             then says READY in {} ms\n",
            size as f64 / 1e6,
            install.as_millis(),
            to_ready.as_millis()
        )
        .as_bytes(),
    );
}
