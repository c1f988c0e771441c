//! Every relative link in the book (`docs/**/*.md`) and the README resolves: the file it
//! names exists in the repository, and its `#anchor` names a heading of that page (mdBook's
//! and GitHub's heading ids agree for the headings we write). Web links are not fetched.
//! `mdbook build docs` in `.ci/run` catches what this does not: a page missing from
//! `SUMMARY.md`'s list that the book needs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

/// Every Markdown page of the book and the README (not the rendered `docs/book/`).
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("docs/ is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "book") {
                    dirs.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The text outside fenced code blocks and inline code spans, where links are links.
fn prose(markdown: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Drop inline code spans: text between backticks on one line.
        let mut in_code = false;
        for part in line.split('`') {
            if !in_code {
                out.push_str(part);
            }
            in_code = !in_code;
        }
        out.push('\n');
    }
    out
}

/// The targets of `[text](target)` links in `markdown`.
fn link_targets(markdown: &str) -> Vec<String> {
    let text = prose(markdown);
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find(')') {
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            out.push(target.to_owned());
            rest = &rest[end..];
        }
    }
    out
}

/// A heading's id as mdBook (and GitHub) make it: lower case, spaces to `-`, only
/// letters, digits, `-` and `_` kept; the n-th repeat of an id gets `-n`.
fn heading_ids(markdown: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let id: String = title
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
                _ => None,
            })
            .collect();
        let mut unique = id.clone();
        let mut n = 1;
        while ids.contains(&unique) {
            unique = format!("{id}-{n}");
            n += 1;
        }
        ids.insert(unique);
    }
    ids
}

fn is_external(target: &str) -> bool {
    target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:")
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let root = repo_root();
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages(&root) {
        let text = std::fs::read_to_string(&page).expect("a readable page");
        let shown = page
            .strip_prefix(&root)
            .unwrap_or(&page)
            .display()
            .to_string();
        for target in link_targets(&text) {
            if target.is_empty() || is_external(&target) {
                continue;
            }
            checked += 1;
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let resolved = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap_or(&root).join(file)
            };
            if !resolved.exists() {
                broken.push(format!("{shown}: {target}: no such file"));
                continue;
            }
            if let Ok(inside) = resolved.canonicalize()
                && !inside.starts_with(&root)
            {
                broken.push(format!("{shown}: {target}: outside the repository"));
                continue;
            }
            if !anchor.is_empty() {
                let target_text = std::fs::read_to_string(&resolved).unwrap_or_default();
                if !heading_ids(&target_text).contains(anchor) {
                    broken.push(format!("{shown}: {target}: no heading #{anchor}"));
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: is the scan broken?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_checker_finds_what_it_must() {
    let page = "# Title\n\n## The real control plane (`e2e/cluster`)\n\n## Again\n## Again\n\
                see [a](x.md#again-1) and `[not](code.md)`\n```\n[no](fenced.md)\n```\n";
    assert_eq!(link_targets(page), vec!["x.md#again-1"]);
    let ids = heading_ids(page);
    for id in [
        "title",
        "the-real-control-plane-e2ecluster",
        "again",
        "again-1",
    ] {
        assert!(ids.contains(id), "{id} in {ids:?}");
    }
}

#[test]
fn every_page_of_the_book_is_in_the_summary() {
    let root = repo_root();
    let summary = std::fs::read_to_string(root.join("docs/SUMMARY.md")).expect("SUMMARY.md");
    let listed: BTreeSet<String> = link_targets(&summary).into_iter().collect();
    for page in pages(&root) {
        let Ok(relative) = page.strip_prefix(root.join("docs")) else {
            continue; // the README
        };
        let relative = relative.display().to_string();
        if relative == "SUMMARY.md" {
            continue;
        }
        assert!(
            listed.contains(&relative),
            "docs/{relative} is not in docs/SUMMARY.md"
        );
    }
}
