//! The fence that needs no help from the engine: a small process (the same binary, `manent
//! watchdog`, in a process group of its own) started by an engine that holds a lease on a
//! shared database. The engine writes one byte on the watchdog's stdin each time its lease is
//! renewed. When none has come for nine tenths of the lease — the engine is frozen (SIGSTOP, a
//! paused VM), swapped out, stuck in a syscall, or gone — the watchdog kills every process group
//! the engine recorded (its steps' commands and its plugins), checked as a restarted engine
//! checks them, so nothing it started runs on when another engine may take its work over (one
//! lease and a grace after its last renewal). A `q` says the engine stops cleanly; end of file
//! without one (the engine was killed) kills what it recorded at once — before a new engine on
//! the same records could start steps a later kill would hit.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::plugin::Processes;

/// The engine's end: its beats and its goodbye, written by a thread of their own so a beat
/// never waits (a stuck watchdog's full pipe loses beats, never stalls the engine).
#[derive(Debug)]
pub struct Watchdog {
    beats: Mutex<Option<std::sync::mpsc::SyncSender<u8>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    child: Mutex<std::process::Child>,
    /// Its going away was said (once).
    lost: std::sync::atomic::AtomicBool,
}

/// How long after the last beat the watchdog kills: nine tenths of the lease (the engine fences
/// itself at the whole lease; another engine takes over a lease and a second later).
pub fn silence_for(lease: Duration) -> Duration {
    lease.saturating_sub(lease / 10)
}

impl Watchdog {
    /// Starts `manent watchdog` on the engine's process records in `records` (under the files
    /// rules of `shared_group`), for an engine whose lease is `lease`. It is given what it
    /// watches, not the configuration to read again.
    pub fn spawn(
        records: &Path,
        shared_group: Option<&str>,
        lease: Duration,
    ) -> std::io::Result<Watchdog> {
        use std::os::unix::process::CommandExt;
        let exe = std::env::current_exe()?;
        let within = silence_for(lease);
        let mut cmd = std::process::Command::new(exe);
        cmd.arg("watchdog")
            .arg("--records")
            .arg(records)
            .arg("--within-ms")
            .arg(within.as_millis().to_string());
        if let Some(g) = shared_group {
            cmd.arg("--shared-group").arg(g);
        }
        let mut child = cmd
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            // Its own group: a terminal's Ctrl-C or Ctrl-Z to the engine's does not reach it.
            .process_group(0)
            .spawn()?;
        let mut pipe = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no pipe to the watchdog"))?;
        let (beats, rx) = std::sync::mpsc::sync_channel::<u8>(4);
        let writer = std::thread::Builder::new()
            .name("manent-watchdog-beat".into())
            .spawn(move || {
                while let Ok(b) = rx.recv() {
                    if pipe.write_all(&[b]).is_err() || b == b'q' {
                        return;
                    }
                }
            })?;
        let w = Watchdog {
            beats: Mutex::new(Some(beats)),
            writer: Mutex::new(Some(writer)),
            child: Mutex::new(child),
            lost: std::sync::atomic::AtomicBool::new(false),
        };
        w.beat();
        Ok(w)
    }

    /// The lease was renewed just now. A watchdog that went away (its pipe closed) is said
    /// once: the engine goes on, but its steps would run on through a freeze.
    pub fn beat(&self) {
        let gone = match self.beats.lock() {
            Ok(b) => b.as_ref().is_some_and(|b| {
                matches!(
                    b.try_send(b'.'),
                    Err(std::sync::mpsc::TrySendError::Disconnected(_))
                )
            }),
            Err(_) => false,
        };
        if gone && !self.lost.swap(true, std::sync::atomic::Ordering::Relaxed) {
            let how = self
                .child
                .lock()
                .ok()
                .and_then(|mut c| c.try_wait().ok().flatten())
                .map_or_else(|| "it stopped reading".to_owned(), |s| s.to_string());
            tracing::error!(
                "the engine's watchdog went away ({how}): were this engine frozen, its steps would \
                 run on past its lease; restart the engine to start a new one"
            );
        }
    }

    /// The engine stops cleanly (its processes stopped already): the watchdog leaves.
    pub fn stop(&self) {
        if let Ok(mut b) = self.beats.lock()
            && let Some(b) = b.take()
        {
            // Never waits: without its goodbye the watchdog sees the pipe close and kills what
            // is recorded — nothing, the engine having stopped its processes already.
            let _ = b.try_send(b'q');
        }
        if let Some(w) = self.writer.lock().ok().and_then(|mut w| w.take()) {
            // The writer ends once the goodbye is written (or the channel closed).
            let deadline = Instant::now() + Duration::from_secs(1);
            while !w.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        if let Ok(mut c) = self.child.lock() {
            // It leaves at once; reaped here so no zombie stays behind a long-lived process.
            let deadline = Instant::now() + Duration::from_secs(2);
            while Instant::now() < deadline {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

enum Heard {
    Beat,
    Quit,
    Gone,
}

/// `manent watchdog`: kills `processes`' recorded groups once no beat came for `within`;
/// returns when the engine says goodbye, or once it is gone and its groups are killed.
pub fn run(processes: &Processes, within: Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = [0u8; 256];
        loop {
            let heard = match stdin.read(&mut buf) {
                Ok(0) | Err(_) => Heard::Gone,
                Ok(n) if buf[..n].contains(&b'q') => Heard::Quit,
                Ok(_) => Heard::Beat,
            };
            let last = !matches!(heard, Heard::Beat);
            if tx.send(heard).is_err() || last {
                return;
            }
        }
    });
    let mut last = Instant::now();
    let mut fired = false;
    loop {
        let wait = if fired {
            // Silent already: the records are checked again every 200 ms.
            Duration::from_millis(200)
        } else {
            within.saturating_sub(last.elapsed())
        };
        match rx.recv_timeout(wait) {
            Ok(Heard::Beat) => {
                last = Instant::now();
                fired = false;
            }
            Ok(Heard::Quit) => return,
            Ok(Heard::Gone) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                // The engine is dead (killed): what it started dies now, before a new engine
                // on the same records starts steps of its own that a later kill would hit.
                let _ = processes.kill_recorded();
                return;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if last.elapsed() >= within {
            let _ = processes.kill_recorded();
            fired = true;
        }
    }
}

/// `manent watchdog --records DIR [--shared-group G] --within-ms N`: the watchdog of the
/// engine recording its processes in `DIR`; an error when the directory is not one to trust.
pub fn main(records: &Path, shared_group: Option<&str>, within: Duration) -> Result<(), String> {
    let trust = crate::sys::files::Trust::new(shared_group)?;
    let processes = Processes::in_dir(records.to_owned(), &trust).map_err(|e| e.to_string())?;
    run(&processes, within);
    Ok(())
}
