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
        let ours = [
            self.upstreams.display().to_string(),
            self.conf.display().to_string(),
        ];
        let lines: Vec<String> = stderr
            .lines()
            .filter(|l| !l.contains("signal process started"))
            .filter(|l| l.contains("[emerg]") || l.contains("[alert]") || l.contains("[crit]"))
            .map(|l| {
                let l = l.trim_start_matches("nginx: ");
                let about_ours = ours.iter().any(|o| l.contains(&format!(" in {o}:")));
                if about_ours || !l.contains(" in /") {
                    l.to_owned()
                } else {
                    manent::plugin::slots::elide_quoted(l, '"')
                }
            })
            .collect();
        if lines.is_empty() {
            "nginx gave no error line".to_owned()
        } else {
            lines.join("; ")
        }
    }

    /// The master's pid, from its pid file (`pid_file:`, the configuration's `pid`, the
    /// prefix's `logs/nginx.pid`, or `/run/nginx.pid`), if that process is nginx's master.
    pub fn master(&self) -> Option<u32> {
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
        let pid: u32 = std::fs::read_to_string(file).ok()?.trim().parse().ok()?;
        let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        cmd.starts_with("nginx: master").then_some(pid)
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

    #[test]
    fn another_files_text_never_reaches_the_operator() {
        let c = Control {
            nginx: "nginx".into(),
            prefix: None,
            conf: "/etc/nginx/nginx.conf".into(),
            upstreams: "/etc/nginx/manent-web.conf".into(),
            pid_file: None,
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
