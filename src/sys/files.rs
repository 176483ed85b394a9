//! The engine's own files — the database and its directory, the lock, the inputs key, the
//! process records, the JSON log — are its user's and private, the way ssh's StrictModes wants a
//! user's keys: created 0600/0700 whatever the umask (0660/2770 and the group set, for a declared
//! `engine.shared_group`), and refused when another user owns them or others may write them. On
//! a shared bastion anyone who can write one of them can make the engine run or kill what they
//! like, so a file that fails the check is never used: the error names it, its owner and mode,
//! and the command that fixes it.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::account::{self, Group};

/// A file or directory manent will not use, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {}: {problem}; {fix}", path.display())]
pub struct Refused {
    /// What it is to manent (`the database`, `the processes directory`).
    pub what: String,
    /// Where.
    pub path: PathBuf,
    /// What is wrong with it (owner, mode, kind).
    pub problem: String,
    /// What to do.
    pub fix: String,
}

/// Who may own and write the engine's files: its own user, or the members of a declared shared
/// group.
#[derive(Debug, Clone)]
pub struct Trust {
    uid: u32,
    shared: Option<Group>,
}

/// Bits that let others than the owner change a file or a directory's entries.
const GROUP_WRITE: u32 = 0o020;
const OTHER_WRITE: u32 = 0o002;
const STICKY: u32 = 0o1000;

impl Trust {
    /// This process's user alone: files 0600, directories 0700.
    pub fn private() -> Trust {
        Trust {
            uid: super::euid(),
            shared: None,
        }
    }

    /// With `engine.shared_group` when set: files 0660 and directories 2770 of that group, which
    /// this user must belong to (root needs not).
    pub fn new(shared_group: Option<&str>) -> Result<Trust, String> {
        let uid = super::euid();
        let Some(name) = shared_group else {
            return Ok(Trust { uid, shared: None });
        };
        let group = account::group_by_name(name).ok_or_else(|| {
            format!(
                "engine.shared_group: there is no group `{name}` on this host; create it \
                 (`groupadd {name}`) and add the operators who share the database, or remove \
                 the setting"
            )
        })?;
        let member = uid == 0
            || group.has_member(uid)
            || account::me()
                .is_some_and(|me| me.egid == group.gid || me.groups.contains(&group.gid));
        if !member {
            return Err(format!(
                "engine.shared_group: {} is not a member of group `{name}`; add it (`usermod -aG \
                 {name} {}`, then log in again) or run manent as a member",
                account::user_shown(uid),
                account::user_by_id(uid).map_or_else(|| uid.to_string(), |u| u.name)
            ));
        }
        Ok(Trust {
            uid,
            shared: Some(group),
        })
    }

    /// The mode of the files the engine creates.
    pub fn file_mode(&self) -> u32 {
        if self.shared.is_some() { 0o660 } else { 0o600 }
    }

    /// The mode of the directories the engine creates.
    pub fn dir_mode(&self) -> u32 {
        if self.shared.is_some() { 0o2770 } else { 0o700 }
    }

    /// The shared group's name, if one is declared.
    pub fn group(&self) -> Option<&str> {
        self.shared.as_ref().map(|g| g.name.as_str())
    }

    fn me(&self) -> String {
        account::user_by_id(self.uid).map_or_else(|| self.uid.to_string(), |u| u.name)
    }

    /// Creates directory `dir` (and missing parents) with the engine's mode, or checks the one
    /// there; either way no symbolic link is followed on the way, and every directory above it
    /// must be writable only by root, this user or — with the sticky bit, as `/tmp` — by others
    /// who cannot replace what is not theirs. The directories above are checked before anything
    /// is created, so nothing is made where someone else could have put a link.
    pub fn ensure_dir(&self, dir: &Path, what: &str) -> Result<(), Refused> {
        self.check_ancestors(dir, "a directory above the database", false)?;
        self.make_dir(dir, what)?;
        self.check_dir(dir, what)?;
        self.check_ancestors(dir, "a directory above the database", false)
    }

    /// Creates or checks the JSON log's directory the same way; above it, a directory root owns
    /// may also be writable by a system group (`/var/log` is `root:syslog 0775` on some systems).
    pub fn ensure_log_dir(&self, dir: &Path) -> Result<(), Refused> {
        let what = "the JSON log's directory";
        self.check_ancestors(dir, "a directory above the JSON log's", true)?;
        self.make_dir(dir, what)?;
        self.check_dir(dir, what)?;
        self.check_ancestors(dir, "a directory above the JSON log's", true)
    }

    /// Creates what is missing of `dir`, one directory at a time, none through a link: each
    /// new one gets the engine's mode and group; what was there keeps its own.
    fn make_dir(&self, dir: &Path, what: &str) -> Result<(), Refused> {
        let dir =
            std::path::absolute(dir).map_err(|e| self.io(what, dir, "cannot resolve it", &e))?;
        let missing: Vec<&Path> = dir
            .ancestors()
            .take_while(|a| {
                std::fs::symlink_metadata(a)
                    .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
            })
            .collect();
        for d in missing.into_iter().rev() {
            let made = std::fs::DirBuilder::new()
                .mode(self.dir_mode() & 0o777)
                .create(d);
            match made {
                // Just made by this process, and still a directory (not a link put in its
                // place since): given its mode.
                Ok(()) => {
                    let meta = std::fs::symlink_metadata(d)
                        .map_err(|e| self.io(what, d, "cannot read it", &e))?;
                    if !meta.is_dir() {
                        return Err(self.link_refused(what, d));
                    }
                    self.set_owner_and_mode(d, self.dir_mode(), what)?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(self.io(what, d, "cannot create it", &e)),
            }
        }
        Ok(())
    }

    fn link_refused(&self, what: &str, path: &Path) -> Refused {
        self.refused(
            what,
            path,
            "it is a symbolic link; manent does not follow links to where it keeps its files \
             (whoever can change the link chooses where they go)"
                .into(),
            "name the real directory in manent.yml instead".into(),
        )
    }

    /// Checks a directory the engine keeps files in: a directory (not a link to one), of its
    /// owner and writable by no one else. One that was there is checked, never re-moded.
    pub fn check_dir(&self, dir: &Path, what: &str) -> Result<(), Refused> {
        let meta =
            std::fs::symlink_metadata(dir).map_err(|e| self.io(what, dir, "cannot read it", &e))?;
        if meta.file_type().is_symlink() {
            return Err(self.link_refused(what, dir));
        }
        if !meta.is_dir() {
            return Err(self.refused(
                what,
                dir,
                "it is not a directory".into(),
                "move it away".into(),
            ));
        }
        self.check_meta(dir, &meta, what, self.dir_mode())
    }

    /// Checks a file the engine keeps, if it exists (`Ok(false)` when it does not).
    pub fn check_file(&self, path: &Path, what: &str) -> Result<bool, Refused> {
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(self.io(what, path, "cannot read it", &e)),
        };
        if !meta.is_file() {
            return Err(self.refused(
                what,
                path,
                "it is not a regular file".into(),
                "move it away; manent creates it".into(),
            ));
        }
        self.check_meta(path, &meta, what, self.file_mode())?;
        Ok(true)
    }

    /// Creates `path` with the engine's mode and group; fails if it exists (a symbolic link
    /// included: nothing is created through one).
    pub fn create_file(&self, path: &Path, what: &str) -> Result<File, Refused> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(self.file_mode())
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| self.io(what, path, "cannot create it", &e))?;
        self.set_owner_and_mode(path, self.file_mode(), what)?;
        Ok(file)
    }

    /// Opens `path` for reading and writing — creating it with the engine's mode when `create`
    /// and missing — never through a symbolic link, and checks the file it opened.
    pub fn open_file(&self, path: &Path, what: &str, create: bool) -> Result<File, Refused> {
        let mut opts = OpenOptions::new();
        opts.read(true).write(true);
        self.open_checked(path, what, create, &opts)
    }

    /// [`Trust::open_file`] for appending (the JSON log).
    pub fn open_append(&self, path: &Path, what: &str) -> Result<File, Refused> {
        let mut opts = OpenOptions::new();
        opts.append(true);
        self.open_checked(path, what, true, &opts)
    }

    fn open_checked(
        &self,
        path: &Path,
        what: &str,
        create: bool,
        opts: &OpenOptions,
    ) -> Result<File, Refused> {
        if create {
            // Made with the right mode and group, then opened as asked (below).
            match self.create_file(path, what) {
                Ok(_) => {}
                Err(_) if std::fs::symlink_metadata(path).is_ok() => {}
                Err(e) => return Err(e),
            }
        }
        let file = opts
            .clone()
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| {
                if e.raw_os_error() == Some(libc::ELOOP) {
                    self.refused(
                        what,
                        path,
                        "it is a symbolic link".into(),
                        "remove it; manent creates the file itself".into(),
                    )
                } else {
                    self.io(what, path, "cannot open it", &e)
                }
            })?;
        let meta = file
            .metadata()
            .map_err(|e| self.io(what, path, "cannot read it", &e))?;
        if !meta.is_file() {
            return Err(self.refused(
                what,
                path,
                "it is not a regular file".into(),
                "move it away; manent creates it".into(),
            ));
        }
        self.check_meta(path, &meta, what, self.file_mode())?;
        Ok(file)
    }

    /// Sets the group (when shared) and the exact mode (the umask does not apply).
    fn set_owner_and_mode(&self, path: &Path, mode: u32, what: &str) -> Result<(), Refused> {
        if let Some(g) = &self.shared {
            std::os::unix::fs::chown(path, None, Some(g.gid))
                .map_err(|e| self.io(what, path, "cannot give it to the shared group", &e))?;
        }
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| self.io(what, path, "cannot set its mode", &e))
    }

    /// The owner, group and write bits of something the engine keeps.
    fn check_meta(
        &self,
        path: &Path,
        meta: &std::fs::Metadata,
        what: &str,
        want: u32,
    ) -> Result<(), Refused> {
        let mode = meta.mode() & 0o7777;
        let owner_ok = match &self.shared {
            None => meta.uid() == self.uid,
            Some(g) => meta.uid() == self.uid || meta.uid() == 0 || g.has_member(meta.uid()),
        };
        let group_ok = self.shared.as_ref().is_none_or(|g| meta.gid() == g.gid);
        let write_ok = match &self.shared {
            None => mode & (GROUP_WRITE | OTHER_WRITE) == 0,
            Some(_) => mode & OTHER_WRITE == 0,
        };
        // Ours, and no one else could have written it: brought to the engine's mode and group
        // (a database an older manent made 0644 under the umask, a private one the configuration
        // now shares with a group).
        let untouched = mode & OTHER_WRITE == 0
            && (mode & GROUP_WRITE == 0 || (self.shared.is_some() && group_ok));
        // A directory keeps the mode it has (it may hold what others need: a web root); only
        // one private as manent makes its own (0700) is given to a shared group declared since,
        // and any other the group cannot reach is said (with the chgrp), not used as it is.
        let private_dir = meta.is_dir() && mode == 0o700;
        let unreachable = meta.is_dir() && !group_ok && !private_dir;
        if meta.uid() == self.uid && untouched && !unreachable {
            if (!meta.is_dir() || private_dir) && (mode != want || !group_ok) {
                self.set_owner_and_mode(path, want, what)?;
                tracing::warn!(
                    "{what} {} was mode {mode:04o} of group {}; made it {want:04o}{}",
                    path.display(),
                    account::group_shown(meta.gid()),
                    self.shared
                        .as_ref()
                        .map(|g| format!(" of group {}", g.name))
                        .unwrap_or_default()
                );
            }
            return Ok(());
        }
        if owner_ok && group_ok && write_ok {
            return Ok(());
        }
        let mut problem = format!(
            "owned by {}, group {}, mode {mode:04o}",
            account::user_shown(meta.uid()),
            account::group_shown(meta.gid())
        );
        let rule = match &self.shared {
            None => format!(
                "manent runs as {} and uses only its own files, writable by no one else",
                account::user_shown(self.uid)
            ),
            Some(g) => format!(
                "manent uses only files of group `{}` (engine.shared_group) owned by its members, \
                 writable by no one outside it",
                g.name
            ),
        };
        problem.push_str(&format!(
            ": {rule} (ssh's StrictModes), since whoever can write it can \
                                   make the engine run or kill what they like"
        ));
        let p = shell_word(path);
        let mut cmds = Vec::new();
        if !owner_ok {
            cmds.push(format!("chown {} {p}", self.me()));
        }
        if let (false, Some(g)) = (group_ok, &self.shared) {
            cmds.push(format!("chgrp {} {p}", g.name));
        }
        cmds.push(format!("chmod {:o} {p}", want & 0o7777));
        let fix = format!(
            "if you did not make it so, move it away and find out who did; if it is yours: `{}`",
            cmds.join(" && ")
        );
        Err(self.refused(what, path, problem, fix))
    }

    /// Every directory above `dir` — as written, and as its links resolve — is root's or this
    /// user's, and writable by others only with the sticky bit (or by the shared group; with
    /// `system_group`, by a system group of a directory root owns); a link on the way is root's
    /// or this user's. Missing ones are skipped (they will be made).
    fn check_ancestors(&self, dir: &Path, what: &str, system_group: bool) -> Result<(), Refused> {
        let Some((at, meta, link)) =
            unsafe_ancestor(dir, self.uid, self.shared.as_ref(), system_group)
        else {
            return Ok(());
        };
        let mode = meta.mode() & 0o7777;
        let problem = format!(
            "{}owned by {}, group {}, mode {mode:04o}: whoever can write it can replace what is \
             below it, the engine's files among them",
            if link { "a symbolic link " } else { "" },
            account::user_shown(meta.uid()),
            account::group_shown(meta.gid())
        );
        let who = if self.uid == 0 {
            "root".to_owned()
        } else {
            format!("root or {}", self.me())
        };
        let fix = format!(
            "put manent's files under directories only {who} can write (`database:` or \
             `log_file.dir:` in manent.yml), or `chmod o-w,g-w {}` if that is safe",
            shell_word(&at)
        );
        Err(self.refused(what, &at, problem, fix))
    }

    fn refused(&self, what: &str, path: &Path, problem: String, fix: String) -> Refused {
        Refused {
            what: what.to_owned(),
            path: path.to_owned(),
            problem,
            fix,
        }
    }

    fn io(&self, what: &str, path: &Path, doing: &str, e: &std::io::Error) -> Refused {
        self.refused(
            what,
            path,
            format!("{doing}: {e}"),
            format!(
                "manent needs it as {}'s own{}",
                self.me(),
                self.shared
                    .as_ref()
                    .map(|g| format!(" (or group {}'s)", g.name))
                    .unwrap_or_default()
            ),
        )
    }
}

/// The first directory above `path` someone other than `uid` or root could change: one owned
/// by another user, or writable by others without the sticky bit (by a group other than the
/// `shared` group; with `system_group`, a directory root owns may be writable by a system
/// group), or a symbolic link on the way owned by another user (`true` then). With a `shared`
/// group its members count as `uid` does: they can write the engine's files themselves (the
/// worker's user owns the database's directory the operators in its group share). Walked as
/// written and then as the links resolve; components that do not exist yet are skipped.
pub fn unsafe_ancestor(
    path: &Path,
    uid: u32,
    shared: Option<&Group>,
    system_group: bool,
) -> Option<(PathBuf, std::fs::Metadata, bool)> {
    let shared_gid = shared.map(|g| g.gid);
    let written = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    // The longest part of it that exists, resolved.
    let real = written
        .ancestors()
        .skip(1)
        .find_map(|a| std::fs::canonicalize(a).ok());
    let owner_ok = |u: u32| u == uid || u == 0 || shared.is_some_and(|g| g.has_member(u));
    let mut seen: Vec<PathBuf> = Vec::new();
    for a in written
        .ancestors()
        .skip(1)
        .chain(real.iter().flat_map(|r| r.ancestors()))
    {
        if a.as_os_str().is_empty() || seen.iter().any(|s| s == a) {
            continue;
        }
        seen.push(a.to_path_buf());
        let Ok(meta) = std::fs::symlink_metadata(a) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            if !owner_ok(meta.uid()) {
                return Some((a.to_path_buf(), meta, true));
            }
            continue;
        }
        let mode = meta.mode() & 0o7777;
        // (Read lazily: the private-group question reads the account databases.)
        let group_ok = || {
            shared_gid == Some(meta.gid())
                || (system_group && meta.uid() == 0 && meta.gid() < 1000)
                || account::private_group(meta.uid(), meta.gid())
        };
        let writable = mode & OTHER_WRITE != 0 || (mode & GROUP_WRITE != 0 && !group_ok());
        if !owner_ok(meta.uid()) || (writable && mode & STICKY == 0) {
            return Some((a.to_path_buf(), meta, false));
        }
    }
    None
}

/// Checks that `dir` is a directory (not a link to one) that only this user or root could
/// have changed: its owner is one of them and no one else may write it (but with the sticky
/// bit), nor any directory above it. What a router plugin writes its files into.
pub fn check_own_dir(dir: &Path) -> Result<(), String> {
    let uid = super::euid();
    let said = |at: &Path, meta: &std::fs::Metadata, what: &str| {
        format!(
            "{what} {} is owned by {}, group {}, mode {:04o}: whoever else can write it can \
             plant a link where manent writes and make it overwrite a file of their choice; \
             give the files a directory only {} can write",
            at.display(),
            account::user_shown(meta.uid()),
            account::group_shown(meta.gid()),
            meta.mode() & 0o7777,
            if uid == 0 {
                "root".to_owned()
            } else {
                format!("root or {}", account::user_shown(uid))
            }
        )
    };
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| format!("cannot read the directory {}: {e}", dir.display()))?;
    if meta.file_type().is_symlink() {
        return Err(format!(
            "{} is a symbolic link: manent writes only into the real directory (name it instead)",
            dir.display()
        ));
    }
    let mode = meta.mode() & 0o7777;
    if ![0, uid].contains(&meta.uid())
        || (mode & (GROUP_WRITE | OTHER_WRITE) != 0 && mode & STICKY == 0)
    {
        return Err(said(dir, &meta, "the directory"));
    }
    match unsafe_ancestor(dir, uid, None, false) {
        Some((at, m, true)) => Err(said(&at, &m, "the link")),
        Some((at, m, false)) => Err(said(&at, &m, "the directory")),
        None => Ok(()),
    }
}

/// Writes `bytes` as a new file at `path`, mode `mode`: whatever was there (a stale file, a
/// link someone planted) is removed, and the file is created exclusively
/// (`O_CREAT | O_EXCL | O_NOFOLLOW`), so nothing is ever written through a link or into a file
/// that existed. (Put in place by the caller's rename.)
pub fn write_new(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write as _;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// `path` as it may be pasted into a shell.
pub fn shell_word(path: &Path) -> String {
    let s = path.display().to_string();
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@".contains(c))
    {
        s
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Why a file meant to be read whole was not.
#[derive(Debug)]
pub enum Irregular {
    Io(std::io::Error),
    /// A directory, FIFO, socket or device.
    NotRegular,
    /// Its size, and the most allowed.
    TooLarge(u64, u64),
    /// Another user could have written it: its owner and mode.
    Untrusted(u32, u32),
}

impl std::fmt::Display for Irregular {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Irregular::Io(e) => write!(f, "cannot read it: {e}"),
            Irregular::NotRegular => {
                f.write_str("not a regular file (a directory, FIFO or device is refused)")
            }
            Irregular::TooLarge(n, most) => {
                write!(f, "{n} bytes: larger than the {most} bytes it may have")
            }
            Irregular::Untrusted(uid, mode) => {
                let me = super::euid();
                if [0, me].contains(uid) {
                    write!(
                        f,
                        "mode {mode:04o}: another user could have written it, so it is not \
                         trusted (`chmod go-w` it)"
                    )
                } else {
                    write!(
                        f,
                        "owned by {}: another user could have written it, so it is not trusted \
                         (have root{} own it, mode 0644 at most)",
                        account::user_shown(*uid),
                        if me == 0 {
                            String::new()
                        } else {
                            format!(" or {}", account::user_shown(me))
                        }
                    )
                }
            }
        }
    }
}

/// Reads a regular file of at most `max` bytes. What is read is what was checked: the file is
/// opened without blocking (a FIFO swapped in after a check would wait for a writer forever, a
/// device might never end, a terminal would become a session leader's) and checked on the
/// descriptor opened; a path that is no regular file before that is refused unopened.
pub fn read_regular(path: &Path, max: u64) -> Result<Vec<u8>, Irregular> {
    read_checked(path, max, false).map(|(bytes, _)| bytes)
}

/// [`read_regular`], with the metadata of the very file read (its owner and mode, from the
/// descriptor), for a caller that judges whether to trust what it says.
pub fn read_regular_with(path: &Path, max: u64) -> Result<(Vec<u8>, std::fs::Metadata), Irregular> {
    read_checked(path, max, false)
}

/// [`read_regular`], for a file whose word manent acts on (a list of expected digests, a
/// plugin's own record): it must be this user's or root's and writable by no one else, checked
/// on the descriptor read. Refused, never repaired.
pub fn read_trusted(path: &Path, max: u64) -> Result<Vec<u8>, Irregular> {
    read_checked(path, max, true).map(|(bytes, _)| bytes)
}

fn read_checked(
    path: &Path,
    max: u64,
    trusted: bool,
) -> Result<(Vec<u8>, std::fs::Metadata), Irregular> {
    use std::io::Read as _;
    let ok = |meta: &std::fs::Metadata| {
        let mode = meta.mode() & 0o7777;
        if !meta.is_file() {
            Err(Irregular::NotRegular)
        } else if meta.len() > max {
            Err(Irregular::TooLarge(meta.len(), max))
        } else if trusted
            && (![0, super::euid()].contains(&meta.uid())
                || mode & (GROUP_WRITE | OTHER_WRITE) != 0)
        {
            Err(Irregular::Untrusted(meta.uid(), mode))
        } else {
            Ok(())
        }
    };
    ok(&std::fs::metadata(path).map_err(Irregular::Io)?)?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(Irregular::Io)?;
    let meta = file.metadata().map_err(Irregular::Io)?;
    ok(&meta)?;
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(Irregular::Io)?;
    match u64::try_from(bytes.len()) {
        Ok(n) if n <= max => Ok((bytes, meta)),
        Ok(n) => Err(Irregular::TooLarge(n, max)),
        Err(_) => Err(Irregular::TooLarge(u64::MAX, max)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_is_never_written_through_a_link_planted_where_it_goes() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("passwd");
        std::fs::write(&victim, "root:x:0:0\n").unwrap();
        let temp = dir.path().join("upstreams.manent-new");
        std::os::unix::fs::symlink(&victim, &temp).unwrap();
        write_new(&temp, b"upstream blue {}\n", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root:x:0:0\n");
        let meta = std::fs::symlink_metadata(&temp).unwrap();
        assert!(meta.is_file(), "a file of its own, not the link");
        assert_eq!(meta.mode() & 0o777, 0o644);
        assert_eq!(
            std::fs::read_to_string(&temp).unwrap(),
            "upstream blue {}\n"
        );
    }

    #[test]
    fn a_directory_others_can_write_or_a_link_is_not_written_into() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("conf.d");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = check_own_dir(&open).unwrap_err();
        assert!(
            err.contains("mode 0777") && err.contains("plant a link"),
            "{err}"
        );
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        check_own_dir(&open).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&open, &link).unwrap();
        let err = check_own_dir(&link).unwrap_err();
        assert!(err.contains("symbolic link"), "{err}");
        // Sticky, as /tmp: others cannot replace what is not theirs.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        check_own_dir(&open).unwrap();
    }

    #[test]
    fn a_directory_that_was_there_keeps_its_mode_and_a_link_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let trust = Trust::private();
        // A web root of this user's, 0755: used as it is, never made 0700.
        let www = dir.path().join("www");
        std::fs::create_dir(&www).unwrap();
        std::fs::set_permissions(&www, std::fs::Permissions::from_mode(0o755)).unwrap();
        trust.ensure_dir(&www, "the database's directory").unwrap();
        assert_eq!(std::fs::metadata(&www).unwrap().mode() & 0o7777, 0o755);
        // What it makes is 0700, each level.
        let made = dir.path().join("a/b");
        trust.ensure_dir(&made, "the database's directory").unwrap();
        for d in [dir.path().join("a"), made.clone()] {
            assert_eq!(
                std::fs::metadata(&d).unwrap().mode() & 0o7777,
                0o700,
                "{d:?}"
            );
        }
        // A link where the directory goes is refused, and where it points is untouched.
        let elsewhere = dir.path().join("etc-copy");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o755)).unwrap();
        let link = dir.path().join("manent");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        let err = trust
            .ensure_dir(&link, "the database's directory")
            .unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(
            std::fs::metadata(&elsewhere).unwrap().mode() & 0o7777,
            0o755
        );
        // Under a directory others may write (no sticky bit), nothing is made: it is refused
        // before, naming that directory.
        let open = dir.path().join("shared");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = trust
            .ensure_dir(&open.join("manent"), "the database's directory")
            .unwrap_err();
        assert!(err.to_string().contains("mode 0777"), "{err}");
        assert!(
            !open.join("manent").exists(),
            "made where others could have put a link"
        );
    }

    #[test]
    fn a_trusted_read_refuses_a_file_others_could_write() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("SHA256SUMS");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(read_trusted(&file, 10).unwrap(), b"x");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o664)).unwrap();
        let err = read_trusted(&file, 10).unwrap_err().to_string();
        assert!(
            err.contains("mode 0664") && err.contains("chmod go-w"),
            "{err}"
        );
        // Unchanged: refused, never repaired.
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o664);
        assert!(read_regular(&file, 10).is_ok(), "a plain read does not ask");
    }

    #[test]
    fn a_file_read_whole_is_a_regular_one_within_its_size_checked_where_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "four").unwrap();
        assert_eq!(read_regular(&file, 4).unwrap(), b"four");
        assert!(matches!(
            read_regular(&file, 3),
            Err(Irregular::TooLarge(4, 3))
        ));
        assert!(matches!(
            read_regular(dir.path(), 9),
            Err(Irregular::NotRegular)
        ));
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        assert!(matches!(read_regular(&fifo, 9), Err(Irregular::NotRegular)));
        assert!(matches!(
            read_regular(&dir.path().join("none"), 9),
            Err(Irregular::Io(_))
        ));
    }

    #[test]
    fn creates_private_whatever_the_umask_and_refuses_what_others_may_write() {
        let dir = tempfile::tempdir().unwrap();
        let trust = Trust::private();
        let own = dir.path().join("a/b");
        trust.ensure_dir(&own, "the database's directory").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(mode(&own), 0o700);
        let f = own.join("f");
        trust.create_file(&f, "the database").unwrap();
        assert_eq!(mode(&f), 0o600);
        assert!(trust.check_file(&f, "the database").unwrap());
        // Readable by others: made private. Writable by others: refused, with the fix.
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        trust.check_file(&f, "the database").unwrap();
        assert_eq!(mode(&f), 0o600);
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = trust
            .check_file(&f, "the database")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("mode 0666") && err.contains("chmod 600"),
            "{err}"
        );
        std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = trust
            .ensure_dir(&own, "the database's directory")
            .unwrap_err();
        assert_eq!(err.path, own);
        assert!(err.to_string().contains("chmod 700"), "{err}");
    }

    #[test]
    fn never_opens_through_a_symbolic_link() {
        let dir = tempfile::tempdir().unwrap();
        let trust = Trust::private();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "x").unwrap();
        let link = dir.path().join("lock");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = trust.open_file(&link, "the lock file", true).unwrap_err();
        assert!(err.problem.contains("symbolic link"), "{err}");
    }

    #[test]
    fn paths_are_quoted_for_the_shell_when_needed() {
        assert_eq!(shell_word(Path::new("/a/b.db")), "/a/b.db");
        assert_eq!(shell_word(Path::new("/a b/it's")), r"'/a b/it'\''s'");
    }
}
