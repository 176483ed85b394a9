//! Fixed snapshots for the console tests: two environments of a shop, a deployment running in
//! its second batch with a retry and a failure, a finished one, and log lines.

#![allow(dead_code, reason = "each test binary uses part of the fixture")]

use std::collections::BTreeMap;
use std::sync::Arc;

use manent::config::Event;
use manent::console::action::Action;
use manent::console::app::{App, Focus};
use manent::deploy::records::JournalEntry;
use manent::deploy::releases::{Transition, Transitions};
use manent::deploy::state::{DeploymentState, Ending, Kind, Phase, TargetState, Topic};
use manent::deploy::view::{AttemptView, DeploymentView, HookState, HookView, TargetView};
use manent::deploy::{Report, TargetReport};
use manent::engine::handle::{AppEnv, EngineMode, Snapshot};
use manent::plugin::{Level, LogLine};
use manent::workflow::store::{AttemptOutcome, WorkflowStatus};

/// 2026-11-29T10:01:12Z
pub const NOW: i64 = 1_795_946_472_000;

fn target(
    i: usize,
    state: TargetState,
    attempt: u32,
    ms: Option<u64>,
    message: &str,
) -> TargetView {
    let attempts = (1..=attempt)
        .map(|a| AttemptView {
            attempt: a,
            round: 1,
            action: manent::deploy::state::Action::Deploy,
            started_at: NOW - 30_000 + i64::from(a) * 3_000,
            ended_at: (a < attempt || state != TargetState::Running)
                .then_some(NOW - 28_000 + i64::from(a) * 3_000),
            outcome: if a < attempt {
                Some(AttemptOutcome::Retryable)
            } else if state == TargetState::Running {
                None
            } else if state == TargetState::Failed {
                Some(AttemptOutcome::Permanent)
            } else {
                Some(AttemptOutcome::Ok)
            },
            error: (a < attempt || state == TargetState::Failed)
                .then(|| format!("simulated failure on web-{i:02} (attempt {a})")),
            key: format!("dep-20261129-100000-aaaa/{}", 10 + i),
        })
        .collect();
    TargetView {
        moniker: format!("prod::shop::fleet::web-{i:02}"),
        name: format!("web-{i:02}"),
        batch: u32::try_from((i - 1) / 6 + 1).unwrap(),
        state,
        attempt,
        duration_ms: ms,
        message: message.into(),
        attempts,
    }
}

pub fn running() -> DeploymentView {
    let mut targets = Vec::new();
    for i in 1..=36 {
        targets.push(match i {
            1..=5 => target(
                i,
                TargetState::Deployed,
                1,
                Some(1200 + i as u64 * 37),
                "simulated deploy of 2.4.0",
            ),
            6 => target(
                i,
                TargetState::Deployed,
                2,
                Some(2950),
                "simulated deploy of 2.4.0 after a retry",
            ),
            7 => target(i, TargetState::Running, 1, None, ""),
            8 => target(
                i,
                TargetState::Retrying,
                1,
                None,
                "simulated transient failure on web-08",
            ),
            9 => target(i, TargetState::Running, 2, None, ""),
            _ => target(i, TargetState::Pending, 0, None, ""),
        });
    }
    DeploymentView {
        id: "dep-20261129-100000-aaaa".into(),
        kind: Kind::Deploy,
        status: WorkflowStatus::Pending,
        state: DeploymentState::Running,
        application: "shop".into(),
        environment: "prod".into(),
        production: true,
        version: "2.4.0".into(),
        transitions: Transitions::default(),
        plugin: "fleet".into(),
        dry_run: false,
        operator: "alice from 10.1.2.3".into(),
        phase: Some(Phase::Batch { batch: 2, of: 6 }),
        phase_at: None,
        accepts: vec![Topic::Pause, Topic::Skip, Topic::Abort],
        batches: 6,
        targets,
        report: None,
        pending_commands: Vec::new(),
        runs: 1,
        created_at: NOW - 72_000,
        completed_at: None,
        canary: None,
        hooks: Vec::new(),
        per_target_hooks: Vec::new(),
        never_started: None,
        target_counts: None,
        summary: false,
        unwatched: false,
    }
}

/// A staging deploy whose web-07 failed: it waits for a decision (retry, skip, abort).
pub fn failed() -> DeploymentView {
    let mut d = running();
    d.id = "dep-20261129-090000-bbbb".into();
    d.environment = "staging".into();
    d.production = false;
    d.state = DeploymentState::FailedAwaiting;
    d.phase = Some(Phase::AwaitingDecision {
        batch: 2,
        failed: vec!["web-07".into()],
        canary: false,
    });
    d.accepts = vec![Topic::Retry, Topic::Skip, Topic::Abort];
    d.created_at = NOW - 3_600_000;
    d.targets.truncate(12);
    d.batches = 2;
    for t in &mut d.targets {
        t.moniker = t.moniker.replace("prod::", "staging::");
        if t.state != TargetState::Deployed {
            t.state = TargetState::Pending;
            t.attempt = 0;
            t.attempts.clear();
            t.message = String::new();
        }
    }
    d.targets[6] = target(
        7,
        TargetState::Failed,
        4,
        None,
        "fleet on web-07: deploy command failed on web-07 (exit status 1): health check \
         /healthz answered 503 after 30s; see the target's log lines (failed 4 attempts)",
    );
    d.targets[6].moniker = "staging::shop::fleet::web-07".into();
    d
}

/// A deploy that failed with `atomic: true` and rolled back what it changed.
pub fn rolled_back() -> DeploymentView {
    let mut d = failed();
    d.id = "dep-20261129-080000-cccc".into();
    d.status = WorkflowStatus::Error;
    d.state = DeploymentState::RolledBack;
    d.phase = Some(Phase::Failed);
    d.accepts = Vec::new();
    d.completed_at = Some(NOW - 3_540_000);
    for t in &mut d.targets {
        match t.state {
            TargetState::Deployed => {
                t.state = TargetState::RolledBack;
                t.message = "web back on 2.3.0".into();
            }
            TargetState::Pending => {
                t.state = TargetState::Skipped;
                t.message = "not started: the deploy stopped before it".into();
            }
            _ => {}
        }
    }
    d.report = Some(Report {
        kind: Kind::Deploy,
        ending: Ending::RolledBack,
        version: "2.4.0".into(),
        transitions: Transitions(vec![Transition {
            from: "2.4.0".into(),
            to: "2.3.0".into(),
            targets: 6,
        }]),
        message: "web-07 failed: simulated permanent failure on web-07; the targets it changed \
                  were rolled back (6 targets: 2.4.0 → 2.3.0)"
            .into(),
        targets: vec![TargetReport {
            moniker: "staging::shop::fleet::web-08".into(),
            batch: 2,
            status: TargetState::Skipped,
            attempts: 0,
            message: "not started: the deploy stopped before it".into(),
            duration_ms: 0,
        }],
        rolled_back: Vec::new(),
        skipped: 0,
    });
    d
}

/// The demo's canary steps.
pub fn canary_plan() -> manent::config::Canary {
    use manent::config::{Analysis, CanaryStep, Check};
    manent::config::Canary {
        steps: vec![
            CanaryStep::Testers,
            CanaryStep::Weight(10),
            CanaryStep::Pause(None),
            CanaryStep::Weight(25),
            CanaryStep::Analysis(Analysis {
                check: Check::Command {
                    command: "curl -fs http://127.0.0.1:8080/health".into(),
                },
                count: 3,
                interval: std::time::Duration::from_secs(5),
                failure_limit: 1,
                inconclusive_limit: 1,
            }),
            CanaryStep::Weight(50),
            CanaryStep::Pause(None),
            CanaryStep::Scale(100),
            CanaryStep::Weight(100),
        ],
        slider_step: 5,
        confirm_above: 50,
        watch: std::time::Duration::from_secs(5),
        on_drift: manent::config::OnDrift::Correct,
        analysis: None,
    }
}

/// A canary of shop 2.4.0 in prod, its candidate on every target, paused at 10% (step 3 of 9)
/// until an operator promotes it.
pub fn canary() -> DeploymentView {
    use manent::deploy::flows::canary::{Actual, CanaryStatus};
    use manent::deploy::state::Doing;
    let mut d = running();
    d.id = "dep-20261129-100500-dddd".into();
    d.kind = Kind::Canary;
    d.state = DeploymentState::CanaryPaused;
    d.phase = Some(Phase::Canary {
        step: 3,
        of: 9,
        doing: Doing::Pause,
    });
    d.accepts = vec![Topic::Promote, Topic::Revert, Topic::Weight, Topic::Back];
    d.batches = 1;
    for t in &mut d.targets {
        t.batch = 1;
        t.state = TargetState::Candidate;
        t.attempt = 1;
        t.duration_ms = Some(1400);
        t.message = "simulated: 2.4.0 on the green slot".into();
    }
    d.canary = Some(manent::deploy::view::CanaryView {
        drift: None,
        traffic: Vec::new(),
        background: None,
        plan: canary_plan(),
        status: CanaryStatus {
            step: 3,
            weight: 10,
            actual: Some(10),
            testers: [("header".to_owned(), "X-Canary: 1".to_owned())]
                .into_iter()
                .collect(),
            can_go_back: true,
            back_to: Some(0),
            routing: Some(manent::plugin::Routing {
                stable: manent::plugin::Pool {
                    slot: "blue".into(),
                    version: "2.3.0".into(),
                    addresses: Vec::new(),
                },
                candidate: manent::plugin::Pool {
                    slot: "green".into(),
                    version: "2.4.0".into(),
                    addresses: Vec::new(),
                },
                weight: 10,
                testers: true,
                scale: 100,
                retired: false,
            }),
            serving_since: Some(NOW - 60_000),
            ..CanaryStatus::default()
        },
        actual: Some(Actual {
            weight: Some(10),
            error: None,
            at: NOW - 2_000,
            by_engine: true,
            ..Actual::default()
        }),
    });
    d
}

fn app_env(env: &str, production: bool, n: usize) -> AppEnv {
    let batches: Vec<Vec<String>> = (1..=n)
        .collect::<Vec<_>>()
        .chunks(6)
        .map(|c| c.iter().map(|i| format!("web-{i:02}")).collect())
        .collect();
    let live_by_target: BTreeMap<String, String> = (1..=n)
        .map(|i| (format!("web-{i:02}"), "2.3.0".to_owned()))
        .collect();
    AppEnv {
        application: "shop".into(),
        environment: env.into(),
        production,
        plugin: "fleet".into(),
        version: "2.4.0".into(),
        strategy: "rolling 6".into(),
        targets: n,
        live_read: true,
        live: vec!["2.3.0".into()],
        batches,
        live_by_target,
        rollback: Transitions(vec![Transition {
            from: "2.3.0".into(),
            to: "2.2.0".into(),
            targets: n,
        }]),
        rollback_stays: Vec::new(),
        versions: vec!["2.3.0".into(), "2.2.0".into()],
        tests: Vec::new(),
        lock: None,
        file: "shop.yml".into(),
        read: 1,
    }
}

pub fn snapshot() -> Snapshot {
    Snapshot {
        seq: 7,
        mode: Some(EngineMode::InProcess),
        database: ".manent/manent.db".into(),
        operator: "alice from 10.1.2.3".into(),
        apps: vec![app_env("staging", false, 12), app_env("prod", true, 36), {
            let mut a = app_env("eu1", false, 4);
            a.application = "api".into();
            a.plugin = "exec".into();
            a.live = Vec::new();
            a.live_by_target.clear();
            a.rollback = Transitions::default();
            a.versions.clear();
            a
        }],
        deployments: vec![running(), failed(), rolled_back(), canary()],
        journal: vec![JournalEntry {
            at: NOW - 72_000,
            operator: "alice".into(),
            client: Some("10.1.2.3".into()),
            action: "deploy".into(),
            workflow_id: Some("dep-20261129-100000-aaaa".into()),
            subject: Some("shop/prod".into()),
            detail: Some("2.4.0 to 36 targets".into()),
            reason: Some("weekly release".into()),
        }],
        notices: Vec::new(),
        problems: Vec::new(),
        store_trouble: None,
        owners: Default::default(),
        shared: None,
        engine_note: None,
        unclaimed: Vec::new(),
        parked: Vec::new(),
    }
}

pub fn logs() -> Vec<LogLine> {
    let mut out = Vec::new();
    for i in 0..40 {
        let t = format!("web-{:02}", i % 9 + 1);
        let (level, message) = match i % 7 {
            3 => (
                Level::Warn,
                format!("simulated transient failure on {t} (attempt 1)"),
            ),
            5 => (
                Level::Debug,
                format!("simulated deploy on {t}: fetching the artifact (1/3)"),
            ),
            _ => (
                Level::Info,
                format!("simulated deploy on {t}: checking health (3/3)"),
            ),
        };
        out.push(LogLine {
            at: NOW - 60_000 + i * 1500,
            level,
            source: "fleet".into(),
            deployment_id: Some("dep-20261129-100000-aaaa".into()),
            target: Some(t),
            moniker: None,
            message,
            attrs: BTreeMap::new(),
        });
    }
    out
}

pub const HOOKED: &str = "dep-20261129-100800-eeee";

fn hook(event: Event, name: &str, weight: i32, state: HookState, ms: Option<u64>) -> HookView {
    HookView {
        event,
        name: name.into(),
        kind: if name == "ready" { "wait" } else { "command" }.into(),
        weight,
        moniker: format!("staging::shop::hook::{name}"),
        state,
        attempt: u32::from(state != HookState::Pending),
        duration_ms: ms,
        message: String::new(),
        output: String::new(),
        deletes: Vec::new(),
    }
}

/// A staging deploy with its hooks: two pre-deploy hooks passed, every target deployed, the
/// post-deploy smoke test failed once and waits for its retry.
pub fn hooked() -> DeploymentView {
    let mut d = failed();
    d.id = HOOKED.into();
    d.state = DeploymentState::Running;
    d.created_at = NOW - 95_000;
    d.accepts = vec![Topic::Abort];
    for t in &mut d.targets {
        t.state = TargetState::Deployed;
        t.attempt = t.attempt.max(1);
        t.duration_ms = t.duration_ms.or(Some(1400));
    }
    d.phase = Some(Phase::Hook {
        event: Event::PostDeploy,
        name: "smoke".into(),
        index: 2,
        of: 3,
    });
    let mut migrate = hook(
        Event::PreDeploy,
        "migrate",
        -5,
        HookState::Passed,
        Some(2_140),
    );
    migrate.message = "exit 0".into();
    migrate.output = "applied 2 migrations: 0041_orders_index, 0042_carts_ttl".into();
    migrate.deletes = vec!["hook-succeeded: exit 0".into()];
    let mut smoke = hook(Event::PostDeploy, "smoke", 0, HookState::Retrying, None);
    smoke.message = "exit status 1: GET /checkout answered 502".into();
    smoke.output = "checking /healthz ... ok\nchecking /checkout ... 502 Bad Gateway".into();
    d.hooks = vec![
        migrate,
        hook(
            Event::PreDeploy,
            "warm-cache",
            0,
            HookState::Passed,
            Some(410),
        ),
        hook(
            Event::PostDeploy,
            "ready",
            -1,
            HookState::Passed,
            Some(3_020),
        ),
        smoke,
        hook(Event::PostDeploy, "notify", 10, HookState::Pending, None),
    ];
    d
}

pub const TEST_RUN: &str = "dep-20261129-100900-ffff";

/// `manent test shop staging`: smoke passed, checkout failed after its retry.
pub fn test_run() -> DeploymentView {
    let mut d = hooked();
    d.id = TEST_RUN.into();
    d.kind = Kind::Test;
    d.version = "2.3.0".into();
    d.status = WorkflowStatus::Error;
    d.state = DeploymentState::Failed;
    d.phase = None;
    d.accepts = Vec::new();
    d.targets.clear();
    d.batches = 0;
    d.created_at = NOW - 20_000;
    d.completed_at = Some(NOW - 12_000);
    let mut smoke = hook(Event::Test, "smoke", 0, HookState::Passed, Some(1_250));
    smoke.message = "exit 0".into();
    let mut checkout = hook(Event::Test, "checkout", 5, HookState::Failed, None);
    checkout.attempt = 2;
    checkout.message = "exit status 1: POST /checkout answered 500 (failed 2 attempts)".into();
    d.hooks = vec![smoke, checkout];
    d.report = Some(Report {
        message: "1 of 2 test hook(s) of shop/staging failed: checkout".into(),
        ..Report::new(Kind::Test, "2.3.0")
    });
    d
}

/// The console with `extra` deployments listed and `shop/staging` given a `test` hook, on `id`.
fn app_with(extra: Vec<DeploymentView>, id: &str) -> App {
    let mut snap = snapshot();
    snap.apps[0].tests = vec!["smoke".into()];
    snap.deployments.extend(extra);
    let mut app = App::new(false, NOW);
    app.update(Action::Snapshot(Arc::new(snap)));
    for l in logs() {
        app.update(Action::Log(l.into()));
    }
    open(app, id)
}

/// The console on [`hooked`], its environment with a `test` hook.
pub fn app_on_hooked() -> App {
    app_with(vec![hooked()], HOOKED)
}

/// The console on [`test_run`].
pub fn app_on_test_run() -> App {
    app_with(vec![test_run()], TEST_RUN)
}

pub fn app_on_home() -> App {
    let mut app = App::new(false, NOW);
    app.update(Action::Snapshot(Arc::new(snapshot())));
    for l in logs() {
        app.update(Action::Log(l.into()));
    }
    app
}

/// Home with nothing live in shop/prod: a deploy there is asked, not refused for a live one.
pub fn app_on_quiet_home() -> App {
    let mut app = app_on_home();
    let mut s = (*app.snap).clone();
    s.deployments
        .retain(|d| !(d.subject() == "shop/prod" && d.status.is_live()));
    app.update(Action::Snapshot(Arc::new(s)));
    app
}

pub fn app_on_deployment(id: &str) -> App {
    open(app_on_home(), id)
}

fn open(mut app: App, id: &str) -> App {
    app.show(id.to_owned());
    // The first update asks for the deployment's earlier log lines.
    assert_eq!(
        app.update(Action::Tick(NOW)),
        Some(manent::engine::handle::Command::LoadLogs { id: id.to_owned() })
    );
    app.ui.follow_targets = false;
    app.ui.lists.get_mut(Focus::Targets).row = 0;
    app
}

/// The phase of the deployment on screen (the first one on Home).
pub fn set_phase(app: &mut App, phase: Phase, state: DeploymentState, accepts: &[Topic]) {
    let mut s = (*app.snap).clone();
    let i = app
        .deployment()
        .and_then(|d| s.deployments.iter().position(|x| x.id == d.id))
        .unwrap_or(0);
    s.deployments[i].phase = Some(phase);
    s.deployments[i].state = state;
    s.deployments[i].accepts = accepts.to_vec();
    app.update(Action::Snapshot(Arc::new(s)));
}

/// Home with one deployment in each state an operator can read, to see every state's style.
pub fn app_with_every_state() -> App {
    use DeploymentState as D;
    let mut snap = snapshot();
    snap.apps.truncate(1);
    snap.journal.clear();
    let states = [
        D::Queued,
        D::Running,
        D::Cancelling,
        D::Paused,
        D::FailedAwaiting,
        D::Deployed,
        D::DeployedWithSkips,
        D::Failed,
        D::RolledBack,
        D::Aborted,
        D::Cancelled,
        D::Interrupted,
        D::Planned,
        D::CanaryPaused,
        D::Reverted,
    ];
    snap.deployments = states
        .iter()
        .enumerate()
        .map(|(i, state)| {
            let mut d = running();
            d.id = format!("dep-20261129-0{i:02}000-{i:04x}");
            d.state = *state;
            d.status = if state.is_live() {
                WorkflowStatus::Pending
            } else {
                WorkflowStatus::Success
            };
            d
        })
        .collect();
    let mut app = App::new(false, NOW);
    app.update(Action::Snapshot(Arc::new(snap)));
    app
}

/// Home with `shop/prod` locked by bob.
pub fn app_on_locked_home() -> App {
    locked(app_on_home(), "investigating 502s")
}

/// Home with `shop/prod` locked by bob and nothing live there (a deploy asks, through the lock).
pub fn app_on_locked_quiet_home() -> App {
    locked(app_on_quiet_home(), "investigating 502s")
}

/// [`app_on_locked_quiet_home`], the lock's reason `reason`.
pub fn app_on_quiet_home_locked_because(reason: &str) -> App {
    locked(app_on_quiet_home(), reason)
}

fn locked(mut app: App, reason: &str) -> App {
    let mut s = (*app.snap).clone();
    s.apps[1].lock = Some(manent::deploy::records::Lock {
        subject: "shop/prod".into(),
        operator: "bob".into(),
        client: None,
        host: "bastion-2".into(),
        reason: reason.into(),
        since: NOW - 600_000,
        expires_at: Some(NOW + 3_000_000),
    });
    app.update(manent::console::action::Action::Snapshot(
        std::sync::Arc::new(s),
    ));
    app
}

pub const ROUTER_FAILED: &str = "dep-20261129-101000-abcd";

/// The canary of shop 2.4.0 in prod whose router failed setting 25%: it waits for a decision
/// (retry, revert, a weight, abandon), the router's error in full.
pub fn router_failed() -> DeploymentView {
    use manent::deploy::state::Doing;
    let mut d = canary();
    d.id = ROUTER_FAILED.into();
    d.state = DeploymentState::FailedAwaiting;
    d.phase = Some(Phase::Canary {
        step: 4,
        of: 9,
        doing: Doing::RouterFailed {
            call: "set weight 25%".into(),
            weight: 10,
            reverting: false,
        },
    });
    d.accepts = vec![Topic::Retry, Topic::Revert, Topic::Weight, Topic::Abandon];
    if let Some(c) = &mut d.canary {
        c.status.step = 4;
        c.status.router_error = Some(
            "nginx -t failed (exit status 1): nginx: [emerg] host not found in upstream \
             \"web-17.internal:8080\" in /etc/nginx/manent-web.conf:41 — the previous \
             configuration was put back and reloaded; nginx serves stable 90% / candidate 10% \
             (read back); fix the address of web-17 in the descriptor's labels (green) or \
             take the target out, then retry"
                .into(),
        );
    }
    d
}

pub const HELD: &str = "dep-20261129-101500-beef";

/// The canary of shop 2.4.0 in prod held at 70% (set by hand during the pause at step 3).
pub fn held() -> DeploymentView {
    use manent::deploy::state::Doing;
    let mut d = canary();
    d.id = HELD.into();
    d.phase = Some(Phase::Canary {
        step: 3,
        of: 9,
        doing: Doing::Held { weight: 70 },
    });
    d.accepts = vec![
        Topic::Resume,
        Topic::Promote,
        Topic::Revert,
        Topic::Weight,
        Topic::Back,
    ];
    if let Some(c) = &mut d.canary {
        c.status.weight = 70;
        c.status.actual = Some(70);
        c.status.manual = true;
        c.status.held = true;
        c.status.back_to = Some(10);
        if let Some(a) = &mut c.actual {
            a.weight = Some(70);
        }
    }
    d
}

/// The console on a canary whose router failed.
pub fn app_on_router_failed() -> App {
    app_with(vec![router_failed()], ROUTER_FAILED)
}

/// The console on a canary held at 70%.
pub fn app_on_held() -> App {
    app_with(vec![held()], HELD)
}
