//! Who acted is what the kernel says, not what anyone can type.

use super::*;

/// One journal entry of `manent history web ENV --json` with `action`.
fn journaled(fx: &Fixture, env: &str, action: &str) -> serde_json::Value {
    let out = fx.run(&["history", "web", env, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let h: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    h["journal"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["action"] == action)
        .unwrap_or_else(|| panic!("no {action} in {h:#}"))
        .clone()
}

#[test]
fn identity_comes_from_the_kernel_not_from_what_anyone_can_type() {
    if !as_root("identity_comes_from_the_kernel…") {
        return;
    }
    let app = "application: web\nartifact: {version: \"1\"}\ndeploy:\n  plugin: exec\n  params: {deploy: \"true\"}\n\
               environments:\n  prod:\n    targets: [{name: p1}]\n  qa:\n    targets: [{name: q1}]\n";
    // Shared with nogroup, so nobody may act on the same database.
    let fx = Fixture::new(
        &format!("{LEDGER_MANENT}engine:\n  shared_group: nogroup\n"),
        &[("web", app)],
    );
    chmod(fx.path(), 0o755);
    let out = fx.run(&["deploy", "web", "qa", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    // As nobody, typing someone else's name and address.
    use std::os::unix::process::CommandExt;
    let out = Command::new(env!("CARGO_BIN_EXE_manent"))
        .arg("--config")
        .arg(fx.config())
        .args(["lock", "web", "prod", "--reason", "it was alice"])
        .env("SUDO_USER", "alice")
        .env("SUDO_UID", "1000")
        .env("USER", "alice")
        .env("SSH_CONNECTION", "203.0.113.9 4242 10.0.0.1 22")
        .uid(NOBODY)
        .gid(NOBODY)
        .current_dir("/")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let lock = journaled(&fx, "prod", "lock");
    assert_eq!(
        lock["operator"], "nobody (claimed SUDO_USER=alice)",
        "{lock}"
    );
    assert_eq!(lock["client"], "203.0.113.9 (claimed)", "{lock}");
    // Root's own sudo environment that does not agree is a claim too.
    let out = fx.run_with(
        &["lock", "web", "qa", "--reason", "mismatch"],
        &[("SUDO_USER", "nobody"), ("SUDO_UID", "0")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(
        journaled(&fx, "qa", "lock")["operator"],
        format!("{} (claimed SUDO_USER=nobody)", me())
    );
    let out = fx.run(&["unlock", "web", "qa"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    // Over a real ssh session the address is the one its sshd is connected to, whatever the
    // session's variable says.
    let Some(server) = sshd::sshd() else {
        assert!(
            std::env::var("CI").is_err(),
            "sshd is required in CI (openssh-server)"
        );
        return;
    };
    let out = server
        .ssh(&format!(
            "SSH_CONNECTION='203.0.113.9 1 10.0.0.1 22' {} --config {} lock web qa --reason over-ssh",
            env!("CARGO_BIN_EXE_manent"),
            fx.config().display()
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let lock = journaled(&fx, "qa", "lock");
    assert_eq!(lock["reason"], "over-ssh", "{lock}");
    assert_eq!(lock["client"], "127.0.0.1", "{lock}");
    assert_eq!(lock["operator"], me().as_str(), "{lock}");
}
