//! Working through a request's targets the way the seed specifies: `for_each_target` stops
//! starting targets after the first error and lets running ones finish; `for_all_targets` runs
//! them all. Both keep target order, report never-started targets as `skipped`, honour
//! `parallelism`, and time each target. The engine's own per-target fan-out uses [`fan_out`].

use std::future::Future;
use std::time::Instant;

use futures::stream::{FuturesUnordered, StreamExt};

use super::error::PluginError;
use super::types::{Request, Target, TargetResult, TargetStatus};

/// What a failure does to targets not yet started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// Start nothing more (a deploy).
    Stop,
    /// Keep going (a rollback, a dry-run).
    Continue,
}

/// Runs `run` over `items`, at most `parallelism` at once, starting them in order. Results come
/// back in item order; `None` marks an item never started because an earlier one `failed`.
/// `force_start` starts an item even after a failure (the engine uses it to finish targets that
/// a crash interrupted).
pub async fn fan_out<I, T, Fut>(
    items: impl IntoIterator<Item = I>,
    parallelism: usize,
    on_error: OnError,
    mut force_start: impl FnMut(&I) -> bool,
    mut run: impl FnMut(I) -> Fut,
    failed: impl Fn(&T) -> bool,
) -> Vec<Option<T>>
where
    Fut: Future<Output = T>,
{
    let items: Vec<I> = items.into_iter().collect();
    let mut results: Vec<Option<T>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    let mut running = FuturesUnordered::new();
    let mut pending = items.into_iter().enumerate();
    let mut stopped = false;
    loop {
        while running.len() < parallelism.max(1) {
            let Some((i, item)) = pending.next() else {
                break;
            };
            if stopped && !force_start(&item) {
                continue;
            }
            let fut = run(item);
            running.push(async move { (i, fut.await) });
        }
        let Some((i, out)) = running.next().await else {
            break;
        };
        if on_error == OnError::Stop && failed(&out) {
            stopped = true;
        }
        results[i] = Some(out);
    }
    results
}

async fn over_targets<F, Fut>(
    req: &Request,
    on_error: OnError,
    f: F,
) -> (Vec<TargetResult>, Option<PluginError>)
where
    F: Fn(Target) -> Fut,
    Fut: Future<Output = Result<TargetResult, PluginError>>,
{
    let parallelism = usize::try_from(req.parallelism).unwrap_or(1);
    let outcomes = fan_out(
        req.targets.iter().cloned(),
        parallelism,
        on_error,
        |_| false,
        |t: Target| {
            let host = t.host.clone();
            let started = Instant::now();
            let fut = f(t);
            async move {
                let r = fut.await;
                let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                (host, ms, r)
            }
        },
        |(_, _, r)| r.is_err(),
    )
    .await;
    let mut first_error = None;
    let results = req
        .targets
        .iter()
        .zip(outcomes)
        .map(|(t, out)| match out {
            Some((host, ms, Ok(mut r))) => {
                r.host = host;
                r.duration_ms = ms;
                r
            }
            Some((host, ms, Err(e))) => {
                let message = e.to_string();
                first_error.get_or_insert(e);
                TargetResult {
                    host,
                    status: TargetStatus::Failed,
                    message,
                    duration_ms: ms,
                }
            }
            None => TargetResult {
                host: t.host.clone(),
                status: TargetStatus::Skipped,
                message: "not started: an earlier target failed".into(),
                duration_ms: 0,
            },
        })
        .collect();
    (results, first_error)
}

/// Runs `f` on each target, stopping new starts after the first error. Returns every target's
/// result in request order and the first error (in target order), if any.
pub async fn for_each_target<F, Fut>(
    req: &Request,
    f: F,
) -> (Vec<TargetResult>, Option<PluginError>)
where
    F: Fn(Target) -> Fut,
    Fut: Future<Output = Result<TargetResult, PluginError>>,
{
    over_targets(req, OnError::Stop, f).await
}

/// Runs `f` on every target even after errors (a rollback, a dry-run).
pub async fn for_all_targets<F, Fut>(
    req: &Request,
    f: F,
) -> (Vec<TargetResult>, Option<PluginError>)
where
    F: Fn(Target) -> Fut,
    Fut: Future<Output = Result<TargetResult, PluginError>>,
{
    over_targets(req, OnError::Continue, f).await
}
