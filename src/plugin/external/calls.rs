//! Which deployment a plugin's untagged stderr line belongs to. A plugin's own logger may not
//! name the call it logs for (go-plugin's hclog, the Go and Python SDKs' loggers, a raw
//! go-plugin plugin): the host keeps the calls of each plugin in flight — and, for a moment
//! after each ends, since the plugin's last lines reach the host after its answer — and gives an
//! untagged line the deployment when every such call is of one deployment, and the target and
//! moniker too when there is one call of one target. Anything else stays the plugin's own line.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long after a call ends its plugin's lines are still its: what the plugin wrote just
/// before it answered is read a moment after the answer.
const LINGER: Duration = Duration::from_millis(500);

#[derive(Debug, Clone)]
struct Call {
    id: u64,
    deployment: String,
    /// The target and moniker, when the call was for one target.
    target: Option<(String, String)>,
    ended: Option<Instant>,
}

/// One plugin's calls in flight (and just ended).
#[derive(Debug, Default)]
pub struct Calls {
    calls: Mutex<(u64, Vec<Call>)>,
    /// Attributes nothing: every line stays as the plugin tagged it (the kit's view).
    off: bool,
}

/// A call in flight; dropping it ends it.
#[derive(Debug)]
pub struct InCall<'a> {
    calls: &'a Calls,
    id: u64,
}

impl Drop for InCall<'_> {
    fn drop(&mut self) {
        if let Ok(mut c) = self.calls.calls.lock()
            && let Some(call) = c.1.iter_mut().find(|c| c.id == self.id)
        {
            call.ended = Some(Instant::now());
        }
    }
}

/// Where an untagged line goes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributed {
    /// The deployment.
    pub deployment: Option<String>,
    /// The target and its moniker.
    pub target: Option<(String, String)>,
}

impl Calls {
    /// A call of `req` starts (a request with no deployment counts for none).
    pub fn begin(&self, req: &crate::plugin::Request) -> Option<InCall<'_>> {
        if self.off || req.deployment_id.is_empty() {
            return None;
        }
        let target = match req.targets.as_slice() {
            [t] => Some((t.name().to_owned(), t.moniker.to_string())),
            _ => None,
        };
        let mut c = self.calls.lock().ok()?;
        c.0 += 1;
        let id = c.0;
        let now = Instant::now();
        c.1.retain(|c| c.ended.is_none_or(|e| now.duration_since(e) < LINGER));
        c.1.push(Call {
            id,
            deployment: req.deployment_id.clone(),
            target,
            ended: None,
        });
        Some(InCall { calls: self, id })
    }

    /// Calls that attribute no line: what a plugin tagged is all a line says.
    pub fn off() -> Self {
        Calls {
            off: true,
            ..Calls::default()
        }
    }

    /// The deployment (and target) an untagged line read now belongs to, if only one can be meant.
    pub fn attribute(&self) -> Attributed {
        let Ok(c) = self.calls.lock() else {
            return Attributed::default();
        };
        let now = Instant::now();
        let open: Vec<&Call> =
            c.1.iter()
                .filter(|c| c.ended.is_none_or(|e| now.duration_since(e) < LINGER))
                .collect();
        let Some(first) = open.first() else {
            return Attributed::default();
        };
        if open.iter().any(|c| c.deployment != first.deployment) {
            return Attributed::default();
        }
        Attributed {
            deployment: Some(first.deployment.clone()),
            target: match open.as_slice() {
                [one] => one.target.clone(),
                _ => None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::{Artifact, Request, Secrets, Target};

    fn req(deployment: &str, targets: &[&str]) -> Request {
        Request {
            deployment_id: deployment.into(),
            application: "web".into(),
            environment: "prod".into(),
            artifact: Artifact::default(),
            targets: targets
                .iter()
                .map(|t| Target {
                    host: (*t).to_owned(),
                    moniker: crate::moniker::Moniker::new("prod", "web", "t", t)
                        .unwrap_or_else(|e| panic!("{e}")),
                    labels: Default::default(),
                })
                .collect(),
            params: serde_json::Value::Null,
            secrets: Secrets::none(),
            parallelism: 1,
            traffic: None,
            routing: None,
            idempotency_key: String::new(),
            attempt: 1,
            processes: crate::plugin::Processes::none(),
        }
    }

    #[test]
    fn an_untagged_line_goes_to_the_one_deployment_in_flight_and_no_further() {
        let calls = Calls::default();
        assert_eq!(
            calls.attribute(),
            Attributed::default(),
            "no call: the plugin's own"
        );
        let a = calls.begin(&req("dep-a", &["t1"]));
        let got = calls.attribute();
        assert_eq!(got.deployment.as_deref(), Some("dep-a"));
        assert_eq!(got.target.as_ref().map(|t| t.0.as_str()), Some("t1"));
        // Two calls of one deployment: the deployment, not a target.
        let a2 = calls.begin(&req("dep-a", &["t2"]));
        assert_eq!(calls.attribute().deployment.as_deref(), Some("dep-a"));
        assert_eq!(calls.attribute().target, None);
        // Another deployment beside them: nobody's.
        let b = calls.begin(&req("dep-b", &["t1"]));
        assert_eq!(calls.attribute(), Attributed::default());
        drop((a, a2, b));
        // Just ended: the last lines still arrive; a call with no deployment counts for none.
        assert!(calls.begin(&req("", &["t1"])).is_none());
        assert_eq!(
            calls.attribute(),
            Attributed::default(),
            "two deployments linger"
        );
    }

    #[test]
    fn a_line_read_just_after_the_answer_is_still_the_calls() {
        let calls = Calls::default();
        drop(calls.begin(&req("dep-a", &["t1"])));
        assert_eq!(calls.attribute().deployment.as_deref(), Some("dep-a"));
    }
}
