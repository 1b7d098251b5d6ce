// Which Python the data-gap benchmark runs PyTorch's DataLoader with. The build script
// includes this file too (to find out whether its test can run), so it uses only std and
// has no inner doc comment.

use std::path::{Path, PathBuf};

/// The variable that names the Python to use, as `--python` does.
pub const PYTHON_ENV: &str = "HVD_BENCH_PYTHON";

/// What the Python must import.
pub const MODULES: [&str; 3] = ["torch", "torchvision", "PIL"];

/// The Python to try: `--python`, else `HVD_BENCH_PYTHON`, else the project's virtual
/// environment (`HVD_VENV`, else `~/.cache/hvd-venv`), else `python3` on the path.
pub fn candidate(flag: Option<&Path>) -> PathBuf {
    if let Some(path) = flag {
        return path.to_path_buf();
    }
    if let Some(path) = std::env::var_os(PYTHON_ENV) {
        return path.into();
    }
    // The project's virtual environment, where its Python tests run: HVD_VENV, else
    // ~/.cache/hvd-venv.
    let venv = std::env::var_os("HVD_VENV")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/hvd-venv")));
    if let Some(python) = venv.map(|v| v.join("bin/python"))
        && python.is_file()
    {
        return python;
    }
    "python3".into()
}
