//! A step's commit that finds the step already stored, decided the same on every store: a
//! different step under that id is a non-deterministic replay, the very same result is this
//! run's own earlier commit whose acknowledgement was lost, and anything else was written by
//! another run (this one is fenced). Each store reads the stored step in its own SQL.

use super::Checkpoint;
use crate::workflow::StoreError;

/// A step as stored: its name, output, error and start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredStep {
    /// The step's name.
    pub name: String,
    /// Its output (JSON).
    pub output: Option<String>,
    /// Its error (JSON).
    pub error: Option<String>,
    /// When it started.
    pub started_at: Option<i64>,
}

/// Whether committing `c` over `stored` is already done (`Ok`), or refused.
pub fn recommit(c: &Checkpoint, stored: StoredStep) -> Result<(), StoreError> {
    if stored.name != c.function_name {
        return Err(StoreError::NonDeterministic {
            workflow_id: c.workflow_id.clone(),
            function_id: c.function_id,
            recorded: stored.name,
            expected: c.function_name.clone(),
        });
    }
    let ours = stored.output == c.output
        && stored.error == c.error
        && stored.started_at == Some(c.started_at);
    if ours {
        return Ok(());
    }
    Err(StoreError::Fenced(c.workflow_id.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkpoint() -> Checkpoint {
        Checkpoint {
            workflow_id: "d-1".into(),
            run_token: "r1".into(),
            function_id: 3,
            function_name: "deploy.web-1".into(),
            output: Some("{\"ok\":true}".into()),
            error: None,
            attempts: 1,
            close_attempt: None,
            started_at: 100,
            completed_at: 120,
            effects: Vec::new(),
        }
    }

    fn stored(name: &str, output: &str, started_at: i64) -> StoredStep {
        StoredStep {
            name: name.into(),
            output: Some(output.into()),
            error: None,
            started_at: Some(started_at),
        }
    }

    #[test]
    fn the_same_step_result_is_a_lost_acknowledgement_anything_else_is_refused() {
        let c = checkpoint();
        assert!(recommit(&c, stored("deploy.web-1", "{\"ok\":true}", 100)).is_ok());
        // Another run's result for the same step (another output, or another start).
        for other in [
            stored("deploy.web-1", "{\"ok\":false}", 100),
            stored("deploy.web-1", "{\"ok\":true}", 99),
        ] {
            assert!(
                matches!(recommit(&c, other), Err(StoreError::Fenced(id)) if id == "d-1"),
                "another run's commit must fence this one"
            );
        }
        // A different step under the same id: the workflow's code changed under it.
        match recommit(&c, stored("deploy.web-2", "{\"ok\":true}", 100)) {
            Err(StoreError::NonDeterministic {
                recorded, expected, ..
            }) => assert_eq!(
                (recorded.as_str(), expected.as_str()),
                ("deploy.web-2", "deploy.web-1")
            ),
            other => panic!("expected a non-deterministic replay, got {other:?}"),
        }
    }
}
