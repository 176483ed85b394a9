//! A canary judged against stable over the same window, on the router's own record — Kayenta's
//! idea without a metrics stack. Each slot's window is cut in intervals (about twenty); the
//! candidate's error rate or p99 per interval is ranked against stable's with a one-sided
//! Mann–Whitney test (normal approximation, tie and continuity corrections, as scipy's
//! `mannwhitneyu(method="asymptotic")`), and the size of the difference is the Hodges–Lehmann estimate (the median
//! of the pairwise differences). It fails only when both hold: the difference is larger than
//! the allowed increase, and the test says it is real (p < 0.05) — per request, any shift at all
//! is significant; per interval with a tolerance, a real regression is. Too few requests or
//! intervals with traffic is inconclusive, never a pass. The decision says the method, the
//! numbers and the result.

use crate::config::values::{Rate, percent_text};
use crate::config::{CompareCheck, CompareMetric};
use crate::deploy::canary_status::Verdict;
use crate::plugin::Traffic;

/// Intervals with traffic each slot needs for a comparison.
const MIN_INTERVALS: usize = 5;
/// Requests an interval needs to count: for its error rate, and for its p99.
const MIN_FOR_RATE: u64 = 10;
const MIN_FOR_P99: u64 = 50;
/// The one-sided p-value under which a difference is real.
const ALPHA: f64 = 0.05;

/// The verdict on `t` (candidate in slot `candidate`, stable in `stable`), with what made it.
pub fn judge(c: &CompareCheck, t: &Traffic, candidate: &str, stable: &str) -> (Verdict, String) {
    let (cs, ss) = (t.slot(candidate), t.slot(stable));
    // An interval speaks for its metric only with enough requests in it: a p99 of ten
    // requests is their maximum, a rate of three is noise.
    let enough = match c.metric {
        CompareMetric::ErrorRate => MIN_FOR_RATE,
        CompareMetric::P99 => MIN_FOR_P99,
    };
    let points = |s: &crate::plugin::SlotTraffic| -> Vec<f64> {
        s.intervals
            .iter()
            .filter(|i| i.requests >= enough)
            .filter_map(|i| match c.metric {
                CompareMetric::ErrorRate => Some(i.errors as f64 / i.requests as f64),
                CompareMetric::P99 => i.p99_ms.map(f64::from),
            })
            .collect()
    };
    let (xs, ys) = (points(&cs), points(&ss));
    let window = super::analysis::span_text(t, &cs.version);
    let (what, unit) = match c.metric {
        CompareMetric::ErrorRate => ("error rate", ""),
        CompareMetric::P99 => ("p99", " ms"),
    };
    let show = |v: f64| match c.metric {
        CompareMetric::ErrorRate => format!("{}%", percent_text(v)),
        CompareMetric::P99 => format!("{v:.0}{unit}"),
    };
    let overall = |s: &crate::plugin::SlotTraffic| match c.metric {
        CompareMetric::ErrorRate => s.error_rate().map_or("—".into(), show),
        CompareMetric::P99 => s.p99_ms.map_or("—".into(), |p| show(f64::from(p))),
    };
    let slots = format!(
        "candidate {} ({candidate}) {what} {} over {} requests, stable {} ({stable}) {} over {}; \
         {window}, from {}",
        cs.version,
        overall(&cs),
        cs.requests,
        ss.version,
        overall(&ss),
        ss.requests,
        t.source
    );
    if c.metric == CompareMetric::P99 && (cs.no_latency || ss.no_latency) {
        return (
            Verdict::Inconclusive,
            format!("{} — {slots}", super::analysis::unmeasured_latency(t)),
        );
    }
    if cs.requests < c.min_requests || ss.requests < c.min_requests {
        return (
            Verdict::Inconclusive,
            format!(
                "too few requests to compare (at least {} to each slot) — {slots}",
                c.min_requests
            ),
        );
    }
    if xs.len() < MIN_INTERVALS || ys.len() < MIN_INTERVALS {
        return (
            Verdict::Inconclusive,
            format!(
                "too few intervals with traffic to compare ({} and {} with at least {enough} \
                 requests, {MIN_INTERVALS} needed each) — {slots}",
                xs.len(),
                ys.len()
            ),
        );
    }
    let shift = hodges_lehmann(&xs, &ys);
    let p = mann_whitney_greater(&xs, &ys);
    let allowed = match c.metric {
        CompareMetric::ErrorRate => Rate(c.max_increase).fraction(),
        CompareMetric::P99 => Rate(c.max_increase).fraction() * median(&ys),
    };
    let allowed_said = match c.metric {
        CompareMetric::ErrorRate => format!("+{} points", Rate(c.max_increase)),
        CompareMetric::P99 => format!(
            "+{} of stable's {} = {}",
            Rate(c.max_increase),
            show(median(&ys)),
            show(allowed)
        ),
    };
    let method = format!(
        "Mann–Whitney (one-sided) on {} vs {} intervals: the candidate's {what} is higher by {} \
         (Hodges–Lehmann), p = {}; allowed {allowed_said}",
        xs.len(),
        ys.len(),
        show(shift),
        p_text(p)
    );
    if shift > allowed && p < ALPHA {
        (
            Verdict::Fail,
            format!("{what} above stable's by more than allowed — {method} — {slots}"),
        )
    } else {
        (Verdict::Pass, format!("{method} — {slots}"))
    }
}

fn p_text(p: f64) -> String {
    if p < 0.0001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.4}")
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// The median of every difference `x − y`: how much higher `xs` are than `ys`.
pub fn hodges_lehmann(xs: &[f64], ys: &[f64]) -> f64 {
    let diffs: Vec<f64> = xs
        .iter()
        .flat_map(|x| ys.iter().map(move |y| x - y))
        .collect();
    median(&diffs)
}

/// The one-sided p-value that `xs` tend to be larger than `ys` (Mann–Whitney U, normal
/// approximation with tie and continuity corrections). 1 when every value is the same.
pub fn mann_whitney_greater(xs: &[f64], ys: &[f64]) -> f64 {
    let (n1, n2) = (xs.len() as f64, ys.len() as f64);
    let mut all: Vec<(f64, bool)> = xs
        .iter()
        .map(|x| (*x, true))
        .chain(ys.iter().map(|y| (*y, false)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Average ranks over ties, and the tie term of the variance.
    let (mut r1, mut ties, mut i) = (0.0, 0.0, 0);
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let rank = (i + j + 2) as f64 / 2.0;
        let t = (j - i + 1) as f64;
        ties += t * t * t - t;
        r1 += all[i..=j].iter().filter(|v| v.1).count() as f64 * rank;
        i = j + 1;
    }
    let n = n1 + n2;
    let u = r1 - n1 * (n1 + 1.0) / 2.0;
    let sigma = (n1 * n2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)))).sqrt();
    if sigma.is_nan() || sigma <= 0.0 {
        return 1.0;
    }
    let z = (u - n1 * n2 / 2.0 - 0.5) / sigma;
    normal_sf(z)
}

/// P(Z > z) for a standard normal Z (Abramowitz and Stegun 7.1.26, error below 1.5e-7).
fn normal_sf(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erfc = poly * (-x * x).exp();
    if x >= 0.0 {
        erfc / 2.0
    } else {
        1.0 - erfc / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::{SlotTraffic, TrafficInterval};

    #[test]
    #[allow(
        clippy::approx_constant,
        reason = "3.14 is a measurement in the data, not π"
    )]
    fn the_test_matches_scipys_mannwhitneyu() {
        // scipy 1.17: mannwhitneyu(x, y, alternative="greater", use_continuity=True,
        // method="asymptotic") gives p = 0.066460 here, and 0.069370 for the tied pair below.
        let x = [1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30];
        let y = [0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29];
        let p = mann_whitney_greater(&x, &y);
        assert!((p - 0.066_460).abs() < 1e-5, "{p}");
        let x = [3.0, 3.0, 4.0, 5.0, 5.0, 6.0];
        let y = [1.0, 2.0, 3.0, 3.0, 4.0, 5.0];
        let p = mann_whitney_greater(&x, &y);
        assert!((p - 0.069_370).abs() < 1e-5, "{p}");
        assert_eq!(mann_whitney_greater(&[1.0; 6], &[1.0; 6]), 1.0);
        assert!((normal_sf(1.96) - 0.025).abs() < 1e-4);
        assert!((normal_sf(-1.0) - 0.8413).abs() < 1e-4);
        assert_eq!(hodges_lehmann(&[10.0, 12.0], &[1.0, 3.0]), 9.0);
    }

    fn slot(name: &str, version: &str, points: &[(u64, u64, u32)]) -> SlotTraffic {
        let intervals: Vec<TrafficInterval> = points
            .iter()
            .enumerate()
            .map(|(i, (requests, errors, p99))| TrafficInterval {
                from_ms: i as i64 * 5_000,
                requests: *requests,
                errors: *errors,
                p99_ms: Some(*p99),
            })
            .collect();
        let requests = intervals.iter().map(|i| i.requests).sum();
        let errors = intervals.iter().map(|i| i.errors).sum::<u64>();
        SlotTraffic {
            slot: name.into(),
            version: version.into(),
            requests,
            responses: [requests - errors, 0, 0, errors],
            retried_away: 0,
            p50_ms: None,
            p95_ms: None,
            p99_ms: intervals.iter().filter_map(|i| i.p99_ms).max(),
            intervals,
            no_latency: false,
        }
    }

    fn traffic(candidate: SlotTraffic, stable: SlotTraffic) -> Traffic {
        Traffic {
            slots: vec![stable, candidate],
            from_ms: 0,
            window_ms: 60_000,
            source: "simulated traffic".into(),
            since_ms: None,
        }
    }

    fn check(metric: CompareMetric, max_increase: u32) -> CompareCheck {
        CompareCheck {
            metric,
            max_increase,
            min_requests: 100,
            window: std::time::Duration::from_secs(60),
        }
    }

    #[test]
    fn a_latency_regression_stable_does_not_have_fails_and_noise_passes() {
        let stable: Vec<(u64, u64, u32)> = (0..12).map(|i| (100, 0, 80 + i % 3)).collect();
        let slower: Vec<(u64, u64, u32)> = (0..12).map(|i| (100, 0, 120 + i % 4)).collect();
        let same: Vec<(u64, u64, u32)> = (0..12).map(|i| (100, 0, 79 + (i * 7) % 5)).collect();
        let c = check(CompareMetric::P99, 100_000);
        let (v, said) = judge(
            &c,
            &traffic(slot("green", "2", &slower), slot("blue", "1", &stable)),
            "green",
            "blue",
        );
        assert_eq!(v, Verdict::Fail, "{said}");
        assert!(said.contains("higher by 40 ms (Hodges–Lehmann)"), "{said}");
        assert!(
            said.contains("allowed +10% of stable's 81 ms = 8 ms"),
            "{said}"
        );
        let (v, said) = judge(
            &c,
            &traffic(slot("green", "2", &same), slot("blue", "1", &stable)),
            "green",
            "blue",
        );
        assert_eq!(v, Verdict::Pass, "{said}");
    }

    #[test]
    fn an_error_rate_within_the_allowed_points_passes_and_too_little_is_inconclusive() {
        let stable: Vec<(u64, u64, u32)> = (0..12).map(|_| (100, 0, 80)).collect();
        let failing: Vec<(u64, u64, u32)> = (0..12).map(|i| (100, 4 + i % 3, 80)).collect();
        let (v, said) = judge(
            &check(CompareMetric::ErrorRate, 5_000),
            &traffic(slot("green", "2", &failing), slot("blue", "1", &stable)),
            "green",
            "blue",
        );
        assert_eq!(v, Verdict::Fail, "{said}");
        let (v, _) = judge(
            &check(CompareMetric::ErrorRate, 100_000),
            &traffic(slot("green", "2", &failing), slot("blue", "1", &stable)),
            "green",
            "blue",
        );
        assert_eq!(v, Verdict::Pass, "5% is within +10 points");
        let few: Vec<(u64, u64, u32)> = (0..3).map(|_| (100, 9, 80)).collect();
        let (v, said) = judge(
            &check(CompareMetric::ErrorRate, 5_000),
            &traffic(slot("green", "2", &few), slot("blue", "1", &stable)),
            "green",
            "blue",
        );
        assert_eq!(v, Verdict::Inconclusive, "{said}");
        assert!(said.contains("too few intervals"), "{said}");
    }
}
