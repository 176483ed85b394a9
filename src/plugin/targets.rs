//! Working through a request's targets as the contract says (design/plugin-contract.md "Targets"): `for_each_target` stops
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::moniker::Moniker;
    use crate::plugin::secrets::Secrets;
    use crate::plugin::types::Artifact;

    fn request(n: usize, parallelism: u32) -> Request {
        Request {
            deployment_id: "dep-t".into(),
            application: "web".into(),
            environment: "prod".into(),
            artifact: Artifact::default(),
            targets: (1..=n)
                .map(|i| Target {
                    host: format!("h{i}"),
                    moniker: Moniker::new("prod", "web", "t", &format!("t{i}")).unwrap(),
                    labels: Default::default(),
                })
                .collect(),
            params: serde_json::Value::Null,
            secrets: Secrets::none(),
            parallelism,
            traffic: None,
            routing: None,
            idempotency_key: String::new(),
            attempt: 1,
            processes: crate::plugin::Processes::none(),
        }
    }

    /// Targets take longer the earlier they come, so completion order is the reverse of target
    /// order: results must still come back in target order.
    async fn work(
        t: Target,
        running: Arc<AtomicUsize>,
        peak: Arc<AtomicUsize>,
        fail: &[&str],
    ) -> Result<TargetResult, PluginError> {
        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
        peak.fetch_max(now, Ordering::SeqCst);
        let i: u64 = t.name()[1..].parse().unwrap();
        // A failing target fails at once; the others take longer the earlier they come.
        let ms = if fail.contains(&t.name()) {
            0
        } else {
            200 - 20 * i
        };
        tokio::time::sleep(Duration::from_millis(ms)).await;
        running.fetch_sub(1, Ordering::SeqCst);
        if fail.contains(&t.name()) {
            Err(PluginError::failed(format!("{} broke", t.name())))
        } else {
            Ok(TargetResult::new(TargetStatus::Deployed).with_message(t.name().to_owned()))
        }
    }

    #[tokio::test]
    async fn for_each_keeps_order_honours_parallelism_and_times_targets() {
        let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let req = request(8, 3);
        let (results, err) =
            for_each_target(&req, |t| work(t, running.clone(), peak.clone(), &[])).await;
        assert!(err.is_none());
        let names: Vec<&str> = results.iter().map(|r| r.message.as_str()).collect();
        assert_eq!(names, ["t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8"]);
        assert_eq!(results[0].host, "h1");
        assert!(results.iter().all(|r| r.duration_ms >= 40), "{results:?}");
        assert_eq!(peak.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn for_each_stops_starting_after_the_first_error_and_lets_running_ones_finish() {
        let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let started = Arc::new(std::sync::Mutex::new(Vec::new()));
        let req = request(6, 2);
        let s = started.clone();
        let (results, err) = for_each_target(&req, |t| {
            s.lock().unwrap().push(t.name().to_owned());
            work(t, running.clone(), peak.clone(), &["t2"])
        })
        .await;
        assert_eq!(err.unwrap().to_string(), "t2 broke");
        let status: Vec<TargetStatus> = results.iter().map(|r| r.status).collect();
        // t1 and t2 start together; t2 fails at once, so t3.. never start, and t1, already
        // running, finishes.
        assert_eq!(status[0], TargetStatus::Deployed);
        assert_eq!(status[1], TargetStatus::Failed);
        assert!(
            status[2..].iter().all(|s| *s == TargetStatus::Skipped),
            "{status:?}"
        );
        assert_eq!(results[3].message, "not started: an earlier target failed");
        assert_eq!(*started.lock().unwrap(), ["t1", "t2"]);
    }

    #[tokio::test]
    async fn for_all_runs_every_target_despite_errors() {
        let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let req = request(5, 2);
        let (results, err) = for_all_targets(&req, |t| {
            work(t, running.clone(), peak.clone(), &["t1", "t4"])
        })
        .await;
        assert_eq!(
            err.unwrap().to_string(),
            "t1 broke",
            "the first error in target order"
        );
        let status: Vec<TargetStatus> = results.iter().map(|r| r.status).collect();
        use TargetStatus::{Deployed as D, Failed as F};
        assert_eq!(status, [F, D, D, F, D]);
        assert_eq!(results[3].message, "t4 broke");
    }

    #[tokio::test]
    async fn parallelism_zero_means_one_at_a_time() {
        let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let req = request(4, 0);
        let _ = for_each_target(&req, |t| work(t, running.clone(), peak.clone(), &[])).await;
        assert_eq!(peak.load(Ordering::SeqCst), 1);
    }
}
