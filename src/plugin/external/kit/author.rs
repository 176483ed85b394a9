//! Checks run on the author's own code with inputs the kit file gives: invalid params, the
//! secret the author's Deploy reads, a Deploy cancelled mid-call, and whom its log lines name.

use super::*;

impl Kit {
    /// Params the plugin cannot deploy with (`invalid:`, or empty) must fail as permanent, in
    /// Validate or in Deploy: a retry cannot fix them, and a retryable error makes manent try
    /// again and again.
    pub(super) async fn invalid_input(&self, remote: &Remote, p: &Process, version: &str) -> Check {
        let given = self.spec.invalid.is_some();
        let mut req = self.request("invalid", 1, version, None);
        req.params = self
            .spec
            .invalid
            .clone()
            .unwrap_or_else(|| serde_json::json!({}));
        let what = if given {
            "the kit file's `invalid:` params"
        } else {
            "empty params"
        };
        let judged = |call: &str, e: &PluginError| match e {
            PluginError::Permanent(_) => check(
                "invalid-input",
                Outcome::Pass,
                format!("{what} are refused at {call} as permanent: {e}"),
            ),
            PluginError::Failed(_) => check(
                "invalid-input",
                Outcome::Fail,
                format!(
                    "{what} failed at {call} as retryable ({e}): a retry cannot fix bad input — \
                     return a permanent error (Permanent / ABORTED / INVALID_ARGUMENT)"
                ),
            ),
            PluginError::Unimplemented(_) => check(
                "invalid-input",
                Outcome::Fail,
                format!("{call} answered UNIMPLEMENTED to {what}: {e}"),
            ),
        };
        if let Err(e) = self.bounded(remote.validate(&req)).await {
            return judged("Validate", &e);
        }
        if !given {
            // Empty params Validate accepts are not known to be wrong: no Deploy is run on
            // them (it would deploy for real, and fail for any reason at all).
            return check(
                "invalid-input",
                Outcome::Skip,
                "Validate accepts empty params (the plugin may need none); give `invalid:` \
                 params it must refuse in the kit file to check how it fails",
            );
        }
        match self.bounded(remote.deploy(&req)).await {
            Err(e) if self.died(p).await => check(
                "invalid-input",
                Outcome::Fail,
                format!("the plugin died on the kit file's `invalid:` params: {e}"),
            ),
            Err(e) => judged("Deploy", &e),
            Ok(_) => check(
                "invalid-input",
                Outcome::Fail,
                "the plugin accepted the kit file's `invalid:` params, which it must refuse",
            ),
        }
    }

    /// The author's Deploy read the kit's secret: its value, as it is or base64 or hex, must be
    /// in none of the plugin's lines (stderr, stdout, their attributes).
    pub(super) async fn secret_leak(&self) -> Check {
        let author = &self.author;
        let reads = author.reads.load(std::sync::atomic::Ordering::Relaxed);
        if reads == 0 {
            return check(
                "secret-leak",
                Outcome::Skip,
                "the plugin's Deploy read no secret; name one in the kit file's `params:` as your \
                 plugin expects (any name reads a value the kit makes up)",
            );
        }
        if let Some(shown) = self.leaked_in.first() {
            return check(
                "secret-leak",
                Outcome::Fail,
                format!(
                    "the secret the plugin read ({reads} read(s)) was in what it answered the \
                     kit (see `{shown}`, where it shows as [the secret]): an error or a \
                     target's message is stored and shown — never put a secret's value in one"
                ),
            );
        }
        // What the plugin wrote during the call has arrived by now or very soon.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let forms = leaked_forms(&author.value);
        let names = ["its value", "its value in base64", "its value in hex"];
        for line in self.capture.lines() {
            let text = format!(
                "{} {}",
                line.message,
                serde_json::to_string(&line.attrs).unwrap_or_default()
            );
            if let Some(i) = forms.iter().position(|f| text.contains(f.as_str())) {
                let shown = forms.iter().fold(line.message.clone(), |m, f| {
                    m.replace(f.as_str(), "[the secret]")
                });
                return check(
                    "secret-leak",
                    Outcome::Fail,
                    format!(
                        "the secret the plugin's Deploy read ({reads} read(s)) is in its log \
                         line ({}): {shown:?} — never log a secret's value; manent redacts what \
                         reaches it, but another host, a debug log or the plugin's own files \
                         would keep it",
                        names[i]
                    ),
                );
            }
        }
        check(
            "secret-leak",
            Outcome::Pass,
            format!(
                "the plugin's Deploy read a secret ({reads} read(s)); its value (as it is, base64, \
                 hex) is in none of its lines"
            ),
        )
    }

    /// The author's Deploy, given the kit file's `slow:` params, is cancelled mid-call: its
    /// code must stop within [`CANCEL_BOUND`]. When it stops is read from the line the SDKs log
    /// as a call ends (`call ended`, naming its idempotency key).
    pub(super) async fn cancellation(&self, remote: &Remote, speaks_end: bool) -> Check {
        let Some(slow) = self.spec.slow.clone() else {
            return check(
                "cancellation",
                Outcome::Skip,
                "give `slow:` params in the kit file that make your Deploy take more than a \
                 second (the templates' `delay_ms`): the kit cancels a Deploy with them and \
                 times how long your code runs on",
            );
        };
        if !speaks_end {
            return check(
                "cancellation",
                Outcome::Skip,
                format!(
                    "the plugin logs no `{}` line naming the call's idempotency_key when a call \
                     ends (manent's SDKs do; docs/plugins.md): the kit cannot see when a \
                     cancelled Deploy stops",
                    sdk::CALL_ENDED
                ),
            );
        }
        let mut req = self.request("cancel", 1, &self.spec.artifact.version, None);
        req.params = slow;
        let key = req.idempotency_key.clone();
        let early = tokio::time::timeout(CANCEL_AFTER, remote.deploy(&req)).await;
        if let Ok(answer) = early {
            return check(
                "cancellation",
                Outcome::Skip,
                format!(
                    "the Deploy with the `slow:` params answered before the kit cancelled it at \
                     {} ms ({}): give params that make it take longer",
                    ms(CANCEL_AFTER),
                    outcome_kind(&answer)
                ),
            );
        }
        let ended = |l: &LogLine| l.message == sdk::CALL_ENDED && key_of(l) == Some(key.as_str());
        match self.capture.wait_until(ended, CANCEL_BOUND).await {
            Some((_, took)) => {
                let mut c = check(
                    "cancellation",
                    Outcome::Pass,
                    format!(
                        "the plugin's Deploy (`slow:` params) stopped {} ms after the host \
                         cancelled it",
                        ms(took)
                    ),
                );
                c.ms = Some(ms(took));
                c
            }
            None => check(
                "cancellation",
                Outcome::Fail,
                format!(
                    "the host cancelled the plugin's Deploy (`slow:` params) after {} ms and it \
                     was still running {}s later (no `{}` line for {key}): a cancelled call must \
                     stop (Go: watch ctx.Done() instead of time.Sleep; Python: let \
                     CancelledError through and never time.sleep; Rust: never block the task)",
                    ms(CANCEL_AFTER),
                    CANCEL_BOUND.as_secs(),
                    sdk::CALL_ENDED
                ),
            ),
        }
    }

    /// The lines the plugin logged during the author's Deploy (between `from` and a moment
    /// after `to`, epoch ms), whether it succeeded or not, must name the call's deployment: the engine can give an untagged
    /// line to a deployment only while no other deployment's call is in flight.
    pub(super) async fn call_logs(&self, from: i64, to: i64) -> Check {
        // What the plugin wrote just before it answered arrives a moment after.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let until = to + 300;
        let lines: Vec<LogLine> = self
            .capture
            .lines()
            .into_iter()
            // The SDK's own end-of-call line, and stray stdout (the `stdout` check's).
            .filter(|l| {
                l.at >= from
                    && l.at <= until
                    && l.message != sdk::CALL_ENDED
                    && !l.message.contains("wrote to stdout after the handshake")
            })
            .collect();
        if lines.is_empty() {
            return check(
                "call-logs",
                Outcome::Skip,
                "the plugin's Deploy logged no line during the kit's call",
            );
        }
        let wrong = lines
            .iter()
            .find(|l| l.deployment_id.as_deref() != Some(self.run.as_str()));
        match wrong {
            None => check(
                "call-logs",
                Outcome::Pass,
                format!(
                    "{} line(s) logged during Deploy, each naming the call's deployment",
                    lines.len()
                ),
            ),
            Some(l) => check(
                "call-logs",
                Outcome::Fail,
                format!(
                    "{:?} was logged during Deploy naming {}: `manent logs` of a deployment \
                     shows only the lines that name it — log through the call's logger (Go: \
                     req.Log() / req.TargetLog(t); Python: req.log / req.target_log(t); Rust: \
                     the SDK's logger in the call's task) or add a deployment_id attribute",
                    l.message,
                    match &l.deployment_id {
                        Some(d) => format!("deployment {d}, not the call's {}", self.run),
                        None => "no deployment".into(),
                    }
                ),
            ),
        }
    }
}
