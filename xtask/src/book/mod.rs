//! `cargo xtask book`: builds the book under `docs/` with mdBook and checks it offline:
//! every relative link and `#anchor` of the book and the README resolves, every page is
//! in the summary, and every code block is of a kind some test compiles or runs (Rust
//! blocks as hvd's doctests, Python blocks by hvd-python's `test_book.py`) or is marked
//! as shown only. Nothing is fetched: links to other sites are counted, not followed.

mod check;
mod markdown;

use std::fs;
use std::process::Command;
use std::time::Instant;

use check::Kind;

use crate::workspace_root;

/// The mdBook release CI installs (`cargo install --locked mdbook --version ...`).
pub const MDBOOK_VERSION: &str = "0.5.4";

pub fn run(args: &[String]) -> Result<(), String> {
    let mut build = true;
    for arg in args {
        match arg.as_str() {
            "--check-only" => build = false,
            other => return Err(format!("unknown book option '{other}'")),
        }
    }
    let root = workspace_root();
    let started = Instant::now();
    let doctests_path = root.join("hvd/src/book.rs");
    let doctests = fs::read_to_string(&doctests_path)
        .map_err(|e| format!("{}: {e}", doctests_path.display()))?;
    let mut report = check::check(&root.join("docs/src"), &[root.join("README.md")], &doctests);
    let readme =
        fs::read_to_string(root.join("README.md")).map_err(|e| format!("README.md: {e}"))?;
    report.problems.extend(check::readme_problems(&readme));
    let count = |wanted: fn(&Kind) -> bool| -> usize {
        report
            .blocks
            .iter()
            .filter(|(kind, _)| wanted(kind))
            .map(|(_, n)| n)
            .sum()
    };
    let compiled_only: Vec<String> = report
        .blocks
        .iter()
        .filter_map(|(kind, n)| match kind {
            Kind::PythonCompiled(reason) => Some(format!("{n} {reason}")),
            _ => None,
        })
        .collect();
    let shown: Vec<String> = report
        .blocks
        .iter()
        .filter_map(|(kind, n)| match kind {
            Kind::Shown(language) => Some(format!("{n} {language}")),
            _ => None,
        })
        .collect();
    println!(
        "book: {} pages, {} links ({} to other sites, not fetched); code blocks: {} Rust \
         (doctests), {} Python run, {} Python compiled only ({}), shown only: {}",
        report.pages,
        report.links,
        report.external,
        count(|k| *k == Kind::Rust),
        count(|k| *k == Kind::PythonRun),
        count(|k| matches!(k, Kind::PythonCompiled(_))),
        compiled_only.join(", "),
        shown.join(", "),
    );
    if !report.problems.is_empty() {
        return Err(format!(
            "the book has {} problem(s):\n  {}",
            report.problems.len(),
            report.problems.join("\n  ")
        ));
    }
    if build {
        let status = Command::new("mdbook")
            .arg("build")
            .arg(root.join("docs"))
            .status()
            .map_err(|e| {
                format!(
                    "could not run mdbook ({e}); install it with \
                     cargo install --locked mdbook --version {MDBOOK_VERSION}"
                )
            })?;
        if !status.success() {
            return Err(format!("mdbook build docs failed ({status})"));
        }
    }
    println!(
        "book: checked{} in {:.1}s",
        if build {
            " and built into target/book"
        } else {
            ""
        },
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
