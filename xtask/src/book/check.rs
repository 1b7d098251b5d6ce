//! The book's own check, offline: every relative link and `#anchor` resolves, every page
//! is in the summary, and every code block says how it is tested (see [`Kind`]).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Component, Path, PathBuf};

use super::markdown::{self, Page};

/// How a code block of the book is tested, by its info string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// `rust` and `rust,no_run`: a doctest of hvd's `book` module (run, or compiled).
    Rust,
    /// `python`: compiled and run in one process by hvd-python's `test_book.py`.
    PythonRun,
    /// `python,cluster`, `python,gpu`, `python,fragment`: compiled by `test_book.py`,
    /// not run (it needs several processes or a cluster, a GPU, or is part of a program).
    PythonCompiled(&'static str),
    /// `console` (commands for the reader), `text` (what a program prints), `diff`,
    /// `toml`: shown, never run.
    Shown(&'static str),
}

/// The reasons a Python block may give for not being run.
pub const PYTHON_REASONS: [&str; 3] = ["cluster", "gpu", "fragment"];
const SHOWN: [&str; 4] = ["console", "text", "diff", "toml"];

pub fn kind(info: &str) -> Result<Kind, String> {
    let mut parts = info.split(',').map(str::trim);
    let language = parts.next().unwrap_or("");
    let attributes: Vec<&str> = parts.collect();
    match (language, attributes.as_slice()) {
        ("rust", [] | ["no_run"]) => Ok(Kind::Rust),
        ("python", []) => Ok(Kind::PythonRun),
        ("python", [reason]) => PYTHON_REASONS
            .iter()
            .find(|r| *r == reason)
            .map(|r| Kind::PythonCompiled(r))
            .ok_or_else(|| {
                format!(
                    "python blocks are run, or say why not with one of {}",
                    PYTHON_REASONS.join(", ")
                )
            }),
        (language, []) => SHOWN
            .iter()
            .find(|s| **s == language)
            .map(|s| Kind::Shown(s))
            .ok_or_else(|| {
                format!(
                    "every block is rust, rust,no_run, python[,{}] or one of {}",
                    PYTHON_REASONS.join("|"),
                    SHOWN.join(", ")
                )
            }),
        _ => Err(
            "every block is rust or rust,no_run (a doctest), python (run) or \
                  python,<reason>, or shown only (console, text, diff, toml)"
                .into(),
        ),
    }
}

#[derive(Default)]
pub struct Report {
    pub pages: usize,
    pub links: usize,
    pub external: usize,
    pub blocks: BTreeMap<Kind, usize>,
    pub problems: Vec<String>,
}

/// Checks the pages under `src` (the book's), and `extra` pages outside it (the README)
/// whose links may point into the book. `doctests` is the source of the module that
/// includes the pages with Rust blocks.
pub fn check(src: &Path, extra: &[PathBuf], doctests: &str) -> Report {
    let mut report = Report::default();
    let mut pages = BTreeMap::new();
    let mut files = Vec::new();
    collect(src, &mut files);
    files.extend(extra.iter().cloned());
    for file in &files {
        match fs::read_to_string(file) {
            Ok(text) => {
                pages.insert(file.clone(), markdown::read(&text));
            }
            Err(e) => report.problems.push(format!("{}: {e}", file.display())),
        }
    }
    report.pages = pages.len();
    let summary = src.join("SUMMARY.md");
    let listed = pages.get(&summary).map(|page| {
        page.links
            .iter()
            .map(|link| normalize(&src.join(&link.target)))
            .collect::<Vec<_>>()
    });
    for (file, page) in &pages {
        let name = file.display();
        if let Some(line) = page.unclosed {
            report
                .problems
                .push(format!("{name}:{line}: code block never closed"));
        }
        let in_book = file.starts_with(src);
        if in_book
            && file != &summary
            && let Some(listed) = &listed
            && !listed.contains(file)
        {
            report
                .problems
                .push(format!("{name}: not in SUMMARY.md, so not in the book"));
        }
        for block in &page.blocks {
            match kind(&block.info) {
                Ok(kind) if in_book => {
                    *report.blocks.entry(kind).or_default() += 1;
                    if kind == Kind::Rust && !includes(doctests, src, file) {
                        report.problems.push(format!(
                            "{name}:{}: a Rust block, but hvd/src/book.rs does not include \
                             this page as doctests",
                            block.line
                        ));
                    }
                }
                Ok(_) => {}
                Err(e) if in_book => report.problems.push(format!(
                    "{name}:{}: code block '{}': {e}",
                    block.line, block.info
                )),
                Err(_) => {}
            }
        }
        check_links(file, page, &pages, &mut report);
    }
    if listed.is_none() {
        report
            .problems
            .push(format!("{}: missing", summary.display()));
    }
    report
}

/// The README is the landing page: at most this many lines, the rest is in the book.
pub const README_MAX_LINES: usize = 200;

/// What the README must keep: its size, and the project's two commands in its first code
/// block, which CI and readers start from.
pub fn readme_problems(text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let lines = text.lines().count();
    if lines > README_MAX_LINES {
        problems.push(format!(
            "README.md: {lines} lines; the landing page stays within {README_MAX_LINES}, \
             the rest belongs in the book"
        ));
    }
    let first_block: Vec<&str> = text
        .lines()
        .skip_while(|line| !line.starts_with("```"))
        .skip(1)
        .take_while(|line| !line.starts_with("```"))
        .collect();
    for command in ["cargo xtask train", "cargo xtask test-cluster"] {
        if !first_block.iter().any(|line| line.trim() == command) {
            problems.push(format!(
                "README.md: its first code block must hold `{command}`"
            ));
        }
    }
    problems
}

fn check_links(file: &Path, page: &Page, pages: &BTreeMap<PathBuf, Page>, report: &mut Report) {
    let dir = file.parent().unwrap_or(Path::new("."));
    for link in &page.links {
        report.links += 1;
        let target = link.target.as_str();
        if target.contains("://") || target.starts_with("mailto:") {
            report.external += 1;
            continue;
        }
        let where_ = format!("{}:{}", file.display(), link.line);
        let (path, fragment) = match target.split_once('#') {
            Some((path, fragment)) => (path, Some(fragment)),
            None => (target, None),
        };
        let resolved = if path.is_empty() {
            file.to_path_buf()
        } else {
            normalize(&dir.join(path))
        };
        if !resolved.exists() {
            report
                .problems
                .push(format!("{where_}: link to '{target}': no such file"));
            continue;
        }
        let Some(fragment) = fragment else { continue };
        match pages.get(&resolved) {
            Some(target_page) if target_page.anchors.iter().any(|a| a == fragment) => {}
            Some(_) => report.problems.push(format!(
                "{where_}: link to '{target}': no heading there has the anchor '#{fragment}'"
            )),
            None => report.problems.push(format!(
                "{where_}: link to '{target}': an anchor into a file that is not a page"
            )),
        }
    }
}

fn includes(doctests: &str, src: &Path, page: &Path) -> bool {
    let Ok(relative) = page.strip_prefix(src) else {
        return false;
    };
    doctests.contains(&format!("docs/src/{}\"", relative.display()))
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "md") {
            files.push(normalize(&path));
        }
    }
}

/// `a/b/../c` as `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_block_must_say_how_it_is_tested() {
        assert_eq!(kind("rust,no_run"), Ok(Kind::Rust));
        assert_eq!(kind("python"), Ok(Kind::PythonRun));
        assert_eq!(kind("python,gpu"), Ok(Kind::PythonCompiled("gpu")));
        assert_eq!(kind("console"), Ok(Kind::Shown("console")));
        assert!(
            kind("").is_err(),
            "an unmarked block would be a Rust doctest"
        );
        let err = |info| kind(info).unwrap_err();
        assert!(err("rust,ignore").starts_with("every block is rust or rust,no_run"));
        assert!(
            err("python,later").starts_with("python blocks are run, or say why not with one of")
        );
        assert!(err("bash").starts_with("every block is rust, rust,no_run, python["));
    }

    #[test]
    fn the_readme_stays_a_landing_page() {
        let good = "# hvd\n\n```bash\ncargo xtask train\n\ncargo xtask test-cluster\n```\n";
        assert!(readme_problems(good).is_empty());
        let long = format!("{good}{}", "more\n".repeat(README_MAX_LINES));
        assert_eq!(readme_problems(&long).len(), 1);
        let moved =
            "# hvd\n\n```bash\ncargo xtask train\n```\n\n```bash\ncargo xtask test-cluster\n```\n";
        assert!(readme_problems(moved)[0].contains("cargo xtask test-cluster"));
    }

    #[test]
    fn broken_links_anchors_and_orphans_are_named() {
        let root = std::env::temp_dir().join(format!("xtask-book-{}", std::process::id()));
        let src = root.join("src");
        fs::create_dir_all(&src).unwrap();
        fs::write(src.join("SUMMARY.md"), "- [A](a.md)\n").unwrap();
        fs::write(
            src.join("a.md"),
            "# A\n\n## Part one\n\n[ok](#part-one) [ok](b.md#b) [bad](#part-two) \
             [gone](c.md) [web](https://example.org/x)\n\n```rust\nfn main() {}\n```\n",
        )
        .unwrap();
        fs::write(src.join("b.md"), "# B\n").unwrap();
        let report = check(&src, &[], "");
        fs::remove_dir_all(&root).unwrap();
        let problems = report.problems.join("\n");
        assert!(problems.contains("'#part-two'"), "{problems}");
        assert!(problems.contains("'c.md': no such file"), "{problems}");
        assert!(problems.contains("b.md: not in SUMMARY.md"), "{problems}");
        assert!(
            problems.contains("does not include this page"),
            "{problems}"
        );
        assert_eq!(report.problems.len(), 4, "{problems}");
        assert_eq!((report.links, report.external), (6, 1));
    }
}
