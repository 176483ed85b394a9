//! Who a process is, as the kernel says it: user and group ids from `/proc/<pid>/status`, their
//! names from the password and group databases. Nothing here reads an environment variable a
//! user can set (`USER`, `SUDO_USER`): identity is what the kernel records.

/// A process's user and group ids: real and effective, and its supplementary groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ids {
    /// Real user id: who started it (sudo changes it, su and setuid binaries may not).
    pub uid: u32,
    /// Effective user id: whose rights it acts with.
    pub euid: u32,
    /// Effective group id.
    pub egid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

/// The ids of process `pid` (`None`: this process), from `/proc/<pid>/status`.
pub fn ids_of(pid: Option<u32>) -> Option<Ids> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/status"),
        None => "/proc/self/status".to_owned(),
    };
    parse_status(&std::fs::read_to_string(path).ok()?)
}

/// `Uid:`, `Gid:` and `Groups:` of a `/proc/<pid>/status` text.
fn parse_status(status: &str) -> Option<Ids> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|rest| {
                rest.split_whitespace()
                    .filter_map(|n| n.parse::<u32>().ok())
                    .collect::<Vec<_>>()
            })
    };
    let uid = field("Uid:")?;
    let gid = field("Gid:")?;
    Some(Ids {
        uid: *uid.first()?,
        euid: *uid.get(1)?,
        egid: *gid.get(1)?,
        groups: field("Groups:").unwrap_or_default(),
    })
}

/// This process's ids. (`/proc` is always there on the Linux hosts manent runs on; without it
/// nothing here can be trusted, so the caller refuses.)
pub fn me() -> Option<Ids> {
    ids_of(None)
}

/// A password database entry: name, uid and primary gid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Login name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
}

fn users() -> Vec<User> {
    let text = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?.to_owned();
            let uid = f.nth(1)?.parse().ok()?;
            let gid = f.next()?.parse().ok()?;
            Some(User { name, uid, gid })
        })
        .collect()
}

/// The user with id `uid`.
pub fn user_by_id(uid: u32) -> Option<User> {
    users().into_iter().find(|u| u.uid == uid)
}

/// The user named `name`.
pub fn user_by_name(name: &str) -> Option<User> {
    users().into_iter().find(|u| u.name == name)
}

/// `name`, or `uid N` when the password database has no entry for it.
pub fn user_shown(uid: u32) -> String {
    user_by_id(uid).map_or_else(
        || format!("uid {uid}"),
        |u| format!("{} (uid {uid})", u.name),
    )
}

/// A group database entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Its name.
    pub name: String,
    /// Its id.
    pub gid: u32,
    /// Members listed in the group database (users whose primary group it is are members too).
    pub members: Vec<String>,
}

fn groups() -> Vec<Group> {
    let text = std::fs::read_to_string("/etc/group").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?.to_owned();
            let gid = f.nth(1)?.parse().ok()?;
            let members = f
                .next()
                .unwrap_or_default()
                .split(',')
                .filter(|m| !m.is_empty())
                .map(str::to_owned)
                .collect();
            Some(Group { name, gid, members })
        })
        .collect()
}

/// The group named `name`.
pub fn group_by_name(name: &str) -> Option<Group> {
    groups().into_iter().find(|g| g.name == name)
}

/// `name`, or `gid N` when the group database has no entry for it.
pub fn group_shown(gid: u32) -> String {
    groups()
        .into_iter()
        .find(|g| g.gid == gid)
        .map_or_else(|| format!("gid {gid}"), |g| g.name)
}

/// True when `gid` is user `uid`'s private group (a group of the user's own name whose only
/// member is that user, as systems with user-private groups and a umask of 002 make): its
/// write bit lets no one else write. (Debian's OpenSSH accepts such modes too.)
pub fn private_group(uid: u32, gid: u32) -> bool {
    let Some(user) = user_by_id(uid) else {
        return false;
    };
    let Some(group) = groups().into_iter().find(|g| g.gid == gid) else {
        return false;
    };
    user.gid == gid
        && group.name == user.name
        && group.members.iter().all(|m| *m == user.name)
        && users().iter().filter(|u| u.gid == gid).count() == 1
}

impl Group {
    /// True when user `uid` belongs to this group (listed, or its primary group).
    pub fn has_member(&self, uid: u32) -> bool {
        user_by_id(uid).is_some_and(|u| u.gid == self.gid || self.members.contains(&u.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_real_and_effective_ids_from_the_status_text() {
        let status = "Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t100\t27\t27\t27\nGroups:\t4 27 100 \n";
        assert_eq!(
            parse_status(status),
            Some(Ids {
                uid: 1000,
                euid: 0,
                egid: 27,
                groups: vec![4, 27, 100],
            })
        );
        assert_eq!(parse_status("Name:\tx\n"), None);
    }

    #[test]
    fn a_private_group_is_the_users_own_and_no_one_elses() {
        // nobody's primary group is nogroup, shared by name with no one: not private.
        if let Some(nobody) = user_by_name("nobody") {
            assert!(!private_group(nobody.uid, nobody.gid));
        }
        // Another user's primary group is not root's private group.
        assert!(!private_group(0, 65534));
    }

    #[test]
    fn this_process_has_ids_and_root_has_a_name() {
        let me = me().unwrap();
        assert!(user_by_id(0).is_some_and(|u| u.name == "root"));
        assert!(!user_shown(me.euid).is_empty());
    }
}
