//! Deploy workflows in-process on the `simulate` plugin: retries with backoff, permanent
//! failures, exhausted budgets, the engine's per-target fan-out, dry-runs, rollbacks, and the
//! one-engine-per-database lease.

use manent::config::Config;
use manent::deploy::command::{self, OperatorCommand};
use manent::deploy::state::{DeploymentState, Ending, TargetState, Topic};
use manent::deploy::submit::{self, Submission};
use manent::deploy::view::{self, DeploymentView, TargetView};
use manent::engine::{Engine, EngineError};
use manent::operator::Operator;
use manent::workflow::store::WorkflowStatus;

fn config(app: &str) -> (tempfile::TempDir, Config) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("manent.yml"),
        "plugins:\n  fleet:\n    builtin: simulate\n    log_lines: 1\n",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("apps")).unwrap();
    std::fs::write(dir.path().join("apps/shop.yml"), app).unwrap();
    let config = Config::load(&dir.path().join("manent.yml"), &manent::plugin::catalog()).unwrap();
    assert!(config.problems.is_empty(), "{:?}", config.problems);
    (dir, config)
}

fn app(params: &str, extra: &str) -> String {
    format!(
        "application: shop\nartifact: {{version: \"1\"}}\ndeploy:\n  plugin: fleet\n  params: {params}\n\
         parallelism: 2\nmax_retries: 2\nbackoff: {{base: 5ms, max: 20ms}}\n{extra}\nenvironments:\n  prod:\n    targets:\n\
         {}",
        (1..=6)
            .map(|i| format!("      - {{name: s{i}}}\n"))
            .collect::<String>()
    )
}

async fn deploy(engine: &Engine, config: &Config, version: &str, dry_run: bool) -> DeploymentView {
    let mut spec = config.environment("shop", "prod").unwrap();
    spec.artifact.version = version.into();
    let op = Operator {
        name: "tester".into(),
        client: None,
    };
    let sub = Submission::new(&op, None, &config.engine);
    let id = submit::deploy(engine.store().as_ref(), &spec, dry_run, &sub)
        .await
        .unwrap()
        .id()
        .to_owned();
    engine.run(&id).await.unwrap();
    settle(engine, &id).await
}

/// Waits until `id` finishes or waits for an operator, and reads it.
async fn settle(engine: &Engine, id: &str) -> DeploymentView {
    engine.settle(id).await.unwrap();
    view::load(engine.store().as_ref(), id)
        .await
        .unwrap()
        .unwrap()
}

fn tester() -> Operator {
    Operator {
        name: "tester".into(),
        client: None,
    }
}

/// Sends an operator command the way the console and the CLI do.
async fn send(engine: &Engine, id: &str, cmd: OperatorCommand) -> command::Acted {
    let acted =
        match command::send(engine.store().as_ref(), &tester(), id, &cmd, Some("test")).await {
            Ok(a) => a,
            Err(e) => {
                let v = view::load(engine.store().as_ref(), id).await;
                panic!("{cmd:?}: {e}\n{v:#?}")
            }
        };
    if acted.requeued {
        engine.run(id).await.unwrap();
    }
    engine.wake(id);
    acted
}

fn target<'a>(v: &'a DeploymentView, name: &str) -> &'a TargetView {
    v.targets.iter().find(|t| t.name == name).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_failure_is_retried_with_backoff_and_succeeds() {
    let (_dir, config) = config(&app("{flaky_targets: [s2], flaky_attempts: 2}", ""));
    let engine = Engine::start(&config).await.unwrap();
    let v = deploy(&engine, &config, "1", false).await;
    assert_eq!(v.status, WorkflowStatus::Success);
    assert_eq!(target(&v, "s2").state, TargetState::Deployed);
    assert_eq!(target(&v, "s2").attempt, 3);
    assert_eq!(target(&v, "s1").attempt, 1);
    let history = engine.store().history(&v.id).await.unwrap();
    let s2: Vec<_> = history
        .attempts
        .iter()
        .filter(|a| a.function_name.ends_with(":s2"))
        .collect();
    let outcomes: Vec<_> = s2.iter().map(|a| a.outcome.unwrap().as_str()).collect();
    assert_eq!(outcomes, ["retryable", "retryable", "ok"]);
    assert!(
        s2[1].started_at >= s2[0].ended_at.unwrap(),
        "attempt 2 waited for attempt 1"
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanent_failure_is_tried_once_and_stops_new_targets() {
    let (_dir, config) = config(&app("{fail_targets: [s3]}", ""));
    let engine = Engine::start(&config).await.unwrap();
    let v = deploy(&engine, &config, "1", false).await;
    // Guided failure: the deploy waits for an operator instead of ending.
    assert_eq!(v.state, DeploymentState::FailedAwaiting);
    assert_eq!(v.accepts, [Topic::Retry, Topic::Skip, Topic::Abort]);
    let s3 = target(&v, "s3");
    assert_eq!((s3.state, s3.attempt), (TargetState::Failed, 1));
    assert!(
        s3.message.contains("permanent, not retried"),
        "{}",
        s3.message
    );
    // Parallelism 2: at most one target after s3 could have started; the last never does.
    assert_eq!(target(&v, "s6").state, TargetState::Pending);
    for t in &v.targets {
        assert!(
            [
                TargetState::Deployed,
                TargetState::Failed,
                TargetState::Pending
            ]
            .contains(&t.state),
            "{t:?}"
        );
    }
    let history = engine.store().history(&v.id).await.unwrap();
    assert_eq!(
        history
            .attempts
            .iter()
            .filter(|a| a.function_name.ends_with(":s3"))
            .count(),
        1
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_budget_fails_with_every_attempt_recorded() {
    let (_dir, config) = config(&app("{flaky_targets: [s1], flaky_attempts: 99}", ""));
    let engine = Engine::start(&config).await.unwrap();
    let v = deploy(&engine, &config, "1", false).await;
    assert_eq!(v.state, DeploymentState::FailedAwaiting);
    assert_eq!(target(&v, "s1").attempt, 3);
    let history = engine.store().history(&v.id).await.unwrap();
    let rec = history
        .steps
        .iter()
        .find(|s| s.function_name == "deploy:b1:s1")
        .unwrap();
    let err: serde_json::Value = serde_json::from_str(rec.error.as_deref().unwrap()).unwrap();
    assert_eq!(err["kind"], "retries_exhausted");
    assert_eq!(err["attempts"], 3);
    assert_eq!(err["errors"].as_array().unwrap().len(), 3);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_records_no_release_and_rollback_restores_the_previous_one() {
    let (_dir, config) = config(&app("{}", "strategy: {rolling: {batch_size: 4}}"));
    let engine = Engine::start(&config).await.unwrap();
    let v = deploy(&engine, &config, "1", true).await;
    assert_eq!(v.report.as_ref().unwrap().ending, Ending::Planned);
    assert!(
        engine
            .store()
            .releases("shop/prod")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(v.batches, 2);
    deploy(&engine, &config, "1", false).await;
    deploy(&engine, &config, "2", false).await;
    let spec = config.environment("shop", "prod").unwrap();
    let op = tester();
    let sub = Submission::new(&op, Some("bad build"), &config.engine);
    let id = submit::rollback(engine.store().as_ref(), &spec, &sub)
        .await
        .unwrap()
        .id()
        .to_owned();
    engine.run(&id).await.unwrap();
    engine.wait(&id).await.unwrap();
    let v = view::load(engine.store().as_ref(), &id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(v.status, WorkflowStatus::Success, "{:?}", v.report);
    assert_eq!(v.version, "2 → 1", "a rollback shows where it went");
    let live: Vec<_> = engine
        .store()
        .releases("shop/prod")
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.rolled_back_by.is_none())
        .map(|r| r.version)
        .collect();
    assert_eq!(live, vec!["1"; 6]);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_engine_on_one_database_is_refused() {
    let (_dir, config) = config(&app("{}", ""));
    let engine = Engine::start(&config).await.unwrap();
    let err = Engine::start(&config).await.unwrap_err();
    assert!(matches!(err, EngineError::Lease(_)));
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("pid {}", std::process::id())),
        "{msg}"
    );
    engine.shutdown().await;
    Engine::start(&config).await.unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_to_roll_back_is_refused_before_a_workflow_starts() {
    let (_dir, config) = config(&app("{}", ""));
    let engine = Engine::start(&config).await.unwrap();
    let spec = config.environment("shop", "prod").unwrap();
    let op = tester();
    let sub = Submission::new(&op, None, &config.engine);
    let err = submit::rollback(engine.store().as_ref(), &spec, &sub)
        .await
        .unwrap_err();
    assert!(matches!(err, submit::SubmitError::NothingToRollBack(_)));
    assert!(
        err.to_string()
            .contains("nothing to roll back on shop/prod: manent has recorded no release"),
        "{err}"
    );
    // Redeploying the only version ever live leaves nothing to go back to either.
    deploy(&engine, &config, "1", false).await;
    deploy(&engine, &config, "1", false).await;
    let err = submit::rollback(engine.store().as_ref(), &spec, &sub)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("every target is on the only version"),
        "{err}"
    );
    let rows = engine
        .store()
        .workflows(manent::workflow::store::WorkflowQuery::default())
        .await
        .unwrap();
    assert!(
        rows.iter().all(|r| r.name == "deploy"),
        "no rollback was recorded"
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_deploy_takes_a_skip_and_an_abort_undoes_what_it_changed() {
    let (_dir, config) = config(&app(
        "{latency: {min: 20ms, max: 20ms}}",
        "strategy: {rolling: {batch_size: 2}}",
    ));
    let engine = Engine::start(&config).await.unwrap();
    deploy(&engine, &config, "1", false).await;
    let mut spec = config.environment("shop", "prod").unwrap();
    spec.artifact.version = "2".into();
    let op = tester();
    let sub = Submission::new(&op, None, &config.engine);
    let id = submit::deploy(engine.store().as_ref(), &spec, false, &sub)
        .await
        .unwrap()
        .id()
        .to_owned();
    engine.run(&id).await.unwrap();
    // Pause while batch 1 runs: it takes effect before batch 2.
    loop {
        let v = view::load(engine.store().as_ref(), &id)
            .await
            .unwrap()
            .unwrap();
        if v.takes(Topic::Pause) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let acted = send(&engine, &id, OperatorCommand::Pause).await;
    assert!(acted.message.contains("pauses before its next batch"));
    let v = settle(&engine, &id).await;
    assert_eq!(v.state, DeploymentState::Paused);
    assert_eq!(v.accepts, [Topic::Resume, Topic::Skip, Topic::Abort]);
    send(
        &engine,
        &id,
        OperatorCommand::Skip {
            target: "s6".into(),
        },
    )
    .await;
    let v = settle(&engine, &id).await;
    assert_eq!(
        v.state,
        DeploymentState::Paused,
        "still paused after a skip"
    );
    assert_eq!(target(&v, "s6").state, TargetState::Skipped);
    // Skipped before it ran: no try, no time (the skip is the operator's word, not a try).
    assert_eq!(
        (target(&v, "s6").attempt, target(&v, "s6").duration_ms),
        (0, None)
    );
    // A retry is not what a paused deployment takes: refused, with the reason.
    let err = command::send(
        engine.store().as_ref(),
        &tester(),
        &id,
        &OperatorCommand::Retry {
            targets: Vec::new(),
        },
        None,
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("no failed target waiting"),
        "{err}"
    );
    let changed: Vec<String> = v
        .targets
        .iter()
        .filter(|t| t.state == TargetState::Deployed)
        .map(|t| t.name.clone())
        .collect();
    assert!(!changed.is_empty());
    send(&engine, &id, OperatorCommand::Abort).await;
    let v = settle(&engine, &id).await;
    assert_eq!(v.state, DeploymentState::Aborted, "{:?}", v.report);
    for name in &changed {
        assert_eq!(target(&v, name).state, TargetState::RolledBack, "{name}");
    }
    assert_eq!(target(&v, "s6").state, TargetState::Skipped);
    let live = manent::deploy::releases::live_versions(
        engine.store().releases("shop/prod").await.unwrap(),
    );
    assert!(live.values().all(|v| v == "1"), "{live:?}");
    engine.shutdown().await;
}

/// Waits (up to 20 s) for a snapshot of which `ok` holds.
async fn snapshot_where(
    rx: &mut tokio::sync::watch::Receiver<std::sync::Arc<manent::engine::handle::Snapshot>>,
    ok: impl Fn(&manent::engine::handle::Snapshot) -> bool,
) -> std::sync::Arc<manent::engine::handle::Snapshot> {
    tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            let s = rx.borrow_and_update().clone();
            if ok(&s) {
                return s;
            }
            rx.changed().await.unwrap();
        }
    })
    .await
    .expect("the snapshot came")
}

/// A console left open reads an application's file again when it is edited (within a second,
/// and before a deploy, a rollback or a test run): it says so, lists what the file says now,
/// and a deploy started right after an edit deploys the edited file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_reads_an_edited_descriptor_and_deploys_what_it_says_now() {
    let (dir, _) = config(&app("{}", ""));
    let file = dir.path().join("apps/shop.yml");
    let settings =
        Config::load_settings(&dir.path().join("manent.yml"), &manent::plugin::catalog()).unwrap();
    let op = Operator {
        name: "tester".into(),
        client: None,
    };
    let h = manent::engine::handle::open(settings, op).await.unwrap();
    let mut rx = h.snapshot.clone();
    let first = snapshot_where(&mut rx, |s| s.apps.iter().any(|a| a.live_read)).await;
    assert_eq!(
        (first.apps[0].version.as_str(), first.apps[0].file.as_str()),
        ("1", "shop.yml")
    );
    let versioned = |v: &str| app("{}", "").replace("version: \"1\"", &format!("version: \"{v}\""));
    std::fs::write(&file, versioned("2")).unwrap();
    let s = snapshot_where(&mut rx, |s| {
        s.apps.first().is_some_and(|a| a.version == "2")
    })
    .await;
    assert_ne!(
        s.apps[0].read, first.apps[0].read,
        "the plan knows it was read again"
    );
    assert!(
        s.notices
            .iter()
            .any(|n| n.text.starts_with("shop.yml changed: read again")),
        "{:?}",
        s.notices
    );
    // Edited and deployed at once.
    std::fs::write(&file, versioned("3")).unwrap();
    h.commands
        .send(manent::engine::handle::Command::Deploy {
            application: "shop".into(),
            environment: "prod".into(),
            version: None,
            dry_run: false,
            reason: None,
            force: false,
        })
        .await
        .unwrap();
    let s = snapshot_where(&mut rx, |s| !s.deployments.is_empty()).await;
    assert_eq!(s.deployments[0].version, "3", "{:?}", s.notices);
    // A file that no longer loads is said, and its application left out until it does.
    std::fs::write(&file, "application: shop\nartifact: {version: \"4\"\n").unwrap();
    let s = snapshot_where(&mut rx, |s| s.apps.is_empty()).await;
    assert!(
        s.notices
            .iter()
            .any(|n| n.text.starts_with("descriptor left out: ") && n.text.contains("shop.yml:")),
        "{:?}",
        s.notices
    );
    if let Some(e) = h.close().await {
        e.shutdown().await;
    }
}

/// The console's handle, given manent.yml alone, reads the descriptors beside the engine's
/// start: the applications are listed, each one's live releases are read just after the first
/// screen, and a descriptor that does not load is said (a notice the console shows), not
/// silently left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_reads_descriptors_beside_the_engine_and_says_one_that_does_not_load() {
    let (dir, _) = config(&app("{}", ""));
    std::fs::write(
        dir.path().join("apps/broken.yml"),
        "application: broken\nartifact: {version: \"1\"\n",
    )
    .unwrap();
    let settings =
        Config::load_settings(&dir.path().join("manent.yml"), &manent::plugin::catalog()).unwrap();
    assert!(!settings.descriptors_read && settings.descriptors.is_empty());
    let op = Operator {
        name: "tester".into(),
        client: None,
    };
    let h = manent::engine::handle::open(settings, op).await.unwrap();
    let mut rx = h.snapshot.clone();
    let snap = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            let s = rx.borrow_and_update().clone();
            if s.apps.iter().any(|a| a.live_read) {
                return s;
            }
            rx.changed().await.unwrap();
        }
    })
    .await
    .expect("the live releases were read");
    let apps: Vec<String> = snap
        .apps
        .iter()
        .map(|a| format!("{}/{}", a.application, a.environment))
        .collect();
    assert_eq!(apps, ["shop/prod"]);
    let said: Vec<&str> = snap.notices.iter().map(|n| n.text.as_str()).collect();
    assert!(
        said.iter()
            .any(|t| t.starts_with("descriptor left out: ") && t.contains("broken.yml:")),
        "{said:?}"
    );
    if let Some(e) = h.close().await {
        e.shutdown().await;
    }
}
