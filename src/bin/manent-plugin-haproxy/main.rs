//! `manent-plugin-haproxy`: canary releases over a real HAProxy (2.6, Debian's `haproxy`), as an
//! external plugin built with manent's Rust SDK. Each target is a server of the application
//! with an address in each of two slots (labels `blue` and `green`); the plugin owns one file
//! (`config:`) holding one backend (`backend:`, default `app`) with every server of both
//! slots, which the operator's HAProxy loads with an extra `-f` and its frontend sends
//! requests to (`default_backend app`).
//!
//! Options: `haproxy` (the binary for `haproxy -c`, default `haproxy`), `config` (the file,
//! absolute; the tester map is written beside it as `NAME.testers.map`), `socket` (the admin
//! socket, `stats socket PATH level admin`, default `/run/haproxy/admin.sock`), `master_socket`
//! (the master CLI of HAProxy's master-worker mode, `-S PATH`, default
//! `/run/haproxy-master.sock` — Debian's unit), `backend`, `tester_header` (default
//! `X-Canary`) and `tester_cookie` (default `canary`): a tester sends the header or the cookie
//! with value `1`; `access_log` (a file of HAProxy's log lines in the plugin's `log-format`,
//! [`log::LOG_FORMAT`]): canary analysis reads each slot's traffic, latency included, from it
//! instead of HAProxy's counters, which keep none.
//!
//! Everything is rendered from manent's routing alone — the slots, their addresses, the
//! weight, tester routing and scale every call carries — never from what the file said. A
//! weight, promote, revert, scale or tester change goes through the runtime API (`set server
//! … weight`, raised before lowered; `state ready|maint`; the tester map), and the file is
//! rewritten with the same values so that a reload or restart serves them too. A change of the
//! servers or their addresses (the file's structure) is all or nothing: the new file checked
//! with `haproxy -c` on exactly the files the running master loads, put in place, the master
//! reloaded, the new worker confirmed to serve it, and the runtime state set again (a reload
//! starts from the file, and a `server-state-file` may hold older weights); on any failure the
//! previous files are back (and reloaded if HAProxy may have taken the new ones).
//!
//! `RoutingState` reads what HAProxy serves from the admin socket: `show servers state`
//! (weights now, maintenance, addresses), the tester map, and the process variable the file
//! sets to its structure's digest. The socket is trusted only when its holder is the master's
//! user and the process answering is one of the master's workers; a backend manent did not
//! write (or one edited by hand, or with servers that are not the targets') is reported as
//! foreign, read by its servers' addresses.

mod cli;
mod control;
mod files;
#[cfg(test)]
#[path = "../shared/routing_fixture.rs"]
mod fixture;
mod log;
mod render;
mod runtime;
mod state;
mod traffic;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use manent::plugin::slots::{self, SlotRouter, addresses};
use manent::plugin::{
    Deployer, Logger, PluginError, Request, Routing, RoutingState, Traffic, TrafficWindow,
};
use serde::Deserialize;

use control::{Control, Master};
use files::{Before, Files};
use render::{Names, Rendered};
use runtime::Want;
use state::Served;

fn main() {
    manent::plugin::external::serve(factory)
}

/// How long a reload may take to be served before the change is undone.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// The haproxy binary, for `haproxy -c` (default: `haproxy` on PATH).
    #[serde(default = "default_haproxy")]
    haproxy: PathBuf,
    /// The file this plugin writes, which HAProxy loads with an extra `-f`.
    config: PathBuf,
    /// The admin socket (`stats socket PATH level admin`).
    #[serde(default = "default_socket")]
    socket: PathBuf,
    /// The master CLI (`-S PATH`).
    #[serde(default = "default_master_socket")]
    master_socket: PathBuf,
    /// The backend the file defines (default `app`).
    #[serde(default = "default_backend")]
    backend: String,
    /// The header that sends a tester to the candidate (value `1`).
    #[serde(default = "default_header")]
    tester_header: String,
    /// The cookie that does (value `1`).
    #[serde(default = "default_cookie")]
    tester_cookie: String,
    /// HAProxy's log in the plugin's `log-format`: traffic with latency (else its counters).
    #[serde(default)]
    access_log: Option<PathBuf>,
}

fn default_haproxy() -> PathBuf {
    PathBuf::from("haproxy")
}
fn default_socket() -> PathBuf {
    PathBuf::from("/run/haproxy/admin.sock")
}
fn default_master_socket() -> PathBuf {
    PathBuf::from("/run/haproxy-master.sock")
}
fn default_backend() -> String {
    "app".into()
}
fn default_header() -> String {
    "X-Canary".into()
}
fn default_cookie() -> String {
    "canary".into()
}

/// Checks a name that reaches a config line and the runtime API.
fn check_name(what: &str, v: &str) -> Result<(), String> {
    let ok = !v.is_empty()
        && v.len() <= 64
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        && !v.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "haproxy plugin options: {what} `{v}` must be letters, digits, `-` and `_`"
        ))
    }
}

/// Checks the file's path: absolute and plain, as it reaches a config line (the tester map's
/// path beside it) and the runtime API.
fn check_config(p: &Path) -> Result<(), String> {
    let s = p.to_str().unwrap_or("");
    let ok = p.is_absolute()
        && s.len() < 200
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'))
        && !s.contains("..")
        && !s.ends_with('/');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "haproxy plugin options: config `{}` must be an absolute path of letters, digits, \
             `/`, `.`, `-` and `_` (e.g. /etc/haproxy/manent-app.cfg)",
            p.display()
        ))
    }
}

/// The plugin's factory: checks its options before anything runs.
fn factory(options: &serde_json::Value, log: Logger) -> Result<Arc<dyn Deployer>, PluginError> {
    let opts: Options = serde_json::from_value(options.clone()).map_err(|e| {
        PluginError::Permanent(format!(
            "haproxy plugin options: {e} (it needs `config:`, the file it renders, loaded by \
             HAProxy with an extra -f; see the plugin's documentation)"
        ))
    })?;
    let checked = check_name("backend", &opts.backend)
        .and_then(|()| check_name("tester_header", &opts.tester_header))
        .and_then(|()| check_name("tester_cookie", &opts.tester_cookie))
        .and_then(|()| check_config(&opts.config));
    checked.map_err(PluginError::Permanent)?;
    if opts.access_log.as_deref().is_some_and(|p| !p.is_absolute()) {
        return Err(PluginError::Permanent(
            "haproxy plugin options: access_log must be an absolute path (the file HAProxy's \
             log lines are written to, e.g. /var/log/haproxy.log)"
                .into(),
        ));
    }
    let log_reader = opts.access_log.as_deref().map(|p| {
        std::sync::Mutex::new(log::Reader::new(
            log::Haproxy {
                backend: opts.backend.clone(),
            },
            p,
        ))
    });
    let map = opts.config.with_extension("testers.map");
    let counters = opts.config.with_extension("counters.json");
    let mut history = traffic::History::default();
    if opts.access_log.is_none() {
        match traffic::load(&counters) {
            Ok(Some(r)) => history.add(r),
            Ok(None) => {}
            // Not read: a window then starts at this process's first reading (shorter, said).
            Err(why) => log.warn(&format!(
                "the counters kept before a change are not read: {why}"
            )),
        }
    }
    let haproxy = Haproxy {
        files: Files {
            config: opts.config.clone(),
            map: map.clone(),
        },
        names: Names {
            backend: opts.backend.clone(),
            header: opts.tester_header.clone(),
            cookie: opts.tester_cookie.clone(),
            map: map.display().to_string(),
        },
        control: Control {
            haproxy: opts.haproxy,
            config: opts.config,
            map,
            socket: opts.socket,
            master_socket: opts.master_socket,
        },
        lock: tokio::sync::Mutex::new(()),
        traffic: std::sync::Mutex::new(history),
        counters,
        log: log_reader,
    };
    Ok(Arc::new(SlotRouter::new(haproxy, log)))
}

struct Haproxy {
    control: Control,
    files: Files,
    names: Names,
    /// One change at a time.
    lock: tokio::sync::Mutex<()>,
    /// HAProxy's counters at each Traffic call and before each change.
    traffic: std::sync::Mutex<traffic::History>,
    /// Where the reading before the last change is kept for the next plugin process.
    counters: PathBuf,
    /// HAProxy's log, when `access_log:` names it.
    log: Option<std::sync::Mutex<log::Reader>>,
}

/// What HAProxy's admin socket answered about the backend, from a worker of the master.
#[derive(Debug, Clone)]
struct Live {
    worker: u32,
    /// `None`: HAProxy runs no backend of that name.
    servers: Option<Vec<Served>>,
    map: Option<Vec<(String, String)>>,
    var: Option<String>,
}

impl Haproxy {
    /// Reads the backend through the admin socket, trusting the answer only from a worker of
    /// the master on the master CLI, held by the master's user.
    async fn now(&self) -> Result<(Master, Live), String> {
        let master = self.control.master().await?;
        let b = &self.names.backend;
        let asked = [
            "show info".to_owned(),
            format!("show servers state {b}"),
            format!("get var {}", self.names.var()),
            format!("show map {}", self.names.map),
        ];
        let socket = self.control.socket.display();
        let reply = cli::ask(&self.control.socket, &asked).await.map_err(|e| {
            format!(
                "HAProxy's admin socket: {e}; yet HAProxy's master (pid {}) answers on {}: \
                 another process may have taken the socket's path and left it (a reload passes \
                 the old socket on; a restart binds it again)",
                master.pid,
                self.control.master_socket.display()
            )
        })?;
        if reply.uid != master.uid {
            return Err(format!(
                "{socket} is held by uid {}, not by HAProxy's master's user (uid {}): another \
                 user's socket is not trusted",
                reply.uid, master.uid
            ));
        }
        // One batch, so that one process answers it all; each answer is found by its shape.
        let text = &reply.text;
        let worker = cli::parse_pid(text).ok_or_else(|| {
            format!(
                "{socket} does not answer as HAProxy's admin socket: {:?}",
                text.lines().next().unwrap_or("")
            )
        })?;
        if !master.workers.contains(&worker) {
            return Err(format!(
                "{socket} is answered by pid {worker}, which is not a worker of HAProxy's master \
                 (pid {}, workers {:?}) on {}: another HAProxy holds the socket's path",
                master.pid,
                master.workers,
                self.control.master_socket.display()
            ));
        }
        let servers = match state::parse_servers(text) {
            Ok(s) => Some(s),
            Err(state::Unread::NoBackend) => None,
            Err(state::Unread::Garbled(said)) => {
                return Err(format!(
                    "{socket} answered `show servers state {b}` with {said:?} (the socket needs \
                     `level admin`)"
                ));
            }
        };
        Ok((
            master,
            Live {
                worker,
                servers,
                map: state::parse_map(text),
                var: state::parse_var(text, &self.names.var()),
            },
        ))
    }

    /// [`now`](Self::now), tried again for a moment when it fails: during a reload the master
    /// CLI is away while the master executes itself again.
    async fn settled(&self) -> Result<(Master, Live), String> {
        let mut read = self.now().await;
        for _ in 0..3 {
            if read.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            read = self.now().await;
        }
        read
    }

    /// What HAProxy serves, read back from it.
    async fn read_back(&self, req: &Request) -> RoutingState {
        let (master, live) = match self.settled().await {
            Ok(r) => r,
            Err(why) => {
                return RoutingState {
                    routing: None,
                    foreign: Some(why),
                };
            }
        };
        let config = self.control.config.display().to_string();
        let unloaded = (!master.loads(&self.control.config)).then(|| {
            format!(
                "HAProxy (pid {}) does not load {config}: its command line loads {}",
                master.pid,
                list(&master.files)
            )
        });
        let Some(servers) = &live.servers else {
            return RoutingState {
                routing: None,
                foreign: Some(format!(
                    "HAProxy (worker {}) has no backend {}: {}",
                    live.worker,
                    self.names.backend,
                    unloaded.unwrap_or_else(|| format!("{config} does not define it"))
                )),
            };
        };
        let disk = tokio::fs::read_to_string(&self.control.config).await.ok();
        let slots = addresses(req).unwrap_or_default();
        let answer = state::Answer {
            servers,
            map: live.map.as_deref(),
            var: live.var.as_deref(),
            disk: disk.as_deref(),
        };
        let mut s = state::routing(&answer, &self.names, &config, &slots, req.routing.as_ref());
        if let (Some(f), Some(u)) = (&mut s.foreign, unloaded) {
            *f = format!("{f}; {u}");
        }
        s
    }

    /// Makes HAProxy serve `routing`: at run time when it runs this rendering's structure,
    /// else by a checked reload. All or nothing. Says how it was done.
    async fn serve(&self, routing: &Routing) -> Result<String, PluginError> {
        let rendered = render::render(routing, &self.names).map_err(PluginError::Permanent)?;
        let _one = self.lock.lock().await;
        let (master, live) = self
            .settled()
            .await
            .map_err(|why| PluginError::Failed(format!("{why}; nothing was changed")))?;
        // The counters as they are before a change that gives the candidate traffic: the base of
        // a window that starts there (a failed reading only leaves none). Other changes do
        // without the reading (a weight moved by hand is the hot path).
        if self.log.is_none()
            && starts_serving(&live, routing)
            && self.read_counters_of(&master).await.is_ok()
        {
            let newest = self.traffic.lock().ok().and_then(|h| h.newest().cloned());
            if let Some(r) = newest {
                let _ = traffic::save(&self.counters, &r);
            }
        }
        let disk = tokio::fs::read_to_string(&self.control.config)
            .await
            .unwrap_or_default();
        let runs = live.var.as_deref() == Some(rendered.digest.as_str())
            && render::stated_digest(&disk, &self.names) == Some(rendered.digest.as_str())
            && render::digest(&disk) == rendered.digest
            && live
                .servers
                .as_deref()
                .is_some_and(|s| same_servers(s, &rendered));
        if runs {
            self.at_run_time(&live, &rendered).await
        } else {
            self.reload_with(&master, &rendered).await
        }
    }

    /// A change through the runtime API, the files rewritten to match.
    async fn at_run_time(&self, live: &Live, r: &Rendered) -> Result<String, PluginError> {
        let before = self.stage(r).await?;
        let cmds = self.plan(live, r);
        if let Err(why) = self.send(&cmds).await {
            self.files.discard().await;
            let back = self.put_back_runtime(live).await;
            return Err(PluginError::Failed(format!(
                "HAProxy's runtime API refused the change: {why}; {back}"
            )));
        }
        if let Err(e) = self.files.commit().await {
            let back = self.put_back_runtime(live).await;
            self.files.restore(&before).await;
            return Err(PluginError::Failed(format!("{e}; {back}")));
        }
        Ok(format!(
            "through the runtime API, {} command{} and no reload",
            cmds.len(),
            if cmds.len() == 1 { "" } else { "s" }
        ))
    }

    /// The commands from what `live` serves to `r`.
    fn plan(&self, live: &Live, r: &Rendered) -> Vec<String> {
        let want: Vec<Want> = r
            .servers
            .iter()
            .map(|s| Want {
                name: s.name.clone(),
                weight: s.weight,
                usable: s.usable,
            })
            .collect();
        runtime::plan(
            &self.names.backend,
            &self.names.map,
            (
                live.servers.as_deref().unwrap_or(&[]),
                live.map.as_deref().unwrap_or(&[]),
            ),
            (&want, &r.testers),
        )
    }

    /// Sends a batch of changes: Ok when HAProxy refused none.
    async fn send(&self, cmds: &[String]) -> Result<(), String> {
        if cmds.is_empty() {
            return Ok(());
        }
        let reply = cli::ask(&self.control.socket, cmds).await?;
        match cli::refusals(&reply.text).as_slice() {
            [] => Ok(()),
            said => Err(format!("{} (to `{}`)", said.join("; "), cmds.join("; "))),
        }
    }

    /// Sets the runtime state `before` again after a change that failed midway.
    async fn put_back_runtime(&self, before: &Live) -> String {
        let Ok((_, now)) = self.now().await else {
            return "what HAProxy serves could not be read again".into();
        };
        let want = runtime::as_served(before.servers.as_deref().unwrap_or(&[]));
        let cmds = runtime::plan(
            &self.names.backend,
            &self.names.map,
            (
                now.servers.as_deref().unwrap_or(&[]),
                now.map.as_deref().unwrap_or(&[]),
            ),
            (&want, before.map.as_deref().unwrap_or(&[])),
        );
        match self.send(&cmds).await {
            Ok(()) if cmds.is_empty() => "nothing had changed".into(),
            Ok(()) => "what HAProxy served before is set again".into(),
            Err(e) => format!("setting back what HAProxy served before failed too: {e}"),
        }
    }

    /// A change of the file's structure: checked, put in place, reloaded, confirmed, and the
    /// runtime state set. Any failure puts the previous files back (reloaded if needed).
    async fn reload_with(&self, master: &Master, r: &Rendered) -> Result<String, PluginError> {
        let config = &self.control.config;
        if !master.loads(config) {
            return Err(PluginError::Failed(format!(
                "HAProxy (pid {}) does not load {}: its command line loads {}; add `-f {}` to \
                 it (EXTRAOPTS in /etc/default/haproxy on Debian) and restart HAProxy; nothing \
                 was changed",
                master.pid,
                config.display(),
                list(&master.files),
                config.display()
            )));
        }
        let before = self.stage(r).await?;
        // The map is read by `haproxy -c` at its own path: in place first, the file after.
        if let Err(e) = self.files.commit_map().await {
            return Err(self.undo(&before, e, false).await);
        }
        let new = files::temp(config);
        if let Err(said) = self.control.check(&master.files, &new).await {
            return Err(self
                .undo(
                    &before,
                    format!(
                        "haproxy -c refused the new {}: {said}; HAProxy was not reloaded",
                        config.display()
                    ),
                    false,
                )
                .await);
        }
        if let Err(e) = self.files.commit().await {
            return Err(self.undo(&before, e, false).await);
        }
        if let Err(e) = self.control.reload().await {
            return Err(self.undo(&before, e, false).await);
        }
        let worker = match self.confirm(&master.workers, &r.digest).await {
            Ok(w) => w,
            Err(why) => {
                let why = format!(
                    "HAProxy did not serve the new {} within {}s: {why}",
                    config.display(),
                    CONFIRM_TIMEOUT.as_secs()
                );
                return Err(self.undo(&before, why, true).await);
            }
        };
        // A reload starts from the file (or a server-state-file): the runtime state again.
        let set = match self.now().await {
            Ok((_, live)) => self.send(&self.plan(&live, r)).await,
            Err(e) => Err(e),
        };
        if let Err(e) = set {
            let why = format!("after the reload, setting the weights failed: {e}");
            return Err(self.undo(&before, why, true).await);
        }
        Ok(format!(
            "by a checked reload of {}: HAProxy's worker {worker} serves it",
            config.display()
        ))
    }

    /// Waits until a new worker (not one of `old`) answers with the rendering `digest`.
    async fn confirm(&self, old: &[u32], digest: &str) -> Result<u32, String> {
        let deadline = tokio::time::Instant::now() + CONFIRM_TIMEOUT;
        loop {
            let last = match self.now().await {
                Ok((_, live)) if old.contains(&live.worker) => {
                    format!("the previous worker {} still answers", live.worker)
                }
                Ok((_, live)) if live.var.as_deref() == Some(digest) => return Ok(live.worker),
                Ok((_, live)) => format!(
                    "worker {} answers another rendering ({})",
                    live.worker,
                    live.var.as_deref().unwrap_or("none of manent's")
                ),
                Err(e) => e,
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(last);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Writes `r`'s files beside the old ones: what they held before.
    async fn stage(&self, r: &Rendered) -> Result<Before, PluginError> {
        self.files
            .stage(&r.text, &r.map_text)
            .await
            .map_err(PluginError::Failed)
    }

    /// The previous files back, reloaded if HAProxy may have taken the new ones: the error.
    async fn undo(&self, before: &Before, why: String, reload: bool) -> PluginError {
        let mut back = match self.files.restore(before).await {
            Some(failed) => failed,
            None => "the previous files are back".to_owned(),
        };
        if reload {
            back = match self.control.reload().await {
                Ok(()) => format!("{back} and reloaded"),
                Err(e) => format!("{back}; reloading them failed: {e}"),
            };
        }
        PluginError::Failed(format!("{why}; {back}"))
    }
}

/// Whether HAProxy's servers are those of `r`: the same names, at the same addresses.
/// `routing` gives the candidate traffic (a weight, or testers) where HAProxy serves it none
/// now: no server of its slot has a weight, and the tester map is empty.
fn starts_serving(live: &Live, routing: &Routing) -> bool {
    let serves = !routing.retired && (routing.weight > 0 || routing.testers);
    let slot = routing.candidate.slot.as_str();
    let idle = live.servers.as_deref().unwrap_or(&[]).iter().all(|s| {
        render::slot_of(&s.name).is_none_or(|(sl, _)| sl != slot) || s.uweight == 0 || !s.usable()
    }) && live.map.as_deref().unwrap_or(&[]).is_empty();
    serves && idle
}

fn same_servers(servers: &[Served], r: &Rendered) -> bool {
    servers.len() == r.servers.len()
        && r.servers.iter().all(|want| {
            servers
                .iter()
                .any(|s| s.name == want.name && s.is_at(&want.address) != Some(false))
        })
}

/// `a, b` for the operator.
fn list(files: &[PathBuf]) -> String {
    if files.is_empty() {
        return "no file".into();
    }
    files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[async_trait]
impl slots::Router for Haproxy {
    const NAME: &'static str = "haproxy";

    fn testers(&self) -> (&str, &str) {
        (&self.names.header, &self.names.cookie)
    }

    fn names(&self) -> (&'static str, String) {
        ("backend", self.names.backend.clone())
    }

    async fn check(&self, _req: &Request) -> Result<(), PluginError> {
        slots::check_writable(self.files.dir(), &self.files.config)?;
        let (master, _) = self.now().await.map_err(|e| {
            PluginError::Permanent(format!(
                "{e} (the plugin drives a running HAProxy in master-worker mode through its \
                 master CLI and admin socket)"
            ))
        })?;
        let config = &self.control.config;
        if !master.loads(config) {
            return Err(PluginError::Permanent(format!(
                "HAProxy (pid {}) does not load {}: its command line loads {}; add `-f {}` to \
                 it (EXTRAOPTS in /etc/default/haproxy on Debian) and restart HAProxy",
                master.pid,
                config.display(),
                list(&master.files),
                config.display()
            )));
        }
        let level = cli::ask(&self.control.socket, &["show cli level".to_owned()])
            .await
            .map_err(PluginError::Permanent)?;
        if level.text.trim() != "admin" {
            return Err(PluginError::Permanent(format!(
                "HAProxy's socket {} answers at level {}: the plugin sets weights and \
                 maintenance, which takes `level admin` on its `stats socket` line",
                self.control.socket.display(),
                level.text.trim()
            )));
        }
        self.control
            .check(&master.files, config)
            .await
            .map_err(|said| {
                PluginError::Permanent(format!(
                    "haproxy -c fails before anything changed: {said} (fix {} first)",
                    list(&master.files)
                ))
            })
    }

    async fn apply(&self, routing: &Routing) -> Result<String, PluginError> {
        self.serve(routing).await
    }

    async fn served(&self, req: &Request) -> RoutingState {
        self.read_back(req).await
    }

    async fn traffic(
        &self,
        routing: &Routing,
        window: TrafficWindow,
    ) -> Result<Traffic, PluginError> {
        if let Some(reader) = &self.log {
            let mut r = reader
                .lock()
                .map_err(|_| PluginError::Failed("the log reader failed before".into()))?;
            r.poll().map_err(|e| {
                PluginError::Failed(format!(
                    "cannot read HAProxy's log {}: {e} (the plugin needs read access to it)",
                    r.path().display()
                ))
            })?;
            let source = format!("HAProxy log {}", r.path().display());
            return Ok(r.traffic(routing, manent::sys::now_ms(), window, source));
        }
        // HAProxy's counters say nothing of a window until two readings frame it: a plugin
        // that has none yet takes one, waits a moment and reports that moment (the window
        // says how long it was).
        let fresh = self.traffic.lock().map(|h| h.is_empty()).unwrap_or(true);
        if fresh {
            self.read_counters().await?;
            tokio::time::sleep(FIRST_SPAN.min(window.window)).await;
        }
        self.read_counters().await?;
        let history = self
            .traffic
            .lock()
            .map_err(|_| PluginError::Failed("the traffic readings failed before".into()))?;
        Ok(history.traffic(
            routing,
            window,
            format!(
                "HAProxy's counters of backend {} (show stat)",
                self.names.backend
            ),
        ))
    }
}

/// How long a plugin with no reading yet counts before its first report.
const FIRST_SPAN: Duration = Duration::from_secs(3);

impl Haproxy {
    /// Takes a reading of the backend's counters.
    async fn read_counters(&self) -> Result<(), PluginError> {
        let master = self.control.master().await.map_err(PluginError::Failed)?;
        self.read_counters_of(&master).await
    }

    /// Takes a reading of the backend's counters, trusted from `master`'s user only.
    async fn read_counters_of(&self, master: &Master) -> Result<(), PluginError> {
        let b = &self.names.backend;
        let reply = cli::ask(&self.control.socket, &[format!("show stat {b} 4 -1")])
            .await
            .map_err(|e| PluginError::Failed(format!("HAProxy's admin socket: {e}")))?;
        if reply.uid != master.uid {
            return Err(PluginError::Failed(format!(
                "{} is held by uid {}, not by HAProxy's master's user (uid {}): another user's \
                 socket is not trusted",
                self.control.socket.display(),
                reply.uid,
                master.uid
            )));
        }
        let servers = traffic::parse_stat(&reply.text);
        self.traffic
            .lock()
            .map_err(|_| PluginError::Failed("the traffic readings failed before".into()))?
            .add(traffic::Reading {
                at_ms: manent::sys::now_ms(),
                servers,
            });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked_with_the_fix_in_the_error() {
        let log = Logger::discard();
        let err = |v: serde_json::Value| match factory(&v, log.clone()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{v} was accepted"),
        };
        let e = err(serde_json::json!({}));
        assert!(e.contains("it needs `config:`"), "{e}");
        let e = err(serde_json::json!({"config": "/etc/haproxy/m.cfg", "sokcet": "/x"}));
        assert!(e.contains("unknown field `sokcet`"), "{e}");
        for (k, v) in [
            ("backend", "web;show info"),
            ("backend", "web app"),
            ("tester_header", "X-Canary\n"),
            ("tester_cookie", "a#b"),
        ] {
            let e = err(serde_json::json!({"config": "/etc/haproxy/m.cfg", k: v}));
            assert!(e.contains(&format!("{k} `")), "{k}: {e}");
        }
        for bad in [
            "relative.cfg",
            "/etc/haproxy/a b.cfg",
            "/etc/../x.cfg",
            "/x/$HOME.cfg",
        ] {
            let e = err(serde_json::json!({"config": bad}));
            assert!(e.contains("must be an absolute path"), "{bad}: {e}");
        }
        assert!(
            factory(
                &serde_json::json!({"config": "/etc/haproxy/manent-app.cfg"}),
                log
            )
            .is_ok()
        );
    }
}
