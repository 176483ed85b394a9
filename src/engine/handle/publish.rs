//! What a console is shown: the snapshot read from the database (deployments, applications with
//! their live releases, the journal, locks, who runs what on a shared database) and the log lines
//! tailed from it.

use std::sync::Arc;

use super::{Actor, AppEnv, Owner, Snapshot};
use crate::config::Config;
use crate::deploy::plan::Plan;
use crate::deploy::records::LogRecord;
use crate::deploy::releases::{self, Transitions};
use crate::deploy::view;
use crate::engine::Engine;
use crate::plugin::{Level, LogLine};
use crate::workflow::store::WorkflowQuery;

impl Actor {
    /// On a shared database (one read of the engines): who runs each live deployment, and
    /// this console's engine id with how many engines are alive. Nothing on SQLite, where one
    /// engine runs them all.
    pub(super) async fn shared_view(
        &self,
        rows: &[(String, String)],
    ) -> (
        std::collections::BTreeMap<String, Owner>,
        Option<(String, usize)>,
    ) {
        let mut owners = std::collections::BTreeMap::new();
        if self.config.postgres.is_none() {
            return (owners, None);
        }
        let engines = self.store.engines().await.unwrap_or_default();
        let lease = self.config.engine.lease_ms();
        for (id, executor) in rows {
            let found = engines.iter().find(|e| &e.executor_id == executor);
            let silent = found.is_none_or(|e| !e.alive(lease));
            let detail = match found {
                Some(e) if !silent => format!("pid {} on {}", e.pid, e.host),
                Some(e) => format!(
                    "pid {} on {}, silent for {}s: another engine takes it over",
                    e.pid,
                    e.host,
                    e.age_ms / 1000
                ),
                None => "not registered".to_owned(),
            };
            owners.insert(
                id.clone(),
                Owner {
                    engine: executor.clone(),
                    detail,
                    silent,
                },
            );
        }
        let alive = engines.iter().filter(|e| e.alive(lease)).count();
        (
            owners,
            Some((self.config.engine.executor_id.clone(), alive)),
        )
    }

    /// Attached (or on a shared database): log lines arrive through the database.
    pub(super) async fn poll_logs(&mut self) {
        let Ok(lines) = self.store.recent_logs(self.log_cursor, 5000).await else {
            return;
        };
        for l in lines {
            self.log_cursor = l.id;
            let _ = self.logs.send(Arc::new(line_of(l)));
        }
    }

    /// Each application's versions, live releases and what a rollback would move, from its
    /// releases; false when a read failed (that application keeps what was read before, and
    /// all are read again at the next refresh).
    async fn read_releases(&mut self) -> bool {
        let mut apps = std::mem::take(&mut self.apps);
        let mut read = true;
        for (a, plan) in apps.iter_mut().zip(&self.plans) {
            let subject = format!("{}/{}", a.application, a.environment);
            let Ok(rows) = self.store.releases(&subject).await else {
                read = false;
                continue;
            };
            a.live_read = true;
            let mut versions: Vec<String> = Vec::new();
            for r in rows.iter().rev() {
                if !versions.contains(&r.version) {
                    versions.push(r.version.clone());
                }
            }
            a.versions = versions;
            let live = releases::live(rows);
            a.live_by_target = live
                .iter()
                .filter_map(|(m, l)| {
                    let name = m.rsplit("::").next().unwrap_or(m).to_owned();
                    l.current.as_ref().map(|c| (name, c.version.clone()))
                })
                .collect();
            a.live = a.live_by_target.values().cloned().collect();
            a.live.sort();
            a.live.dedup();
            a.rollback = plan
                .as_ref()
                .map(|plan| Transitions::of_rollback(plan, &live))
                .unwrap_or_default();
            a.rollback_stays = plan
                .as_ref()
                .map(|plan| releases::staying_in_rollback(plan, &live))
                .unwrap_or_default();
        }
        self.apps = apps;
        read
    }

    /// Sends a new snapshot if anything changed; true when something is left to read at once
    /// (the live releases, after the first screen).
    pub(super) async fn publish(&mut self) -> bool {
        let rows = match self
            .store
            .workflows(WorkflowQuery {
                subject: None,
                live_only: false,
                limit: 30,
                heads: true,
            })
            .await
        {
            Ok(rows) => rows,
            Err(e) => {
                // Not "no deployments": what it said last stays on screen, with why it is old.
                let trouble = Some(format!(
                    "the database cannot be read: {} — showing what it said last, retrying ({})",
                    e.cause(),
                    self.store.describe()
                ));
                let mut snap = (**self.snap.borrow()).clone();
                if snap.store_trouble != trouble {
                    snap.store_trouble = trouble;
                    self.seq += 1;
                    snap.seq = self.seq;
                    self.snap.send_replace(Arc::new(snap));
                }
                return false;
            }
        };
        self.finished
            .retain(|id, _| rows.iter().any(|r| &r.id == id));
        let rows_owners: Vec<(String, String)> = rows
            .iter()
            .filter(|r| r.status == crate::workflow::store::WorkflowStatus::Pending)
            .filter_map(|r| Some((r.id.clone(), r.executor_id.clone()?)))
            .collect();
        let (owners, shared) = self.shared_view(&rows_owners).await;
        let releases_at: Vec<(String, i64)> =
            rows.iter().map(|r| (r.id.clone(), r.updated_at)).collect();
        let releases_moved = rows.iter().any(|r| r.status.is_live())
            || self.releases_read.as_ref() != Some(&releases_at);
        let mut deployments = Vec::with_capacity(rows.len());
        for r in rows {
            let whole = self.shown.contains(&r.id);
            if let Some((v, depth)) = self.finished.get(&r.id)
                && (!whole || *depth == Depth::Whole)
            {
                deployments.push(v.clone());
                continue;
            }
            let terminal = r.status.is_terminal();
            // A live deployment is read whole (its screen and keys act on its targets); a
            // finished one as a list reads it until it is shown.
            let depth = if terminal && !whole {
                Depth::Summary
            } else {
                Depth::Whole
            };
            let read = match depth {
                Depth::Summary => view::summary_of_row(self.store.as_ref(), r).await,
                Depth::Whole => view::of_row(self.store.as_ref(), r).await,
            };
            if let Ok(v) = read {
                if terminal {
                    self.finished.insert(v.id.clone(), (v.clone(), depth));
                }
                deployments.push(v);
            }
        }
        // Live ones first: they are what an operator acts on.
        deployments.sort_by_key(|d| (!d.status.is_live(), std::cmp::Reverse(d.created_at)));
        let journal = self
            .store
            .journal_entries(None, None, 50)
            .await
            .unwrap_or_default();
        let parked = self.store.parked(20).await.unwrap_or_default();
        // Read at every refresh, so an expired lock stops showing by itself.
        let locks = self
            .store
            .locks(crate::sys::now_ms())
            .await
            .unwrap_or_default();
        // The first screen (nothing published yet) comes before the live releases (a fleet's
        // 100,000 releases and its rollback plan take a third of a second): their column says
        // they are being read.
        let later = releases_moved && self.seq == 0;
        if releases_moved && !later {
            self.releases_read = self.read_releases().await.then_some(releases_at);
        }
        let mut apps = self.apps.clone();
        for a in &mut apps {
            let subject = format!("{}/{}", a.application, a.environment);
            a.lock = locks.iter().find(|l| l.subject == subject).cloned();
        }
        let mut snap = Snapshot {
            seq: self.seq,
            mode: Some(self.mode.clone()),
            database: self.config.database.clone(),
            operator: self.operator.display(),
            apps,
            deployments,
            journal,
            notices: self.notices.clone(),
            problems: self.problems.clone(),
            store_trouble: self.engine.as_ref().and_then(Engine::store_trouble),
            owners,
            shared,
            engine_note: self.engine_note.clone(),
            unclaimed: self.submitted.iter().map(|(id, _, _)| id.clone()).collect(),
            parked,
        };
        // Nothing new: no snapshot, so the console does not redraw.
        if **self.snap.borrow() == snap {
            return later;
        }
        self.seq += 1;
        snap.seq = self.seq;
        self.snap.send_replace(Arc::new(snap));
        later
    }
}

/// How much of a finished deployment the console read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Depth {
    /// As a list reads it: no target, attempt or hook.
    Summary,
    /// Every target, attempt and hook (it was shown on its own screen).
    Whole,
}

/// Each application and environment as the configuration describes it (no live releases yet),
/// with its plan (where a rollback would go is read against it: computed once, not at every
/// read of the releases).
pub(super) fn apps_of(
    config: &Config,
    marks: &super::descriptors::Marks,
) -> Vec<(AppEnv, Option<Plan>)> {
    let mut out = Vec::new();
    for d in &config.descriptors {
        for env in d.spec.environments.keys() {
            let Ok(spec) = config.environment(&d.spec.application, env) else {
                continue;
            };
            let plan = crate::deploy::plan::compute(&spec).ok();
            let batches = plan
                .iter()
                .flat_map(|p| &p.batches)
                .map(|b| b.targets.iter().map(|t| t.name.clone()).collect())
                .collect();
            let app = AppEnv {
                application: spec.application.clone(),
                environment: spec.environment.clone(),
                production: spec.production,
                plugin: spec.plugin_said(),
                version: spec.artifact.version.clone(),
                strategy: spec.strategy.short(),
                targets: spec.targets.len(),
                live_read: false,
                live: Vec::new(),
                batches,
                live_by_target: std::collections::BTreeMap::new(),
                rollback: Transitions::default(),
                rollback_stays: Vec::new(),
                versions: Vec::new(),
                tests: crate::config::hooks::ordered(&spec.hooks, crate::config::Event::Test)
                    .iter()
                    .map(|h| h.name.clone())
                    .collect(),
                lock: None,
                file: d
                    .file
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                read: marks.get(&d.file),
            };
            out.push((app, plan));
        }
    }
    out
}

/// A stored log line as a live one.
pub(super) fn line_of(l: LogRecord) -> LogLine {
    LogLine {
        at: l.at,
        level: Level::parse(&l.level).unwrap_or(Level::Info),
        source: l.source,
        deployment_id: l.workflow_id,
        target: l.target,
        moniker: None,
        message: l.message,
        attrs: l
            .attrs
            .and_then(|a| serde_json::from_str(&a).ok())
            .unwrap_or_default(),
    }
}
