//! A shared group is no stronger than the engine's user. With `engine.shared_group`, the
//! members of a group share the engine's database: any of them can submit a deployment (or
//! write one into the database), and the engine — root, or a deploy user — would run what it
//! carries. So an engine that shares its database runs only what its own configuration says:
//! before a deployment plans anything, what it would run (the plugin, its parameters, the
//! targets, the hooks' commands, the analysis commands and URLs, the secrets it reads) is
//! compared with the engine's own reading of its own files, read again now; the version and
//! the artifact may differ (that is what a deploy chooses), a hook or a canary step may be
//! left out (a switch back runs none), nothing may be added or changed. A deployment that
//! differs fails before anything runs, naming what differs and both digests.

use std::path::Path;

use crate::config::{Config, EnvSpec};

/// Checks `submitted` against what the configuration at `own` (this engine's `manent.yml`)
/// resolves for the same application and environment now.
pub fn vouch(own: &Path, submitted: &EnvSpec) -> Result<(), String> {
    let config = Config::load(own, &crate::plugin::catalog()).map_err(|e| {
        format!(
            "this engine shares its database with a group and runs only what its own \
             configuration says, and that configuration ({}) cannot be read now: {e}",
            own.display()
        )
    })?;
    let (app, env) = (&submitted.application, &submitted.environment);
    let mine = config.environment(app, env).map_err(|e| {
        format!(
            "this engine shares its database with a group and runs only what its own \
             configuration says, which has no {app}/{env}: {e}"
        )
    })?;
    let differs = differences(submitted, &mine);
    if differs.is_empty() {
        return Ok(());
    }
    Err(format!(
        "refused: this engine shares its database with a group (engine.shared_group) and runs \
         only what its own configuration says; {app}/{env} as submitted differs from {} in {} \
         (what runs: submitted sha256 {}, the engine's {}). Nothing ran; submit it from the \
         engine's own configuration (`manent --config {} …`)",
        mine.descriptor.display(),
        differs.join(", "),
        &digest(submitted)[..12],
        &digest(&mine)[..12],
        own.display()
    ))
}

/// What in `sub` is not as in `mine`, by name.
fn differences(sub: &EnvSpec, mine: &EnvSpec) -> Vec<&'static str> {
    let same = |a: &serde_json::Value, b: &serde_json::Value| a == b;
    let mut out = Vec::new();
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
    if canonical(&sub.descriptor) != canonical(&mine.descriptor) {
        out.push("its descriptor file");
    }
    // With `deploy.plugins`, the deployment chose one of the same list.
    let plugin_ok = if mine.plugins.is_empty() {
        sub.plugin == mine.plugin && sub.plugins.is_empty()
    } else {
        sub.plugins == mine.plugins && mine.plugins.contains(&sub.plugin)
    };
    if !plugin_ok || sub.resource_type != mine.resource_type {
        out.push("its plugin");
    }
    if !same(&sub.params, &mine.params) {
        out.push("the plugin's parameters");
    }
    if sub.secrets != mine.secrets {
        out.push("the secrets it reads");
    }
    if !same(&json(&sub.targets), &json(&mine.targets)) {
        out.push("its targets");
    }
    if sub.workdir != mine.workdir {
        out.push("its working directory");
    }
    let hooks = json(&mine.hooks);
    let known = hooks.as_array().cloned().unwrap_or_default();
    if json(&sub.hooks)
        .as_array()
        .is_some_and(|hs| hs.iter().any(|h| !known.contains(h)))
    {
        out.push("its hooks");
    }
    let (theirs, ours) = (json(&sub.strategy), json(&mine.strategy));
    let mut runs = Vec::new();
    commands(&ours, &mut runs);
    let mut asked = Vec::new();
    commands(&theirs, &mut asked);
    if asked.iter().any(|c| !runs.contains(c)) {
        out.push("its analysis");
    }
    out
}

/// Every string under a key that names something run or asked (`command`, `url`, `query`,
/// `address`, `headers`) in a strategy, as JSON.
fn commands(v: &serde_json::Value, out: &mut Vec<serde_json::Value>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                if ["command", "url", "query", "address", "headers", "server"].contains(&k.as_str())
                {
                    out.push(x.clone());
                } else {
                    commands(x, out);
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| commands(x, out)),
        _ => {}
    }
}

/// sha256 of what `spec` runs (the artifact aside).
fn digest(spec: &EnvSpec) -> String {
    let mut s = spec.clone();
    s.artifact = Default::default();
    s.digests = None;
    crate::format::sha256_hex(&serde_json::to_string(&s).unwrap_or_default())
}

/// `v` as JSON.
fn json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or_default()
}
