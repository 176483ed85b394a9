//! Thousands of seeded mutations of the bundled configuration, each validated as `manent validate
//! --json` does it, in process and under a timeout: none may panic or hang, and every refusal
//! must say which file it is about (with a line and column inside that file when it gives one).
//!
//! `MANENT_MUTATION_SEED` and `MANENT_MUTATIONS` change the seed and the count; a failure prints
//! the seed and writes the variant next to the test's temporary directory to reproduce it;
//! `MANENT_MUTATION_SHOW=1` prints every problem found (to read what users would be told).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use clap::Parser;
use manent::cli::{Cli, output::Out};

/// The most one variant may take before it counts as a hang (a debug build on a busy machine
/// validates one in milliseconds).
const HANG: Duration = Duration::from_secs(20);

/// xorshift64*: small, seeded, the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(n.max(1)).unwrap()).unwrap()
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// What a careless edit, a bad merge or an attacker puts in a YAML file.
const TOKENS: &[&str] = &[
    "[",
    "]",
    "{",
    "}",
    ":",
    ": ",
    "- ",
    "-",
    "\"",
    "'",
    "\n",
    "\t",
    " ",
    "#",
    "&a ",
    "*a",
    "!!str ",
    "!!binary ",
    "!!map ",
    "? ",
    "|",
    ">",
    "---\n",
    "...\n",
    "\0",
    "\u{feff}",
    "\u{1b}[31m",
    "é",
    "✓",
    "<<: *a\n",
    "%YAML 1.2\n",
    "0x",
    ".inf",
    "-.inf",
    ".nan",
    "~",
    "null",
    "true",
    "1e999",
    "-1",
    "0",
    "0s",
    "5ms",
    "1h",
    "99999999999999999999",
    "{{",
    "}}",
    "{{version}}",
    "{{label.x}}",
    "{{nope}}",
    "$(touch /tmp/manent-mutation)",
    "../",
    "/",
    "\\",
    "\r",
    "\r\n",
    "plugin",
    "builtin",
    "external",
    "strategy",
    "rolling",
    "canary",
    "targets",
    "environments",
    "application",
    "name",
    "labels",
    "batch_size",
    "parallelism",
    "secrets",
    "env:",
    "file:",
    "sha256",
    "timeouts",
    "x: y\n",
    "- {name: a}\n",
    // What issue 20 found positions missing or wrong for: bidirectional overrides and
    // invisible separators, a tab where indentation is expected, alias bombs, line breaks in
    // header values, secret references, a manent.yml key in a descriptor.
    "\u{202e}",
    "\u{2028}",
    "\u{200b}",
    "\t- ",
    "a: &b [*b]\n",
    "x: &a [y, y, y]\nz: [*a, *a, *a, *a]\n",
    "\"a\\r\\nX-Evil: 1\"",
    "headers: {X-A: \"a\\nb\"}\n",
    "${secret:",
    "${secret:nope}",
    "shared_group: nobody-here\n",
    "database: x.db\n",
    "plugins: {exec: {}}\n",
];

/// Values put where a value was.
const VALUES: &[&str] = &[
    ".nan",
    "-.inf",
    "-1",
    "0",
    "0s",
    "1e400",
    "99999999999999999999",
    "[]",
    "{}",
    "~",
    "''",
    "\"\\0\"",
    "!!binary aGk=",
    "*nope",
    "&a x",
    "\"$(id)\"",
    "'../../etc'",
    "[[[[[]]]]]",
    "{a: {b: {c: {}}}}",
    "\"\\u001b[2J\"",
    "yes",
    "no",
    "0x10",
    "1_000",
    "2026-12-01",
    "\"a\\r\\nSet-Cookie: x=1\"",
    "\"${secret:web_token}\"",
    "\"${secret:undeclared}\"",
    "'\u{202e}evil'",
    "\"value:abc\"",
];

fn mutate(rng: &mut Rng, text: &[u8]) -> Vec<u8> {
    let mut t = text.to_vec();
    for _ in 0..=rng.below(3) {
        let at = rng.below(t.len() + 1);
        let lines: Vec<(usize, usize)> = line_spans(&t);
        match rng.below(10) {
            0 => {
                let end = (at + 1 + rng.below(20)).min(t.len());
                t.drain(at.min(end)..end);
            }
            1 | 2 => {
                let tok = rng.pick(TOKENS).as_bytes();
                t.splice(at..at, tok.iter().copied());
            }
            3 => {
                let end = (at + 1 + rng.below(8)).min(t.len());
                let tok = rng.pick(TOKENS).as_bytes();
                t.splice(at.min(end)..end, tok.iter().copied());
            }
            4 if !lines.is_empty() => {
                let (s, e) = *rng.pick(&lines);
                let line = t[s..e].to_vec();
                t.splice(s..s, line);
            }
            5 if !lines.is_empty() => {
                let (s, e) = *rng.pick(&lines);
                t.drain(s..e);
            }
            6 if lines.len() > 1 => {
                let (a, b) = (*rng.pick(&lines), *rng.pick(&lines));
                let (first, second) = if a.0 <= b.0 { (a, b) } else { (b, a) };
                if first.1 <= second.0 {
                    let (l1, l2) = (t[first.0..first.1].to_vec(), t[second.0..second.1].to_vec());
                    t.splice(second.0..second.1, l1);
                    t.splice(first.0..first.1, l2);
                }
            }
            7 if !lines.is_empty() => {
                let (s, _) = *rng.pick(&lines);
                if rng.below(2) == 0 {
                    let n = 1 + rng.below(4);
                    let indent: &[u8] = if rng.below(4) == 0 { b"\t" } else { b" " };
                    for _ in 0..n {
                        t.splice(s..s, indent.iter().copied());
                    }
                } else {
                    let n = t[s..].iter().take_while(|b| **b == b' ').count().min(2);
                    t.drain(s..s + n);
                }
            }
            8 => t.truncate(at),
            _ => {
                // The value after a `: ` replaced.
                if let Some(colon) = find_from(&t, b": ", at) {
                    let start = colon + 2;
                    let end = t[start..]
                        .iter()
                        .position(|b| *b == b'\n')
                        .map_or(t.len(), |p| start + p);
                    let v = rng.pick(VALUES).as_bytes();
                    t.splice(start..end, v.iter().copied());
                }
            }
        }
    }
    t
}

/// Each line's span, its line break included.
fn line_spans(t: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = 0;
    for (i, b) in t.iter().enumerate() {
        if *b == b'\n' {
            spans.push((start, i + 1));
            start = i + 1;
        }
    }
    if start < t.len() {
        spans.push((start, t.len()));
    }
    spans
}

fn find_from(t: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    let found = |range: std::ops::Range<usize>| {
        range
            .into_iter()
            .find(|&i| t.get(i..i + needle.len()) == Some(needle))
    };
    found(from..t.len()).or_else(|| found(0..from))
}

/// A writer a test reads back.
#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buf {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// What one validation said: its exit code, stdout and stderr; `Err` if it panicked.
type Said = Result<(u8, String, String), String>;

fn validate(runtime: &tokio::runtime::Runtime, config: &Path) -> Said {
    let cli = Cli::try_parse_from([
        "manent".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "validate".as_ref(),
        "--json".as_ref(),
    ])
    .unwrap();
    let (stdout, stderr) = (Buf::default(), Buf::default());
    let mut out = Out::to(stdout.clone(), stderr.clone());
    let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(manent::cli::run(cli, &mut out))
    }))
    .map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default()
    })?;
    Ok((code, stdout.text(), stderr.text()))
}

/// Every problem names a file of the configuration; a line:col it gives lies inside that file.
fn attributable(problem: &str, dir: &Path) -> Result<(), String> {
    let dir = dir.display().to_string();
    let Some(rest) = problem.strip_prefix(&dir) else {
        return Err("names no file of the configuration".into());
    };
    let (file, after) = rest.split_once(':').ok_or("no `:` after the file")?;
    let path = PathBuf::from(format!("{dir}{file}"));
    let mut parts = after.splitn(3, ':');
    let (line, col) = (parts.next(), parts.next());
    if let (Some(line), Some(col)) = (
        line.and_then(|l| l.parse::<usize>().ok()),
        col.and_then(|c| c.parse::<usize>().ok()),
    ) {
        let Ok(bytes) = std::fs::read(&path) else {
            return Err(format!(
                "a position in {} which cannot be read",
                path.display()
            ));
        };
        let lines = bytes.iter().filter(|b| **b == b'\n').count() + 1;
        if line == 0 || line > lines || col == 0 {
            return Err(format!("{line}:{col} is outside the file's {lines} lines"));
        }
    }
    if problem.trim_end().ends_with(':') {
        return Err("says nothing after the file".into());
    }
    Ok(())
}

#[test]
fn thousands_of_mutated_configurations_are_refused_clearly_and_none_panics_or_hangs() {
    let seed: u64 = std::env::var("MANENT_MUTATION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x6d61_6e65_6e74);
    let count: usize = std::env::var("MANENT_MUTATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/local");
    let files = ["manent.yml", "apps/web.yml", "apps/shop.yml"];
    let originals: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(root.join(f)).unwrap())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("apps")).unwrap();
    // The validator's panics are results here, not noise on stderr.
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().name() != Some("validator") {
            default(info);
        }
    }));

    // One worker validates; this thread times each variant.
    let (jobs, inbox) = mpsc::channel::<()>();
    let (answers, results) = mpsc::channel::<Said>();
    let config = dir.path().join("manent.yml");
    let worker = std::thread::Builder::new().name("validator".into());
    worker
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            for () in inbox {
                if answers.send(validate(&runtime, &config)).is_err() {
                    break;
                }
            }
        })
        .unwrap();

    let show = std::env::var_os("MANENT_MUTATION_SHOW").is_some();
    let mut rng = Rng(seed | 1);
    let (mut refused, mut accepted) = (0, 0);
    for n in 0..count {
        let which = rng.below(files.len());
        for (i, f) in files.iter().enumerate() {
            let text = if i == which {
                mutate(&mut rng, &originals[i])
            } else {
                originals[i].clone()
            };
            std::fs::write(dir.path().join(f), text).unwrap();
        }
        let keep = || {
            let kept = std::env::temp_dir().join(format!("manent-mutation-{seed}-{n}"));
            let _ = std::fs::create_dir_all(kept.join("apps"));
            for f in files {
                let _ = std::fs::copy(dir.path().join(f), kept.join(f));
            }
            kept.display().to_string()
        };
        jobs.send(()).unwrap();
        let said = match results.recv_timeout(HANG) {
            Ok(s) => s,
            Err(_) => panic!(
                "seed {seed}, variant {n} of {}: validate still runs after {HANG:?}; kept in {}",
                files[which],
                keep()
            ),
        };
        let (code, stdout, stderr) = match said {
            Ok(s) => s,
            Err(p) => panic!(
                "seed {seed}, variant {n} of {}: panicked: {p}; kept in {}",
                files[which],
                keep()
            ),
        };
        let report: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
            panic!(
                "seed {seed}, variant {n}: no JSON ({e}): {stdout}{stderr}; kept in {}",
                keep()
            )
        });
        let ok = report["ok"].as_bool().unwrap();
        assert_eq!(
            code,
            if ok { 0 } else { 2 },
            "seed {seed}, variant {n}: exit code {code} with ok={ok}; kept in {}",
            keep()
        );
        if ok {
            accepted += 1;
            continue;
        }
        refused += 1;
        let problems = report["problems"].as_array().unwrap();
        assert!(
            !problems.is_empty(),
            "seed {seed}, variant {n}: refused without a problem; kept in {}",
            keep()
        );
        for p in problems {
            let p = p.as_str().unwrap();
            if show {
                println!("{n}: {}", p.replace(&dir.path().display().to_string(), ""));
            }
            if let Err(why) = attributable(p, dir.path()) {
                panic!(
                    "seed {seed}, variant {n}: problem {p:?} {why}; kept in {}",
                    keep()
                );
            }
        }
    }
    println!("{count} variants (seed {seed}): {refused} refused, {accepted} accepted");
    // The mutations must mostly break things, or this test checks little.
    assert!(
        refused > count / 2,
        "only {refused} of {count} were refused"
    );
}
