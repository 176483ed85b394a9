//! Driving the operator's nginx: `nginx -t`, a graceful reload, its master's pid and workers.
//! What nginx says is cut to its error lines, and a line about a file other than the two the
//! plugin knows is shown without its quoted text: `nginx -t` echoes the offending word of a
//! file, and that may be a file the operator must not see through manent.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// How long one `nginx -t` or `nginx -s reload` may take.
const NGINX_TIMEOUT: Duration = Duration::from_secs(20);

/// How the plugin reaches nginx.
#[derive(Debug, Clone)]
pub struct Control {
    pub nginx: PathBuf,
    pub prefix: Option<PathBuf>,
    pub conf: PathBuf,
    pub upstreams: PathBuf,
    pub pid_file: Option<PathBuf>,
    /// What `nginx -V` says it was built with, asked once when needed.
    pub built: std::sync::OnceLock<Built>,
}

/// The paths nginx was built with (`nginx -V`'s configure arguments).
#[derive(Debug, Clone, Default)]
pub struct Built {
    pub prefix: Option<PathBuf>,
    pub error_log: Option<PathBuf>,
}

impl Built {
    fn from_version(said: &str) -> Built {
        let arg = |name: &str| {
            said.lines()
                .filter_map(|l| l.strip_prefix("configure arguments:"))
                .flat_map(str::split_whitespace)
                .find_map(|a| a.strip_prefix(name))
                .map(PathBuf::from)
        };
        Built {
            prefix: arg("--prefix="),
            error_log: arg("--error-log-path="),
        }
    }
}

impl Control {
    fn command(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.nginx);
        if let Some(p) = &self.prefix {
            cmd.arg("-p").arg(p);
        }
        cmd.arg("-c").arg(&self.conf);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// `nginx -t` or `nginx -s reload`: Ok, or what nginx said (its error lines).
    pub async fn run(&self, args: &[&str]) -> Result<(), String> {
        let mut cmd = self.command();
        cmd.args(args);
        let out = tokio::time::timeout(NGINX_TIMEOUT, cmd.output())
            .await
            .map_err(|_| format!("no answer within {}s", NGINX_TIMEOUT.as_secs()))?
            .map_err(|e| {
                format!(
                    "cannot run {}: {e} (install nginx, or set `nginx:` in the plugin's \
                     options to its path)",
                    self.nginx.display()
                )
            })?;
        if out.status.success() {
            return Ok(());
        }
        Err(format!(
            "{} ({})",
            self.said(&String::from_utf8_lossy(&out.stderr)),
            out.status
        ))
    }

    /// nginx's error lines, each about a file the plugin does not own shown without quoted
    /// text.
    fn said(&self, stderr: &str) -> String {
        let lines: Vec<String> = stderr
            .lines()
            .filter(|l| !l.contains("signal process started"))
            .filter(|l| l.contains("[emerg]") || l.contains("[alert]") || l.contains("[crit]"))
            .map(|l| self.shown(l.trim_start_matches("nginx: ")))
            .collect();
        if lines.is_empty() {
            "nginx gave no error line".to_owned()
        } else {
            lines.join("; ")
        }
    }

    /// A line of nginx's, shown without its quoted text when it is about a file the plugin
    /// does not own.
    fn shown(&self, line: &str) -> String {
        let ours = [&self.upstreams, &self.conf];
        let about_ours = ours
            .iter()
            .any(|o| line.contains(&format!(" in {}:", o.display())));
        if about_ours || !line.contains(" in /") {
            line.to_owned()
        } else {
            manent::plugin::slots::elide_quoted(line, '"')
        }
    }

    /// nginx's error log as it is now, to read what its master says of a reload sent after:
    /// the main configuration's own `error_log` (outside every block), else the one nginx was
    /// built with (`nginx -V`), a relative path taken from nginx's prefix. None when it goes
    /// elsewhere (stderr, syslog) or cannot be opened (the plugin's user may not read a
    /// root-only log).
    pub fn error_log(&self) -> Option<ErrorLog> {
        let conf = std::fs::read_to_string(&self.conf).unwrap_or_default();
        // nginx's own names for a log that is no file (Debian builds with `stderr`).
        let no_file =
            |n: &str| n == "stderr" || n.starts_with("syslog:") || n.starts_with("memory:");
        let named = main_error_log(&conf);
        let path = match named.map(PathBuf::from) {
            Some(n) if n.is_absolute() => n,
            named => {
                let built = self.built();
                let prefix = self.prefix.clone().or_else(|| built.prefix.clone());
                let path = named
                    .or_else(|| built.error_log.clone())
                    .unwrap_or_else(|| PathBuf::from("logs/error.log"));
                if path.to_str().is_some_and(no_file) {
                    return None;
                }
                match prefix {
                    Some(p) if path.is_relative() => p.join(path),
                    _ => path,
                }
            }
        };
        if path.to_str().is_some_and(no_file) {
            return None;
        }
        let file = open_log(&path)?;
        let pos = file.metadata().ok()?.len();
        Some(ErrorLog {
            path,
            file,
            pos,
            said: Vec::new(),
        })
    }

    /// What nginx was built with, from `nginx -V` (asked once).
    fn built(&self) -> &Built {
        self.built.get_or_init(|| {
            use std::io::Read as _;
            let Ok(mut child) = std::process::Command::new(&self.nginx)
                .arg("-V")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
            else {
                return Built::default();
            };
            // A few lines, at once; an nginx that does not answer within 2 s is left unasked.
            let deadline = std::time::Instant::now() + Duration::from_secs(2);
            while matches!(child.try_wait(), Ok(None)) {
                if std::time::Instant::now() >= deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Built::default();
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let mut said = String::new();
            if let Some(mut err) = child.stderr.take() {
                let _ = err.read_to_string(&mut said);
            }
            Built::from_version(&said)
        })
    }

    /// The master's pid, from its pid file (`pid_file:`, the configuration's `pid`, the
    /// prefix's `logs/nginx.pid`, or `/run/nginx.pid`), if that process is nginx's master; else
    /// why there is none. A pid file another user could write is not trusted: it would name their process as nginx's master (its title is theirs to set),
    /// and the plugin would trust what that process's users answer and signal its children.
    pub fn master(&self) -> Result<u32, String> {
        use std::os::unix::fs::MetadataExt;
        let from_conf = || {
            let conf = std::fs::read_to_string(&self.conf).ok()?;
            conf.lines()
                .map(str::trim)
                .find_map(|l| l.strip_prefix("pid "))
                .map(|p| PathBuf::from(p.trim_end_matches(';').trim()))
        };
        let file = self
            .pid_file
            .clone()
            .or_else(from_conf)
            .or_else(|| self.prefix.as_ref().map(|p| p.join("logs/nginx.pid")))
            .unwrap_or_else(|| PathBuf::from("/run/nginx.pid"));
        let file = match (&self.prefix, file.is_relative()) {
            (Some(p), true) => p.join(file),
            _ => file,
        };
        let shown = file.display();
        let meta = std::fs::metadata(&file).map_err(|e| format!("no pid file at {shown} ({e})"))?;
        let me = manent::sys::uid();
        let owned = |m: &std::fs::Metadata| m.uid() == 0 || m.uid() == me;
        if !owned(&meta) || meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{shown} is owned by uid {} with mode {:o}: a pid file another user can write \
                 is not trusted (nginx writes it as its master's user, 0644)",
                meta.uid(),
                meta.mode() & 0o7777
            ));
        }
        if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty())
            && let Ok(d) = std::fs::metadata(dir)
            && (!owned(&d) || (d.mode() & 0o022 != 0 && d.mode() & 0o1000 == 0))
        {
            return Err(format!(
                "{} (uid {}, mode {:o}) lets another user replace {shown}: its pid is not \
                 trusted",
                dir.display(),
                d.uid(),
                d.mode() & 0o7777
            ));
        }
        let pid: u32 = std::fs::read_to_string(&file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .ok_or_else(|| format!("{shown} holds no pid"))?;
        let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmd.starts_with("nginx: master") {
            Ok(pid)
        } else {
            Err(format!(
                "{shown} names pid {pid}, which is not nginx's master"
            ))
        }
    }

    /// Every child of the master, a worker or not yet (a new one is titled only once it is
    /// ready): what was there before a reload.
    pub fn children(&self, master: Option<u32>) -> Vec<Child> {
        let Some(master) = master else {
            return Vec::new();
        };
        children(master)
            .into_iter()
            .filter_map(|pid| Some(Child::of(master, pid)?.0))
            .collect()
    }

    /// The master's worker processes that take connections (not those shutting down).
    pub fn workers(&self, master: Option<u32>) -> Vec<Child> {
        let Some(master) = master else {
            return Vec::new();
        };
        children(master)
            .into_iter()
            .filter_map(|pid| Child::of(master, pid).filter(|(_, taking)| *taking))
            .map(|(c, _)| c)
            .collect()
    }

    /// Tells the workers of `old` that still take connections to shut down gracefully (QUIT,
    /// which nginx documents for a single worker). Called once a worker started since the
    /// reload was sent is ready (a worker is titled "worker process" only once its listeners
    /// are in its event loop): after starting new workers on a reload, nginx's master waits
    /// 100 ms before it tells the old ones, and until then they keep taking connections with
    /// the previous file (a third of them, one client's sequential requests, measured). The
    /// master's signals are blocked while it waits; when the wait ends it counts these
    /// workers as exiting before it reaps any child, so none is started again. `old` holds
    /// only processes that were its children before the reload was sent, titled or not yet:
    /// none of them is new to the reload under way (a reload is taken only once the last one's
    /// wait is over, and a command returns only once its reload's workers are up). How many
    /// were told; none when the plugin may not signal them (the master's own wait then ends
    /// it).
    pub fn retire(&self, master: Option<u32>, old: &[Child]) -> usize {
        let Some(master) = master else {
            return 0;
        };
        old.iter()
            .filter(|w| Child::of(master, w.pid).is_some_and(|(c, taking)| c == **w && taking))
            .filter(|w| manent::sys::signal(w.pid, libc::SIGQUIT))
            .count()
    }

    /// The directory of the upstreams file.
    pub fn dir(&self) -> &Path {
        self.upstreams
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
    }
}

/// The first `error_log` of the main context: outside every block, comments ignored, quotes
/// kept together (a `#`, `;` or brace inside them is text).
fn main_error_log(conf: &str) -> Option<String> {
    let (mut depth, mut words, mut word) = (0usize, Vec::<String>::new(), String::new());
    let (mut quote, mut comment) = (None::<char>, false);
    for c in conf.chars() {
        match (quote, c) {
            _ if comment => comment = c != '\n',
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => quote = Some(c),
            (None, '#') => comment = true,
            (None, ';' | '{' | '}') => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                if c == ';' && depth == 0 && words.first().is_some_and(|w| w == "error_log") {
                    return words.get(1).cloned();
                }
                words.clear();
                match c {
                    '{' => depth += 1,
                    '}' => depth = depth.saturating_sub(1),
                    _ => {}
                }
            }
            (None, c) if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            (None, c) => word.push(c),
        }
    }
    None
}

/// Opens a log for reading without blocking on what is not a regular file (a FIFO put in a
/// log directory the workers' user can write would hang the change) or taking a terminal.
fn open_log(path: &Path) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// nginx's error log from a point on, read as it grows. The file opened at first is read to
/// its end; once the path names another file (a rotation: nginx opens the path anew for the
/// reload it takes), that one is read from its start too. Cut short (copytruncate), a file is
/// read again from its start.
#[derive(Debug)]
pub struct ErrorLog {
    pub path: PathBuf,
    file: std::fs::File,
    pos: u64,
    said: Vec<String>,
}

impl ErrorLog {
    /// What `master` logged as `[emerg]` since: each message once, without its time and pids,
    /// quoted text of a file the plugin does not own left out (see [`Control::shown`]).
    pub fn emerg(&mut self, control: &Control, master: u32) -> &[String] {
        use std::os::unix::fs::MetadataExt;
        self.read_on(control, master);
        let held = self.file.metadata().map(|m| (m.dev(), m.ino())).ok();
        let named = std::fs::metadata(&self.path)
            .map(|m| (m.dev(), m.ino()))
            .ok();
        if named.is_some()
            && named != held
            && let Some(file) = open_log(&self.path)
        {
            self.file = file;
            self.pos = 0;
            self.read_on(control, master);
        }
        &self.said
    }

    /// Reads the held file on from where it was left, keeping the master's `[emerg]` lines.
    fn read_on(&mut self, control: &Control, master: u32) {
        use std::io::{Read as _, Seek as _};
        let len = self.file.metadata().map_or(0, |m| m.len());
        if len < self.pos {
            self.pos = 0;
        }
        let mut bytes = Vec::new();
        let read = self
            .file
            .seek(std::io::SeekFrom::Start(self.pos))
            .and_then(|_| (&self.file).take(1 << 20).read_to_end(&mut bytes));
        // Whole lines only: the rest is read with what follows it.
        let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        if read.is_err() || whole == 0 {
            return;
        }
        self.pos += whole as u64;
        let tag = format!("[emerg] {master}#");
        for line in String::from_utf8_lossy(&bytes[..whole]).lines() {
            let Some((_, after)) = line.split_once(&tag) else {
                continue;
            };
            let message = after.split_once(": ").map_or(after, |(_, m)| m);
            let message = control.shown(message);
            if !self.said.contains(&message) {
                self.said.push(message);
            }
        }
    }

    /// Whether `emerg` says the reload failed: any message but a `bind()` nginx tries again
    /// (on "Address already in use" only: five times, half a second apart, before it says it
    /// "still could not bind()").
    pub fn refused(emerg: &[String]) -> bool {
        emerg
            .iter()
            .any(|m| !(m.starts_with("bind() to ") && m.contains(" failed (98: ")))
    }
}

/// Whether the master or one of its children holds socket `inode` open (`socket:[N]` among
/// its descriptors): the process at the other end of a connection is nginx, not merely a
/// process of a user nginx's workers share (PHP-FPM or a CGI runs as `www-data` too). None
/// when their descriptors cannot be read (the plugin not root, its workers another user's).
pub fn holds_socket(master: u32, inode: u64) -> Option<bool> {
    let want = format!("socket:[{inode}]");
    let mut unreadable = false;
    for pid in std::iter::once(master).chain(
        children(master)
            .into_iter()
            .filter(|pid| Child::of(master, *pid).is_some()),
    ) {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            unreadable = true;
            continue;
        };
        if fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == want.as_str()))
        {
            return Some(true);
        }
    }
    (!unreadable).then_some(false)
}

/// The users the master's children (its workers) run as, each once.
pub fn child_uids(master: u32) -> Vec<u32> {
    let mut uids: Vec<u32> = children(master)
        .into_iter()
        .filter(|pid| Child::of(master, *pid).is_some())
        .filter_map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
            line.split_whitespace().next()?.parse().ok()
        })
        .collect();
    uids.sort_unstable();
    uids.dedup();
    uids
}

/// The pids that may be children of `master`: the kernel's list of its children, read in one
/// go (read in pieces, a child that exits in between makes it skip another), or every process
/// when that list is not kept (a kernel without `CONFIG_PROC_CHILDREN`; a full scan reads a
/// file per process, tens of milliseconds on a busy host).
fn children(master: u32) -> Vec<u32> {
    use std::io::Read as _;
    let path = format!("/proc/{master}/task/{master}/children");
    if let Ok(mut f) = std::fs::File::open(path) {
        let mut buf = vec![0u8; 64 * 1024];
        if let Ok(n) = f.read(&mut buf) {
            return String::from_utf8_lossy(&buf[..n])
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
        }
    }
    std::fs::read_dir("/proc")
        .map(|procs| {
            procs
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// A child process of nginx's master: its pid and when it started (so a pid used again is
/// not taken for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Child {
    pub pid: u32,
    started: u64,
}

impl Child {
    /// Process `pid` if it is a child of `master`, and whether it is a worker that takes
    /// connections: its title says "worker process" and not "shutting down".
    fn of(master: u32, pid: u32) -> Option<(Child, bool)> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // After the name's closing parenthesis: state, ppid, …; the start time is field 22.
        let mut rest = stat.rsplit_once(") ")?.1.split_whitespace();
        let ppid: u32 = rest.nth(1)?.parse().ok()?;
        let started: u64 = rest.nth(17)?.parse().ok()?;
        if ppid != master {
            return None;
        }
        let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let taking = cmd.contains("worker process") && !cmd.contains("shutting down");
        Some((Child { pid, started }, taking))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A control of an nginx under `prefix`.
    fn under(prefix: &Path) -> Control {
        Control {
            nginx: "nginx".into(),
            prefix: Some(prefix.to_owned()),
            conf: prefix.join("nginx.conf"),
            upstreams: prefix.join("manent-web.conf"),
            pid_file: None,
            built: Default::default(),
        }
    }

    #[test]
    fn the_main_error_log_is_the_one_outside_every_block() {
        let conf = "# error_log /commented;\nuser root; events { } http {\n  error_log /http.log;\n\
                    server { error_log /server.log; }\n}\nerror_log  logs/main.log  warn;\n\
                    error_log /second.log;\n";
        assert_eq!(main_error_log(conf).as_deref(), Some("logs/main.log"));
        assert_eq!(main_error_log("http { error_log /x; }\n"), None);
        assert_eq!(
            main_error_log("error_log \"/q.log\";").as_deref(),
            Some("/q.log")
        );
        // Quotes keep a `#`, a space or a brace inside them as text.
        let quoted = "env 'A=#{';\nerror_log \"/var/log/my logs/e#1.log\" warn;\n";
        assert_eq!(
            main_error_log(quoted).as_deref(),
            Some("/var/log/my logs/e#1.log")
        );
        let built = Built::from_version(
            "nginx version: nginx/1.22.1\nconfigure arguments: --with-cc-opt='-g' \
             --prefix=/usr/share/nginx --error-log-path=/var/log/nginx/error.log\n",
        );
        assert_eq!(built.prefix.as_deref(), Some(Path::new("/usr/share/nginx")));
        assert_eq!(
            built.error_log.as_deref(),
            Some(Path::new("/var/log/nginx/error.log"))
        );
    }

    #[test]
    fn a_reload_is_refused_by_any_emerg_but_a_bind_nginx_tries_again() {
        let retry = "bind() to 127.0.0.1:9 failed (98: Address already in use)".to_owned();
        assert!(!ErrorLog::refused(std::slice::from_ref(&retry)));
        // nginx tries again only when the address is in use.
        assert!(ErrorLog::refused(&[
            "bind() to 10.9.9.9:80 failed (99: Cannot assign requested address)".to_owned()
        ]));
        assert!(ErrorLog::refused(&[
            retry,
            "still could not bind()".to_owned()
        ]));
        assert!(ErrorLog::refused(&[
            "open() \"/x/y.log\" failed (13: Permission denied)".to_owned()
        ]));
        assert!(!ErrorLog::refused(&[]));
    }

    #[test]
    fn the_error_log_gives_the_masters_own_emerg_lines_since_the_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("error.log");
        std::fs::write(&path, "2026/12/05 10:55:04 [emerg] 7#7: an old one\n").unwrap();
        let c = under(dir.path());
        std::fs::write(&c.conf, "error_log error.log;\n").unwrap();
        let mut log = c.error_log().unwrap();
        let bind = "bind() to 127.0.0.1:39001 failed (98: Address already in use)";
        let mut more = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        use std::io::Write as _;
        for line in [
            format!("2026/12/05 10:55:05 [emerg] 7#7: {bind}"),
            format!("2026/12/05 10:55:05 [emerg] 7#7: {bind}"),
            "2026/12/05 10:55:05 [emerg] 8#8: another master's".to_owned(),
            "2026/12/05 10:55:05 [notice] 7#7: signal process started".to_owned(),
            "2026/12/05 10:55:05 [emerg] 7#7: unknown directive \"s3cr3t\" in /etc/secret:1"
                .to_owned(),
            "2026/12/05 10:55:07 [emerg] 7#7: still could not bind()".to_owned(),
        ] {
            writeln!(more, "{line}").unwrap();
        }
        // A line not yet ended waits for its end; a byte that is not UTF-8 hides nothing.
        more.write_all(b"2026/12/05 10:55:07 [emerg] 7#7: bad \xff byte\n2026/12/05 10:55:07 [emerg] 7#7: half").unwrap();
        let said = log.emerg(&c, 7).to_vec();
        assert_eq!(said.len(), 4, "{said:?}");
        assert_eq!(said[0], bind);
        assert!(!said[1].contains("s3cr3t") && said[1].contains("/etc/secret:1"));
        assert_eq!(said[2], "still could not bind()");
        assert!(
            said[3].starts_with("bad ") && said[3].ends_with(" byte"),
            "{said:?}"
        );
        assert!(ErrorLog::refused(&said));
        writeln!(more, " written").unwrap();
        assert_eq!(log.emerg(&c, 7).last().unwrap(), "half written");
        // Cut short (copytruncate): read again from its start.
        std::fs::write(&path, "2026/12/05 10:56:00 [emerg] 7#7: after the cut\n").unwrap();
        assert_eq!(log.emerg(&c, 7).last().unwrap(), "after the cut");
    }

    #[test]
    fn a_pid_file_another_user_could_write_names_no_master() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("logs");
        std::fs::create_dir(&logs).unwrap();
        std::fs::set_permissions(&logs, std::fs::Permissions::from_mode(0o755)).unwrap();
        let c = under(dir.path());
        assert!(c.master().unwrap_err().contains("no pid file"));
        let pid = logs.join("nginx.pid");
        std::fs::write(&pid, format!("{}\n", std::process::id())).unwrap();
        std::fs::set_permissions(&pid, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(
            c.master()
                .unwrap_err()
                .contains("which is not nginx's master")
        );
        std::fs::set_permissions(&pid, std::fs::Permissions::from_mode(0o666)).unwrap();
        let why = c.master().unwrap_err();
        assert!(
            why.contains("mode 666") && why.contains("not trusted"),
            "{why}"
        );
        std::fs::set_permissions(&pid, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&logs, std::fs::Permissions::from_mode(0o777)).unwrap();
        let why = c.master().unwrap_err();
        assert!(why.contains("mode 777") && why.contains("replace"), "{why}");
        // World-writable with the sticky bit (/tmp, /run/lock): nobody replaces another's file.
        std::fs::set_permissions(&logs, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(
            c.master()
                .unwrap_err()
                .contains("which is not nginx's master")
        );
    }

    #[test]
    fn another_files_text_never_reaches_the_operator() {
        let c = Control {
            nginx: "nginx".into(),
            prefix: None,
            conf: "/etc/nginx/nginx.conf".into(),
            upstreams: "/etc/nginx/manent-web.conf".into(),
            pid_file: None,
            built: Default::default(),
        };
        let said = c.said(
            "nginx: [emerg] unknown directive \"s3cr3t-root-only\" in /tmp/rootonly.txt:1\n\
             nginx: configuration file /etc/nginx/nginx.conf test failed\n",
        );
        assert!(!said.contains("s3cr3t"), "{said}");
        assert!(said.contains("/tmp/rootonly.txt:1"), "{said}");
        let said =
            c.said("nginx: [emerg] unknown directive \"wieght\" in /etc/nginx/manent-web.conf:4\n");
        assert!(said.contains("\"wieght\""), "{said}");
    }
}
