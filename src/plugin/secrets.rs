//! Secrets reach a plugin only during a call: a `Secrets` handle is opened for one call and
//! closed when it returns, so a plugin that keeps the handle cannot read anything later. Every
//! value read is registered for redaction, so it never reaches a log line, the database or the
//! screen.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;

use super::error::PluginError;
pub use crate::redact::{redact, register_redaction};

/// Where secret values come from.
#[async_trait]
pub trait SecretSource: Send + Sync {
    /// The value of secret `name`.
    async fn secret(&self, name: &str) -> Result<String, PluginError>;
}

pub use crate::config::SecretRef;

/// Secrets declared in `manent.yml`, read when a plugin asks, never before.
#[derive(Debug, Clone, Default)]
pub struct ConfigSecrets {
    sources: BTreeMap<String, SecretRef>,
}

impl ConfigSecrets {
    /// From the `secrets:` section.
    pub fn new(sources: BTreeMap<String, SecretRef>) -> Self {
        ConfigSecrets { sources }
    }
}

#[async_trait]
impl SecretSource for ConfigSecrets {
    async fn secret(&self, name: &str) -> Result<String, PluginError> {
        let source = self.sources.get(name).ok_or_else(|| {
            PluginError::Permanent(format!(
                "secret `{name}` is not declared under `secrets:` in manent.yml"
            ))
        })?;
        let value = match source {
            SecretRef::Env(var) => std::env::var(var).map_err(|_| {
                PluginError::Permanent(format!(
                    "secret `{name}`: the environment variable {var} is not set"
                ))
            })?,
            SecretRef::File(path) => read_secret_file(name, path).await?,
            SecretRef::Literal(v) => v.clone(),
        };
        register_redaction(&value);
        Ok(value)
    }
}

impl ConfigSecrets {
    /// Reads every declared secret now, so each is known to redaction before anything runs —
    /// whatever a call later asks for (a command that cats a `file:` secret no call read prints
    /// `[redacted]`). What cannot be read now is returned, to be said; a call that needs it
    /// fails then. Returns (warnings, notes): a short secret is warned of; one that cannot be
    /// read here (an `env:` this engine was not given) is only noted.
    pub async fn preload(&self) -> (Vec<String>, Vec<String>) {
        let (mut warnings, mut notes) = (Vec::new(), Vec::new());
        for name in self.sources.keys() {
            match self.secret(name).await {
                Ok(v) if v.chars().count() < SHORT => warnings.push(format!(
                    "secret `{name}` is shorter than {SHORT} characters: it is redacted \
                     wherever those characters appear (`manent validate` refuses it unless \
                     engine.allow_short_secrets is set)"
                )),
                Ok(_) => {}
                Err(e) => notes.push(e.to_string()),
            }
        }
        (warnings, notes)
    }
}

/// Secrets shorter than this are refused by `manent validate` (a short value is guessed, and
/// redacting it hides ordinary words).
pub const SHORT: usize = 8;

/// `value` with each `${secret:NAME}` replaced by the secret, read from `source` now (and so
/// known to redaction).
pub async fn substitute(value: &str, source: &dyn SecretSource) -> Result<String, PluginError> {
    let names = crate::config::values::secret_refs(value).map_err(PluginError::Permanent)?;
    if names.is_empty() {
        return Ok(value.to_owned());
    }
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    for name in names {
        let marker = format!("${{secret:{name}}}");
        let Some(at) = rest.find(&marker) else {
            break;
        };
        out.push_str(&rest[..at]);
        out.push_str(&source.secret(&name).await?);
        rest = &rest[at + marker.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

#[async_trait]
impl SecretSource for Secrets {
    async fn secret(&self, name: &str) -> Result<String, PluginError> {
        Secrets::secret(self, name).await
    }
}

/// Largest secret file read.
const SECRET_MAX: u64 = 1 << 20;

/// A `file:` secret: a regular file of at most 1 MiB, read within 5 s (a FIFO or a device would
/// block a deploy, or never end); the trailing line break removed.
async fn read_secret_file(name: &str, path: &str) -> Result<String, PluginError> {
    let fail = |why: String| PluginError::Permanent(format!("secret `{name}`: {path}: {why}"));
    let file = std::path::PathBuf::from(path);
    let read =
        tokio::task::spawn_blocking(move || crate::sys::files::read_regular(&file, SECRET_MAX));
    let bytes = tokio::time::timeout(std::time::Duration::from_secs(5), read)
        .await
        .map_err(|_| fail("reading it took longer than 5s".into()))?
        .map_err(|e| fail(format!("cannot read it: {e}")))?
        .map_err(|e| fail(e.to_string()))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| fail("cannot read it: stream did not contain valid UTF-8".into()))?;
    Ok(text.trim_end_matches(['\n', '\r']).to_owned())
}

/// A call's access to secrets.
#[derive(Clone, Default)]
pub struct Secrets {
    inner: Option<Arc<Open>>,
}

struct Open {
    source: Arc<dyn SecretSource>,
    open: AtomicBool,
    /// A value read is cut from every later log line of this process.
    redact: bool,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let open = self
            .inner
            .as_ref()
            .is_some_and(|i| i.open.load(Ordering::SeqCst));
        f.debug_struct("Secrets")
            .field("open", &open)
            .finish_non_exhaustive()
    }
}

/// Closes its call's `Secrets` when dropped.
#[derive(Debug)]
pub struct SecretsGuard(Secrets);

impl Drop for SecretsGuard {
    fn drop(&mut self) {
        if let Some(i) = &self.0.inner {
            i.open.store(false, Ordering::SeqCst);
        }
    }
}

impl Secrets {
    /// No secrets (Validate gets this).
    pub fn none() -> Self {
        Secrets { inner: None }
    }

    /// Secrets from `source` for one call; they close when the guard drops.
    pub fn for_call(source: Arc<dyn SecretSource>) -> (Secrets, SecretsGuard) {
        Secrets::open(source, true)
    }

    /// [`Secrets::for_call`], without cutting a value read from this process's log lines: for
    /// the conformance kit, which must see a plugin leak its made-up secret to say so.
    pub fn for_call_unredacted(source: Arc<dyn SecretSource>) -> (Secrets, SecretsGuard) {
        Secrets::open(source, false)
    }

    fn open(source: Arc<dyn SecretSource>, redact: bool) -> (Secrets, SecretsGuard) {
        let s = Secrets {
            inner: Some(Arc::new(Open {
                source,
                open: AtomicBool::new(true),
                redact,
            })),
        };
        (s.clone(), SecretsGuard(s))
    }

    /// True for a call without secrets.
    pub fn is_none(&self) -> bool {
        self.inner.is_none()
    }

    /// Reads secret `name`; fails outside the call the handle was opened for.
    pub async fn secret(&self, name: &str) -> Result<String, PluginError> {
        match &self.inner {
            Some(i) if i.open.load(Ordering::SeqCst) => {
                let v = i.source.secret(name).await?;
                if i.redact {
                    register_redaction(&v);
                }
                Ok(v)
            }
            Some(_) => Err(PluginError::Permanent(format!(
                "secret `{name}` requested after the call returned: secrets are available only \
                 during Deploy, DryRun, CurrentRelease and Rollback"
            ))),
            None => Err(PluginError::Permanent(format!(
                "secret `{name}` requested where no secrets are available (Validate gets none)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn secrets_close_when_the_call_returns_and_values_are_redacted() {
        let src = ConfigSecrets::new(BTreeMap::from([(
            "k".to_owned(),
            SecretRef::Literal("s3cr3t-value".into()),
        )]));
        let (secrets, guard) = Secrets::for_call(Arc::new(src));
        assert_eq!(secrets.secret("k").await.unwrap(), "s3cr3t-value");
        assert!(
            secrets
                .secret("missing")
                .await
                .unwrap_err()
                .to_string()
                .contains("not declared")
        );
        drop(guard);
        let err = secrets.secret("k").await.unwrap_err().to_string();
        assert!(err.contains("after the call returned"), "{err}");
        assert_eq!(redact("token=s3cr3t-value;"), "token=[redacted];");
    }

    #[tokio::test]
    async fn references_are_substituted_and_an_unclosed_one_is_an_error() {
        let src = ConfigSecrets::new(BTreeMap::from([(
            "tok".to_owned(),
            SecretRef::Literal("t0k3n-value-77".into()),
        )]));
        assert_eq!(
            substitute("Bearer ${secret:tok}; again ${secret:tok}", &src)
                .await
                .unwrap(),
            "Bearer t0k3n-value-77; again t0k3n-value-77"
        );
        assert_eq!(substitute("plain", &src).await.unwrap(), "plain");
        assert!(substitute("${secret:tok", &src).await.is_err());
        assert!(substitute("${secret:nope}", &src).await.is_err());
    }

    #[test]
    fn parses_sources() {
        assert_eq!(
            SecretRef::parse("env:KEY").unwrap(),
            SecretRef::Env("KEY".into())
        );
        assert_eq!(
            SecretRef::parse("file:/x").unwrap(),
            SecretRef::File("/x".into())
        );
        assert!(SecretRef::parse("KEY").is_err());
    }
}
