//! One request API for what an operator asks of the engine: start a deploy, a dry run, a
//! rollback or the test hooks, take a canary's leftover candidate out of traffic, and steer a
//! deployment with an [`OperatorCommand`]. The headless verbs and the console both ask through
//! it and only present the answers; running what was recorded stays theirs (the CLI claims it
//! under its signal watch, the console hands it to its engine or watches another one claim it).

use super::Engine;
use crate::config::{Config, EnvSpec};
use crate::deploy::command::{self, Acted, CommandError, OperatorCommand};
use crate::deploy::records::Db;
use crate::deploy::state::Kind;
use crate::deploy::submit::{self, Submission, SubmitError, Submitted};
use crate::operator::Operator;
use crate::workflow::store::Record;

/// What is started on an application's environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<'a> {
    /// The spec's version, rolling or canary as its strategy says.
    Deploy,
    /// The same, without changing anything.
    DryRun,
    /// Every target back to its previous release.
    Rollback,
    /// The `test` hooks, against what is live or against the candidate of canary `candidate`.
    Test {
        /// The canary whose candidate is tested (through its testers' route).
        candidate: Option<&'a str>,
    },
}

impl Request<'_> {
    /// The deployment kind it starts (a deploy whose strategy is a canary is still asked as a
    /// deploy).
    pub fn kind(self) -> Kind {
        match self {
            Request::Deploy => Kind::Deploy,
            Request::DryRun => Kind::DryRun,
            Request::Rollback => Kind::Rollback,
            Request::Test { .. } => Kind::Test,
        }
    }
}

/// Who asks, and why.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    /// Their reason, journaled.
    pub reason: Option<&'a str>,
    /// Through a deploy lock (a break-glass: needs a reason, and is journaled).
    pub force: bool,
}

/// The engine as an operator's requests reach it: the database, who asks, and the engine when
/// it runs in this process (it is woken at once; one elsewhere notices through the database).
pub struct Requests<'a> {
    config: &'a Config,
    store: &'a dyn Db,
    operator: &'a Operator,
    here: Option<&'a Engine>,
    recovered: &'a [String],
}

impl<'a> Requests<'a> {
    /// Requests by `operator` on `store`, and on `here` when the engine runs in this process.
    pub fn new(
        config: &'a Config,
        store: &'a dyn Db,
        operator: &'a Operator,
        here: Option<&'a Engine>,
    ) -> Self {
        Requests {
            config,
            store,
            operator,
            here,
            recovered: &[],
        }
    }

    /// What the engine here resumed as it started, a moment ago: a deploy asked again that is
    /// one of them follows it rather than racing it with a second (a command run again after
    /// a crash). Not for a console, whose engine started long before.
    pub fn just_recovered(mut self, ids: &'a [String]) -> Self {
        self.recovered = ids;
        self
    }

    fn submission(&self, asked: Asked<'a>) -> Submission<'a> {
        let mut sub = Submission::new(self.operator, asked.reason, &self.config.engine);
        sub.force = asked.force;
        sub
    }

    /// Records `request` on `spec`: a new deployment, or the same one resumed (interrupted, or
    /// just recovered by the engine here) or retried (it failed on targets and waits for a
    /// decision). A deploy lock, a busy environment, nothing to roll back and an untestable
    /// canary are refused here, before anything is recorded.
    pub async fn start(
        &self,
        spec: &EnvSpec,
        request: Request<'_>,
        asked: Asked<'a>,
    ) -> Result<Submitted, SubmitError> {
        let chosen = match request {
            Request::Deploy | Request::DryRun => self.choose_plugin(spec).await?,
            // Rolled back by the plugin that deployed what is live.
            Request::Rollback => self.plugin_of_live(spec).await,
            // Test hooks call no plugin.
            Request::Test { .. } => spec.clone(),
        };
        let spec = &chosen;
        let sub = self.submission(asked);
        match request {
            Request::Deploy | Request::DryRun => {
                let dry_run = request == Request::DryRun;
                match submit::resumed_same(self.store, self.recovered, spec, dry_run).await {
                    Some(id) => Ok(Submitted::Resuming(id)),
                    None => submit::deploy(self.store, spec, dry_run, &sub).await,
                }
            }
            Request::Rollback => match self.rollback_how(spec).await? {
                None => submit::rollback(self.store, spec, &sub).await,
                Some(back) => {
                    let reason = format!(
                        "rollback: traffic switched back to {} (blue/green){}",
                        back.artifact.version,
                        asked.reason.map(|r| format!("; {r}")).unwrap_or_default()
                    );
                    let mut sub = sub;
                    sub.reason = Some(&reason);
                    submit::deploy(self.store, &back, false, &sub).await
                }
            },
            Request::Test { candidate } => submit::test(self.store, spec, &sub, candidate).await,
        }
    }

    /// `spec` with the plugin of the deployment that made its live releases, when it names
    /// `deploy.plugins` (and it is one of them); `spec` as it is otherwise.
    async fn plugin_of_live(&self, spec: &EnvSpec) -> EnvSpec {
        let mut out = spec.clone();
        if spec.plugins.is_empty() {
            return out;
        }
        let Ok(moves) = submit::rollback_moves(self.store, spec).await else {
            return out;
        };
        let Some(by) = moves.first().map(|m| m.from.deployment_id.clone()) else {
            return out;
        };
        let deployed_with = match self.store.workflow(&by).await {
            Ok(Some(row)) => serde_json::from_str::<crate::deploy::DeployInput>(&row.inputs)
                .ok()
                .map(|i| i.spec.plugin),
            _ => None,
        };
        if let Some(plugin) = deployed_with.filter(|p| spec.plugins.contains(p)) {
            out.chosen = Some(format!("{plugin} deployed the live release ({by})"));
            out.plugin = plugin;
        }
        out
    }

    /// `spec` with its plugin chosen from `deploy.plugins` (asked by the engine here, or by a
    /// registry started for that and stopped after); `spec` when it names one plugin.
    async fn choose_plugin(&self, spec: &EnvSpec) -> Result<EnvSpec, SubmitError> {
        if spec.plugins.is_empty() {
            return Ok(spec.clone());
        }
        let chosen = match self.here {
            Some(engine) => crate::deploy::select::choose(engine.registry(), spec).await,
            None => {
                let registry = crate::plugin::Registry::new(
                    self.config,
                    std::sync::Arc::new(crate::plugin::logger::Discard),
                );
                let chosen = crate::deploy::select::choose(&registry, spec).await;
                registry.shutdown().await;
                chosen
            }
        };
        chosen.map_err(|e| SubmitError::BadInput(format!("{e}; nothing was started")))
    }

    /// How a rollback goes back: `None` in place (the plugin rolls targets back); on a router
    /// (slots and a traffic router), the release before as a canary that switches all
    /// traffic to it at once (blue/green: it is usually still in the other slot). A rollback
    /// neither can make is refused before anything is journaled, saying what to do instead.
    /// (The plugin is asked by this process's engine, which runs it next; else it is started
    /// for that and stopped after.)
    async fn rollback_how(&self, spec: &EnvSpec) -> Result<Option<EnvSpec>, SubmitError> {
        let caps = match self.here {
            Some(engine) => engine.registry().get(&spec.plugin).await,
            None => {
                let registry = crate::plugin::Registry::new(
                    self.config,
                    std::sync::Arc::new(crate::plugin::logger::Discard),
                );
                let got = registry.get(&spec.plugin).await;
                registry.shutdown().await;
                got
            }
        }
        .map(|h| h.capabilities.clone())
        .map_err(|e| SubmitError::BadInput(e.to_string()))?;
        if caps.can_roll_back() {
            return Ok(None);
        }
        let moves = submit::rollback_moves(self.store, spec).await?;
        if moves.is_empty() {
            // Nothing to go back to: said as such by the submission.
            return Ok(None);
        }
        let previous = moves
            .first()
            .map_or_else(String::new, |m| m.to.version.clone());
        let (app, env) = (&spec.application, &spec.environment);
        let router = caps.has(crate::plugin::Capability::Slots)
            && caps.has(crate::plugin::Capability::TrafficRouter);
        let slot = self
            .store
            .slots(&spec.subject())
            .await
            .ok()
            .flatten()
            .filter(|s| s.candidate_version == previous && !s.candidate.is_empty())
            .map(|s| format!(" (manent's records: it is still in slot {})", s.candidate))
            .unwrap_or_default();
        if router && let Some(back) = switch_back(spec, &moves) {
            return Ok(Some(back));
        }
        let how = if router {
            format!(
                "plugin {} routes traffic between two slots and cannot roll targets back in place; \
                 {previous} is the release before{slot}: go back to it as a canary — `manent \
                 deploy {app} {env} --version {previous}`, then `manent promote --full ID` once \
                 it looks right",
                spec.plugin
            )
        } else {
            format!(
                "plugin {} cannot roll back (it announces [{caps}]; a rollback needs \
                 current_release and rollback): deploy the release before instead — `manent \
                 deploy {app} {env} --version {previous}`",
                spec.plugin
            )
        };
        Err(SubmitError::BadInput(format!("{how}; nothing was started")))
    }

    /// Starts the run that takes out of traffic the candidate canary `of` left there when it
    /// was abandoned.
    pub async fn revert_left(&self, of: &str, asked: Asked<'a>) -> Result<Submitted, SubmitError> {
        submit::revert_left(self.store, of, &self.submission(asked)).await
    }

    /// Whether `spec` may be started as asked: refused when it is locked and this is not a
    /// break-glass with a reason; the break-glass journal entry when it is one (empty when
    /// nothing is locked).
    pub async fn through_lock(
        &self,
        spec: &EnvSpec,
        what: &str,
        asked: Asked<'a>,
    ) -> Result<Vec<Record>, SubmitError> {
        submit::through_lock(self.store, spec, what, &self.submission(asked)).await
    }

    /// Sends `cmd` to deployment `id`; the engine here is woken at once, and starts it again
    /// when the command queued it (a stopped deployment resumed).
    pub async fn operate(
        &self,
        id: &str,
        cmd: &OperatorCommand,
        reason: Option<&str>,
    ) -> Result<Acted, CommandError> {
        let acted = command::send(self.store, self.operator, id, cmd, reason).await?;
        if let Some(engine) = self.here {
            engine.wake(id);
            if acted.requeued {
                engine.run(id).await?;
            }
        }
        Ok(acted)
    }
}

/// The switch back of a router environment to the release before: that release (its recorded
/// artifact, digest included) as a canary with no steps — the candidate is (re)placed in the
/// free slot, then promoted, traffic going over at once — without analysis and without the
/// deploy's hooks (they are a deploy's, not a way back's). `None` when the targets do not all
/// go back to one recorded release.
fn switch_back(spec: &EnvSpec, moves: &[crate::deploy::releases::Move]) -> Option<EnvSpec> {
    let to = &moves.first()?.to;
    if moves.iter().any(|m| m.to.version != to.version) {
        return None;
    }
    let artifact: crate::config::values::Artifact = serde_json::from_str(&to.artifact).ok()?;
    if artifact.version != to.version {
        return None;
    }
    let crate::config::Strategy::Canary(canary) = &spec.strategy else {
        return None;
    };
    let mut back = spec.clone();
    back.artifact = artifact;
    back.hooks.clear();
    back.strategy = crate::config::Strategy::Canary(crate::config::canary::Canary {
        steps: Vec::new(),
        analysis: None,
        ..canary.clone()
    });
    Some(back)
}
