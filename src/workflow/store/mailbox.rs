//! Whether the mailbox takes a message, decided the same on every store: a message id already
//! delivered is a duplicate, a workflow that is not running takes nothing, and a guarded
//! command is taken only where the workflow says it takes it ([`ACCEPTS`](super::ACCEPTS)).
//! Each store reads what the decision needs, and writes the message, in its own SQL.

use super::{Message, Sent};

/// Why `m` is not delivered before any guard is read: `duplicate` (its id was delivered
/// already), or the destination's `status` (as stored) is not a running one. None when it may
/// be delivered.
pub fn undeliverable(m: &Message, status: &str, duplicate: bool) -> Option<Sent> {
    if duplicate {
        return Some(Sent::Duplicate);
    }
    if status != "PENDING" && status != "ENQUEUED" {
        return Some(Sent::Rejected(format!(
            "{} is not running (it is {status})",
            m.destination
        )));
    }
    None
}

/// Why a guarded command is refused, given the destination's [`ACCEPTS`](super::ACCEPTS) event (its stored
/// value, if any); None when the workflow takes it where it is now.
pub fn refusal(m: &Message, accepts: Option<&str>) -> Option<String> {
    let accepted: Vec<String> = accepts
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default();
    if accepted.contains(&m.topic) {
        return None;
    }
    Some(format!(
        "{} does not take `{}` where it is now{}",
        m.destination,
        m.topic,
        if accepted.is_empty() {
            String::new()
        } else {
            format!(" (it takes {})", accepted.join(", "))
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(topic: &str) -> Message {
        Message {
            id: "m-1".into(),
            destination: "dep-1".into(),
            topic: topic.into(),
            payload: String::new(),
            sender: None,
            created_at: 0,
            interrupts: false,
        }
    }

    #[test]
    fn a_duplicate_is_said_before_the_status_and_only_a_running_workflow_takes_mail() {
        let m = message("pause");
        assert_eq!(undeliverable(&m, "SUCCESS", true), Some(Sent::Duplicate));
        assert_eq!(undeliverable(&m, "PENDING", false), None);
        assert_eq!(undeliverable(&m, "ENQUEUED", false), None);
        assert_eq!(
            undeliverable(&m, "CANCELLED", false),
            Some(Sent::Rejected(
                "dep-1 is not running (it is CANCELLED)".into()
            ))
        );
    }

    #[test]
    fn a_guarded_command_is_taken_only_where_the_workflow_says_it_takes_it() {
        assert_eq!(
            refusal(&message("pause"), Some(r#"["pause","cancel"]"#)),
            None
        );
        assert_eq!(
            refusal(&message("promote"), Some(r#"["pause","cancel"]"#)).as_deref(),
            Some("dep-1 does not take `promote` where it is now (it takes pause, cancel)")
        );
        assert_eq!(
            refusal(&message("pause"), None).as_deref(),
            Some("dep-1 does not take `pause` where it is now")
        );
    }
}
