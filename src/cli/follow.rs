//! Following a deployment from the command line: the engine runs here, or — when another
//! process holds the database — the work is handed to it and followed. Progress goes to
//! stderr, the summary to stdout, and the exit code says how the deployment ended.

mod lines;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

pub use self::lines::summary;
use self::lines::{hook_line, progress_line};
use super::exit;
use super::output::{self, Out};
use crate::config::Config;
use crate::deploy::records::Db;
use crate::deploy::state::{DeploymentState, Kind, Phase, TargetState, TargetState as T, Topic};
use crate::deploy::view::WorkflowStatus;
use crate::deploy::view::{DeploymentView, HookState};
use crate::engine::Engine;
use crate::engine::RuntimeEvent;
use crate::engine::attach::{Opened, open_or_attach};
use crate::engine::request::Requests;
use crate::operator::Operator;

/// Where deployments run: here, or in the engine that holds the database.
pub enum Runner {
    /// This process runs the engine.
    Local(Box<Engine>),
    /// Another process does; this one reads the database.
    Remote {
        store: Arc<dyn Db>,
        db: std::path::PathBuf,
        /// `manent.yml`, to run the engine here if that one stops before it takes the work.
        config_file: std::path::PathBuf,
    },
}

/// When this command began (epoch ms): a deployment's lines from before it are not said again.
static BEGAN: std::sync::OnceLock<i64> = std::sync::OnceLock::new();

/// Notes when this command began, before it sends anything: what moves after its command was
/// sent is said, even when an engine elsewhere acts on it before the follower starts.
pub fn mark_began() {
    BEGAN.get_or_init(crate::sys::now_ms);
}

impl Runner {
    /// Starts an engine here, or finds the one that holds the database.
    pub async fn start(config: &Config, out: &mut Out) -> Result<Runner, u8> {
        Self::start_for(config, None, out).await
    }

    /// [`Runner::start`] for the deployment `taking` (handed to an engine that stopped
    /// before it took it): that one is not said to be resumed, it never ran.
    async fn start_for(config: &Config, taking: Option<&str>, out: &mut Out) -> Result<Runner, u8> {
        BEGAN.get_or_init(crate::sys::now_ms);
        match open_or_attach(config).await {
            Ok(Opened::Here(engine)) => {
                // A deployment that waits for an operator where it parked (a gate, a failed
                // target) was not left unfinished: only the others are said.
                for id in engine
                    .recovered()
                    .iter()
                    .filter(|r| Some(r.as_str()) != taking)
                {
                    let parked = crate::deploy::view::load(engine.store().as_ref(), id)
                        .await
                        .ok()
                        .flatten()
                        .is_some_and(|v| {
                            use crate::deploy::state::DeploymentState as S;
                            matches!(v.state, S::Paused | S::CanaryPaused | S::FailedAwaiting)
                        });
                    if !parked {
                        out.note(format!(
                            "manent: resuming {id}, which an earlier run left unfinished"
                        ));
                    }
                }
                Ok(Runner::Local(engine))
            }
            Ok(Opened::Attached { store, holder }) => {
                // Beside a worker (or a console) this is how work is done, not a warning: one
                // line says who runs it.
                let who = crate::engine::attach::holder_named(&holder);
                out.note(format!(
                    "manent: {who} runs the work; handing the work to that engine and following it here"
                ));
                Ok(Runner::Remote {
                    store,
                    db: config.database.clone(),
                    config_file: config.file.clone(),
                })
            }
            Err(e) => {
                out.error(e);
                Err(exit::ENGINE)
            }
        }
    }

    /// The engine's requests, as `operator` makes them.
    pub fn requests<'a>(&'a self, config: &'a Config, operator: &'a Operator) -> Requests<'a> {
        match self {
            Runner::Local(e) => Requests::new(config, self.store(), operator, Some(&**e))
                .just_recovered(e.recovered()),
            Runner::Remote { .. } => Requests::new(config, self.store(), operator, None),
        }
    }

    /// The database.
    pub fn store(&self) -> &dyn Db {
        match self {
            Runner::Local(e) => e.store().as_ref(),
            Runner::Remote { store, .. } => store.as_ref(),
        }
    }

    /// Runs `id` here if it waits for an engine, and wakes it if it runs here.
    pub async fn run(&self, id: &str) {
        if let Runner::Local(e) = self {
            if let Err(err) = e.run(id).await {
                tracing::warn!(deployment = id, error = %err, "could not start");
            }
            e.wake(id);
        }
    }

    /// Stops the engine run here. `stopping` when the operator interrupted: runs stop at their
    /// next step boundary and steps in flight get a moment (an interrupted step is durable: the
    /// next engine reconciles it), so a Ctrl-C or SIGTERM ends this process within seconds in
    /// any phase. Otherwise the deployment this command followed has settled: deployments the
    /// engine resumed beside it do not hold the command — they go to a background worker; the
    /// one it followed until it `settled` is not among them. Returns how many runs were cut
    /// off and left for the next engine. A live canary is never left without a judge: once
    /// the engine stopped, the live canaries no engine runs go to a background worker (said).
    pub async fn finish(self, stopping: bool, settled: Option<&str>, out: &mut Out) -> usize {
        let Runner::Local(e) = self else {
            return 0;
        };
        let (config, store, ran) = (e.config().clone(), e.store().clone(), e.active());
        let left = Self::stop(*e, stopping, settled, out).await;
        if left.1 {
            return left.0;
        }
        let handed = crate::engine::judge::hand_over_unwatched(&config, store.as_ref(), &ran).await;
        if let Some(line) = crate::engine::judge::said(&handed) {
            out.note(line);
        }
        left.0
    }

    /// [`Runner::finish`] but for the canaries: how many runs were cut off, and whether a
    /// worker was started already (it runs whatever is left, live canaries too).
    async fn stop(
        e: crate::engine::Engine,
        stopping: bool,
        settled: Option<&str>,
        out: &mut Out,
    ) -> (usize, bool) {
        // Stopped by the operator, or nothing more can be recorded: nothing else is handed
        // over (a lost database has nothing to hand).
        if e.lost().is_some() {
            return (e.shutdown_within(Duration::ZERO, STOP_WITHIN).await, true);
        }
        if stopping {
            return (e.shutdown_within(Duration::ZERO, STOP_WITHIN).await, false);
        }
        // Runs parked for an operator drain at once; what still works (resumed beside the
        // deployment followed) must not hold this command. The deployment followed to where it
        // waits for an operator is not another's work, even if its run is a moment from parking
        // (its status says so before it parks): the drain waits for that.
        let going = e.going();
        let still_in_a_step = settled.is_some_and(|s| going.iter().any(|g| g == s));
        let others: Vec<String> = going
            .into_iter()
            .filter(|g| Some(g.as_str()) != settled)
            .collect();
        if others.is_empty() {
            if still_in_a_step {
                // What it followed settled while its run is still in a step (cancelled in the
                // middle of a call, or a moment from parking): stopped at once, the call in
                // flight cut when its plugin stops. Nothing of it is left to resume here.
                e.shutdown_within(Duration::ZERO, STOP_WITHIN).await;
                return (0, false);
            }
            // Its own deployment settled: what it ran goes on to where it waits (a run a moment
            // from parking parks).
            return (e.finish().await, false);
        }
        out.note(format!(
            "manent: handing {} (resumed by this engine) to a background worker",
            crate::deploy::state::names(&others)
        ));
        let file = e.config().file.clone();
        e.shutdown_within(Duration::ZERO, STOP_WITHIN).await;
        match crate::engine::judge::spawn_worker(&file) {
            Ok(pid) => out.note(format!(
                "manent: a background `manent worker` (pid {pid}) continues them; `manent status` \
                 shows them"
            )),
            Err(err) => out.note(format!(
                "manent: could not start a background worker ({err}); `manent resume ID` \
                 continues them"
            )),
        }
        (0, true)
    }
}

/// How long steps in flight get when this process stops its engine before it has finished:
/// what is cut off is durable, and the next engine reconciles it.
const STOP_WITHIN: Duration = Duration::from_secs(2);

/// How following ended.
enum Ending {
    /// The deployment ended, or waits for an operator's decision.
    Settled(Box<DeploymentView>),
    /// The operator interrupted this process (the engine here stops at a step boundary).
    Stopped,
    /// The operator interrupted following; the other engine goes on.
    Detached,
    /// The engine running it went away before the end.
    EngineGone,
    /// The database went away under the engine: nothing more could be recorded.
    Lost(String),
}

/// What the verb that follows expects, for its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// A deploy or rollback to its end.
    End,
    /// An abort: ending aborted is success.
    Abort,
    /// A deploy to its very end: a canary's pauses for an operator do not end following
    /// (`deploy --wait`).
    Finish,
    /// A canary's revert: ending reverted is success.
    Revert,
}

/// Runs `id` here if it waits for an engine, follows it until it settles, prints the summary,
/// stops the engine run here, and returns the exit code.
pub async fn to_end(
    runner: Runner,
    id: &str,
    verbose: bool,
    json: bool,
    expect: Expect,
    out: &mut Out,
) -> u8 {
    follow_to_end(runner, id, (verbose, json, expect), true, out).await
}

/// [`to_end`]; `may_take_over`: once, a deployment handed to an engine that stopped before
/// taking it runs here.
async fn follow_to_end(
    runner: Runner,
    id: &str,
    (verbose, json, expect): (bool, bool, Expect),
    may_take_over: bool,
    out: &mut Out,
) -> u8 {
    let Some(mut signals) = Signals::new() else {
        out.error("cannot watch for Ctrl-C and SIGTERM");
        return exit::ENGINE;
    };
    let mut trouble = Trouble::default();
    let ending = {
        // Claiming it may wait on a database that refuses writes: Ctrl-C still stops that.
        let run = runner.run(id);
        tokio::pin!(run);
        loop {
            tokio::select! {
                () = &mut run => break None,
                () = tokio::time::sleep(Duration::from_millis(200)) => trouble.update(&runner, out),
                stop = signals.recv() => if stop { break Some(stop_or_detach(&runner)) },
            }
        }
    };
    let ending = match ending {
        Some(e) => e,
        None => {
            let mut watch = Watch {
                signals: &mut signals,
                trouble: &mut trouble,
            };
            follow(&runner, id, verbose, expect, &mut watch, out).await
        }
    };
    if matches!(ending, Ending::EngineGone)
        && may_take_over
        && let Runner::Remote { config_file, db, .. } = &runner
        && left_untaken(runner.store(), id).await
        && let Some(config) = output::load_settings(config_file, out)
        // manent.yml read again must still name the database the deployment is in.
        && config.database == *db
    {
        // Handed to an engine that stopped before it took the work (a background worker that
        // found nothing left to do a moment before): the database is free, so it runs here.
        out.note(format!(
            "manent: the engine {id} was handed to stopped before taking it; running it here"
        ));
        drop(runner);
        let started = tokio::select! {
            started = Runner::start_for(&config, Some(id), out) => started,
            stop = signals.recv() => if stop { Err(exit::INTERRUPTED) } else { Err(exit::ENGINE) },
        };
        return match started {
            Ok(here) => {
                Box::pin(follow_to_end(here, id, (verbose, json, expect), false, out)).await
            }
            Err(code) => code,
        };
    }
    let code = match &ending {
        Ending::Settled(v) => {
            summary(v, json, out);
            code_of(v, expect)
        }
        Ending::Stopped => {
            out.note("manent: stopping: in-flight targets finish and are recorded (Ctrl-C again to quit at once)");
            exit::INTERRUPTED
        }
        Ending::Detached => {
            out.note(format!(
                "manent: {id} goes on in the other engine; `manent status {id}` shows it"
            ));
            exit::INTERRUPTED
        }
        Ending::EngineGone => {
            out.note(format!(
                "manent: the engine running {id} stopped before the end; `manent resume {id}` continues it"
            ));
            exit::INTERRUPTED
        }
        Ending::Lost(why) => {
            out.error(format!("{id} did not finish here: {why}"));
            exit::ENGINE
        }
    };
    if matches!(ending, Ending::Stopped)
        && let Runner::Local(e) = &runner
    {
        e.exit_on_second_signal(i32::from(exit::INTERRUPTED));
    }
    let store: Option<Arc<dyn Db>> = match &runner {
        Runner::Local(e) => Some(e.store().clone()),
        Runner::Remote { .. } => None,
    };
    let followed = matches!(ending, Ending::Settled(_)).then_some(id);
    let left = runner
        .finish(matches!(ending, Ending::Stopped), followed, out)
        .await;
    if left > 0 && !matches!(ending, Ending::Lost(_)) {
        out.note(format!(
            "manent: {left} deployment(s) were still running; they resume at the next start"
        ));
    }
    if matches!(ending, Ending::Stopped) {
        // What was in flight when the operator stopped may have taken the deployment to its
        // end: say what the database says, not what was asked.
        let after = match &store {
            Some(s) => crate::deploy::view::load(s.as_ref(), id)
                .await
                .ok()
                .flatten(),
            None => None,
        };
        if let Some(v) = after.filter(|v| settled(v, expect)) {
            summary(&v, json, out);
            return code_of(&v, expect);
        }
        out.note(format!(
            "manent: {id} stopped; `manent resume {id}` continues it"
        ));
    }
    code
}

/// Work handed to an engine that stopped before taking it: a deployment still waiting for its
/// first engine, or a live one with a command in its mailbox no engine took (a background
/// worker that found nothing to do exits just as the command arrives).
async fn left_untaken(store: &dyn Db, id: &str) -> bool {
    match crate::deploy::view::load(store, id).await.ok().flatten() {
        Some(v) => {
            v.status == WorkflowStatus::Enqueued
                || (v.status == WorkflowStatus::Pending && !v.pending_commands.is_empty())
        }
        None => false,
    }
}

/// The exit code of a settled deployment.
pub(super) fn code_of(v: &DeploymentView, expect: Expect) -> u8 {
    use DeploymentState as D;
    match v.state {
        D::Deployed | D::DeployedWithSkips | D::Planned | D::Passed => exit::OK,
        D::RolledBack if v.kind == Kind::Rollback => exit::OK,
        D::RolledBack => exit::ROLLED_BACK,
        D::Aborted if expect == Expect::Abort => exit::OK,
        D::Aborted | D::Cancelled | D::Cancelling => exit::CANCELLED,
        D::Failed | D::FailedAwaiting => exit::FAILED,
        D::CanaryPaused => exit::CANARY_WAITS,
        D::Reverted if expect == Expect::Revert => exit::OK,
        D::Reverted if v.reverted_automatically() => exit::ROLLED_BACK,
        D::Reverted => exit::CANCELLED,
        D::DeadLettered => exit::ENGINE,
        D::Interrupted | D::Queued | D::Running | D::Paused => exit::INTERRUPTED,
    }
}

/// Settled: finished, or waiting for a decision nobody in this process can make (a decision
/// already in its mailbox, which it takes there, will move it on).
pub(super) fn settled(v: &DeploymentView, expect: Expect) -> bool {
    let decided = v
        .pending_commands
        .iter()
        .any(|c| Topic::parse(c).is_some_and(|t| v.takes(t)));
    // While it acts on a command it takes nothing (`accepts` is empty): not settled yet.
    let parked = match v.state {
        DeploymentState::FailedAwaiting => true,
        DeploymentState::CanaryPaused => expect != Expect::Finish,
        _ => false,
    };
    let waiting = parked && !v.accepts.is_empty();
    !v.status.is_live() || (waiting && !decided)
}

/// What a follower watches besides the deployment: Ctrl-C and SIGTERM, and the database's and
/// the engine's trouble.
struct Watch<'a> {
    signals: &'a mut Signals,
    trouble: &'a mut Trouble,
}

/// A hook's run as said once: its event, name, state and attempt.
fn hook_key(h: &crate::deploy::view::HookView) -> String {
    format!("{}:{}:{}:{}", h.event, h.name, h.state.as_str(), h.attempt)
}

/// Prints progress on stderr until the deployment settles, the user stops it, or its engine
/// goes.
async fn follow(
    runner: &Runner,
    id: &str,
    verbose: bool,
    expect: Expect,
    watch: &mut Watch<'_>,
    out: &mut Out,
) -> Ending {
    let Watch { signals, trouble } = watch;
    let mut shown: HashMap<String, (TargetState, u32)> = HashMap::new();
    let mut shown_hooks: std::collections::HashSet<String> = std::collections::HashSet::new();
    // Where its hooks stood when following began is not said again; its targets' lines are
    // said for what moved since this command began (a `weight` on a canary reprinted its 36
    // targets' lines).
    if let Ok(Some(v)) = crate::deploy::view::load(runner.store(), id).await {
        for h in v.hooks.iter().filter(|h| h.state != HookState::Pending) {
            shown_hooks.insert(hook_key(h));
        }
    }
    let began_ms = BEGAN.get().copied().unwrap_or(0);
    let mut phase: Option<Phase> = None;
    let mut log_after = 0i64;
    // Lines that belong to no deployment (a plugin starting, restarting): only from now on.
    let engine_lines_after = runner.store().last_log_id().await.unwrap_or(0);
    let mut elsewhere: Option<String> = None;
    // The engine here says when anything moved: the deployment is read again at once, not at
    // the next tick (which stays, for an engine elsewhere and for the database's own changes).
    let mut moved = match runner {
        Runner::Local(e) => Some(e.events()),
        Runner::Remote { .. } => None,
    };
    // An engine elsewhere: its commits move the database's change counter.
    let mut version = None;
    // Since when this engine has not run the deployment it owns (see below).
    let mut adrift: Option<std::time::Instant> = None;
    loop {
        let began = std::time::Instant::now();
        if let Runner::Local(e) = runner
            && let Some(why) = e.lost()
        {
            return Ending::Lost(why);
        }
        let store = runner.store();
        let view = crate::deploy::view::load(store, id).await.ok().flatten();
        if let Some(v) = &view {
            for t in &v.targets {
                let key = (t.state, t.attempt);
                // Settled before this command began: already said, by whatever ran it.
                let before = t
                    .attempts
                    .last()
                    .and_then(|a| a.ended_at)
                    .is_some_and(|at| at < began_ms);
                if shown.get(&t.name) != Some(&key) && t.state != T::Pending && !before {
                    out.note(progress_line(v, t));
                }
                shown.insert(t.name.clone(), key);
            }
            for h in &v.hooks {
                if h.state != HookState::Pending && shown_hooks.insert(hook_key(h)) {
                    out.note(hook_line(h));
                }
            }
            // Batches show in the target lines; the phases worth a line of their own are waits.
            if v.phase != phase {
                if let Some(p) = v.phase.as_ref().filter(|p| {
                    matches!(
                        p,
                        Phase::Validating
                            | Phase::Paused { .. }
                            | Phase::Waiting { .. }
                            | Phase::Undoing
                            | Phase::Slots
                            | Phase::Canary { .. }
                            | Phase::Promoting
                            | Phase::Reverting
                    )
                }) {
                    out.note(format!("  {p}"));
                }
                phase.clone_from(&v.phase);
            }
        }
        if let Ok(lines) = store
            .logs(id, log_after, Some(engine_lines_after), 1000)
            .await
        {
            let began = BEGAN.get().copied().unwrap_or(0);
            for l in lines {
                log_after = l.id;
                // What earlier commands and engines said is in `manent logs`, not said again:
                // a line older than this command by its clock and in the database before this
                // follow began (another host's clock may lag; its new lines come later).
                if l.at < began && l.id <= engine_lines_after {
                    continue;
                }
                // Every analysis run is said as it happens, with its numbers: what the operator
                // trusts a promote to.
                let analysis = l.source == crate::deploy::flows::canary::ANALYSIS;
                if verbose || analysis || l.level == "warn" || l.level == "error" {
                    let who = l.target.map(|t| format!("{t}: ")).unwrap_or_default();
                    out.note(format!("    {} [{}] {who}{}", l.level, l.source, l.message));
                }
            }
        }
        if let Some(v) = view
            && settled(&v, expect)
        {
            // Another engine may have taken it over and finished it before this one (back
            // from a pause past its lease) looked: said all the same, it is why nothing here
            // ran the end.
            if let Runner::Local(e) = runner
                && elsewhere.is_none()
                && let Some(owner) =
                    crate::engine::attach::owner_elsewhere(store, id, e.config(), false).await
            {
                out.note(took_over(&owner, id, true));
            }
            return Ending::Settled(Box::new(v));
        }
        trouble.update(runner, out);
        // The engine we handed the work to has gone if its lease is free — unless it settled
        // the deployment just before it went (a worker that exits once nothing goes on).
        if let Runner::Remote { db, .. } = runner
            && !crate::engine::attach::is_held(db)
        {
            return match crate::deploy::view::load(store, id).await.ok().flatten() {
                Some(v) if settled(&v, expect) => Ending::Settled(Box::new(v)),
                _ => Ending::EngineGone,
            };
        }
        if let Runner::Local(e) = runner
            && !e.runs(id)
            && let Some(why) = e.check_lost().await
        {
            return Ending::Lost(why);
        }
        if let Runner::Local(e) = runner
            && !e.runs(id)
            && status(store, id).await == Some(WorkflowStatus::Pending)
        {
            // On a shared database, another engine may run it now (it took it over when this
            // one's lease expired): follow it there.
            match crate::engine::attach::owner_elsewhere(store, id, e.config(), true).await {
                Some(owner) => {
                    adrift = None;
                    if elsewhere.as_ref() != Some(&owner.executor_id) {
                        out.note(took_over(&owner, id, false));
                        elsewhere = Some(owner.executor_id);
                    }
                }
                // Nobody else: this engine's run stopped when its lease lapsed, and it takes
                // it back once it renews. Gone only when it has not within a lease and 2s.
                None => {
                    let since = *adrift.get_or_insert_with(std::time::Instant::now);
                    if since.elapsed() > e.config().engine.lease + Duration::from_secs(2) {
                        return Ending::EngineGone;
                    }
                }
            }
        } else {
            adrift = None;
        }
        let took = began.elapsed();
        // No more than half of a core goes to reading: a read of a large fleet's deployment
        // waits as long again before the next, woken or not (the engine shares this process).
        tokio::select! {
            () = tokio::time::sleep(took.max(Duration::from_millis(200))) => {}
            () = async {
                match &moved {
                    Some(_) => next_event(&mut moved, id).await,
                    None => next_change(store, &mut version).await,
                }
                tokio::time::sleep(took).await;
            } => {}
            stop = signals.recv() => if stop { return stop_or_detach(runner) },
        }
    }
}

/// The next commit another process made to the database, seen by its change counter (a cheap
/// read, every 25 ms).
async fn next_change(store: &dyn Db, last: &mut Option<i64>) {
    loop {
        if let Ok(now) = store.data_version().await
            && last.replace(now).is_some_and(|before| before != now)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The next thing the engine here did to deployment `id` (a lagging reader has missed some:
/// it reads anyway), with what else is already waiting drained; never, without an engine.
async fn next_event(events: &mut Option<tokio::sync::broadcast::Receiver<RuntimeEvent>>, id: &str) {
    use tokio::sync::broadcast::error::RecvError;
    let Some(rx) = events else {
        return std::future::pending().await;
    };
    loop {
        match rx.recv().await {
            Ok(e) if e.workflow_id() != id => continue,
            Ok(_) | Err(RecvError::Lagged(_)) => break,
            Err(RecvError::Closed) => {
                *events = None;
                return;
            }
        }
    }
    while rx.try_recv().is_ok() {}
}

/// `manent: engine host-b (pid 42 on b) runs dep-… now: it took the deployment over from
/// this engine; following it there` (or, once it `finished` it, `ran dep-… to its end`).
fn took_over(owner: &crate::engine::attach::Owner, id: &str, finished: bool) -> String {
    let (did, then) = if finished {
        ("ran", "to its end")
    } else {
        ("runs", "now")
    };
    format!(
        "manent: engine {} (pid {} on {}) {did} {id} {then}: it took the deployment over from \
         this engine{}",
        owner.executor_id,
        owner.pid,
        owner.host,
        if finished { "" } else { "; following it there" }
    )
}

/// Ctrl-C and SIGTERM, which stop following; SIGHUP, which does not (a dropped ssh session
/// must not stop a deploy).
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Option<Self> {
        Some(Signals {
            int: signal(SignalKind::interrupt()).ok()?,
            term: signal(SignalKind::terminate()).ok()?,
            hup: signal(SignalKind::hangup()).ok()?,
        })
    }

    /// The next signal: `true` for one that stops, `false` for a hangup (kept going, quietly).
    async fn recv(&mut self) -> bool {
        tokio::select! {
            _ = self.int.recv() => true,
            _ = self.term.recv() => true,
            _ = self.hup.recv() => false,
        }
    }
}

/// What the deployment waits for while the database refuses writes, said when it starts, every
/// 10 retries, and when it ends.
#[derive(Default)]
struct Trouble(Option<String>);

impl Trouble {
    fn update(&mut self, runner: &Runner, out: &mut Out) {
        let Runner::Local(e) = runner else { return };
        let now = e.store_trouble();
        let changed = match (&now, &self.0) {
            (Some(n), Some(t)) => retry_of(n) / 10 != retry_of(t) / 10,
            (a, b) => a.is_some() != b.is_some(),
        };
        if changed {
            match &now {
                Some(t) => out.note(format!("  waiting: {t}")),
                None => out.note("  the database takes writes again; going on"),
            }
        }
        self.0 = now;
    }
}

/// `retry N` in a trouble line.
fn retry_of(t: &str) -> u32 {
    t.rsplit_once("retry ")
        .and_then(|(_, r)| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

async fn status(store: &dyn Db, id: &str) -> Option<WorkflowStatus> {
    store.workflow(id).await.ok().flatten().map(|r| r.status)
}

fn stop_or_detach(runner: &Runner) -> Ending {
    match runner {
        Runner::Local(_) => Ending::Stopped,
        Runner::Remote { .. } => Ending::Detached,
    }
}
