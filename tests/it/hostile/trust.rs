//! A configuration someone else could have written is not obeyed (git's safe.directory,
//! OpenSSH's StrictModes): root meets files a second user (`nobody`) planted or can change, and
//! refuses each before reading a secret or opening a database, naming the file, its owner and
//! mode, and the fix. Nothing is repaired.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output};

use super::{NOBODY, as_root, chmod};
use crate::support::fleet::{Fixture, LEDGER_MANENT, ledger_app, said};

/// A TCP listener standing in for a PostgreSQL server another user runs: it counts what
/// reaches it (a connection, bytes).
struct Listener {
    port: u16,
    got: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Listener {
    fn start() -> Listener {
        use std::sync::atomic::Ordering;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let got = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = got.clone();
        std::thread::spawn(move || {
            for mut c in l.incoming().flatten() {
                seen.fetch_add(1, Ordering::SeqCst);
                let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                let mut buf = [0u8; 4096];
                while let Ok(n) = c.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    seen.fetch_add(n, Ordering::SeqCst);
                }
            }
        });
        Listener { port, got }
    }

    fn received(&self) -> usize {
        self.got.load(std::sync::atomic::Ordering::SeqCst)
    }
}

fn manent(config: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_manent"));
    cmd.arg("--config").arg(config).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.env_remove("MANENT_TRUSTED_CONFIG").output().unwrap()
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
}

/// Entries of `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_configuration_another_user_planted_is_refused_and_gets_no_secret() {
    if !as_root("a_configuration_another_user_planted…") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    chown(&shared, NOBODY);
    let pg = Listener::start();
    let config = shared.join("manent.yml");
    std::fs::write(
        &config,
        format!(
            "database: postgres://manent:${{secret:pg}}@127.0.0.1:{}/deploys\nsecrets:\n  pg: \
             env:WEB_DEPLOY_TOKEN\n",
            pg.port
        ),
    )
    .unwrap();
    chown(&config, NOBODY);
    let token = [("WEB_DEPLOY_TOKEN", "s3cret-token-0f-r00t")];
    for verb in [&["status"][..], &["validate"], &["db", "check"]] {
        let out = manent(&config, verb, &token);
        let err = said(&out);
        assert_eq!(out.status.code(), Some(2), "{verb:?}: {err}");
        assert!(
            err.contains(&config.display().to_string())
                && err.contains("not trusted")
                && err.contains("owned by nobody")
                && err.contains("MANENT_TRUSTED_CONFIG"),
            "{verb:?}: {err}"
        );
    }
    // The worker too, and it made nothing in their directory.
    let out = manent(&config, &["worker", "--until-idle"], &token);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert_eq!(entries(&shared), ["manent.yml"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(pg.received(), 0, "their server heard from manent");
    // Root's own file in their directory: they can swap it.
    chown(&config, 0);
    let out = manent(&config, &["status"], &token);
    let err = said(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "a directory above it, {}, is owned by nobody",
            shared.display()
        )),
        "{err}"
    );
    // Root's file, writable by all.
    let own = dir.path().join("own");
    std::fs::create_dir(&own).unwrap();
    let mine = own.join("manent.yml");
    std::fs::copy(&config, &mine).unwrap();
    chmod(&mine, 0o666);
    let out = manent(&mine, &["status"], &token);
    let err = said(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("mode 0666") && err.contains("chmod go-w"),
        "{err}"
    );
    assert_eq!(
        std::fs::metadata(&mine)
            .map(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.permissions().mode() & 0o777
            })
            .unwrap(),
        0o666,
        "refused, never repaired"
    );
    assert_eq!(pg.received(), 0, "their server heard from manent");
}

#[test]
fn an_application_file_another_user_planted_never_runs_and_a_link_of_theirs_is_not_followed() {
    if !as_root("an_application_file_another_user_planted…") {
        return;
    }
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &ledger_app(""))]);
    chmod(fx.path(), 0o755);
    let pwned = fx.path().join("PWNED");
    let app = fx.path().join("apps/web.yml");
    let planted = ledger_app("").replace(
        "echo \"start",
        &format!("id > {}\n      echo \"start", pwned.display()),
    );
    assert!(planted.contains("id > "));
    std::fs::write(&app, planted).unwrap();
    chown(&app, NOBODY);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    let err = said(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("apps/web.yml")
            && err.contains("not trusted")
            && err.contains("owned by nobody"),
        "{err}"
    );
    assert!(!pwned.exists(), "their command ran as root");
    assert!(fx.deployments().is_empty(), "nothing was submitted");
    // Named as reviewed, it is trusted, and said so.
    let out = Command::new(env!("CARGO_BIN_EXE_manent"))
        .arg("--config")
        .arg(fx.config())
        .arg("validate")
        .env("MANENT_TRUSTED_CONFIG", fx.path().join("apps"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert!(said(&out).contains("trusting"), "{}", said(&out));
    chown(&app, 0);
    // A link of theirs on the way to root's configuration: they can point it elsewhere.
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    let link = dir.path().join("deploys");
    std::os::unix::fs::symlink(fx.path(), &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_manent"))
        .arg("--config")
        .arg(link.join("manent.yml"))
        .arg("validate")
        .env_remove("MANENT_TRUSTED_CONFIG")
        .output()
        .unwrap();
    let err = said(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "a link above it, {}, is owned by nobody",
            link.display()
        )),
        "{err}"
    );
}

/// A PostgreSQL stand-in that refuses TLS and asks for the password in clear: what a server
/// someone else runs on a port would do. Everything it receives is kept.
fn cleartext_server() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<u8>>>) {
    use std::io::Write;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = got.clone();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(2)));
            let mut buf = [0u8; 4096];
            let mut asked = false;
            while let Ok(n) = c.read(&mut buf) {
                if n == 0 {
                    break;
                }
                kept.lock().unwrap().extend_from_slice(&buf[..n]);
                // The SSLRequest is 8 bytes: no TLS here. Then the startup message: send the
                // password in clear, please.
                let reply: &[u8] = if n == 8 && buf[4..8] == [0x04, 0xd2, 0x16, 0x2f] {
                    b"N"
                } else if !asked {
                    asked = true;
                    &[b'R', 0, 0, 0, 8, 0, 0, 0, 3]
                } else {
                    &[]
                };
                if c.write_all(reply).is_err() {
                    break;
                }
            }
        }
    });
    (port, got)
}

#[test]
fn a_password_goes_only_to_a_server_that_proved_itself() {
    let (port, got) = cleartext_server();
    let dir = tempfile::tempdir().unwrap();
    let secret = "s3cret-pg-passw0rd-0f-r00t";
    for (query, says) in [
        ("", "TLS"),
        ("?sslmode=disable", "sslmode=disable with a password"),
    ] {
        let config = dir.path().join("manent.yml");
        std::fs::write(
            &config,
            format!(
                "database: postgres://manent:${{secret:pg}}@127.0.0.1:{port}/deploys{query}\n\
                 secrets:\n  pg: env:PG_PASSWORD\n  key: env:KEY\nengine:\n  inputs_key: key\n"
            ),
        )
        .unwrap();
        let out = manent(
            &config,
            &["status"],
            &[("PG_PASSWORD", secret), ("KEY", &"k".repeat(64))],
        );
        let err = said(&out);
        assert_ne!(out.status.code(), Some(0), "{err}");
        assert!(err.contains(says), "{query}: {err}");
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let got = got.lock().unwrap().clone();
    assert!(
        !String::from_utf8_lossy(&got).contains(secret),
        "the password reached a server that never proved itself"
    );
}

/// A member of the shared group cannot make the engine's user (root here) run what they
/// wrote: the engine runs only what its own configuration says. nobody copies the
/// configuration, writes an application of their own and deploys it through root's worker:
/// refused before anything runs, naming what differs.
#[test]
fn a_shared_group_member_cannot_make_the_engine_run_their_commands() {
    use std::os::unix::process::CommandExt;
    if !as_root("a_shared_group_member_cannot_make_the_engine_run…") {
        return;
    }
    let shared = format!("{LEDGER_MANENT}engine:\n  shared_group: nogroup\n");
    let fx = Fixture::new(&shared, &[("web", &ledger_app(""))]);
    chmod(fx.path(), 0o755);
    let mut worker = fx.spawn_with(&["worker"], &[]);
    crate::support::fleet::wait_ready(&mut worker);
    // Root's own deploys run.
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    // nobody's copy of the configuration, on root's database, with an application of theirs.
    let theirs = fx.path().join("theirs");
    std::fs::create_dir_all(theirs.join("apps")).unwrap();
    let pwned = fx.path().join("PWNED");
    std::fs::write(
        theirs.join("manent.yml"),
        format!("database: {}\n{shared}", fx.db_path().display()),
    )
    .unwrap();
    let app = ledger_app("").replace(
        "echo \"start",
        &format!("id > {}\n      echo \"start", pwned.display()),
    );
    std::fs::write(theirs.join("apps/web.yml"), app).unwrap();
    for p in [
        theirs.clone(),
        theirs.join("apps"),
        theirs.join("manent.yml"),
        theirs.join("apps/web.yml"),
    ] {
        chown(&p, NOBODY);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_manent"))
        .arg("--config")
        .arg(theirs.join("manent.yml"))
        .args(["deploy", "web", "prod", "--yes", "--version", "6.6.6"])
        .env_remove("MANENT_TRUSTED_CONFIG")
        .uid(NOBODY)
        .gid(NOBODY)
        .current_dir("/")
        .output()
        .unwrap();
    let all = said(&out);
    assert_ne!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains("runs only what its own configuration says")
            && all.contains("the plugin's parameters"),
        "{all}"
    );
    assert!(!pwned.exists(), "root ran nobody's command");
    crate::support::fleet::sigterm(&worker);
    let _ = worker.wait();
}
