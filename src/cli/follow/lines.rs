//! What following a deployment prints: a line per target and hook as it moves, and the
//! summary at the end (a canary's with its steps, decisions and traffic).

use crate::cli::output::{self, Out};
use crate::deploy::state::{DeploymentState, Kind, TargetState, TargetState as T, Topic};
use crate::deploy::view::{DeploymentView, HookState, HookView, TargetView};

/// `  [pre-deploy] hook migrate: passed in 1.2s: exit 0`
pub(super) fn hook_line(h: &HookView) -> String {
    let took = h
        .duration_ms
        .map(|d| format!(" in {}", output::duration(d)))
        .unwrap_or_default();
    let detail = match h.state {
        HookState::Running => format!("running (attempt {})", h.attempt),
        HookState::Retrying => format!("attempt {} failed, retrying: {}", h.attempt, h.message),
        HookState::Failed => format!("failed after {} attempt(s): {}", h.attempt, h.message),
        s => format!("{}{took}: {}", s.as_str(), h.message),
    };
    format!("  [{}] hook {}: {detail}", h.event, h.name)
}

pub(super) fn progress_line(v: &DeploymentView, t: &TargetView) -> String {
    let batch = if v.batches > 0 {
        format!("[{}/{}] ", t.batch, v.batches)
    } else {
        String::new()
    };
    let detail = match t.state {
        T::Running => format!("running (attempt {})", t.attempt),
        T::Retrying => format!("attempt {} failed, retrying: {}", t.attempt, t.message),
        T::Unknown if v.status.is_live() => format!(
            "unknown: attempt {} was cut off by an engine stop; it is reconciled (or run again \
             with the same key) next",
            t.attempt
        ),
        T::Unknown => format!(
            "unknown: attempt {} was cut off by an engine stop; it is reconciled (or run again) \
             when the deployment is resumed",
            t.attempt
        ),
        T::Failed | T::RollbackFailed => {
            format!("{} after {} attempt(s): {}", t.state, t.attempt, t.message)
        }
        T::Skipped => format!("skipped: {}", t.message),
        state => {
            let took = t
                .duration_ms
                .map(|d| format!(" in {}", output::duration(d)))
                .unwrap_or_default();
            let msg = if t.message.is_empty() {
                String::new()
            } else {
                format!(": {}", t.message)
            };
            format!("{state}{took}{msg}")
        }
    };
    format!("  {batch}{}: {detail}", t.name)
}

/// Where a canary that waits is, and the verbs that move it on.
pub(super) fn canary_summary(
    v: &DeploymentView,
    c: &crate::deploy::view::CanaryView,
    out: &mut Out,
) {
    let id = &v.id;
    let actual = match c.actual_weight() {
        Some(a) if a != c.status.weight => format!(" (the router serves {a}%: drift)"),
        _ => String::new(),
    };
    let at = v
        .phase
        .as_ref()
        .map_or_else(String::new, |p| format!(" at {p}"));
    out.line(format!(
        "  candidate {}% / stable {}%{actual}{at}",
        c.status.weight,
        100 - c.status.weight.min(100)
    ));
    if let Some(d) = c.status.decisions.last().filter(|d| d.by == "analysis") {
        out.line(format!("  {} by its analysis: {}", d.action, d.why));
    }
    for l in c.router_lines() {
        out.line(format!("  {l}"));
    }
    let mut verbs: Vec<(String, &str)> = Vec::new();
    if v.takes(Topic::Resume) {
        verbs.push((format!("manent resume {id}"), "goes on with the steps"));
    }
    if v.takes(Topic::Promote) {
        verbs.push((format!("manent promote {id}"), "ends this step"));
        verbs.push((format!("manent promote --full {id}"), "skips the rest"));
    }
    if v.takes(Topic::Weight) {
        verbs.push((format!("manent weight {id} N"), "sets the weight and holds"));
    }
    if v.takes(Topic::Back) && c.status.can_go_back {
        verbs.push((
            format!("manent back {id}"),
            "returns to the previous step's weight",
        ));
    }
    if v.takes(Topic::Retry) {
        verbs.push((format!("manent retry {id}"), "tries the router call again"));
    }
    if v.takes(Topic::Revert) {
        verbs.push((
            format!("manent revert {id}"),
            "takes the candidate out of traffic",
        ));
    }
    if v.takes(Topic::Abandon) {
        verbs.push((
            format!("manent abandon {id} --reason \"…\""),
            "ends it failed, traffic left where the router has it",
        ));
    }
    let wide = verbs.iter().map(|(v, _)| v.len()).max().unwrap_or(0);
    let verbs: Vec<String> = verbs
        .into_iter()
        .map(|(v, what)| format!("{v:<wide$}  {what}"))
        .collect();
    if !verbs.is_empty() {
        out.line(format!("  {id} waits for an operator:"));
        for v in verbs {
            out.line(format!("    {v}"));
        }
    }
}

/// The deployment's summary on stdout (or its JSON).
pub fn summary(v: &DeploymentView, json: bool, out: &mut Out) {
    if json {
        out.json(v);
        return;
    }
    let mut counts: Vec<(TargetState, usize)> = Vec::new();
    for t in &v.targets {
        match counts.iter_mut().find(|(s, _)| *s == t.state) {
            Some((_, n)) => *n += 1,
            None => counts.push((t.state, 1)),
        }
    }
    let mut counts: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    if v.kind == Kind::Test {
        for state in [HookState::Passed, HookState::Failed] {
            let n = v.hooks.iter().filter(|h| h.state == state).count();
            if n > 0 {
                counts.push(format!("{n} {}", state.as_str()));
            }
        }
    }
    let what = match v.kind {
        Kind::Rollback => format!(
            "rollback of {} in {} ({})",
            v.application, v.environment, v.transitions
        ),
        Kind::DryRun => format!(
            "dry-run of {} {} in {}",
            v.application, v.version, v.environment
        ),
        Kind::Deploy => format!(
            "deploy of {} {} to {}",
            v.application, v.version, v.environment
        ),
        Kind::Canary => format!(
            "canary of {} {} to {}",
            v.application, v.version, v.environment
        ),
        Kind::Test => format!(
            "test hooks of {} {} in {}",
            v.application, v.version, v.environment
        ),
    };
    out.line(format!(
        "{}: {what}: {} ({})",
        v.id,
        v.state,
        counts.join(", ")
    ));
    if let Some(r) = &v.report
        && !r.message.is_empty()
    {
        out.line(format!("  {}", r.message));
    }
    for h in v.hooks.iter().filter(|h| h.state != HookState::Pending) {
        out.line(hook_line(h));
        if h.state == HookState::Failed && !h.output.is_empty() {
            for l in h
                .output
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
            {
                out.line(format!("      {l}"));
            }
        }
    }
    if v.dry_run {
        for t in &v.targets {
            out.line(format!("  {}: {}", t.moniker, t.message));
        }
    }
    for t in v.targets.iter().filter(|t| t.state.is_failed()) {
        out.line(format!(
            "  {:<8} {}  ({} attempts) {}",
            t.state, t.moniker, t.attempt, t.message
        ));
    }
    if let Some(r) = &v.report {
        for t in r
            .targets
            .iter()
            .filter(|t| t.status == T::Unchanged && v.kind == Kind::Rollback)
        {
            out.line(format!("  unchanged {}: {}", t.moniker, t.message));
        }
        for t in &r.rolled_back {
            out.line(format!(
                "  rolled back {}: {} {}",
                t.moniker, t.status, t.message
            ));
        }
    }
    if let Some(c) = &v.canary
        && v.status.is_live()
    {
        canary_summary(v, c, out);
    }
    if v.state == DeploymentState::FailedAwaiting && !v.router_failed() {
        let id = &v.id;
        let failed = v.first_failure().map_or("TARGET", |t| t.name.as_str());
        let mut verbs = Vec::new();
        if v.takes(Topic::Retry) {
            verbs.push(format!("`manent retry {id}` runs the failed targets again"));
        }
        if v.takes(Topic::Skip) {
            verbs.push(format!("`manent skip {id} {failed}` leaves one out"));
        }
        if v.takes(Topic::Abort) {
            verbs.push(format!("`manent abort {id}` rolls back what it changed"));
        }
        out.line(format!("  {id} waits for a decision: {}", verbs.join(", ")));
    }
}
