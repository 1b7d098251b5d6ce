//! The module graph of each crate, from the paths its files name.
//!
//! A module is a file: `src/lib.rs` or `src/main.rs` is the root (`""`), `src/a/mod.rs`
//! and `src/a.rs` are `a`, `src/a/b.rs` is `a::b`; each `src/bin/<name>/main.rs` roots a
//! graph of its own. A module imports the module a `crate::`, `super::` or `self::` path
//! leads to: the deepest module the path names, or, when it names an item a module
//! re-exports (`pub use`), the module the re-export leads to.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::graph::Graph;

/// `(crate or binary, its module graph)` for every crate of the workspace.
pub fn crates(root: &Path) -> Result<Vec<(String, Graph)>, String> {
    let mut found = Vec::new();
    for entry in read_dir(root)? {
        if !entry.join("Cargo.toml").is_file() || !entry.join("src").is_dir() {
            continue;
        }
        let name = file_name(&entry);
        let src = entry.join("src");
        found.push((name.clone(), graph(&src, &[&src.join("bin")])?));
        let bins = src.join("bin");
        if bins.is_dir() {
            for bin in read_dir(&bins)?.into_iter().filter(|p| p.is_dir()) {
                found.push((
                    format!("{name} (bin {})", file_name(&bin)),
                    graph(&bin, &[])?,
                ));
            }
        }
    }
    Ok(found)
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    Ok(paths)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// The graph of the modules under `dir`, leaving out the folders in `skip`.
fn graph(dir: &Path, skip: &[&Path]) -> Result<Graph, String> {
    let mut files = BTreeMap::new();
    collect(dir, dir, skip, &mut files)?;
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    let reexports: BTreeMap<&str, BTreeMap<String, String>> = files
        .iter()
        .map(|(module, text)| (module.as_str(), reexports_of(module, text, &modules)))
        .collect();
    let mut graph = Graph::new();
    for (module, text) in &files {
        let mut imports = BTreeSet::new();
        for path in paths_in(&code_of(text)) {
            if let Some(target) = resolve(module, &path, &modules, &reexports)
                && &target != module
            {
                imports.insert(target);
            }
        }
        graph.insert(module.clone(), imports);
    }
    Ok(graph)
}

fn collect(
    base: &Path,
    dir: &Path,
    skip: &[&Path],
    files: &mut BTreeMap<String, String>,
) -> Result<(), String> {
    for path in read_dir(dir)? {
        if skip.contains(&path.as_path()) {
            continue;
        }
        if path.is_dir() {
            collect(base, &path, skip, files)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("reading {}: {e}", path.display()))?;
            files.insert(module_of(base, &path), text);
        }
    }
    Ok(())
}

/// `a/b.rs` → `a::b`; `a/mod.rs` → `a`; `lib.rs`, `main.rs` → the root, `""`.
fn module_of(base: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(base).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main")
        || parts.last().is_some_and(|p| p == "mod")
    {
        parts.pop();
    }
    parts.join("::")
}

/// The code of a file: its trailing tests and its comments (whose doc links name modules
/// without importing them) left out.
fn code_of(text: &str) -> String {
    without_tests(text)
        .lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text before a file's trailing `#[cfg(test)]` module: its tests may use anything.
fn without_tests(text: &str) -> &str {
    let mut from = 0;
    while let Some(at) = text[from..].find("#[cfg(test)]") {
        let start = from + at;
        let rest = text[start + "#[cfg(test)]".len()..].trim_start();
        if rest.starts_with("mod ") && rest.lines().next().is_some_and(|l| l.contains('{')) {
            return &text[..start];
        }
        from = start + 1;
    }
    text
}

/// Every `crate::`/`super::`/`self::` path in `text`, `use` groups expanded, each as its
/// segments (`["super", "engine", "Engine"]`).
fn paths_in(text: &str) -> Vec<Vec<String>> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    for head in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = text[from..].find(head) {
            let start = from + at;
            from = start + head.len();
            let glued = start > 0
                && (bytes[start - 1].is_ascii_alphanumeric()
                    || bytes[start - 1] == b'_'
                    || bytes[start - 1] == b':');
            if glued {
                continue;
            }
            let prefix = vec![head.trim_end_matches(':').to_string()];
            expand(&text[start + head.len()..], prefix, &mut found);
        }
    }
    found
}

/// Reads a path's segments after `prefix`, expanding a `{...}` group into each member.
fn expand(rest: &str, mut prefix: Vec<String>, found: &mut Vec<Vec<String>>) {
    let mut rest = rest;
    loop {
        let ident: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !ident.is_empty() {
            prefix.push(ident.clone());
            rest = &rest[ident.len()..];
            if let Some(after) = rest.strip_prefix("::") {
                rest = after;
                continue;
            }
            found.push(prefix);
            return;
        }
        if let Some(group) = rest.strip_prefix('{') {
            for member in split_group(group) {
                let member = member.trim();
                if member == "self" || member.is_empty() {
                    found.push(prefix.clone());
                } else {
                    expand(member, prefix.clone(), found);
                }
            }
        } else {
            found.push(prefix);
        }
        return;
    }
}

/// The members of a `use` group up to its closing brace, split at top-level commas.
fn split_group(group: &str) -> Vec<&str> {
    let (mut depth, mut start, mut members) = (0usize, 0usize, Vec::new());
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                members.push(&group[start..i]);
                return members;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                members.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    members
}

/// The names `module` re-exports (`pub use` and `pub(crate) use`) and where each leads.
fn reexports_of(module: &str, text: &str, modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for statement in code_of(text).split(';') {
        let statement = statement.trim_start();
        let Some(rest) = ["pub use ", "pub(crate) use ", "pub(super) use "]
            .iter()
            .find_map(|p| statement.strip_prefix(p))
        else {
            continue;
        };
        let mut paths = Vec::new();
        let rest = rest.trim_start();
        let (head, tail) = match rest.split_once("::") {
            Some((head, tail)) => (head, tail),
            None => continue,
        };
        expand(tail, vec![head.to_string()], &mut paths);
        for path in paths {
            let Some(name) = path.last().cloned() else {
                continue;
            };
            let relative = match path[0].as_str() {
                "crate" | "super" | "self" => path.clone(),
                // `pub use child::Item` names a child module of this one.
                _ => std::iter::once("self".to_string())
                    .chain(path.iter().cloned())
                    .collect(),
            };
            if let Some(target) = deepest_module(module, &relative, modules) {
                map.insert(name, target);
            }
        }
    }
    map
}

/// The deepest existing module a path names, ignoring re-exports, and where in the path
/// the segments after it start.
fn locate(module: &str, path: &[String], modules: &BTreeSet<String>) -> Option<(String, usize)> {
    let mut at: Vec<String> = match path.first()?.as_str() {
        "crate" => Vec::new(),
        "self" => split(module),
        "super" => {
            let mut here = split(module);
            here.pop()?;
            here
        }
        _ => return None,
    };
    let mut next = 1;
    while path.get(next).is_some_and(|s| s == "super") {
        at.pop()?;
        next += 1;
    }
    while let Some(segment) = path.get(next) {
        at.push(segment.clone());
        if !modules.contains(&at.join("::")) {
            at.pop();
            break;
        }
        next += 1;
    }
    let deepest = at.join("::");
    modules.contains(&deepest).then_some((deepest, next))
}

fn deepest_module(module: &str, path: &[String], modules: &BTreeSet<String>) -> Option<String> {
    locate(module, path, modules).map(|(deepest, _)| deepest)
}

fn split(module: &str) -> Vec<String> {
    if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(str::to_string).collect()
    }
}

/// The module a path leads to: the deepest module it names, or, when the next segment is
/// an item that module re-exports, where that re-export leads.
fn resolve(
    module: &str,
    path: &[String],
    modules: &BTreeSet<String>,
    reexports: &BTreeMap<&str, BTreeMap<String, String>>,
) -> Option<String> {
    let (deepest, next) = locate(module, path, modules)?;
    let reexported = path
        .get(next)
        .and_then(|item| reexports.get(deepest.as_str())?.get(item).cloned());
    Some(reexported.unwrap_or(deepest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modules(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn path(p: &str) -> Vec<String> {
        p.split("::").map(str::to_string).collect()
    }

    #[test]
    fn paths_and_groups_are_read_whole() {
        let text = "use crate::{a::B, c::{d, e::F}};\nfn f() { super::g::h(); x_crate::no(); }";
        let mut found = paths_in(text);
        found.sort();
        assert_eq!(
            found,
            vec![
                path("crate::a::B"),
                path("crate::c::d"),
                path("crate::c::e::F"),
                path("super::g::h")
            ]
        );
    }

    #[test]
    fn a_reexported_item_leads_to_the_module_that_defines_it() {
        let known = modules(&["", "engine", "engine::slot", "queue"]);
        let mut reexports = BTreeMap::new();
        let engine = reexports_of("engine", "pub use slot::Slot;\nmod slot;", &known);
        reexports.insert("engine", engine);
        let target = resolve("queue", &path("crate::engine::Slot"), &known, &reexports);
        assert_eq!(target.as_deref(), Some("engine::slot"));
        let target = resolve("engine::slot", &path("super::Other"), &known, &reexports);
        assert_eq!(target.as_deref(), Some("engine"));
    }

    #[test]
    fn a_trailing_test_module_is_left_out() {
        let text = "use crate::a;\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\n";
        assert_eq!(paths_in(without_tests(text)), vec![path("crate::a")]);
    }
}
