//! HAProxy's runtime API over a unix socket — the admin socket (`stats socket … level admin`)
//! or the master CLI (`-S`): one connection per batch of commands, sent as one `;`-separated
//! line (HAProxy runs them in order), answered with their output and the uid of whoever holds
//! the socket (SO_PEERCRED). Commands are built from checked parts only, and a line that would
//! still carry a `;`, `\`, `#`, a quote or a control character is refused before it is sent: no
//! value can split into a second command.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long one batch may take, connection included.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(3);
/// A line longer than this is sent as several batches (HAProxy reads one buffer per line).
const LINE_MAX: usize = 8000;

/// What a socket answered, and who holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub text: String,
    pub uid: u32,
}

/// Whether a command may be sent: printable ASCII without the characters HAProxy's CLI
/// reads as a separator, an escape, a comment or a quote.
pub fn check_command(c: &str) -> Result<(), String> {
    if !c.is_empty()
        && c.chars().all(|ch| ch.is_ascii_graphic() || ch == ' ')
        && !c.contains([';', '\\', '#', '\'', '"'])
    {
        Ok(())
    } else {
        Err(format!(
            "refusing to send {:?} to HAProxy: a runtime API command takes no `;`, `\\`, `#`, \
             quote or control character",
            c.chars().take(80).collect::<String>()
        ))
    }
}

/// Why `socket` could not be asked, for the operator.
fn unreachable(socket: &Path, e: &std::io::Error) -> String {
    let p = socket.display();
    match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "{p} does not exist: HAProxy is not running, or it has no such socket (`stats socket \
             {p} level admin` in its global section, `-S {p}` for the master)"
        ),
        std::io::ErrorKind::ConnectionRefused => format!(
            "nothing answers on {p} (connection refused): the socket file is left from a \
             process that stopped — is HAProxy running?"
        ),
        std::io::ErrorKind::PermissionDenied => format!(
            "permission denied on {p}: the plugin's user may not open it (the socket's `mode`, \
             `user` and `group`)"
        ),
        _ => format!("cannot reach {p}: {e}"),
    }
}

/// Sends `commands` (in order, in as few lines as fit) and returns what was answered.
pub async fn ask(socket: &Path, commands: &[String]) -> Result<Reply, String> {
    for c in commands {
        check_command(c)?;
    }
    let mut lines: Vec<String> = Vec::new();
    for c in commands {
        match lines.last_mut() {
            Some(l) if l.len() + c.len() < LINE_MAX => {
                l.push(';');
                l.push_str(c);
            }
            _ => lines.push(c.clone()),
        }
    }
    let mut reply = Reply {
        text: String::new(),
        uid: 0,
    };
    for line in lines {
        let one = tokio::time::timeout(ASK_TIMEOUT, once(socket, &line))
            .await
            .map_err(|_| {
                format!(
                    "no answer on {} within {}s",
                    socket.display(),
                    ASK_TIMEOUT.as_secs()
                )
            })??;
        reply.text.push_str(&one.text);
        reply.uid = one.uid;
    }
    Ok(reply)
}

async fn once(socket: &Path, line: &str) -> Result<Reply, String> {
    let mut s = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|e| unreachable(socket, &e))?;
    let uid = s
        .peer_cred()
        .map_err(|e| format!("cannot tell who holds {}: {e}", socket.display()))?
        .uid();
    let io = async {
        s.write_all(format!("{line}\n").as_bytes()).await?;
        // The master CLI waits for more until the client is done.
        s.shutdown().await?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await?;
        Ok::<_, std::io::Error>(out)
    };
    let out = io
        .await
        .map_err(|e| format!("talking to {}: {e}", socket.display()))?;
    Ok(Reply {
        text: String::from_utf8_lossy(&out).into_owned(),
        uid,
    })
}

/// What a batch of `set`/`add`/`del` commands refused: every line they answered (a success
/// answers nothing).
pub fn refusals(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

/// The master and its workers, from the master CLI's `show proc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Procs {
    pub master: u32,
    pub workers: Vec<u32>,
}

/// Parses `show proc`.
pub fn parse_procs(text: &str) -> Option<Procs> {
    let mut master = None;
    let mut workers = Vec::new();
    for line in text.lines() {
        let mut w = line.split_whitespace();
        let (Some(pid), Some(kind)) = (w.next(), w.next()) else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        match kind {
            "master" => master = Some(pid),
            "worker" => workers.push(pid),
            _ => {}
        }
    }
    Some(Procs {
        master: master?,
        workers,
    })
}

/// The answering process's pid, from `show info`.
pub fn parse_pid(info: &str) -> Option<u32> {
    info.lines()
        .find_map(|l| l.strip_prefix("Pid: "))
        .and_then(|p| p.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_that_splits_or_escapes_a_command_is_sent() {
        assert_eq!(check_command("set server web/green1 weight 10"), Ok(()));
        assert_eq!(
            check_command("add map /etc/haproxy/manent-web.testers.map 0 green1"),
            Ok(())
        );
        for bad in [
            "get weight app/s;show info",
            "set server app/s weight 5\\;show info",
            "set server app/s weight 5\nshow info",
            "set server app/s weight 5 # x",
            "set map 'x' 0 y",
            "",
        ] {
            let e = check_command(bad).unwrap_err();
            assert!(e.contains("refusing to send"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn parses_the_master_s_processes_and_a_worker_s_pid() {
        let text = "#<PID>          <type>          <reloads>       <uptime>        <version>      \n\
                    28514           master          1 [failed: 0]   0d00h10m22s     2.6.12-1+deb12u4\n\
                    # workers\n16968           worker          0               0d00h00m05s     2.6.12-1+deb12u4\n\
                    16001           worker          1               0d00h01m05s     2.6.12-1+deb12u4\n# programs\n\n";
        assert_eq!(
            parse_procs(text),
            Some(Procs {
                master: 28514,
                workers: vec![16968, 16001]
            })
        );
        assert_eq!(parse_procs("Unknown command\n"), None);
        assert_eq!(
            parse_pid("Name: HAProxy\nVersion: 2.6\nPid: 4242\nUptime: 1\n"),
            Some(4242)
        );
    }

    #[test]
    fn a_batch_s_refusals_are_its_answered_lines() {
        assert!(refusals("\n\n\n").is_empty());
        assert_eq!(
            refusals("\nPermission denied\n\n\n"),
            vec!["Permission denied"]
        );
    }
}
