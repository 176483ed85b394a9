//! `manent logs`: a deployment's stored log lines.

use std::path::Path;
use std::time::Duration;

use super::nothing_yet;
use crate::cli::output::{self, Out};
use crate::cli::{LogsArgs, exit};

/// `manent logs ID [-f]`
pub async fn logs(config_path: &Path, a: &LogsArgs, out: &mut Out) -> u8 {
    let Some(config) = output::load_settings(config_path, out) else {
        return exit::BAD_INPUT;
    };
    let store = match output::read_store(&config, out).await {
        Ok(Some(s)) => s,
        Ok(None) => return nothing_yet(&config, Some(&a.deployment), false, out),
        Err(code) => return code,
    };
    if let Err(code) = output::view(&*store, &a.deployment, out).await {
        return code;
    }
    let mut after = 0;
    loop {
        let lines = match store.logs(&a.deployment, after, None, 5000).await {
            Ok(l) => l,
            Err(e) => {
                out.error(e);
                return exit::ENGINE;
            }
        };
        let n = lines.len();
        for l in lines {
            after = l.id;
            let who = l.target.map(|t| format!(" {t}:")).unwrap_or_default();
            out.line(format!(
                "{} {:<5} [{}]{who} {}",
                output::time(l.at),
                l.level,
                l.source,
                l.message
            ));
        }
        if n == 5000 {
            continue;
        }
        let live = store
            .workflow(&a.deployment)
            .await
            .ok()
            .flatten()
            .is_some_and(|r| r.status.is_live());
        if !a.follow || !live {
            return exit::OK;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
