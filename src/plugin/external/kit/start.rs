//! The start: run without the magic cookie, then the handshake, AutoMTLS, health and
//! Configure as the engine starts a plugin.

use super::*;

impl Kit {
    /// Run by hand (no magic cookie), a plugin says so and exits, printing nothing on stdout.
    pub(super) async fn cookie(&self) -> Check {
        let mut cmd = tokio::process::Command::new(&self.spec.command);
        cmd.args(&self.spec.args)
            .env_clear()
            .envs(std::env::var("PATH").map(|p| ("PATH", p)))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        crate::sys::die_with_parent(&mut cmd);
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                return check(
                    "cookie",
                    Outcome::Fail,
                    format!("cannot start {}: {e}", self.spec.command.display()),
                );
            }
        };
        let pid = child.id().unwrap_or(0);
        match tokio::time::timeout(Duration::from_secs(5), child.wait_with_output()).await {
            Err(_) => {
                crate::sys::kill_group(pid);
                check(
                    "cookie",
                    Outcome::Fail,
                    "run without manent's magic cookie (MANENT_PLUGIN) it was still running after \
                     5s: a plugin run by hand must say it is a plugin and exit",
                )
            }
            Ok(Err(e)) => check("cookie", Outcome::Fail, format!("cannot wait for it: {e}")),
            Ok(Ok(out)) if !out.stdout.is_empty() => check(
                "cookie",
                Outcome::Fail,
                format!(
                    "run without the magic cookie it printed {:?} on stdout: a host would take \
                     that for a handshake",
                    String::from_utf8_lossy(&out.stdout[..out.stdout.len().min(80)])
                ),
            ),
            Ok(Ok(out)) if out.status.success() => check(
                "cookie",
                Outcome::Fail,
                "run without the magic cookie it exited 0: it should refuse (exit non-zero)",
            ),
            Ok(Ok(out)) => check(
                "cookie",
                Outcome::Pass,
                format!(
                    "refuses to run without the magic cookie ({}; nothing on stdout)",
                    out.status
                ),
            ),
        }
    }

    pub(super) async fn started(&mut self, p: &Arc<Process>, took: Duration) {
        let shake = &p.handshake;
        let (network, address) = shake.addr.parts();
        self.push(check(
            "handshake",
            Outcome::Pass,
            format!("handshake line on stdout; serves on {network}:{address}"),
        ));
        self.push(check(
            "protocol",
            Outcome::Pass,
            format!(
                "go-plugin core protocol {}, plugin protocol {}, {}",
                shake.core, shake.app, shake.protocol
            ),
        ));
        let mtls = self.mtls(p).await;
        self.push(mtls);
        self.push(check("health", Outcome::Pass, "`plugin` is SERVING"));
        let unknown: Vec<&String> = p
            .capabilities
            .0
            .iter()
            .filter(|c| !KNOWN.iter().any(|(_, k)| k.as_str() == c.as_str()))
            .collect();
        self.push(if unknown.is_empty() {
            check(
                "configure",
                Outcome::Pass,
                format!("capabilities: [{}]", p.capabilities),
            )
        } else {
            check(
                "configure",
                Outcome::Fail,
                format!(
                    "announces capabilities manent does not know: {unknown:?} (known: {})",
                    KNOWN.map(|(_, c)| c.as_str()).join(", ")
                ),
            )
        });
        let mut start = check(
            "start",
            Outcome::Pass,
            format!(
                "ready in {} ms (spawn to Configure answered; the limit is {})",
                ms(took),
                humantime::format_duration(self.spec.start_timeout)
            ),
        );
        start.ms = Some(ms(took));
        self.push(start);
        self.calls(p).await;
    }

    /// Only the host's certificate is served: another client certificate and plaintext are
    /// refused.
    pub(super) async fn mtls(&self, p: &Process) -> Check {
        let Some(cert) = p.handshake.cert.clone() else {
            return check("automtls", Outcome::Fail, "no certificate in its handshake");
        };
        let plugin_cert = rustls::pki_types::CertificateDer::from(cert);
        let stranger = match tls::Identity::generate()
            .map_err(|e| e.to_string())
            .and_then(|id| tls::client_config(&id, &plugin_cert).map_err(|e| e.to_string()))
        {
            Ok(c) => c,
            Err(e) => return check("automtls", Outcome::Fail, format!("kit error: {e}")),
        };
        let foreign = async {
            let channel = conn::h2(p.handshake.addr.clone(), stranger, &|_| {}).await?;
            let mut health =
                tonic_health::pb::health_client::HealthClient::with_origin(channel, conn::origin());
            health
                .check(tonic_health::pb::HealthCheckRequest {
                    service: "plugin".into(),
                })
                .await
                .map_err(std::io::Error::other)?;
            Ok::<(), std::io::Error>(())
        };
        let foreign = tokio::time::timeout(Duration::from_secs(5), foreign).await;
        if let Ok(Ok(())) = foreign {
            return check(
                "automtls",
                Outcome::Fail,
                "it answered a client whose certificate is not the host's (PLUGIN_CLIENT_CERT): \
                 another local user could drive it",
            );
        }
        match plaintext(&p.handshake.addr).await {
            Ok(true) => check(
                "automtls",
                Outcome::Fail,
                "it speaks HTTP/2 without TLS to anyone who connects",
            ),
            Ok(false) => check(
                "automtls",
                Outcome::Pass,
                "mutual TLS with the host's certificate; another certificate and plaintext refused",
            ),
            Err(e) => check(
                "automtls",
                Outcome::Fail,
                format!("cannot check plaintext: {e}"),
            ),
        }
    }
}

/// True when the plugin answers an HTTP/2 preface in the clear (a SETTINGS frame).
async fn plaintext(addr: &Addr) -> std::io::Result<bool> {
    let mut io = match addr {
        Addr::Unix(path) => tokio::net::UnixStream::connect(path).await?,
        Addr::Tcp(_) => return Ok(false),
    };
    io.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await?;
    let mut head = [0u8; 9];
    match tokio::time::timeout(Duration::from_secs(2), io.read_exact(&mut head)).await {
        Ok(Ok(_)) => Ok(head[3] == 0x04),
        _ => Ok(false),
    }
}
