//! Lifecycle hooks as written in a descriptor (Helm's chart hooks, adapted): each hook runs at
//! its events, in weight order, serially, each ready before the next; its optional `delete:`
//! command runs as its delete policy says. Every mistake is reported at its line and column.
//!
//! ```yaml
//! hooks:
//!   - name: migrate
//!     events: [pre-deploy]
//!     weight: "-5"                 # an integer, also as a string (as Helm writes it)
//!     command: ./migrate.sh        # or http: {url: …}, or wait: {url: … | command: …}
//!     timeout: 5m
//!     retries: 1
//!     delete: ./drop-temp-tables.sh
//!     delete_policy: [before-hook-creation, hook-succeeded]
//!   - name: smoke
//!     events: [post-deploy, test]
//!     http: {url: "http://127.0.0.1:8080/health", status: 200}
//!     on_failure: continue         # only after the fact: post-deploy, post-rollback, post-promote
//! ```

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::error::nearest;
use super::values::{Dur, HeaderName, HeaderValue, SecretName};

/// When a hook runs.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Event {
    /// Before any target of a deploy (or a canary's candidate) is touched.
    PreDeploy,
    /// After every target is deployed (a canary: after its promotion).
    PostDeploy,
    /// Before a rollback (and an atomic or aborted deploy's undo).
    PreRollback,
    /// After it.
    PostRollback,
    /// Before a canary's candidate becomes the stable release.
    PrePromote,
    /// After it.
    PostPromote,
    /// Only on demand (`manent test`, the console's `t`), against what is live.
    Test,
    /// Before each target of a deploy or a rollback is touched (inside its step: drain it from
    /// a load balancer, stop a service). `MANENT_TARGET`, `{{target}}`.
    PreTarget,
    /// After each target's release is switched, before the next batch (inside its step:
    /// restart it, wait for its health). A failure fails that target.
    PostTarget,
}

/// Every event, in the order they are documented.
pub const EVENTS: [Event; 9] = [
    Event::PreDeploy,
    Event::PreTarget,
    Event::PostTarget,
    Event::PostDeploy,
    Event::PreRollback,
    Event::PostRollback,
    Event::PrePromote,
    Event::PostPromote,
    Event::Test,
];

impl Event {
    /// `pre-deploy`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Event::PreDeploy => "pre-deploy",
            Event::PostDeploy => "post-deploy",
            Event::PreRollback => "pre-rollback",
            Event::PostRollback => "post-rollback",
            Event::PrePromote => "pre-promote",
            Event::PostPromote => "post-promote",
            Event::Test => "test",
            Event::PreTarget => "pre-target",
            Event::PostTarget => "post-target",
        }
    }

    /// Parses an event's name.
    pub fn parse(s: &str) -> Option<Event> {
        EVENTS.into_iter().find(|e| e.as_str() == s)
    }

    /// An event that comes after the fact (a failure there may `continue`).
    pub fn is_post(self) -> bool {
        matches!(
            self,
            Event::PostDeploy | Event::PostRollback | Event::PostPromote | Event::PostTarget
        )
    }

    /// An event that runs once per target, inside the target's step.
    pub fn per_target(self) -> bool {
        matches!(self, Event::PreTarget | Event::PostTarget)
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// What a hook does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookKind {
    /// A local command through `sh` (Helm's Job): ready when it exits 0.
    Command { command: String },
    /// An HTTP request: ready on the expected status.
    Http(HttpHook),
    /// Readiness: polls a URL or a command until it succeeds, or the timeout passes.
    Wait(WaitHook),
}

/// The order kinds run in when weights tie (then the name).
pub const KINDS: [&str; 3] = ["command", "http", "wait"];

impl HookKind {
    /// `command`, `http`, `wait`.
    pub fn as_str(&self) -> &'static str {
        match self {
            HookKind::Command { .. } => "command",
            HookKind::Http(_) => "http",
            HookKind::Wait(_) => "wait",
        }
    }

    /// Its place in [`KINDS`].
    pub fn rank(&self) -> usize {
        KINDS.iter().position(|k| *k == self.as_str()).unwrap_or(0)
    }
}

/// An HTTP hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpHook {
    /// `GET`, `POST`, …
    pub method: String,
    /// `http://` or `https://`.
    pub url: String,
    /// Headers, `Name: value`.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The status that makes it ready.
    pub status: u16,
}

/// A readiness wait.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitHook {
    /// A URL that must answer `status`, or a command that must exit 0.
    pub check: WaitCheck,
    /// Between polls.
    #[serde(with = "crate::duration_ms")]
    pub interval: Duration,
}

/// What a wait polls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitCheck {
    /// A GET that must answer `status`.
    Url { url: String, status: u16 },
    /// A command that must exit 0.
    Command { command: String },
}

/// When a hook's `delete:` command runs (Helm's hook-delete-policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DeletePolicy {
    /// Before the hook runs again (the default).
    BeforeHookCreation,
    /// After the event's hooks all succeeded.
    HookSucceeded,
    /// After the hook failed.
    HookFailed,
}

pub(super) const POLICIES: [&str; 3] = ["before-hook-creation", "hook-succeeded", "hook-failed"];

impl DeletePolicy {
    /// `before-hook-creation`, …
    pub fn as_str(self) -> &'static str {
        match self {
            DeletePolicy::BeforeHookCreation => "before-hook-creation",
            DeletePolicy::HookSucceeded => "hook-succeeded",
            DeletePolicy::HookFailed => "hook-failed",
        }
    }
}

/// What a failing hook does to its deployment.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// The deployment fails (the default).
    #[default]
    Fail,
    /// The deployment goes on; the failure is recorded (post-events only).
    Continue,
}

/// A hook, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hook {
    /// Unique in its application (the moniker `<env>::<app>::hook::<name>`).
    pub name: String,
    /// When it runs.
    pub events: Vec<Event>,
    /// Lower first.
    pub weight: i32,
    /// What it does.
    pub kind: HookKind,
    /// One attempt's limit (a wait's whole wait).
    #[serde(with = "crate::duration_ms")]
    pub timeout: Duration,
    /// Retries after a failed attempt.
    pub retries: u32,
    /// What removes what it created.
    #[serde(default)]
    pub delete: Option<String>,
    /// When `delete` runs.
    pub delete_policy: Vec<DeletePolicy>,
    /// What its failure does.
    #[serde(default)]
    pub on_failure: OnFailure,
    /// Secrets it reads (`MANENT_SECRET_<NAME>`), by reference.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Variables it gets, as written.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Variables of the engine's own environment it gets (nothing else of it is passed).
    #[serde(default)]
    pub pass_env: Vec<String>,
}

impl Hook {
    /// True when `delete` runs under `policy`.
    pub fn deletes(&self, policy: DeletePolicy) -> bool {
        self.delete.is_some() && self.delete_policy.contains(&policy)
    }
}

/// The weights a hook may have.
pub const WEIGHTS: std::ops::RangeInclusive<i64> = -10_000..=10_000;

/// `hooks:` as written: a list, each checked as it comes (names unique).
#[derive(Debug, Clone, Default)]
pub struct HooksSpec(pub Vec<Hook>);

impl<'de> Deserialize<'de> for HooksSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = HooksSpec;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of hooks, e.g. `[{name: migrate, events: [pre-deploy], command: ./migrate}]`")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<HooksSpec, A::Error> {
                let mut hooks: Vec<Hook> = Vec::new();
                while let Some(h) = seq.next_element::<HookSpec>()? {
                    let h = h.resolve::<A::Error>()?;
                    if hooks.iter().any(|x| x.name == h.name) {
                        return Err(de::Error::custom(format!(
                            "hook `{}` is defined twice; hook names are unique in an \
                             application (an environment's hook of the same name replaces it)",
                            h.name
                        )));
                    }
                    hooks.push(h);
                }
                Ok(HooksSpec(hooks))
            }
        }
        d.deserialize_seq(V)
    }
}

/// One hook as written.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct HookSpec {
    /// Its name, unique in the application (an environment's hook of the same name replaces it).
    name: String,
    /// When it runs: pre-deploy, post-deploy, pre-target, post-target, pre-rollback,
    /// post-rollback, pre-promote, post-promote, test.
    events: Vec<EventSpec>,
    /// Its order within an event, lower first (default 0; a string holding an integer too).
    #[serde(default)]
    weight: Option<WeightSpec>,
    /// A command, through sh in the descriptor's directory: ready on exit 0.
    #[serde(default)]
    command: Option<String>,
    /// An HTTP request: ready on the status expected.
    #[serde(default)]
    http: Option<HttpSpec>,
    /// A URL or a command polled until ready.
    #[serde(default)]
    wait: Option<WaitSpec>,
    /// Its time limit (default 5m).
    #[serde(default)]
    timeout: Option<Dur>,
    /// Attempts after a failure (default 0).
    #[serde(default)]
    retries: Option<u32>,
    /// A command that cleans up what the hook made, run as its `delete_policy` says.
    #[serde(default)]
    delete: Option<String>,
    /// When `delete` runs: before-hook-creation (the default), hook-succeeded, hook-failed.
    #[serde(default)]
    delete_policy: Option<Vec<PolicySpec>>,
    /// What its failure does: fail (the default), or continue (post-events only).
    #[serde(default)]
    on_failure: Option<OnFailureSpec>,
    /// Secrets it reads (`$MANENT_SECRET_NAME`, `${secret:NAME}`), during its run only.
    #[serde(default)]
    secrets: Vec<SecretName>,
    /// Environment variables it gets.
    #[serde(default)]
    env: std::collections::BTreeMap<String, String>,
    /// Variables of the engine's own environment passed to it.
    #[schemars(inner(regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]*$")))]
    #[serde(default)]
    pass_env: Vec<String>,
}

/// A hook's HTTP request.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "HookHttp")]
pub(super) struct HttpSpec {
    /// The URL.
    url: String,
    /// The method (default GET).
    #[serde(default)]
    method: Option<String>,
    /// Headers; `${secret:NAME}` in a value reads a secret the hook lists.
    #[serde(default)]
    headers: std::collections::BTreeMap<HeaderName, HeaderValue>,
    /// The status that means ready (default 200).
    #[serde(default)]
    status: Option<u16>,
}

/// What a waiting hook polls.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct WaitSpec {
    /// A URL, ready on its status.
    #[serde(default)]
    url: Option<String>,
    /// The status that means ready (default 200).
    #[serde(default)]
    status: Option<u16>,
    /// Or a command, ready on exit 0.
    #[serde(default)]
    command: Option<String>,
    /// Between polls (default 2s).
    #[serde(default)]
    interval: Option<Dur>,
}

fn check_url<E: de::Error>(what: &str, url: &str) -> Result<(), E> {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        Ok(())
    } else {
        Err(E::custom(format!(
            "{what} `{url}`: write an http:// or https:// URL"
        )))
    }
}

fn check_status<E: de::Error>(what: &str, s: u16) -> Result<u16, E> {
    if (100..=599).contains(&s) {
        Ok(s)
    } else {
        Err(E::custom(format!(
            "{what} {s}: write an HTTP status (100 to 599)"
        )))
    }
}

impl HookSpec {
    fn resolve<E: de::Error>(self) -> Result<Hook, E> {
        if let Some(why) = crate::moniker::Moniker::check_part(&self.name, "hook name") {
            return Err(E::custom(why));
        }
        if self.events.is_empty() {
            return Err(E::custom(format!(
                "hook `{}` has no events; give at least one of {}",
                self.name,
                EVENTS.map(Event::as_str).join(", ")
            )));
        }
        let events: Vec<Event> = self.events.into_iter().map(|e| e.0).collect();
        let weight = match self.weight {
            None => 0,
            Some(w) => {
                let n = w.0;
                if !WEIGHTS.contains(&n) {
                    return Err(E::custom(format!(
                        "hook `{}`: weight {n} is out of range ({} to {})",
                        self.name,
                        WEIGHTS.start(),
                        WEIGHTS.end()
                    )));
                }
                i32::try_from(n).unwrap_or(0)
            }
        };
        let kind = match (self.command, self.http, self.wait) {
            (Some(command), None, None) if !command.trim().is_empty() => {
                HookKind::Command { command }
            }
            (None, Some(h), None) => http_hook::<E>(&self.name, &self.secrets, h)?,
            (None, None, Some(w)) => wait_hook::<E>(w)?,
            (None, None, None) | (Some(_), None, None) => {
                return Err(E::custom(format!(
                    "hook `{}` does nothing: give `command: …`, `http: {{url: …}}` or \
                     `wait: {{url: … | command: …}}`",
                    self.name
                )));
            }
            _ => {
                return Err(E::custom(format!(
                    "hook `{}` has more than one kind; give one of command, http, wait",
                    self.name
                )));
            }
        };
        check_env::<E>(&self.name, &self.env, &self.pass_env, &self.secrets)?;
        let on_failure = self.on_failure.map_or(OnFailure::Fail, |o| o.0);
        if on_failure == OnFailure::Continue
            && let Some(pre) = events.iter().find(|e| !e.is_post() && **e != Event::Test)
        {
            return Err(E::custom(format!(
                "hook `{}`: on_failure: continue is only for post-events (post-deploy, \
                 post-target, post-rollback, post-promote); a failing {pre} hook must stop what \
                 it guards",
                self.name
            )));
        }
        check_per_target::<E>(&self.name, &events, &kind, self.delete.as_deref())?;
        let timeout = self.timeout.map_or(Duration::from_secs(300), |d| d.0);
        let interval = match &kind {
            HookKind::Wait(w) => w.interval,
            _ => Duration::from_secs(1),
        };
        if timeout.is_zero() || interval.is_zero() {
            return Err(E::custom(format!(
                "hook `{}`: a zero {} would never let it run; give a duration like `30s` or `5m`",
                self.name,
                if timeout.is_zero() {
                    "timeout"
                } else {
                    "wait interval"
                }
            )));
        }
        let delete_policy: Vec<DeletePolicy> = match self.delete_policy {
            None => vec![DeletePolicy::BeforeHookCreation],
            Some(p) => p.into_iter().map(|p| p.0).collect(),
        };
        Ok(Hook {
            name: self.name,
            events,
            weight,
            kind,
            timeout,
            retries: self.retries.unwrap_or(0),
            delete: self.delete.filter(|d| !d.trim().is_empty()),
            delete_policy,
            on_failure,
            secrets: self.secrets.into_iter().map(|s| s.0).collect(),
            env: self.env,
            pass_env: self.pass_env,
        })
    }
}

/// Per-target events run inside a target's step: a `delete:` (a step of its own) cannot go
/// with them, and `{{target}}`/`{{host}}` mean something only there.
fn check_per_target<E: de::Error>(
    hook: &str,
    events: &[Event],
    kind: &HookKind,
    delete: Option<&str>,
) -> Result<(), E> {
    let per_target = events.iter().filter(|e| e.per_target()).count();
    if per_target > 0 && delete.is_some_and(|d| !d.trim().is_empty()) {
        return Err(E::custom(format!(
            "hook `{hook}`: a pre-target or post-target hook has no `delete:` (it runs inside \
             each target's step); undo what it does in the other per-target event"
        )));
    }
    let texts: Vec<&str> = match kind {
        HookKind::Command { command } => vec![command],
        HookKind::Http(h) => vec![&h.url],
        HookKind::Wait(w) => match &w.check {
            WaitCheck::Url { url, .. } => vec![url],
            WaitCheck::Command { command } => vec![command],
        },
    };
    let templated = texts
        .iter()
        .any(|t| t.contains("{{target}}") || t.contains("{{host}}"));
    if templated && per_target < events.len() {
        return Err(E::custom(format!(
            "hook `{hook}`: {{{{target}}}} and {{{{host}}}} are filled in only for pre-target \
             and post-target; a hook that also runs once per deployment cannot use them \
             (split it in two)"
        )));
    }
    Ok(())
}

/// An `http:` hook, checked: its URL, method, and the secrets its URL and headers read (each
/// listed by the hook).
fn http_hook<E: de::Error>(hook: &str, secrets: &[SecretName], h: HttpSpec) -> Result<HookKind, E> {
    check_url::<E>("http.url", &h.url)?;
    let method = h
        .method
        .unwrap_or_else(|| "GET".into())
        .to_ascii_uppercase();
    if !["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"].contains(&method.as_str()) {
        return Err(E::custom(format!(
            "http.method `{method}`: one of GET, HEAD, POST, PUT, PATCH, DELETE"
        )));
    }
    let headers: Vec<(String, String)> = h.headers.into_iter().map(|(k, v)| (k.0, v.0)).collect();
    for (what, text) in std::iter::once(("http.url".to_owned(), &h.url)).chain(
        headers
            .iter()
            .map(|(k, v)| (format!("http.headers.{k}"), v)),
    ) {
        for name in super::values::secret_refs(text).map_err(E::custom)? {
            if !secrets.iter().any(|s| s.0 == name) {
                return Err(E::custom(format!(
                    "hook `{hook}`: {what} reads ${{secret:{name}}}, which the hook does \
                     not list: add `secrets: [{name}]` to it"
                )));
            }
        }
    }
    Ok(HookKind::Http(HttpHook {
        method,
        url: h.url,
        headers,
        status: check_status::<E>("http.status", h.status.unwrap_or(200))?,
    }))
}

/// A `wait:` hook, checked: a URL polled until it answers the status, or a command polled
/// until it exits 0.
fn wait_hook<E: de::Error>(w: WaitSpec) -> Result<HookKind, E> {
    let check = match (w.url, w.command) {
        (Some(url), None) => {
            check_url::<E>("wait.url", &url)?;
            if url.contains("${secret:") {
                return Err(E::custom(
                    "wait.url: `${secret:…}` is not read in a wait hook's URL; an \
                     http hook reads it in its URL and headers",
                ));
            }
            WaitCheck::Url {
                url,
                status: check_status::<E>("wait.status", w.status.unwrap_or(200))?,
            }
        }
        (None, Some(command)) if !command.trim().is_empty() => WaitCheck::Command { command },
        _ => {
            return Err(E::custom(
                "wait: give `url: …` (polled until it answers `status`) or \
                 `command: …` (polled until it exits 0), one of them",
            ));
        }
    };
    Ok(HookKind::Wait(WaitHook {
        check,
        interval: w.interval.map_or(Duration::from_secs(2), |d| d.0),
    }))
}

/// The hook's `env` and `pass_env` names are variable names of its own (not `MANENT_`), and
/// every secret its values read is listed by the hook.
fn check_env<E: de::Error>(
    hook: &str,
    env: &std::collections::BTreeMap<String, String>,
    pass_env: &[String],
    secrets: &[SecretName],
) -> Result<(), E> {
    for name in env.keys().chain(pass_env) {
        let ok = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            return Err(E::custom(format!(
                "hook `{hook}`: `{name}` is not a variable name (letters, digits and _)"
            )));
        }
        if name.starts_with("MANENT_") {
            return Err(E::custom(format!(
                "hook `{hook}`: `{name}`: MANENT_ variables are manent's own"
            )));
        }
    }
    for (name, value) in env {
        for secret in super::values::secret_refs(value).map_err(E::custom)? {
            if !secrets.iter().any(|s| s.0 == secret) {
                return Err(E::custom(format!(
                    "hook `{hook}`: env.{name} reads ${{secret:{secret}}}, which the hook does \
                     not list: add `secrets: [{secret}]` to it"
                )));
            }
        }
    }
    Ok(())
}

pub(super) struct EventSpec(Event);

impl<'de> Deserialize<'de> for EventSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Event::parse(s.trim()).map(EventSpec).ok_or_else(|| {
            let names = EVENTS.map(Event::as_str);
            let guess = helm(s.trim())
                .map(|e| format!("Helm's `{}` is manent's `{e}`; ", s.trim()))
                .or_else(|| {
                    nearest(s.trim(), names.iter().copied())
                        .map(|g| format!("did you mean `{g}`? "))
                })
                .unwrap_or_default();
            de::Error::custom(format!(
                "unknown hook event `{s}` ({guess}events: {})",
                names.join(", ")
            ))
        })
    }
}

/// Helm's hook events, for those who write them here: an install and an upgrade are both deploys.
fn helm(event: &str) -> Option<&'static str> {
    Some(match event {
        "pre-install" | "pre-upgrade" => "pre-deploy",
        "post-install" | "post-upgrade" => "post-deploy",
        _ => return None,
    })
}

pub(super) struct PolicySpec(DeletePolicy);

impl<'de> Deserialize<'de> for PolicySpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let p = match s.trim() {
            "before-hook-creation" => DeletePolicy::BeforeHookCreation,
            "hook-succeeded" => DeletePolicy::HookSucceeded,
            "hook-failed" => DeletePolicy::HookFailed,
            other => {
                let guess = nearest(other, POLICIES.iter().copied())
                    .map(|g| format!("did you mean `{g}`? "))
                    .unwrap_or_default();
                return Err(de::Error::custom(format!(
                    "unknown delete policy `{other}` ({guess}policies: {})",
                    POLICIES.join(", ")
                )));
            }
        };
        Ok(PolicySpec(p))
    }
}

pub(super) struct OnFailureSpec(OnFailure);

impl<'de> Deserialize<'de> for OnFailureSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.trim() {
            "fail" => Ok(OnFailureSpec(OnFailure::Fail)),
            "continue" => Ok(OnFailureSpec(OnFailure::Continue)),
            other => Err(de::Error::custom(format!(
                "on_failure `{other}`: write `fail` (the default) or `continue`"
            ))),
        }
    }
}

/// An integer weight, or a string holding one (`"-5"`, as Helm writes it).
pub(super) struct WeightSpec(i64);

impl<'de> Deserialize<'de> for WeightSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = WeightSpec;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer weight (`-5`, `10`, or as a string `\"-5\"`)")
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<WeightSpec, E> {
                Ok(WeightSpec(v))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<WeightSpec, E> {
                i64::try_from(v)
                    .map(WeightSpec)
                    .map_err(|_| E::custom(format!("weight {v} is out of range")))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<WeightSpec, E> {
                v.trim().parse::<i64>().map(WeightSpec).map_err(|_| {
                    E::custom(format!(
                        "weight `{v}` is not an integer (write `-5`, `10`, or `\"-5\"`)"
                    ))
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// `app`'s hooks with `env`'s on top: an environment's hook replaces the application's of the
/// same name and adds the others.
pub fn merged(app: &[Hook], env: Option<&[Hook]>) -> Vec<Hook> {
    let mut out: Vec<Hook> = app.to_vec();
    for h in env.unwrap_or_default() {
        match out.iter_mut().find(|x| x.name == h.name) {
            Some(x) => *x = h.clone(),
            None => out.push(h.clone()),
        }
    }
    out
}

/// The hooks of `event`, in the order they run: weight, then kind, then name.
pub fn ordered(hooks: &[Hook], event: Event) -> Vec<&Hook> {
    let mut v: Vec<&Hook> = hooks.iter().filter(|h| h.events.contains(&event)).collect();
    v.sort_by(|a, b| (a.weight, a.kind.rank(), &a.name).cmp(&(b.weight, b.kind.rank(), &b.name)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<Vec<Hook>, String> {
        yaml_serde::from_str::<HooksSpec>(yaml)
            .map(|h| h.0)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn weights_kinds_and_names_order_the_hooks() {
        let hooks = parse(
            "- {name: b, events: [pre-deploy], weight: 5, command: 'true'}\n\
             - {name: a, events: [pre-deploy], weight: '10', command: 'true'}\n\
             - {name: z, events: [pre-deploy], weight: \"-5\", command: 'true'}\n\
             - {name: w, events: [pre-deploy], wait: {command: 'true'}}\n\
             - {name: h, events: [pre-deploy], http: {url: 'http://x/'}}\n\
             - {name: c2, events: [pre-deploy], command: 'true'}\n\
             - {name: c1, events: [pre-deploy, test], command: 'true'}\n\
             - {name: t, events: [test], command: 'true'}\n",
        )
        .unwrap();
        let names: Vec<&str> = ordered(&hooks, Event::PreDeploy)
            .iter()
            .map(|h| h.name.as_str())
            .collect();
        assert_eq!(names, ["z", "c1", "c2", "h", "w", "b", "a"]);
        assert_eq!(hooks[0].delete_policy, [DeletePolicy::BeforeHookCreation]);
        let stored = serde_json::to_string(&hooks).unwrap();
        assert_eq!(serde_json::from_str::<Vec<Hook>>(&stored).unwrap(), hooks);
    }

    #[test]
    fn mistakes_are_said_plainly() {
        for (yaml, expected) in [
            (
                "- {name: a, events: [pre-deplyo], command: x}",
                "did you mean `pre-deploy`?",
            ),
            (
                "- {name: a, events: [pre-install], command: x}",
                "unknown hook event `pre-install` (Helm's `pre-install` is manent's `pre-deploy`",
            ),
            (
                "- {name: a, events: [post-upgrade], command: x}",
                "Helm's `post-upgrade` is manent's `post-deploy`",
            ),
            (
                "- {name: a, events: [test], command: x, delete_policy: [hook-succeed]}",
                "did you mean `hook-succeeded`?",
            ),
            (
                "- {name: a, events: [test], comand: x}",
                "unknown field `comand`",
            ),
            ("- {name: a, events: [test]}", "does nothing"),
            (
                "- {name: a, events: [test], command: x, timeout: 0s}",
                "a zero timeout would never let it run",
            ),
            (
                "- {name: a, events: [test], wait: {command: x, interval: 0s}}",
                "a zero wait interval",
            ),
            (
                "- {name: a, events: [test], command: x, http: {url: 'http://x'}}",
                "more than one kind",
            ),
            (
                "- {name: a, events: [test], command: x}\n- {name: a, events: [test], command: y}",
                "defined twice",
            ),
            (
                "- {name: a, events: [pre-deploy], command: x, on_failure: continue}",
                "only for post-events",
            ),
            (
                "- {name: a, events: [test], command: x, weight: 99999}",
                "out of range",
            ),
            (
                "- {name: a, events: [test], command: x, weight: 'soon'}",
                "is not an integer",
            ),
            ("- {name: 'a b', events: [test], command: x}", "white space"),
            ("- {name: a, events: [], command: x}", "has no events"),
            ("- {name: a, events: [test], wait: {}}", "give `url: …`"),
            (
                "- {name: a, events: [test], http: {url: 'ftp://x'}}",
                "http:// or https://",
            ),
        ] {
            let err = parse(yaml).unwrap_err();
            assert!(err.contains(expected), "{yaml}: {err}");
        }
    }

    #[test]
    fn an_environment_replaces_hooks_by_name_and_adds_others() {
        let app = parse(
            "- {name: a, events: [test], command: x}\n- {name: b, events: [test], command: y}",
        )
        .unwrap();
        let env = parse(
            "- {name: b, events: [test], command: z}\n- {name: c, events: [test], command: w}",
        )
        .unwrap();
        let m = merged(&app, Some(&env));
        let cmds: Vec<String> = m
            .iter()
            .map(|h| match &h.kind {
                HookKind::Command { command } => format!("{}={command}", h.name),
                _ => String::new(),
            })
            .collect();
        assert_eq!(cmds, ["a=x", "b=z", "c=w"]);
    }
}
