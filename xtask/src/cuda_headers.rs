//! The real `cuda.h` and `nccl.h` for the GPU test double's ABI check, taken from the
//! PyPI wheels NVIDIA publishes (the versions the GPU machines run): only the headers
//! are kept, in `~/.cache/hvd-cuda-headers/include`, so later runs need no download.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The wheels whose headers `nccl.h` and `cuda.h` need: the runtime's (cuda.h,
/// cuda_runtime.h, half and bfloat16 types), the compiler's `crt/`, CCCL's `nv/` and
/// NCCL's.
pub const WHEELS: &[&str] = &[
    "nvidia-cuda-runtime==13.0.96",
    "nvidia-cuda-crt==13.0.88",
    "nvidia-cuda-cccl==13.0.85",
    "nvidia-nccl-cu13==2.28.9",
];

/// Copies every header of the wheels given as arguments into the folder given first,
/// flattening `nvidia/<package>/include/`; CCCL's own tree (13 MB of C++ templates) is
/// not needed.
const EXTRACT: &str = r#"
import sys, zipfile, os
out = sys.argv[1]
for wheel in sys.argv[2:]:
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            parts = name.split("/include/", 1)
            if len(parts) == 2 and parts[1] and not parts[1].startswith("cccl/") and not name.endswith("/"):
                target = os.path.join(out, parts[1])
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with z.open(name) as src, open(target, "wb") as dst:
                    dst.write(src.read())
"#;

/// Where the headers are kept (the GPU double's build script looks there too).
pub fn folder() -> PathBuf {
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    Path::new(&home).join(".cache/hvd-cuda-headers/include")
}

fn present(dir: &Path) -> bool {
    dir.join("cuda.h").is_file() && dir.join("nccl.h").is_file()
}

/// The folder with the headers, fetched with pip when missing; the reason when they
/// cannot be had (no pip, no network).
pub fn ensure() -> Result<PathBuf, String> {
    let dir = folder();
    if present(&dir) {
        return Ok(dir);
    }
    let python = crate::python::venv().join("bin/python");
    let python = if python.is_file() {
        python
    } else {
        PathBuf::from("python3")
    };
    let download = std::env::temp_dir().join(format!("hvd-cuda-wheels-{}", std::process::id()));
    println!(
        "test-cluster: fetching cuda.h and nccl.h from PyPI ({})",
        WHEELS.join(" ")
    );
    let fetched = crate::python::pip_download(&python, &download, WHEELS).output();
    let result = match fetched {
        Err(e) => Err(format!("cannot run {}: {e}", python.display())),
        Ok(out) if !out.status.success() => Err(format!(
            "pip download failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no output")
        )),
        Ok(_) => extract(&python, &download, &dir),
    };
    let _ = std::fs::remove_dir_all(&download);
    result.map(|()| dir)
}

fn extract(python: &Path, wheels: &Path, dir: &Path) -> Result<(), String> {
    let files: Vec<PathBuf> = std::fs::read_dir(wheels)
        .map_err(|e| format!("{}: {e}", wheels.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "whl"))
        .collect();
    let status = Command::new(python)
        .args(["-c", EXTRACT])
        .arg(dir)
        .args(&files)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if status.success() && present(dir) {
        Ok(())
    } else {
        let _ = std::fs::remove_dir_all(dir);
        Err(format!("the wheels held no cuda.h and nccl.h ({status})"))
    }
}
