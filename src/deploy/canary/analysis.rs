//! One run of a canary's analysis check: a shell command (exit 0 passes, 1 fails, anything
//! else is inconclusive) or an HTTP GET (the expected status and, if given, a body that matches
//! a regular expression). A check never fails its step: what went wrong is its verdict, with
//! the value seen and an excerpt of the output, so the decision it leads to can say why.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

use crate::config::{Check, HttpCheck};
use crate::plugin::Processes;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The check passed.
    Pass,
    /// The check failed: counts towards the failure limit (a revert).
    Fail,
    /// The check could not tell (a timeout, an unreachable URL, an odd exit code): counts
    /// towards the inconclusive limit (a pause for an operator).
    Inconclusive,
}

impl Verdict {
    /// `passed`, `failed`, `inconclusive`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "passed",
            Verdict::Fail => "failed",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// What one run saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    /// Its verdict.
    pub verdict: Verdict,
    /// The value that decided it: `status 404 (expected 200)`, `exit 1`.
    pub value: String,
    /// The end of the output or body, for the record.
    pub excerpt: String,
    /// How long it took.
    pub duration_ms: u64,
}

/// Longest excerpt kept.
const EXCERPT: usize = 300;
/// Most of a body read to match it.
const BODY: usize = 64 * 1024;

/// What a check may use besides itself.
pub struct Context<'a> {
    /// Variables for a command (`MANENT_DEPLOYMENT_ID`, `MANENT_CANARY_WEIGHT`, …).
    pub env: BTreeMap<String, String>,
    /// The testers' header (`X-Canary: 1`), from RouteTesters, for `tester: true`.
    pub tester_header: Option<(String, String)>,
    /// Where the engine records the processes it starts.
    pub processes: &'a Processes,
}

/// Runs `check` once, within `limit`.
pub async fn run(check: &Check, cx: &Context<'_>, limit: Duration) -> Seen {
    let started = Instant::now();
    let seen = match tokio::time::timeout(limit, run_inner(check, cx)).await {
        Ok(s) => s,
        Err(_) => (
            Verdict::Inconclusive,
            format!("no answer within {}", humantime::format_duration(limit)),
            String::new(),
        ),
    };
    Seen {
        verdict: seen.0,
        value: seen.1,
        excerpt: seen.2,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}

async fn run_inner(check: &Check, cx: &Context<'_>) -> (Verdict, String, String) {
    match check {
        Check::Command { command } => run_command(command, cx).await,
        Check::Http(h) => run_http(h, cx).await,
    }
}

async fn run_command(command: &str, cx: &Context<'_>) -> (Verdict, String, String) {
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(command)
        .envs(&cx.env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    crate::sys::die_with_parent(&mut cmd);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return (
                Verdict::Inconclusive,
                format!("cannot start /bin/sh: {e}"),
                String::new(),
            );
        }
    };
    let _tracked = child.id().map(|pid| cx.processes.track(pid));
    let group = child.id();
    let (o, e, status) = tokio::join!(
        read_some(child.stdout.take()),
        read_some(child.stderr.take()),
        child.wait()
    );
    // What the command left running in its group goes with it.
    if let Some(pgid) = group {
        crate::sys::kill_group(pgid);
    }
    let mut text = String::from_utf8_lossy(&o).into_owned();
    text.push_str(&String::from_utf8_lossy(&e));
    let excerpt = tail(&crate::redact::redact(text.trim()), EXCERPT);
    match status.map(|s| s.code()) {
        Ok(Some(0)) => (Verdict::Pass, "exit 0".into(), excerpt),
        Ok(Some(1)) => (Verdict::Fail, "exit 1".into(), excerpt),
        Ok(Some(n)) => (
            Verdict::Inconclusive,
            format!("exit {n} (0 passes, 1 fails)"),
            excerpt,
        ),
        Ok(None) => (Verdict::Inconclusive, "killed by a signal".into(), excerpt),
        Err(e) => (
            Verdict::Inconclusive,
            format!("cannot wait for it: {e}"),
            excerpt,
        ),
    }
}

async fn run_http(h: &HttpCheck, cx: &Context<'_>) -> (Verdict, String, String) {
    let mut headers = h.headers.clone();
    if h.tester {
        match &cx.tester_header {
            Some(t) => headers.push(t.clone()),
            None => {
                return (
                    Verdict::Inconclusive,
                    "tester: true, but no testers' header is known (add a `testers: {}` step \
                     before the analysis)"
                        .into(),
                    String::new(),
                );
            }
        }
    }
    match get(&h.url, &headers, h.timeout).await {
        Err(e) => (Verdict::Inconclusive, e, String::new()),
        Ok((status, body)) => {
            let text = String::from_utf8_lossy(&body).into_owned();
            let excerpt = tail(&crate::redact::redact(text.trim()), EXCERPT);
            if status != h.status {
                return (
                    Verdict::Fail,
                    format!("status {status} (expected {})", h.status),
                    excerpt,
                );
            }
            if let Some(pattern) = &h.body {
                let matched = regex::Regex::new(pattern).is_ok_and(|re| re.is_match(&text));
                if !matched {
                    return (
                        Verdict::Fail,
                        format!("status {status}, body does not match /{pattern}/"),
                        excerpt,
                    );
                }
            }
            (Verdict::Pass, format!("status {status}"), excerpt)
        }
    }
}

/// Up to 64 KiB of a child's pipe (the rest is drained, so the child never blocks on it).
async fn read_some<R: tokio::io::AsyncRead + Unpin>(pipe: Option<R>) -> Vec<u8> {
    let mut buf = Vec::new();
    let Some(mut p) = pipe else { return buf };
    let mut chunk = [0u8; 8192];
    while let Ok(n) = p.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        if buf.len() < BODY {
            buf.extend_from_slice(&chunk[..n.min(BODY - buf.len())]);
        }
    }
    buf
}

/// The last `n` bytes of `s`, on a character boundary.
fn tail(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_owned();
    }
    let mut start = s.len() - n;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &s[start..])
}

/// A GET of `url` with `headers`: the status and up to 64 KiB of the body.
async fn get(
    url: &str,
    headers: &[(String, String)],
    timeout: Duration,
) -> Result<(u16, Vec<u8>), String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("bad URL {url}: {e}"))?;
    let https = uri.scheme_str() == Some("https");
    let host = uri
        .host()
        .ok_or_else(|| format!("{url} names no host"))?
        .to_owned();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let fetch = async {
        let tcp = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port))
            .await
            .map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
        let mut req = http::Request::get(uri.path_and_query().map_or("/", |p| p.as_str()))
            .header(
                http::header::HOST,
                uri.authority().map_or(host.as_str(), |a| a.as_str()),
            )
            .header(http::header::USER_AGENT, "manent-canary-analysis");
        for (k, v) in headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let req = req
            .body(http_body_util::Empty::<bytes::Bytes>::new())
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
    req: http::Request<http_body_util::Empty<bytes::Bytes>>,
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
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for bundle in [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/cert.pem",
    ] {
        if let Ok(iter) = CertificateDer::pem_file_iter(bundle) {
            for cert in iter.flatten() {
                let _ = roots.add(cert);
            }
            break;
        }
    }
    if roots.is_empty() {
        return Err(
            "no certificate authorities found (install ca-certificates) for an https check".into(),
        );
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx(p: &Processes) -> Context<'_> {
        Context {
            env: BTreeMap::from([("MANENT_CANARY_WEIGHT".into(), "25".into())]),
            tester_header: None,
            processes: p,
        }
    }

    #[tokio::test]
    async fn a_command_passes_fails_or_cannot_tell_by_its_exit_code() {
        let p = Processes::none();
        let limit = Duration::from_secs(10);
        let check = |c: &str| Check::Command {
            command: c.to_owned(),
        };
        let s = run(&check("echo weight $MANENT_CANARY_WEIGHT"), &cx(&p), limit).await;
        assert_eq!(
            (s.verdict, s.excerpt.as_str()),
            (Verdict::Pass, "weight 25")
        );
        let s = run(&check("echo 5xx rate 7% >&2; exit 1"), &cx(&p), limit).await;
        assert_eq!(s.verdict, Verdict::Fail);
        assert_eq!(s.excerpt, "5xx rate 7%");
        let s = run(&check("exit 3"), &cx(&p), limit).await;
        assert_eq!(s.verdict, Verdict::Inconclusive);
        assert!(s.value.contains("exit 3"), "{}", s.value);
        let s = run(&check("sleep 30"), &cx(&p), Duration::from_millis(300)).await;
        assert_eq!(s.verdict, Verdict::Inconclusive);
        assert!(s.value.contains("no answer within"), "{}", s.value);
    }

    #[tokio::test]
    async fn an_http_check_reads_the_status_and_the_body() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    use tokio::io::AsyncWriteExt;
                    let mut buf = [0u8; 2048];
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    let req = String::from_utf8_lossy(&buf[..n]).to_string();
                    let (status, body) = if req.starts_with("GET /health") {
                        if req.to_ascii_lowercase().contains("x-canary: 1") {
                            ("200 OK", "candidate ok")
                        } else {
                            ("200 OK", "stable ok")
                        }
                    } else {
                        ("404 Not Found", "no such page")
                    };
                    let resp = format!(
                        "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(resp.as_bytes()).await;
                });
            }
        });
        let p = Processes::none();
        let mut c = cx(&p);
        c.tester_header = Some(("X-Canary".into(), "1".into()));
        let http = |path: &str, body: Option<&str>, tester: bool| {
            Check::Http(HttpCheck {
                url: format!("http://{addr}{path}"),
                headers: Vec::new(),
                tester,
                status: 200,
                body: body.map(str::to_owned),
                timeout: Duration::from_secs(5),
            })
        };
        let limit = Duration::from_secs(10);
        let s = run(&http("/health", Some("^candidate"), true), &c, limit).await;
        assert_eq!(s.verdict, Verdict::Pass, "{s:?}");
        let s = run(&http("/health", Some("^candidate"), false), &c, limit).await;
        assert_eq!(s.verdict, Verdict::Fail);
        assert!(s.value.contains("does not match"), "{}", s.value);
        let s = run(&http("/missing", None, false), &c, limit).await;
        assert_eq!(
            (s.verdict, s.value.as_str(), s.excerpt.as_str()),
            (Verdict::Fail, "status 404 (expected 200)", "no such page")
        );
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let gone = closed.local_addr().unwrap();
        drop(closed);
        let s = run(
            &Check::Http(HttpCheck {
                url: format!("http://{gone}/"),
                headers: Vec::new(),
                tester: false,
                status: 200,
                body: None,
                timeout: Duration::from_secs(2),
            }),
            &c,
            limit,
        )
        .await;
        assert_eq!(s.verdict, Verdict::Inconclusive);
        assert!(s.value.contains("cannot connect"), "{}", s.value);
    }
}
