//! One engine per database (B.9): an exclusive `flock` on `<db>.lock`, which the kernel releases
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
        match file.try_lock() {
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

    /// True when an engine holds the lease on `db` now. (It takes the lock for an instant when
    /// nobody holds it.)
    pub fn is_held(db: &Path) -> bool {
        let Ok(file) = OpenOptions::new()
            .read(true)
            .write(true)
            .open(Lease::lock_path(db))
        else {
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
        drop(first);
        Lease::acquire(&db, &trust).unwrap();
        use std::os::unix::fs::MetadataExt;
        let mode = std::fs::metadata(Lease::lock_path(&db)).unwrap().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
