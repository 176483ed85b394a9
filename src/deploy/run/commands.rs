//! An operator's commands to a run of batches, between and within them: pause and resume,
//! skip, retry or abort a failed target, taken from the mailbox oldest first.

use super::{Run, Stop, by};
use crate::deploy::plan::PlannedTarget;
use crate::deploy::state::{
    Action, Delivered, Kind, OperatorCommand, Phase, StepName, TargetState, Topic,
};
use crate::deploy::steps::{self, TargetDone};
use crate::workflow::Interrupt;
use crate::workflow::store::Message;

impl Run<'_> {
    /// Before batch `next`: the commands waiting in the mailbox, oldest first.
    pub(super) async fn between_batches(&mut self, next: u32, of: u32) -> Result<(), Stop> {
        while let Some(msg) = self
            .ctx
            .poll_mailbox(&[
                Topic::Pause.as_str(),
                Topic::Skip.as_str(),
                Topic::Abort.as_str(),
                Topic::Revert.as_str(),
            ])
            .await?
        {
            self.apply(&msg, next, of).await?;
        }
        Ok(())
    }

    /// Takes one waiting command on `topics`, if any, and applies it.
    pub(super) async fn take(&mut self, topics: &[Topic], batch: u32) -> Result<(), Stop> {
        let topics: Vec<&str> = topics.iter().map(|t| t.as_str()).collect();
        if let Some(msg) = self.ctx.poll_mailbox(&topics).await? {
            let of = u32::try_from(self.plan.batches.len()).unwrap_or(u32::MAX);
            self.apply(&msg, batch, of).await?;
        }
        Ok(())
    }

    /// Applies a pause (parks until resumed), a skip, or an abort.
    pub(super) async fn apply(&mut self, msg: &Message, next: u32, of: u32) -> Result<(), Stop> {
        match Topic::parse(&msg.topic) {
            Some(Topic::Abort | Topic::Revert) => Err(Stop::Abort(by(msg))),
            Some(Topic::Skip) => self.skip(msg).await,
            Some(Topic::Pause) => {
                loop {
                    // Published again after each command: consuming one empties what it takes.
                    self.phase(Phase::Paused { before: next, of }).await?;
                    let msg = self
                        .ctx
                        .recv(
                            &[
                                Topic::Resume.as_str(),
                                Topic::Skip.as_str(),
                                Topic::Abort.as_str(),
                            ],
                            None,
                        )
                        .await?
                        .ok_or(Stop::Interrupt(Interrupt::ShuttingDown))?;
                    match Topic::parse(&msg.topic) {
                        Some(Topic::Resume) => break,
                        Some(Topic::Abort) => return Err(Stop::Abort(by(&msg))),
                        _ => self.skip(&msg).await?,
                    }
                }
                self.phase(self.batch_phase(next, of)).await
            }
            _ => Ok(()),
        }
    }

    /// Records the operator's skip of the named target, unless it has deployed already.
    pub(super) async fn skip(&mut self, msg: &Message) -> Result<(), Stop> {
        let Some(Delivered {
            command: OperatorCommand::Skip { target: name },
            reason,
        }) = Delivered::of(msg)
        else {
            return Ok(());
        };
        let Some((b, t)) = self
            .plan
            .targets()
            .find(|(_, t)| t.name == name)
            .map(|(b, t)| (b.index, t.clone()))
        else {
            return Ok(());
        };
        let done = self
            .tally
            .results
            .get(&name)
            .is_some_and(|r| r.status.is_done());
        if done || !self.tally.skipped.insert(name.clone()) {
            return Ok(());
        }
        let message = match &reason {
            Some(r) => format!("skipped by {}: {r}", by(msg)),
            None => format!("skipped by {}", by(msg)),
        };
        let step = StepName::target(Action::Skip, b, 1, &name);
        let r = self
            .ctx
            .step(step, &steps::internal(), |info| {
                let message = message.clone();
                async move {
                    Ok(TargetDone {
                        status: TargetState::Skipped,
                        message,
                        duration_ms: 0,
                        attempt: info.attempt,
                        version: String::new(),
                    })
                }
            })
            .await?;
        self.tally.record(b, &t, &r);
        Ok(())
    }

    /// Targets failed: waits for the operator. Returns the targets to run again.
    pub(super) async fn decide<'p>(
        &mut self,
        batch: u32,
        failed: &[&'p PlannedTarget],
    ) -> Result<Vec<&'p PlannedTarget>, Stop> {
        let of = u32::try_from(self.plan.batches.len()).unwrap_or(u32::MAX);
        let mut open: Vec<&PlannedTarget> = failed.to_vec();
        loop {
            open.retain(|t| !self.tally.skipped.contains(&t.name));
            if open.is_empty() {
                self.phase(self.batch_phase(batch, of)).await?;
                return Ok(Vec::new());
            }
            self.phase(Phase::AwaitingDecision {
                batch,
                failed: open.iter().map(|t| t.name.clone()).collect(),
                canary: self.kind == Kind::Canary,
            })
            .await?;
            let msg = self
                .ctx
                .recv(
                    &[
                        Topic::Retry.as_str(),
                        Topic::Skip.as_str(),
                        Topic::Abort.as_str(),
                        Topic::Revert.as_str(),
                    ],
                    None,
                )
                .await?
                .ok_or(Stop::Interrupt(Interrupt::ShuttingDown))?;
            match Topic::parse(&msg.topic) {
                Some(Topic::Abort | Topic::Revert) => return Err(Stop::Abort(by(&msg))),
                Some(Topic::Retry) => {
                    let targets = match Delivered::of(&msg) {
                        Some(Delivered {
                            command: OperatorCommand::Retry { targets },
                            ..
                        }) => targets,
                        _ => Vec::new(),
                    };
                    let again: Vec<&PlannedTarget> = open
                        .iter()
                        .copied()
                        .filter(|t| targets.is_empty() || targets.contains(&t.name))
                        .collect();
                    if !again.is_empty() {
                        self.phase(self.batch_phase(batch, of)).await?;
                        return Ok(again);
                    }
                }
                _ => self.skip(&msg).await?,
            }
        }
    }
}
