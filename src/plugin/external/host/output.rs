//! What a plugin process writes: its stderr forwarded as log lines (hclog JSON or plain text,
//! attributed to the call in flight when untagged), anything on stdout after the handshake
//! drained and reported, go-plugin's GRPCStdio; the stderr pipes' shared budget; and the socket
//! a killed plugin leaves behind.

use super::*;

/// The plugin's stderr pipe: room for a burst of log lines.
pub(super) const PIPE_BYTES: usize = 1 << 20;
/// What the engine's grown plugin stderr pipes may take together, each counted at its full
/// size: a quarter of a user's default pipe allowance (`pipe-user-pages-soft`, 64 MiB). Past that
/// allowance the kernel gives each new pipe of the user a page or two — the operator's shell
/// pipelines included — so plugins past the budget keep the default size.
pub(super) const PIPES_BUDGET: usize = 16 << 20;

/// The bytes the engine's pipes took beyond their default, against the most they may.
#[derive(Debug)]
pub(super) struct PipeBudget {
    grown: std::sync::atomic::AtomicUsize,
    most: usize,
}

pub(super) static PIPES: PipeBudget = PipeBudget::new(PIPES_BUDGET);

impl PipeBudget {
    const fn new(most: usize) -> Self {
        PipeBudget {
            grown: std::sync::atomic::AtomicUsize::new(0),
            most,
        }
    }
}

/// A share of a [`PipeBudget`], given back when dropped (the plugin's stderr closed).
#[derive(Debug)]
pub(super) struct PipeShare(&'static PipeBudget, usize);

impl PipeShare {
    pub(super) fn take(budget: &'static PipeBudget, bytes: usize) -> Option<PipeShare> {
        use std::sync::atomic::Ordering::SeqCst;
        budget
            .grown
            .fetch_update(SeqCst, SeqCst, |g| {
                (g + bytes <= budget.most).then_some(g + bytes)
            })
            .ok()
            .map(|_| PipeShare(budget, bytes))
    }
}

impl Drop for PipeShare {
    fn drop(&mut self) {
        (self.0.grown).fetch_sub(self.1, std::sync::atomic::Ordering::SeqCst);
    }
}

pub(super) fn tail(lines: &Mutex<VecDeque<String>>) -> String {
    lines
        .lock()
        .map(|l| l.iter().cloned().collect::<Vec<_>>().join("\n    "))
        .unwrap_or_default()
}

/// Removes `path` if it is a socket (not followed) owned by this user; anything else stays.
pub(super) fn remove_stale_socket(path: &std::path::Path) {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    if let Ok(m) = std::fs::symlink_metadata(path)
        && m.file_type().is_socket()
        && m.uid() == crate::sys::euid()
    {
        let _ = std::fs::remove_file(path);
    }
}

/// Lines a plugin may write on stderr before its handshake that are kept (shown and stored);
/// past it they only count, so a plugin flooding stderr on its way up cannot fill the database.
pub(super) const BEFORE_HANDSHAKE: usize = 1_000;

pub(super) async fn forward_stderr(
    stderr: tokio::process::ChildStderr,
    (sink, calls): (Arc<dyn LogSink>, Arc<crate::plugin::external::calls::Calls>),
    plugin: String,
    tail: Arc<Mutex<VecDeque<String>>>,
    handshaken: Arc<std::sync::atomic::AtomicBool>,
    // Held while the pipe is read: given back when it closes.
    _share: Option<PipeShare>,
) {
    use std::sync::atomic::Ordering;
    // The pipe's whole capacity per read: a flooding plugin is drained in one syscall.
    let mut lines = crate::plugin::lines::Lines::new(BufReader::with_capacity(1 << 16, stderr));
    let mut in_panic = false;
    let (mut early, mut dropped) = (0usize, 0u64);
    let mut read = 0u32;
    while let Some(line) = lines.next().await {
        // Every 64 lines: while the database is behind but moving, the plugin waits on its
        // pipe rather than its lines going unstored.
        read = read.wrapping_add(1);
        if read.is_multiple_of(64) {
            while sink.congested() {
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
        }
        if line.trim().is_empty() {
            continue;
        }
        let p = hclog::parse(&line, &mut in_panic);
        if let Ok(mut t) = tail.lock() {
            if t.len() == STDERR_TAIL {
                t.pop_front();
            }
            t.push_back(p.message.clone());
        }
        let up = handshaken.load(Ordering::Relaxed);
        if !up {
            early += 1;
            if early > BEFORE_HANDSHAKE {
                dropped += 1;
                continue;
            }
        }
        if up && dropped > 0 {
            sink.log(LogLine {
                at: crate::sys::now_ms(),
                level: Level::Warn,
                source: plugin.clone(),
                deployment_id: None,
                target: None,
                moniker: None,
                message: format!(
                    "{dropped} more stderr lines the plugin wrote before its handshake were not \
                     kept (more than {BEFORE_HANDSHAKE})"
                ),
                attrs: BTreeMap::new(),
            });
            dropped = 0;
        }
        // A line that names no deployment is the call's in flight, if only one can be meant.
        let (deployment_id, target, moniker) = match p.deployment {
            Some(d) => (Some(d), p.target, p.moniker),
            None => {
                let a = calls.attribute();
                // The call's moniker only where the line names no other target.
                let (target, moniker) = match (p.target, a.target) {
                    (Some(own), Some((t, m))) if own == t => (Some(own), p.moniker.or(Some(m))),
                    (None, Some((t, m))) => (Some(t), p.moniker.or(Some(m))),
                    (own, _) => (own, p.moniker),
                };
                (a.deployment, target, moniker)
            }
        };
        sink.log(LogLine {
            at: crate::sys::now_ms(),
            level: p.level,
            source: plugin.clone(),
            deployment_id,
            target,
            moniker,
            message: p.message,
            attrs: p.attrs,
        });
    }
    if dropped > 0 {
        sink.log(LogLine {
            at: crate::sys::now_ms(),
            level: Level::Warn,
            source: plugin,
            deployment_id: None,
            target: None,
            moniker: None,
            message: format!(
                "{dropped} more stderr lines the plugin wrote before its handshake were not kept \
                 (more than {BEFORE_HANDSHAKE})"
            ),
            attrs: BTreeMap::new(),
        });
    }
}

/// Nothing a plugin writes on stdout after the handshake is accepted: it is drained (so the
/// plugin never blocks) and reported once, with the start of what it wrote.
pub(super) async fn drain_stdout(
    mut stdout: BufReader<tokio::process::ChildStdout>,
    log: Logger,
    plugin: String,
) {
    let mut buf = vec![0u8; 8192];
    let mut warned = false;
    while let Ok(n) = stdout.read(&mut buf).await {
        if n == 0 {
            return;
        }
        if !warned {
            warned = true;
            let text = String::from_utf8_lossy(&buf[..n]);
            let first: String = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or_default()
                .chars()
                .filter(|c| !c.is_control())
                .take(80)
                .collect();
            log.warn(&format!(
                "plugin {plugin} wrote to stdout after the handshake ({first:?}…); it is ignored \
                 (stdout is reserved for the handshake: log through the plugin's logger)"
            ));
        }
    }
}

/// go-plugin's GRPCStdio: what a Go plugin prints after Serve. Older plugins (go-plugin 1.0.1)
/// do not have it.
pub(super) async fn forward_stdio(channel: H2, log: Logger) {
    let mut client = GrpcStdioClient::with_origin(channel, conn::origin());
    let Ok(resp) = client.stream_stdio(()).await else {
        return;
    };
    let mut stream = resp.into_inner();
    while let Ok(Some(data)) = stream.message().await {
        let text = String::from_utf8_lossy(&data.data);
        let level = if data.channel == StdioChannel::Stderr as i32 {
            Level::Info
        } else {
            Level::Warn
        };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            log.log(level, line, &[]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_pipes_grow_within_the_engines_budget_and_give_it_back() {
        static BUDGET: PipeBudget = PipeBudget::new(3 << 20);
        let shares: Vec<PipeShare> = std::iter::from_fn(|| PipeShare::take(&BUDGET, 1 << 20))
            .take(10)
            .collect();
        assert_eq!(shares.len(), 3);
        assert!(PipeShare::take(&BUDGET, 1).is_none());
        drop(shares);
        assert!(PipeShare::take(&BUDGET, 3 << 20).is_some());
    }
}
