//! `exec`: runs the descriptor's shell commands on each target for deploy, current release,
//! rollback and dry-run. Values reach commands in the environment (`MANENT_HOST`,
//! `MANENT_VERSION`, …); a `{{version}}` in a command becomes a reference to its variable, so the
//! shell never parses a value ([`template`]). Commands see a cleared environment, so secrets in
//! manent's own environment reach them only when asked for.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use tokio::io::{AsyncRead, BufReader};

mod template;

use crate::plugin::contract::{
    Deployer, DryRunner, ParallelDeployer, ReleaseInspector, Rollbacker,
};
use crate::plugin::error::PluginError;
use crate::plugin::logger::{Level, Logger};
use crate::plugin::targets::{for_all_targets, for_each_target};
use crate::plugin::types::{
    DeployResult, Release, Request, Target, TargetRelease, TargetResult, TargetStatus,
};

/// Variables every command may use, besides `label.KEY`.
const VARIABLES: &[&str] = &[
    "deployment_id",
    "application",
    "environment",
    "target",
    "host",
    "moniker",
    "version",
    "artifact.type",
    "artifact.name",
    "artifact.uri",
    "artifact.sha256",
    "idempotency_key",
    "attempt",
];

/// Environment variables passed through to commands from manent's own environment.
const PASS_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TMPDIR",
    "TZ",
    "LANG",
    "TERM",
    "SSH_AUTH_SOCK",
];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// The shell that runs commands (`SHELL -c COMMAND`): a POSIX shell (sh, dash, bash, ksh,
    /// zsh), which waits on its first line until manent has recorded it.
    #[serde(default = "default_shell")]
    shell: String,
    /// Run targets of a batch in parallel (declares `parallel_targets`).
    #[serde(default = "yes")]
    parallel: bool,
    /// More variables to pass through from manent's environment.
    #[serde(default)]
    pass_env: Vec<String>,
    /// Variables set for every command.
    #[serde(default)]
    env: BTreeMap<String, String>,
}

fn default_shell() -> String {
    "/bin/sh".into()
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    deploy: Option<String>,
    current_release: Option<String>,
    rollback: Option<String>,
    dry_run: Option<String>,
    #[serde(default)]
    workdir: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    secrets: Vec<String>,
    #[serde(default)]
    permanent_exit_codes: Vec<i32>,
}

/// The `exec` factory.
pub fn factory(
    options: &serde_json::Value,
    log: Logger,
) -> Result<Arc<dyn crate::plugin::Deployer>, PluginError> {
    let options: Options = serde_json::from_value(options.clone())
        .map_err(|e| PluginError::Permanent(format!("options: {e}")))?;
    Ok(Arc::new(Exec { options, log }))
}

struct Exec {
    options: Options,
    log: Logger,
}

fn params(req: &Request) -> Result<Params, PluginError> {
    if req.params.is_null() {
        return Ok(Params::default());
    }
    serde_json::from_value(req.params.clone())
        .map_err(|e| PluginError::Permanent(format!("deploy.params: {e}")))
}

/// The command for `template`: placeholders become references to the variables that carry
/// their values (see [`template`]).
fn render(
    template: &str,
    vars: &BTreeMap<String, String>,
    what: &str,
) -> Result<String, PluginError> {
    template::render(template, vars, env_name, what, VARIABLES)
}

fn variables(req: &Request, t: &Target, to: Option<&Release>) -> BTreeMap<String, String> {
    let mut v = BTreeMap::new();
    let a = &req.artifact;
    for (k, val) in [
        ("deployment_id", req.deployment_id.as_str()),
        ("application", req.application.as_str()),
        ("environment", req.environment.as_str()),
        ("target", t.name()),
        ("host", t.host.as_str()),
        ("version", a.version.as_str()),
        ("artifact.type", a.kind.as_str()),
        ("artifact.name", a.name.as_str()),
        ("artifact.uri", a.uri.as_str()),
        ("artifact.sha256", a.sha256.as_str()),
        ("idempotency_key", req.idempotency_key.as_str()),
    ] {
        v.insert(k.to_owned(), val.to_owned());
    }
    v.insert("moniker".into(), t.moniker.to_string());
    v.insert("attempt".into(), req.attempt.to_string());
    for (k, val) in &t.labels {
        v.insert(format!("label.{k}"), val.clone());
    }
    if let Some(to) = to {
        v.insert("to.version".into(), to.version.clone());
        v.insert("to.uri".into(), to.artifact.uri.clone());
    }
    v
}

/// The environment variable that carries variable `var`: `label.app-tier` → `MANENT_LABEL_APP_TIER`.
fn env_name(var: &str) -> String {
    let name: String = var
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("MANENT_{name}")
}

/// Two variables that would share an environment variable (labels `a-b` and `a_b`) are refused.
fn check_env_names(vars: &BTreeMap<String, String>) -> Result<(), PluginError> {
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    for k in vars.keys() {
        if let Some(other) = seen.insert(env_name(k), k) {
            return Err(PluginError::Permanent(format!(
                "variables `{other}` and `{k}` would both be {}: rename one label",
                env_name(k)
            )));
        }
    }
    Ok(())
}

struct Finished {
    last_stdout: String,
}

impl Exec {
    /// Runs command `which` of the params on target `t` (rolling back: to release `to`).
    async fn run(
        &self,
        req: &Request,
        p: &Params,
        t: &Target,
        which: &str,
        to: Option<&Release>,
    ) -> Result<Finished, PluginError> {
        let template = self.command(p, which)?;
        let vars = variables(req, t, to);
        check_env_names(&vars)?;
        let command = render(template, &vars, which)?;
        // Run only once its process group is recorded (`plugin::processes::gated`).
        let mut cmd = crate::plugin::processes::gated(&self.options.shell, &command);
        cmd.env_clear();
        for name in PASS_ENV
            .iter()
            .copied()
            .chain(self.options.pass_env.iter().map(String::as_str))
        {
            if let Ok(v) = std::env::var(name) {
                cmd.env(name, v);
            }
        }
        // `${secret:NAME}` in `env:` (manent.yml) and `params.env` (the descriptor) is read
        // through the call's secrets: the application must list NAME under deploy.secrets.
        for (k, v) in self.options.env.iter().chain(&p.env) {
            cmd.env(
                k,
                crate::plugin::secrets::substitute(v, &req.secrets).await?,
            );
        }
        for (k, v) in &vars {
            cmd.env(env_name(k), v);
        }
        for name in &p.secrets {
            cmd.env(
                env_name(&format!("secret.{name}")),
                req.secrets.secret(name).await?,
            );
        }
        if let Some(dir) = &p.workdir {
            cmd.current_dir(dir);
        }
        // One pipe for stdout and stderr: the lines keep the order the command wrote them.
        let output = crate::plugin::lines::output_pipe(&mut cmd)
            .map_err(|e| PluginError::Failed(format!("cannot make a pipe for {which}: {e}")))?;
        cmd.process_group(0).kill_on_drop(true);
        crate::sys::die_with_parent(&mut cmd);
        let log = self.log.for_deployment(&req.deployment_id).for_target(t);
        let mut child = cmd.spawn().map_err(|e| {
            PluginError::Failed(format!(
                "cannot start {} for {which}: {e}",
                self.options.shell
            ))
        })?;
        // Dropping this future (a timeout, a cancelled deploy) kills the command's whole group;
        // an engine that dies leaves a record for the next one to kill it.
        let _tracked = child.id().map(|pid| req.processes.track(pid));
        let group = crate::sys::GroupKill::armed(child.id());
        // Recorded: the command may run (a gate that cannot be opened: it never started).
        crate::plugin::processes::open_gate(&mut child)
            .await
            .map_err(|e| PluginError::Failed(format!("{which}: cannot start the command: {e}")))?;
        // Its copies of the pipe's write end: the pipe ends when the command's do.
        drop(cmd);
        let (last_out, status) = tokio::join!(lines(Some(output), &log), child.wait());
        group.disarm();
        let status = status.map_err(|e| PluginError::Failed(format!("{which}: {e}")))?;
        if status.success() {
            return Ok(Finished {
                last_stdout: last_out,
            });
        }
        let why = match status.code() {
            Some(c) => format!("exit status {c}"),
            None => "killed by a signal".to_owned(),
        };
        let detail = last_out;
        let msg = if detail.is_empty() {
            format!("{which} command failed on {} ({why})", t.name())
        } else {
            format!("{which} command failed on {} ({why}): {detail}", t.name())
        };
        if status
            .code()
            .is_some_and(|c| p.permanent_exit_codes.contains(&c))
        {
            Err(PluginError::Permanent(msg))
        } else {
            Err(PluginError::Failed(msg))
        }
    }

    fn command<'a>(&self, p: &'a Params, which: &str) -> Result<&'a str, PluginError> {
        let c = match which {
            "deploy" => &p.deploy,
            "current_release" => &p.current_release,
            "rollback" => &p.rollback,
            _ => &p.dry_run,
        };
        c.as_deref().ok_or_else(|| {
            PluginError::Unimplemented(format!("exec: deploy.params has no `{which}` command"))
        })
    }
}

/// Logs each line of a command's output (stdout and stderr, in the order written) and returns
/// the last non-empty one.
async fn lines<R: AsyncRead + Unpin>(stream: Option<R>, log: &Logger) -> String {
    let Some(stream) = stream else {
        return String::new();
    };
    let mut reader = crate::plugin::lines::Lines::new(BufReader::new(stream));
    let mut last = String::new();
    let mut read = 0u32;
    while let Some(line) = reader.next().await {
        // Every 64 lines: while the database or the JSON log is behind but moving, the command
        // waits on its pipe rather than its lines going unstored.
        read = read.wrapping_add(1);
        if read.is_multiple_of(64) {
            log.wait_for_room().await;
        }
        log.log(Level::Info, &line, &[]);
        if !line.trim().is_empty() {
            last = line.trim().to_owned();
        }
    }
    last
}

#[async_trait]
impl Deployer for Exec {
    async fn validate(&self, req: &Request) -> Result<(), PluginError> {
        let p = params(req)?;
        let deploy = p.deploy.as_deref().ok_or_else(|| {
            PluginError::Permanent("exec: deploy.params needs a `deploy` command".into())
        })?;
        for t in &req.targets {
            let to = Release::default();
            let vars = variables(req, t, Some(&to));
            check_env_names(&vars)?;
            render(deploy, &vars, "deploy")?;
            for (which, c) in [
                ("current_release", &p.current_release),
                ("rollback", &p.rollback),
                ("dry_run", &p.dry_run),
            ] {
                if let Some(c) = c {
                    render(c, &vars, which)?;
                }
            }
        }
        Ok(())
    }

    async fn deploy(&self, req: &Request) -> Result<DeployResult, PluginError> {
        let p = &params(req)?;
        // A missing command fails the call before any target.
        self.command(p, "deploy")?;
        let outcome = for_each_target(req, |t| async move {
            let done = self.run(req, p, &t, "deploy", None).await?;
            Ok(TargetResult::new(TargetStatus::Deployed).with_message(done.last_stdout))
        })
        .await;
        DeployResult::of("exec", &req.artifact.version, outcome)
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

impl ParallelDeployer for Exec {
    fn parallel_targets(&self) -> bool {
        self.options.parallel
    }
}

#[async_trait]
impl DryRunner for Exec {
    async fn dry_run(&self, req: &Request) -> Result<DeployResult, PluginError> {
        let p = &params(req)?;
        // A missing command fails the call before any target.
        self.command(p, "dry_run")?;
        let (targets, _) = for_all_targets(req, |t| async move {
            let done = self.run(req, p, &t, "dry_run", None).await?;
            Ok(TargetResult::new(TargetStatus::Unchanged).with_message(done.last_stdout))
        })
        .await;
        Ok(DeployResult {
            plugin: "exec".into(),
            targets,
            release: String::new(),
        })
    }
}

#[async_trait]
impl ReleaseInspector for Exec {
    async fn current_release(&self, req: &Request) -> Result<Vec<TargetRelease>, PluginError> {
        let p = &params(req)?;
        // A missing command fails the call before any target.
        self.command(p, "current_release")?;
        let mut out = Vec::with_capacity(req.targets.len());
        for t in &req.targets {
            let done = self.run(req, p, t, "current_release", None).await?;
            out.push(TargetRelease {
                host: t.host.clone(),
                version: done.last_stdout,
            });
        }
        Ok(out)
    }
}

#[async_trait]
impl Rollbacker for Exec {
    async fn rollback(&self, req: &Request, to: &Release) -> Result<DeployResult, PluginError> {
        let p = &params(req)?;
        // A missing command fails the call before any target.
        self.command(p, "rollback")?;
        let outcome = for_all_targets(req, |t| async move {
            let done = self.run(req, p, &t, "rollback", Some(to)).await?;
            Ok(TargetResult::new(TargetStatus::RolledBack).with_message(done.last_stdout))
        })
        .await;
        DeployResult::of("exec", &to.version, outcome)
    }
}
