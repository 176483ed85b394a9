//! `deploy: {plugins: [a, b]}`: the plugin a deployment uses is the first whose `Supports`
//! says it can deploy the artifact. A plugin that does not start, whose `Supports` fails, does
//! not answer in time or is not implemented (UNIMPLEMENTED) counts as "no", and is said as
//! such. The choice is made once, as the deployment is recorded: a replay or a resume uses the
//! plugin it chose.

use std::time::Duration;

use crate::config::EnvSpec;
use crate::plugin::Registry;

/// How long one plugin's `Supports` may take.
const ASK_WITHIN: Duration = Duration::from_secs(10);

/// `spec` with its plugin chosen from `plugins:` (and why in `chosen`); `spec` itself when
/// it names one plugin. None supporting the artifact: why each said no.
pub async fn choose(registry: &Registry, spec: &EnvSpec) -> Result<EnvSpec, String> {
    if spec.plugins.is_empty() {
        return Ok(spec.clone());
    }
    let a = &spec.artifact;
    let what = format!("{} artifact {} {}", a.kind, a.name, a.version);
    let mut said_no = Vec::new();
    for name in &spec.plugins {
        let no = match registry.get(name).await {
            Err(e) => format!("{name} did not start ({e})"),
            Ok(h) => match tokio::time::timeout(ASK_WITHIN, h.deployer.supports(a)).await {
                Ok(Ok(true)) => {
                    let mut chosen = spec.clone();
                    chosen.plugin.clone_from(name);
                    chosen.chosen = Some(if said_no.is_empty() {
                        format!("{name} supports the {what}")
                    } else {
                        format!("{name} supports the {what}; not {}", said_no.join("; not "))
                    });
                    return Ok(chosen);
                }
                Ok(Ok(false)) => format!("{name}: Supports says no"),
                Ok(Err(e)) => format!("{name}: Supports failed, counted as no ({e})"),
                Err(_) => format!(
                    "{name}: Supports did not answer within {}s, counted as no",
                    ASK_WITHIN.as_secs()
                ),
            },
        };
        said_no.push(no);
    }
    Err(format!(
        "no plugin of deploy.plugins [{}] supports the {what}: {}",
        spec.plugins.join(", "),
        said_no.join("; ")
    ))
}
