//! Checks that need the conformance protocol the SDKs honour (errors of a chosen kind, a line at
//! every level, a secret through the broker), then a crash, stdout and Shutdown.

use super::*;

impl Kit {
    pub(super) async fn errors(&self, remote: &Remote) -> Check {
        let v = &self.spec.artifact.version;
        let permanent = self.request(
            "fail-permanent",
            1,
            v,
            Some(serde_json::json!({"fail": "permanent"})),
        );
        let retryable = self.request(
            "fail-retryable",
            1,
            v,
            Some(serde_json::json!({"fail": "retryable"})),
        );
        let p = self.bounded(remote.deploy(&permanent)).await;
        let r = self.bounded(remote.deploy(&retryable)).await;
        match (p, r) {
            (Err(PluginError::Permanent(_)), Err(PluginError::Failed(_))) => check(
                "errors",
                Outcome::Pass,
                "a Permanent error fails at once (ABORTED); any other is retried",
            ),
            (p, r) => check(
                "errors",
                Outcome::Fail,
                format!(
                    "a Permanent error must reach the host as ABORTED and any other as retryable; \
                     got {} and {}",
                    outcome_kind(&p),
                    outcome_kind(&r)
                ),
            ),
        }
    }

    pub(super) async fn logs(&self, remote: &Remote) -> Check {
        let req = self.request(
            "log",
            1,
            &self.spec.artifact.version,
            Some(serde_json::json!({"log": true})),
        );
        if let Err(e) = self.bounded(remote.deploy(&req)).await {
            return check(
                "logs",
                Outcome::Fail,
                format!("the logging call failed: {e}"),
            );
        }
        let levels = [
            Level::Trace,
            Level::Debug,
            Level::Info,
            Level::Warn,
            Level::Error,
        ];
        let mut wrong = Vec::new();
        for level in levels {
            let message = format!("conformance level {}", level.as_str());
            match self
                .capture
                .wait_for(&message, Duration::from_secs(2))
                .await
            {
                Some((l, _)) if l.level == level => {}
                Some((l, _)) => wrong.push(format!(
                    "{message:?} arrived at {} (an hclog line's @level must say it)",
                    l.level.as_str()
                )),
                None => wrong.push(format!("{message:?} never arrived on stderr")),
            }
        }
        if wrong.is_empty() {
            check(
                "logs",
                Outcome::Pass,
                "hclog JSON on stderr: trace, debug, info, warn and error kept their levels",
            )
        } else {
            check("logs", Outcome::Fail, wrong.join("; "))
        }
    }

    pub(super) async fn secret(&self, remote: &Remote) -> Check {
        let value = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
        let want = format!("{:x}", Sha256::digest(value.as_bytes()));
        let mut req = self.request(
            "secret",
            1,
            &self.spec.artifact.version,
            Some(serde_json::json!({"secret": SECRET})),
        );
        let (secrets, guard) = Secrets::for_call(Arc::new(KitSecret(value.clone())));
        req.secrets = secrets;
        let answer = self.bounded(remote.deploy(&req)).await;
        drop(guard);
        if let Err(e) = answer {
            return check(
                "secret",
                Outcome::Fail,
                format!("reading a secret through the broker during the call failed: {e}"),
            );
        }
        let leaked = self.capture.lines().iter().any(|l| {
            l.message.contains(&value) || l.attrs.values().any(|v| v.to_string().contains(&value))
        });
        if leaked {
            return check(
                "secret",
                Outcome::Fail,
                "the secret's value appeared in the plugin's log lines",
            );
        }
        match self
            .capture
            .wait_for("conformance secret", Duration::from_secs(2))
            .await
        {
            Some((l, _)) if l.attrs.get("sha256").and_then(|v| v.as_str()) == Some(&want) => check(
                "secret",
                Outcome::Pass,
                "read through the broker during the call (the host closes it when the call \
                     returns)",
            ),
            Some(_) => check(
                "secret",
                Outcome::Fail,
                "the plugin read a different value than the kit offered",
            ),
            None => check(
                "secret",
                Outcome::Fail,
                "the call succeeded but the plugin never said it read the secret",
            ),
        }
    }

    /// A plugin killed mid-call: the call fails as retryable, and the next call is answered by a
    /// new process.
    pub(super) async fn crash(&self, remote: &Remote, p: &Arc<Process>, honours: bool) -> Check {
        let before = p.pid;
        let req = self.request(
            "crash",
            1,
            &self.spec.artifact.version,
            honours.then(|| serde_json::json!({"sleep_ms": 30_000})),
        );
        let mid_call = if honours {
            let call = remote.deploy(&req);
            let kill = async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                crate::sys::kill_group(before);
            };
            let (answer, ()) = tokio::join!(self.bounded(call), kill);
            Some(answer)
        } else {
            crate::sys::kill_group(before);
            let _ = p.crashed().await;
            None
        };
        if let Some(Ok(_) | Err(PluginError::Permanent(_) | PluginError::Unimplemented(_))) =
            &mid_call
        {
            return check(
                "crash",
                Outcome::Fail,
                format!(
                    "a plugin killed mid-call must make the call fail as retryable; got {}",
                    outcome_kind(mid_call.as_ref().unwrap_or(&Ok(DeployResult::default())))
                ),
            );
        }
        let started = Instant::now();
        let plain = self.request("after-crash", 1, &self.spec.artifact.version, None);
        let _ = self.bounded(remote.validate(&plain)).await;
        match self.host.process().await {
            Ok(again) if again.pid != before => {
                let mut c = check(
                    "crash",
                    Outcome::Pass,
                    format!(
                        "killed {} (pid {before}); the next call started it again (pid {}) in {} \
                         ms",
                        if honours { "mid-call" } else { "between calls" },
                        again.pid,
                        ms(started.elapsed())
                    ),
                );
                c.ms = Some(ms(started.elapsed()));
                c
            }
            Ok(_) => check(
                "crash",
                Outcome::Fail,
                "after SIGKILL the same process still answers",
            ),
            Err(e) => check(
                "crash",
                Outcome::Fail,
                format!("after a crash the plugin did not start again: {e}"),
            ),
        }
    }

    pub(super) async fn stdout(&self, honours: bool) -> Check {
        // What the host drains from stdout is reported as it arrives.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let lines = self.capture.lines();
        if let Some(l) = lines
            .iter()
            .find(|l| l.message.contains("wrote to stdout after the handshake"))
        {
            return check("stdout", Outcome::Fail, l.message.clone());
        }
        if honours
            && !lines
                .iter()
                .any(|l| l.message == "conformance stdout probe")
        {
            return check(
                "stdout",
                Outcome::Fail,
                "a line printed with the language's ordinary print reached neither stdout nor \
                 stderr",
            );
        }
        check(
            "stdout",
            Outcome::Pass,
            if honours {
                "nothing on stdout after the handshake; an ordinary print became a stderr line"
            } else {
                "nothing on stdout after the handshake during the kit's calls"
            },
        )
    }

    pub(super) async fn shutdown(&self) -> Check {
        let started = Instant::now();
        self.host.shutdown().await;
        let took = started.elapsed();
        let killed = self
            .capture
            .lines()
            .iter()
            .any(|l| l.message.contains("did not exit after Shutdown"));
        let mut c = if killed {
            check(
                "shutdown",
                Outcome::Fail,
                "it did not exit within 2s of GRPCController.Shutdown and was killed",
            )
        } else {
            check(
                "shutdown",
                Outcome::Pass,
                format!("exited {} ms after Shutdown", ms(took)),
            )
        };
        c.ms = Some(ms(took));
        c
    }
}
