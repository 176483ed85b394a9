//! Driving the operator's HAProxy (master-worker mode, as Debian's unit runs it): its master
//! through the master CLI (`-S`) — who it is, its workers, the configuration files its command
//! line loads — `haproxy -c` on exactly those files with the plugin's new one in place of the
//! old, and a reload. What `haproxy -c` says is cut to its alert lines, and a line about a file
//! other than the plugin's is shown without its quoted text (it may be a file the operator
//! must not see through manent).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::cli;

/// How long one `haproxy -c` may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(30);

/// How the plugin reaches HAProxy.
#[derive(Debug, Clone)]
pub struct Control {
    pub haproxy: PathBuf,
    /// The file the plugin renders.
    pub config: PathBuf,
    /// The tester map beside it.
    pub map: PathBuf,
    /// The admin socket.
    pub socket: PathBuf,
    /// The master CLI.
    pub master_socket: PathBuf,
}

/// HAProxy's master, as its CLI and /proc say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Master {
    pub pid: u32,
    /// Who holds the master socket.
    pub uid: u32,
    pub workers: Vec<u32>,
    /// The configuration files it loads, in order (directories read as HAProxy does).
    pub files: Vec<PathBuf>,
}

impl Master {
    /// Whether it loads `config`.
    pub fn loads(&self, config: &Path) -> bool {
        self.files.iter().any(|f| f == config)
    }
}

impl Control {
    /// The master: its pid and workers from `show proc`, its files from its command line.
    pub async fn master(&self) -> Result<Master, String> {
        let reply = cli::ask(&self.master_socket, &["show proc".to_owned()])
            .await
            .map_err(|e| format!("HAProxy's master CLI: {e}"))?;
        let procs = cli::parse_procs(&reply.text).ok_or_else(|| {
            format!(
                "{} does not answer as HAProxy's master CLI (`show proc` said {:?}): give \
                 `master_socket:` the path of haproxy's `-S` socket",
                self.master_socket.display(),
                reply.text.lines().next().unwrap_or("")
            )
        })?;
        let pid = procs.master;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map_err(|e| format!("cannot read HAProxy's command line (pid {pid}): {e}"))?;
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok();
        Ok(Master {
            pid,
            uid: reply.uid,
            workers: procs.workers,
            files: files_of(&args, cwd.as_deref())?,
        })
    }

    /// `haproxy -c` on `files`, the plugin's file read from `new` instead: Ok, or what
    /// HAProxy said.
    pub async fn check(&self, files: &[PathBuf], new: &Path) -> Result<(), String> {
        let mut cmd = tokio::process::Command::new(&self.haproxy);
        cmd.args(["-c", "-q"]);
        for f in files {
            cmd.arg("-f").arg(if *f == self.config { new } else { f });
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let out = tokio::time::timeout(CHECK_TIMEOUT, cmd.output())
            .await
            .map_err(|_| {
                format!(
                    "haproxy -c gave no answer within {}s",
                    CHECK_TIMEOUT.as_secs()
                )
            })?
            .map_err(|e| {
                format!(
                    "cannot run {}: {e} (install haproxy, or set `haproxy:` in the plugin's \
                     options to its path)",
                    self.haproxy.display()
                )
            })?;
        if out.status.success() {
            return Ok(());
        }
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Err(format!(
            "{} ({})",
            self.said(&text.replace(
                &new.display().to_string(),
                &self.config.display().to_string()
            )),
            out.status
        ))
    }

    /// HAProxy's alert lines, each about a file the plugin does not own shown without its
    /// quoted text.
    fn said(&self, text: &str) -> String {
        let ours = [
            format!("[{}:", self.config.display()),
            format!("'{}'", self.map.display()),
        ];
        let lines: Vec<String> = text
            .lines()
            .filter(|l| l.contains("[ALERT]"))
            .map(|l| {
                let l = l.split_once(" : ").map_or(l, |(_, rest)| rest).trim();
                let names_a_file = l.contains("parsing [") || l.contains(" file ");
                if !names_a_file || ours.iter().any(|o| l.contains(o.as_str())) {
                    l.to_owned()
                } else {
                    manent::plugin::slots::elide_quoted(l, '\'')
                }
            })
            .collect();
        if lines.is_empty() {
            text.lines()
                .rfind(|l| !l.trim().is_empty())
                .unwrap_or("haproxy -c gave no alert line")
                .trim()
                .to_owned()
        } else {
            lines.join("; ")
        }
    }

    /// Asks the master to reload (it starts new workers with the files it was started with,
    /// and the old ones finish their connections).
    pub async fn reload(&self) -> Result<(), String> {
        let reply = cli::ask(&self.master_socket, &["reload".to_owned()]).await?;
        match cli::refusals(&reply.text).as_slice() {
            [] => Ok(()),
            said => Err(format!(
                "HAProxy's master refused to reload: {}",
                said.join("; ")
            )),
        }
    }
}

/// The configuration files a HAProxy command line loads, in order: each `-f FILE` (a
/// directory: its `*.cfg` files in lexical order, as HAProxy reads them) and every argument
/// after `--`; relative paths from `-C DIR`, else the process's working directory `cwd`.
pub fn files_of(args: &[String], cwd: Option<&Path>) -> Result<Vec<PathBuf>, String> {
    let mut named = Vec::new();
    let mut base = cwd.map(Path::to_path_buf);
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "-f" => named.extend(it.next().cloned()),
            "-C" => base = it.next().map(PathBuf::from),
            "--" => named.extend(it.by_ref().cloned()),
            _ => {}
        }
    }
    let mut files = Vec::new();
    for n in named {
        let p = PathBuf::from(&n);
        let p = if p.is_absolute() {
            p
        } else {
            base.as_ref().map(|b| b.join(&p)).ok_or_else(|| {
                format!(
                    "HAProxy loads {n}, a relative path, and its working directory cannot be \
                     read: start it with absolute paths"
                )
            })?
        };
        if p.is_dir() {
            let mut inside: Vec<PathBuf> = std::fs::read_dir(&p)
                .map_err(|e| format!("cannot list {}: {e}", p.display()))?
                .flatten()
                .map(|e| e.path())
                .filter(|f| f.extension().is_some_and(|x| x == "cfg") && f.is_file())
                .collect();
            inside.sort();
            files.extend(inside);
        } else {
            files.push(p);
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control() -> Control {
        Control {
            haproxy: "haproxy".into(),
            config: "/etc/haproxy/manent-web.cfg".into(),
            map: "/etc/haproxy/manent-web.testers.map".into(),
            socket: "/run/haproxy/admin.sock".into(),
            master_socket: "/run/haproxy-master.sock".into(),
        }
    }

    #[test]
    fn the_files_a_command_line_loads_are_read_as_haproxy_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("conf.d")).unwrap();
        for f in ["b.cfg", "a.cfg", "notes.txt"] {
            std::fs::write(d.join("conf.d").join(f), "").unwrap();
        }
        let args: Vec<String> = [
            "/usr/sbin/haproxy",
            "-Ws",
            "-f",
            "/etc/haproxy/haproxy.cfg",
            "-p",
            "/run/haproxy.pid",
            "-f",
            "conf.d",
            "-S",
            "/run/haproxy-master.sock",
            "--",
            "/etc/haproxy/last.cfg",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let files = files_of(&args, Some(d)).unwrap();
        assert_eq!(
            files,
            vec![
                PathBuf::from("/etc/haproxy/haproxy.cfg"),
                d.join("conf.d/a.cfg"),
                d.join("conf.d/b.cfg"),
                PathBuf::from("/etc/haproxy/last.cfg"),
            ]
        );
        let e = files_of(&args, None).unwrap_err();
        assert!(e.contains("conf.d, a relative path"), "{e}");
        let c = ["haproxy", "-C", "/srv", "-f", "x.cfg"].map(str::to_owned);
        assert_eq!(
            files_of(&c, None).unwrap(),
            vec![PathBuf::from("/srv/x.cfg")]
        );
    }

    #[test]
    fn another_files_text_never_reaches_the_operator() {
        let said = control().said(
            "[NOTICE]   (1) : haproxy version is 2.6.12\n\
             [ALERT]    (1) : config : parsing [/tmp/rootonly.txt:1] : unknown keyword 's3cr3t-root-only' out of section.\n\
             [ALERT]    (1) : config : parsing [/etc/haproxy/manent-web.cfg:9] : unknown keyword 'wieght'.\n\
             [ALERT]    (1) : config : Fatal errors found in configuration.\n",
        );
        assert!(!said.contains("s3cr3t"), "{said}");
        assert!(said.contains("/tmp/rootonly.txt:1"), "{said}");
        assert!(said.contains("'wieght'"), "{said}");
        assert!(
            said.contains("Fatal errors found in configuration."),
            "{said}"
        );
    }
}
