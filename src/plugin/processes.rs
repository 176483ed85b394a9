//! The processes an engine starts — `exec`'s commands, external plugins — each in a process group
//! of its own, recorded in a directory beside the database for as long as they run. An engine
//! that dies (`kill -9`, a second Ctrl-C) leaves its records behind; the next engine on the
//! database kills those groups before it re-runs anything, so nothing a dead engine started runs
//! beside its own retry. While the engine lives, its children also die with it where Linux
//! allows (`PR_SET_PDEATHSIG`).
//!
//! A record is a claim anyone able to write the directory could forge, so the directory and its
//! records must be the engine user's (checked when it opens), and a record is acted on only when
//! the process it names is still that very process: same boot, same start time, same
//! executable, and the engine user's. Anything else is left alone and said.

use std::collections::BTreeSet;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::sys::files::{Refused, Trust};
use crate::sys::process::{ProcInfo, boot_id, info};

/// Where an engine records its process groups; `none()` records nothing (a plugin's own side).
#[derive(Clone, Default)]
pub struct Processes {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    dir: PathBuf,
    live: Mutex<BTreeSet<u32>>,
    trust: Trust,
}

impl std::fmt::Debug for Processes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Processes")
            .field("dir", &self.inner.as_ref().map(|i| &i.dir))
            .finish()
    }
}

/// A process group being tracked; dropping it (the process ended) forgets it.
#[derive(Debug)]
pub struct Tracked {
    processes: Processes,
    pgid: u32,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(inner) = &self.processes.inner {
            let _ = std::fs::remove_file(inner.dir.join(self.pgid.to_string()));
            if let Ok(mut live) = inner.live.lock() {
                live.remove(&self.pgid);
            }
        }
    }
}

/// What a record says of the group's leader when it started: the boot, its start time, its user
/// and its executable (`BOOT START UID EXE`, the path last: it may hold spaces).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    boot: String,
    start: u64,
    uid: u32,
    exe: PathBuf,
}

impl Record {
    fn of(p: &ProcInfo, boot: &str) -> Record {
        Record {
            boot: boot.to_owned(),
            start: p.start,
            uid: p.euid,
            exe: p.exe.clone().unwrap_or_default(),
        }
    }

    fn parse(text: &str) -> Option<Record> {
        let mut f = text.trim_end_matches('\n').splitn(4, ' ');
        Some(Record {
            boot: f.next()?.to_owned(),
            start: f.next()?.parse().ok()?,
            uid: f.next()?.parse().ok()?,
            exe: PathBuf::from(f.next()?),
        })
    }

    fn line(&self) -> String {
        format!(
            "{} {} {} {}\n",
            self.boot,
            self.start,
            self.uid,
            self.exe.display()
        )
    }
}

/// What to do with a record.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// The group it names still runs what this engine's user started: kill it.
    Kill,
    /// Nothing of it runs any more.
    Gone,
    /// Something runs under its number that it does not describe: left alone, and why.
    Spare(String),
}

/// The decision on `record` of group `pgid`, given this boot, the engine's user, the group's
/// leader now (if alive) and its other members now. A group id is not reused while the group
/// has members, so members started after the recorded leader belong to the recorded group.
fn verdict(
    pgid: u32,
    record: &Record,
    boot: &str,
    me: u32,
    leader: Option<&ProcInfo>,
    members: &[ProcInfo],
) -> Verdict {
    if record.boot != boot {
        return Verdict::Gone;
    }
    if record.uid != me {
        return Verdict::Spare(format!(
            "it says the group ran as uid {}, not as this engine's uid {me}",
            record.uid
        ));
    }
    match leader {
        Some(l) if l.pgid == pgid || members.is_empty() => {
            if l.start != record.start {
                return Verdict::Gone;
            }
            if l.uid != me || l.euid != me {
                return Verdict::Spare(format!(
                    "process {pgid} runs as uid {}, not as this engine's uid {me}",
                    l.euid
                ));
            }
            if l.exe.as_deref() != Some(record.exe.as_path()) || record.exe.as_os_str().is_empty() {
                return Verdict::Spare(format!(
                    "process {pgid} runs {}, not {} as recorded",
                    l.exe.as_ref().map_or_else(
                        || "an executable it cannot read".into(),
                        |e| e.display().to_string()
                    ),
                    record.exe.display()
                ));
            }
            if l.pgid != pgid {
                // The leader left its group: it is no longer what the record names.
                return Verdict::Gone;
            }
            Verdict::Kill
        }
        _ if members.is_empty() => Verdict::Gone,
        _ => {
            // The leader exited and left members behind (a backgrounded child).
            if let Some(m) = members.iter().find(|m| m.uid != me || m.euid != me) {
                return Verdict::Spare(format!(
                    "its member {} ({}) runs as uid {}, not as this engine's uid {me}",
                    m.pid, m.comm, m.euid
                ));
            }
            if let Some(m) = members.iter().find(|m| m.start < record.start) {
                return Verdict::Spare(format!(
                    "its member {} ({}) started before the recorded leader",
                    m.pid, m.comm
                ));
            }
            Verdict::Kill
        }
    }
}

/// The live processes (not zombies) of group `pgid`.
fn members_of(pgid: u32) -> Vec<ProcInfo> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(info)
        .filter(|p| p.pgid == pgid && !p.zombie)
        .collect()
}

/// What [`Processes::reap`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reaped {
    /// Groups killed.
    pub killed: Vec<u32>,
    /// Records not acted on, each with why (its group was not killed).
    pub spared: Vec<String>,
}

impl Processes {
    /// Records nothing.
    pub fn none() -> Self {
        Processes { inner: None }
    }

    /// Records in `dir` (created with the engine's mode if needed; refused when another user
    /// owns it or others may write it).
    pub fn in_dir(dir: PathBuf, trust: &Trust) -> Result<Self, Refused> {
        trust.ensure_dir(&dir, "the processes directory")?;
        Ok(Processes {
            inner: Some(Arc::new(Inner {
                dir,
                live: Mutex::new(BTreeSet::new()),
                trust: trust.clone(),
            })),
        })
    }

    /// Where the records are (none: nothing is recorded).
    pub fn dir(&self) -> Option<&Path> {
        self.inner.as_ref().map(|i| i.dir.as_path())
    }

    /// The directory beside database `db`.
    pub fn beside(db: &Path, trust: &Trust) -> Result<Self, Refused> {
        let mut name = db.file_name().unwrap_or_default().to_os_string();
        name.push(".processes");
        Processes::in_dir(db.with_file_name(name), trust)
    }

    /// Records the process group led by `pgid` (a child started with `process_group(0)`).
    pub fn track(&self, pgid: u32) -> Tracked {
        if let Some(inner) = &self.inner {
            let path = inner.dir.join(pgid.to_string());
            let record = info(pgid).zip(boot_id()).map(|(p, b)| Record::of(&p, &b));
            if let Some(r) = record {
                let _ = std::fs::remove_file(&path);
                let written = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(inner.trust.file_mode())
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&path)
                    .and_then(|mut f| std::io::Write::write_all(&mut f, r.line().as_bytes()));
                if written.is_ok() {
                    // The umask does not apply.
                    use std::os::unix::fs::PermissionsExt;
                    let _ = std::fs::set_permissions(
                        &path,
                        std::fs::Permissions::from_mode(inner.trust.file_mode()),
                    );
                }
            }
            if let Ok(mut live) = inner.live.lock() {
                live.insert(pgid);
            }
        }
        Tracked {
            processes: self.clone(),
            pgid,
        }
    }

    /// SIGKILL to every group this engine started that still runs (it is stopping at once).
    pub fn kill_live(&self) {
        let Some(inner) = &self.inner else { return };
        let live: Vec<u32> = inner
            .live
            .lock()
            .map(|l| l.iter().copied().collect())
            .unwrap_or_default();
        for pgid in live {
            crate::sys::kill_group(pgid);
        }
    }

    /// Kills the process groups a dead engine recorded that are still what it recorded, and
    /// waits until they are gone (up to a few seconds). A record another user owns, or that
    /// others may write, refuses the whole directory: nothing is killed.
    pub fn reap(&self) -> Result<Reaped, Refused> {
        self.kill_records(true)
    }

    /// Kills the process groups recorded that are still what their records say, as [`reap`]
    /// does, leaving the records to the engine (its watchdog: the engine is frozen, not dead).
    ///
    /// [`reap`]: Processes::reap
    pub fn kill_recorded(&self) -> Result<Reaped, Refused> {
        self.kill_records(false)
    }

    fn kill_records(&self, remove: bool) -> Result<Reaped, Refused> {
        let mut reaped = Reaped::default();
        let Some(inner) = &self.inner else {
            return Ok(reaped);
        };
        let Ok(entries) = std::fs::read_dir(&inner.dir) else {
            return Ok(reaped);
        };
        let mut records = Vec::new();
        for e in entries.flatten() {
            let path = e.path();
            // Checked first, all of them: one forged record and none is acted on.
            inner.trust.check_file(&path, "a process record")?;
            records.push(path);
        }
        let boot = boot_id().unwrap_or_default();
        let me = crate::sys::euid();
        for path in records {
            let pgid = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.parse::<u32>().ok());
            let record = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| Record::parse(&t));
            if remove {
                let _ = std::fs::remove_file(&path);
            }
            let (Some(pgid), Some(record)) = (pgid, record) else {
                reaped.spared.push(format!(
                    "{} is not a process record manent wrote{}",
                    path.display(),
                    if remove { "; removed it" } else { "" }
                ));
                continue;
            };
            // A zombie leader has exited (nobody reaped it yet): only its members may run.
            let leader = info(pgid).filter(|l| !l.zombie);
            let members = members_of(pgid);
            match verdict(pgid, &record, &boot, me, leader.as_ref(), &members) {
                Verdict::Kill => {
                    crate::sys::kill_group(pgid);
                    reaped.killed.push(pgid);
                }
                Verdict::Gone => {}
                Verdict::Spare(why) => reaped.spared.push(format!(
                    "did not kill process group {pgid} (record {}): {why}",
                    path.display()
                )),
            }
        }
        // Gone once no member runs (a zombie waits for its parent; it runs nothing).
        let deadline = Instant::now() + Duration::from_secs(5);
        while reaped.killed.iter().any(|g| !members_of(*g).is_empty()) && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(reaped)
    }
}

/// Put before a gated command: wait for a line on stdin (EOF: the engine died before it
/// recorded the command), then take stdin from /dev/null, on the command's first line (its line
/// numbers stay what they were).
const GATE: &str = "IFS= read -r _ || exit 125; exec </dev/null; ";

/// `shell -c command`, held at a gate until [`open_gate`]: the command runs only once its
/// process group is recorded. The shell itself waits at the gate (a POSIX `read`), so the
/// recorded process is the one that runs the command — same pid, group and program, stdin null
/// once it runs. An engine killed between the spawn and the record closes the gate's stdin, so
/// the shell exits and nothing of the command ever ran unrecorded.
pub fn gated(shell: &str, command: &str) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(shell);
    cmd.arg("-c")
        .arg(format!("{GATE}{command}"))
        .stdin(std::process::Stdio::piped());
    cmd
}

/// Lets a [`gated`] command run; call it once its process group is recorded.
pub async fn open_gate(child: &mut tokio::process::Child) -> std::io::Result<()> {
    crate::failpoint::hit("command.spawned", "");
    let mut gate = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("the command's gate is gone"))?;
    tokio::io::AsyncWriteExt::write_all(&mut gate, b"go\n").await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: u32, pgid: u32, start: u64, uid: u32, exe: &str) -> ProcInfo {
        ProcInfo {
            pid,
            ppid: 1,
            pgid,
            comm: "sh".into(),
            start,
            uid,
            euid: uid,
            exe: Some(PathBuf::from(exe)),
            zombie: false,
        }
    }

    fn record(start: u64, uid: u32, exe: &str) -> Record {
        Record {
            boot: "b".into(),
            start,
            uid,
            exe: PathBuf::from(exe),
        }
    }

    #[test]
    fn a_record_round_trips_with_spaces_in_the_path() {
        let r = record(7, 0, "/opt/my plugins/p");
        assert_eq!(Record::parse(&r.line()), Some(r));
        assert_eq!(Record::parse("garbage"), None);
    }

    #[test]
    fn only_the_very_process_recorded_is_killed() {
        let r = record(100, 0, "/usr/bin/dash");
        let leader = proc(42, 42, 100, 0, "/usr/bin/dash");
        assert_eq!(verdict(42, &r, "b", 0, Some(&leader), &[]), Verdict::Kill);
        // Another boot, another start: a reused number.
        assert_eq!(
            verdict(42, &r, "other", 0, Some(&leader), &[]),
            Verdict::Gone
        );
        let later = proc(42, 42, 999, 0, "/usr/bin/dash");
        assert_eq!(verdict(42, &r, "b", 0, Some(&later), &[]), Verdict::Gone);
        // Same start (forged from /proc), another executable or user: spared, with why.
        let other_exe = proc(42, 42, 100, 0, "/usr/sbin/sshd");
        assert!(matches!(
            verdict(42, &r, "b", 0, Some(&other_exe), &[]),
            Verdict::Spare(w) if w.contains("/usr/sbin/sshd")
        ));
        let other_user = proc(42, 42, 100, 65534, "/usr/bin/dash");
        assert!(matches!(
            verdict(42, &r, "b", 0, Some(&other_user), &[]),
            Verdict::Spare(w) if w.contains("uid 65534")
        ));
        // A record that says another user ran it is not this engine's.
        let theirs = record(100, 65534, "/usr/bin/dash");
        assert!(matches!(
            verdict(42, &theirs, "b", 0, Some(&leader), &[]),
            Verdict::Spare(_)
        ));
    }

    #[test]
    fn a_group_whose_leader_exited_is_killed_only_when_every_member_is_ours() {
        let r = record(100, 0, "/usr/bin/dash");
        let child = proc(43, 42, 120, 0, "/usr/bin/sleep");
        assert_eq!(
            verdict(42, &r, "b", 0, None, std::slice::from_ref(&child)),
            Verdict::Kill
        );
        let stranger = proc(44, 42, 130, 65534, "/usr/bin/sleep");
        assert!(matches!(
            verdict(42, &r, "b", 0, None, &[child, stranger]),
            Verdict::Spare(_)
        ));
        assert_eq!(verdict(42, &r, "b", 0, None, &[]), Verdict::Gone);
    }

    #[test]
    fn records_are_private_and_a_foreign_one_refuses_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let trust = Trust::private();
        let p = Processes::in_dir(dir.path().join("p"), &trust).unwrap();
        let me = std::process::id();
        let t = p.track(me);
        let file = dir.path().join("p").join(me.to_string());
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
        let text = std::fs::read_to_string(&file).unwrap();
        let r = Record::parse(&text).unwrap();
        assert_eq!(Some(r.exe), std::env::current_exe().ok());
        drop(t);
        assert!(!file.exists());
        std::fs::write(&file, "forged").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = p.reap().unwrap_err();
        assert_eq!(err.path, file);
    }
}
