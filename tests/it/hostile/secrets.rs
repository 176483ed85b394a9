//! Secrets, however they arrive, never show: multi-line and passed-through ones, every declared
//! secret in every sink from the engine's start, and `${secret:NAME}` read only where the docs say.

use super::*;

#[test]
fn multi_line_and_passed_through_secrets_never_reach_output_logs_or_the_database() {
    let fx = Fixture::new("", &[]);
    let key = fx.path().join("key.pem");
    let lines = [
        "-----BEGIN FAKE KEY-----",
        "MIIEvQIBADANBgkqhkiG9w0BAQ",
        "s3cr3tLineNumberTwoXYZ",
        "-----END FAKE KEY-----",
    ];
    std::fs::write(&key, lines.join("\n") + "\n").unwrap();
    let manent = format!(
        "plugins:\n  exec:\n    pass_env: [FIXTURE, API_TOKEN]\nsecrets:\n  key: file:{}\n  api: env:API_TOKEN\n",
        key.display()
    );
    std::fs::write(fx.config(), manent).unwrap();
    let app = r#"application: s
artifact: {version: "1"}
deploy:
  plugin: exec
  secrets: [key]
  params:
    secrets: [key]
    deploy: |
      echo "key: $MANENT_SECRET_KEY"
      printf '%s\n' "$MANENT_SECRET_KEY" >&2
      echo "token via pass_env: $API_TOKEN"
      echo "token inside: xx${API_TOKEN}yy"
      exit "${FAIL:-0}"
environments:
  prod:
    targets: [{name: t1}]
"#;
    std::fs::write(fx.path().join("apps/s.yml"), app).unwrap();
    let env = [("API_TOKEN", "tok-9f8e7d6c5b4a")];
    let out = fx.run_with(&["deploy", "s", "prod", "--yes", "-v"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let id = fx.deployments().pop().unwrap();
    let logs = fx.run_with(&["logs", &id], &env);
    let status = fx.run_with(&["status", &id, "--json"], &env);
    let history = fx.run_with(&["history", "s", "prod", "--json"], &env);
    let mut seen = String::new();
    for o in [&out, &logs, &status, &history] {
        seen.push_str(&text(&o.stdout));
        seen.push_str(&text(&o.stderr));
    }
    assert!(seen.contains("[redacted]"), "{seen}");
    let mut stored = std::fs::read(fx.db_path()).unwrap();
    stored.extend(std::fs::read(fx.db_path().with_extension("db-wal")).unwrap_or_default());
    let secrets = [
        "MIIEvQIBADANBgkqhkiG9w0BAQ",
        "s3cr3tLineNumberTwoXYZ",
        "tok-9f8e7d6c5b4a",
    ];
    for s in secrets {
        assert!(!seen.contains(s), "{s} shown:\n{seen}");
        assert!(
            !stored.windows(s.len()).any(|w| w == s.as_bytes()),
            "{s} reached the database"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Every declared secret is redacted in every sink, from the engine's start — not only those a
// call read — and `${secret:NAME}` is read where the README says it is.

/// A loopback HTTP receiver answering 200 to everything; keeps each request's text (request
/// line, headers and body).
struct Catcher {
    port: u16,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Catcher {
    fn start() -> Catcher {
        use std::io::{BufRead, BufReader, Read as _, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let (mut all, mut len) = (String::new(), 0usize);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    all.push_str(&line);
                }
                let mut body = vec![0; len];
                let _ = reader.read_exact(&mut body);
                all.push_str(&String::from_utf8_lossy(&body));
                keep.lock().unwrap().push(all);
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
            }
        });
        Catcher { port, seen }
    }

    fn all(&self) -> String {
        self.seen.lock().unwrap().join("\n")
    }
}

#[test]
fn file_secrets_no_call_asked_for_are_redacted_in_every_sink() {
    const SECRET: &str = "fs3cr3t-Zq81-never-asked-for";
    let catcher = Catcher::start();
    let fx = Fixture::new("", &[]);
    let key = fx.path().join("key.txt");
    std::fs::write(&key, format!("{SECRET}\n")).unwrap();
    std::fs::write(
        fx.config(),
        format!(
            "plugins:\n  exec:\n    pass_env: [FIXTURE]\n  fix:\n    external: {{command: {FIXTURE_PLUGIN}}}\n\
             secrets:\n  key: file:{}\nlog_file:\n  dir: logs\nnotify:\n  - name: catcher\n    \
             url: http://127.0.0.1:{}/hook\n    backoff: {{base: 50ms, max: 100ms}}\n",
            key.display(),
            catcher.port
        ),
    )
    .unwrap();
    // A deploy command that prints the file (no call reads the secret) and fails with it as its
    // last line; a plugin that prints it on its stderr.
    std::fs::write(
        fx.path().join("apps/cat.yml"),
        "application: cat\nartifact: {version: \"1\"}\ndeploy:\n  plugin: exec\n  params:\n    \
         deploy: |\n      cat \"$FIXTURE/key.txt\"\n      echo \"the key is $(cat \"$FIXTURE/key.txt\")\" >&2\n      exit 1\n\
         max_retries: 0\nenvironments:\n  prod:\n    targets: [{name: t1}]\n",
    )
    .unwrap();
    std::fs::write(
        fx.path().join("apps/plug.yml"),
        format!(
            "application: plug\nartifact: {{version: \"1\"}}\ndeploy:\n  plugin: fix\n  params: \
             {{say_file: \"{}\"}}\nenvironments:\n  prod:\n    targets: [{{name: t1}}]\n",
            key.display()
        ),
    )
    .unwrap();
    let failed = fx.run(&["deploy", "cat", "prod", "--yes", "-v"]);
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed.stderr));
    let plugged = fx.run(&["deploy", "plug", "prod", "--yes", "-v"]);
    assert_eq!(plugged.status.code(), Some(0), "{}", text(&plugged.stderr));
    wait_until(Duration::from_secs(20), "the target-failed webhook", || {
        catcher.all().contains("target-failed")
    });
    let ids = fx.deployments();
    let mut sinks: Vec<(String, String)> = vec![
        (
            "deploy output".into(),
            format!("{}{}", text(&failed.stdout), text(&failed.stderr)),
        ),
        (
            "plugin output".into(),
            format!("{}{}", text(&plugged.stdout), text(&plugged.stderr)),
        ),
        ("webhook".into(), catcher.all()),
    ];
    for id in &ids {
        for verb in [vec!["status", id, "--json"], vec!["logs", id]] {
            let out = fx.run(&verb);
            sinks.push((
                format!("{verb:?}"),
                format!("{}{}", text(&out.stdout), text(&out.stderr)),
            ));
        }
    }
    let mut stored = std::fs::read(fx.db_path()).unwrap();
    stored.extend(std::fs::read(fx.db_path().with_extension("db-wal")).unwrap_or_default());
    sinks.push((
        "database".into(),
        String::from_utf8_lossy(&stored).into_owned(),
    ));
    for e in std::fs::read_dir(fx.path().join("logs")).unwrap() {
        let p = e.unwrap().path();
        sinks.push((
            p.display().to_string(),
            std::fs::read_to_string(&p).unwrap(),
        ));
    }
    for (sink, said) in &sinks {
        assert!(!said.contains(SECRET), "{sink} holds the secret:\n{said}");
    }
    let all: String = sinks.iter().map(|(_, s)| s.as_str()).collect();
    assert!(all.contains("the key is [redacted]"), "{all}");
    assert!(all.contains("the file says: [redacted]"), "{all}");
}

#[test]
fn short_secrets_and_line_breaks_in_headers_are_refused_at_validate() {
    let fx = Fixture::new(
        "plugins:\n  exec: {}\nsecrets:\n  pin: \"value:q7z\"\n",
        &[("ok", PLAIN_APP)],
    );
    validate_refuses(
        &fx,
        &[
            "manent.yml:4:3: secrets.pin: its value is 3 characters",
            "allow_short_secrets",
        ],
    );
    // A test fixture may say so; the value is then redacted wherever it appears.
    std::fs::write(
        fx.config(),
        "plugins:\n  exec: {}\nsecrets:\n  pin: \"value:q7z\"\nengine: {allow_short_secrets: true}\n",
    )
    .unwrap();
    let out = fx.run(&["validate"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    // A line break in a header would start another header: refused where it is written.
    std::fs::write(
        fx.config(),
        "plugins:\n  exec: {}\nnotify:\n  - url: http://127.0.0.1:9/x\n    headers: {X-A: \"a\\r\\nX-Evil: 1\"}\n",
    )
    .unwrap();
    validate_refuses(&fx, &["manent.yml:5:22:", "header injection"]);
    std::fs::write(fx.config(), "plugins:\n  exec: {}\n").unwrap();
    let app = "application: h\nartifact: {version: \"1\"}\ndeploy:\n  plugin: exec\n  params: {deploy: \"true\"}\n\
               hooks:\n  - name: smoke\n    events: [post-deploy]\n    http:\n      url: http://127.0.0.1:9/\n      \
               headers:\n        X-Ok: fine\n        X-B: \"b\\nSet-Cookie: x=1\"\n\
               environments:\n  prod:\n    targets: [{name: t1}]\n";
    std::fs::write(fx.path().join("apps/h.yml"), app).unwrap();
    validate_refuses(&fx, &["h.yml:13:16:", "header injection"]);
}

#[test]
fn secret_references_are_read_in_http_hooks_and_exec_env_and_refused_where_they_are_not() {
    const TOKEN: &str = "hk-T0ken-4f1b9c";
    let catcher = Catcher::start();
    let manent = "plugins:\n  exec:\n    pass_env: [FIXTURE]\n    env: {FROM_OPTIONS: \"o=${secret:tok}\"}\n\
                  secrets:\n  tok: env:TOK\n";
    let app = format!(
        "application: s\nartifact: {{version: \"1\"}}\ndeploy:\n  plugin: exec\n  secrets: [tok]\n  params:\n    \
         env: {{FROM_PARAMS: \"p=${{secret:tok}}\"}}\n    deploy: |\n      \
         printf '%s %s' \"$FROM_OPTIONS\" \"$FROM_PARAMS\" > \"$FIXTURE/env\"\n\
         hooks:\n  - name: tell\n    events: [post-deploy]\n    secrets: [tok]\n    http:\n      \
         url: \"http://127.0.0.1:{}/in/${{secret:tok}}\"\n      headers: {{X-Token: \"Bearer ${{secret:tok}}\"}}\n\
         environments:\n  prod:\n    targets: [{{name: t1}}]\n",
        catcher.port
    );
    let fx = Fixture::new(manent, &[("s", &app)]);
    let env = [("TOK", TOKEN)];
    let out = fx.run_with(&["validate"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let out = fx.run_with(&["deploy", "s", "prod", "--yes", "-v"], &env);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert_eq!(
        std::fs::read_to_string(fx.path().join("env")).unwrap(),
        format!("o={TOKEN} p={TOKEN}")
    );
    let seen = catcher.all();
    assert!(seen.contains(&format!("GET /in/{TOKEN} ")), "{seen}");
    assert!(
        seen.to_ascii_lowercase()
            .contains(&format!("x-token: bearer {}", TOKEN.to_ascii_lowercase())),
        "{seen}"
    );
    assert!(!all.contains(TOKEN), "{all}");
    // An application that does not list the secret cannot have exec read it for it.
    let unlisted = app.replace("  secrets: [tok]\n  params:", "  params:");
    std::fs::write(fx.path().join("apps/s.yml"), &unlisted).unwrap();
    validate_refuses(
        &fx,
        &[
            "s.yml:6:27:",
            "params.env.FROM_PARAMS reads ${secret:tok}",
            "add `secrets: [tok]` under `deploy:`",
        ],
    );
    // Nor a hook that does not list it.
    let hook_unlisted = app.replace("    secrets: [tok]\n    http:", "    http:");
    std::fs::write(fx.path().join("apps/s.yml"), &hook_unlisted).unwrap();
    validate_refuses(
        &fx,
        &["s.yml:", "hook `tell`: http.url reads ${secret:tok}"],
    );
    // Where nothing reads it, it is refused rather than sent as it is written.
    let waited = app
        .replace(
            "    http:\n      url: \"http://127.0.0.1:",
            "    wait:\n      url: \"http://127.0.0.1:",
        )
        .replace("      headers: {X-Token: \"Bearer ${secret:tok}\"}\n", "");
    std::fs::write(fx.path().join("apps/s.yml"), &waited).unwrap();
    validate_refuses(&fx, &["s.yml:", "wait.url: `${secret:…}` is not read"]);
}
