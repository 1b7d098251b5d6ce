//! The import graph of the Python package, read by Python's own parser.

use std::path::Path;
use std::process::Command;

use super::graph::Graph;

/// Every module of the package under `package` and the package modules it imports,
/// at the top of the file or inside a function.
pub fn imports(package: &Path) -> Result<Graph, String> {
    let output = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(package)
        .output()
        .map_err(|e| format!("circles: running python3 to read the Python package: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "circles: reading the Python package under {} failed:\n{}",
            package.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let mut graph = Graph::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let mut names = line.split_whitespace().map(str::to_string);
        if let Some(module) = names.next() {
            graph.insert(module, names.collect());
        }
    }
    Ok(graph)
}

/// Prints `module imported...` per module. `from a import b` imports the module `a.b`
/// when there is one, else `a`; a native extension (not a `.py` file) is a leaf.
const SCRIPT: &str = r#"
import ast, os, sys
root = os.path.abspath(sys.argv[1])
top = os.path.dirname(root)
files = {}
for folder, _, names in os.walk(root):
    for name in names:
        if name.endswith(".py"):
            path = os.path.join(folder, name)
            module = os.path.relpath(path, top)[:-3].replace(os.sep, ".")
            files[module[:-9] if module.endswith(".__init__") else module] = path

# The native extension has no .py file: it imports nothing of the package.
NATIVE = {"hvd._hvd"}

def owner(name):
    if name in NATIVE:
        return name
    while name and name not in files:
        name = name.rpartition(".")[0]
    return name

for module, path in sorted(files.items()):
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if isinstance(node, ast.Import):
            found.update(owner(a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            subs = [base + "." + a.name for a in node.names
                    if base + "." + a.name in files or base + "." + a.name in NATIVE]
            found.update(subs)
            if len(subs) < len(node.names):
                found.add(owner(base))
    found.discard(module)
    found.discard("")
    print(module, *sorted(found))
"#;
