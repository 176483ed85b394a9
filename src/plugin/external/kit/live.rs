//! What is live after the kit's calls: the same idempotency key again, a dry run, CurrentRelease
//! and a rollback, each read back with CurrentRelease where the plugin has it.

use super::*;
use crate::plugin::types::TargetStatus;

impl Kit {
    pub(super) async fn idempotency(
        &self,
        remote: &Remote,
        first: &Request,
        inspect: bool,
    ) -> Check {
        let mut again = first.clone();
        again.attempt = 2;
        let r = match self.bounded(remote.deploy(&again)).await {
            Ok(r) => r,
            Err(e) => {
                return check(
                    "idempotency",
                    Outcome::Fail,
                    format!(
                        "the same idempotency key again (attempt 2, as after a crash) failed: {e}; \
                         a retried step must find the work done, not fail"
                    ),
                );
            }
        };
        if let Err(why) = self.answers_every_target(&r) {
            return check("idempotency", Outcome::Fail, format!("attempt 2 {why}"));
        }
        if let Some(t) = r
            .targets
            .iter()
            .find(|t| !matches!(t.status, TargetStatus::Deployed | TargetStatus::Unchanged))
        {
            return check(
                "idempotency",
                Outcome::Fail,
                format!(
                    "the same key again left {} {}: {}",
                    t.host,
                    t.status.as_str(),
                    t.message
                ),
            );
        }
        // Terraform's "empty plan after apply": the key's work is done, so nothing is.
        let redone: Vec<&str> = r
            .targets
            .iter()
            .filter(|t| t.status == TargetStatus::Deployed)
            .map(|t| t.host.as_str())
            .collect();
        if !redone.is_empty() {
            if let Some(why) = &self.spec.not_idempotent {
                return check(
                    "idempotency",
                    Outcome::Skip,
                    format!(
                        "the kit file says the plugin cannot tell a key's work is done ({why}): \
                         a step retried after a crash deploys again"
                    ),
                );
            }
            return check(
                "idempotency",
                Outcome::Fail,
                format!(
                    "the same idempotency key again (attempt 2, as after a crash) answered \
                     `deployed` on {}: the work was done again — answer `unchanged` when the \
                     key's work is done, remembered where a restart finds it (or say in the \
                     kit file `not_idempotent: WHY`)",
                    redone.join(", ")
                ),
            );
        }
        if !inspect {
            return check(
                "idempotency",
                Outcome::Pass,
                "the same key twice answered unchanged on every target (no CurrentRelease to \
                 read back what is live)",
            );
        }
        match self.live(remote, "idempotency-read").await {
            Ok(live) if live.iter().all(|(_, v)| v.is_empty()) => check(
                "idempotency",
                Outcome::Pass,
                "the same key twice answered unchanged on every target (CurrentRelease cannot \
                 tell what is live)",
            ),
            Ok(live) if live.iter().all(|(_, v)| *v == first.artifact.version) => check(
                "idempotency",
                Outcome::Pass,
                format!(
                    "the same key twice answered unchanged; CurrentRelease reads {} on every \
                     target",
                    first.artifact.version
                ),
            ),
            Ok(live) => check(
                "idempotency",
                Outcome::Fail,
                format!(
                    "after deploying {} twice CurrentRelease reads {live:?}",
                    first.artifact.version
                ),
            ),
            Err(PluginError::Unimplemented(_)) => check(
                "idempotency",
                Outcome::Pass,
                "the same key twice answered unchanged on every target (CurrentRelease answers \
                 UNIMPLEMENTED for this request: nothing to read back)",
            ),
            Err(e) => check(
                "idempotency",
                Outcome::Fail,
                format!("CurrentRelease failed: {e}"),
            ),
        }
    }

    /// What CurrentRelease reads, per host.
    pub(super) async fn live(
        &self,
        remote: &Remote,
        key: &str,
    ) -> Result<Vec<(String, String)>, PluginError> {
        let req = self.request(key, 1, &self.spec.artifact.version, None);
        let inspector = remote
            .release_inspector()
            .ok_or_else(|| PluginError::Unimplemented("no CurrentRelease".into()))?;
        let r = self.bounded(inspector.current_release(&req)).await?;
        Ok(r.into_iter().map(|t| (t.host, t.version)).collect())
    }

    pub(super) async fn dry_run(&self, remote: &Remote, p: &Process, deployed: bool) -> Check {
        let Some(dr) = remote.dry_runner() else {
            return check("dry-run", Outcome::Skip, "`dry_run` not announced");
        };
        let req = self.request("dry-run", 1, "2.0.0-dry-run", None);
        match self.bounded(dr.dry_run(&req)).await {
            Err(PluginError::Unimplemented(_)) => {
                check("dry-run", Outcome::Skip, UNIMPLEMENTED_HERE)
            }
            Err(e) if self.died(p).await => check(
                "dry-run",
                Outcome::Fail,
                format!("the plugin died answering DryRun: {e}"),
            ),
            // After a deploy that worked, a plan must work too.
            Err(e) if deployed => check(
                "dry-run",
                Outcome::Fail,
                format!(
                    "DryRun failed after the kit's deploy worked ({} error: {e}): a plan of \
                     what the plugin can deploy must not fail",
                    kind(&e)
                ),
            ),
            Err(e) => check(
                "dry-run",
                Outcome::Pass,
                format!("answers with a {} error: {e}", kind(&e)),
            ),
            Ok(r) => {
                if let Err(why) = self.answers_every_target(&r) {
                    return check("dry-run", Outcome::Fail, why);
                }
                if deployed {
                    // What was just deployed, planned again: no change on any target.
                    let live = self.request("dry-run-live", 1, &self.spec.artifact.version, None);
                    match self.bounded(dr.dry_run(&live)).await {
                        Ok(plan) => {
                            let changes: Vec<String> = plan
                                .targets
                                .iter()
                                .filter(|t| t.status != TargetStatus::Unchanged)
                                .map(|t| {
                                    format!("{} {} ({})", t.host, t.status.as_str(), t.message)
                                })
                                .collect();
                            if !changes.is_empty() {
                                return check(
                                    "dry-run",
                                    Outcome::Fail,
                                    format!(
                                        "a dry run of {}, the version just deployed, plans a \
                                         change: {} — a plan of what is live must be empty \
                                         (`unchanged` on every target)",
                                        self.spec.artifact.version,
                                        changes.join("; ")
                                    ),
                                );
                            }
                        }
                        Err(e) => {
                            return check(
                                "dry-run",
                                Outcome::Fail,
                                format!(
                                    "a dry run of {}, the version just deployed, failed: {e}",
                                    self.spec.artifact.version
                                ),
                            );
                        }
                    }
                }
                if !(deployed && p.capabilities.has(Capability::CurrentRelease)) {
                    return check(
                        "dry-run",
                        Outcome::Pass,
                        if deployed {
                            "plans every target; a plan of the live version is empty"
                        } else {
                            "plans every target"
                        },
                    );
                }
                match self.live(remote, "dry-run-read").await {
                    Ok(live) if live.iter().any(|(_, v)| v == "2.0.0-dry-run") => check(
                        "dry-run",
                        Outcome::Fail,
                        format!("a dry run of 2.0.0-dry-run made it live: {live:?}"),
                    ),
                    Ok(_) => check(
                        "dry-run",
                        Outcome::Pass,
                        "plans every target, changes nothing (CurrentRelease read back), and a \
                         plan of the live version is empty",
                    ),
                    Err(PluginError::Unimplemented(_)) => {
                        check("dry-run", Outcome::Pass, "plans every target")
                    }
                    Err(e) => check(
                        "dry-run",
                        Outcome::Fail,
                        format!("CurrentRelease after a dry run failed: {e}"),
                    ),
                }
            }
        }
    }

    pub(super) async fn current_release(&self, remote: &Remote, p: &Process) -> Check {
        if !p.capabilities.has(Capability::CurrentRelease) {
            return check(
                "current-release",
                Outcome::Skip,
                "`current_release` not announced",
            );
        }
        match self.live(remote, "current-release").await {
            Ok(live) => {
                let asked: Vec<&str> = self.spec.targets.iter().map(|t| t.host.as_str()).collect();
                match live.iter().find(|(h, _)| !asked.contains(&h.as_str())) {
                    Some((h, _)) => check(
                        "current-release",
                        Outcome::Fail,
                        format!("answered for host {h:?}, which the request did not name"),
                    ),
                    None => check(
                        "current-release",
                        Outcome::Pass,
                        live.iter()
                            .map(|(h, v)| {
                                format!("{h}: {}", if v.is_empty() { "unknown" } else { v })
                            })
                            .collect::<Vec<_>>()
                            .join(", "),
                    ),
                }
            }
            Err(PluginError::Unimplemented(_)) => {
                check("current-release", Outcome::Skip, UNIMPLEMENTED_HERE)
            }
            Err(e) if self.died(p).await => check(
                "current-release",
                Outcome::Fail,
                format!("the plugin died answering CurrentRelease: {e}"),
            ),
            Err(e) => check(
                "current-release",
                Outcome::Pass,
                format!("answers with a {} error: {e}", kind(&e)),
            ),
        }
    }

    pub(super) async fn rollback(&self, remote: &Remote, p: &Process, deployed: bool) -> Check {
        let Some(rb) = remote.rollbacker() else {
            return check("rollback", Outcome::Skip, "`rollback` not announced");
        };
        if !deployed {
            return check(
                "rollback",
                Outcome::Skip,
                "Deploy did not succeed on the kit's request: nothing to roll back to",
            );
        }
        let next = self.request("deploy-2", 1, "2.0.0-conformance", None);
        if let Err(e) = self.bounded(remote.deploy(&next)).await {
            return check(
                "rollback",
                Outcome::Fail,
                format!("deploying a second release to roll back from failed: {e}"),
            );
        }
        let to = Release {
            version: self.spec.artifact.version.clone(),
            artifact: self.spec.artifact.clone(),
            deployment_id: self.run.clone(),
        };
        let back = self.request("rollback", 1, "2.0.0-conformance", None);
        match self.bounded(rb.rollback(&back, &to)).await {
            Err(PluginError::Unimplemented(_)) => {
                return check("rollback", Outcome::Skip, UNIMPLEMENTED_HERE);
            }
            Err(e) => return check("rollback", Outcome::Fail, format!("Rollback failed: {e}")),
            Ok(_) => {}
        }
        if !p.capabilities.has(Capability::CurrentRelease) {
            return check(
                "rollback",
                Outcome::Pass,
                "rolled back from 2.0.0-conformance (no CurrentRelease to read back)",
            );
        }
        match self.live(remote, "rollback-read").await {
            Ok(live) if live.iter().all(|(_, v)| v.is_empty()) => check(
                "rollback",
                Outcome::Pass,
                "rolled back from 2.0.0-conformance (CurrentRelease cannot tell what is live)",
            ),
            Ok(live) if live.iter().all(|(_, v)| *v == to.version) => check(
                "rollback",
                Outcome::Pass,
                format!(
                    "rolled back from 2.0.0-conformance; CurrentRelease reads {}",
                    to.version
                ),
            ),
            Err(PluginError::Unimplemented(_)) => check(
                "rollback",
                Outcome::Pass,
                "rolled back from 2.0.0-conformance (CurrentRelease answers UNIMPLEMENTED for \
                 this request: nothing to read back)",
            ),
            Ok(live) => check(
                "rollback",
                Outcome::Fail,
                format!(
                    "after a rollback to {} CurrentRelease reads {live:?}",
                    to.version
                ),
            ),
            Err(e) => check(
                "rollback",
                Outcome::Fail,
                format!("CurrentRelease after the rollback failed: {e}"),
            ),
        }
    }
}
