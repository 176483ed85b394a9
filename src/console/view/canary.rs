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

/// `set 25% · router 25%`, or the drift, or the pending weight waiting for Enter (the router
/// only while the canary runs).
pub fn weights(c: &CanaryView, pending: Option<u32>, live: bool, t: &Theme) -> Line<'static> {
    let mut spans = vec![Span::raw(format!("set {}%", c.status.weight))];
    match c.actual_weight().filter(|_| live) {
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
pub fn extras(c: &CanaryView, t: &Theme) -> Line<'static> {
    if c.status.router_error.is_some() {
        // In full at the top of the screen (and in M); here only that it is so.
        return Line::from(Span::styled(
            "the router failed: its error is above (M: in full)",
            t.get("status.failed"),
        ));
    }
    if let Some(l) = c.router_lines().into_iter().next() {
        return Line::from(Span::styled(l, t.get("status.failed")));
    }
    let mut parts: Vec<Span<'static>> = Vec::new();
    if let Some((h, v)) = tester_header(&c.status.testers) {
        parts.push(Span::raw(format!("testers {h}: {v}")));
    }
    if let Some(s) = c.status.scale {
        parts.push(Span::raw(format!("scale {s}%")));
    }
    if let Some(d) = last_automatic(&c.status.decisions) {
        parts.push(Span::styled(
            format!("{} by analysis: {}", d.action, d.why),
            t.get("status.failed"),
        ));
    } else if let Some(r) = c.status.runs.last() {
        let style = match r.seen.verdict {
            crate::deploy::flows::canary::analysis::Verdict::Pass => t.get("status.ok"),
            crate::deploy::flows::canary::analysis::Verdict::Fail => t.get("status.failed"),
            crate::deploy::flows::canary::analysis::Verdict::Inconclusive => {
                t.get("status.retrying")
            }
        };
        parts.push(Span::styled(
            format!(
                "analysis {}/{} {}: {}",
                r.run,
                r.of,
                r.seen.verdict.as_str(),
                r.seen.value
            ),
            style,
        ));
    }
    let mut spans = Vec::new();
    for (i, p) in parts.into_iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled(" · ", t.get("muted")));
        }
        spans.push(p);
    }
    Line::from(spans)
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
    width: usize,
    ctx: &ViewCtx<'_>,
) -> Vec<Line<'static>> {
    let t = ctx.theme;
    let pending = ctx.app.pending();
    let mut step = step_line(d, c, true, t);
    step.spans.insert(0, Span::styled(" ", t.get("muted")));
    let mut w = weights(c, pending, d.status.is_live(), t);
    w.spans.insert(0, Span::styled(" ", t.get("muted")));
    let extra = extras(c, t);
    if !extra.spans.is_empty() {
        w.spans.push(Span::styled(" · ", t.get("muted")));
        w.spans.extend(extra.spans);
    }
    let mut lines = slider(c, pending, width.saturating_sub(1), t);
    // The strip is the canary panel of a narrow screen: focused, its arrows move the weight.
    let focused = ctx.app.focus == crate::console::app::Focus::Canary;
    for l in &mut lines {
        l.spans.insert(
            0,
            if focused {
                Span::styled("›", t.get("selection"))
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
