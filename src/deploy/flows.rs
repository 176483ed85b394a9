//! The deploy workflows, each a flow over one [`Run`](super::run::Run): a deploy or dry-run
//! ([`deploy`]), a rollback ([`rollback`]), a canary ([`canary`]) and a run of the `test`
//! hooks ([`test`]). A canary passes the run the commands it takes where it is; the others
//! take the run's own ([`Run::batch_commands`](super::run::Run::batch_commands)).

pub mod canary;
pub mod deploy;
pub mod rollback;
pub mod test;

use super::hooks::{self, Scope, Vars};
use super::plan::PlannedTarget;
use super::steps::TargetDone;
use crate::workflow::StepError;
use crate::workflow::store::Effect;

/// A target step's call between the target's `pre-target` and `post-target` hooks, for the
/// target `t` going to `version`; what failed and was let `continue` joins its message.
pub(crate) async fn gated<F>(
    run: (&super::DeployEnv, &crate::config::EnvSpec, &str),
    (t, version): (&PlannedTarget, &str),
    vars: &Vars,
    call: F,
) -> Result<(TargetDone, Vec<Effect>), StepError>
where
    F: std::future::Future<Output = Result<(TargetDone, Vec<Effect>), StepError>>,
{
    let (env, spec, id) = run;
    let scope = Scope {
        env,
        spec,
        id,
        target: Some((t, version)),
    };
    let ((mut done, effects), notes) = hooks::around_target(scope, vars, call).await?;
    if !notes.is_empty() {
        done.message = format!(
            "{}; {} (on_failure: continue)",
            done.message,
            notes.join("; ")
        );
    }
    Ok((done, effects))
}

/// One target's rollback along `mv`, between its per-target gates (an undo's or a rollback's).
pub(crate) async fn gated_rollback(
    run: (&super::DeployEnv, &crate::config::EnvSpec, &str),
    t: &PlannedTarget,
    mv: &super::releases::Move,
    info: crate::workflow::StepInfo,
    vars: &Vars,
) -> Result<(TargetDone, Vec<Effect>), StepError> {
    let (env, spec, id) = run;
    let back = async {
        let h = env.plugin(spec).await?;
        super::steps::rollback_target(
            super::steps::TargetStep {
                env,
                spec,
                wf: id,
                plugin: &h,
                t,
            },
            mv,
            info,
        )
        .await
    };
    gated(run, (t, mv.to.version.as_str()), vars, back).await
}
