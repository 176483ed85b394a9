//! A run's waits: backoff in memory, durable sleeps and deadlines, the mailbox, published
//! events, and the parking that lets a drain count a waiting run as done.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::Serialize;

use super::{RECV, SET_EVENT, SLEEP, StepAt, StepEvent, WfCtx};
use crate::sys::now_ms;
use crate::workflow::error::Interrupt;
use crate::workflow::shutdown::Shutdown;
use crate::workflow::store::{Effect, Message, StepRecord};

impl WfCtx {
    /// A backoff pause: in memory, ended by the engine's stop.
    pub(super) async fn sleep_in_memory(&self, d: Duration) -> Result<(), Interrupt> {
        let mut rx = self.run.control.shutdown.clone();
        tokio::select! {
            () = tokio::time::sleep(d) => Ok(()),
            // A backoff ends with the engine's stop: no retry starts after it.
            _ = rx.wait_for(|s| matches!(s, Shutdown::Stopping | Shutdown::Hard)) => {
                Err(Interrupt::ShuttingDown)
            }
        }
    }

    /// Sleeps durably: the deadline is checkpointed first, so a restart waits only what is left.
    pub async fn sleep(&self, d: Duration) -> Result<(), Interrupt> {
        let id = self.next_id();
        let deadline = self.deadline(id, d).await?;
        let _park = Park::new(self, None);
        loop {
            let wait = deadline - now_ms();
            if wait <= 0 {
                return Ok(());
            }
            let wait = Duration::from_millis(u64::try_from(wait).unwrap_or(0));
            if self.wait(Some(wait)).await? {
                self.check_live().await?;
            }
        }
    }

    async fn deadline(&self, id: u32, d: Duration) -> Result<i64, Interrupt> {
        if let Some(rec) = self.recorded(id) {
            return self
                .replay::<i64>(&rec, SLEEP)?
                .map_err(|f| Interrupt::Store(f.message));
        }
        self.boundary()?;
        let now = now_ms();
        let deadline = now.saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        self.record(
            StepAt::new(id, SLEEP, now),
            Ok(deadline.to_string()),
            None,
            Vec::new(),
        )
        .await?;
        Ok(deadline)
    }

    /// Waits for a message on one of `topics` (an operator command), durably: the message is
    /// consumed in the same transaction that records it (design/durable-workflows.md E8). `None` after `timeout`.
    pub async fn recv(
        &self,
        topics: &[&str],
        timeout: Option<Duration>,
    ) -> Result<Option<Message>, Interrupt> {
        let recv_id = self.next_id();
        let sleep_id = self.next_id();
        if let Some(rec) = self.recorded(recv_id) {
            return self
                .replay::<Option<Message>>(&rec, RECV)?
                .map_err(|f| Interrupt::Store(f.message));
        }
        let deadline = match timeout {
            Some(t) => Some(self.deadline(sleep_id, t).await?),
            None => None,
        };
        let topics: Vec<String> = topics.iter().map(|t| (*t).to_owned()).collect();
        let _park = Park::new(self, deadline.is_none().then_some(topics.as_slice()));
        loop {
            let notified = self.run.control.wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let store = &self.run.store;
            let (id, token) = (&self.run.id, &self.run.run_token);
            if let Some(msg) = self
                .store_retry(|| store.consume(id, token, recv_id, &topics))
                .await?
            {
                self.remember(recv_id, RECV, &Some(&msg));
                return Ok(Some(msg));
            }
            let left = deadline.map(|d| d - now_ms());
            if left.is_some_and(|l| l <= 0) {
                self.record(
                    StepAt::new(recv_id, RECV, now_ms()),
                    Ok("null".into()),
                    None,
                    Vec::new(),
                )
                .await?;
                return Ok(None);
            }
            let left = left.map(|l| Duration::from_millis(u64::try_from(l).unwrap_or(0)));
            let poll = Duration::from_secs(1);
            let wait = left.map_or(poll, |l| l.min(poll));
            tokio::select! {
                () = &mut notified => {}
                r = self.wait(Some(wait)) => { r?; }
            }
        }
    }

    /// Takes a message on `topics` if one is waiting, without waiting; recorded either way.
    pub async fn poll_mailbox(&self, topics: &[&str]) -> Result<Option<Message>, Interrupt> {
        let id = self.next_id();
        if let Some(rec) = self.recorded(id) {
            return self
                .replay::<Option<Message>>(&rec, RECV)?
                .map_err(|f| Interrupt::Store(f.message));
        }
        self.boundary()?;
        let topics: Vec<String> = topics.iter().map(|t| (*t).to_owned()).collect();
        let store = &self.run.store;
        let (wf, token) = (&self.run.id, &self.run.run_token);
        if let Some(msg) = self
            .store_retry(|| store.consume(wf, token, id, &topics))
            .await?
        {
            self.remember(id, RECV, &Some(&msg));
            return Ok(Some(msg));
        }
        self.record(
            StepAt::new(id, RECV, now_ms()),
            Ok("null".into()),
            None,
            Vec::new(),
        )
        .await?;
        Ok(None)
    }

    fn remember<T: Serialize>(&self, id: u32, name: &str, value: &T) {
        let rec = StepRecord {
            function_id: id,
            function_name: name.to_owned(),
            output: serde_json::to_string(value).ok(),
            error: None,
            attempts: 1,
            started_at: None,
            completed_at: None,
        };
        if let Ok(mut steps) = self.run.steps.lock() {
            steps.insert(id, rec);
        }
    }

    /// Publishes `value` under `key` for consoles (phase, progress), as a durable step.
    pub async fn set_event<V: Serialize>(&self, key: &str, value: &V) -> Result<(), Interrupt> {
        let value = serde_json::to_value(value)
            .map_err(|e| Interrupt::Store(format!("event does not encode: {e}")))?;
        self.set_events(&[(key, value)]).await
    }

    /// Publishes several events at once, as one durable step.
    pub async fn set_events(&self, events: &[(&str, serde_json::Value)]) -> Result<(), Interrupt> {
        let id = self.next_id();
        if let Some(rec) = self.recorded(id) {
            return self
                .replay::<serde_json::Value>(&rec, SET_EVENT)?
                .map(|_| ())
                .map_err(|f| Interrupt::Store(f.message));
        }
        self.boundary()?;
        let effects: Vec<Effect> = events
            .iter()
            .map(|(key, value)| Effect::Event {
                key: (*key).to_owned(),
                value: value.to_string(),
            })
            .collect();
        // The step's output is the last value: what an earlier manent recorded for one event.
        let output = events
            .last()
            .map_or_else(|| "null".to_owned(), |(_, v)| v.to_string());
        self.record(
            StepAt::new(id, SET_EVENT, now_ms()),
            Ok(output),
            None,
            effects,
        )
        .await
    }

    /// Waits up to `d` (or until woken); `Ok(true)` when woken. Leaves at once when the engine
    /// drains: the wait's progress is durable, so the next start picks it up.
    async fn wait(&self, d: Option<Duration>) -> Result<bool, Interrupt> {
        let mut rx = self.run.control.shutdown.clone();
        let sleep = tokio::time::sleep(d.unwrap_or(Duration::from_secs(1)));
        tokio::select! {
            () = sleep => Ok(false),
            () = self.run.control.wake.notified() => Ok(true),
            _ = rx.wait_for(|s| *s != Shutdown::Running) => Err(Interrupt::ShuttingDown),
        }
    }

    /// After a wake-up during a sleep: stop if an operator cancelled the workflow.
    async fn check_live(&self) -> Result<(), Interrupt> {
        let row = self
            .store_retry(|| self.run.store.workflow(&self.run.id))
            .await?;
        match row {
            Some(r) if r.run_token.as_deref() != Some(self.run.run_token.as_str()) => {
                Err(Interrupt::Fenced)
            }
            Some(r) if r.status == crate::workflow::store::WorkflowStatus::Pending => Ok(()),
            _ => Err(Interrupt::Cancelled),
        }
    }
}

/// Marks the run as parked in a durable wait while it lives (drain counts parked runs as done);
/// with the topics, when only an operator's command on one of them ends the wait.
struct Park<'a>(&'a WfCtx, bool);

impl<'a> Park<'a> {
    fn new(ctx: &'a WfCtx, operator: Option<&[String]>) -> Self {
        ctx.run.control.parked.fetch_add(1, Ordering::SeqCst);
        if let Some(topics) = operator {
            if let Ok(mut t) = ctx.run.control.awaiting_topics.lock() {
                *t = topics.to_vec();
            }
            ctx.run
                .control
                .awaiting_operator
                .fetch_add(1, Ordering::SeqCst);
        }
        let operator = operator.is_some();
        ctx.run.control.changed.notify_waiters();
        ctx.observe(StepEvent::Parked { waiting: true });
        Park(ctx, operator)
    }
}

impl Drop for Park<'_> {
    fn drop(&mut self) {
        if self.1 {
            self.0
                .run
                .control
                .awaiting_operator
                .fetch_sub(1, Ordering::SeqCst);
        }
        self.0.run.control.parked.fetch_sub(1, Ordering::SeqCst);
        self.0.run.control.changed.notify_waiters();
        self.0.observe(StepEvent::Parked { waiting: false });
    }
}
