//! `manent test APP ENV` (the console's `t`): the `test` hooks, run on demand against what is
//! live, each recorded passed or failed with its output, like `helm test`. Every test hook
//! runs, whatever the others did; the run passes when they all do.

use std::sync::Arc;

use crate::deploy::hooks::{self, Vars};
use crate::deploy::run::{self, Run, Stop};
use crate::deploy::state::{Ending, Kind};
use crate::deploy::{DeployEnv, DeployInput, Report, outcome};
use crate::workflow::{Interrupt, RunOutcome, WfCtx};

/// Runs the test hooks from the stored inputs (the spec's version is the live one).
pub async fn run(env: Arc<DeployEnv>, ctx: WfCtx, inputs: String) -> Result<RunOutcome, Interrupt> {
    let input: DeployInput = match serde_json::from_str(&inputs) {
        Ok(i) => i,
        Err(e) => return Ok(Report::bad_inputs(Kind::Test, &e)),
    };
    let spec = &input.spec;
    let run = match Run::begin_without_plugin(&env, &ctx, spec, Kind::Test).await {
        Ok(r) => r,
        Err(stop) => {
            return outcome(run::not_begun(&ctx, Kind::Test, &spec.artifact.version, stop).await);
        }
    };
    let vars = Vars {
        previous_version: spec.artifact.version.clone(),
        testers: crate::deploy::flows::canary::tester_header(&input.testers),
    };
    let results = match hooks::run_tests(&run, &vars).await {
        Ok(r) => r,
        Err(Stop::Interrupt(i)) => return Err(i),
        Err(Stop::Failed(why) | Stop::Abort(why)) => {
            let r = run.report(Ending::Failed, why, "");
            return outcome(run.end(r).await);
        }
    };
    let failed: Vec<&str> = results
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(n, _)| n.as_str())
        .collect();
    let n = results.len();
    let report = if n == 0 {
        run.report(
            Ending::Failed,
            format!(
                "{} has no test hooks (give a hook `events: [test]`)",
                spec.subject()
            ),
            "",
        )
    } else if failed.is_empty() {
        run.report(
            Ending::Passed,
            format!(
                "{} test hook(s) of {} passed against {}",
                n,
                spec.subject(),
                spec.artifact.version
            ),
            "",
        )
    } else {
        run.report(
            Ending::Failed,
            format!(
                "{} of {n} test hook(s) of {} failed: {}",
                failed.len(),
                spec.subject(),
                failed.join(", ")
            ),
            "",
        )
    };
    let mut report = report;
    // A test run touches no target: its lines are its hooks (in the view).
    report.targets.clear();
    outcome(run.end(report).await)
}
