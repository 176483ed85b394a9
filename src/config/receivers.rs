//! The `notify:` receivers of manent.yml, checked while it loads: an http(s) URL, known
//! events, declared secrets for their headers.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::{ConfigError, NOTIFY_EVENTS, Receiver, SecretRef, error, locate, manent_file};

/// The `notify:` receivers, checked: an http(s) URL, known events, declared secrets.
pub(super) fn receivers(
    text: &str,
    path: &Path,
    sections: &[manent_file::NotifySection],
    secrets: &BTreeMap<String, SecretRef>,
) -> Result<Vec<Receiver>, ConfigError> {
    let secret_ref = regex::Regex::new(r"\$\{secret:([^}]*)\}").ok();
    let mut out: Vec<Receiver> = Vec::new();
    for (i, n) in sections.iter().enumerate() {
        let at = |needle: &str| locate(text, needle, 0).or_else(|| locate(text, "notify:", 0));
        let fail = |needle: &str, message: String, hint: Option<String>| ConfigError {
            file: path.to_owned(),
            position: at(needle),
            message,
            hint,
        };
        let uri: http::Uri = n.url.parse().map_err(|e| {
            fail(
                &n.url,
                format!("notify[{i}].url: `{}` is not a URL ({e})", n.url),
                Some("give http://host:port/path or https://…".into()),
            )
        })?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(fail(
                &n.url,
                format!("notify[{i}].url: `{}` is not an http or https URL", n.url),
                Some("give http://host:port/path or https://…".into()),
            ));
        }
        let events = match &n.events {
            None => NOTIFY_EVENTS.iter().map(|e| (*e).to_owned()).collect(),
            Some(list) => {
                for e in list {
                    if !NOTIFY_EVENTS.contains(&e.as_str()) {
                        return Err(fail(
                            e,
                            format!("notify[{i}].events: unknown event `{e}`"),
                            Some(match error::nearest(e, NOTIFY_EVENTS.iter().copied()) {
                                Some(near) => format!(
                                    "did you mean `{near}`? (one of {})",
                                    NOTIFY_EVENTS.join(", ")
                                ),
                                None => format!("one of {}", NOTIFY_EVENTS.join(", ")),
                            }),
                        ));
                    }
                }
                list.clone()
            }
        };
        if n.url.contains("${secret:") {
            return Err(fail(
                "${secret:",
                format!("notify[{i}].url: `${{secret:…}}` is not read in a URL"),
                Some("put the secret in a header: `headers: {Authorization: \"Bearer ${secret:NAME}\"}`".into()),
            ));
        }
        for v in n.headers.values() {
            for c in secret_ref.iter().flat_map(|r| r.captures_iter(&v.0)) {
                let name = c.get(1).map_or("", |m| m.as_str());
                if !secrets.contains_key(name) {
                    return Err(fail(
                        &format!("${{secret:{name}}}"),
                        format!(
                            "notify[{i}].headers: secret `{name}` is not declared under `secrets:`"
                        ),
                        Some(format!(
                            "declare it, e.g. `secrets: {{{name}: env:{}}}`",
                            name.to_uppercase()
                        )),
                    ));
                }
            }
        }
        let name = n
            .name
            .clone()
            .unwrap_or_else(|| uri.host().unwrap_or("receiver").to_owned());
        if out.iter().any(|r| r.name == name) {
            return Err(fail(
                "notify:",
                format!("notify[{i}]: a second receiver named `{name}`"),
                Some("give each receiver its own `name:`".into()),
            ));
        }
        let backoff = n.backoff.unwrap_or_default();
        out.push(Receiver {
            name,
            url: n.url.clone(),
            headers: n
                .headers
                .iter()
                .map(|(k, v)| (k.0.clone(), v.0.clone()))
                .collect(),
            events,
            timeout: n.timeout.map_or(Duration::from_secs(5), |d| d.0),
            backoff_base: backoff.base.map_or(Duration::from_secs(1), |d| d.0),
            backoff_max: backoff.max.map_or(Duration::from_secs(300), |d| d.0),
            max_attempts: n.max_attempts.unwrap_or(10).max(1),
        });
    }
    Ok(out)
}
