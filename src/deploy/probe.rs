//! What canary analysis and lifecycle hooks run outside plugins: a shell command in a cleared
//! environment, its process group tracked and killed at its time limit, its output streamed to
//! the log and its tail kept; and an HTTP request (hyper; https with the system's CAs).

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::BufReader;

use crate::plugin::{Level, Logger, Processes};

/// The engine's variables a command keeps (nothing else of the engine's environment).
const KEPT: &[&str] = &["PATH", "HOME", "LANG", "TZ", "TMPDIR"];
/// Lines of output kept for the record.
const TAIL_LINES: usize = 20;
/// Most of a body read.
const BODY: usize = 64 * 1024;

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// Its exit code (`None`: killed by a signal); `Err`: it could not be started.
    pub code: Result<Option<i32>, String>,
    /// It ran past its time limit and was killed, with its process group.
    pub timed_out: bool,
    /// The last lines of its output (stdout and stderr), secrets redacted.
    pub tail: String,
}

impl Ran {
    /// True when it exited 0.
    pub fn ok(&self) -> bool {
        !self.timed_out && self.code == Ok(Some(0))
    }

    /// `exit 1`, `killed after 5s (its time limit)`, `cannot start /bin/sh: …`.
    pub fn describe(&self, limit: Duration) -> String {
        if self.timed_out {
            return format!(
                "killed after {} (its time limit)",
                humantime::format_duration(limit)
            );
        }
        match &self.code {
            Ok(Some(c)) => format!("exit {c}"),
            Ok(None) => "killed by a signal".into(),
            Err(e) => e.clone(),
        }
    }
}

/// Runs `script` with `/bin/sh -c` and `env` (plus the kept variables of the engine's own
/// environment), within `limit`; each output line goes to `log` when given.
pub async fn command(
    script: &str,
    dir: &Path,
    env: &BTreeMap<String, String>,
    processes: &Processes,
    limit: Duration,
    log: Option<&Logger>,
) -> Ran {
    // Run only once its process group is recorded (`plugin::processes::gated`).
    let mut cmd = crate::plugin::processes::gated("/bin/sh", script);
    cmd.env_clear();
    // An empty `dir` (a deployment stored before it was recorded) runs in the engine's own.
    if !dir.as_os_str().is_empty() {
        cmd.current_dir(dir);
    }
    for k in KEPT {
        if let Ok(v) = std::env::var(k) {
            cmd.env(k, v);
        }
    }
    cmd.envs(env).process_group(0).kill_on_drop(true);
    crate::sys::die_with_parent(&mut cmd);
    // One pipe for stdout and stderr: the lines keep the order the command wrote them.
    let cannot = |e: std::io::Error| Ran {
        code: Err(format!("cannot start /bin/sh: {e}")),
        timed_out: false,
        tail: String::new(),
    };
    let output = match crate::plugin::lines::output_pipe(&mut cmd) {
        Ok(o) => o,
        Err(e) => return cannot(e),
    };
    let spawned = cmd.spawn();
    // Its copies of the pipe's write end: the pipe ends when the command's do.
    drop(cmd);
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return cannot(e),
    };
    let _tracked = child.id().map(|pid| processes.track(pid));
    let group = child.id();
    if let Err(e) = crate::plugin::processes::open_gate(&mut child).await {
        if let Some(pgid) = group {
            crate::sys::kill_group(pgid);
        }
        return cannot(e);
    }
    let tail = std::sync::Mutex::new(VecDeque::new());
    let all = async { tokio::join!(drain(Some(output), Level::Info, log, &tail), child.wait()).1 };
    let waited = tokio::time::timeout(limit, all).await;
    // What the command left running in its group goes with it (and all of it on a timeout).
    if let Some(pgid) = group {
        crate::sys::kill_group(pgid);
    }
    let (code, timed_out) = match waited {
        Ok(Ok(status)) => (Ok(status.code()), false),
        Ok(Err(e)) => (Err(format!("cannot wait for it: {e}")), false),
        Err(_) => {
            let _ = child.kill().await;
            (Ok(None), true)
        }
    };
    let tail = tail
        .lock()
        .map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n"))
        .unwrap_or_default();
    Ran {
        code,
        timed_out,
        tail: crate::redact::redact(tail.trim()).into_owned(),
    }
}

/// Reads `pipe` line by line into `log` (if any) and the kept tail.
async fn drain<R: tokio::io::AsyncRead + Unpin>(
    pipe: Option<R>,
    level: Level,
    log: Option<&Logger>,
    tail: &std::sync::Mutex<VecDeque<String>>,
) {
    let Some(pipe) = pipe else { return };
    let mut lines = crate::plugin::lines::Lines::new(BufReader::new(pipe));
    let mut read = 0u32;
    while let Some(line) = lines.next().await {
        if let Some(log) = log {
            // A flooding hook waits on its pipe while a log sink is behind but moving.
            read = read.wrapping_add(1);
            if read.is_multiple_of(64) {
                log.wait_for_room().await;
            }
            log.log(level, &line, &[]);
        }
        if let Ok(mut t) = tail.lock() {
            if t.len() == TAIL_LINES {
                t.pop_front();
            }
            t.push_back(line);
        }
    }
}

/// An HTTP request: the status and up to 64 KiB of the body.
pub async fn request(
    method: &str,
    url: &str,
    headers: &[(String, String)],
    timeout: Duration,
) -> Result<(u16, Vec<u8>), String> {
    request_with_body(method, url, headers, bytes::Bytes::new(), timeout).await
}

/// [`request`] sending `body`.
pub async fn request_with_body(
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: bytes::Bytes,
    timeout: Duration,
) -> Result<(u16, Vec<u8>), String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("bad URL {url}: {e}"))?;
    let https = uri.scheme_str() == Some("https");
    let host = uri
        .host()
        .ok_or_else(|| format!("{url} names no host"))?
        .to_owned();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let method: http::Method = method
        .parse()
        .map_err(|_| format!("bad HTTP method {method}"))?;
    let fetch = async {
        let tcp = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port))
            .await
            .map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
        let mut req = http::Request::builder()
            .method(method)
            .uri(uri.path_and_query().map_or("/", |p| p.as_str()))
            .header(
                http::header::HOST,
                uri.authority().map_or(host.as_str(), |a| a.as_str()),
            )
            .header(http::header::USER_AGENT, "manent");
        for (k, v) in headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let req = req
            .body(http_body_util::Full::new(body))
            .map_err(|e| format!("bad request header: {e}"))?;
        if https {
            let tls = tls_connector()?;
            let name = rustls::pki_types::ServerName::try_from(host.clone())
                .map_err(|e| format!("bad TLS name {host}: {e}"))?;
            let stream = tls
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS with {host}:{port} failed: {e}"))?;
            send(stream, req).await
        } else {
            send(tcp, req).await
        }
    };
    tokio::time::timeout(timeout, fetch).await.map_err(|_| {
        format!(
            "no answer from {url} within {}",
            humantime::format_duration(timeout)
        )
    })?
}

async fn send<S>(
    stream: S,
    req: http::Request<http_body_util::Full<bytes::Bytes>>,
) -> Result<(u16, Vec<u8>), String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use http_body_util::BodyExt;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| format!("HTTP handshake failed: {e}"))?;
    let driver = tokio::spawn(conn);
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| format!("request failed: {e}"))?;
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut bytes = Vec::new();
    while bytes.len() < BODY {
        match body.frame().await {
            Some(Ok(f)) => {
                if let Some(d) = f.data_ref() {
                    bytes.extend_from_slice(d);
                }
            }
            Some(Err(e)) => return Err(format!("reading the body failed: {e}")),
            None => break,
        }
    }
    bytes.truncate(BODY);
    driver.abort();
    Ok((status, bytes))
}

/// A TLS client trusting the system's certificate authorities.
fn tls_connector() -> Result<tokio_rustls::TlsConnector, String> {
    let (config, roots) = crate::sys::tls_client_config(None)?;
    if roots == 0 {
        return Err("no certificate authorities found (install ca-certificates) for https".into());
    }
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// The last `n` bytes of `s`, on a character boundary.
pub fn tail(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_owned();
    }
    let mut start = s.len() - n;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &s[start..])
}
