//! Deploying to hosts with remote-copy: the version is the artifact. `--version` with a uri
//! that ships the same bytes for every version is refused; with `{version}` in it, each target
//! gets that version's bytes, and their digest is recorded with the release; a build whose
//! digest is not the expected one is refused before anything is copied.

use crate::support::fleet::{Fixture, said, text};

/// `web` on two local targets through remote-copy, from `uri`; `extra` goes into `artifact:`.
fn fixture(dir: &std::path::Path, uri: &str, extra: &str) -> Fixture {
    Fixture::new(
        "plugins:\n  rc:\n    builtin: remote-copy\n",
        &[(
            "web",
            &format!(
                "application: web\nartifact: {{type: directory, version: \"1.0.0\", uri: \"{uri}\"{extra}}}\n\
                 deploy:\n  plugin: rc\n  params: {{path: \"{}/srv/{{target}}\"}}\nenvironments:\n  \
                 prod:\n    targets: [{{name: web-1, host: local}}, {{name: web-2, host: local}}]\n",
                dir.display()
            ),
        )],
    )
}

/// Builds of each version under `dir/builds`, an index page saying which.
fn builds(dir: &std::path::Path, versions: &[&str]) {
    for v in versions {
        let b = dir.join("builds").join(v);
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(b.join("index.html"), format!("version {v}\n")).unwrap();
    }
}

/// What `target` serves now.
fn served(dir: &std::path::Path, target: &str) -> String {
    std::fs::read_to_string(dir.join("srv").join(target).join("current/index.html"))
        .unwrap_or_default()
}

#[test]
fn a_version_whose_uri_ships_another_versions_bytes_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    builds(dir.path(), &["1.0.0", "2.0.0"]);
    let fixed = format!("{}/builds/1.0.0", dir.path().display());
    let fx = fixture(dir.path(), &fixed, "");
    for args in [
        vec!["deploy", "web", "prod", "--yes", "--version", "2.0.0"],
        vec!["deploy", "web", "prod", "--dry-run", "--version", "2.0.0"],
        vec!["plan", "web", "prod", "--version", "2.0.0"],
    ] {
        let out = fx.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", said(&out));
        assert!(
            said(&out).contains("ships the same bytes for every version")
                && said(&out).contains("{version}")
                && said(&out).contains("--uri"),
            "{}",
            said(&out)
        );
    }
    assert!(!dir.path().join("srv").exists(), "nothing was copied");
    // Given its own uri, that version ships.
    let own = format!("{}/builds/2.0.0", dir.path().display());
    let out = fx.run(&[
        "deploy",
        "web",
        "prod",
        "--yes",
        "--version",
        "2.0.0",
        "--uri",
        &own,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(served(dir.path(), "web-1"), "version 2.0.0\n");
}

#[test]
fn each_target_gets_the_versions_own_bytes_and_their_digest_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    builds(dir.path(), &["1.0.0", "2.0.0", "3.0.0"]);
    let uri = format!("{}/builds/{{version}}", dir.path().display());
    let sums = dir.path().join("SHA256SUMS");
    let digest = |v: &str| {
        let b = dir.path().join("builds").join(v);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_manent"))
            .arg("digest")
            .arg(&b)
            .args(["--version", v])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", said(&out));
        text(&out.stdout)
    };
    // The digests file lists 2.0.0 right and 3.0.0 wrong.
    std::fs::write(
        &sums,
        format!("# builds\n{}{}  3.0.0\n", digest("2.0.0"), "0".repeat(64)),
    )
    .unwrap();
    let fx = fixture(
        dir.path(),
        &uri,
        &format!(", sha256s: \"{}\"", sums.display()),
    );
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", "2.0.0"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    for t in ["web-1", "web-2"] {
        assert_eq!(served(dir.path(), t), "version 2.0.0\n", "{t}");
    }
    let recorded: Vec<String> = fx
        .db()
        .prepare("SELECT artifact FROM releases WHERE version = '2.0.0'")
        .unwrap()
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(recorded.len(), 2, "{recorded:?}");
    let want = digest("2.0.0");
    let want = want.split_whitespace().next().unwrap();
    for a in &recorded {
        let a: serde_json::Value = serde_json::from_str(a).unwrap();
        assert_eq!(a["sha256"], want, "{a}");
        assert!(a["uri"].as_str().unwrap().ends_with("/builds/2.0.0"), "{a}");
    }
    // 3.0.0's bytes are not what the digests file says: refused, nothing copied.
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", "3.0.0"]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("nothing was copied") && said(&out).contains("3.0.0"),
        "{}",
        said(&out)
    );
    assert!(!dir.path().join("srv/web-1/releases/3.0.0").exists());
    assert_eq!(served(dir.path(), "web-1"), "version 2.0.0\n");
    // A version the file does not list is not shipped on trust.
    builds(dir.path(), &["4.0.0"]);
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", "4.0.0"]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("has no digest for version 4.0.0"),
        "{}",
        said(&out)
    );
}

/// `web` on one host over ssh (`sshd` on loopback, `port`), from `uri`, one attempt.
fn over_ssh(dir: &std::path::Path, key: &std::path::Path, port: u16, options: &str) -> Fixture {
    Fixture::new(
        &format!(
            "plugins:\n  rc:\n    builtin: remote-copy\n    ssh:\n      port: {port}\n      \
             identity: {}\n      options: [{options}]\n",
            key.display()
        ),
        &[(
            "web",
            &format!(
                "application: web\nartifact: {{type: directory, version: \"1.0.0\", uri: \
                 \"{}/builds/{{version}}\"}}\ndeploy:\n  plugin: rc\n  params: {{path: \
                 \"{}/remote/{{target}}\"}}\nmax_retries: 0\nenvironments:\n  prod:\n    \
                 targets: [{{name: web-1, host: 127.0.0.1}}]\n",
                dir.display(),
                dir.display()
            ),
        )],
    )
}

/// [`over_ssh`] to `server`, its key taken on first sight, with the plugin's options
/// `plugin` and ssh options `ssh` (YAML lines, indented) added.
fn on_lab_host(
    dir: &std::path::Path,
    server: &crate::support::sshd::Sshd,
    plugin: &str,
    ssh: &str,
) -> Fixture {
    let fx = over_ssh(
        dir,
        &server.key,
        server.port,
        "StrictHostKeyChecking=no, UserKnownHostsFile=/dev/null, LogLevel=ERROR",
    );
    let config = fx.path().join("manent.yml");
    let yml = std::fs::read_to_string(&config)
        .unwrap()
        .replace("    ssh:\n", &format!("{plugin}    ssh:\n{ssh}"));
    std::fs::write(&config, yml).unwrap();
    fx
}

#[allow(clippy::print_stderr, reason = "a skipped test says why")]
fn sshd() -> Option<crate::support::sshd::Sshd> {
    let s = crate::support::sshd::sshd();
    if s.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "sshd is required in CI (openssh-server)"
        );
        eprintln!("skipped: no sshd on this machine");
    }
    s
}

#[test]
fn a_changed_host_key_fails_once_for_good_quoting_ssh() {
    let Some(server) = sshd() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    builds(dir.path(), &["1.0.0"]);
    // known_hosts holds another key for the host: what ssh says when the host key changed.
    let other = dir.path().join("other");
    let ok = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&other)
        .status()
        .unwrap();
    assert!(ok.success());
    let public = std::fs::read_to_string(other.with_extension("pub")).unwrap();
    let known = dir.path().join("known_hosts");
    std::fs::write(
        &known,
        format!(
            "[127.0.0.1]:{} {}\n",
            server.port,
            public
                .split_whitespace()
                .take(2)
                .collect::<Vec<_>>()
                .join(" ")
        ),
    )
    .unwrap();
    let fx = over_ssh(
        dir.path(),
        &server.key,
        server.port,
        &format!(
            "StrictHostKeyChecking=yes, UserKnownHostsFile={}",
            known.display()
        ),
    );
    let app = std::fs::read_to_string(fx.path().join("apps/web.yml"))
        .unwrap()
        .replace("max_retries: 0", "max_retries: 3");
    std::fs::write(fx.path().join("apps/web.yml"), app).unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let all = said(&out);
    assert!(
        all.contains("ssh refused the host key of 127.0.0.1")
            && all.contains("ssh-keygen -R")
            && all.contains("not retried"),
        "{all}"
    );
    let v = fx.status(&fx.deployments().pop().unwrap());
    assert_eq!(v["targets"][0]["attempt"], 1, "one attempt: {v}");
    assert!(!dir.path().join("remote").exists(), "nothing was copied");
}

/// A TCP relay to `to` whose traffic stops dead (no close, no reset: a link that went away)
/// once `after` bytes went from the client to the server.
fn relay(to: u16, after: usize) -> u16 {
    use std::io::{Read, Write};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (sent, dead) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", to)) else {
                continue;
            };
            for (mut from, mut into, up) in [
                (
                    client.try_clone().unwrap(),
                    server.try_clone().unwrap(),
                    true,
                ),
                (server, client, false),
            ] {
                let (sent, dead) = (sent.clone(), dead.clone());
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16 * 1024];
                    loop {
                        let Ok(n) = from.read(&mut buf) else { return };
                        if n == 0 {
                            return;
                        }
                        if up && sent.fetch_add(n, Ordering::SeqCst) + n > after {
                            dead.store(true, Ordering::SeqCst);
                        }
                        // The link is gone: nothing more crosses, and nothing is closed.
                        while dead.load(Ordering::SeqCst) {
                            std::thread::sleep(std::time::Duration::from_secs(1));
                        }
                        if into.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        }
    });
    port
}

#[test]
fn a_host_whose_link_goes_down_mid_copy_fails_in_seconds_and_nothing_half_done_is_live() {
    let Some(server) = sshd() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    builds(dir.path(), &["1.0.0"]);
    // 12 MB that does not compress: the copy is under way when the link goes.
    let mut big = vec![0u8; 12 << 20];
    let mut x: u32 = 1;
    for b in &mut big {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    std::fs::write(dir.path().join("builds/1.0.0/blob"), big).unwrap();
    let port = relay(server.port, 2 << 20);
    let fx = over_ssh(
        dir.path(),
        &server.key,
        port,
        "StrictHostKeyChecking=no, UserKnownHostsFile=/dev/null, LogLevel=ERROR",
    );
    let started = std::time::Instant::now();
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    // A liveness bound (the step timeout is 30 minutes): ServerAlive says so within ~15 s.
    assert!(
        took < std::time::Duration::from_secs(60),
        "the lost link was said after {took:?}: {}",
        said(&out)
    );
    let current = dir.path().join("remote/web-1/current");
    assert!(
        std::fs::symlink_metadata(&current).is_err(),
        "no half-copied release became current"
    );
}

/// A host that switched to the new release and then failed its health check is not assumed
/// unchanged: an abort asks the plugin where each target is, takes that one back too, and its
/// words are what each target runs, read back.
#[test]
fn an_abort_takes_back_a_failed_host_that_had_switched_and_says_where_each_one_is() {
    use crate::support::fleet::{LEDGER_MANENT, ledger_app};
    let app = ledger_app("").replace(
        "      echo \"done",
        "      if [ -e \"$FIXTURE/unhealthy-$MANENT_TARGET\" ]; then echo \"/health answered \
         500\" >&2; exit 1; fi\n      echo \"done",
    );
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &app)]);
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    std::fs::write(fx.path().join("unhealthy-web-3"), "").unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", "2.0.0"]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let version = |t: &str| {
        std::fs::read_to_string(fx.path().join("fleet").join(t).join("VERSION"))
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    assert_eq!(
        version("web-3"),
        "2.0.0",
        "web-3 switched, then failed its check"
    );
    let id = fx.deployments().pop().unwrap();
    let out = fx.run(&["abort", &id, "--reason", "bad build"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    for t in ["web-1", "web-2", "web-3", "web-4", "web-5", "web-6"] {
        assert_eq!(version(t), "1.0.0", "{t}");
    }
    let why = fx.status(&id)["report"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        why.contains("web-3 1.0.0") && why.contains("(read back)") && !why.contains("still on"),
        "{why}"
    );
}

/// A router environment keeps the release before in its other slot, and its plugin cannot
/// roll targets back in place: `rollback` switches traffic back to that release (blue/green),
/// read back by a client, and journaled with the operator's reason.
#[test]
fn a_rollback_on_a_router_switches_traffic_back_to_the_release_before() {
    use crate::support::nginx::Nginx;
    use crate::support::router::Router;
    let dir = tempfile::tempdir().unwrap();
    let Some(n) = Nginx::start(dir.path(), 1, "1.0.0") else {
        assert!(std::env::var_os("CI").is_none(), "CI installs nginx");
        return;
    };
    n.build("2.0.0", true);
    n.build("3.0.0", true);
    let app = format!(
        "application: web\nartifact: {{type: directory, version: \"2.0.0\", uri: \"{}\"}}\n\
         deploy:\n  plugin: edge\nstrategy:\n  canary:\n    steps:\n      - weight: 50\n      \
         - pause: {{}}\nenvironments:\n  prod:\n    targets:\n{}",
        n.artifact_uri(),
        n.targets_yml()
    );
    let fx = Fixture::new(&n.manent_yml("edge"), &[("web", &app)]);
    for v in ["2.0.0", "3.0.0"] {
        let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", v]);
        assert_eq!(out.status.code(), Some(7), "{}", said(&out));
        let id = fx.deployments().pop().unwrap();
        let out = fx.run(&["promote", "--full", &id, "--yes"]);
        assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    }
    assert_eq!(n.sample(50, None, "3.0.0"), (50, 0));
    let out = fx.run(&[
        "rollback",
        "web",
        "prod",
        "--yes",
        "--reason",
        "3.0.0 is slow",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    // Every request is answered by 2.0.0 now, as a client sees it.
    assert_eq!(n.sample(50, None, "2.0.0"), (50, 0), "{}", said(&out));
    let h: serde_json::Value =
        serde_json::from_slice(&fx.run(&["history", "web", "prod", "--json"]).stdout).unwrap();
    let reasons = h["journal"].to_string();
    assert!(
        reasons.contains("traffic switched back to 2.0.0") && reasons.contains("3.0.0 is slow"),
        "{h}"
    );
}

/// `web` on three local hosts through remote-copy, one at a time, each gated: `pre-target`
/// and `post-target` hooks write a ledger, and `post-target` checks the host's health (the
/// build's `health` file says `ok`). `extra` goes into the application (top level).
fn gated(dir: &std::path::Path, extra: &str) -> Fixture {
    let d = dir.display();
    Fixture::new(
        "plugins:\n  rc:\n    builtin: remote-copy\n",
        &[(
            "web",
            &format!(
                "application: web\nartifact: {{type: directory, version: \"1.0.0\", uri: \
                 \"{d}/builds/{{version}}\"}}\ndeploy:\n  plugin: rc\n  params: {{path: \
                 \"{d}/srv/{{target}}\"}}\nstrategy:\n  rolling: {{batch_size: 1}}\n\
                 max_retries: 0\n{extra}hooks:\n  - name: drain\n    events: [pre-target]\n    \
                 command: echo \"$MANENT_EVENT $MANENT_TARGET $MANENT_VERSION\" >> {d}/ledger\n  \
                 - name: health\n    events: [post-target]\n    timeout: 5s\n    retries: 1\n    \
                 command: echo \"post-target $MANENT_TARGET $MANENT_VERSION\" >> {d}/ledger && \
                 grep -qx ok {d}/srv/{{{{target}}}}/current/health\nenvironments:\n  prod:\n    \
                 targets: [{{name: web-1, host: local}}, {{name: web-2, host: local}}, {{name: \
                 web-3, host: local}}]\n"
            ),
        )],
    )
}

fn build(dir: &std::path::Path, version: &str, health: &str) {
    builds(dir, &[version]);
    std::fs::write(
        dir.join("builds").join(version).join("health"),
        format!("{health}\n"),
    )
    .unwrap();
}

fn ledger(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("ledger"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A rolling deploy checks each host before the next: a build failing its health check stops
/// at the first host; an atomic deploy takes that host back (its gates run for the way back
/// too), and the hosts after it were never touched.
#[test]
fn a_per_host_health_gate_stops_a_bad_build_at_the_first_host() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), "1.0.0", "ok");
    build(dir.path(), "2.0.0", "bad");
    let fx = gated(dir.path(), "atomic: true\n");
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(
        ledger(dir.path()),
        [
            "pre-target web-1 1.0.0",
            "post-target web-1 1.0.0",
            "pre-target web-2 1.0.0",
            "post-target web-2 1.0.0",
            "pre-target web-3 1.0.0",
            "post-target web-3 1.0.0",
        ],
        "each host is gated before the next"
    );
    std::fs::remove_file(dir.path().join("ledger")).unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", "2.0.0"]);
    assert_eq!(out.status.code(), Some(4), "{}", said(&out));
    let all = said(&out);
    assert!(
        all.contains("post-target hook health failed on web-1")
            && all.contains("2.0.0 went live on web-1"),
        "{all}"
    );
    // web-1 went back, and was checked again there; web-2 and web-3 never saw 2.0.0.
    assert_eq!(
        ledger(dir.path()),
        [
            "pre-target web-1 2.0.0",
            "post-target web-1 2.0.0",
            "post-target web-1 2.0.0",
            "pre-target web-1 1.0.0",
            "post-target web-1 1.0.0",
        ],
        "{all}"
    );
    for t in ["web-1", "web-2", "web-3"] {
        assert_eq!(served(dir.path(), t), "version 1.0.0\n", "{t}");
    }
    for t in ["web-2", "web-3"] {
        assert!(
            !dir.path()
                .join("srv")
                .join(t)
                .join("releases/2.0.0")
                .exists(),
            "{t} was touched"
        );
    }
}

/// Without `atomic`, a host that fails its gate waits for an operator: the inbox says so and
/// offers the verbs, and the hosts after it wait too.
#[test]
fn a_failed_per_host_gate_waits_in_the_inbox() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), "1.0.0", "ok");
    build(dir.path(), "2.0.0", "bad");
    let fx = gated(dir.path(), "");
    assert_eq!(
        fx.run(&["deploy", "web", "prod", "--yes"]).status.code(),
        Some(0)
    );
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", "2.0.0"]);
    assert_ne!(out.status.code(), Some(0), "{}", said(&out));
    let id = fx.deployments().pop().unwrap();
    let inbox = said(&fx.run(&["inbox"]));
    assert!(
        inbox.contains(&id) && inbox.contains("web-1") && !inbox.contains("nothing waits"),
        "{inbox}"
    );
    assert_eq!(served(dir.path(), "web-2"), "version 1.0.0\n");
    let out = fx.run(&["abort", &id, "--reason", "bad build"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(served(dir.path(), "web-1"), "version 1.0.0\n");
}

/// Per-target hooks are refused where they cannot run (a canary), and a delete or a
/// `{{target}}` where it means nothing, each naming the hook.
#[test]
fn per_target_hooks_are_refused_where_they_mean_nothing() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), "1.0.0", "ok");
    for (extra, hooks, says) in [
        (
            "",
            "  - {name: h, events: [post-target, post-deploy], command: \"echo {{target}}\"}\n",
            "{{target}} and {{host}} are filled in only for pre-target",
        ),
        (
            "",
            "  - {name: h, events: [post-target], command: \"true\", delete: \"true\"}\n",
            "has no `delete:`",
        ),
    ] {
        let fx = gated(dir.path(), extra);
        let file = fx.path().join("apps/web.yml");
        let app = std::fs::read_to_string(&file)
            .unwrap()
            .replace("hooks:\n", &format!("hooks:\n{hooks}"));
        std::fs::write(&file, app).unwrap();
        let out = fx.run(&["validate"]);
        assert_eq!(out.status.code(), Some(2), "{}", said(&out));
        assert!(said(&out).contains(says), "{}", said(&out));
    }
}

/// remote-copy's own gates over ssh: `restart` runs on the host after each switch and `ready`
/// is polled there; a build that never gets ready fails its host (an atomic deploy takes it
/// back and restarts the release before). Through `sudo -n` (with `copy: scp`) the copy is a
/// tar stream, given the owner, group and mode asked.
#[test]
fn remote_copy_restarts_and_waits_for_readiness_on_each_host_over_ssh() {
    let Some(server) = sshd() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    builds(dir.path(), &["1.0.0", "2.0.0"]);
    std::fs::write(dir.path().join("builds/1.0.0/ready"), "").unwrap();
    {
        // Private here: the mode asked is what the host gets.
        use std::os::unix::fs::PermissionsExt;
        let page = dir.path().join("builds/1.0.0/index.html");
        std::fs::set_permissions(page, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    // sudo and another owner need root (the tests' usual user; elsewhere the rest is tested).
    let root = nix_id("-u", "") == 0;
    let (sudo, owner) = if root {
        ("      sudo: true\n", " owner: nobody, group: nogroup,")
    } else {
        ("", "")
    };
    let fx = on_lab_host(dir.path(), &server, "    copy: scp\n", sudo);
    let file = fx.path().join("apps/web.yml");
    let app = std::fs::read_to_string(&file).unwrap().replace(
        "/remote/{target}\"}",
        &format!(
            "/remote/{{target}}\", restart: \"echo $(basename $(pwd -P)) >> {}/restarts\", \
             ready: {{command: \"test -e ready\", timeout: 3s, interval: 1s}},{owner} \
             mode: \"u=rwX,go=rX\"}}\natomic: true",
            dir.path().display()
        ),
    );
    std::fs::write(&file, app).unwrap();
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let release = dir.path().join("remote/web-1/releases/1.0.0");
    {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(release.join("index.html")).unwrap();
        assert_eq!(m.mode() & 0o777, 0o644, "mode");
        if root {
            assert_eq!(m.uid(), nix_id("-u", "nobody"), "owner");
        }
    }
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", "2.0.0"]);
    assert_eq!(out.status.code(), Some(4), "{}", said(&out));
    assert!(
        said(&out).contains("2.0.0 is live on web-1 but not ready within 3s"),
        "{}",
        said(&out)
    );
    let restarts = std::fs::read_to_string(dir.path().join("restarts")).unwrap();
    assert_eq!(
        restarts, "1.0.0\n2.0.0\n1.0.0\n",
        "restarted after each switch"
    );
    let current = std::fs::read_link(dir.path().join("remote/web-1/current")).unwrap();
    assert_eq!(current, std::path::Path::new("releases/1.0.0"));
}

/// `id -u nobody` (`user` empty: this process's user).
fn nix_id(flag: &str, user: &str) -> u32 {
    let out = std::process::Command::new("id")
        .arg(flag)
        .args((!user.is_empty()).then_some(user))
        .output()
        .unwrap();
    text(&out.stdout).trim().parse().unwrap()
}

/// With rsync on both ends, a release's files that did not change are hard links to the live
/// release's (`--link-dest`): what ships is what changed. A file of the same size and time
/// but other bytes (each build's index page, written within a second) is not taken for one.
#[test]
fn rsync_ships_what_changed_and_links_the_rest_to_the_live_release() {
    use std::os::unix::fs::MetadataExt;
    let Some(server) = sshd() else {
        return;
    };
    if !std::path::Path::new("/usr/bin/rsync").exists() {
        assert!(std::env::var_os("CI").is_none(), "CI installs rsync");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    builds(dir.path(), &["1.0.0", "2.0.0"]);
    for v in ["1.0.0", "2.0.0"] {
        std::fs::write(
            dir.path().join("builds").join(v).join("big.js"),
            "x".repeat(1 << 20),
        )
        .unwrap();
    }
    let fx = on_lab_host(dir.path(), &server, "    copy: rsync\n", "");
    for v in ["1.0.0", "2.0.0"] {
        let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", v]);
        assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    }
    let releases = dir.path().join("remote/web-1/releases");
    let (a, b) = (
        std::fs::metadata(releases.join("1.0.0/big.js")).unwrap(),
        std::fs::metadata(releases.join("2.0.0/big.js")).unwrap(),
    );
    assert_eq!(
        a.ino(),
        b.ino(),
        "the unchanged file is linked, not copied again"
    );
    assert_eq!(
        std::fs::read_to_string(releases.join("2.0.0/index.html")).unwrap(),
        "version 2.0.0\n"
    );
    let current = std::fs::read_link(dir.path().join("remote/web-1/current")).unwrap();
    assert_eq!(current, std::path::Path::new("releases/2.0.0"));
}
