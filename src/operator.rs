//! Who is acting, as the kernel knows it: the real user (uid → name), or the person behind
//! `sudo` when the real user is root and `SUDO_UID` agrees with `SUDO_USER`; and the ssh client
//! address of this session's own sshd. What the environment says beyond that (`USER`, a
//! `SUDO_USER` a non-root user set, an `SSH_CONNECTION` no sshd of ours holds) is recorded as
//! claimed, never as who acted. Every operator action is journaled with it.

pub mod session;

/// The person at the keyboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    /// The real user's name, or the sudo user's when sudo vouches for it; a claim the kernel
    /// does not back follows in parentheses (`nobody (claimed SUDO_USER=alice)`).
    pub name: String,
    /// The ssh client address this session's sshd is connected to, or `ADDR (claimed)` when
    /// only `SSH_CONNECTION` says so.
    pub client: Option<String>,
}

/// Characters a reason may not hold, besides control characters: bidirectional overrides and
/// isolates (U+202E turns `evil.sh` into what reads as another name), zero-width and invisible
/// separators (U+200B, U+2060, U+FEFF…), and line or paragraph separators (U+2028, U+2029),
/// all of which make what others read in their terminal differ from what was written.
pub fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{180E}'
        | '\u{200B}'..='\u{200F}'
        | '\u{2028}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}'
        | '\u{3164}' | '\u{FEFF}' | '\u{FFA0}'
        | '\u{FFF9}'..='\u{FFFB}'
        | '\u{E0000}'..='\u{E007F}')
}

/// Why `reason` cannot be journaled: the one text an operator writes that others read in their
/// terminals (the journal, a lock's refusal, notifications) is one line of visible text of at
/// most 500 characters.
pub fn check_reason(reason: &str) -> Result<(), String> {
    if let Some(c) = reason.chars().find(|c| c.is_control() || invisible(*c)) {
        return Err(format!(
            "a reason is one line of visible text: {} is refused (line breaks, tabs, escape \
             sequences, bidirectional overrides and invisible characters would make what others \
             read differ from what you wrote)",
            if c.is_control() {
                format!("{c:?}")
            } else {
                format!("U+{:04X}", u32::from(c))
            }
        ));
    }
    if reason.chars().count() > 500 {
        return Err("a reason is at most 500 characters".into());
    }
    Ok(())
}

/// The operator's name from the real uid and the sudo variables: `SUDO_USER` is who acted only
/// when the real user is root (sudo makes it so) and `SUDO_UID` is that user's uid.
fn identify(
    real_uid: u32,
    sudo_user: Option<&str>,
    sudo_uid: Option<&str>,
    name_of: impl Fn(u32) -> Option<String>,
    uid_of: impl Fn(&str) -> Option<u32>,
) -> String {
    let real = name_of(real_uid).unwrap_or_else(|| format!("uid {real_uid}"));
    let Some(claimed) = sudo_user else {
        return real;
    };
    let agrees = real_uid == 0
        && sudo_uid
            .and_then(|u| u.parse::<u32>().ok())
            .is_some_and(|u| uid_of(claimed) == Some(u));
    if agrees {
        claimed.to_owned()
    } else {
        format!("{real} (claimed SUDO_USER={})", claimed.escape_debug())
    }
}

impl Operator {
    /// This process's operator, from the kernel (see the module's documentation).
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let name = identify(
            crate::sys::uid(),
            var("SUDO_USER").as_deref(),
            var("SUDO_UID").as_deref(),
            |uid| crate::sys::account::user_by_id(uid).map(|u| u.name),
            |name| crate::sys::account::user_by_name(name).map(|u| u.uid),
        );
        let ssh = var("SSH_CONNECTION");
        let client = session::client(ssh.as_deref(), &session::sshd_connections());
        Operator { name, client }
    }

    /// The person alone, without what they claimed: whose lock is whose.
    pub fn person(name: &str) -> &str {
        name.split_once(" (claimed").map_or(name, |(p, _)| p)
    }

    /// `name` or `name from client`.
    pub fn display(&self) -> String {
        match &self.client {
            Some(c) => format!("{} from {c}", self.name),
            None => self.name.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_of(uid: u32) -> Option<String> {
        [(0, "root"), (1000, "alice"), (65534, "nobody")]
            .iter()
            .find(|(u, _)| *u == uid)
            .map(|(_, n)| (*n).to_owned())
    }

    fn uid_of(name: &str) -> Option<u32> {
        [("root", 0), ("alice", 1000), ("nobody", 65534)]
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, u)| *u)
    }

    #[test]
    fn a_reason_that_would_read_otherwise_than_written_is_refused() {
        assert!(check_reason("rollback: 502s on checkout").is_ok());
        assert!(check_reason("Ünïcödé ✓ déploiement").is_ok());
        for bad in [
            "a\u{202E}hs.live",
            "x\u{2028}y",
            "zero\u{200B}width",
            "\u{FEFF}bom",
            "a\nb",
            "\u{1b}[2J",
        ] {
            let err = check_reason(bad).unwrap_err();
            assert!(err.contains("one line of visible text"), "{bad:?}: {err}");
        }
        assert!(check_reason("\u{202E}").unwrap_err().contains("U+202E"));
        assert!(check_reason(&"x".repeat(501)).is_err());
    }

    #[test]
    fn sudo_is_believed_only_when_it_made_the_real_user_root_and_the_uids_agree() {
        let id = |uid, user, sudo_uid| identify(uid, user, sudo_uid, name_of, uid_of);
        assert_eq!(id(1000, None, None), "alice");
        assert_eq!(id(0, Some("alice"), Some("1000")), "alice");
        // A variable anyone can set: the real user, with what they claimed.
        assert_eq!(
            id(65534, Some("alice"), Some("1000")),
            "nobody (claimed SUDO_USER=alice)"
        );
        assert_eq!(
            id(0, Some("alice"), Some("0")),
            "root (claimed SUDO_USER=alice)"
        );
        assert_eq!(id(0, Some("alice"), None), "root (claimed SUDO_USER=alice)");
        assert_eq!(id(4242, None, None), "uid 4242");
        assert_eq!(
            Operator::person("nobody (claimed SUDO_USER=alice)"),
            "nobody"
        );
        assert_eq!(Operator::person("alice"), "alice");
    }
}
