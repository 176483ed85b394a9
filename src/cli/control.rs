//! Verbs that steer a deployment: cancel, pause, resume, retry, skip, abort. Each goes through
//! the one operator-command sender (the console's too): a command the deployment does not take
//! where it is now is refused with the reason and exit code 2, and nothing is journaled. Resume,
//! retry and abort then run the deployment (here, or in the engine that holds the database) and
//! follow it to its end.

use std::path::Path;

use serde::Serialize;

use super::follow::{self, Expect, Runner};
use super::output::{self, Out};
use super::{ControlArgs, RetryArgs, SkipArgs, exit};
use crate::deploy::command::{CommandError, OperatorCommand};
use crate::deploy::records::JournalEntry;
use crate::deploy::state::DeploymentState;
use crate::engine::request::{Asked, Requests};
use crate::operator::Operator;

#[derive(Serialize)]
struct Sent<'a> {
    deployment: &'a str,
    command: &'a str,
    message: &'a str,
}

/// How a taken command is acknowledged.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ack {
    /// A line on stdout.
    Line,
    /// JSON on stdout.
    Json,
    /// A note on stderr (stdout carries the summary of what follows).
    Note,
}

/// Sends `cmd`; `Ok(config)` once taken, `Err(code)` when refused (said on stderr).
async fn send(
    config_path: &Path,
    id: &str,
    cmd: &OperatorCommand,
    reason: Option<&str>,
    ack: Ack,
    out: &mut Out,
) -> Result<crate::config::Config, u8> {
    let (config, store) = output::open(config_path, out).await?;
    let operator = Operator::from_env();
    let requests = Requests::new(&config, &*store, &operator, None);
    match requests.operate(id, cmd, reason).await {
        Ok(acted) => {
            match ack {
                Ack::Json => out.json(&Sent {
                    deployment: id,
                    command: cmd.action(),
                    message: &acted.message,
                }),
                Ack::Line => out.line(&acted.message),
                Ack::Note => out.note(format!("manent: {}", acted.message)),
            }
            Ok(config)
        }
        Err(e @ (CommandError::NotFound(_) | CommandError::Refused(_))) => {
            out.error(e);
            Err(exit::BAD_INPUT)
        }
        Err(e) => {
            out.error(e);
            Err(exit::ENGINE)
        }
    }
}

fn ack(json: bool) -> Ack {
    if json { Ack::Json } else { Ack::Line }
}

/// `manent cancel`
pub async fn cancel(config_path: &Path, a: &ControlArgs, out: &mut Out) -> u8 {
    let cmd = OperatorCommand::Cancel;
    match send(
        config_path,
        &a.deployment,
        &cmd,
        a.reason.as_deref(),
        ack(a.json.json),
        out,
    )
    .await
    {
        Ok(_) => exit::OK,
        Err(code) => code,
    }
}

/// `manent pause`
pub async fn pause(config_path: &Path, a: &ControlArgs, out: &mut Out) -> u8 {
    let cmd = OperatorCommand::Pause;
    steer(
        config_path,
        &a.deployment,
        &cmd,
        a.reason.as_deref(),
        a.json.json,
        out,
    )
    .await
}

/// A canary's `promote`, `revert`, `weight` or `back`: sent, then the canary is run (here, or
/// in the engine that holds the database) and followed to its next pause for an operator
/// (exit 7) or its end.
pub async fn canary(
    config_path: &Path,
    id: &str,
    cmd: &OperatorCommand,
    reason: Option<&str>,
    json: bool,
    out: &mut Out,
) -> u8 {
    let expect = if *cmd == OperatorCommand::Revert {
        Expect::Revert
    } else {
        Expect::End
    };
    if *cmd == OperatorCommand::Revert
        && let Some(code) = revert_left(config_path, id, reason, json, out).await
    {
        return code;
    }
    steer_and_follow(
        config_path,
        Steer {
            id,
            cmd,
            reason,
            verbose: false,
            json,
            expect,
        },
        out,
    )
    .await
}

/// A canary that ended failed with its candidate still in a pool (an operator abandoned it):
/// its revert is a run of its own, followed to its end. `None` when `id` is not one.
async fn revert_left(
    config_path: &Path,
    id: &str,
    reason: Option<&str>,
    json: bool,
    out: &mut Out,
) -> Option<u8> {
    let (config, store) = match output::open(config_path, out).await {
        Ok(t) => t,
        Err(code) => return Some(code),
    };
    let v = output::view(&*store, id, out).await.ok()?;
    let left = v.kind == crate::deploy::state::Kind::Canary
        && !v.status.is_live()
        && v.state == DeploymentState::Failed
        && v.canary
            .as_ref()
            .and_then(|c| c.status.routing.as_ref())
            .is_some_and(|r| !r.retired);
    if !left {
        return None;
    }
    let operator = Operator::from_env();
    let asked = Asked {
        reason,
        force: false,
    };
    let started = Requests::new(&config, &*store, &operator, None)
        .revert_left(id, asked)
        .await;
    drop(store);
    match started {
        Ok(s) => {
            out.note(format!(
                "manent: {id} left its candidate in traffic: {} takes it out of every pool",
                s.id()
            ));
            Some(run_and_follow(&config, s.id(), false, json, Expect::Revert, out).await)
        }
        Err(e) => {
            out.error(e);
            Some(exit::BAD_INPUT)
        }
    }
}

/// Sends `cmd` and says what it does.
async fn steer(
    config_path: &Path,
    id: &str,
    cmd: &OperatorCommand,
    reason: Option<&str>,
    json: bool,
    out: &mut Out,
) -> u8 {
    match send(config_path, id, cmd, reason, ack(json), out).await {
        Ok(_) => exit::OK,
        Err(code) => code,
    }
}

/// `manent skip DEP TARGET`: on a deployment that waits for a decision, the skip moves it on,
/// so it is followed to its end; otherwise the target is left out when its batch comes.
pub async fn skip(config_path: &Path, a: &SkipArgs, out: &mut Out) -> u8 {
    let cmd = OperatorCommand::Skip {
        target: a.target.clone(),
    };
    let awaiting = match output::open(config_path, out).await {
        Ok((_, store)) => match output::view(&*store, &a.deployment, out).await {
            Ok(v) => v.state == DeploymentState::FailedAwaiting,
            Err(code) => return code,
        },
        Err(code) => return code,
    };
    if awaiting {
        return steer_and_follow(
            config_path,
            Steer {
                id: &a.deployment,
                cmd: &cmd,
                reason: a.reason.as_deref(),
                verbose: false,
                json: a.json.json,
                expect: Expect::End,
            },
            out,
        )
        .await;
    }
    match send(
        config_path,
        &a.deployment,
        &cmd,
        a.reason.as_deref(),
        ack(a.json.json),
        out,
    )
    .await
    {
        Ok(_) => exit::OK,
        Err(code) => code,
    }
}

/// `manent retry DEP [TARGET…]`: runs the failed targets again and follows the deployment.
pub async fn retry(config_path: &Path, a: &RetryArgs, out: &mut Out) -> u8 {
    let cmd = OperatorCommand::Retry {
        targets: a.targets.clone(),
    };
    // Retrying a canary's revert whose router call failed ends the way `revert` does: ending
    // reverted is what was asked (exit 0, as `revert` would).
    let (_, store) = match output::open(config_path, out).await {
        Ok(t) => t,
        Err(code) => return code,
    };
    let v = match output::view(&*store, &a.deployment, out).await {
        Ok(v) => v,
        Err(code) => return code,
    };
    drop(store);
    // An operator's revert only: one its analysis decided still ends as reverted by it.
    let retrying_revert = v.router_failed()
        && v.canary.as_ref().is_some_and(|c| {
            c.status
                .decisions
                .last()
                .is_some_and(|d| d.action == "revert" && d.by != "analysis" && d.by != "manent")
        });
    let expect = if retrying_revert {
        Expect::Revert
    } else {
        Expect::End
    };
    steer_and_follow(
        config_path,
        Steer {
            id: &a.deployment,
            cmd: &cmd,
            reason: a.reason.as_deref(),
            verbose: a.verbose,
            json: a.json.json,
            expect,
        },
        out,
    )
    .await
}

/// `manent abort DEP`: stops a deploy and rolls back what it changed, and follows it.
pub async fn abort(config_path: &Path, a: &ControlArgs, out: &mut Out) -> u8 {
    let cmd = OperatorCommand::Abort;
    steer_and_follow(
        config_path,
        Steer {
            id: &a.deployment,
            cmd: &cmd,
            reason: a.reason.as_deref(),
            verbose: a.verbose,
            json: a.json.json,
            expect: Expect::Abort,
        },
        out,
    )
    .await
}

/// `manent resume`: continues a paused, cancelled, dead-lettered or interrupted deployment and
/// follows it.
pub async fn resume(config_path: &Path, a: &ControlArgs, out: &mut Out) -> u8 {
    let (config, store) = match output::open(config_path, out).await {
        Ok(t) => t,
        Err(code) => return code,
    };
    let v = match output::view(&*store, &a.deployment, out).await {
        Ok(v) => v,
        Err(code) => return code,
    };
    // A deployment no engine runs only needs one: starting it here resumes it.
    if v.state_with(output::engine_running(&config, &*store).await) == DeploymentState::Interrupted
        && v.status.is_live()
    {
        let entry = JournalEntry::by(
            &Operator::from_env(),
            "resume",
            Some(&v.id),
            Some(&v.subject()),
            None,
            a.reason.as_deref(),
        );
        if let Err(e) = crate::deploy::records::Records::journal(&*store, entry).await {
            out.error(e);
            return exit::ENGINE;
        }
        drop(store);
        return run_and_follow(&config, &v.id, a.verbose, a.json.json, Expect::End, out).await;
    }
    drop(store);
    let cmd = OperatorCommand::Resume;
    steer_and_follow(
        config_path,
        Steer {
            id: &a.deployment,
            cmd: &cmd,
            reason: a.reason.as_deref(),
            verbose: a.verbose,
            json: a.json.json,
            expect: Expect::End,
        },
        out,
    )
    .await
}

/// A steering verb's request and how its deployment is followed after.
struct Steer<'a> {
    /// The deployment.
    id: &'a str,
    /// What is asked of it.
    cmd: &'a OperatorCommand,
    /// The operator's reason, journaled.
    reason: Option<&'a str>,
    /// Its plugins' log lines too.
    verbose: bool,
    /// The summary as JSON.
    json: bool,
    /// What ending the command expects.
    expect: Expect,
}

/// Sends `steer`'s command, then follows the deployment until what it expects.
async fn steer_and_follow(config_path: &Path, steer: Steer<'_>, out: &mut Out) -> u8 {
    let Steer {
        id,
        cmd,
        reason,
        verbose,
        json,
        expect,
    } = steer;
    // The acknowledgement goes to stderr: stdout carries the deployment's summary.
    let config = match send(config_path, id, cmd, reason, Ack::Note, out).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    run_and_follow(&config, id, verbose, json, expect, out).await
}

async fn run_and_follow(
    config: &crate::config::Config,
    id: &str,
    verbose: bool,
    json: bool,
    expect: Expect,
    out: &mut Out,
) -> u8 {
    let runner = match Runner::start(config, out).await {
        Ok(r) => r,
        Err(code) => return code,
    };
    follow::to_end(runner, id, verbose, json, expect, out).await
}

#[derive(Serialize)]
struct Locked<'a> {
    locked: bool,
    lock: Option<&'a crate::deploy::records::Lock>,
    message: &'a str,
}

/// The subject of `app env`, or exit 2 naming what does not exist.
fn subject_of(
    config: &crate::config::Config,
    app: &str,
    env: &str,
    out: &mut Out,
) -> Option<String> {
    match config.environment(app, env) {
        Ok(spec) => Some(spec.subject()),
        Err(e) => {
            out.error(e);
            None
        }
    }
}

/// `manent lock APP ENV --reason … [--for 2h]`
pub async fn lock(config_path: &Path, a: &super::LockArgs, out: &mut Out) -> u8 {
    let (config, store) = match output::open(config_path, out).await {
        Ok(x) => x,
        Err(code) => return code,
    };
    let Some(subject) = subject_of(&config, &a.app, &a.env, out) else {
        return exit::BAD_INPUT;
    };
    if a.reason.trim().is_empty() {
        out.error("a lock needs a reason (`--reason \"…\"`): it is what the next deployer reads");
        return exit::BAD_INPUT;
    }
    let operator = Operator::from_env();
    let now = crate::sys::now_ms();
    let expires_at = a
        .duration
        .map(|d| now.saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)));
    let lock = crate::deploy::records::Lock {
        subject: subject.clone(),
        operator: operator.name.clone(),
        client: operator.client.clone(),
        host: crate::sys::hostname(),
        reason: a.reason.trim().to_owned(),
        since: now,
        expires_at,
    };
    let until = match expires_at {
        Some(at) => format!("until {}", output::time(at)),
        None => "until `manent unlock`".to_owned(),
    };
    let entry = JournalEntry::by(
        &operator,
        "lock",
        None,
        Some(&subject),
        Some(until.clone()),
        Some(&lock.reason),
    );
    match store.lock(lock.clone(), a.force, entry).await {
        Ok(Ok(())) => {
            let message = format!("{subject} locked {until}: {}", lock.reason);
            if a.json.json {
                out.json(&Locked {
                    locked: true,
                    lock: Some(&lock),
                    message: &message,
                });
            } else {
                out.line(message);
            }
            exit::OK
        }
        Ok(Err(held)) => {
            out.error(format!(
                "{subject} is already locked by {} since {}: {} — `--force` replaces their lock",
                held.owner(),
                output::time(held.since),
                held.reason
            ));
            exit::BAD_INPUT
        }
        Err(e) => output::db_error(&output::database_shown(&config), &e, out),
    }
}

/// `manent unlock APP ENV`
pub async fn unlock(config_path: &Path, a: &super::UnlockArgs, out: &mut Out) -> u8 {
    let (config, store) = match output::open(config_path, out).await {
        Ok(x) => x,
        Err(code) => return code,
    };
    let Some(subject) = subject_of(&config, &a.app, &a.env, out) else {
        return exit::BAD_INPUT;
    };
    if a.force && a.reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
        out.error(
            "`--force` lifts another operator's lock and needs `--reason \"…\"`: it is journaled \
             for them to read",
        );
        return exit::BAD_INPUT;
    }
    let operator = Operator::from_env();
    let mut entry = JournalEntry::by(
        &operator,
        "unlock",
        None,
        Some(&subject),
        None,
        a.reason.as_deref(),
    );
    let held = crate::deploy::records::Records::locks(&*store, entry.at)
        .await
        .ok()
        .and_then(|l| l.into_iter().find(|l| l.subject == subject));
    entry.detail = held
        .as_ref()
        .map(|l| format!("the lock of {} ({})", l.owner(), l.reason));
    if a.force
        && held
            .as_ref()
            .is_some_and(|l| l.held_by_another(&operator.name))
    {
        entry.action = "unlock --force".into();
    }
    match store.unlock(&subject, a.force, entry).await {
        Ok(Err(held)) => {
            out.error(format!(
                "{subject} is locked by {} since {}: {} — it is theirs to lift; `--force --reason \
                 \"…\"` lifts it anyway (journaled)",
                held.owner(),
                output::time(held.since),
                held.reason
            ));
            exit::BAD_INPUT
        }
        Ok(Ok(lifted)) => {
            let message = match &lifted {
                Some(l) => format!(
                    "{subject} unlocked (it was locked by {}: {})",
                    l.owner(),
                    l.reason
                ),
                None => format!("{subject} was not locked"),
            };
            if a.json.json {
                out.json(&Locked {
                    locked: false,
                    lock: lifted.as_ref(),
                    message: &message,
                });
            } else {
                out.line(message);
            }
            exit::OK
        }
        Err(e) => output::db_error(&output::database_shown(&config), &e, out),
    }
}
