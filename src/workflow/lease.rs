//! One engine per database (design/durable-workflows.md B.9): an exclusive `flock` on `<db>.lock`, which the kernel releases
//! when the holder dies, even by `kill -9`. The file names the holder for the next one's error.
//! It is the engine user's, created with the engine's file mode (never through a symbolic link).

use std::fs::{File, OpenOptions, TryLockError};

use crate::sys::files::{Refused, Trust};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// Why the lease could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another engine holds it.
    #[error(
        "another manent engine is running on {db}: pid {pid} on host {host} (since {since}). \
         Stop it, or let it do the work: `manent deploy`, `cancel` and `resume` hand their work \
         to a running engine"
    )]
    Held {
        db: String,
        pid: String,
        host: String,
        since: String,
    },
    /// Another engine holds it and is still starting (it has not written who it is).
    #[error(
        "another manent engine is starting on {db}; try again in a moment, or let it do the work"
    )]
    Starting { db: String },
    /// The lock file could not be used.
    #[error("cannot use the lock file {path}: {reason}")]
    Io { path: String, reason: String },
    /// The lock file or its directory is not the engine user's alone.
    #[error(transparent)]
    Refused(#[from] Refused),
}

impl LeaseError {
    /// The same error naming the database as the operator knows it (a shared PostgreSQL's URL,
    /// not the local lock's path beside the configuration).
    pub fn naming(self, database: &str) -> LeaseError {
        match self {
            LeaseError::Held {
                pid, host, since, ..
            } => LeaseError::Held {
                db: database.to_owned(),
                pid,
                host,
                since,
            },
            LeaseError::Starting { .. } => LeaseError::Starting {
                db: database.to_owned(),
            },
            other => other,
        }
    }
}

/// The held lease; dropping it releases the lock.
#[derive(Debug)]
pub struct Lease {
    _file: File,
}

impl Lease {
    /// The lock file's path for a database.
    pub fn lock_path(db: &Path) -> PathBuf {
        let mut p = db.as_os_str().to_owned();
        p.push(".lock");
        PathBuf::from(p)
    }

    /// Takes the lease without waiting; the lock file and its directory must pass `trust`'s
    /// checks (they are created to pass them).
    pub fn acquire(db: &Path, trust: &Trust) -> Result<Lease, LeaseError> {
        let path = Lease::lock_path(db);
        let io = |e: std::io::Error| LeaseError::Io {
            path: path.display().to_string(),
            reason: e.to_string(),
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            trust.ensure_dir(dir, "the database's directory")?;
        }
        let mut file = trust.open_file(&path, "the lock file", true)?;
        // Held for an instant by a reader that looks where /proc/locks cannot be read: a few
        // tries before another engine is said to hold it.
        let mut tried = file.try_lock();
        for _ in 0..5 {
            if !matches!(tried, Err(TryLockError::WouldBlock)) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            tried = file.try_lock();
        }
        match tried {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                // The holder writes who it is right after it takes the lock: give it a moment.
                let mut text = String::new();
                for _ in 0..40 {
                    text.clear();
                    let _ = file.rewind();
                    let _ = file.read_to_string(&mut text);
                    if text.contains("pid=") {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(25));
                }
                if !text.contains("pid=") {
                    return Err(LeaseError::Starting {
                        db: db.display().to_string(),
                    });
                }
                let field = |k: &str| {
                    text.split_whitespace()
                        .find_map(|w| w.strip_prefix(k).map(str::to_owned))
                        .unwrap_or_else(|| "?".to_owned())
                };
                return Err(LeaseError::Held {
                    db: db.display().to_string(),
                    pid: field("pid="),
                    host: field("host="),
                    since: field("since="),
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        let since = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
        let stamp = format!(
            "pid={} host={} since={since}\n",
            std::process::id(),
            crate::sys::hostname()
        );
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        file.write_all(stamp.as_bytes()).map_err(io)?;
        file.sync_all().map_err(io)?;
        Ok(Lease { _file: file })
    }

    /// The pid and host the lock file names: the engine that took the lease last (it may have
    /// gone since). Reads the file without touching the lock, so it never makes an engine that
    /// is starting at the same moment fail to take it.
    pub fn stamp(db: &Path) -> Option<(u32, String)> {
        let text = std::fs::read_to_string(Lease::lock_path(db)).ok()?;
        let field = |k: &str| {
            text.split_whitespace()
                .find_map(|w| w.strip_prefix(k).map(str::to_owned))
        };
        Some((field("pid=")?.parse().ok()?, field("host=")?))
    }

    /// Whether process `pid` holds the lease on `db` now, by the kernel's list of file locks
    /// (`/proc/locks`); `None` when that list cannot be read.
    pub fn held_by(db: &Path, pid: u32) -> Option<bool> {
        let file = FileId::of(&std::fs::metadata(Lease::lock_path(db)).ok()?);
        let locks = kernel_locks()?;
        if locks.lines().any(|l| lock_line(l) == Some((pid, file))) {
            return Some(true);
        }
        // Not listed: the list is read in pieces and may have missed it; a second reading
        // decides (by this very process, never by whoever else holds the lock now).
        let again = kernel_locks()?;
        Some(again.lines().any(|l| lock_line(l) == Some((pid, file))))
    }

    /// True when an engine holds the lease on `db` now. The kernel's list of file locks says
    /// so without touching the lock; when it does not list it (the list is read in pieces, and
    /// on a busy machine a lock can move between two of them), the lock is taken for an instant
    /// — which an engine starting at that moment rides out ([`Lease::acquire`] tries again).
    pub fn is_held(db: &Path) -> bool {
        let path = Lease::lock_path(db);
        let Ok(meta) = std::fs::metadata(&path) else {
            return false;
        };
        if let Some(locks) = kernel_locks() {
            let file = FileId::of(&meta);
            if locks
                .lines()
                .any(|l| lock_line(l).is_some_and(|(_, f)| f == file))
            {
                return true;
            }
        }
        let Ok(file) = OpenOptions::new().read(true).write(true).open(&path) else {
            return false;
        };
        match file.try_lock() {
            Ok(()) => {
                let _ = file.unlock();
                false
            }
            Err(_) => true,
        }
    }
}

/// The kernel's list of file locks (`/proc/locks`). It is read a page at a time, so on a busy
/// machine a lock may be missed: what it lists is held, what it does not may still be.
fn kernel_locks() -> Option<String> {
    std::fs::read_to_string("/proc/locks").ok()
}

/// A file as the kernel's lock list names it: its device (major, minor) and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    major: u32,
    minor: u32,
    inode: u64,
}

impl FileId {
    fn of(meta: &std::fs::Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        let dev = meta.dev();
        FileId {
            major: libc::major(dev),
            minor: libc::minor(dev),
            inode: meta.ino(),
        }
    }
}

/// `1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF` → (4242, fd:01 inode 1234567); the
/// device is hexadecimal, the inode decimal.
fn lock_line(line: &str) -> Option<(u32, FileId)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.get(1) != Some(&"FLOCK") {
        return None;
    }
    let pid = f.get(4)?.parse().ok()?;
    let mut id = f.get(5)?.split(':');
    let major = u32::from_str_radix(id.next()?, 16).ok()?;
    let minor = u32::from_str_radix(id.next()?, 16).ok()?;
    let inode = id.next()?.parse().ok()?;
    Some((
        pid,
        FileId {
            major,
            minor,
            inode,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lease_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("m.db");
        let trust = Trust::private();
        let first = Lease::acquire(&db, &trust).unwrap();
        let err = Lease::acquire(&db, &trust).unwrap_err().to_string();
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        assert!(err.contains(&crate::sys::hostname()), "{err}");
        assert_eq!(
            Lease::stamp(&db),
            Some((std::process::id(), crate::sys::hostname()))
        );
        if let Some(held) = Lease::held_by(&db, std::process::id()) {
            assert!(held, "the kernel lists this process's lock");
        }
        assert!(Lease::is_held(&db));
        drop(first);
        assert!(!Lease::is_held(&db));
        if let Some(held) = Lease::held_by(&db, std::process::id()) {
            assert!(!held, "released");
        }
        Lease::acquire(&db, &trust).unwrap();
        use std::os::unix::fs::MetadataExt;
        let mode = std::fs::metadata(Lease::lock_path(&db)).unwrap().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn the_kernels_lock_lines_are_read() {
        assert_eq!(
            lock_line("1: FLOCK  ADVISORY  WRITE 4242 fd:1a:1234567 0 EOF"),
            Some((
                4242,
                FileId {
                    major: 0xfd,
                    minor: 0x1a,
                    inode: 1_234_567
                }
            ))
        );
        // A process waiting for the lock does not hold it.
        assert_eq!(
            lock_line("1: -> FLOCK  ADVISORY  WRITE 4243 fd:1a:1234567 0 EOF"),
            None
        );
        assert_eq!(
            lock_line("2: POSIX  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF"),
            None
        );
    }
}
