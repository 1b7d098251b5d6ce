//! `cargo xtask circles`: no module of any crate, and no module of the Python package,
//! imports one that imports it back, directly or around a longer loop.
//!
//! A circle means neither module can be read, tested or moved without the other. The
//! Rust side follows `crate::`, `super::` and `self::` paths (re-exports resolved to the
//! module that defines the item; a file's trailing `#[cfg(test)] mod tests` left out);
//! the Python side follows every `import`, inside functions too, since a lazy import
//! is a circle postponed, not removed.

mod graph;
mod python;
mod rust;

use crate::workspace_root;

pub fn run(args: &[String]) -> Result<(), String> {
    if let Some(arg) = args.first() {
        return Err(format!("circles takes no arguments, not '{arg}'"));
    }
    let root = workspace_root();
    let mut found = Vec::new();
    for (name, modules) in rust::crates(&root)? {
        found.extend(
            graph::circles(&modules)
                .into_iter()
                .map(|c| (name.clone(), c)),
        );
    }
    let package = root.join("hvd-python/python/hvd");
    found.extend(
        graph::circles(&python::imports(&package)?)
            .into_iter()
            .map(|c| ("hvd (Python)".to_string(), c)),
    );
    if found.is_empty() {
        println!("circles: no import circle in any crate or in the Python package");
        return Ok(());
    }
    let listed: Vec<String> = found
        .iter()
        .map(|(name, circle)| format!("  {name}: {}", circle.join(" -> ")))
        .collect();
    Err(format!(
        "{} import circle(s); each module imports the next, and the last the first:\n{}",
        found.len(),
        listed.join("\n")
    ))
}
