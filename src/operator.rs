//! Who is acting: the operator behind `sudo` or the login user, and the ssh client they came
//! from. Every operator action is journaled with it.

use crate::deploy::records::JournalEntry;

/// The person at the keyboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    /// `SUDO_USER`, else `USER`, else the process's user.
    pub name: String,
    /// The client address from `SSH_CONNECTION`, if any.
    pub client: Option<String>,
}

impl Operator {
    /// From the process environment.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Operator {
            name: var("SUDO_USER")
                .or_else(|| var("USER"))
                .or_else(|| var("LOGNAME"))
                .or_else(crate::sys::user_name)
                .unwrap_or_else(|| "unknown".into()),
            client: var("SSH_CONNECTION")
                .and_then(|c| c.split_whitespace().next().map(str::to_owned)),
        }
    }

    /// `name` or `name from client`.
    pub fn display(&self) -> String {
        match &self.client {
            Some(c) => format!("{} from {c}", self.name),
            None => self.name.clone(),
        }
    }

    /// A journal entry for `action` by this operator.
    pub fn journal(
        &self,
        action: &str,
        workflow_id: Option<&str>,
        subject: Option<&str>,
        detail: Option<String>,
        reason: Option<&str>,
    ) -> JournalEntry {
        JournalEntry {
            at: crate::sys::now_ms(),
            operator: self.name.clone(),
            client: self.client.clone(),
            action: action.to_owned(),
            workflow_id: workflow_id.map(str::to_owned),
            subject: subject.map(str::to_owned),
            detail,
            reason: reason.map(str::to_owned),
        }
    }
}
