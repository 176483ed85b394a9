//! What an operator asks of a deployment ([`OperatorCommand`]), typed, and how it travels in
//! the mailbox ([`Delivered`]): the command itself under its topic, with the reason.

use std::fmt;

use super::{Topic, names};
use crate::workflow::store::Message;

/// What an operator asks of a deployment.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperatorCommand {
    /// Stop before the next batch.
    Pause,
    /// Continue a paused deployment, or a stopped one (cancelled, dead-lettered) from its last
    /// checkpoint.
    Resume,
    /// Stop at the next step boundary; targets being deployed finish.
    Cancel,
    /// Run failed targets again (all of them when `targets` is empty), with new attempts.
    Retry { targets: Vec<String> },
    /// Leave a target out: it keeps its release.
    Skip { target: String },
    /// Stop and roll back what the deployment changed (a canary: revert).
    Abort,
    /// A canary: end the current pause; `full` skips the remaining steps.
    Promote { full: bool },
    /// A canary: take the candidate out of traffic; the stable release stays.
    Revert,
    /// A canary: send this percentage of traffic to the candidate, and hold.
    Weight(u32),
    /// A canary: go back to the previous step's weight, and hold.
    Back,
    /// A canary whose router failed: end it failed where its traffic is (a reason is required).
    Abandon,
}

/// What an operator's command carries in the mailbox, under its topic: the command itself, as
/// typed, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Delivered {
    /// The command.
    pub command: OperatorCommand,
    /// The operator's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A command as manent 0.1 stored it before the command was typed (loose fields beside its
/// topic): a deployment parked for days may hold one when a newer manent resumes it.
#[derive(Debug, Default, serde::Deserialize)]
struct Loose {
    #[serde(default)]
    targets: Vec<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    weight: Option<u32>,
    #[serde(default)]
    full: bool,
}

/// The mailbox payload as written: the typed command, and beside it the loose fields an
/// earlier manent reads (an engine not yet upgraded, on a shared database, runs the command
/// it was sent as meant).
#[derive(serde::Serialize)]
struct Wire<'a> {
    #[serde(flatten)]
    delivered: &'a Delivered,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    targets: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    weight: Option<u32>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    full: bool,
}

impl Delivered {
    /// The payload a message carries it in.
    pub fn payload(&self) -> String {
        let targets = match &self.command {
            OperatorCommand::Retry { targets } => targets.iter().map(String::as_str).collect(),
            OperatorCommand::Skip { target } => vec![target.as_str()],
            _ => Vec::new(),
        };
        let wire = Wire {
            delivered: self,
            targets,
            weight: match self.command {
                OperatorCommand::Weight(w) => Some(w),
                _ => None,
            },
            full: self.command == OperatorCommand::Promote { full: true },
        };
        serde_json::to_string(&wire).unwrap_or_else(|_| "{}".into())
    }

    /// The command `msg` carries; one stored with loose fields reads as its topic's command
    /// (an earlier manent sent one target per skip, and always a weight's value). A message
    /// that decodes neither way, or a weight without its value, is no command.
    pub fn of(msg: &Message) -> Option<Delivered> {
        if let Ok(d) = serde_json::from_str::<Delivered>(&msg.payload) {
            return Some(d);
        }
        let l: Loose = serde_json::from_str(&msg.payload).unwrap_or_default();
        let command = match Topic::parse(&msg.topic)? {
            Topic::Pause => OperatorCommand::Pause,
            Topic::Resume => OperatorCommand::Resume,
            Topic::Retry => OperatorCommand::Retry { targets: l.targets },
            Topic::Skip => OperatorCommand::Skip {
                target: l.targets.into_iter().next()?,
            },
            Topic::Abort => OperatorCommand::Abort,
            Topic::Promote => OperatorCommand::Promote { full: l.full },
            Topic::Revert => OperatorCommand::Revert,
            Topic::Weight => OperatorCommand::Weight(l.weight?),
            Topic::Back => OperatorCommand::Back,
            Topic::Abandon => OperatorCommand::Abandon,
        };
        Some(Delivered {
            command,
            reason: l.reason,
        })
    }

    /// The reason given, or "".
    pub fn why(&self) -> String {
        self.reason.clone().unwrap_or_default()
    }
}

impl OperatorCommand {
    /// The journal's word for it.
    pub fn action(&self) -> &'static str {
        match self {
            OperatorCommand::Pause => "pause",
            OperatorCommand::Resume => "resume",
            OperatorCommand::Cancel => "cancel",
            OperatorCommand::Retry { .. } => "retry",
            OperatorCommand::Skip { .. } => "skip",
            OperatorCommand::Abort => "abort",
            OperatorCommand::Promote { .. } => "promote",
            OperatorCommand::Revert => "revert",
            OperatorCommand::Weight(_) => "weight",
            OperatorCommand::Back => "back",
            OperatorCommand::Abandon => "abandon",
        }
    }

    /// The mailbox topic it is delivered under (None: not delivered, as a cancel).
    pub fn topic(&self) -> Option<Topic> {
        match self {
            OperatorCommand::Pause => Some(Topic::Pause),
            OperatorCommand::Resume => Some(Topic::Resume),
            OperatorCommand::Cancel => None,
            OperatorCommand::Retry { .. } => Some(Topic::Retry),
            OperatorCommand::Skip { .. } => Some(Topic::Skip),
            OperatorCommand::Abort => Some(Topic::Abort),
            OperatorCommand::Promote { .. } => Some(Topic::Promote),
            OperatorCommand::Revert => Some(Topic::Revert),
            OperatorCommand::Weight(_) => Some(Topic::Weight),
            OperatorCommand::Back => Some(Topic::Back),
            OperatorCommand::Abandon => Some(Topic::Abandon),
        }
    }

    /// What it is about, for the journal (`web-3`, `every failed target`, `30%`).
    pub fn detail(&self) -> Option<String> {
        match self {
            OperatorCommand::Retry { targets } if targets.is_empty() => {
                Some("every failed target".into())
            }
            OperatorCommand::Retry { targets } => Some(names(targets)),
            OperatorCommand::Skip { target } => Some(target.clone()),
            OperatorCommand::Promote { full: true } => Some("the remaining steps".into()),
            OperatorCommand::Weight(w) => Some(format!("{w}%")),
            _ => None,
        }
    }
}

impl fmt::Display for OperatorCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.action())?;
        if let Some(d) = self.detail() {
            write!(f, " {d}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(topic: &str, payload: &str) -> Message {
        Message {
            id: "cmd-1".into(),
            destination: "d-1".into(),
            topic: topic.into(),
            payload: payload.into(),
            sender: Some("alice".into()),
            created_at: 0,
            interrupts: false,
        }
    }

    #[test]
    fn a_command_reads_back_as_sent_and_as_an_earlier_manent_stored_it() {
        for command in [
            OperatorCommand::Weight(30),
            OperatorCommand::Promote { full: true },
            OperatorCommand::Retry {
                targets: vec!["web-1".into()],
            },
            OperatorCommand::Skip {
                target: "web-2".into(),
            },
            OperatorCommand::Abandon,
        ] {
            let sent = Delivered {
                command: command.clone(),
                reason: Some("ticket 42".into()),
            };
            let topic = command.topic().unwrap().as_str();
            let back = Delivered::of(&message(topic, &serde_json::to_string(&sent).unwrap()));
            assert_eq!(back, Some(sent), "{command:?}");
        }
        // Loose fields beside the topic, as manent stored them before commands were typed.
        let loose = |topic: &str, payload: &str| {
            Delivered::of(&message(topic, payload)).map(|d| (d.command, d.reason))
        };
        assert_eq!(
            loose("weight", r#"{"weight":40,"reason":"slow"}"#),
            Some((OperatorCommand::Weight(40), Some("slow".into())))
        );
        assert_eq!(
            loose("promote", r#"{"full":true}"#),
            Some((OperatorCommand::Promote { full: true }, None))
        );
        assert_eq!(
            loose("skip", r#"{"targets":["web-3"]}"#),
            Some((
                OperatorCommand::Skip {
                    target: "web-3".into()
                },
                None
            ))
        );
        assert_eq!(
            loose("retry", "{}"),
            Some((OperatorCommand::Retry { targets: vec![] }, None))
        );
        // What cannot be read is no command at all: a weight without one, a skip of nobody.
        assert_eq!(loose("weight", "{}"), None);
        assert_eq!(loose("skip", "{}"), None);
        assert_eq!(loose("nonsense", "{}"), None);
    }

    /// What is written reads back as sent, and carries beside it the loose fields an engine of
    /// an earlier manent reads (on a shared database during an upgrade).
    #[test]
    fn the_payload_written_carries_the_fields_an_earlier_manent_reads() {
        for (command, earlier) in [
            (
                OperatorCommand::Weight(30),
                serde_json::json!({"weight": 30}),
            ),
            (
                OperatorCommand::Promote { full: true },
                serde_json::json!({"full": true}),
            ),
            (
                OperatorCommand::Retry {
                    targets: vec!["web-1".into(), "web-4".into()],
                },
                serde_json::json!({"targets": ["web-1", "web-4"]}),
            ),
            (
                OperatorCommand::Skip {
                    target: "web-2".into(),
                },
                serde_json::json!({"targets": ["web-2"]}),
            ),
            (OperatorCommand::Pause, serde_json::json!({})),
        ] {
            let sent = Delivered {
                command: command.clone(),
                reason: Some("ticket 42".into()),
            };
            let payload = sent.payload();
            let topic = command.topic().unwrap().as_str();
            assert_eq!(
                Delivered::of(&message(topic, &payload)),
                Some(sent),
                "{payload}"
            );
            let written: serde_json::Value = serde_json::from_str(&payload).unwrap();
            assert_eq!(written["reason"], "ticket 42", "{payload}");
            for (k, v) in earlier.as_object().unwrap() {
                assert_eq!(&written[k], v, "{command:?}: {payload}");
            }
        }
    }
}
