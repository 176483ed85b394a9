//! The JSON log's files: `manent.YYYY-MM-DD.jsonl`, a new one each day and whenever the
//! current one holds `max_size` (then `manent.YYYY-MM-DD.N.jsonl`); at most `keep` files and
//! `max_total` bytes in all, the oldest deleted first. When the cap deletes a file that still
//! holds today's lines (a flood), the next file says so on its first line: nothing is lost
//! silently. Each file is created with the engine's file mode whatever the umask, never opened
//! through a symbolic link or when another user owns it. Written only by the non-blocking
//! writer's own thread.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::sys::files::Trust;

/// The files of one directory.
#[derive(Debug)]
pub struct Rolling {
    dir: PathBuf,
    keep: usize,
    max_size: u64,
    max_total: u64,
    file: Option<File>,
    /// The current file's day and part.
    day: String,
    part: u32,
    size: u64,
    /// A note the next file starts with (what a cap deleted).
    note: Option<String>,
    trust: Trust,
}

impl Rolling {
    /// Opens (appending to) today's newest file in `dir`, and prunes beyond the caps.
    pub fn open(
        dir: &Path,
        keep: usize,
        max_size: u64,
        max_total: u64,
        trust: Trust,
    ) -> std::io::Result<Self> {
        let mut r = Rolling {
            dir: dir.to_owned(),
            keep: keep.max(1),
            max_size: max_size.max(1),
            max_total: max_total.max(1),
            file: None,
            day: today(),
            part: 0,
            size: 0,
            note: None,
            trust,
        };
        r.part = r
            .files()
            .iter()
            .filter_map(|(name, _)| part_of(name, &r.day))
            .max()
            .unwrap_or(0);
        r.open_current()?;
        r.prune();
        Ok(r)
    }

    fn name(&self) -> String {
        if self.part == 0 {
            format!("manent.{}.jsonl", self.day)
        } else {
            format!("manent.{}.{}.jsonl", self.day, self.part)
        }
    }

    fn open_current(&mut self) -> std::io::Result<()> {
        let path = self.dir.join(self.name());
        let file = self
            .trust
            .open_append(&path, "the JSON log file")
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        self.size = file.metadata().map_or(0, |m| m.len());
        self.file = Some(file);
        if let Some(note) = self.note.take() {
            let line = format!(
                "{{\"timestamp\":\"{}\",\"level\":\"warn\",\"kind\":\"engine\",\"source\":\"manent\",\"message\":{}}}\n",
                humantime::format_rfc3339_millis(std::time::SystemTime::now()),
                serde_json::Value::String(note)
            );
            self.write_line(line.as_bytes())?;
        }
        Ok(())
    }

    /// The manent files in the directory, oldest first, with their sizes.
    fn files(&self) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64, std::time::SystemTime)> = std::fs::read_dir(&self.dir)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| {
                        let name = e.file_name().to_str()?.to_owned();
                        if !(name.starts_with("manent.") && name.ends_with(".jsonl")) {
                            return None;
                        }
                        let meta = e.metadata().ok()?;
                        Some((name, meta.len(), meta.modified().ok()?))
                    })
                    .collect()
            })
            .unwrap_or_default();
        // By name (day, then part), which is their order in time.
        out.sort_by(|a, b| order_key(&a.0).cmp(&order_key(&b.0)).then(a.2.cmp(&b.2)));
        out.into_iter().map(|(n, s, _)| (n, s)).collect()
    }

    /// Deletes the oldest files beyond `keep` and `max_total` (never the current one).
    fn prune(&mut self) {
        let current = self.name();
        let files = self.files();
        let mut total: u64 = files.iter().map(|(_, s)| s).sum();
        let mut count = files.len();
        let mut cut_today = 0u64;
        for (name, size) in &files {
            if count <= self.keep && total <= self.max_total {
                break;
            }
            if *name == current {
                continue;
            }
            if std::fs::remove_file(self.dir.join(name)).is_ok() {
                total = total.saturating_sub(*size);
                count -= 1;
                if name.contains(&self.day) {
                    cut_today += size;
                }
            }
        }
        if cut_today > 0 {
            self.note = Some(format!(
                "log_file: {cut_today} bytes of today's log were deleted to keep the files under \
                 {} bytes in all (log_file.max_total) and {} files (log_file.keep)",
                self.max_total, self.keep
            ));
        }
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        if let Some(mut f) = self.file.take() {
            let _ = f.flush();
        }
        let day = today();
        if day == self.day {
            self.part += 1;
        } else {
            self.day = day;
            self.part = 0;
        }
        self.prune();
        self.open_current()
    }

    fn write_line(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match &mut self.file {
            Some(f) => {
                f.write_all(buf)?;
                self.size += u64::try_from(buf.len()).unwrap_or(u64::MAX);
                Ok(())
            }
            None => Err(std::io::Error::other("the log file is closed")),
        }
    }
}

impl Write for Rolling {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let len = u64::try_from(buf.len()).unwrap_or(u64::MAX);
        if self.size > 0 && (self.size + len > self.max_size || today() != self.day) {
            self.rotate()?;
        }
        self.write_line(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.file {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
}

fn today() -> String {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    now.get(..10).unwrap_or("1970-01-01").to_owned()
}

/// The part number of `name` if it is a file of `day`.
fn part_of(name: &str, day: &str) -> Option<u32> {
    let rest = name.strip_prefix(&format!("manent.{day}"))?;
    let rest = rest.strip_suffix(".jsonl")?;
    if rest.is_empty() {
        return Some(0);
    }
    rest.strip_prefix('.')?.parse().ok()
}

/// (day, part) of a file name, for ordering.
fn order_key(name: &str) -> (String, u32) {
    let core = name
        .trim_start_matches("manent.")
        .trim_end_matches(".jsonl");
    match core.split_once('.') {
        Some((day, part)) => (day.to_owned(), part.parse().unwrap_or(0)),
        None => (core.to_owned(), 0),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]
    use super::*;

    #[test]
    fn a_flood_rotates_by_size_and_stays_under_the_caps_saying_what_it_cut() {
        let dir = tempfile::tempdir().unwrap();
        for day in 1..=3 {
            std::fs::write(
                dir.path().join(format!("manent.2026-01-0{day}.jsonl")),
                "{}\n",
            )
            .unwrap();
        }
        let mut r = Rolling::open(dir.path(), 4, 1000, 3000, Trust::private()).unwrap();
        let line = format!("{{\"message\":\"{}\"}}\n", "x".repeat(90));
        for _ in 0..200 {
            r.write_all(line.as_bytes()).unwrap();
        }
        r.flush().unwrap();
        let files = r.files();
        let total: u64 = files.iter().map(|(_, s)| s).sum();
        assert!(files.len() <= 4, "{files:?}");
        assert!(total <= 3000 + 1000, "{total}: {files:?}");
        assert!(files.iter().all(|(_, s)| *s <= 1100), "{files:?}");
        assert!(
            !files.iter().any(|(n, _)| n.starts_with("manent.2026-01")),
            "the oldest went first: {files:?}"
        );
        let newest = std::fs::read_to_string(dir.path().join(&files.last().unwrap().0)).unwrap();
        let all: String = files
            .iter()
            .map(|(n, _)| std::fs::read_to_string(dir.path().join(n)).unwrap())
            .collect();
        assert!(
            all.contains("bytes of today's log were deleted"),
            "the cut is said: {newest}"
        );
        // Private whatever the umask.
        use std::os::unix::fs::MetadataExt;
        let last = dir.path().join(&files.last().unwrap().0);
        assert_eq!(std::fs::metadata(last).unwrap().mode() & 0o777, 0o600);
    }

    #[test]
    fn names_order_by_day_then_part() {
        assert!(order_key("manent.2026-01-02.jsonl") < order_key("manent.2026-01-02.1.jsonl"));
        assert!(order_key("manent.2026-01-02.9.jsonl") < order_key("manent.2026-01-02.10.jsonl"));
        assert!(order_key("manent.2026-01-02.10.jsonl") < order_key("manent.2026-01-03.jsonl"));
        assert_eq!(part_of("manent.2026-01-02.3.jsonl", "2026-01-02"), Some(3));
        assert_eq!(part_of("manent.2026-01-02.jsonl", "2026-01-02"), Some(0));
    }
}
