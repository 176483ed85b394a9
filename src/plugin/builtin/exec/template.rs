//! `{{ name }}` in an `exec` command, rendered so that no value is ever parsed by the shell:
//! every value already travels in the command's environment (`MANENT_VERSION`, …), and the
//! placeholder becomes a reference to that variable, quoted for where it sits in the script —
//! `"${MANENT_X}"` bare, `${MANENT_X}` inside double quotes or an unquoted here-document,
//! `'"${MANENT_X}"'` inside single quotes. The shell expands a variable without evaluating what
//! it holds, so `$(id)`, backticks or quotes in a value stay text. A quoted here-document
//! expands nothing: there the value itself goes in, and it may not hold a line break.

use std::collections::BTreeMap;

use crate::plugin::error::PluginError;

/// Where the scanner is in the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// Unquoted (the top level, a command substitution, backticks).
    Bare,
    /// Inside `'…'`.
    Single,
    /// Inside `"…"`.
    Double,
    /// Inside a here-document's body; `quoted` when its delimiter was quoted.
    Heredoc { quoted: bool },
}

/// What each context's placeholder becomes.
fn reference(ctx: Ctx, env: &str, value: &str, name: &str) -> Result<String, String> {
    Ok(match ctx {
        Ctx::Bare => format!("\"${{{env}}}\""),
        Ctx::Double | Ctx::Heredoc { quoted: false } => format!("${{{env}}}"),
        Ctx::Single => format!("'\"${{{env}}}\"'"),
        Ctx::Heredoc { quoted: true } => {
            if value.contains(['\n', '\r']) {
                return Err(format!(
                    "`{{{{{name}}}}}` in a quoted here-document holds a line break, which could \
                     end the document early; use an unquoted one (<<EOF), where it stays a \
                     variable"
                ));
            }
            value.to_owned()
        }
    })
}

/// A here-document announced on the current line, whose body starts on the next one.
struct Pending {
    delimiter: String,
    quoted: bool,
    strip_tabs: bool,
}

/// Renders `template` for the shell. `env_of` maps a variable's name to the environment variable
/// that carries it; `what` names the command in errors (`deploy`, `rollback`).
pub fn render(
    template: &str,
    vars: &BTreeMap<String, String>,
    env_of: impl Fn(&str) -> String,
    what: &str,
    known: &[&str],
) -> Result<String, PluginError> {
    let fail = |m: String| PluginError::Permanent(format!("deploy.params.{what}: {m}"));
    let chars: Vec<char> = template.chars().collect();
    let mut out = String::with_capacity(template.len() + 32);
    // The context stack: `$(`, backticks and quotes nest.
    let mut stack: Vec<(Ctx, usize)> = vec![(Ctx::Bare, 0)];
    let mut pending: Vec<Pending> = Vec::new();
    let mut heredoc: Option<Pending> = None;
    let mut i = 0;
    let mut line_start = true;
    // Where the current line starts in `out`, and whether a value went into it inside a quoted
    // here-document (a value that makes its line the delimiter would end the document early).
    let mut line_out = 0;
    let mut valued = false;
    while i < chars.len() {
        // A here-document's body: line by line until its delimiter.
        if line_start
            && let Some(doc) = &heredoc
            && let Some((line, end)) = delimiter_line(&chars, i, doc)
        {
            out.push_str(&line);
            if end < chars.len() {
                out.push('\n');
            }
            // The next one announced on the same line, if any, starts now.
            heredoc = (!pending.is_empty()).then(|| pending.remove(0));
            i = end + 1;
            line_out = out.len();
            continue;
        }
        line_start = false;
        let c = chars[i];
        let ctx = match &heredoc {
            Some(doc) if stack.len() == 1 => Ctx::Heredoc { quoted: doc.quoted },
            _ => stack.last().map_or(Ctx::Bare, |s| s.0),
        };
        // A placeholder, wherever it is.
        if c == '{' && chars.get(i + 1) == Some(&'{') {
            let (name, close) = placeholder(&chars, i).map_err(fail)?;
            let value = vars.get(&name).ok_or_else(|| {
                fail(format!(
                    "unknown variable `{{{{{name}}}}}`; known: {}, label.KEY",
                    known.join(", ")
                ))
            })?;
            out.push_str(&reference(ctx, &env_of(&name), value, &name).map_err(fail)?);
            valued |= ctx == (Ctx::Heredoc { quoted: true });
            i = close + 2;
            continue;
        }
        if c == '\n' && valued {
            ends_document(&out[line_out..], heredoc.as_ref()).map_err(fail)?;
            valued = false;
        }
        out.push(c);
        i += 1;
        if c == '\n' {
            line_start = true;
            line_out = out.len();
            if heredoc.is_none() && !pending.is_empty() {
                heredoc = Some(pending.remove(0));
            }
            continue;
        }
        match ctx {
            Ctx::Single => {
                if c == '\'' {
                    stack.pop();
                }
            }
            Ctx::Heredoc { quoted: true } => {}
            Ctx::Double | Ctx::Heredoc { quoted: false } => match c {
                '\\' => copy_escaped(&chars, &mut i, &mut out),
                '"' if ctx == Ctx::Double => {
                    stack.pop();
                }
                '`' => stack.push((Ctx::Bare, usize::MAX)),
                '$' if chars.get(i) == Some(&'(') => {
                    out.push('(');
                    i += 1;
                    stack.push((Ctx::Bare, 1));
                }
                _ => {}
            },
            Ctx::Bare => match c {
                '\\' => copy_escaped(&chars, &mut i, &mut out),
                '\'' => stack.push((Ctx::Single, 0)),
                '"' => stack.push((Ctx::Double, 0)),
                '`' => {
                    // Backticks close their own level, or open a new one.
                    if stack.last().is_some_and(|s| s.1 == usize::MAX) {
                        stack.pop();
                    } else {
                        stack.push((Ctx::Bare, usize::MAX));
                    }
                }
                '$' if chars.get(i) == Some(&'(') => {
                    out.push('(');
                    i += 1;
                    stack.push((Ctx::Bare, 1));
                }
                '(' => {
                    if let Some(top) = stack.last_mut().filter(|s| s.1 != usize::MAX && s.1 > 0) {
                        top.1 += 1;
                    }
                }
                ')' => {
                    if let Some(top) = stack.last_mut().filter(|s| s.1 != usize::MAX && s.1 > 0) {
                        top.1 -= 1;
                        if top.1 == 0 {
                            stack.pop();
                        }
                    }
                }
                '#' if out.len() == 1
                    || out[..out.len() - 1].ends_with([' ', '\t', '\n', ';', '&', '|', '(']) =>
                {
                    // A comment: copied to the end of its line as it is.
                    copy_comment(&chars, &mut i, &mut out);
                }
                '<' if chars.get(i) == Some(&'<') && chars.get(i + 1) != Some(&'<') => {
                    pending.extend(here_document(&chars, &mut i, &mut out));
                }
                _ => {}
            },
        }
    }
    if valued {
        ends_document(&out[line_out..], heredoc.as_ref()).map_err(fail)?;
    }
    Ok(out)
}

/// The character a backslash just copied escapes, copied as it is.
fn copy_escaped(chars: &[char], i: &mut usize, out: &mut String) {
    if let Some(&n) = chars.get(*i) {
        out.push(n);
        *i += 1;
    }
}

/// The rest of a comment's line, copied as it is.
fn copy_comment(chars: &[char], i: &mut usize, out: &mut String) {
    while let Some(&n) = chars.get(*i).filter(|n| **n != '\n') {
        out.push(n);
        *i += 1;
    }
}

/// The placeholder `{{ name }}` opening at `i`: its name, and where its `}}` starts.
fn placeholder(chars: &[char], i: usize) -> Result<(String, usize), String> {
    let close = (i + 2..chars.len().saturating_sub(1))
        .find(|&j| chars[j] == '}' && chars[j + 1] == '}')
        .ok_or_else(|| "`{{` without `}}`".to_owned())?;
    let name = chars[i + 2..close]
        .iter()
        .collect::<String>()
        .trim()
        .to_owned();
    Ok((name, close))
}

/// The line starting at `i`, and where it ends, when it is `doc`'s delimiter (its tabs stripped
/// for `<<-`).
fn delimiter_line(chars: &[char], i: usize, doc: &Pending) -> Option<(String, usize)> {
    let end = chars[i..]
        .iter()
        .position(|c| *c == '\n')
        .map_or(chars.len(), |p| i + p);
    let line: String = chars[i..end].iter().collect();
    let bare = if doc.strip_tabs {
        line.trim_start_matches('\t')
    } else {
        &line
    };
    (bare == doc.delimiter).then_some((line, end))
}

/// A here-document operator (`<<`, `<<-`) whose first `<` was just copied, with its
/// delimiter: copied to `out`; the document it announces starts at the next line.
fn here_document(chars: &[char], i: &mut usize, out: &mut String) -> Option<Pending> {
    out.push('<');
    *i += 1;
    let strip_tabs = chars.get(*i) == Some(&'-');
    if strip_tabs {
        out.push('-');
        *i += 1;
    }
    while let Some(&n) = chars.get(*i).filter(|n| **n == ' ' || **n == '\t') {
        out.push(n);
        *i += 1;
    }
    let mut delimiter = String::new();
    let mut quoted = false;
    while let Some(&n) = chars.get(*i) {
        if n.is_whitespace() || matches!(n, ';' | '&' | '|' | '<' | '>' | '(' | ')') {
            break;
        }
        out.push(n);
        *i += 1;
        match n {
            '\'' | '"' | '\\' => quoted = true,
            _ => delimiter.push(n),
        }
    }
    (!delimiter.is_empty()).then_some(Pending {
        delimiter,
        quoted,
        strip_tabs,
    })
}

/// Refuses a quoted here-document's line that a value turned into its delimiter: the document
/// would end there and the lines after it, values included, would run as commands.
fn ends_document(line: &str, doc: Option<&Pending>) -> Result<(), String> {
    let Some(doc) = doc else { return Ok(()) };
    let bare = if doc.strip_tabs {
        line.trim_start_matches('\t')
    } else {
        line
    };
    if bare == doc.delimiter {
        return Err(format!(
            "a value makes a line of a quoted here-document read `{}`, its delimiter, which \
             would end the document early; use an unquoted one (<<EOF), where values stay \
             variables",
            doc.delimiter
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> String {
        format!("MANENT_{}", name.to_ascii_uppercase())
    }

    fn r(t: &str) -> String {
        let vars = BTreeMap::from([
            ("version".to_owned(), "$(touch /tmp/x)`id`'\"".to_owned()),
            ("host".to_owned(), "web-1".to_owned()),
        ]);
        render(t, &vars, env, "deploy", &["version", "host"]).unwrap()
    }

    #[test]
    fn every_quoting_context_gets_a_variable_never_the_value() {
        assert_eq!(r("echo {{version}}"), r#"echo "${MANENT_VERSION}""#);
        assert_eq!(
            r(r#"echo "to {{ version }}""#),
            r#"echo "to ${MANENT_VERSION}""#
        );
        assert_eq!(
            r("echo 'to {{version}}'"),
            r#"echo 'to '"${MANENT_VERSION}"''"#
        );
        assert_eq!(
            r("cat <<EOF\nv={{version}}\nEOF\necho {{host}}"),
            "cat <<EOF\nv=${MANENT_VERSION}\nEOF\necho \"${MANENT_HOST}\""
        );
        assert_eq!(
            r("echo \"$(printf %s {{version}})\""),
            r#"echo "$(printf %s "${MANENT_VERSION}")""#
        );
        assert_eq!(r("echo `echo {{host}}`"), r#"echo `echo "${MANENT_HOST}"`"#);
        assert_eq!(
            r("echo 'it''s {{host}}' \\' {{host}}"),
            r#"echo 'it''s '"${MANENT_HOST}"'' \' "${MANENT_HOST}""#
        );
    }

    #[test]
    fn a_quoted_heredoc_takes_the_value_but_never_a_line_break() {
        assert_eq!(
            r("cat <<'EOF'\nhost {{host}}\nEOF\n"),
            "cat <<'EOF'\nhost web-1\nEOF\n"
        );
        let vars = BTreeMap::from([("v".to_owned(), "a\nEOF\nrm -rf /".to_owned())]);
        let err = render("cat <<'EOF'\n{{v}}\nEOF", &vars, env, "deploy", &["v"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("holds a line break"), "{err}");
        assert!(
            render("cat <<EOF\n{{v}}\nEOF", &vars, env, "deploy", &["v"]).is_ok(),
            "unquoted: it stays a variable"
        );
        // A value that is the delimiter would end the document and run the next line.
        let vars = BTreeMap::from([
            ("a".to_owned(), "EOF".to_owned()),
            ("b".to_owned(), "touch /tmp/x".to_owned()),
        ]);
        for t in [
            "cat <<'EOF'\n{{a}}\n{{b}}\nEOF",
            "cat <<-'EOF'\n\t{{a}}\nEOF",
            "cat <<'EOF'\n{{a}}",
        ] {
            let err = render(t, &vars, env, "deploy", &["a", "b"])
                .unwrap_err()
                .to_string();
            assert!(err.contains("its delimiter"), "{t:?}: {err}");
        }
        assert!(render("cat <<'EOF'\nx{{a}}\nEOF", &vars, env, "deploy", &["a"]).is_ok());
    }

    #[test]
    fn unknown_and_unclosed_placeholders_are_refused() {
        let vars = BTreeMap::new();
        let err = render("echo {{nope}}", &vars, env, "deploy", &["version"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown variable `{{nope}}`"), "{err}");
        assert!(render("echo {{host", &vars, env, "deploy", &[]).is_err());
    }
}
