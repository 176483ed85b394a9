//! The calls, in order (`Kit::calls`), and the two that need no deploy: `Supports` and the
//! optional calls a plugin did not announce.

use super::*;

impl Kit {
    pub(super) async fn calls(&mut self, p: &Arc<Process>) {
        let remote = Remote::new(self.host.clone(), p.capabilities.clone());
        let announced = |c: Capability| p.capabilities.has(c);
        let supports = self.supports(p).await;
        self.push(supports);
        let unannounced = self.unannounced(p).await;
        self.push(unannounced);
        let version = self.spec.artifact.version.clone();

        let honours = self.validate(&remote, p, &version).await;
        let c = self.invalid_input(&remote, p, &version).await;
        self.push(c);

        // Deploy, then the same idempotency key again. Every call with the kit file's params
        // is offered a secret under any name it reads (`Kit::request`): whether its value
        // reaches a log line is checked.
        let first = self.request("deploy", 1, &version, None);
        let called = crate::sys::now_ms();
        let deployed = self.bounded(remote.deploy(&first)).await;
        let answered = crate::sys::now_ms();
        let c = self.deploy(p, &version, &deployed).await;
        let deploy_ok = c.outcome == Outcome::Pass;
        self.push(c);
        let c = self.call_logs(called, answered).await;
        self.push(c);
        // Whether the plugin says when a call ends (manent's SDKs do): the cancellation check
        // needs it.
        let speaks_end = self
            .capture
            .wait_until(
                |l| l.message == sdk::CALL_ENDED && key_of(l) == Some(&first.idempotency_key),
                Duration::from_millis(500),
            )
            .await
            .is_some();
        let c = if deploy_ok {
            self.idempotency(&remote, &first, announced(Capability::CurrentRelease))
                .await
        } else {
            check(
                "idempotency",
                Outcome::Skip,
                "Deploy did not succeed on the kit's request (see `deploy`)",
            )
        };
        self.push(c);
        let c = self.secret_leak().await;
        self.push(c);
        let c = self.dry_run(&remote, p, deploy_ok).await;
        self.push(c);
        let c = self.current_release(&remote, p).await;
        self.push(c);
        let c = self.rollback(&remote, p, deploy_ok).await;
        self.push(c);

        // What the conformance protocol makes a plugin do.
        let c = if honours {
            self.errors(&remote).await
        } else {
            check("errors", Outcome::Skip, NOT_HONOURED)
        };
        self.push(c);
        let c = if honours {
            self.logs(&remote).await
        } else {
            check("logs", Outcome::Skip, NOT_HONOURED)
        };
        self.push(c);
        let c = if honours {
            self.secret(&remote).await
        } else {
            check("secret", Outcome::Skip, NOT_HONOURED)
        };
        self.push(c);
        if honours {
            let probe = self.request(
                "print",
                1,
                &version,
                Some(serde_json::json!({"print": "conformance stdout probe"})),
            );
            let _ = self.bounded(remote.deploy(&probe)).await;
        }
        let c = self.cancellation(&remote, speaks_end).await;
        self.push(c);
        let c = self.crash(&remote, p, honours).await;
        self.push(c);
        let c = self.stdout(honours).await;
        self.push(c);
        let c = self.shutdown().await;
        self.push(c);
    }

    /// The kit's own request, then one it must refuse: whether the plugin honours the
    /// conformance protocol (its refusal says so).
    pub(super) async fn validate(&mut self, remote: &Remote, p: &Process, version: &str) -> bool {
        let plain = self.request("validate", 1, version, None);
        let c = match self.bounded(remote.validate(&plain)).await {
            Ok(()) => check("validate", Outcome::Pass, "accepts the kit's request"),
            Err(e) if self.died(p).await => check(
                "validate",
                Outcome::Fail,
                format!("the plugin died answering Validate: {e}"),
            ),
            Err(e) => check(
                "validate",
                Outcome::Pass,
                format!(
                    "answers the kit's request with a refusal: {e} (give the kit a request it \
                     accepts with --config)"
                ),
            ),
        };
        self.push(c);
        let bad = self.request(
            "refuse",
            1,
            version,
            Some(serde_json::json!({"refuse": "the kit sent a request to refuse"})),
        );
        let mut honours = false;
        let c = match self.bounded(remote.validate(&bad)).await {
            Err(PluginError::Permanent(m)) if m.contains("conformance:") => {
                honours = true;
                check(
                    "validate-refuses",
                    Outcome::Pass,
                    "a request it refuses fails at once, as permanent (not retried)",
                )
            }
            Err(PluginError::Failed(m)) if m.contains("conformance:") => {
                honours = true;
                check(
                    "validate-refuses",
                    Outcome::Fail,
                    format!(
                        "a refused request came back retryable ({m}): the engine would retry a \
                         request that can never pass; refuse with INVALID_ARGUMENT or ABORTED"
                    ),
                )
            }
            _ => check("validate-refuses", Outcome::Skip, NOT_HONOURED),
        };
        self.push(c);
        honours
    }

    /// The kit's Deploy must succeed: one result per target of the request.
    pub(super) async fn deploy(
        &self,
        p: &Process,
        version: &str,
        deployed: &Result<DeployResult, PluginError>,
    ) -> Check {
        match deployed {
            Ok(r) => {
                match self.answers_every_target(r).and_then(|statuses| {
                    use crate::plugin::types::TargetStatus;
                    match r.targets.iter().find(|t| {
                        !matches!(t.status, TargetStatus::Deployed | TargetStatus::Unchanged)
                    }) {
                        Some(t) => Err(format!(
                            "Deploy answered {} {} on the kit's request: {} (every target must end \
                         deployed or unchanged; give the kit targets it can deploy to in its \
                         file)",
                            t.host,
                            t.status.as_str(),
                            t.message
                        )),
                        None => Ok(statuses),
                    }
                }) {
                    Ok(statuses) => check(
                        "deploy",
                        Outcome::Pass,
                        format!(
                            "{version} on {} targets: {statuses}",
                            self.spec.targets.len()
                        ),
                    ),
                    Err(why) => check("deploy", Outcome::Fail, why),
                }
            }
            Err(e) if self.died(p).await => check(
                "deploy",
                Outcome::Fail,
                format!("the plugin died answering Deploy: {e}"),
            ),
            // The kit's checks of what is live need a Deploy that works: a stub that refuses
            // every deploy is not a plugin yet.
            Err(e) => check(
                "deploy",
                Outcome::Fail,
                format!(
                    "Deploy failed on the kit's request with a {} error: {e} (implement Deploy, \
                     or give the kit targets, params and options it can deploy with in its \
                     file: manent plugin test --config FILE)",
                    kind(e)
                ),
            ),
        }
    }

    pub(super) async fn supports(&self, p: &Process) -> Check {
        let mut client = p.deployer.clone();
        let call = client.supports(v1::SupportsRequest {
            artifact: Some((&self.spec.artifact).into()),
        });
        match tokio::time::timeout(self.spec.call_timeout, call).await {
            Ok(Ok(r)) => check(
                "supports",
                Outcome::Pass,
                format!(
                    "says it {} the kit's artifact ({})",
                    if r.into_inner().supported {
                        "supports"
                    } else {
                        "does not support"
                    },
                    self.spec.artifact.kind
                ),
            ),
            // Optional: manent deploys with the plugin a descriptor names and never needs it.
            Ok(Err(s)) if s.code() == tonic::Code::Unimplemented => check(
                "supports",
                Outcome::Skip,
                "Supports is not implemented (UNIMPLEMENTED): a descriptor that names this \
                 plugin alone still deploys with it, but in a `deploy.plugins:` list it is never \
                 chosen — implement Supports to say which artifacts it can deploy",
            ),
            Ok(Err(s)) => check(
                "supports",
                Outcome::Fail,
                format!(
                    "Supports failed: {:?} {} (an error counts as \"not supported\": in a \
                     `deploy.plugins:` list this plugin is never chosen)",
                    s.code(),
                    s.message()
                ),
            ),
            Err(_) => check("supports", Outcome::Fail, "Supports did not answer"),
        }
    }

    /// Every optional call it did not announce answers UNIMPLEMENTED.
    pub(super) async fn unannounced(&self, p: &Process) -> Check {
        let mut wrong = Vec::new();
        let mut asked = Vec::new();
        for (call, cap) in KNOWN {
            if p.capabilities.has(cap) || cap == Capability::ParallelTargets {
                continue;
            }
            asked.push(call);
            let mut c = p.deployer.clone();
            let req = v1::DeployRequest::default();
            let weight = v1::WeightRequest::default();
            let answer = async {
                match call {
                    "DryRun" => c.dry_run(req).await.map(|_| ()),
                    "CurrentRelease" => c.current_release(req).await.map(|_| ()),
                    "Rollback" => c.rollback(v1::RollbackRequest::default()).await.map(|_| ()),
                    "PrepareSlots" => c.prepare_slots(req).await.map(|_| ()),
                    "SetCandidateWeight" => c.set_candidate_weight(weight).await.map(|_| ()),
                    "RouteTesters" => c.route_testers(req).await.map(|_| ()),
                    _ => c.scale_candidate(weight).await.map(|_| ()),
                }
            };
            // A plugin that never answers an optional call must not hold the kit for ever.
            let Ok(answer) = tokio::time::timeout(self.spec.call_timeout, Box::pin(answer)).await
            else {
                wrong.push(format!(
                    "{call} did not answer within {} (it should answer UNIMPLEMENTED at once)",
                    humantime::format_duration(self.spec.call_timeout)
                ));
                continue;
            };
            match answer {
                Err(s) if s.code() == tonic::Code::Unimplemented => {}
                Err(s) => wrong.push(format!("{call}: {:?} {}", s.code(), s.message())),
                Ok(()) => wrong.push(format!(
                    "{call} answered although `{}` was not announced (announce it, or the \
                     engine never calls it)",
                    cap.as_str()
                )),
            }
        }
        if asked.is_empty() {
            check(
                "unannounced",
                Outcome::Skip,
                "it announces every optional capability",
            )
        } else if wrong.is_empty() {
            check(
                "unannounced",
                Outcome::Pass,
                format!("UNIMPLEMENTED from {}", asked.join(", ")),
            )
        } else {
            check(
                "unannounced",
                Outcome::Fail,
                format!(
                    "an optional call it did not announce must answer UNIMPLEMENTED: {}",
                    wrong.join("; ")
                ),
            )
        }
    }
}
