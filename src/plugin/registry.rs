//! Hands the engine a plugin by the name descriptors use. Built-ins are instantiated from their
//! factory on first use; their capabilities are known before any target is touched.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Mutex;

use super::builtin;
use super::contract::{Capabilities, Deployer};
use super::error::PluginError;
use super::logger::{LogSink, Logger};
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

/// Plugins by name, started lazily.
pub struct Registry {
    decls: BTreeMap<String, PluginDecl>,
    secrets: Arc<ConfigSecrets>,
    sink: Arc<dyn LogSink>,
    ready: Mutex<HashMap<String, Arc<PluginHandle>>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("plugins", &self.decls.keys())
            .finish()
    }
}

impl Registry {
    /// The plugins `config` declares, plus every built-in under its own name.
    pub fn new(config: &Config, sink: Arc<dyn LogSink>) -> Self {
        let mut decls = config.plugins.clone();
        for name in builtin::NAMES {
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
            ready: Mutex::new(HashMap::new()),
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

    /// The plugin `name`, instantiating it on first use.
    pub async fn get(&self, name: &str) -> Result<Arc<PluginHandle>, PluginError> {
        let mut ready = self.ready.lock().await;
        if let Some(h) = ready.get(name) {
            return Ok(h.clone());
        }
        let decl = self.decls.get(name).ok_or_else(|| {
            PluginError::Permanent(format!(
                "no plugin `{name}`: declare it under `plugins:` in manent.yml"
            ))
        })?;
        let handle = Arc::new(self.instantiate(name, decl)?);
        ready.insert(name.to_owned(), handle.clone());
        Ok(handle)
    }

    fn instantiate(&self, name: &str, decl: &PluginDecl) -> Result<PluginHandle, PluginError> {
        if let Some(b) = &decl.builtin {
            let factory = builtin::factory(b)
                .ok_or_else(|| PluginError::Permanent(format!("`{b}` is not a built-in plugin")))?;
            let logger = Logger::new(self.sink.clone(), name);
            let deployer = factory(&decl.options, logger)
                .map_err(|e| PluginError::Permanent(format!("plugin `{name}` ({b}): {e}")))?;
            let capabilities = Capabilities::of(deployer.as_ref());
            return Ok(PluginHandle {
                name: name.to_owned(),
                deployer,
                capabilities,
                origin: format!("builtin:{b}"),
            });
        }
        Err(PluginError::Permanent(format!(
            "plugin `{name}` is external; this manent cannot run external plugins yet"
        )))
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
