//! What a canary does next if it is let go on — promoted past the step it waits at, or resumed
//! where it was held — computed from its plan and status alone, so a confirmation can name the
//! split before → after. One rule is shared with the workflow: a weight step below a weight an
//! operator set by hand is passed over (promoting never lowers the candidate's traffic).

use crate::config::{Canary, CanaryStep};
use crate::deploy::canary_status::CanaryStatus;

/// A weight step below the weight set by hand is passed over.
pub fn passed_over(step_weight: u32, status: &CanaryStatus) -> bool {
    status.manual && step_weight < status.weight
}

/// Where the canary's traffic goes next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Step `step` (from 1) sets the candidate's weight.
    Weight { step: usize, weight: u32 },
    /// Step `step` is a pause for an operator: the weight stays until then.
    Gate { step: usize },
    /// The steps end: the candidate is promoted (it becomes the stable release, 100%).
    Promoted,
}

/// What happens from step index `from` (0-based) on: where the traffic goes next, and the
/// weight steps passed over on the way (`(step from 1, weight)`).
pub fn ahead(plan: &Canary, status: &CanaryStatus, from: usize) -> (Next, Vec<(usize, u32)>) {
    let mut passed = Vec::new();
    for (i, step) in plan.steps.iter().enumerate().skip(from) {
        match step {
            CanaryStep::Weight(w) if passed_over(*w, status) => passed.push((i + 1, *w)),
            CanaryStep::Weight(w) => {
                return (
                    Next::Weight {
                        step: i + 1,
                        weight: *w,
                    },
                    passed,
                );
            }
            CanaryStep::Pause(None) => return (Next::Gate { step: i + 1 }, passed),
            _ => {}
        }
    }
    (Next::Promoted, passed)
}

/// The step index a promote continues from (the one after the step it waits at), and the
/// one a resume continues from (the step it was held at, again).
pub fn after_promote(status: &CanaryStatus) -> usize {
    usize::try_from(status.step).unwrap_or(0)
}

/// See [`after_promote`].
pub fn after_resume(status: &CanaryStatus) -> usize {
    usize::try_from(status.step).unwrap_or(1).saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Canary {
        Canary {
            steps: vec![
                CanaryStep::Testers,
                CanaryStep::Weight(10),
                CanaryStep::Pause(None),
                CanaryStep::Weight(25),
                CanaryStep::Pause(Some(std::time::Duration::from_secs(60))),
                CanaryStep::Weight(50),
                CanaryStep::Pause(None),
                CanaryStep::Weight(100),
            ],
            slider_step: 5,
            confirm_above: 50,
            watch: std::time::Duration::from_secs(5),
            on_drift: crate::config::OnDrift::Correct,
            analysis: None,
        }
    }

    #[test]
    fn promote_at_a_hand_set_70_passes_the_lower_steps_over() {
        let status = CanaryStatus {
            step: 3,
            weight: 70,
            manual: true,
            held: true,
            ..CanaryStatus::default()
        };
        let (next, passed) = ahead(&plan(), &status, after_promote(&status));
        assert_eq!(next, Next::Gate { step: 7 });
        assert_eq!(passed, vec![(4, 25), (6, 50)]);
        assert!(passed_over(25, &status));
        assert!(!passed_over(100, &status));
    }

    #[test]
    fn without_a_hand_set_weight_the_plan_goes_on_as_written() {
        let status = CanaryStatus {
            step: 3,
            weight: 10,
            ..CanaryStatus::default()
        };
        assert_eq!(
            ahead(&plan(), &status, after_promote(&status)),
            (
                Next::Weight {
                    step: 4,
                    weight: 25
                },
                vec![]
            )
        );
        // Resumed where it was held: the pause it was at waits again.
        assert_eq!(
            ahead(&plan(), &status, after_resume(&status)).0,
            Next::Gate { step: 3 }
        );
        let last = CanaryStatus {
            step: 7,
            weight: 50,
            ..CanaryStatus::default()
        };
        assert_eq!(
            ahead(&plan(), &last, after_promote(&last)).0,
            Next::Weight {
                step: 8,
                weight: 100
            }
        );
        let done = CanaryStatus {
            step: 8,
            weight: 100,
            ..CanaryStatus::default()
        };
        assert_eq!(
            ahead(&plan(), &done, after_promote(&done)).0,
            Next::Promoted
        );
    }
}
