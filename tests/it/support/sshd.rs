//! Test support: a real sshd on loopback (OpenSSH's `sshd -D`), with a generated host key and a
//! client key authorized for the user the tests run as; stopped when the handle drops. None
//! where OpenSSH's server is not installed (the caller says it skipped).

#![allow(dead_code, reason = "each test binary uses part of the support module")]

use std::time::{Duration, Instant};

/// A real sshd on loopback, with a generated host key and client key.
pub struct Sshd {
    child: std::process::Child,
    pub port: u16,
    pub key: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn sshd() -> Option<Sshd> {
    let sshd = ["/usr/sbin/sshd", "/usr/bin/sshd"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())?;
    // OpenSSH refuses to start without its privilege separation directory.
    let _ = std::fs::create_dir_all("/run/sshd");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let keygen = |file: &str| {
        let ok = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(d.join(file))
            .status()
            .unwrap();
        assert!(ok.success());
    };
    keygen("host_key");
    keygen("client_key");
    std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).unwrap();
    let port = super::ports::free_port();
    let user = String::from_utf8(
        std::process::Command::new("id")
            .arg("-un")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let config = format!(
        "Port {port}\nListenAddress 127.0.0.1\nHostKey {hk}\nAuthorizedKeysFile {ak}\nPasswordAuthentication no\n\
         KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nPermitRootLogin prohibit-password\nStrictModes no\n\
         UsePAM no\nPidFile {pid}\nAllowUsers {user}\nSubsystem sftp internal-sftp\n",
        hk = d.join("host_key").display(),
        ak = d.join("authorized_keys").display(),
        pid = d.join("sshd.pid").display(),
        user = user.trim()
    );
    std::fs::write(d.join("sshd_config"), config).unwrap();
    let child = std::process::Command::new(sshd)
        .arg("-D")
        .arg("-e")
        .arg("-f")
        .arg(d.join("sshd_config"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "sshd did not listen"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(Sshd {
        child,
        port,
        key: d.join("client_key"),
        _dir: dir,
    })
}

impl Sshd {
    /// `ssh` to it as the current user, running `command` there.
    pub fn ssh(&self, command: &str) -> std::process::Command {
        let mut c = std::process::Command::new("ssh");
        c.args(["-p", &self.port.to_string(), "-i"])
            .arg(&self.key)
            .args([
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
                "-o",
                "LogLevel=ERROR",
                "-o",
                "BatchMode=yes",
                "127.0.0.1",
                command,
            ]);
        c
    }
}
