//! Values built to break out of a shell's quoting stay text: no value is ever run by a shell.

use super::*;

/// What tries to break out of each quoting context; each would create `$FIXTURE/pwned` if the
/// shell evaluated it.
const PAYLOADS: &[&str] = &[
    r#"$(touch "$FIXTURE/pwned")"#,
    r#"`touch "$FIXTURE/pwned"`"#,
    r#"'; touch "$FIXTURE/pwned"; echo '"#,
    r#""; touch "$FIXTURE/pwned"; echo ""#,
    r#"x" $(touch "$FIXTURE/pwned") "y"#,
    "a\nEOF\ntouch \"$FIXTURE/pwned\"\necho ",
    r#"\"; touch "$FIXTURE/pwned" #"#,
    "${FIXTURE}/../../etc/passwd",
    "ünïcödé ✓ \t tab",
];

/// A command that writes label `p` to a file from every quoting context: bare, double, single,
/// an unquoted here-document, and label `q` from a quoted one.
const QUOTING_DEPLOY: &str = r#"set -eu
      d="$FIXTURE/out/$MANENT_TARGET"
      mkdir -p "$d"
      printf '%s' {{label.p}} > "$d/bare"
      printf '%s' "{{label.p}}" > "$d/double"
      printf '%s' '{{label.p}}' > "$d/single"
      printf '%s' "$(printf '%s' {{ label.p }})" > "$d/substituted"
      cat > "$d/heredoc" <<EOF
      {{label.p}}
      EOF
      cat > "$d/quoted" <<'EOF'
      {{label.q}}
      EOF"#;

fn quoting_app(targets: &[(String, String, String)]) -> String {
    let t: String = targets
        .iter()
        .map(|(name, p, q)| {
            format!(
                "      - name: {name}\n        labels: {{p: {}, q: {}}}\n",
                serde_json::to_string(p).unwrap(),
                serde_json::to_string(q).unwrap()
            )
        })
        .collect();
    format!(
        "application: web\nartifact: {{version: \"1.0.0\"}}\ndeploy:\n  plugin: exec\n  params:\n    \
         deploy: |\n      {QUOTING_DEPLOY}\n    dry_run: echo \"would switch {{{{target}}}} to {{{{version}}}} ({{{{label.p}}}})\"\n\
         max_retries: 0\nparallelism: 4\nenvironments:\n  prod:\n    targets:\n{t}"
    )
}

#[test]
fn values_stay_text_in_every_quoting_context() {
    let targets: Vec<(String, String, String)> = PAYLOADS
        .iter()
        .enumerate()
        .map(|(i, p)| {
            // A quoted here-document takes the value itself, so it may not hold a line break.
            let q = if p.contains('\n') { "plain" } else { p };
            (format!("t{i}"), (*p).to_owned(), q.to_owned())
        })
        .collect();
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &quoting_app(&targets))]);
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert!(
        text(&out.stdout).contains("would switch t0 to 1.0.0 ($(touch"),
        "{}",
        text(&out.stdout)
    );
    let out = fx.run(&["deploy", "web", "prod", "--yes"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        !fx.path().join("pwned").exists(),
        "a value was run by the shell"
    );
    for (name, p, q) in &targets {
        let dir = fx.path().join("out").join(name);
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        for f in ["bare", "double", "single", "substituted"] {
            assert_eq!(&read(f), p, "{name}: {f}");
        }
        assert_eq!(read("heredoc"), format!("{p}\n"), "{name}: heredoc");
        assert_eq!(read("quoted"), format!("{q}\n"), "{name}: quoted heredoc");
    }
}

#[test]
fn a_value_that_would_end_a_quoted_here_document_is_refused() {
    for (q, why) in [("EOF", "its delimiter"), ("a\nb", "holds a line break")] {
        let targets = [("t1".to_owned(), "x".to_owned(), q.to_owned())];
        let app = quoting_app(&targets).replace(
            "{{label.q}}\n",
            "{{label.q}}\n      touch \"$FIXTURE/pwned\"\n",
        );
        let fx = Fixture::new(LEDGER_MANENT, &[("web", &app)]);
        let out = fx.run(&["deploy", "web", "prod", "--yes"]);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{q:?}: {all}");
        assert!(all.contains(why), "{q:?}: expected {why:?} in {all}");
        assert!(!fx.path().join("pwned").exists(), "{q:?}");
    }
}

#[test]
fn versions_that_are_not_names_are_refused_before_anything_runs() {
    let app = quoting_app(&[("t1".into(), "x".into(), "y".into())]);
    let fx = Fixture::new(LEDGER_MANENT, &[("web", &app)]);
    let payloads = [
        (
            "$(touch /tmp/manent-pwned)",
            "must start with a letter or a digit",
        ),
        ("1.0$(touch /tmp/manent-pwned)", "'$' is not allowed"),
        ("`id`", "must start with a letter or a digit"),
        ("../../../../tmp/x", "must start with a letter or a digit"),
        ("1.0/../../x", "'/' is not allowed"),
        ("1.0\nrm", "'\\n' is not allowed"),
        ("1.0\u{1b}[31m", "'\\u{1b}' is not allowed"),
        ("", "it is empty"),
    ];
    for (v, why) in payloads {
        for dry in [true, false] {
            let mut args = vec!["deploy", "web", "prod", "--yes", "--version", v];
            if dry {
                args.push("--dry-run");
            }
            let out = fx.run(&args);
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{v:?}: {err}");
            assert!(err.contains(why), "{v:?}: expected {why:?} in {err}");
            assert!(err.contains("letters, digits and . _ + ~ -"), "{err}");
        }
    }
    let long = "1".repeat(129);
    let out = fx.run(&["deploy", "web", "prod", "--yes", "--version", &long]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("longer than 128"));
    assert!(fx.deployments().is_empty(), "a deployment was recorded");
    assert!(!fx.path().join("out").exists(), "a command ran");
    // A descriptor's version is held to the same rule, at its line and column.
    let app = quoting_app(&[("t1".into(), "x".into(), "y".into())])
        .replace("version: \"1.0.0\"", "version: \"1.0 && id\"");
    std::fs::write(fx.path().join("apps/web.yml"), app).unwrap();
    let out = fx.run(&["validate"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("web.yml:2:") && text(&out.stderr).contains("' ' is not"),
        "{}",
        said(&out)
    );
}
