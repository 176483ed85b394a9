//! An operator's commands to a live canary (promote, revert, weight, back, pause, resume) and
//! the decisions it records, with who and why.

use std::time::Duration;

use super::router::{Change, Changed};
use super::{Flight, Next, topics};
use crate::deploy::canary_status::Decision;
use crate::deploy::run::{self, OrFail, Run, Stop};
use crate::deploy::state::{CanaryCall, Delivered, OperatorCommand, StepName, Topic};
use crate::deploy::steps;
use crate::operator::Operator;
use crate::workflow::Interrupt;
use crate::workflow::store::Message;

impl Flight {
    /// Applies an operator's command (or a decision) to the steps.
    pub(super) async fn command(&mut self, run: &mut Run<'_>, msg: &Message) -> Result<Next, Stop> {
        let delivered = Delivered::of(msg);
        let by = run::by(msg);
        let why = delivered.as_ref().map(Delivered::why).unwrap_or_default();
        let action = Topic::parse(&msg.topic).map_or("?", Topic::as_str);
        self.note(action, &by, &why, msg.created_at);
        Ok(match delivered.map(|d| d.command) {
            Some(OperatorCommand::Promote { full: true }) => Next::PromoteNow,
            Some(OperatorCommand::Promote { full: false }) => {
                self.status.held = false;
                Next::EndStep
            }
            Some(OperatorCommand::Revert | OperatorCommand::Abort) => Next::Revert {
                by,
                why: if why.is_empty() {
                    "no reason given".into()
                } else {
                    why
                },
            },
            Some(OperatorCommand::Weight(w)) => {
                let w = w.min(100);
                self.status.manual = true;
                self.status.held = true;
                match self.change(run, Change::Weight(w)).await? {
                    Changed::Revert { by, why } => Next::Revert { by, why },
                    Changed::Done | Changed::Manual => Next::Stay,
                }
            }
            Some(OperatorCommand::Back) => self.back(run).await?,
            Some(OperatorCommand::Pause) => {
                self.status.held = true;
                Next::Stay
            }
            Some(OperatorCommand::Resume) => {
                self.status.held = false;
                Next::Stay
            }
            _ => Next::Stay,
        })
    }

    /// Back to the previous step's weight (from a weight set by hand: the last step's), held;
    /// the steps go on from the weight step that is undone.
    pub(super) async fn back(&mut self, run: &mut Run<'_>) -> Result<Next, Stop> {
        let target = if self.status.manual {
            self.history.last().map_or(0, |l| l.1)
        } else {
            let undone = self.history.pop();
            if let Some((pos, _)) = undone {
                self.pos = pos;
            }
            self.history.last().map_or(0, |l| l.1)
        };
        self.status.held = true;
        match self.change(run, Change::Weight(target)).await? {
            Changed::Done => {
                self.status.manual = false;
                Ok(Next::Stay)
            }
            Changed::Manual => Ok(Next::Stay),
            Changed::Revert { by, why } => Ok(Next::Revert { by, why }),
        }
    }

    /// Records an operator's command, for the status (when it was sent: the same on replay).
    pub(super) fn note(&mut self, action: &str, by: &str, why: &str, at: i64) {
        self.status.decisions.push(Decision {
            action: action.to_owned(),
            by: by.to_owned(),
            why: why.to_owned(),
            at,
        });
    }

    /// A decision the canary takes by itself (`by` its analysis, or manent when the candidate
    /// failed), journaled with why, as one step.
    pub(super) async fn decide(
        &mut self,
        run: &Run<'_>,
        action: &str,
        by: &str,
        why: &str,
    ) -> Result<(), Stop> {
        let subject = run.spec.subject();
        let id = run.ctx.id().to_owned();
        let step = run.ctx.reserve(1)[0];
        let (subject, id) = (&subject, &id);
        let decided: Decision = run
            .ctx
            .step_at(
                step,
                StepName::Canary(CanaryCall::Decide).into(),
                &steps::internal(),
                |_| async move {
                    let automatic = Operator {
                        name: "manent".into(),
                        client: None,
                    };
                    let entry = crate::deploy::records::JournalEntry::by(
                        &automatic,
                        action,
                        Some(id),
                        Some(subject),
                        Some(format!("{action} decided by {by}")),
                        Some(why),
                    );
                    Ok((
                        Decision {
                            action: action.to_owned(),
                            by: by.to_owned(),
                            why: why.to_owned(),
                            at: crate::sys::now_ms(),
                        },
                        vec![crate::workflow::store::Effect::Record(entry.record())],
                    ))
                },
            )
            .await?
            .or_fail()?;
        self.status.decisions.push(decided);
        Ok(())
    }

    /// Waits for a command on `topics` (up to `timeout`), watching the router meanwhile.
    /// `None` when the time is up.
    pub(super) async fn wait(
        &mut self,
        run: &Run<'_>,
        topics_: &[Topic],
        timeout: Option<Duration>,
    ) -> Result<Option<Message>, Stop> {
        // A restart that resumes inside a wait reads the router back before waiting again.
        self.reassert_after_restart(run).await;
        // While the candidate is in a pool the wait has work (analysis, the router's watch): an
        // engine that goes away hands the run on rather than leave it unwatched.
        run.ctx.set_judging(self.live);
        let t = topics(topics_);
        let recv = run.ctx.recv(&t, timeout);
        tokio::pin!(recv);
        // Only once the run is live and the candidate in a pool: a replayed wait returns at
        // once.
        let watching = !run.ctx.replaying() && self.live;
        let every = self.plan.watch;
        // A deadline, not a sleep made anew at each turn: a background run in between must
        // not put the next read of the router off.
        let mut next_watch = tokio::time::Instant::now() + every;
        loop {
            // The background analysis' next run, when there is one (not while replaying).
            let due = if watching {
                self.background_due()
            } else {
                None
            };
            tokio::select! {
                r = &mut recv => {
                    let msg = r?;
                    if timeout.is_none() && msg.is_none() {
                        return Err(Stop::Interrupt(Interrupt::ShuttingDown));
                    }
                    return Ok(msg);
                }
                () = tokio::time::sleep_until(next_watch), if watching => {
                    next_watch = tokio::time::Instant::now() + every;
                    self.watch(run).await;
                    // Each reading covers 10s at least (overlapping at a shorter `watch`): a
                    // point over a second or two of a small candidate share is noise.
                    self.sample_traffic(run, every.max(Duration::from_secs(10))).await;
                }
                () = tokio::time::sleep(due.unwrap_or_default()), if due.is_some() => {
                    self.background_run(run).await;
                }
            }
        }
    }
}
