//! `manent-plugin-nginx`: canary releases over a real nginx, as an external plugin built with
//! manent's Rust SDK. Each target is a server of the application with an address in each of two
//! slots (labels `blue` and `green`); the plugin owns one upstream file (`upstreams:`), included
//! by the operator's nginx.conf inside `http`, which splits requests between the stable slot
//! and the candidate (`proxy_pass http://$NAME_pool;`). Every change is rendered to a temporary
//! file, checked with `nginx -t`, put in place (the previous file is restored if the check
//! fails, so nginx never loads a broken config) and reloaded gracefully.
//!
//! A candidate is deployed by copying the artifact directory (`artifact.uri`, `{version}`
//! replaced) into the target's `<slot>_root` label, or by `params.deploy_command`. Testers
//! reach the candidate by a header or a cookie; scale enables that share of the candidate's
//! servers; the actual weight is read back from the rendered file.

mod render;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use manent::plugin::{
    DeployResult, Deployer, Logger, ParallelDeployer, PluginError, Request, SlotDeployer,
    SlotScaler, Target, TargetResult, TargetStatus, TesterRouter, TrafficRouter, for_each_target,
};
use serde::Deserialize;

use render::{Names, Server, Slot, Split};

fn main() {
    manent::plugin::external::serve(factory)
}

/// How long one `nginx -t` or `nginx -s reload` may take.
const NGINX_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// The nginx binary (default: `nginx` on PATH).
    #[serde(default = "default_nginx")]
    nginx: PathBuf,
    /// nginx's prefix (`-p`).
    #[serde(default)]
    prefix: Option<PathBuf>,
    /// The main configuration (`-c`), which includes `upstreams` inside `http`.
    conf: PathBuf,
    /// The file this plugin writes.
    upstreams: PathBuf,
    /// Names in that file: upstream `NAME_split`, variable `$NAME_pool` (default `app`).
    #[serde(default = "default_upstream")]
    upstream: String,
    /// The header that sends a tester to the candidate (value `1`).
    #[serde(default = "default_header")]
    tester_header: String,
    /// The cookie that does (value `1`).
    #[serde(default = "default_cookie")]
    tester_cookie: String,
}

fn default_nginx() -> PathBuf {
    PathBuf::from("nginx")
}
fn default_upstream() -> String {
    "app".into()
}
fn default_header() -> String {
    "X-Canary".into()
}
fn default_cookie() -> String {
    "canary".into()
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    /// A shell command that deploys the candidate on one target, instead of copying the
    /// artifact (`MANENT_SLOT`, `MANENT_SLOT_ADDRESS`, `MANENT_SLOT_ROOT`, `MANENT_TARGET`,
    /// `MANENT_VERSION`, `MANENT_ARTIFACT` in its environment).
    #[serde(default)]
    deploy_command: Option<String>,
}

/// The plugin's factory: checks its options before anything runs.
fn factory(options: &serde_json::Value, log: Logger) -> Result<Arc<dyn Deployer>, PluginError> {
    let opts: Options = serde_json::from_value(options.clone()).map_err(|e| {
        PluginError::Permanent(format!(
            "nginx plugin options: {e} (it needs `conf:` and `upstreams:`; see the plugin's \
             documentation)"
        ))
    })?;
    let bad = |what: &str, v: &str| {
        v.is_empty()
            || !v
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
            || (what == "upstream" && v.contains('-'))
    };
    for (what, v) in [
        ("upstream", &opts.upstream),
        ("tester_header", &opts.tester_header),
        ("tester_cookie", &opts.tester_cookie),
    ] {
        if bad(what, v) {
            return Err(PluginError::Permanent(format!(
                "nginx plugin options: {what} `{v}` must be letters, digits{} and `_`",
                if what == "upstream" { "" } else { ", `-`" }
            )));
        }
    }
    Ok(Arc::new(Nginx {
        opts,
        log,
        lock: tokio::sync::Mutex::new(()),
    }))
}

struct Nginx {
    opts: Options,
    log: Logger,
    /// One change of the upstream file at a time.
    lock: tokio::sync::Mutex<()>,
}

fn names(o: &Options) -> Names {
    Names {
        upstream: o.upstream.clone(),
        header: o.tester_header.clone(),
        cookie: o.tester_cookie.clone(),
    }
}

/// The servers of the request's targets: labels `blue` and `green` are their addresses.
fn servers(req: &Request) -> Result<Vec<Server>, PluginError> {
    req.targets
        .iter()
        .map(|t| {
            let get = |k: &str| {
                t.labels.get(k).cloned().ok_or_else(|| {
                    PluginError::Permanent(format!(
                        "target {} has no `{k}` label: give each target its address in both \
                         slots, e.g. labels: {{blue: 127.0.0.1:8081, green: 127.0.0.1:8082}}",
                        t.name()
                    ))
                })
            };
            Ok(Server {
                blue: get("blue")?,
                green: get("green")?,
            })
        })
        .collect()
}

fn params(req: &Request) -> Result<Params, PluginError> {
    if req.params.is_null() {
        return Ok(Params::default());
    }
    serde_json::from_value(req.params.clone())
        .map_err(|e| PluginError::Permanent(format!("nginx plugin params: {e}")))
}

/// The candidate slot, from PrepareSlots' state.
fn candidate_of(req: &Request, split: &Split) -> Slot {
    req.traffic
        .as_ref()
        .and_then(|t| t.get("candidate"))
        .and_then(|c| c.as_str())
        .and_then(Slot::parse)
        .unwrap_or(split.stable.other())
}

impl Nginx {
    fn command(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.opts.nginx);
        if let Some(p) = &self.opts.prefix {
            cmd.arg("-p").arg(p);
        }
        cmd.arg("-c").arg(&self.opts.conf);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// `nginx -t` or `nginx -s reload`: Ok, or what nginx said.
    async fn run(&self, args: &[&str]) -> Result<(), String> {
        let mut cmd = self.command();
        cmd.args(args);
        let out = tokio::time::timeout(NGINX_TIMEOUT, cmd.output())
            .await
            .map_err(|_| format!("no answer within {}s", NGINX_TIMEOUT.as_secs()))?
            .map_err(|e| {
                format!(
                    "cannot run {}: {e} (install nginx, or set `nginx:` in the plugin's \
                     options to its path)",
                    self.opts.nginx.display()
                )
            })?;
        if out.status.success() {
            return Ok(());
        }
        let said = String::from_utf8_lossy(&out.stderr);
        let said: Vec<&str> = said
            .lines()
            .filter(|l| !l.contains("signal process started"))
            .collect();
        Err(format!("{} ({})", said.join("; ").trim(), out.status))
    }

    async fn current(&self) -> Split {
        tokio::fs::read_to_string(&self.opts.upstreams)
            .await
            .ok()
            .and_then(|t| render::parse(&t))
            .unwrap_or_default()
    }

    /// Changes the split: rendered, checked with `nginx -t`, put in place and reloaded; on a
    /// failed check the previous file is restored and nginx keeps running what it had.
    async fn apply(
        &self,
        req: &Request,
        change: impl FnOnce(&mut Split),
    ) -> Result<Split, PluginError> {
        let servers = servers(req)?;
        let _one = self.lock.lock().await;
        let mut split = self.current().await;
        change(&mut split);
        let text = render::render(&split, &servers, &names(&self.opts), &req.artifact.version);
        let path = &self.opts.upstreams;
        let fail = |what: String| PluginError::Failed(format!("{}: {what}", path.display()));
        let temp = path.with_extension("manent-new");
        let previous = path.with_extension("manent-previous");
        tokio::fs::write(&temp, &text).await.map_err(|e| {
            fail(format!(
                "cannot write {}: {e} (the plugin needs write access to this directory)",
                temp.display()
            ))
        })?;
        let had = tokio::fs::copy(path, &previous).await.is_ok();
        tokio::fs::rename(&temp, path)
            .await
            .map_err(|e| fail(format!("cannot put the new file in place: {e}")))?;
        if let Err(said) = self.run(&["-t", "-q"]).await {
            if had {
                let _ = tokio::fs::rename(&previous, path).await;
            } else {
                let _ = tokio::fs::remove_file(path).await;
            }
            return Err(PluginError::Failed(format!(
                "nginx -t refused the new upstreams in {}: {said}; the previous file was \
                 kept and nginx was not reloaded (check that {} includes it inside `http` and \
                 proxies to ${}_pool)",
                path.display(),
                self.opts.conf.display(),
                self.opts.upstream
            )));
        }
        let before = self.workers();
        self.run(&["-s", "reload"]).await.map_err(|said| {
            PluginError::Failed(format!(
                "nginx -s reload failed: {said} (is nginx running with {} and its pid file?)",
                self.opts.conf.display()
            ))
        })?;
        let _ = tokio::fs::remove_file(&previous).await;
        self.reloaded(&before).await;
        Ok(split)
    }

    /// The master's pid, from the pid file nginx -t names (`logs/nginx.pid` under the prefix,
    /// or the configured `pid`).
    fn master(&self) -> Option<u32> {
        let conf = std::fs::read_to_string(&self.opts.conf).ok()?;
        let pid_file = conf
            .lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix("pid "))
            .map(|p| PathBuf::from(p.trim_end_matches(';').trim()))
            .or_else(|| self.opts.prefix.as_ref().map(|p| p.join("logs/nginx.pid")))?;
        let pid_file = match (&self.opts.prefix, pid_file.is_relative()) {
            (Some(p), true) => p.join(pid_file),
            _ => pid_file,
        };
        std::fs::read_to_string(pid_file).ok()?.trim().parse().ok()
    }

    /// The master's worker processes that take connections (not those shutting down).
    fn workers(&self) -> Vec<u32> {
        let Some(master) = self.master() else {
            return Vec::new();
        };
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        procs
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                let ppid = stat
                    .rsplit_once(") ")
                    .and_then(|(_, r)| r.split_whitespace().nth(1))
                    .and_then(|p| p.parse::<u32>().ok());
                let cmd =
                    std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                ppid == Some(master)
                    && cmd.contains("worker process")
                    && !cmd.contains("shutting down")
            })
            .collect()
    }

    /// Waits (a few seconds at most) until the reload took: new workers run and the old ones
    /// no longer take connections, so a request sent now sees the new split.
    async fn reloaded(&self, before: &[u32]) {
        if before.is_empty() {
            return;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while tokio::time::Instant::now() < deadline {
            let now = self.workers();
            if !now.is_empty() && now.iter().all(|p| !before.contains(p)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.log
            .warn("nginx: the reload did not show new workers within 5s");
    }

    /// One target's candidate: the artifact copied into the slot's root, or the command run.
    async fn candidate(
        &self,
        req: &Request,
        t: &Target,
        slot: Slot,
    ) -> Result<String, PluginError> {
        let address = t.labels.get(slot.as_str()).cloned().unwrap_or_default();
        let root = t.labels.get(&format!("{}_root", slot.as_str())).cloned();
        let artifact = req
            .artifact
            .uri
            .replace("{version}", &req.artifact.version)
            .trim_start_matches("file://")
            .to_owned();
        if let Some(command) = params(req)?.deploy_command {
            let mut cmd = tokio::process::Command::new("/bin/sh");
            cmd.arg("-c")
                .arg(&command)
                .env("MANENT_SLOT", slot.as_str())
                .env("MANENT_SLOT_ADDRESS", &address)
                .env("MANENT_SLOT_ROOT", root.as_deref().unwrap_or(""))
                .env("MANENT_TARGET", t.name())
                .env("MANENT_VERSION", &req.artifact.version)
                .env("MANENT_ARTIFACT", &artifact)
                .stdin(Stdio::null())
                .kill_on_drop(true);
            let out = cmd
                .output()
                .await
                .map_err(|e| PluginError::Failed(format!("cannot run the deploy command: {e}")))?;
            if !out.status.success() {
                return Err(PluginError::Failed(format!(
                    "the deploy command failed on {} ({}): {}",
                    t.name(),
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            return Ok(format!(
                "{} on the {} slot ({address})",
                req.artifact.version,
                slot.as_str()
            ));
        }
        let Some(root) = root else {
            return Err(PluginError::Permanent(format!(
                "target {} has no `{}_root` label and the descriptor gives no \
                 params.deploy_command: say where the {} slot's files go, or how to deploy it",
                t.name(),
                slot.as_str(),
                slot.as_str()
            )));
        };
        if artifact.is_empty() {
            return Err(PluginError::Permanent(
                "artifact.uri is empty: give the directory to copy (`{version}` is replaced)"
                    .into(),
            ));
        }
        let (from, to) = (PathBuf::from(&artifact), PathBuf::from(&root));
        tokio::task::spawn_blocking(move || replace_dir(&from, &to))
            .await
            .map_err(|e| PluginError::Failed(format!("copy task: {e}")))?
            .map_err(PluginError::Failed)?;
        Ok(format!(
            "{} in {root} (the {} slot, {address})",
            req.artifact.version,
            slot.as_str()
        ))
    }
}

/// Replaces directory `to` with a copy of `from`: copied beside it, then swapped by renames.
fn replace_dir(from: &Path, to: &Path) -> Result<(), String> {
    if !from.is_dir() {
        return Err(format!(
            "artifact {} is not a directory (artifact.uri names the build to copy)",
            from.display()
        ));
    }
    let new = to.with_extension("manent-new");
    let old = to.with_extension("manent-old");
    let _ = std::fs::remove_dir_all(&new);
    copy_tree(from, &new)
        .map_err(|e| format!("copying {} to {}: {e}", from.display(), new.display()))?;
    let _ = std::fs::remove_dir_all(&old);
    if to.exists() {
        std::fs::rename(to, &old).map_err(|e| format!("moving {} aside: {e}", to.display()))?;
    }
    std::fs::rename(&new, to).map_err(|e| format!("putting {} in place: {e}", to.display()))?;
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let dest = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &dest)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &dest)?;
        } else {
            std::fs::copy(entry.path(), &dest)?;
        }
    }
    Ok(())
}

#[async_trait]
impl Deployer for Nginx {
    async fn validate(&self, req: &Request) -> Result<(), PluginError> {
        servers(req)?;
        let p = params(req)?;
        if p.deploy_command.is_none() {
            for t in &req.targets {
                for slot in ["blue", "green"] {
                    if !t.labels.contains_key(&format!("{slot}_root")) {
                        return Err(PluginError::Permanent(format!(
                            "target {} has no `{slot}_root` label and there is no \
                             params.deploy_command: say where each slot's files go",
                            t.name()
                        )));
                    }
                }
            }
        }
        if !self.opts.conf.is_file() {
            return Err(PluginError::Permanent(format!(
                "nginx configuration {} does not exist (set `conf:` in the plugin's options)",
                self.opts.conf.display()
            )));
        }
        let dir = self
            .opts
            .upstreams
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let probe = dir.join(".manent-write-probe");
        std::fs::write(&probe, b"")
            .and_then(|()| std::fs::remove_file(&probe))
            .map_err(|e| {
                PluginError::Permanent(format!(
                    "cannot write in {} ({e}): the plugin renders {} there",
                    dir.display(),
                    self.opts.upstreams.display()
                ))
            })?;
        self.run(&["-t", "-q"]).await.map_err(|said| {
            PluginError::Permanent(format!(
                "nginx -t fails before anything changed: {said} (fix {} first)",
                self.opts.conf.display()
            ))
        })
    }

    /// A plain deploy is a blue/green switch: the candidate everywhere, then promoted.
    async fn deploy(&self, req: &Request) -> Result<DeployResult, PluginError> {
        let prepared = self.prepare_slots(req).await?;
        let mut req = req.clone();
        req.traffic = Some(prepared);
        let result = self.deploy_candidate(&req).await?;
        self.promote_candidate(&req).await?;
        Ok(result)
    }

    fn slot_deployer(&self) -> Option<&dyn SlotDeployer> {
        Some(self)
    }

    fn traffic_router(&self) -> Option<&dyn TrafficRouter> {
        Some(self)
    }

    fn tester_router(&self) -> Option<&dyn TesterRouter> {
        Some(self)
    }

    fn slot_scaler(&self) -> Option<&dyn SlotScaler> {
        Some(self)
    }

    fn parallel_deployer(&self) -> Option<&dyn ParallelDeployer> {
        Some(self)
    }
}

impl ParallelDeployer for Nginx {
    fn parallel_targets(&self) -> bool {
        true
    }
}

#[async_trait]
impl SlotDeployer for Nginx {
    async fn prepare_slots(&self, req: &Request) -> Result<serde_json::Value, PluginError> {
        let split = self
            .apply(req, |s| {
                s.weight = 0;
                s.testers = false;
                s.scale = 100;
            })
            .await?;
        let candidate = split.stable.other();
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "nginx: {} serves production; the candidate goes to {}",
            split.stable.as_str(),
            candidate.as_str()
        ));
        Ok(serde_json::json!({
            "stable": split.stable.as_str(),
            "candidate": candidate.as_str(),
            "upstream": self.opts.upstream,
        }))
    }

    async fn deploy_candidate(&self, req: &Request) -> Result<DeployResult, PluginError> {
        let slot = candidate_of(req, &self.current().await);
        let outcome = for_each_target(req, |t| async move {
            let said = self.candidate(req, &t, slot).await?;
            self.log
                .for_deployment(&req.deployment_id)
                .for_target(&t)
                .info(&format!("nginx: candidate {said}"));
            Ok(TargetResult::new(TargetStatus::Deployed).with_message(said))
        })
        .await;
        DeployResult::of("nginx", &req.artifact.version, outcome)
    }

    async fn promote_candidate(&self, req: &Request) -> Result<(), PluginError> {
        let current = self.current().await;
        let candidate = candidate_of(req, &current);
        self.apply(req, |s| {
            s.stable = candidate;
            s.weight = 0;
            s.testers = false;
            s.scale = 100;
        })
        .await?;
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "nginx: {} is stable now, all traffic on it",
            candidate.as_str()
        ));
        Ok(())
    }

    async fn revert_candidate(&self, req: &Request) -> Result<(), PluginError> {
        let split = self
            .apply(req, |s| {
                s.weight = 0;
                s.testers = false;
            })
            .await?;
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "nginx: the candidate is out of traffic; {} serves everything",
            split.stable.as_str()
        ));
        Ok(())
    }

    async fn retire_previous(&self, req: &Request) -> Result<(), PluginError> {
        let split = self.current().await;
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "nginx: {} takes no traffic now; it keeps the previous release for a quick switch back",
            split.stable.other().as_str()
        ));
        Ok(())
    }
}

#[async_trait]
impl TrafficRouter for Nginx {
    async fn set_candidate_weight(&self, req: &Request, weight: u32) -> Result<(), PluginError> {
        if weight > 100 {
            return Err(PluginError::Permanent(format!(
                "weight {weight}: a percentage is 0 to 100"
            )));
        }
        self.apply(req, |s| s.weight = weight).await?;
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "nginx: candidate {weight}% / stable {}%, reloaded",
            100 - weight
        ));
        Ok(())
    }

    async fn candidate_weight(&self, _req: &Request) -> Result<u32, PluginError> {
        let text = tokio::fs::read_to_string(&self.opts.upstreams)
            .await
            .map_err(|e| PluginError::Failed(format!("{}: {e}", self.opts.upstreams.display())))?;
        render::parse(&text).map(|s| s.weight).ok_or_else(|| {
            PluginError::Failed(format!(
                "{} was not written by this plugin (no state line)",
                self.opts.upstreams.display()
            ))
        })
    }
}

#[async_trait]
impl TesterRouter for Nginx {
    async fn route_testers(&self, req: &Request) -> Result<BTreeMap<String, String>, PluginError> {
        self.apply(req, |s| s.testers = true).await?;
        Ok([
            (
                "header".to_owned(),
                format!("{}: 1", self.opts.tester_header),
            ),
            (
                "cookie".to_owned(),
                format!("{}=1", self.opts.tester_cookie),
            ),
        ]
        .into_iter()
        .collect())
    }
}

#[async_trait]
impl SlotScaler for Nginx {
    async fn scale_candidate(&self, req: &Request, percent: u32) -> Result<(), PluginError> {
        let split = self.apply(req, |s| s.scale = percent.min(100)).await?;
        let n = req.targets.len();
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "nginx: the candidate runs on {} of {n} servers",
            render::enabled(n, split.scale)
        ));
        Ok(())
    }
}
