//! What the kernel says of a running process, from `/proc/<pid>`: its parent, command name,
//! start time, executable and user. A pid alone names nothing for long (pids are reused), so
//! whatever acts on a process it did not just start checks these first.

/// One process, as `/proc/<pid>` describes it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcInfo {
    /// Its pid.
    pub pid: u32,
    /// Its parent's pid.
    pub ppid: u32,
    /// Its process group.
    pub pgid: u32,
    /// The kernel's command name (`comm`, at most 15 bytes).
    pub comm: String,
    /// Start time in clock ticks since boot (with the boot id, it names the process for good).
    pub start: u64,
    /// Its real user id.
    pub uid: u32,
    /// Its effective user id.
    pub euid: u32,
    /// The executable it runs, when readable (another user's is not, unless we are root).
    pub exe: Option<std::path::PathBuf>,
    /// It has exited and waits for its parent to reap it: it runs nothing.
    pub zombie: bool,
}

/// `/proc/<pid>`'s view of process `pid`, or None when it is gone.
pub fn info(pid: u32) -> Option<ProcInfo> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (comm, state, ppid, pgid, start) = parse_stat(&stat)?;
    let ids = super::account::ids_of(Some(pid))?;
    Some(ProcInfo {
        pid,
        ppid,
        pgid,
        comm,
        start,
        uid: ids.uid,
        euid: ids.euid,
        exe: std::fs::read_link(format!("/proc/{pid}/exe")).ok(),
        zombie: state == "Z",
    })
}

/// `pid (comm) state ppid pgrp … starttime …`: comm may hold spaces and parentheses, so the
/// fields are counted from the last `)`.
fn parse_stat(stat: &str) -> Option<(String, String, u32, u32, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_owned();
    let f: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // After comm: state(0) ppid(1) pgrp(2) … starttime(19).
    Some((
        comm,
        (*f.first()?).to_owned(),
        f.get(1)?.parse().ok()?,
        f.get(2)?.parse().ok()?,
        f.get(19)?.parse().ok()?,
    ))
}

/// This boot's id: start times count from it.
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|b| b.trim().to_owned())
}

/// This process and its ancestors, nearest first, up to (and with) pid 1.
pub fn ancestry() -> Vec<ProcInfo> {
    let mut chain = Vec::new();
    let mut pid = std::process::id();
    while let Some(p) = info(pid) {
        let next = p.ppid;
        chain.push(p);
        if next == 0 || chain.len() > 256 {
            break;
        }
        pid = next;
    }
    chain
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_name_with_spaces_and_parentheses_is_read_whole() {
        let stat = "42 (a (b) c) S 7 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0";
        assert_eq!(
            parse_stat(stat),
            Some(("a (b) c".to_owned(), "S".to_owned(), 7, 42, 12345))
        );
    }

    #[test]
    fn this_process_knows_its_executable_and_its_parents() {
        let me = info(std::process::id()).unwrap();
        assert_eq!(me.exe, std::env::current_exe().ok());
        let chain = ancestry();
        assert_eq!(chain[0].pid, std::process::id());
        assert!(chain.len() >= 2, "{chain:?}");
    }
}
