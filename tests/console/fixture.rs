//! Fixed snapshots for the console tests: two environments of a shop, a deployment running in
//! its second batch with a retry and a failure, a finished one, and log lines.

#![allow(dead_code, reason = "each test binary uses part of the fixture")]

use std::collections::BTreeMap;
use std::sync::Arc;

use manent::console::action::Action;
use manent::console::app::App;
use manent::deploy::view::{DeploymentView, TargetView};
use manent::deploy::{Report, TargetReport};
use manent::engine::handle::{AppEnv, EngineMode, Snapshot};
use manent::plugin::{Level, LogLine};
use manent::workflow::store::{JournalEntry, WorkflowStatus};

/// 2026-11-29T10:01:12Z
pub const NOW: i64 = 1_795_946_472_000;

fn target(i: usize, state: &str, attempt: u32, ms: Option<u64>, message: &str) -> TargetView {
    TargetView {
        moniker: format!("prod::shop::fleet::web-{i:02}"),
        name: format!("web-{i:02}"),
        batch: u32::try_from((i - 1) / 6 + 1).unwrap(),
        state: state.into(),
        attempt,
        duration_ms: ms,
        message: message.into(),
    }
}

pub fn running() -> DeploymentView {
    let mut targets = Vec::new();
    for i in 1..=36 {
        targets.push(match i {
            1..=5 => target(
                i,
                "deployed",
                1,
                Some(1200 + i as u64 * 37),
                "simulated deploy of 2.4.0",
            ),
            6 => target(
                i,
                "deployed",
                2,
                Some(2950),
                "simulated deploy of 2.4.0 after a retry",
            ),
            7 => target(i, "running", 1, None, ""),
            8 => target(
                i,
                "retrying",
                1,
                None,
                "simulated transient failure on web-08",
            ),
            9 => target(i, "running", 2, None, ""),
            _ => target(i, "pending", 0, None, ""),
        });
    }
    DeploymentView {
        id: "dep-20261129-100000-aaaa".into(),
        kind: "deploy".into(),
        status: WorkflowStatus::Pending,
        application: "shop".into(),
        environment: "prod".into(),
        production: true,
        version: "2.4.0".into(),
        plugin: "fleet".into(),
        dry_run: false,
        operator: "alice from 10.1.2.3".into(),
        phase: Some("batch 2/6".into()),
        batches: 6,
        targets,
        report: None,
        pending_commands: Vec::new(),
        runs: 1,
        created_at: NOW - 72_000,
        completed_at: None,
    }
}

pub fn failed() -> DeploymentView {
    let mut d = running();
    d.id = "dep-20261129-090000-bbbb".into();
    d.environment = "staging".into();
    d.production = false;
    d.status = WorkflowStatus::Error;
    d.phase = Some("failed".into());
    d.created_at = NOW - 3_600_000;
    d.completed_at = Some(NOW - 3_540_000);
    d.targets.truncate(12);
    d.batches = 2;
    for t in &mut d.targets {
        t.moniker = t.moniker.replace("prod::", "staging::");
        if t.state != "deployed" {
            t.state = "skipped".into();
            t.attempt = 0;
            t.message = "not started: an earlier target failed".into();
        }
    }
    d.targets[6].state = "failed".into();
    d.targets[6].attempt = 4;
    d.targets[6].message = "simulated permanent failure on web-07 (permanent, not retried)".into();
    d.report = Some(Report {
        kind: "deploy".into(),
        result: "failed".into(),
        version: "2.4.0".into(),
        message: "web-07 failed: simulated permanent failure on web-07".into(),
        targets: vec![TargetReport {
            moniker: "staging::shop::fleet::web-08".into(),
            batch: 2,
            status: "skipped".into(),
            attempts: 0,
            message: "not started: an earlier target failed".into(),
            duration_ms: 0,
        }],
        rolled_back: Vec::new(),
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
        live: vec!["2.3.0".into()],
        batches,
        live_by_target,
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
            a
        }],
        deployments: vec![running(), failed()],
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
            message,
            attrs: BTreeMap::new(),
        });
    }
    out
}

pub fn app_on_home() -> App {
    let mut app = App::new(false, NOW);
    app.update(Action::Snapshot(Arc::new(snapshot())));
    for l in logs() {
        app.update(Action::Log(l));
    }
    app
}

pub fn app_on_deployment(id: &str) -> App {
    let mut app = app_on_home();
    app.show(id.to_owned());
    app.follow_targets = false;
    app.target_row = 0;
    app
}

pub fn set_phase(app: &mut App, phase: &str) {
    let mut s = (*app.snap).clone();
    s.deployments[0].phase = Some(phase.into());
    app.update(Action::Snapshot(Arc::new(s)));
}
