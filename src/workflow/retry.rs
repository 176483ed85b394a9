//! Retry policy with exponential backoff and jitter (design/durable-workflows.md B.3):
//! `delay(k) = min(base·factor^(k-1), max_interval) × U(0.95, 1.05)`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How a step is retried and how long one attempt may take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// Delay after the first failed attempt.
    #[serde(with = "crate::duration_ms")]
    pub base: Duration,
    /// Growth per attempt.
    pub factor: f64,
    /// Cap on a single delay.
    #[serde(with = "crate::duration_ms")]
    pub max_interval: Duration,
    /// Limit on one attempt; exceeding it is a retryable failure.
    #[serde(default, with = "crate::duration_ms::option")]
    pub timeout: Option<Duration>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 0,
            base: Duration::from_secs(1),
            factor: 2.0,
            max_interval: Duration::from_secs(60),
            timeout: None,
        }
    }
}

impl RetryPolicy {
    /// The backoff used for the engine's own database writes (design/durable-workflows.md E4): 100 ms growing to 30 s.
    pub fn store() -> Self {
        RetryPolicy {
            max_retries: u32::MAX,
            base: Duration::from_millis(100),
            factor: 2.0,
            max_interval: Duration::from_secs(30),
            timeout: None,
        }
    }

    /// The delay without jitter after failed attempt `attempt` (1-based).
    pub fn nominal_delay(&self, attempt: u32) -> Duration {
        let exp = self
            .factor
            .powi(i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX));
        let raw = self.base.as_secs_f64() * exp;
        let capped = raw.min(self.max_interval.as_secs_f64().max(self.base.as_secs_f64()));
        Duration::from_secs_f64(if capped.is_finite() { capped } else { 0.0 })
    }

    /// The delay after failed attempt `attempt`, with ±5 % jitter.
    pub fn delay(&self, attempt: u32) -> Duration {
        self.nominal_delay(attempt)
            .mul_f64(0.95 + fastrand::f64() * 0.1)
    }
}

/// Runs a database operation until it is not refused for a transient reason (design/durable-workflows.md E4): the engine
/// blocks rather than record an infrastructure fault as a deploy failure. `alert` is called
/// once, at the first refusal. Other errors are returned at once.
pub async fn until_committed<R, F, Fut>(
    op: F,
    alert: impl FnOnce(&super::StoreError),
) -> Result<R, super::StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<R, super::StoreError>>,
{
    let mut alert = Some(alert);
    until_committed_each(op, |e, retry| {
        if retry == 1
            && let Some(a) = alert.take()
        {
            a(e);
        }
    })
    .await
}

/// [`until_committed_each`], but a hard shutdown gives up on a write that is being refused (a
/// full disk must not hold the engine); a write that goes through is always recorded, even while
/// stopping. `None`: given up. `alert` is called at every refusal with the retry coming, then
/// `recovered` once if a refused write went through after all.
pub async fn until_committed_or_stopped<R, F, Fut>(
    op: F,
    mut alert: impl FnMut(&super::StoreError, u32),
    recovered: impl FnOnce(),
    mut shutdown: tokio::sync::watch::Receiver<super::shutdown::Shutdown>,
) -> Option<Result<R, super::StoreError>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<R, super::StoreError>>,
{
    let refused = std::sync::atomic::AtomicBool::new(false);
    let alert = |e: &super::StoreError, k: u32| {
        refused.store(true, std::sync::atomic::Ordering::Relaxed);
        alert(e, k);
    };
    let refused_at_shutdown = async {
        let _ = shutdown
            .wait_for(|s| *s == super::shutdown::Shutdown::Hard)
            .await;
        while !refused.load(std::sync::atomic::Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let result = tokio::select! {
        r = until_committed_each(op, alert) => r,
        () = refused_at_shutdown => return None,
    };
    if refused.load(std::sync::atomic::Ordering::Relaxed) {
        recovered();
    }
    Some(result)
}

/// [`until_committed`], calling `alert` at every refusal with the number of the retry coming.
pub async fn until_committed_each<R, F, Fut>(
    mut op: F,
    mut alert: impl FnMut(&super::StoreError, u32),
) -> Result<R, super::StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<R, super::StoreError>>,
{
    let policy = RetryPolicy::store();
    let mut k = 1;
    loop {
        match op().await {
            Err(e) if e.is_transient() => {
                alert(&e, k);
                tokio::time::sleep(policy.delay(k)).await;
                k += 1;
            }
            r => return r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_stays_within_five_percent_of_the_capped_exponential() {
        let p = RetryPolicy {
            max_retries: 10,
            base: Duration::from_secs(1),
            factor: 2.0,
            max_interval: Duration::from_secs(60),
            timeout: None,
        };
        for k in 1..=10u32 {
            let nominal = (2f64.powi(k as i32 - 1)).min(60.0);
            for _ in 0..200 {
                let d = p.delay(k).as_secs_f64();
                assert!(
                    d >= 0.95 * nominal - 1e-9 && d <= 1.05 * nominal + 1e-9,
                    "k={k} d={d}"
                );
            }
        }
    }

    #[test]
    fn max_interval_below_base_is_raised_to_base() {
        let p = RetryPolicy {
            base: Duration::from_secs(5),
            max_interval: Duration::from_secs(1),
            ..RetryPolicy::default()
        };
        assert_eq!(p.nominal_delay(3), Duration::from_secs(5));
    }
}
