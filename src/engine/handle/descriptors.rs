//! The console's application files, read when they change: the descriptors' directory is
//! looked at every second and before every deploy, plan, rollback and test run, and read again
//! when a file in it changed (its length, time, inode — an editor that replaces the file — or
//! a file came or went). A console left open never deploys what a file said before it was
//! edited.

use std::path::{Path, PathBuf};

use super::{Actor, publish};
use crate::config::Config;
use crate::plugin::Level;

/// What the directory held when it was read: each descriptor file and its mark.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marks(Vec<(PathBuf, u64)>);

impl Marks {
    /// The marks of `dir`'s descriptor files now (a directory that cannot be read has none).
    pub fn of(dir: &Path) -> Marks {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Marks::default();
        };
        let mut out: Vec<(PathBuf, u64)> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
            .map(|p| {
                let mark = mark(&p);
                (p, mark)
            })
            .collect();
        out.sort();
        Marks(out)
    }

    /// The mark of file `file`, as read (0: not among them).
    pub fn get(&self, file: &Path) -> u64 {
        self.0
            .iter()
            .find(|(p, _)| p == file)
            .map_or(0, |(_, m)| *m)
    }

    /// The files whose mark differs from `before` (came, went, or changed), by name.
    fn changed(&self, before: &Marks) -> Vec<String> {
        let mut names: Vec<String> = self
            .0
            .iter()
            .filter(|(p, m)| before.get(p) != *m)
            .chain(before.0.iter().filter(|(p, _)| self.get(p) == 0))
            .map(|(p, _)| {
                p.file_name()
                    .map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into())
            })
            .collect();
        names.dedup();
        names
    }
}

/// A file's length, modification time and inode, folded into one number (never 0).
fn mark(file: &Path) -> u64 {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::symlink_metadata(file) else {
        return 1;
    };
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (m.len(), m.mtime(), m.mtime_nsec(), m.ino(), m.ctime_nsec()).hash(&mut h);
    h.finish().max(2)
}

impl Actor {
    /// Reads the descriptors again if a file changed since they were read; true when it did.
    pub(super) async fn reread_descriptors(&mut self) -> bool {
        if !self.config.descriptors_read {
            return false;
        }
        let dir = self.config.apps_dir.clone();
        let now = tokio::task::spawn_blocking(move || Marks::of(&dir))
            .await
            .unwrap_or_default();
        if now == self.marks {
            return false;
        }
        let changed = now.changed(&self.marks);
        // Parsed off the runtime's threads: a fleet's descriptor is a third of a second.
        let mut fresh = self.config.clone();
        let fresh = tokio::task::spawn_blocking(move || {
            fresh.descriptors.clear();
            fresh.problems.clear();
            fresh.load_descriptors();
            fresh
        })
        .await;
        let Ok(fresh) = fresh else {
            return false;
        };
        self.marks = now;
        self.install(fresh);
        let names = changed.join(", ");
        // A file left out is said below, with why; only what loads is what deploys use now.
        let used = if self.problems.is_empty() {
            " (deploys, plans and rollbacks use it now)"
        } else {
            ""
        };
        self.notice(Level::Info, format!("{names} changed: read again{used}"));
        for p in self.problems.clone() {
            self.notice(
                Level::Warn,
                format!("descriptor left out: {p} (`manent validate` lists every problem)"),
            );
        }
        true
    }

    /// Takes `config`'s descriptors as the applications listed; their live releases are read
    /// again at the next publish.
    pub(super) fn install(&mut self, config: Config) {
        let (apps, plans): (Vec<_>, Vec<_>) =
            publish::apps_of(&config, &self.marks).into_iter().unzip();
        self.apps = apps;
        self.plans = plans;
        self.problems = config.problems.iter().map(ToString::to_string).collect();
        self.config = config;
        self.releases_read = None;
    }
}
