//! `manent-plugin-nginx`: canary releases over a real nginx, as an external plugin built with
//! manent's Rust SDK. Each target is a server of the application with an address in each of two
//! slots (labels `blue` and `green`); the plugin owns one upstream file (`upstreams:`), included
//! by the operator's nginx.conf inside `http`, which splits requests between the stable slot
//! and the candidate (`proxy_pass http://$NAME_pool;`).
//!
//! The file is rendered from manent's routing alone — the slots, their addresses, the weight,
//! tester routing and scale that every call carries — never from what the file said before.
//! A change is all or nothing: rendered, checked with `nginx -t`, put in place, reloaded, and
//! confirmed by reading back what nginx loaded from the state location the file adds on a
//! loopback port; any failure puts the previous file back (and reloads it if nginx took the
//! new one). `RoutingState` reports what nginx serves from that same read-back, and a file
//! manent did not write, or one edited by hand, as foreign.

mod candidate;
mod control;
mod render;
mod state;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use manent::plugin::{
    DeployResult, Deployer, Logger, ParallelDeployer, PluginError, Pool, Request, Routing,
    RoutingState, SlotDeployer, SlotScaler, TargetResult, TargetStatus, TesterRouter,
    TrafficRouter, for_each_target,
};
use serde::Deserialize;

use control::Control;
use render::Names;

fn main() {
    manent::plugin::external::serve(factory)
}

/// How long a reload may take to be served before the change is undone.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(5);
/// The two slots: a target's address in each is its label of that name.
const SLOTS: [&str; 2] = ["blue", "green"];

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
    /// Where nginx answers what it loaded: a loopback `IP:port` the rendered file listens on.
    state_listen: String,
    /// nginx's pid file, when neither the configuration's `pid` nor the prefix names it.
    #[serde(default)]
    pid_file: Option<PathBuf>,
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

/// The plugin's factory: checks its options before anything runs.
fn factory(options: &serde_json::Value, log: Logger) -> Result<Arc<dyn Deployer>, PluginError> {
    let opts: Options = serde_json::from_value(options.clone()).map_err(|e| {
        PluginError::Permanent(format!(
            "nginx plugin options: {e} (it needs `conf:`, `upstreams:` and `state_listen:`; see \
             the plugin's documentation)"
        ))
    })?;
    let bad = |what: &str, v: &str| {
        v.is_empty()
            || v.len() > 64
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
    let state = state::check_listen(&opts.state_listen)
        .map_err(|e| PluginError::Permanent(format!("nginx plugin options: {e}")))?;
    Ok(Arc::new(Nginx {
        control: Control {
            nginx: opts.nginx.clone(),
            prefix: opts.prefix.clone(),
            conf: opts.conf.clone(),
            upstreams: opts.upstreams.clone(),
            pid_file: opts.pid_file.clone(),
        },
        names: Names {
            upstream: opts.upstream.clone(),
            header: opts.tester_header.clone(),
            cookie: opts.tester_cookie.clone(),
            state: state.to_string(),
        },
        state,
        log,
        lock: tokio::sync::Mutex::new(()),
    }))
}

struct Nginx {
    control: Control,
    names: Names,
    state: SocketAddr,
    log: Logger,
    /// One change of the upstream file at a time.
    lock: tokio::sync::Mutex<()>,
}

/// The other slot.
fn other(slot: &str) -> &'static str {
    if slot == "blue" { "green" } else { "blue" }
}

/// `slot` must be one of the two.
fn check_slot(slot: &str) -> Result<(), PluginError> {
    if SLOTS.contains(&slot) {
        Ok(())
    } else {
        Err(PluginError::Permanent(format!(
            "slot `{slot}` is not one of this plugin's slots (blue, green)"
        )))
    }
}

/// Each target's address in each slot, checked (`blue` and `green` labels).
fn addresses(req: &Request) -> Result<Vec<(&'static str, Vec<String>)>, PluginError> {
    SLOTS
        .iter()
        .map(|slot| {
            let list = req
                .targets
                .iter()
                .map(|t| {
                    let a = t.labels.get(*slot).ok_or_else(|| {
                        PluginError::Permanent(format!(
                            "target {} has no `{slot}` label: give each target its address in \
                             both slots, e.g. labels: {{blue: 127.0.0.1:8081, green: \
                             127.0.0.1:8082}}",
                            t.name()
                        ))
                    })?;
                    render::check_address(a).map_err(|e| {
                        PluginError::Permanent(format!("target {}: label `{slot}`: {e}", t.name()))
                    })?;
                    Ok(a.clone())
                })
                .collect::<Result<Vec<_>, PluginError>>()?;
            Ok((*slot, list))
        })
        .collect()
}

impl Nginx {
    /// A pool of `slot` holding `version`, with the targets' addresses in it.
    fn pool(req: &Request, slot: &str, version: &str) -> Result<Pool, PluginError> {
        check_slot(slot)?;
        let all = addresses(req)?;
        Ok(Pool {
            slot: slot.to_owned(),
            version: version.to_owned(),
            addresses: all
                .into_iter()
                .find(|(s, _)| *s == slot)
                .map(|(_, a)| a)
                .unwrap_or_default(),
        })
    }

    /// manent's routing, from the request: the only thing the file is rendered from. A pool
    /// the request names without addresses takes the targets' labels.
    fn recorded(&self, req: &Request) -> Result<Routing, PluginError> {
        let mut r = req.routing.clone().ok_or_else(|| {
            PluginError::Permanent(
                "the call carries no routing: this plugin renders only from manent's records \
                 (upgrade manent)"
                    .into(),
            )
        })?;
        for pool in [&mut r.stable, &mut r.candidate] {
            if pool.addresses.is_empty() && !pool.slot.is_empty() {
                pool.addresses = Self::pool(req, &pool.slot, "")?.addresses;
            } else {
                for a in &pool.addresses {
                    render::check_address(a).map_err(PluginError::Permanent)?;
                }
            }
        }
        check_slot(&r.stable.slot)?;
        if !r.candidate.slot.is_empty() {
            check_slot(&r.candidate.slot)?;
        }
        Ok(r)
    }

    /// What nginx serves, read back from it.
    async fn served(&self, req: &Request) -> RoutingState {
        let path = &self.control.upstreams;
        let disk = tokio::fs::read_to_string(path).await.ok();
        let recorded = req.routing.as_ref().map(|r| r.stable.slot.as_str());
        let from_file = |why: String| {
            let slots = addresses(req).unwrap_or_default();
            let routing = disk
                .as_deref()
                .and_then(|d| render::parse_foreign(d, &self.names, &slots, recorded));
            RoutingState {
                routing,
                foreign: Some(why),
            }
        };
        match state::read(self.state, self.control.master()).await {
            Ok(served) => {
                let on_disk = disk.as_deref().map(|d| render::digest(render::body_of(d)));
                if on_disk.as_deref() == Some(served.digest.as_str()) {
                    RoutingState {
                        routing: Some(served.routing),
                        foreign: None,
                    }
                } else {
                    from_file(format!(
                        "{} was changed after manent wrote it (nginx serves it once reloaded); \
                         read from the file",
                        path.display()
                    ))
                }
            }
            Err(state::Unread::Silent(why)) if disk.as_deref().is_some_and(is_ours) => {
                RoutingState {
                    routing: None,
                    foreign: Some(format!(
                        "nginx does not serve manent's file: {why}; its running configuration \
                         does not include {}, or nginx is down",
                        path.display()
                    )),
                }
            }
            Err(state::Unread::Silent(_)) => from_file(format!(
                "{} was not written by manent (nginx does not answer at http://{}{}); read from \
                 the file",
                path.display(),
                self.state,
                render::STATE_PATH
            )),
            Err(state::Unread::Other(why)) => RoutingState {
                routing: None,
                foreign: Some(why),
            },
        }
    }

    /// Renders `routing`, checks it with `nginx -t`, puts it in place, reloads and waits until
    /// nginx serves it. All or nothing: on any failure the previous file is back, and reloaded
    /// if nginx may have taken the new one.
    async fn apply(&self, routing: &Routing) -> Result<(), PluginError> {
        let rendered = render::render(routing, &self.names).map_err(PluginError::Permanent)?;
        let path = &self.control.upstreams;
        let _one = self.lock.lock().await;
        let previous = tokio::fs::read(path).await.ok();
        self.put(&rendered.text).await?;
        let undo = |why: String| self.undo(previous.as_deref(), why);
        if let Err(said) = self.control.run(&["-t", "-q"]).await {
            return Err(undo(format!(
                "nginx -t refused the new {}: {said}; nginx was not reloaded (check that {} \
                 includes it inside `http` and proxies to ${}_pool)",
                path.display(),
                self.control.conf.display(),
                self.names.upstream
            ))
            .await);
        }
        let master = self.control.master();
        if master.is_none() {
            return Err(undo(format!(
                "nginx is not running (no master process found from its pid file): nothing \
                 was reloaded; start nginx with {}, then retry",
                self.control.conf.display()
            ))
            .await);
        }
        let before = self.control.workers(master);
        if let Err(said) = self.control.run(&["-s", "reload"]).await {
            return Err(undo(format!("nginx -s reload failed: {said}")).await);
        }
        if let Err(why) = self.confirm(&rendered.nonce, master, &before).await {
            let e = undo(format!(
                "nginx did not serve the new file within {}s: {why}",
                CONFIRM_TIMEOUT.as_secs()
            ))
            .await;
            // nginx may have loaded it after all: what is on disk is served again.
            let _ = self.control.run(&["-s", "reload"]).await;
            return Err(e);
        }
        Ok(())
    }

    /// Puts the previous file back (or removes the new one if there was none): the error.
    async fn undo(&self, previous: Option<&[u8]>, why: String) -> PluginError {
        let back = match previous {
            Some(p) => self
                .put_bytes(p)
                .await
                .map(|()| "the previous file is back"),
            None => tokio::fs::remove_file(&self.control.upstreams)
                .await
                .map(|()| "the new file is removed")
                .map_err(|e| PluginError::Failed(e.to_string())),
        };
        let back = back.unwrap_or("putting the previous file back failed too");
        PluginError::Failed(format!("{why}; {back}"))
    }

    /// Writes the upstream file through a temporary file and a rename.
    async fn put(&self, text: &str) -> Result<(), PluginError> {
        self.put_bytes(text.as_bytes()).await
    }

    async fn put_bytes(&self, bytes: &[u8]) -> Result<(), PluginError> {
        let path = &self.control.upstreams;
        let temp = path.with_extension("manent-new");
        tokio::fs::write(&temp, bytes).await.map_err(|e| {
            PluginError::Failed(format!(
                "cannot write {}: {e} (the plugin needs write access to {})",
                temp.display(),
                self.control.dir().display()
            ))
        })?;
        tokio::fs::rename(&temp, path).await.map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            PluginError::Failed(format!("cannot put {} in place: {e}", path.display()))
        })
    }

    /// Waits until nginx answers the new rendering and its old workers take no connection.
    async fn confirm(
        &self,
        nonce: &str,
        master: Option<u32>,
        before: &[u32],
    ) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + CONFIRM_TIMEOUT;
        loop {
            let last = match state::read(self.state, master).await {
                Ok(s) if s.nonce == nonce => {
                    let now = self.control.workers(master);
                    if now.iter().all(|p| !before.contains(p)) {
                        return Ok(());
                    }
                    "old workers still take connections".to_owned()
                }
                Ok(_) => "nginx still answers the previous file".to_owned(),
                Err(e) => e.to_string(),
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(last);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Slots for a new candidate: production stays on manent's stable slot (else the one
    /// nginx serves it from), the candidate goes to the other, at 0%.
    async fn prepare(&self, req: &Request) -> Result<Routing, PluginError> {
        let named = req
            .routing
            .as_ref()
            .map(|r| r.stable.clone())
            .filter(|p| !p.slot.is_empty());
        let stable = match named {
            Some(p) => p,
            None => {
                let served = self.served(req).await;
                let slot = served
                    .routing
                    .map(|r| r.stable.slot)
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| {
                        PluginError::Permanent(format!(
                            "cannot tell which slot serves production: {}",
                            served
                                .foreign
                                .unwrap_or_else(|| "nginx does not say".into())
                        ))
                    })?;
                Pool {
                    slot,
                    ..Pool::default()
                }
            }
        };
        let candidate = other(&stable.slot);
        let routing = Routing {
            stable: Self::pool(req, &stable.slot, &stable.version)?,
            candidate: Self::pool(req, candidate, &req.artifact.version)?,
            weight: 0,
            testers: false,
            scale: 100,
            retired: false,
        };
        self.apply(&routing).await?;
        Ok(routing)
    }

    async fn promote(&self, req: &Request, r: Routing) -> Result<(), PluginError> {
        let promoted = Routing {
            stable: r.candidate.clone(),
            candidate: r.stable,
            weight: 0,
            testers: false,
            scale: 100,
            retired: true,
        };
        self.apply(&promoted).await?;
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "nginx: {} is stable now, all traffic on it; {} is out of every pool",
            r.candidate.slot, promoted.candidate.slot
        ));
        Ok(())
    }
}

/// A file that ends with the plugin's state server.
fn is_ours(text: &str) -> bool {
    render::body_of(text).len() < text.len()
}

#[async_trait]
impl Deployer for Nginx {
    async fn validate(&self, req: &Request) -> Result<(), PluginError> {
        addresses(req)?;
        let p = candidate::params(req)?;
        if p.deploy_command.is_none() {
            for t in &req.targets {
                for slot in SLOTS {
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
        if !self.control.conf.is_file() {
            return Err(PluginError::Permanent(format!(
                "nginx configuration {} does not exist (set `conf:` in the plugin's options)",
                self.control.conf.display()
            )));
        }
        let dir = self.control.dir();
        let probe = dir.join(".manent-write-probe");
        std::fs::write(&probe, b"")
            .and_then(|()| std::fs::remove_file(&probe))
            .map_err(|e| {
                PluginError::Permanent(format!(
                    "cannot write in {} ({e}): the plugin renders {} there",
                    dir.display(),
                    self.control.upstreams.display()
                ))
            })?;
        self.control.run(&["-t", "-q"]).await.map_err(|said| {
            PluginError::Permanent(format!(
                "nginx -t fails before anything changed: {said} (fix {} first)",
                self.control.conf.display()
            ))
        })
    }

    /// A plain deploy is a blue/green switch: the candidate everywhere, then promoted.
    async fn deploy(&self, req: &Request) -> Result<DeployResult, PluginError> {
        let routing = self.prepare(req).await?;
        let mut req = req.clone();
        req.routing = Some(routing.clone());
        let result = self.deploy_candidate(&req).await?;
        self.promote(&req, routing).await?;
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
        let r = self.prepare(req).await?;
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "nginx: {} serves production; the candidate goes to {}",
            r.stable.slot, r.candidate.slot
        ));
        Ok(serde_json::json!({
            "stable": r.stable.slot,
            "candidate": r.candidate.slot,
            "upstream": self.names.upstream,
        }))
    }

    async fn deploy_candidate(&self, req: &Request) -> Result<DeployResult, PluginError> {
        let slot = match &req.routing {
            Some(r) if !r.candidate.slot.is_empty() => r.candidate.slot.clone(),
            _ => {
                return Err(PluginError::Permanent(
                    "the call names no candidate slot (PrepareSlots first)".into(),
                ));
            }
        };
        check_slot(&slot)?;
        let slot = &slot;
        let outcome = for_each_target(req, |t| async move {
            let said = candidate::deploy(req, &t, slot).await?;
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
        let r = self.recorded(req)?;
        self.promote(req, r).await
    }

    async fn revert_candidate(&self, req: &Request) -> Result<(), PluginError> {
        let r = self.recorded(req)?;
        let reverted = Routing {
            weight: 0,
            testers: false,
            retired: true,
            ..r
        };
        self.apply(&reverted).await?;
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "nginx: the candidate ({}) is out of every pool; {} serves everything",
            reverted.candidate.slot, reverted.stable.slot
        ));
        Ok(())
    }

    async fn retire_previous(&self, req: &Request) -> Result<(), PluginError> {
        let r = self.recorded(req)?;
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "nginx: {} takes no traffic and is in no pool; its files stay for a quick switch \
             back",
            r.candidate.slot
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
        let r = Routing {
            weight,
            ..self.recorded(req)?
        };
        self.apply(&r).await?;
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "nginx: candidate {weight}% / stable {}%, served",
            100 - weight
        ));
        Ok(())
    }

    async fn candidate_weight(&self, req: &Request) -> Result<u32, PluginError> {
        let s = self.served(req).await;
        match (s.routing, s.foreign) {
            (Some(r), None) => Ok(if r.retired { 0 } else { r.weight }),
            (_, Some(why)) => Err(PluginError::Failed(why)),
            (None, None) => Err(PluginError::Failed("nginx does not say".into())),
        }
    }

    async fn routing_state(&self, req: &Request) -> Result<RoutingState, PluginError> {
        Ok(self.served(req).await)
    }
}

#[async_trait]
impl TesterRouter for Nginx {
    async fn route_testers(&self, req: &Request) -> Result<BTreeMap<String, String>, PluginError> {
        let r = Routing {
            testers: true,
            ..self.recorded(req)?
        };
        self.apply(&r).await?;
        Ok([
            ("header".to_owned(), format!("{}: 1", self.names.header)),
            ("cookie".to_owned(), format!("{}=1", self.names.cookie)),
        ]
        .into_iter()
        .collect())
    }
}

#[async_trait]
impl SlotScaler for Nginx {
    async fn scale_candidate(&self, req: &Request, percent: u32) -> Result<(), PluginError> {
        let r = Routing {
            scale: percent.clamp(1, 100),
            ..self.recorded(req)?
        };
        self.apply(&r).await?;
        let n = r.candidate.addresses.len();
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "nginx: the candidate runs on {} of {n} servers",
            render::enabled(n, r.scale)
        ));
        Ok(())
    }
}
