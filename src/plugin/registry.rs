//! Hands the engine a plugin by the name descriptors use. Built-ins are instantiated from their
//! factory on first use; external plugins are started on first use (never by validate or plan),
//! one shared process each; undeclared names are looked up as `manent-plugin-<name>`. Either
//! way the capabilities are known before any target is touched.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{Mutex, OnceCell};

use super::builtin;
use super::contract::{Capabilities, Deployer};
use super::error::PluginError;
use super::external::{ExternalSpec, Host, Remote, activation};
use super::logger::{LogSink, Logger};
use super::processes::Processes;
use super::secrets::{ConfigSecrets, SecretSource};
use crate::config::{Config, PluginDecl};

/// A ready plugin.
pub struct PluginHandle {
    /// The name descriptors use.
    pub name: String,
    /// The deployer.
    pub deployer: Arc<dyn Deployer>,
    /// What it announced.
    pub capabilities: Capabilities,
    /// `builtin:exec` or the external binary's path.
    pub origin: String,
}

impl std::fmt::Debug for PluginHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginHandle")
            .field("name", &self.name)
            .field("capabilities", &self.capabilities)
            .field("origin", &self.origin)
            .finish()
    }
}

/// How a plugin name resolves.
#[derive(Debug, Clone)]
pub enum Resolved {
    /// A built-in, by its built-in name.
    Builtin(String),
    /// A declared external plugin.
    External(ExternalSpec),
    /// An undeclared `manent-plugin-<name>` binary.
    Discovered(ExternalSpec),
}

/// Plugins by name, started lazily.
pub struct Registry {
    decls: BTreeMap<String, PluginDecl>,
    secrets: Arc<ConfigSecrets>,
    sink: Arc<dyn LogSink>,
    plugin_dir: Option<PathBuf>,
    /// One cell per plugin: the map's lock is held only to find the cell, never across a start
    /// (an external plugin may take up to its `start_timeout`), so other plugins stay usable.
    ready: Mutex<HashMap<String, Arc<OnceCell<Arc<PluginHandle>>>>>,
    hosts: Mutex<HashMap<String, Arc<Host>>>,
    processes: Processes,
    /// True once the engine stops: no external plugin starts any more.
    stopping: tokio::sync::watch::Sender<bool>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("plugins", &self.decls.keys())
            .finish()
    }
}

impl Registry {
    /// The plugins `config` declares, plus every built-in under its own name but those manent.yml
    /// must declare (`exec`); the plugin processes it starts are not recorded (commands that
    /// only inspect).
    pub fn new(config: &Config, sink: Arc<dyn LogSink>) -> Self {
        Registry::with_processes(config, sink, Processes::none())
    }

    /// [`Registry::new`], recording the plugin processes it starts in `processes`.
    pub fn with_processes(config: &Config, sink: Arc<dyn LogSink>, processes: Processes) -> Self {
        let mut decls = config.plugins.clone();
        for name in builtin::NAMES
            .iter()
            .filter(|n| !crate::config::values::MUST_DECLARE.contains(n))
        {
            decls
                .entry((*name).to_owned())
                .or_insert_with(|| PluginDecl {
                    builtin: Some((*name).to_owned()),
                    external: None,
                    options: serde_json::Value::Object(serde_json::Map::new()),
                });
        }
        Registry {
            decls,
            secrets: Arc::new(ConfigSecrets::new(config.secrets.clone())),
            sink,
            plugin_dir: config.plugin_dir.clone(),
            ready: Mutex::new(HashMap::new()),
            hosts: Mutex::new(HashMap::new()),
            processes,
            stopping: tokio::sync::watch::channel(false).0,
        }
    }

    /// Declared plugin names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.decls.keys().map(String::as_str)
    }

    /// The declaration of `name`.
    pub fn decl(&self, name: &str) -> Option<&PluginDecl> {
        self.decls.get(name)
    }

    /// How plugin `name` would run, without running it: a declaration, or a binary found as
    /// `manent-plugin-<name>` (with no sha256 to pin it).
    pub fn resolve(&self, name: &str) -> Option<Resolved> {
        if let Some(d) = self.decls.get(name) {
            return Some(match (&d.builtin, &d.external) {
                (Some(b), _) => Resolved::Builtin(b.clone()),
                (None, Some(e)) => Resolved::External(ExternalSpec {
                    name: name.to_owned(),
                    command: e.command.clone(),
                    args: e.args.clone(),
                    sha256: e.sha256.as_ref().map(|s| s.0.clone()),
                    env: e.env.clone(),
                    start_timeout: e.start_timeout.map_or(Duration::from_secs(15), |d| d.0),
                    options: d.options.clone(),
                }),
                (None, None) => return None,
            });
        }
        let found = activation::discover(name, self.plugin_dir.as_deref())?;
        Some(Resolved::Discovered(ExternalSpec {
            name: name.to_owned(),
            command: found,
            args: Vec::new(),
            sha256: None,
            env: BTreeMap::new(),
            start_timeout: Duration::from_secs(15),
            options: serde_json::Value::Object(serde_json::Map::new()),
        }))
    }

    /// The plugin `name`, instantiated or started on first use. Callers asking for the same
    /// plugin while it starts wait for that one start; a failed start is tried again by the
    /// next caller.
    pub async fn get(&self, name: &str) -> Result<Arc<PluginHandle>, PluginError> {
        let cell = self
            .ready
            .lock()
            .await
            .entry(name.to_owned())
            .or_default()
            .clone();
        cell.get_or_try_init(|| async { self.load(name).await.map(Arc::new) })
            .await
            .cloned()
    }

    async fn load(&self, name: &str) -> Result<PluginHandle, PluginError> {
        match self.resolve(name) {
            None => Err(PluginError::Permanent(format!(
                "no plugin `{name}`: declare it under `plugins:` in manent.yml, or install \
                 `manent-plugin-{name}` on PATH"
            ))),
            Some(Resolved::Builtin(b)) => {
                let options = self.decls.get(name).map(|d| &d.options);
                self.instantiate(name, &b, options.unwrap_or(&serde_json::Value::Null))
            }
            Some(Resolved::Discovered(spec)) => {
                Logger::new(self.sink.clone(), name).warn(&format!(
                    "plugin {name} is not declared in manent.yml: using {} found on the \
                         search path; no sha256 pins it",
                    spec.command.display()
                ));
                self.start_external(spec).await
            }
            Some(Resolved::External(spec)) => self.start_external(spec).await,
        }
    }

    async fn start_external(&self, spec: ExternalSpec) -> Result<PluginHandle, PluginError> {
        // The host checks the binary (exists, executable, sha256) before every start.
        let name = spec.name.clone();
        let origin = spec.command.display().to_string();
        let host = Arc::new(
            Host::new(spec, self.sink.clone(), self.processes.clone())
                .stopped_by(self.stopping.subscribe()),
        );
        self.hosts.lock().await.insert(name.clone(), host.clone());
        let process = host.process().await?;
        let capabilities = process.capabilities.clone();
        Ok(PluginHandle {
            name,
            deployer: Arc::new(Remote::new(host, capabilities.clone())),
            capabilities,
            origin,
        })
    }

    /// The engine stops: a plugin start in progress is abandoned and none begins (a plugin that
    /// never finishes its handshake must not hold the stop for its `start_timeout`); plugins
    /// already running serve the steps in flight until [`Registry::shutdown`].
    pub fn stop_starting(&self) {
        self.stopping.send_replace(true);
    }

    /// Stops every external plugin process (after the engine has drained): each is asked to
    /// stop, then killed; a plugin still starting (or one that does not answer) is killed too.
    pub async fn shutdown(&self) {
        let hosts: Vec<Arc<Host>> = self.hosts.lock().await.values().cloned().collect();
        for h in hosts {
            if tokio::time::timeout(std::time::Duration::from_secs(5), h.shutdown())
                .await
                .is_err()
            {
                tracing::warn!(
                    plugin = h.name(),
                    "the plugin did not stop in time; killing it"
                );
            }
        }
        self.processes.kill_live();
    }

    fn instantiate(
        &self,
        name: &str,
        b: &str,
        options: &serde_json::Value,
    ) -> Result<PluginHandle, PluginError> {
        let factory = builtin::factory(b)
            .ok_or_else(|| PluginError::Permanent(format!("`{b}` is not a built-in plugin")))?;
        let logger = Logger::new(self.sink.clone(), name);
        let deployer = factory(options, logger)
            .map_err(|e| PluginError::Permanent(format!("plugin `{name}` ({b}): {e}")))?;
        let capabilities = Capabilities::of(deployer.as_ref());
        Ok(PluginHandle {
            name: name.to_owned(),
            deployer,
            capabilities,
            origin: format!("builtin:{b}"),
        })
    }

    /// A secret source for one application: only the secrets its descriptor lists.
    pub fn secrets_for(&self, allowed: &[String], descriptor: &str) -> Arc<dyn SecretSource> {
        Arc::new(Allowed {
            inner: self.secrets.clone(),
            allowed: allowed.iter().cloned().collect(),
            descriptor: descriptor.to_owned(),
        })
    }
}

struct Allowed {
    inner: Arc<ConfigSecrets>,
    allowed: BTreeSet<String>,
    descriptor: String,
}

#[async_trait]
impl SecretSource for Allowed {
    async fn secret(&self, name: &str) -> Result<String, PluginError> {
        if !self.allowed.contains(name) {
            return Err(PluginError::Permanent(format!(
                "secret `{name}` is not listed in {} under deploy.secrets",
                self.descriptor
            )));
        }
        self.inner.secret(name).await
    }
}
