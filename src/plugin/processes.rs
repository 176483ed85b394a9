//! The processes an engine starts — `exec`'s commands, external plugins — each in a process group
//! of its own, recorded in a directory beside the database for as long as they run. An engine
//! that dies (`kill -9`, a second Ctrl-C) leaves its records behind; the next engine on the
//! database kills those groups before it re-runs anything, so nothing a dead engine started runs
//! beside its own retry. While the engine lives, its children also die with it where Linux
//! allows (`PR_SET_PDEATHSIG`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where an engine records its process groups; `none()` records nothing (a plugin's own side).
#[derive(Clone, Default)]
pub struct Processes {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    dir: PathBuf,
    live: Mutex<BTreeSet<u32>>,
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

fn identity(pid: u32) -> Option<String> {
    crate::sys::process_identity(pid)
}

impl Processes {
    /// Records nothing.
    pub fn none() -> Self {
        Processes { inner: None }
    }

    /// Records in `dir` (created if needed).
    pub fn in_dir(dir: PathBuf) -> std::io::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        Ok(Processes {
            inner: Some(Arc::new(Inner {
                dir,
                live: Mutex::new(BTreeSet::new()),
            })),
        })
    }

    /// The directory beside database `db`.
    pub fn beside(db: &Path) -> std::io::Result<Self> {
        let mut name = db.file_name().unwrap_or_default().to_os_string();
        name.push(".processes");
        Processes::in_dir(db.with_file_name(name))
    }

    /// Records the process group led by `pgid` (a child started with `process_group(0)`).
    pub fn track(&self, pgid: u32) -> Tracked {
        if let Some(inner) = &self.inner {
            let id = identity(pgid).unwrap_or_default();
            let _ = std::fs::write(inner.dir.join(pgid.to_string()), id);
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

    /// Kills the process groups a dead engine recorded and waits until they are gone (up to a
    /// few seconds). Returns the groups it killed.
    pub fn reap(&self) -> Vec<u32> {
        let Some(inner) = &self.inner else {
            return Vec::new();
        };
        let Ok(entries) = std::fs::read_dir(&inner.dir) else {
            return Vec::new();
        };
        let mut killed = Vec::new();
        for e in entries.flatten() {
            let Some(pgid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let recorded = std::fs::read_to_string(e.path()).unwrap_or_default();
            // The leader alive with another identity: its pid was reused, so the old group is
            // empty (a group id is not reused while the group has members).
            let reused = identity(pgid).is_some_and(|now| now != recorded);
            if !reused && crate::sys::group_alive(pgid) {
                crate::sys::kill_group(pgid);
                killed.push(pgid);
            }
            let _ = std::fs::remove_file(e.path());
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while killed.iter().any(|g| crate::sys::group_alive(*g)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        killed
    }
}
