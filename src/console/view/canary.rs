//! A canary on screen: the traffic slider (the candidate fills from the left, so more candidate
//! — `→` — moves its edge and the pending weight's marker to the right; stable on the right),
//! the weight set and the one the router reports (drift flagged), the step list with the
//! current step, testers, scale, and the latest analysis run or decision. Readable without
//! colour: the two sides are drawn with different characters.

use ratatui::text::{Line, Span};

use super::ViewCtx;
use crate::console::theme::Theme;
use crate::console::widgets::fit;
use crate::deploy::flows::canary::{Decision, tester_header};
use crate::deploy::view::{CanaryView, DeploymentView};

/// `candidate  25% ███░░░░░░░░░  75% stable`, `width` columns wide, the pending weight marked;
/// below 50 columns the labels go on a line of their own above the bar.
pub fn slider(c: &CanaryView, pending: Option<u32>, width: usize, t: &Theme) -> Vec<Line<'static>> {
    let w = c.status.weight.min(100);
    let left = format!("candidate {w:>3}% ");
    let right = format!(" {:>3}% stable", 100 - w);
    if width < 50 {
        let gap = width.saturating_sub(left.len() + right.len() - 2);
        return vec![
            Line::from(vec![
                Span::styled(left.trim_end().to_owned(), t.get("canary.candidate")),
                Span::raw(" ".repeat(gap)),
                Span::styled(right.trim_start().to_owned(), t.get("canary.stable")),
            ]),
            bar_line(w, pending, width, t, Vec::new(), Vec::new()),
        ];
    }
    let bar = width.saturating_sub(left.len() + right.len()).max(10);
    vec![bar_line(
        w,
        pending,
        bar,
        t,
        vec![Span::styled(left, t.get("canary.candidate"))],
        vec![Span::styled(right, t.get("canary.stable"))],
    )]
}

/// The cells of a `bar`-wide slider that show `percent` of candidate.
pub fn cells(bar: usize, percent: u32) -> usize {
    (bar * usize::try_from(percent.min(100)).unwrap_or(0) + 50) / 100
}

/// The column of a pending weight's marker: the candidate's edge at that weight (0% marks the
/// first cell, 100% the last).
pub fn marker(bar: usize, pending: u32) -> usize {
    cells(bar, pending)
        .saturating_sub(1)
        .min(bar.saturating_sub(1))
}

fn bar_line(
    w: u32,
    pending: Option<u32>,
    bar: usize,
    t: &Theme,
    mut spans: Vec<Span<'static>>,
    after: Vec<Span<'static>>,
) -> Line<'static> {
    let candidate = cells(bar, w);
    let marker = pending.map(|p| marker(bar, p));
    for i in 0..bar {
        let cand = i < candidate;
        let (ch, style) = match marker {
            Some(m) if m == i => ("┃", t.get("canary.pending")),
            _ if cand => ("█", t.get("canary.candidate")),
            _ => ("░", t.get("canary.stable")),
        };
        spans.push(Span::styled(ch, style));
    }
    spans.extend(after);
    Line::from(spans)
}

/// `set 25% · router 25%`, or the drift, or the pending weight waiting for Enter, or the one
/// sent and not yet set (the router only while the canary runs).
pub fn weights(
    c: &CanaryView,
    (pending, applying): (Option<u32>, Option<u32>),
    live: bool,
    t: &Theme,
) -> Line<'static> {
    let mut spans = vec![Span::raw(format!("set {}%", c.status.weight))];
    match c.actual_weight().filter(|_| live) {
        Some(_) if c.unread() => {
            spans.push(Span::styled(" · router unread", t.get("status.failed")))
        }
        Some(a) if c.drift() => spans.push(Span::styled(
            format!(" · router {a}%: drift"),
            t.get("status.failed"),
        )),
        Some(a) => spans.push(Span::styled(format!(" · router {a}%"), t.get("muted"))),
        None => {}
    }
    if c.status.held {
        spans.push(Span::styled(" · held", t.get("status.interrupted")));
    }
    if let Some(p) = pending {
        spans.push(Span::styled(
            format!(" · pending {p}% (Enter applies)"),
            t.get("canary.pending"),
        ));
    } else if let Some(a) = applying.filter(|_| live) {
        spans.push(Span::styled(
            format!(" · setting {a}%…"),
            t.get("canary.pending"),
        ));
    }
    Line::from(spans)
}

/// `step 3/7 paused until promoted · next weight 50%` (without the next step when a list
/// shows it). The next step is the one that moves traffic, as a promote would go on: steps
/// below a weight set by hand are passed over, and it says so.
pub fn step_line(d: &DeploymentView, c: &CanaryView, next: bool, t: &Theme) -> Line<'static> {
    use crate::deploy::flows::canary::ahead::{self, Next};
    let now = match &d.phase {
        Some(p) if d.status.is_live() => p.to_string(),
        _ => d.state.to_string(),
    };
    let mut spans = vec![Span::raw(now)];
    let of = c.plan.steps.len();
    let live = next && d.status.is_live() && usize::try_from(c.status.step).unwrap_or(0) <= of;
    if live {
        let (upcoming, passed) = ahead::ahead(&c.plan, &c.status, ahead::after_promote(&c.status));
        let what = match upcoming {
            Next::Weight { weight, .. } => format!("weight {weight}%"),
            Next::Gate { step } => format!("pause at step {step}"),
            Next::Promoted => "promotion".to_owned(),
        };
        let passed = if passed.is_empty() {
            String::new()
        } else {
            let w: Vec<String> = passed.iter().map(|(_, w)| format!("{w}%")).collect();
            format!(" ({} passed over)", w.join(", "))
        };
        spans.push(Span::styled(
            format!(" · next {what}{passed}"),
            t.get("muted"),
        ));
    }
    Line::from(spans)
}

/// A failed router call or drift first (in full in the log pane); else testers, scale, and
/// the last analysis run or automatic decision.
pub fn extras(c: &CanaryView, live: bool, now: i64, t: &Theme) -> Line<'static> {
    extras_at(c, live, now, t, Brevity::Full).0
}

/// How much of the analysis a line has room for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Brevity {
    /// Every word.
    Full,
    /// The verdict and the count, without when the next run is.
    Short,
    /// The verdict alone.
    Verdict,
    /// The verdict alone, before the numbers: at the least, what the analysis made of them.
    VerdictFirst,
}

/// [`extras`] as brief as asked, and the width of its part that must not be cut: the numbers
/// and what the analysis made of them (testers and scale may be).
fn extras_at(
    c: &CanaryView,
    live: bool,
    now: i64,
    t: &Theme,
    brevity: Brevity,
) -> (Line<'static>, usize) {
    let whole = |l: Line<'static>| {
        let w = l.width();
        (l, w)
    };
    if c.status.router_error.is_some() {
        // In full at the top of the screen (and in M); here only that it is so.
        return whole(Line::from(Span::styled(
            "the router failed: its error is above (M: in full)",
            t.get("status.failed"),
        )));
    }
    if let Some(l) = c.router_lines().into_iter().next() {
        return whole(Line::from(Span::styled(l, t.get("status.failed"))));
    }
    // What matters first at 3 am: the numbers, then what the analysis made of them.
    let mut parts: Vec<Span<'static>> = Vec::new();
    if let Some(w) = traffic_words(c, now, brevity != Brevity::Full) {
        parts.push(Span::raw(w));
    }
    let background = c
        .background
        .as_ref()
        .filter(|b| c.status.runs.last().is_none_or(|r| b.at > r.at));
    let numbers = parts.len();
    if let Some(d) = last_automatic(&c.status.decisions) {
        parts.push(Span::styled(
            format!("{} by analysis: {}", d.action, d.why),
            t.get("status.failed"),
        ));
    } else if let Some(b) = background {
        // Its numbers are the chart's; here the verdict, the count and when the next run is.
        let next = i64::try_from(b.interval_ms).unwrap_or(0) + b.at;
        let verdict = b.last.verdict.as_str();
        let text = match brevity {
            Brevity::Full => format!(
                "background analysis {verdict}, {} of {} failed (limit {}){}",
                b.failures,
                b.runs,
                b.failure_limit,
                countdown(live, next, now)
            ),
            Brevity::Short => format!(
                "analysis {verdict}, {}/{} failed (limit {})",
                b.failures, b.runs, b.failure_limit
            ),
            Brevity::Verdict | Brevity::VerdictFirst => format!("analysis {verdict}"),
        };
        parts.push(Span::styled(text, verdict_style(b.last.verdict, t)));
    } else if let Some(r) = c.status.runs.last() {
        let style = verdict_style(r.seen.verdict, t);
        // Between an analysis step's runs: when the next one comes.
        let next = match c
            .plan
            .steps
            .get(usize::try_from(r.step).unwrap_or(0).wrapping_sub(1))
        {
            Some(crate::config::CanaryStep::Analysis(a))
                if r.run < r.of && c.status.step == r.step =>
            {
                countdown(
                    live,
                    r.at + i64::try_from(a.interval.as_millis()).unwrap_or(0),
                    now,
                )
            }
            _ => String::new(),
        };
        let (run, verdict) = (format!("{}/{}", r.run, r.of), r.seen.verdict.as_str());
        let text = match brevity {
            Brevity::Full => format!("analysis {run} {verdict}{next}: {}", r.seen.value),
            Brevity::Short => format!("analysis {run} {verdict}: {}", r.seen.value),
            Brevity::Verdict | Brevity::VerdictFirst => format!("analysis {run} {verdict}"),
        };
        parts.push(Span::styled(text, style));
    }
    // The verdict before the numbers, when even the shortest words would not fit after them.
    if brevity == Brevity::VerdictFirst && numbers == 1 && parts.len() > 1 {
        parts.swap(0, 1);
    }
    let essential =
        parts.iter().map(Span::width).sum::<usize>() + 3 * parts.len().saturating_sub(1);
    if let Some((h, v)) = tester_header(&c.status.testers) {
        parts.push(Span::raw(format!("testers {h}: {v}")));
    }
    if let Some(s) = c.status.scale {
        parts.push(Span::raw(format!("scale {s}%")));
    }
    let mut spans = Vec::new();
    for (i, p) in parts.into_iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled(" · ", t.get("muted")));
        }
        spans.push(p);
    }
    (Line::from(spans), essential)
}

/// The limits the canary's router analysis judges by — its background analysis', else its
/// first analysis step's: the 5xx rate (0–1) and the p99 (ms).
fn router_limits(c: &CanaryView) -> (Option<f64>, Option<u64>) {
    let steps = c.plan.steps.iter().filter_map(|s| match s {
        crate::config::CanaryStep::Analysis(a) => Some(a),
        _ => None,
    });
    c.plan
        .analysis
        .iter()
        .chain(steps)
        .find_map(|a| match &a.check {
            crate::config::Check::Router(r) => Some((
                r.max_error_rate.map(|p| f64::from(p) / 1_000_000.0),
                r.max_p99
                    .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            )),
            _ => None,
        })
        .unwrap_or((None, None))
}

/// `5.2%`, `-` without a request.
fn rate_text(r: Option<f64>) -> String {
    r.map_or("-".into(), |r| {
        format!("{}%", crate::config::values::percent_text(r))
    })
}

/// `38ms`, `-` without a request.
fn ms_text(p: Option<u32>) -> String {
    p.map_or("-".into(), |p| format!("{p}ms"))
}

/// A sparkline of `values` (ratatui's bar symbols), scaled to `top`; cells over `limit` in
/// the failed style. Zero is the lowest bar, anything above it at least the next one up (one
/// 5xx among thousands must not look like none).
fn spark(
    values: &[Option<f64>],
    top: f64,
    limit: Option<f64>,
    style: ratatui::style::Style,
    t: &Theme,
) -> Vec<Span<'static>> {
    use ratatui::symbols::bar::NINE_LEVELS as L;
    let levels = [
        L.empty,
        L.one_eighth,
        L.one_quarter,
        L.three_eighths,
        L.half,
        L.five_eighths,
        L.three_quarters,
        L.seven_eighths,
        L.full,
    ];
    values
        .iter()
        .map(|v| match v {
            // No request in that interval: a gap, not a zero.
            None => Span::styled(" ", t.get("muted")),
            Some(v) => {
                let level = if top > 0.0 {
                    ((v / top) * 8.0)
                        .round()
                        .clamp(if *v > 0.0 { 2.0 } else { 0.0 }, 8.0)
                } else {
                    0.0
                };
                let ch = if level == 0.0 {
                    "▁"
                } else {
                    levels[level as usize]
                };
                let over = limit.is_some_and(|l| *v > l);
                Span::styled(ch, if over { t.get("status.failed") } else { style })
            }
        })
        .collect()
}

/// What the router saw of both slots over the last minutes: for the 5xx rate and for the p99,
/// a line for the candidate and one for stable, each a sparkline (ratatui's bar symbols, one
/// cell per watch interval, a gap where no request came) with its latest value, the
/// candidate's with the analysis' limit and `over` when its latest is beyond it (readable
/// without colour). Empty without readings.
pub fn traffic(c: &CanaryView, width: usize, t: &Theme) -> Vec<Line<'static>> {
    let Some(last) = c.traffic.last() else {
        return Vec::new();
    };
    let (max_rate, max_p99) = router_limits(c);
    let rate_over = max_rate.is_some_and(|l| last.candidate.error_rate().is_some_and(|r| r > l));
    let p99_over = max_p99.is_some_and(|l| last.candidate.p99_ms.is_some_and(|p| u64::from(p) > l));
    let rate_limit = max_rate.map_or(String::new(), |l| format!("≤{}", rate_text(Some(l))));
    let p99_limit = max_p99.map_or(String::new(), |l| format!("≤{l}ms"));
    // `5xx ` + spark + ` 5.77% cand ≤1% over`: the spark takes what the words leave.
    let words = |now: String, limit: &str, over: bool| {
        format!(" {now} cand {limit}{}", if over { " over" } else { "" })
            .chars()
            .count()
    };
    let longest = words(
        rate_text(last.candidate.error_rate()),
        &rate_limit,
        rate_over,
    )
    .max(words(ms_text(last.candidate.p99_ms), &p99_limit, p99_over))
    .max(" 100% stable".len());
    let n = width
        .saturating_sub(4 + longest)
        .clamp(3, 90)
        .min(c.traffic.len());
    let points = &c.traffic[c.traffic.len() - n..];
    let mut lines = Vec::new();
    let mut metric = |label: &str,
                      cand: Vec<Option<f64>>,
                      stable: Vec<Option<f64>>,
                      (cand_now, stable_now): (String, String),
                      limit: Option<f64>,
                      limit_text: String,
                      over: bool| {
        let top = cand
            .iter()
            .chain(&stable)
            .flatten()
            .copied()
            .chain(limit)
            .fold(0.0_f64, f64::max);
        let mut first = vec![Span::styled(format!("{label} "), t.get("muted"))];
        first.extend(spark(&cand, top, limit, t.get("canary.candidate"), t));
        first.push(Span::styled(
            format!(" {cand_now} "),
            if over {
                t.get("status.failed")
            } else {
                t.get("base")
            },
        ));
        first.push(Span::styled("cand", t.get("canary.candidate")));
        if !limit_text.is_empty() {
            first.push(Span::styled(format!(" {limit_text}"), t.get("muted")));
        }
        if over {
            first.push(Span::styled(" over", t.get("status.failed")));
        }
        let mut second = vec![Span::raw(" ".repeat(label.len() + 1))];
        second.extend(spark(&stable, top, limit, t.get("canary.stable"), t));
        second.push(Span::raw(format!(" {stable_now} ")));
        second.push(Span::styled("stable", t.get("canary.stable")));
        lines.push(Line::from(first));
        lines.push(Line::from(second));
    };
    metric(
        "5xx",
        points.iter().map(|p| p.candidate.error_rate()).collect(),
        points.iter().map(|p| p.stable.error_rate()).collect(),
        (
            rate_text(last.candidate.error_rate()),
            rate_text(last.stable.error_rate()),
        ),
        max_rate,
        rate_limit,
        rate_over,
    );
    metric(
        "p99",
        points
            .iter()
            .map(|p| p.candidate.p99_ms.map(f64::from))
            .collect(),
        points
            .iter()
            .map(|p| p.stable.p99_ms.map(f64::from))
            .collect(),
        (ms_text(last.candidate.p99_ms), ms_text(last.stable.p99_ms)),
        max_p99.map(|l| l as f64),
        p99_limit,
        p99_over,
    );
    lines
}

/// The last traffic reading in a few words, each slot named, for the narrow strip: `cand 5xx
/// 5.2% p99 38ms · stable 5xx 0% p99 15ms`, and how old it is once it is no longer fresh (the
/// router has not answered since, or no engine reads it).
///
/// `brief`: the error rates alone, `5xx cand 5.2% · stable 0%`.
fn traffic_words(c: &CanaryView, now: i64, brief: bool) -> Option<String> {
    let last = c.traffic.last()?;
    let age = (now - last.at) / 1000;
    let stale = if age > 30 {
        format!(" (read {age}s ago)")
    } else {
        String::new()
    };
    if brief {
        return Some(format!(
            "5xx cand {} · stable {}{stale}",
            rate_text(last.candidate.error_rate()),
            rate_text(last.stable.error_rate()),
        ));
    }
    Some(format!(
        "cand 5xx {} p99 {} · stable 5xx {} p99 {}{stale}",
        rate_text(last.candidate.error_rate()),
        ms_text(last.candidate.p99_ms),
        rate_text(last.stable.error_rate()),
        ms_text(last.stable.p99_ms)
    ))
}

/// `, next in 7s` while the canary is live and the next run is ahead; `, next now` once due.
fn countdown(live: bool, next_ms: i64, now_ms: i64) -> String {
    if !live {
        return String::new();
    }
    let left = (next_ms - now_ms).max(0) / 1000;
    if left == 0 {
        ", next now".into()
    } else {
        format!(", next in {left}s")
    }
}

fn verdict_style(
    v: crate::deploy::flows::canary::analysis::Verdict,
    t: &Theme,
) -> ratatui::style::Style {
    use crate::deploy::flows::canary::analysis::Verdict;
    match v {
        Verdict::Pass => t.get("status.ok"),
        Verdict::Fail => t.get("status.failed"),
        Verdict::Inconclusive => t.get("status.retrying"),
    }
}

fn last_automatic(decisions: &[Decision]) -> Option<&Decision> {
    decisions
        .iter()
        .rev()
        .find(|d| d.by == "analysis" || d.by == "manent")
}

/// The step list, the current step marked, in `rows` lines at most (around the current one).
pub fn steps(c: &CanaryView, rows: usize, width: usize, t: &Theme) -> Vec<Line<'static>> {
    let current = usize::try_from(c.status.step).unwrap_or(0);
    let n = c.plan.steps.len();
    let first = current
        .saturating_sub(rows / 2 + 1)
        .min(n.saturating_sub(rows));
    c.plan
        .steps
        .iter()
        .enumerate()
        .skip(first)
        .take(rows)
        .map(|(i, s)| {
            let here = i + 1 == current;
            let done = i + 1 < current;
            let text = fit(
                &format!("{} {:>2} {s}", if here { "›" } else { " " }, i + 1),
                width,
            );
            let style = if here {
                t.get("selection")
            } else if done {
                t.get("muted")
            } else {
                t.get("base")
            };
            Line::from(Span::styled(text, style))
        })
        .collect()
}

/// The narrow screen's canary strip: the slider, where it is, the weights.
pub fn strip(
    d: &DeploymentView,
    c: &CanaryView,
    (width, reserve): (usize, usize),
    ctx: &ViewCtx<'_>,
) -> Vec<Line<'static>> {
    let t = ctx.theme;
    let pending = ctx.app.pending();
    let mut step = step_line(d, c, true, t);
    step.spans.insert(0, Span::styled(" ", t.get("muted")));
    let mut w = weights(c, (pending, ctx.app.applying()), d.status.is_live(), t);
    w.spans.insert(0, Span::styled(" ", t.get("muted")));
    // As much of the analysis as the line has room for (beside `reserve` columns kept for what
    // follows it), the verdict cut last.
    let head = w.width();
    let brevities = [
        Brevity::Full,
        Brevity::Short,
        Brevity::Verdict,
        Brevity::VerdictFirst,
    ];
    let mut extra = Line::default();
    for b in brevities {
        let essential;
        (extra, essential) = extras_at(c, d.status.is_live(), ctx.app.ui.now, t, b);
        if head + 3 + essential + reserve <= width {
            break;
        }
    }
    if !extra.spans.is_empty() {
        w.spans.push(Span::styled(" · ", t.get("muted")));
        w.spans.extend(extra.spans);
    }
    let mut lines = slider(c, pending, width.saturating_sub(1), t);
    // The strip is the canary panel of a narrow screen: focused, its arrows move the weight.
    let focused = ctx.app.ui.focus == crate::console::app::Focus::Canary;
    for l in &mut lines {
        l.spans.insert(
            0,
            if focused {
                Span::styled("▶", t.get("selection"))
            } else {
                Span::raw(" ")
            },
        );
    }
    lines.truncate(1);
    lines.extend([step, w]);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_candidate_moves_the_marker_right() {
        let bar = 40;
        let at: Vec<usize> = [0, 10, 15, 50, 95, 100]
            .iter()
            .map(|p| marker(bar, *p))
            .collect();
        assert!(at.windows(2).all(|w| w[0] <= w[1]), "{at:?}");
        assert!(marker(bar, 15) > marker(bar, 10), "one slider step shows");
        assert_eq!(marker(bar, 100), bar - 1);
        assert_eq!(cells(bar, 25), 10, "the candidate fills from the left");
    }
}
