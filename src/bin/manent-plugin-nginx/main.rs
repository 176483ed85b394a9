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
//! loopback port, and once no worker of the previous file takes connections (they are told to
//! finish as soon as a worker the reload started is ready); any failure puts the previous file
//! back (and reloads it if nginx took the new one). `RoutingState` reports what nginx serves
//! from that same read-back, and a file manent did not write, or one edited by hand, as
//! foreign.

mod control;
#[cfg(test)]
#[path = "../shared/routing_fixture.rs"]
mod fixture;
mod render;
mod state;
mod traffic;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use manent::plugin::slots::{self, SlotRouter, addresses};
use manent::plugin::{
    Deployer, Logger, PluginError, Request, Routing, RoutingState, Traffic, TrafficWindow,
};
use serde::Deserialize;

use control::Control;
use render::Names;

fn main() {
    manent::plugin::external::serve(factory)
}

/// How long a reload may take to be served before the change is undone.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(5);

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
    /// The access log nginx writes in the rendered `NAME_canary` format (`access_log PATH
    /// NAME_canary;` in the server that proxies to `$NAME_pool`): what the plugin reads the
    /// traffic each slot took from, for `analysis: {router: …}`.
    #[serde(default)]
    access_log: Option<PathBuf>,
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
    let nginx = Nginx {
        control: Control {
            nginx: opts.nginx.clone(),
            prefix: opts.prefix.clone(),
            conf: opts.conf.clone(),
            upstreams: opts.upstreams.clone(),
            pid_file: opts.pid_file.clone(),
            built: std::sync::OnceLock::new(),
        },
        names: Names {
            upstream: opts.upstream.clone(),
            header: opts.tester_header.clone(),
            cookie: opts.tester_cookie.clone(),
            state: state.to_string(),
        },
        state,
        lock: tokio::sync::Mutex::new(()),
        traffic: opts
            .access_log
            .as_deref()
            .map(|p| std::sync::Mutex::new(traffic::Reader::new(traffic::Nginx, p))),
    };
    Ok(Arc::new(SlotRouter::new(nginx, log)))
}

struct Nginx {
    control: Control,
    names: Names,
    state: SocketAddr,
    /// One change of the upstream file at a time.
    lock: tokio::sync::Mutex<()>,
    /// The access log, read so far (`None`: no `access_log:` option).
    traffic: Option<std::sync::Mutex<traffic::Reader>>,
}

impl Nginx {
    /// What nginx serves, read back from it.
    async fn read_back(&self, req: &Request) -> RoutingState {
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
        let master = self.control.master();
        match state::read(self.state, master.as_ref().ok().copied()).await {
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
                // Why nginx's master is not known, when it is not.
                foreign: Some(match master {
                    Err(no) => format!("{why} ({no})"),
                    Ok(_) => why,
                }),
            },
        }
    }

    /// Renders `routing`, checks it with `nginx -t`, puts it in place, reloads and waits until
    /// nginx serves it. All or nothing: on any failure the previous file is back, and reloaded
    /// if nginx may have taken the new one. Says how it was done.
    async fn serve(&self, routing: &Routing) -> Result<String, PluginError> {
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
        let master = match self.control.master() {
            Ok(m) => Some(m),
            Err(why) => {
                return Err(undo(format!(
                    "nginx's master is not found: {why}; nothing was reloaded (is nginx running \
                     with {}?)",
                    self.control.conf.display()
                ))
                .await);
            }
        };
        let before = self.control.children(master);
        let log = self.control.error_log();
        if let Err(said) = self.control.run(&["-s", "reload"]).await {
            return Err(undo(format!("nginx -s reload failed: {said}")).await);
        }
        if let Err(why) = self.confirm(&rendered.nonce, master, &before, log).await {
            let e = undo(format!("nginx did not serve the new file: {why}")).await;
            // nginx may have loaded it after all (a refusal is read from a log its workers'
            // user can write to): what is on disk is served again.
            let _ = self.control.run(&["-s", "reload"]).await;
            return Err(e);
        }
        Ok(format!(
            "by a checked reload: nginx serves the new {}",
            path.display()
        ))
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
        // Into a directory no one else can write, as a new file: never through a link.
        manent::sys::files::check_own_dir(self.control.dir()).map_err(PluginError::Permanent)?;
        let mode = std::fs::metadata(path).map_or(0o644, |m| {
            use std::os::unix::fs::PermissionsExt;
            m.permissions().mode() & 0o777
        });
        let (t, b) = (temp.clone(), bytes.to_vec());
        let written =
            tokio::task::spawn_blocking(move || manent::sys::files::write_new(&t, &b, mode))
                .await
                .map_err(|e| PluginError::Failed(format!("write task: {e}")))?;
        written.map_err(|e| {
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

    /// Waits until nginx answers the new rendering and no process that was its child `before`
    /// the reload takes connections. As soon as a worker the reload started is ready, those still
    /// taking them are told to finish (see [`Control::retire`]): left alone, they would keep
    /// taking connections with the previous file for the 100 ms nginx's master waits before
    /// telling them (and nearly all of the state location's reads, here).
    ///
    /// nginx's master does not say when it refuses a reload (it keeps the running file and
    /// writes why in its error log): `log`, read from before the reload, ends the wait as soon
    /// as the master logs a refusal there, and says why.
    async fn confirm(
        &self,
        nonce: &str,
        master: Option<u32>,
        before: &[control::Child],
        mut log: Option<control::ErrorLog>,
    ) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + CONFIRM_TIMEOUT;
        let mut limit = Duration::from_millis(50);
        let mut retired = false;
        let mut looked = tokio::time::Instant::now();
        let emerg = |log: &mut Option<control::ErrorLog>| match (log, master) {
            (Some(log), Some(m)) => log.emerg(&self.control, m).to_vec(),
            _ => Vec::new(),
        };
        loop {
            if looked.elapsed() >= Duration::from_millis(20) {
                looked = tokio::time::Instant::now();
                let said = emerg(&mut log);
                if control::ErrorLog::refused(&said)
                    && let Some(log) = &log
                {
                    return Err(format!(
                        "its master refused it, and kept the file it ran; its error log ({}) \
                         says: {}{}",
                        log.path.display(),
                        said.join("; "),
                        self.hint(&said)
                    ));
                }
            }
            if !retired {
                let (old, new): (Vec<_>, Vec<_>) = self
                    .control
                    .workers(master)
                    .into_iter()
                    .partition(|w| before.contains(w));
                if !new.is_empty() {
                    retired = true;
                    self.control.retire(master, &old);
                }
            }
            let read = state::read_within(self.state, master, limit).await;
            if let Err(state::Unread::Silent(_)) = read {
                limit = (limit * 2).min(state::READ_TIMEOUT);
            }
            let last = match read {
                Ok(s) if s.nonce == nonce => {
                    let now = self.control.workers(master);
                    if now.iter().all(|w| !before.contains(w)) {
                        return Ok(());
                    }
                    "old workers still take connections".to_owned()
                }
                Ok(_) => "nginx still answers the previous file".to_owned(),
                Err(e) => e.to_string(),
            };
            if tokio::time::Instant::now() >= deadline {
                let said = emerg(&mut log);
                let logged = match &log {
                    Some(log) if !said.is_empty() => format!(
                        "; its error log ({}) says: {}{}",
                        log.path.display(),
                        said.join("; "),
                        self.hint(&said)
                    ),
                    Some(log) => format!(
                        "; its master logged no error in {} since the reload",
                        log.path.display()
                    ),
                    None => String::new(),
                };
                return Err(format!(
                    "not within {}s: {last}{logged}",
                    CONFIRM_TIMEOUT.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// What to do about what nginx's master logged: an address it could not listen on.
    fn hint(&self, emerg: &[String]) -> String {
        let state = format!("bind() to {} failed", self.state);
        if emerg.iter().any(|m| m.starts_with(&state)) {
            format!(
                " — another program holds {}, the plugin's `state_listen:`: give the plugin a \
                 port nothing else uses (the file's state location listens there)",
                self.state
            )
        } else if emerg.iter().any(|m| m.starts_with("bind() to ")) {
            " — another program holds an address nginx listens on: free it, or change the \
             `listen` in nginx's configuration"
                .to_owned()
        } else {
            String::new()
        }
    }
}

/// A file that ends with the plugin's state server.
fn is_ours(text: &str) -> bool {
    render::body_of(text).len() < text.len()
}

#[async_trait]
impl slots::Router for Nginx {
    const NAME: &'static str = "nginx";

    fn testers(&self) -> (&str, &str) {
        (&self.names.header, &self.names.cookie)
    }

    fn names(&self) -> (&'static str, String) {
        ("upstream", self.names.upstream.clone())
    }

    async fn check(&self, _req: &Request) -> Result<(), PluginError> {
        if !self.control.conf.is_file() {
            return Err(PluginError::Permanent(format!(
                "nginx configuration {} does not exist (set `conf:` in the plugin's options)",
                self.control.conf.display()
            )));
        }
        slots::check_writable(self.control.dir(), &self.control.upstreams)?;
        self.control.run(&["-t", "-q"]).await.map_err(|said| {
            PluginError::Permanent(format!(
                "nginx -t fails before anything changed: {said} (fix {} first)",
                self.control.conf.display()
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
        let n = &self.names.upstream;
        let Some(reader) = &self.traffic else {
            return Err(PluginError::Permanent(format!(
                "the nginx plugin reads the traffic from an access log: set `access_log: PATH` in \
                 its options, and log there in the server that proxies to ${n}_pool with \
                 `access_log PATH {n}_canary;` (the format is in {})",
                self.control.upstreams.display()
            )));
        };
        let mut r = reader
            .lock()
            .map_err(|_| PluginError::Failed("the access log reader failed before".into()))?;
        r.poll().map_err(|e| {
            PluginError::Failed(format!(
                "cannot read the access log {}: {e} (the plugin needs read access to it)",
                r.path().display()
            ))
        })?;
        let source = format!("nginx access log {}", r.path().display());
        Ok(r.traffic(routing, manent::sys::now_ms(), window, source))
    }
}
