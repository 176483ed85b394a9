//! A start that finds its id taken, decided the same on every store: the same workflow (its
//! name and its inputs' MAC) is this very start again, whose acknowledgement was lost; anything
//! else is another workflow's id.

use super::{NewWorkflow, Started, WorkflowRow};
use crate::workflow::StoreError;

/// The start of `wf` where `existing` holds its id; `same_inputs` when the stored inputs' MAC
/// is the one `wf`'s inputs give.
pub fn start_over(
    existing: WorkflowRow,
    wf: &NewWorkflow,
    same_inputs: bool,
) -> Result<Started, StoreError> {
    if existing.name != wf.name || !same_inputs {
        return Err(StoreError::IdInUse {
            id: wf.id.clone(),
            kind: existing.name,
        });
    }
    Ok(Started::Existing(existing))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::store::WorkflowStatus;

    fn new(name: &str) -> NewWorkflow {
        NewWorkflow {
            id: "d-1".into(),
            name: name.into(),
            definition_version: 1,
            inputs: "{}".into(),
            subject: None,
            dedup_key: None,
            max_recovery_attempts: 5,
            records: Vec::new(),
            executor: None,
            events: Vec::new(),
        }
    }

    #[test]
    fn the_same_start_again_is_existing_and_anything_else_is_an_id_in_use() {
        let existing = || WorkflowRow::example("d-1", WorkflowStatus::Pending);
        assert!(matches!(
            start_over(existing(), &new("deploy"), true),
            Ok(Started::Existing(r)) if r.id == "d-1"
        ));
        for (name, same) in [("deploy", false), ("rollback", true)] {
            let e = start_over(existing(), &new(name), same).unwrap_err();
            assert!(matches!(e, StoreError::IdInUse { .. }), "{e}");
            assert_eq!(
                e.to_string(),
                "deployment id d-1 is already used by another deploy with different inputs"
            );
        }
    }
}
