//! The repository's documentation links only to what exists: every relative link in
//! README.md, ARCHITECTURE.md, CONTRIBUTING.md, CHANGELOG.md and docs/*.md — Markdown
//! `[text](path)` and `![alt](path)`, and the `<img src="path">` the README's screenshot table
//! uses — names a file or directory of the repository, and a `#anchor` into a Markdown page
//! names one of its headings. A broken link fails naming the page and the link.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The repository's root: this crate is `crates/deepsolve-cli`.
fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The pages whose links are checked, relative to the root.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = [
        "README.md",
        "ARCHITECTURE.md",
        "CONTRIBUTING.md",
        "CHANGELOG.md",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .map(|path| {
            path.strip_prefix(root)
                .expect("under the root")
                .to_path_buf()
        })
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The text outside fenced code blocks and inline code spans: a link written as code is an
/// example, not a link.
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
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            } else if !in_code {
                out.push(c);
            }
        }
        out.push('\n');
    }
    out
}

/// Every link target in `text`: `](target)` and `src="target"`, without an optional title.
fn targets(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (opening, closing) in [("](", ')'), ("src=\"", '"')] {
        let mut rest = text;
        while let Some(at) = rest.find(opening) {
            rest = &rest[at + opening.len()..];
            if let Some(end) = rest.find(closing) {
                let target = rest[..end].split_whitespace().next().unwrap_or("");
                found.push(target.to_string());
            }
        }
    }
    found
}

/// Whether `target` points outside the repository by design (a URL, mail) and is not checked.
fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:")
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown page's headings (a repeated heading's second anchor gets `-1`).
fn anchors(markdown: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced {
            continue;
        }
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = slug(heading);
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// What is wrong with one link of `page`, if anything.
fn broken(root: &Path, page: &Path, target: &str) -> Option<String> {
    if target.is_empty() {
        return Some("an empty link".into());
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let relative = if path.is_empty() {
        page.to_path_buf()
    } else {
        page.parent().unwrap_or(Path::new("")).join(path)
    };
    let Ok(file) = root.join(&relative).canonicalize() else {
        return Some(format!("{} does not exist", relative.display()));
    };
    let inside = root.canonicalize().expect("the root");
    if !file.starts_with(&inside) {
        return Some("it points outside the repository".into());
    }
    let anchor = anchor?;
    if file.extension().is_none_or(|ext| ext != "md") {
        return None;
    }
    let text = std::fs::read_to_string(&file).expect("a linked page");
    (!anchors(&text).contains(anchor)).then(|| format!("no heading has the anchor #{anchor}"))
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let root = repository();
    let pages = pages(&root);
    assert!(
        pages.len() >= 10,
        "the top-level pages and docs/*.md: {pages:?}"
    );
    let mut problems = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(root.join(page))
            .unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        for target in targets(&prose(&text)) {
            if is_external(&target) {
                continue;
            }
            if let Some(why) = broken(&root, page, &target) {
                problems.push(format!("{}: link '{target}': {why}", page.display()));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_link_check_sees_a_broken_link_and_a_wrong_anchor() {
    let root = repository();
    let page = Path::new("README.md");
    let text = prose("see [x](docs/missing.md) and ![y](docs/solve-phone.png), `[z](nowhere)`");
    assert_eq!(targets(&text), ["docs/missing.md", "docs/solve-phone.png"]);
    assert!(broken(&root, page, "docs/missing.md").is_some());
    assert_eq!(broken(&root, page, "docs/solve-phone.png"), None);
    assert_eq!(broken(&root, page, "ARCHITECTURE.md#the-map"), None);
    assert!(broken(&root, page, "ARCHITECTURE.md#no-such-heading").is_some());
    assert!(broken(&root, page, "../outside").is_some());
    assert_eq!(
        slug(" Figures: `geogebra_analysis`"),
        "figures-geogebra_analysis"
    );
}
