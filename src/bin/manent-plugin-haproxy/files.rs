//! The two files a change writes — the configuration and the tester map beside it — staged as
//! temporary files beside the old ones, put in place by renames, or put back as they were: a
//! change that fails leaves neither a half-written file nor a temporary one behind.

use std::path::{Path, PathBuf};

/// The plugin's files.
#[derive(Debug, Clone)]
pub struct Files {
    pub config: PathBuf,
    pub map: PathBuf,
}

/// What the files held before a change (`None`: there was none).
#[derive(Debug, Clone)]
pub struct Before {
    config: Option<Vec<u8>>,
    map: Option<Vec<u8>>,
}

/// `path` beside itself as a temporary file.
pub fn temp(path: &Path) -> PathBuf {
    path.with_extension("manent-new")
}

/// The mode `path` has (0644 for a new one): what its readers (HAProxy) need stays.
fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).map_or(0o644, |m| m.permissions().mode() & 0o777)
}

/// [`manent::sys::files::write_new`], off the runtime's threads.
async fn write_new(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let (path, bytes) = (path.to_owned(), bytes.to_vec());
    tokio::task::spawn_blocking(move || manent::sys::files::write_new(&path, &bytes, mode))
        .await
        .map_err(std::io::Error::other)?
}

impl Files {
    /// The directory the files are in.
    pub fn dir(&self) -> &Path {
        self.config
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
    }

    /// Writes the new file and map beside the old ones: what they held before.
    pub async fn stage(&self, config: &str, map: &str) -> Result<Before, String> {
        let before = Before {
            config: tokio::fs::read(&self.config).await.ok(),
            map: tokio::fs::read(&self.map).await.ok(),
        };
        // Into a directory no one else can write, as new files: never through a link.
        manent::sys::files::check_own_dir(self.dir())?;
        for (path, text) in [(&self.config, config), (&self.map, map)] {
            let temp = temp(path);
            if let Err(e) = write_new(&temp, text.as_bytes(), mode_of(path)).await {
                self.discard().await;
                return Err(format!(
                    "cannot write {}: {e} (the plugin needs write access to {})",
                    temp.display(),
                    self.dir().display()
                ));
            }
        }
        Ok(before)
    }

    /// Puts the staged map in place.
    pub async fn commit_map(&self) -> Result<(), String> {
        tokio::fs::rename(temp(&self.map), &self.map)
            .await
            .map_err(|e| format!("cannot put {} in place: {e}", self.map.display()))
    }

    /// Puts the staged files in place (a map already in place stays).
    pub async fn commit(&self) -> Result<(), String> {
        if tokio::fs::try_exists(temp(&self.map))
            .await
            .unwrap_or(false)
        {
            self.commit_map().await?;
        }
        tokio::fs::rename(temp(&self.config), &self.config)
            .await
            .map_err(|e| format!("cannot put {} in place: {e}", self.config.display()))
    }

    /// Removes what is staged.
    pub async fn discard(&self) {
        for path in [&self.config, &self.map] {
            let _ = tokio::fs::remove_file(temp(path)).await;
        }
    }

    /// Puts `before` back (a file that did not exist is removed): what failed, if anything.
    pub async fn restore(&self, before: &Before) -> Option<String> {
        self.discard().await;
        let mut failed = None;
        for (path, bytes) in [(&self.config, &before.config), (&self.map, &before.map)] {
            let done = match bytes {
                Some(b) => {
                    let temp = temp(path);
                    match write_new(&temp, b, mode_of(path)).await {
                        Ok(()) => tokio::fs::rename(&temp, path).await,
                        Err(e) => {
                            let _ = tokio::fs::remove_file(&temp).await;
                            Err(e)
                        }
                    }
                }
                None => match tokio::fs::remove_file(path).await {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    other => other,
                },
            };
            if let Err(e) = done {
                failed = Some(format!("putting {} back failed too: {e}", path.display()));
            }
        }
        failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_put_back_leaves_the_files_as_they_were_and_nothing_beside_them() {
        let dir = tempfile::tempdir().unwrap();
        let files = Files {
            config: dir.path().join("manent-web.cfg"),
            map: dir.path().join("manent-web.testers.map"),
        };
        std::fs::write(&files.config, "old\n").unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let before = files.stage("new\n", "0 green1\n").await.unwrap();
            files.commit_map().await.unwrap();
            files.commit().await.unwrap();
            assert_eq!(std::fs::read_to_string(&files.config).unwrap(), "new\n");
            assert_eq!(files.restore(&before).await, None);
        });
        assert_eq!(std::fs::read_to_string(&files.config).unwrap(), "old\n");
        assert!(!files.map.exists(), "there was no map before");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }
}
