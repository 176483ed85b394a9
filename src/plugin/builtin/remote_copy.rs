//! `remote-copy`: Capistrano-style releases. Each target keeps `releases/<version>` under its
//! deploy path and a `current` symlink switched atomically (a rename); the newest `keep`
//! releases stay for rollbacks. A target is a local directory (host `local` or `localhost`) or
//! a host reached with the system's ssh, and rsync (files that did not change hard-linked to the
//! live release) or scp. Compiled in, and served by the same factory as the external binary
//! `manent-plugin-remote-copy`.
//!
//! ssh cannot hang a deploy: every connection has `ConnectTimeout=10`, `ServerAliveInterval=5`
//! and `ServerAliveCountMax=3` (a host that vanishes is said within about 15 s), unless the
//! options given say otherwise (ssh takes the first value it is given, and yours come first).
//! Connections to a host are shared (`ControlMaster=auto`, `ControlPersist=60s`, their sockets
//! in a directory of the plugin's own, 0700). A host key that does not match `known_hosts` is a
//! permanent error quoting ssh, never retried.

mod settings;

use std::process::Stdio;
use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;

use crate::plugin::builtin::sh_quote;
use crate::plugin::contract::{
    Deployer, DryRunner, ParallelDeployer, ReleaseInspector, Rollbacker,
};
use crate::plugin::error::PluginError;
use crate::plugin::logger::Logger;
use crate::plugin::targets::{for_all_targets, for_each_target};
use crate::plugin::types::{
    DeployResult, Release, Request, Target, TargetRelease, TargetResult, TargetStatus,
};
use settings::*;

/// Marks a release directory as complete; a half-copied one has none and is copied again.
const MARKER: &str = ".manent-release";

/// The `remote-copy` factory.
pub fn factory(options: &serde_json::Value, log: Logger) -> Result<Arc<dyn Deployer>, PluginError> {
    let options: Options = if options.is_null() {
        serde_json::from_value(serde_json::json!({}))
    } else {
        serde_json::from_value(options.clone())
    }
    .map_err(|e| PluginError::Permanent(format!("options: {e}")))?;
    if options.keep < 2 {
        return Err(PluginError::Permanent(
            "keep must be at least 2: a rollback needs the release before".into(),
        ));
    }
    // Shared connections' sockets: a directory of this plugin's own (0700 by tempfile).
    let control = if options.ssh.multiplex {
        tempfile::Builder::new()
            .prefix("manent-ssh-")
            .tempdir()
            .ok()
    } else {
        None
    };
    Ok(Arc::new(RemoteCopy {
        options,
        log,
        control,
    }))
}

struct RemoteCopy {
    options: Options,
    log: Logger,
    /// Where shared connections' sockets are (removed with the plugin).
    control: Option<tempfile::TempDir>,
}

fn params(req: &Request) -> Result<Params, PluginError> {
    serde_json::from_value(req.params.clone()).map_err(|e| {
        PluginError::Permanent(format!("remote-copy deploy.params: {e} (it needs `path`)"))
    })
}

fn is_local(t: &Target) -> bool {
    matches!(t.host.as_str(), "" | "local" | "localhost")
        || t.labels.get("transport").is_some_and(|v| v == "local")
}

fn valid_version(v: &str) -> Result<(), PluginError> {
    if v.is_empty() || v.starts_with('.') || v.contains('/') || v.contains(char::is_whitespace) {
        return Err(PluginError::Permanent(format!(
            "version `{v}` cannot name a release directory (no slashes, spaces or leading dot)"
        )));
    }
    Ok(())
}

impl RemoteCopy {
    fn base(&self, p: &Params, t: &Target) -> String {
        p.path
            .replace("{target}", t.name())
            .replace("{host}", &t.host)
    }

    fn ssh_args(&self, scp: bool) -> Vec<String> {
        let s = &self.options.ssh;
        let mut a: Vec<String> = Vec::new();
        if let Some(f) = &s.config {
            a.push("-F".into());
            a.push(f.clone());
        }
        // The operator's options first: ssh keeps the first value of each.
        for o in &s.options {
            a.push("-o".into());
            a.push(o.clone());
        }
        for o in SSH_DEFAULTS {
            a.push("-o".into());
            a.push((*o).into());
        }
        if let Some(dir) = &self.control {
            for o in [
                "ControlMaster=auto".to_owned(),
                format!("ControlPath={}/%C", dir.path().display()),
                "ControlPersist=60s".to_owned(),
            ] {
                a.push("-o".into());
                a.push(o);
            }
        }
        if let Some(j) = &s.proxy_jump {
            a.push("-J".into());
            a.push(j.clone());
        }
        if let Some(port) = s.port {
            a.push(if scp { "-P".into() } else { "-p".into() });
            a.push(port.to_string());
        }
        if let Some(id) = &s.identity {
            a.push("-i".into());
            a.push(id.clone());
        }
        a
    }

    fn destination(&self, t: &Target) -> String {
        match &self.options.ssh.user {
            Some(u) => format!("{u}@{}", t.host),
            None => t.host.clone(),
        }
    }

    /// Runs a shell script on the target; its stdout.
    async fn sh(&self, t: &Target, script: &str) -> Result<String, PluginError> {
        let mut cmd = if is_local(t) {
            let mut c = tokio::process::Command::new("sh");
            c.arg("-c").arg(script);
            c
        } else {
            let mut c = tokio::process::Command::new("ssh");
            c.args(self.ssh_args(false))
                .arg(self.destination(t))
                .arg(self.remote_sh(script));
            c
        };
        run(&mut cmd, t).await
    }

    /// The remote command line that runs `script` (through `sudo -n` when asked).
    fn remote_sh(&self, script: &str) -> String {
        let sudo = if self.options.ssh.sudo {
            "sudo -n "
        } else {
            ""
        };
        format!("{sudo}sh -c {}", sh_quote(script))
    }

    /// Whether releases reach `t` with rsync: asked, or (`auto`) both ends have it.
    async fn with_rsync(&self, t: &Target) -> Result<bool, PluginError> {
        match self.options.copy {
            CopyWith::Scp => Ok(false),
            CopyWith::Rsync => Ok(true),
            CopyWith::Auto if !rsync_here() => Ok(false),
            CopyWith::Auto => Ok(self
                .sh(t, "command -v rsync >/dev/null 2>&1 && echo yes || true")
                .await?
                .trim()
                == "yes"),
        }
    }

    /// rsync of `source` into `dest` on `t`, files that did not change hard-linked from the
    /// release in `like` (the live one); owned by the user that writes them.
    async fn rsync(
        &self,
        t: &Target,
        (source, is_dir): (&str, bool),
        dest: &str,
        like: Option<&str>,
    ) -> Result<(), PluginError> {
        let shell = std::iter::once("ssh".to_owned())
            .chain(self.ssh_args(false))
            .map(|a| sh_quote(&a))
            .collect::<Vec<_>>()
            .join(" ");
        let mut cmd = tokio::process::Command::new("rsync");
        // --checksum: a file is linked from the live release only when its bytes are the
        // same, never on rsync's quick check (size and time), which two builds made in one
        // second pass with different contents.
        cmd.args([
            "-a",
            "--checksum",
            "--no-owner",
            "--no-group",
            "--delete",
            "-e",
        ])
        .arg(shell);
        if self.options.ssh.sudo {
            cmd.arg("--rsync-path=sudo -n rsync");
        }
        if let Some(like) = like {
            cmd.arg(format!("--link-dest={like}"));
        }
        cmd.arg(if is_dir {
            format!("{source}/")
        } else {
            source.to_owned()
        })
        .arg(format!("{}:{dest}/", self.destination(t)));
        run(&mut cmd, t).await.map(|_| ())
    }

    /// Copies the artifact into `dest` (which must not exist yet) on the target; `like` is the
    /// live release, which an rsync hard-links unchanged files from.
    async fn copy(
        &self,
        t: &Target,
        source: &str,
        dest: &str,
        like: Option<&str>,
    ) -> Result<(), PluginError> {
        let is_dir = std::fs::metadata(source)
            .map_err(|e| PluginError::Permanent(format!("artifact {source} cannot be read: {e}")))?
            .is_dir();
        if !is_local(t) && self.with_rsync(t).await? {
            return self.rsync(t, (source, is_dir), dest, like).await;
        }
        if is_local(t) {
            let script = if is_dir {
                format!(
                    "mkdir -p {d} && cp -a {s}/. {d}/",
                    d = sh_quote(dest),
                    s = sh_quote(source)
                )
            } else {
                format!(
                    "mkdir -p {d} && cp -a {s} {d}/",
                    d = sh_quote(dest),
                    s = sh_quote(source)
                )
            };
            self.sh(t, &script).await.map(|_| ())
        } else if self.options.ssh.sudo {
            // scp writes as the login; the release is written as sudo's user, from a tar
            // stream read by a remote `tar -x`.
            let (dir, name) = if is_dir {
                (source.to_owned(), ".".to_owned())
            } else {
                let p = std::path::Path::new(source);
                (
                    p.parent()
                        .filter(|d| !d.as_os_str().is_empty())
                        .map_or(".".into(), |d| d.display().to_string()),
                    p.file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                )
            };
            let mut tar = tokio::process::Command::new("tar");
            tar.arg("-C")
                .arg(&dir)
                .args(["-cf", "-", "--"])
                .arg(&name)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true);
            let mut tar = tar
                .spawn()
                .map_err(|e| PluginError::Failed(format!("{}: cannot run tar: {e}", t.name())))?;
            let stream: Stdio = tar
                .stdout
                .take()
                .and_then(|o| o.try_into().ok())
                .ok_or_else(|| PluginError::Failed(format!("{}: tar gave no output", t.name())))?;
            let mut ssh = tokio::process::Command::new("ssh");
            ssh.args(self.ssh_args(false))
                .arg(self.destination(t))
                .arg(self.remote_sh(&format!(
                    "mkdir -p {d} && tar --no-same-owner -xf - -C {d}",
                    d = sh_quote(dest)
                )))
                .stdin(stream);
            let (sent, packed) = tokio::join!(output(&mut ssh, t), tar.wait_with_output());
            let packed = packed.map_err(|e| {
                PluginError::Failed(format!("{}: tar of {source} failed: {e}", t.name()))
            })?;
            if !packed.status.success() {
                return Err(PluginError::Permanent(format!(
                    "{}: tar could not read {source}: {}",
                    t.name(),
                    String::from_utf8_lossy(&packed.stderr).trim()
                )));
            }
            sent.map(|_| ())
        } else {
            let remote = format!("{}:{dest}", self.destination(t));
            if !is_dir {
                self.sh(t, &format!("mkdir -p {}", sh_quote(dest))).await?;
            }
            let mut cmd = tokio::process::Command::new("scp");
            cmd.args(self.ssh_args(true))
                .arg("-r")
                .arg("-p")
                .arg(source)
                .arg(if is_dir { remote } else { format!("{remote}/") });
            run(&mut cmd, t).await.map(|_| ())
        }
    }

    async fn current(&self, p: &Params, t: &Target) -> Result<String, PluginError> {
        let base = sh_quote(&self.base(p, t));
        let out = self
            .sh(t, &format!("readlink {base}/current 2>/dev/null || true"))
            .await?;
        Ok(out.trim().rsplit('/').next().unwrap_or_default().to_owned())
    }

    async fn switch(&self, p: &Params, t: &Target, version: &str) -> Result<(), PluginError> {
        let base = sh_quote(&self.base(p, t));
        let script = format!(
            "set -e; test -f {base}/releases/{v}/{MARKER}; \
             ln -sfn releases/{v} {base}/.current.manent-next; mv -T {base}/.current.manent-next {base}/current",
            v = sh_quote(version)
        );
        self.sh(t, &script).await.map(|_| ())
    }

    /// Gives the copied release `owner`, `group` and `mode`, when asked.
    async fn own(&self, p: &Params, t: &Target, dir: &str) -> Result<(), PluginError> {
        let d = sh_quote(dir);
        let mut script = Vec::new();
        match (&p.owner, &p.group) {
            (Some(o), Some(g)) => script.push(format!("chown -R -- {o}:{g} {d}")),
            (Some(o), None) => script.push(format!("chown -R -- {o} {d}")),
            (None, Some(g)) => script.push(format!("chgrp -R -- {g} {d}")),
            (None, None) => {}
        }
        if let Some(m) = &p.mode {
            script.push(format!("chmod -R -- {m} {d}"));
        }
        if script.is_empty() {
            return Ok(());
        }
        self.sh(t, &format!("set -e; {}", script.join("; ")))
            .await
            .map(|_| ())
    }

    /// After a switch to `version`: `restart`, then `ready` until it passes. A failure says
    /// the release is live but not ready (an abort or an atomic deploy takes it back).
    async fn restart_and_wait(
        &self,
        p: &Params,
        t: &Target,
        version: &str,
        log: &Logger,
    ) -> Result<(), PluginError> {
        let here = format!("cd {}/current", sh_quote(&self.base(p, t)));
        if let Some(restart) = &p.restart {
            self.sh(t, &format!("{here} && {restart}"))
                .await
                .map_err(|e| {
                    PluginError::Permanent(format!(
                        "{version} is live on {} but its restart failed: {e}",
                        t.name()
                    ))
                })?;
            log.info(&format!("restarted on {} ({restart})", t.host));
        }
        self.wait_ready(p, t, version, log).await
    }

    /// Polls `ready` on the target until it passes or its time is up (nothing to do without).
    async fn wait_ready(
        &self,
        p: &Params,
        t: &Target,
        version: &str,
        log: &Logger,
    ) -> Result<(), PluginError> {
        let Some(ready) = &p.ready else {
            return Ok(());
        };
        let here = format!("cd {}/current", sh_quote(&self.base(p, t)));
        let (timeout, interval) = ready.durations()?;
        let deadline = std::time::Instant::now() + timeout;
        let mut tries = 0u32;
        loop {
            tries += 1;
            let last = match self.sh(t, &format!("{here} && {}", ready.command)).await {
                Ok(_) => {
                    log.info(&format!("ready on {} after {tries} tries", t.host));
                    return Ok(());
                }
                Err(e) if e.is_permanent() => return Err(e),
                Err(e) => e.to_string(),
            };
            if std::time::Instant::now() + interval >= deadline {
                return Err(PluginError::Permanent(format!(
                    "{version} is live on {} but not ready within {} ({tries} tries of `{}`); \
                     last: {last}",
                    t.name(),
                    humantime::format_duration(timeout),
                    ready.command
                )));
            }
            tokio::time::sleep(interval).await;
        }
    }

    /// Removes releases beyond `keep`, oldest first, never the live one.
    async fn prune(&self, p: &Params, t: &Target, live: &str) -> Result<(), PluginError> {
        let keep = p.keep.unwrap_or(self.options.keep).max(2);
        let base = sh_quote(&self.base(p, t));
        let script = format!(
            "cd {base}/releases && ls -1t */{MARKER} 2>/dev/null | sed 's,/{MARKER}$,,' | tail -n +{from} | \
             while read r; do [ \"$r\" = {live} ] || rm -rf -- \"$r\"; done",
            from = keep + 1,
            live = sh_quote(live)
        );
        self.sh(t, &script).await.map(|_| ())
    }

    async fn deploy_one(
        &self,
        req: &Request,
        p: &Params,
        t: &Target,
    ) -> Result<TargetResult, PluginError> {
        let v = &req.artifact.version;
        valid_version(v)?;
        let log = self.log.for_deployment(&req.deployment_id).for_target(t);
        let base = self.base(p, t);
        let release = format!("{base}/releases/{v}");
        let live = self.current(p, t).await?;
        if live == *v {
            // Live already (a retry after a failed restart or readiness, or a deploy of what
            // runs): said unchanged only when it is also ready.
            if p.ready.is_some() {
                let log = self.log.for_deployment(&req.deployment_id).for_target(t);
                self.wait_ready(p, t, v, &log).await?;
            }
            return Ok(TargetResult::new(TargetStatus::Unchanged)
                .with_message(format!("{v} is already live")));
        }
        let present = self
            .sh(
                t,
                &format!(
                    "test -f {}/{MARKER} && echo yes || true",
                    sh_quote(&release)
                ),
            )
            .await?;
        if present.trim() != "yes" {
            let source = req
                .artifact
                .uri
                .strip_prefix("file://")
                .unwrap_or(&req.artifact.uri);
            if source.is_empty() {
                return Err(PluginError::Permanent(
                    "artifact.uri is empty: remote-copy copies a file or directory".into(),
                ));
            }
            let partial = format!("{base}/releases/.{v}.partial");
            self.sh(
                t,
                &format!(
                    "mkdir -p {b}/releases && rm -rf {p}",
                    b = sh_quote(&base),
                    p = sh_quote(&partial)
                ),
            )
            .await?;
            log.info(&format!("copying {source} to {}:{release}", t.host));
            let like = (!live.is_empty()).then(|| format!("{base}/releases/{live}"));
            self.copy(t, source, &partial, like.as_deref()).await?;
            self.own(p, t, &partial).await?;
            self.sh(
                t,
                &format!(
                    "touch {p}/{MARKER} && rm -rf {r} && mv {p} {r}",
                    p = sh_quote(&partial),
                    r = sh_quote(&release)
                ),
            )
            .await?;
        }
        self.switch(p, t, v).await?;
        self.restart_and_wait(p, t, v, &log).await?;
        self.prune(p, t, v).await?;
        log.info(&format!(
            "{v} is live on {} (was {})",
            t.host,
            if live.is_empty() { "nothing" } else { &live }
        ));
        Ok(
            TargetResult::new(TargetStatus::Deployed).with_message(format!(
                "{} → {v}",
                if live.is_empty() { "new" } else { &live }
            )),
        )
    }
}

async fn run(cmd: &mut tokio::process::Command, t: &Target) -> Result<String, PluginError> {
    cmd.stdin(Stdio::null());
    output(cmd, t).await
}

/// Runs `cmd` (its stdin as set) on behalf of `t`: its stdout, or why it failed.
async fn output(cmd: &mut tokio::process::Command, t: &Target) -> Result<String, PluginError> {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = cmd.output().await.map_err(|e| {
        PluginError::Failed(format!(
            "{}: cannot run {:?}: {e}",
            t.name(),
            cmd.as_std().get_program()
        ))
    })?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    Err(failure(
        t,
        &out.status,
        &String::from_utf8_lossy(&out.stderr),
    ))
}

/// Why a command on `t` failed: its last words, or — a host key that does not match — ssh's
/// own warning, as a permanent error (a retry would only be refused again, and accepting it is
/// a human's decision).
fn failure(t: &Target, status: &std::process::ExitStatus, err: &str) -> PluginError {
    let changed = err.contains("REMOTE HOST IDENTIFICATION HAS CHANGED");
    if !changed && err.contains("Host key verification failed") {
        // Not a changed key: a host known_hosts does not hold yet (BatchMode cannot ask).
        return PluginError::Permanent(format!(
            "{}: ssh does not know the host key of {} (it is not in known_hosts): add it once \
             you have checked it (`ssh-keyscan {} >> ~/.ssh/known_hosts`, or the option \
             StrictHostKeyChecking=accept-new); not retried",
            t.name(),
            t.host,
            t.host
        ));
    }
    if changed {
        let said: Vec<&str> = err
            .lines()
            .map(str::trim)
            .filter(|l| {
                !l.is_empty()
                    && !l.starts_with("@@@")
                    && !l.starts_with("Please contact")
                    && !l.starts_with("It is also possible")
                    && !l.starts_with("Someone could be")
            })
            .collect();
        return PluginError::Permanent(format!(
            "{}: ssh refused the host key of {}: {} — check the host's key and update \
             known_hosts (`ssh-keygen -R {}`) only if it really changed; not retried",
            t.name(),
            t.host,
            said.join(" "),
            t.host
        ));
    }
    let last = err
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let how = match (
        status.code(),
        std::os::unix::process::ExitStatusExt::signal(status),
    ) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => status.to_string(),
    };
    if last.is_empty() {
        PluginError::Failed(format!("{} ({how}, nothing on stderr)", t.name()))
    } else {
        PluginError::Failed(format!("{} ({how}): {last}", t.name()))
    }
}

#[async_trait]
impl Deployer for RemoteCopy {
    async fn validate(&self, req: &Request) -> Result<(), PluginError> {
        let p = params(req)?;
        p.check()?;
        if !p.path.starts_with('/') {
            return Err(PluginError::Permanent(format!(
                "remote-copy: path `{}` must be absolute",
                p.path
            )));
        }
        valid_version(&req.artifact.version)?;
        let source = req
            .artifact
            .uri
            .strip_prefix("file://")
            .unwrap_or(&req.artifact.uri);
        if source.is_empty() || std::fs::metadata(source).is_err() {
            return Err(PluginError::Permanent(format!(
                "remote-copy: artifact.uri `{}` is not a file or directory on this machine",
                req.artifact.uri
            )));
        }
        Ok(())
    }

    async fn deploy(&self, req: &Request) -> Result<DeployResult, PluginError> {
        let p = params(req)?;
        let outcome = for_each_target(req, |t| {
            let p = &p;
            async move { self.deploy_one(req, p, &t).await }
        })
        .await;
        DeployResult::of("remote-copy", &req.artifact.version, outcome)
    }

    fn dry_runner(&self) -> Option<&dyn DryRunner> {
        Some(self)
    }

    fn release_inspector(&self) -> Option<&dyn ReleaseInspector> {
        Some(self)
    }

    fn rollbacker(&self) -> Option<&dyn Rollbacker> {
        Some(self)
    }

    fn parallel_deployer(&self) -> Option<&dyn ParallelDeployer> {
        Some(self)
    }
}

impl ParallelDeployer for RemoteCopy {
    fn parallel_targets(&self) -> bool {
        true
    }
}

#[async_trait]
impl DryRunner for RemoteCopy {
    async fn dry_run(&self, req: &Request) -> Result<DeployResult, PluginError> {
        let p = params(req)?;
        let (targets, _) = for_all_targets(req, |t| {
            let p = &p;
            async move {
                let live = self.current(p, &t).await?;
                let v = &req.artifact.version;
                let msg = if live == *v {
                    format!("{v} is already live")
                } else {
                    let mut then = String::new();
                    if let Some(r) = &p.restart {
                        then.push_str(&format!(", then run `{r}`"));
                    }
                    if let Some(r) = &p.ready {
                        then.push_str(&format!(", then wait until `{}` passes", r.command));
                    }
                    format!(
                        "would copy {} to {}:{}/releases/{v} and switch current (now {}){then}",
                        req.artifact.uri,
                        t.host,
                        self.base(p, &t),
                        if live.is_empty() { "nothing" } else { &live }
                    )
                };
                Ok(TargetResult::new(TargetStatus::Unchanged).with_message(msg))
            }
        })
        .await;
        Ok(DeployResult {
            plugin: "remote-copy".into(),
            targets,
            release: String::new(),
        })
    }
}

#[async_trait]
impl ReleaseInspector for RemoteCopy {
    async fn current_release(&self, req: &Request) -> Result<Vec<TargetRelease>, PluginError> {
        let p = params(req)?;
        let mut out = Vec::new();
        for t in &req.targets {
            out.push(TargetRelease {
                host: t.host.clone(),
                version: self.current(&p, t).await?,
            });
        }
        Ok(out)
    }
}

#[async_trait]
impl Rollbacker for RemoteCopy {
    async fn rollback(&self, req: &Request, to: &Release) -> Result<DeployResult, PluginError> {
        let p = params(req)?;
        valid_version(&to.version)?;
        let outcome = for_all_targets(req, |t| {
            let p = &p;
            async move {
                let release = format!("{}/releases/{}", self.base(p, &t), to.version);
                let there = self.sh(&t, &format!("test -f {}/{MARKER} && echo yes || true", sh_quote(&release))).await?;
                if there.trim() != "yes" {
                    return Err(PluginError::Permanent(format!(
                        "{}: release {} is no longer on the target (only the newest `keep` releases stay)",
                        t.name(),
                        to.version
                    )));
                }
                self.switch(p, &t, &to.version).await?;
                let log = self.log.for_deployment(&req.deployment_id).for_target(&t);
                self.restart_and_wait(p, &t, &to.version, &log).await?;
                Ok(TargetResult::new(TargetStatus::RolledBack).with_message(format!("current → {}", to.version)))
            }
        })
        .await;
        DeployResult::of("remote-copy", &to.version, outcome)
    }
}
