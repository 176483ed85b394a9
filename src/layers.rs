//! The layer rule (design/architecture.md "Layers"), checked on the code's own imports: every `crate::…` path and
//! every `super::…` that reaches a sibling file, in every file of the library. A top-level
//! module may use the modules of lower layers only, and its children (its files and
//! directories) may not use each other in a loop. A new import that runs up a layer or closes
//! such a loop fails here, with its file and line. What it does not see: loops deeper down (the
//! children of a child), a use through a re-export, and the names of a `use super::{…}` group
//! written over several lines after its first.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The library's top-level modules, lowest layer first. A module may use those of lower
/// layers, never one of its own layer or above.
const LAYERS: &[&[&str]] = &[
    // Leaves: the operating system, redaction, monikers, text forms.
    &["sys", "redact", "moniker", "format", "duration_ms"],
    &["failpoint"],
    // What manent.yml and the descriptors say; who is acting.
    &["config", "operator"],
    // Metrics and the JSON log: written and served here, fed by the engine.
    &["telemetry"],
    // The plugin contract; the durable-workflow kernel. Neither knows the other.
    &["plugin", "workflow"],
    // Deploys: flows, steps, records, the read model.
    &["deploy"],
    // The engine and its handle.
    &["engine"],
    // What people use: the console, the demo.
    &["console", "demo"],
    // The command line, over everything.
    &["cli"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// One use of another module: where it is written.
#[derive(Debug, Clone)]
struct Use {
    to: String,
    at: String,
}

/// A source file's place: its top-level module and, below it, the child it is in.
struct Place {
    top: String,
    child: Option<String>,
    /// Path components below `src/` (`deploy/flows/canary/watch` is 4).
    depth: usize,
}

fn place(rel: &Path) -> Place {
    let parts: Vec<String> = rel
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    Place {
        top: parts[0].clone(),
        child: parts.get(1).cloned(),
        depth: parts.len(),
    }
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The identifiers right after each `prefix` in `line`, with `{a, b::c}` groups opened.
fn after(line: &str, prefix: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for (i, _) in line.match_indices(prefix) {
        // A longer path's inner part (`super::` in `super::super::`) is not a path of its own.
        let before = line[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let tail = &line[i + prefix.len()..];
        if let Some(group) = tail.strip_prefix('{') {
            let body = &group[..group.find('}').unwrap_or(group.len())];
            for item in body.split(',') {
                let mut path = item.trim().split("::");
                if let Some(first) = path.next().filter(|f| !f.is_empty()) {
                    let second = path.next().map(|s| ident(s).to_owned());
                    out.push((ident(first).to_owned(), second));
                }
            }
            continue;
        }
        let first = ident(tail);
        if !first.is_empty() {
            let second = tail[first.len()..]
                .strip_prefix("::")
                .map(|s| ident(s).to_owned())
                .filter(|s| !s.is_empty());
            out.push((first.to_owned(), second));
        }
    }
    out
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// Each top-level module's uses of other top-level modules.
type ByModule = BTreeMap<String, Vec<Use>>;
/// Per top-level module, each child's uses of its siblings.
type BySibling = BTreeMap<String, BTreeMap<String, Vec<Use>>>;

/// Every file's uses of other top-level modules, and of sibling children.
fn uses() -> (ByModule, BySibling) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut up = ByModule::new();
    let mut siblings = BySibling::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap().to_owned();
        // The binaries are crates of their own; this file names every module.
        if rel.starts_with("bin")
            || ["main.rs", "lib.rs", "layers.rs"].contains(&rel.to_str().unwrap())
        {
            continue;
        }
        let p = place(&rel);
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let at = format!("src/{}:{}", rel.display(), n + 1);
            let mut found: Vec<(String, Option<String>)> = after(line, "crate::");
            // `super::` from a top-level file is the crate; from deeper, `super::` repeated up
            // to the top module names a child of it.
            let up_to_top = "super::".repeat(p.depth - 1);
            if p.depth == 1 {
                found.extend(after(line, "super::"));
            } else if p.depth >= 2 {
                for (child, _) in after(line, &up_to_top) {
                    if child != "super" {
                        found.push((p.top.clone(), Some(child)));
                    }
                }
            }
            for (module, child) in found {
                if module != p.top {
                    up.entry(p.top.clone()).or_default().push(Use {
                        to: module,
                        at: at.clone(),
                    });
                } else if let (Some(from), Some(to)) = (&p.child, child)
                    && *from != to
                    && src.join(&p.top).join(format!("{to}.rs")).exists()
                {
                    siblings
                        .entry(p.top.clone())
                        .or_default()
                        .entry(from.clone())
                        .or_default()
                        .push(Use { to, at: at.clone() });
                }
            }
        }
    }
    (up, siblings)
}

/// The strongly connected groups of more than one node (Tarjan).
fn loops(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        next: usize,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.stack.contains(&w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                group.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                s.found.push(group);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.found
}

#[test]
fn every_top_level_module_has_a_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    for line in lib.lines() {
        if let Some(m) = line.trim().strip_prefix("pub mod ") {
            let m = m.trim_end_matches(';');
            assert!(
                layer_of(m).is_some(),
                "module `{m}` has no layer: add it to LAYERS in src/layers.rs and to design/architecture.md \"Layers\""
            );
        }
    }
}

#[test]
fn no_import_runs_up_a_layer() {
    let (up, _) = uses();
    let mut wrong = Vec::new();
    for (from, list) in &up {
        let Some(mine) = layer_of(from) else {
            continue;
        };
        for u in list {
            match layer_of(&u.to) {
                Some(theirs) if theirs < mine => {}
                Some(_) => wrong.push(format!("{}: `{from}` uses `{}`", u.at, u.to)),
                // A path that is no module of ours (`crate::` inside a macro's text).
                None => {}
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that run up a layer or across one (design/architecture.md \"Layers\"):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_module_s_children_use_each_other_in_a_loop() {
    let (_, siblings) = uses();
    let mut found = Vec::new();
    for (top, children) in &siblings {
        let graph: BTreeMap<String, BTreeSet<String>> = children
            .iter()
            .map(|(c, us)| (c.clone(), us.iter().map(|u| u.to.clone()).collect()))
            .collect();
        for group in loops(&graph) {
            let edges: Vec<String> = group
                .iter()
                .flat_map(|c| {
                    children[c]
                        .iter()
                        .filter(|u| group.contains(&u.to))
                        .map(move |u| format!("  {c} → {}  {}", u.to, u.at))
                })
                .collect();
            found.push(format!("{top}: {}\n{}", group.join(", "), edges.join("\n")));
        }
    }
    assert!(
        found.is_empty(),
        "children that use each other in a loop:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scanner_reads_paths_groups_and_supers() {
    assert_eq!(
        after("use crate::{deploy::records, plugin::Level};", "crate::"),
        vec![
            ("deploy".to_owned(), Some("records".to_owned())),
            ("plugin".to_owned(), Some("Level".to_owned()))
        ]
    );
    assert_eq!(
        after("x(crate::telemetry::metrics::get())", "crate::"),
        vec![("telemetry".to_owned(), Some("metrics".to_owned()))]
    );
    assert_eq!(
        after("use super::super::spine::Run;", "super::super::"),
        vec![("spine".to_owned(), Some("Run".to_owned()))]
    );
    assert!(after("use super::super::spine::Run;", "super::")[0].0 == "super");
    let mut g = BTreeMap::new();
    g.insert("a".to_owned(), BTreeSet::from(["b".to_owned()]));
    g.insert("b".to_owned(), BTreeSet::from(["a".to_owned()]));
    g.insert("c".to_owned(), BTreeSet::from(["a".to_owned()]));
    assert_eq!(loops(&g), vec![vec!["a".to_owned(), "b".to_owned()]]);
}
