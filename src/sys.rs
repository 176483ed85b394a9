//! The few operating-system calls std does not offer: user ids, signals to processes and
//! process groups, whether one is alive, the host name, the clock in epoch ms, a child that
//! dies with its parent, and the TLS client setup (a private CA, as PostgreSQL's); who a
//! process is ([`account`], [`process`]) and the rules for the files the engine keeps
//! ([`files`]).
#![allow(unsafe_code, reason = "libc calls with no memory arguments")]

pub mod account;
pub mod files;
pub mod process;
pub mod sock_diag;

/// This process's effective user id: whose files it creates and may trust.
pub fn euid() -> u32 {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// This process's real user id: who started it (sudo sets it to root).
pub fn uid() -> u32 {
    // SAFETY: getuid(2) cannot fail and touches no memory.
    unsafe { libc::getuid() }
}

/// Sends SIGKILL to this very process: what `kill -9` does, used by crash failpoints.
pub fn kill_self() -> ! {
    // SAFETY: kill(2) with our own pid and a constant signal touches no memory.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    std::process::abort()
}

/// Sends `signal` to process `pid`; false when the process does not exist or is not ours.
pub fn signal(pid: u32, signal: i32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) takes plain integers.
    unsafe { libc::kill(pid, signal) == 0 }
}

/// True when a process with this pid exists (signal 0 probes without sending anything).
pub fn process_alive(pid: u32) -> bool {
    signal(pid, 0)
}

/// What identifies a process across pid reuse and reboots: the boot and its start time
/// (`None` when it does not exist).
pub fn process_identity(pid: u32) -> Option<String> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`: comm may hold spaces, so count from the last ')'.
    let start = stat
        .rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .to_owned();
    Some(format!("{} {start}", boot.trim()))
}

/// This machine's host name, as `hostname` prints it.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// Milliseconds since the Unix epoch, the unit of every timestamp in the database.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Kills a process group when dropped, unless disarmed first: what a start or a call that did
/// not finish (failed, or its future dropped) leaves running.
#[derive(Debug)]
pub struct GroupKill(Option<u32>);

impl GroupKill {
    /// Armed for the group led by `pgid` (0 or none: nothing).
    pub fn armed(pgid: impl Into<Option<u32>>) -> Self {
        GroupKill(pgid.into().filter(|p| *p > 0))
    }

    /// The group goes on: nothing is killed.
    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            kill_group(pid);
        }
    }
}

/// SIGKILL to every process of group `pgid` (a command started in its own group).
pub fn kill_group(pgid: u32) {
    if let Ok(pgid) = libc::pid_t::try_from(pgid) {
        // SAFETY: kill(2) takes plain integers; a negative pid addresses the group.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// Points file descriptor 1 at whatever descriptor 2 is: from then on anything printed on
/// stdout arrives on stderr (a plugin after its handshake line).
pub fn stdout_to_stderr() {
    // SAFETY: dup2(2) takes plain descriptors; both are open for the life of the process.
    unsafe {
        libc::dup2(2, 1);
    }
}

/// Asks the kernel for a pipe buffer of `bytes` on `fd` (Linux's `F_SETPIPE_SZ`; an unprivileged
/// process gets up to /proc/sys/fs/pipe-max-size, 1 MiB by default). A writer that floods the
/// pipe then blocks, and wakes its reader, far less often. False when refused.
pub fn grow_pipe(fd: &impl std::os::fd::AsRawFd, bytes: usize) -> bool {
    let Ok(bytes) = libc::c_int::try_from(bytes) else {
        return false;
    };
    // SAFETY: fcntl(2) on a descriptor the caller owns, with an integer argument.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, bytes) >= 0 }
}

/// True while any process of group `pgid` exists.
pub fn group_alive(pgid: u32) -> bool {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return false;
    };
    // SAFETY: kill(2) with signal 0 only probes; a negative pid addresses the group.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

/// The child `cmd` starts gets SIGKILL when this process dies (Linux's `PR_SET_PDEATHSIG`), so an
/// engine killed with `kill -9` does not leave it running. (Its own children are reaped by the
/// next engine: see `plugin::processes`.)
pub fn die_with_parent(cmd: &mut tokio::process::Command) {
    die_with_parent_std(cmd.as_std_mut());
}

/// `die_with_parent` for a `std::process::Command`. Linux sends the signal when the *thread*
/// that started the child ends, so start long-lived children from a thread that lives as long.
pub fn die_with_parent_std(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: between fork and exec the closure calls only prctl(2) and getppid(2), both
    // async-signal-safe, and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before the prctl: then exit rather than run orphaned.
            if libc::getppid() == 1 {
                return Err(std::io::Error::other(
                    "the engine that started it has exited",
                ));
            }
            Ok(())
        });
    }
}

/// The name of the user this process runs as (its real user id), from the password database.
pub fn user_name() -> Option<String> {
    account::user_by_id(uid()).map(|u| u.name)
}

/// A TLS client configuration (rustls, aws-lc-rs) trusting the system's certificate authorities
/// and, with `extra_ca`, those in that PEM file (a private CA, as PostgreSQL's `sslrootcert`);
/// with how many authorities it trusts.
pub fn tls_client_config(
    extra_ca: Option<&std::path::Path>,
) -> Result<(rustls::ClientConfig, usize), String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for bundle in [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/cert.pem",
    ] {
        if let Ok(iter) = CertificateDer::pem_file_iter(bundle) {
            for cert in iter.flatten() {
                let _ = roots.add(cert);
            }
            break;
        }
    }
    if let Some(path) = extra_ca {
        let iter = CertificateDer::pem_file_iter(path).map_err(|e| {
            format!(
                "cannot read the certificate authority {}: {e}",
                path.display()
            )
        })?;
        let mut added = 0;
        for cert in iter {
            let cert =
                cert.map_err(|e| format!("{} is not a PEM certificate file: {e}", path.display()))?;
            roots
                .add(cert)
                .map_err(|e| format!("{}: a certificate is not usable: {e}", path.display()))?;
            added += 1;
        }
        if added == 0 {
            return Err(format!("{} holds no certificate", path.display()));
        }
    }
    let trusted = roots.len();
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok((config, trusted))
}
