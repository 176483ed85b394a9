//! The JSON log's daily files, `manent.YYYY-MM-DD.jsonl` (UTC days, the names tracing-appender
//! gave them), each created with the engine's file mode whatever the umask and never opened
//! through a symbolic link or when another user owns it; at most `keep` of them are kept.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use crate::sys::files::Trust;

/// The writer behind the log's non-blocking worker: it opens the next day's file when the day
/// changes and deletes the oldest beyond `keep`.
pub struct Daily {
    dir: PathBuf,
    keep: usize,
    trust: Trust,
    current: Option<(String, File)>,
}

/// `YYYY-MM-DD` of `t`, in UTC.
fn day(t: std::time::SystemTime) -> String {
    let s = humantime::format_rfc3339_seconds(t).to_string();
    s.get(..10).unwrap_or_default().to_owned()
}

fn name(day: &str) -> String {
    format!("manent.{day}.jsonl")
}

impl Daily {
    /// Opens today's file in `dir` (which the caller has checked), so a file that cannot be
    /// used is said before the engine starts.
    pub fn open(
        dir: PathBuf,
        keep: usize,
        trust: Trust,
    ) -> Result<Daily, crate::sys::files::Refused> {
        let mut d = Daily {
            dir,
            keep,
            trust,
            current: None,
        };
        d.roll(&day(std::time::SystemTime::now()))?;
        Ok(d)
    }

    fn roll(&mut self, today: &str) -> Result<(), crate::sys::files::Refused> {
        let path = self.dir.join(name(today));
        let file = self.trust.open_append(&path, "the JSON log file")?;
        self.current = Some((today.to_owned(), file));
        self.prune();
        Ok(())
    }

    /// Deletes the oldest daily files beyond `keep`.
    fn prune(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut days: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with("manent.") && n.ends_with(".jsonl"))
            .collect();
        days.sort();
        let extra = days.len().saturating_sub(self.keep);
        for old in days.into_iter().take(extra) {
            let _ = std::fs::remove_file(self.dir.join(old));
        }
    }
}

impl Write for Daily {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let today = day(std::time::SystemTime::now());
        if self.current.as_ref().is_none_or(|(d, _)| *d != today) {
            self.roll(&today)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
        }
        match &mut self.current {
            Some((_, f)) => f.write_all(buf).map(|()| buf.len()),
            None => Err(std::io::Error::other("no log file open")),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.current {
            Some((_, f)) => f.flush(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_is_named_in_utc() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(86_400 * 365);
        assert_eq!(name(&day(t)), "manent.1971-01-01.jsonl");
    }

    #[test]
    fn files_are_private_and_only_keep_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        for d in ["2001-01-01", "2001-01-02", "2001-01-03"] {
            std::fs::write(dir.path().join(name(d)), "{}\n").unwrap();
        }
        let mut w = Daily::open(dir.path().to_owned(), 2, Trust::private()).unwrap();
        w.write_all(b"{\"a\":1}\n").unwrap();
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left.len(), 2, "{left:?}");
        assert_eq!(left[0], name("2001-01-03"));
        use std::os::unix::fs::MetadataExt;
        let today = dir.path().join(&left[1]);
        assert_eq!(std::fs::metadata(today).unwrap().mode() & 0o777, 0o600);
    }
}
