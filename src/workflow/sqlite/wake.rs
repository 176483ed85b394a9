//! Cross-process wake-ups for the SQLite store: the engine holding the database listens on a
//! unix datagram socket beside it (`<database>.wake`, 0600), and every other process that
//! commits to the database (a command sent from the CLI or an attached console, a new
//! deployment) sends it one empty datagram after the commit, so the engine reads the change at
//! once instead of at its next poll. A lost or forged datagram costs one `data_version` read:
//! the engine still polls, and it trusts only what the database says.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// One database's wake-up channel.
#[derive(Debug)]
pub struct Wake {
    path: Option<PathBuf>,
    /// This process listens (it is the engine): its own commits signal nobody.
    listening: AtomicBool,
    /// Notified when another process committed.
    pub notify: Notify,
    /// The listening task.
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Unix socket paths are at most 107 bytes: a longer one has no wake-ups (the engine polls).
const MAX_PATH: usize = 107;

impl Wake {
    /// The channel of the database at `db`.
    pub fn new(db: &Path) -> Arc<Wake> {
        let mut path = db.as_os_str().to_owned();
        path.push(".wake");
        let path = PathBuf::from(path);
        Arc::new(Wake {
            path: (path.as_os_str().len() <= MAX_PATH).then_some(path),
            listening: AtomicBool::new(false),
            notify: Notify::new(),
            task: std::sync::Mutex::new(None),
        })
    }

    /// True once this process listens.
    pub fn listening(&self) -> bool {
        self.listening.load(Ordering::SeqCst)
    }

    /// After a commit: tells the listening engine, if there is one and it is not us.
    pub fn signal(&self) {
        if self.listening() {
            return;
        }
        let Some(path) = &self.path else {
            return;
        };
        if let Ok(s) = UnixDatagram::unbound() {
            let _ = s.set_nonblocking(true);
            let _ = s.send_to(&[], path);
        }
    }

    /// Listens (the engine, which holds the database's lease: a socket left by an engine that
    /// died is replaced). Returns false when there is nowhere to listen.
    pub fn listen(self: &Arc<Self>) -> bool {
        let Some(path) = &self.path else {
            return false;
        };
        let _ = std::fs::remove_file(path);
        let Ok(socket) = tokio::net::UnixDatagram::bind(path) else {
            return false;
        };
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        self.listening.store(true, Ordering::SeqCst);
        let wake = Arc::downgrade(self);
        let task = tokio::spawn(async move {
            let mut buf = [0u8; 16];
            while socket.recv(&mut buf).await.is_ok() {
                let Some(w) = wake.upgrade() else {
                    return;
                };
                w.notify.notify_waiters();
            }
        });
        if let Ok(mut t) = self.task.lock() {
            *t = Some(task);
        }
        true
    }

    /// Stops listening: the socket is removed (a clean shutdown).
    pub fn close(&self) {
        if let Some(t) = self.task.lock().ok().and_then(|mut t| t.take()) {
            t.abort();
        }
        if self.listening.swap(false, Ordering::SeqCst)
            && let Some(path) = &self.path
        {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Drop for Wake {
    fn drop(&mut self) {
        self.close();
    }
}
