//! The repository's documents hold together: every citation of a design document in the code
//! names a file of `docs/design/` and a section in it, no code cites a document outside the
//! repository, and every relative link in the README and `docs/` leads to a file that exists.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Files under `dir` whose name ends with `ext`.
fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, ext, out);
        } else if p.to_string_lossy().ends_with(ext) {
            out.push(p);
        }
    }
}

/// The headings of a Markdown file, without their `#`s.
fn headings(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim().to_owned())
        .collect()
}

/// Where `text` cites `docs/…md` or `design/…md`, with what follows the name: (line, file
/// relative to docs/, section) — the section a leading tag (`E4`, `B.5`) or a quoted title.
fn citations(text: &str) -> Vec<(usize, String, Option<String>)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("design/").or_else(|| rest.find("docs/")) {
            let start = if rest[at..].starts_with("docs/") {
                at + "docs/".len()
            } else {
                at
            };
            let tail = &rest[start..];
            let Some(end) = tail.find(".md") else {
                break;
            };
            let file = &tail[..end + 3];
            if file.contains(' ') || file.contains('`') {
                rest = &tail[end + 3..];
                continue;
            }
            let after = tail[end + 3..].trim_start_matches(',').trim_start();
            let after = after.strip_prefix('\\').unwrap_or(after);
            let section = if let Some(q) = after.strip_prefix('"') {
                q.split(['"', '\\']).next().map(str::to_owned)
            } else {
                let tag: String = after
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '.')
                    .collect();
                let tag = tag.trim_end_matches('.').to_owned();
                let is_tag = tag.len() >= 2
                    && tag.starts_with(['B', 'E'])
                    && tag[1..].trim_start_matches('.').parse::<u32>().is_ok();
                is_tag.then_some(tag)
            };
            found.push((n + 1, file.to_owned(), section));
            rest = &tail[end + 3..];
        }
    }
    found
}

/// How the documents the product was specified from are cited: none of them is in the
/// repository.
const OUTSIDE: [&str; 6] = [
    "DESIGN §",
    "DESIGN.md",
    "shared/reference",
    "shared/seeds",
    "the seed's",
    "Mu seed",
];

#[test]
fn every_citation_in_the_code_resolves_to_a_section_of_docs() {
    let mut sources = Vec::new();
    for dir in ["src", "tests", "benches", "fixtures"] {
        files(&root().join(dir), ".rs", &mut sources);
    }
    let mut wrong = Vec::new();
    let mut cited = 0;
    for path in sources.iter().filter(|p| !p.ends_with("tests/it/docs.rs")) {
        let text = std::fs::read_to_string(path).unwrap();
        let shown = path.strip_prefix(root()).unwrap().display().to_string();
        for (line, file, section) in citations(&text) {
            let doc = root().join("docs").join(&file);
            if !doc.is_file() {
                wrong.push(format!("{shown}:{line}: docs/{file} does not exist"));
                continue;
            }
            cited += 1;
            if let Some(section) = section {
                let ok = headings(&doc).iter().any(|h| {
                    h == &section
                        || h.starts_with(&format!("{section} "))
                        || h.starts_with(&format!("{section} —"))
                });
                if !ok {
                    wrong.push(format!(
                        "{shown}:{line}: docs/{file} has no section {section:?}"
                    ));
                }
            }
        }
        // Documents outside the repository, and section tags cited bare.
        for (n, l) in text.lines().enumerate() {
            let bare_tag = l.match_indices('(').any(|(i, _)| {
                let t = &l[i + 1..];
                let tag: String = t
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '.')
                    .collect();
                tag.len() >= 2
                    && tag.starts_with(['B', 'E'])
                    && tag[1..].trim_start_matches('.').parse::<u32>().is_ok()
                    && t[tag.len()..].starts_with([')', ',', ' '])
                    && !l[..i].ends_with("durable-workflows.md ")
            });
            let outside = OUTSIDE.iter().find(|p| l.contains(*p));
            if bare_tag || outside.is_some() {
                wrong.push(format!(
                    "{shown}:{}: cites a document outside the repository or a bare section: {}",
                    n + 1,
                    l.trim()
                ));
            }
        }
    }
    assert!(
        cited > 30,
        "only {cited} citations found: the scan is broken"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    let mut docs = vec![root().join("README.md")];
    for extra in ["CONTRIBUTING.md"] {
        if root().join(extra).is_file() {
            docs.push(root().join(extra));
        }
    }
    files(&root().join("docs"), ".md", &mut docs);
    files(&root().join("sdk"), "README.md", &mut docs);
    let mut wrong = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        for (n, line) in text.lines().enumerate() {
            for (i, _) in line.match_indices("](") {
                let target = &line[i + 2..];
                let Some(end) = target.find(')') else {
                    continue;
                };
                let link = &target[..end];
                if link.contains("://") || link.starts_with('#') || link.starts_with("mailto:") {
                    continue;
                }
                let file = link.split('#').next().unwrap_or_default();
                let to = doc.parent().unwrap().join(file);
                if !to.exists() {
                    wrong.push(format!(
                        "{}:{}: {link} does not exist",
                        doc.strip_prefix(root()).unwrap().display(),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
