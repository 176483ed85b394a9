//! What `remote-copy` is given: its options in `manent.yml` (ssh, releases kept, how files are
//! copied) and a descriptor's `deploy.params` (path, restart, readiness, owner, mode), each
//! checked before any host is touched.

use super::*;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Ssh {
    #[serde(default)]
    pub(super) user: Option<String>,
    #[serde(default)]
    pub(super) port: Option<u16>,
    #[serde(default)]
    pub(super) identity: Option<String>,
    /// Extra `-o` options, e.g. `StrictHostKeyChecking=accept-new`: they come before manent's
    /// defaults, so they win.
    #[serde(default)]
    pub(super) options: Vec<String>,
    /// An ssh_config file (`-F`).
    #[serde(default)]
    pub(super) config: Option<String>,
    /// Jump hosts (`-J`, ProxyJump): `bastion.example.com` or `user@jump:2222`.
    #[serde(default)]
    pub(super) proxy_jump: Option<String>,
    /// Share connections to a host (default true).
    #[serde(default = "yes")]
    pub(super) multiplex: bool,
    /// Run everything on the target through `sudo -n` (a login that is not root); copies
    /// then go through a tar stream, not scp.
    #[serde(default)]
    pub(super) sudo: bool,
}

pub(super) fn yes() -> bool {
    true
}

/// What every ssh and scp gets after the operator's own options: a dead host cannot hang a
/// deploy (said within about 15 s), and a changed host key is never accepted silently.
pub(super) const SSH_DEFAULTS: &[&str] = &[
    "BatchMode=yes",
    "ConnectTimeout=10",
    "ServerAliveInterval=5",
    "ServerAliveCountMax=3",
];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Options {
    #[serde(default = "no_ssh_options")]
    pub(super) ssh: Ssh,
    /// Releases kept per target (default 5, at least 2 so a rollback has somewhere to go).
    #[serde(default = "default_keep")]
    pub(super) keep: usize,
    /// How a release reaches a host: `auto` (rsync when both ends have it, else scp),
    /// `rsync` or `scp`.
    #[serde(default)]
    pub(super) copy: CopyWith,
}

/// How a release reaches a host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum CopyWith {
    /// rsync when this machine and the host both have it, else scp (or tar with sudo).
    #[default]
    Auto,
    /// rsync, hard-linking what did not change from the live release (`--link-dest`).
    Rsync,
    /// scp (tar through ssh with sudo).
    Scp,
}

/// Whether this machine has rsync on its `PATH` (looked up once).
pub(super) fn rsync_here() -> bool {
    static HERE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HERE.get_or_init(|| {
        std::env::var_os("PATH").is_some_and(|path| {
            std::env::split_paths(&path).any(|d| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::metadata(d.join("rsync"))
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
        })
    })
}

pub(super) fn no_ssh_options() -> Ssh {
    Ssh {
        user: None,
        port: None,
        identity: None,
        options: Vec::new(),
        config: None,
        proxy_jump: None,
        multiplex: true,
        sudo: false,
    }
}

pub(super) fn default_keep() -> usize {
    5
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Params {
    /// Deploy path on each target; `{target}` and `{host}` are replaced.
    pub(super) path: String,
    #[serde(default)]
    pub(super) keep: Option<usize>,
    /// Run on the target (in the live release's directory) after each switch, a deploy's or
    /// a rollback's: `systemctl restart web`.
    #[serde(default)]
    pub(super) restart: Option<String>,
    /// Polled on the target after the restart until it exits 0: the target is ready.
    #[serde(default)]
    pub(super) ready: Option<Ready>,
    /// The copied release's owner and group (`chown -R`), and mode (`chmod -R`, e.g.
    /// `u=rwX,go=rX`); otherwise the files keep the modes they have here.
    #[serde(default)]
    pub(super) owner: Option<String>,
    #[serde(default)]
    pub(super) group: Option<String>,
    #[serde(default)]
    pub(super) mode: Option<String>,
}

/// A readiness check run on the target.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Ready {
    /// A shell command on the target: `curl -fsS http://127.0.0.1:8080/health`.
    pub(super) command: String,
    /// How long it may take to pass (default 60s).
    #[serde(default)]
    pub(super) timeout: Option<String>,
    /// Between tries (default 2s).
    #[serde(default)]
    pub(super) interval: Option<String>,
}

impl Ready {
    pub(super) fn durations(
        &self,
    ) -> Result<(std::time::Duration, std::time::Duration), PluginError> {
        let parse = |what: &str, v: &Option<String>, default: u64| match v {
            None => Ok(std::time::Duration::from_secs(default)),
            Some(text) => humantime::parse_duration(text.trim())
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    PluginError::Permanent(format!(
                        "remote-copy deploy.params.ready.{what} `{text}`: write a duration like \
                         `30s` or `2m`"
                    ))
                }),
        };
        Ok((
            parse("timeout", &self.timeout, 60)?,
            parse("interval", &self.interval, 2)?,
        ))
    }
}

/// A user or group name `chown` takes (letters, digits, `_`, `-`, `.`; or a number).
pub(super) fn valid_owner(what: &str, v: &str) -> Result<(), PluginError> {
    let ok = !v.is_empty()
        && !v.starts_with('-')
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(PluginError::Permanent(format!(
            "remote-copy deploy.params.{what} `{v}`: a user or group name (letters, digits, _ - .)"
        )))
    }
}

/// A mode `chmod` takes: octal (`0755`) or symbolic (`u=rwX,go=rX`).
pub(super) fn valid_mode(v: &str) -> Result<(), PluginError> {
    let octal = (3..=4).contains(&v.len()) && v.chars().all(|c| ('0'..='7').contains(&c));
    let symbolic = !v.is_empty()
        && v.split(',').all(|clause| {
            let ops = clause.trim_start_matches(['u', 'g', 'o', 'a']);
            !ops.is_empty()
                && ops.starts_with(['+', '-', '='])
                && ops.chars().all(|c| "+-=rwxXst".contains(c))
        });
    if octal || symbolic {
        Ok(())
    } else {
        Err(PluginError::Permanent(format!(
            "remote-copy deploy.params.mode `{v}`: an octal mode (`0755`) or a symbolic one \
             (`u=rwX,go=rX`)"
        )))
    }
}

impl Params {
    /// Everything that can be checked before a target is touched.
    pub(super) fn check(&self) -> Result<(), PluginError> {
        if let Some(o) = &self.owner {
            valid_owner("owner", o)?;
        }
        if let Some(g) = &self.group {
            valid_owner("group", g)?;
        }
        if let Some(m) = &self.mode {
            valid_mode(m)?;
        }
        if let Some(r) = &self.ready {
            if r.command.trim().is_empty() {
                return Err(PluginError::Permanent(
                    "remote-copy deploy.params.ready.command is empty".into(),
                ));
            }
            r.durations()?;
        }
        if self.restart.as_deref().is_some_and(|r| r.trim().is_empty()) {
            return Err(PluginError::Permanent(
                "remote-copy deploy.params.restart is empty".into(),
            ));
        }
        Ok(())
    }
}
