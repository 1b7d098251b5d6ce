//! The Python front's tests: build the hvd wheel, install it into a virtual environment
//! outside the source tree, and run its pytest jobs (each under hvdrun).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What to install into a fresh environment for the Python tests.
/// cloudpickle: `hvd.run` sends the function to its ranks with it, as Horovod does.
/// tensorflow-cpu (with Keras 3): `hvd.tensorflow` and `hvd.keras`, beside torch in the
/// same environment; their tests fail under CI without it and are skipped elsewhere.
const PACKAGES: &str = "torch numpy maturin pytest cloudpickle tensorflow-cpu";

/// The virtual environment: `HVD_VENV`, else `~/.cache/hvd-venv`.
pub fn venv() -> PathBuf {
    if let Some(dir) = std::env::var_os("HVD_VENV") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    Path::new(&home).join(".cache/hvd-venv")
}

/// How to make the environment the tests need.
pub fn install_hint(venv: &Path) -> String {
    let v = venv.display();
    format!("python3 -m venv {v} && {v}/bin/pip install {PACKAGES}")
}

/// Whether the environment's python imports `modules` (a Python import list).
fn imports(venv: &Path, modules: &str) -> bool {
    Command::new(venv.join("bin/python"))
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether the environment has what the tests need; the reason when it does not.
pub fn ready(venv: &Path) -> Result<(), String> {
    if imports(venv, "torch, maturin, pytest, cloudpickle") {
        return Ok(());
    }
    Err(format!(
        "no virtual environment with torch, maturin, pytest and cloudpickle at {}",
        venv.display()
    ))
}

/// `ready`, and `modules` importable too, from `packages`; the reason and the command
/// that makes it when not.
pub fn ready_with(venv: &Path, modules: &str, packages: &str) -> Result<(), String> {
    ready(venv).map_err(|why| format!("{why}; make it with: {}", install_hint(venv)))?;
    if imports(venv, modules) {
        return Ok(());
    }
    Err(format!(
        "{modules} not installed in {v}: {v}/bin/pip install {packages}",
        v = venv.display()
    ))
}

/// `PATH` with the environment's programs (python, hvdrun) first.
pub fn path_with(venv: &Path) -> Result<OsString, String> {
    std::env::join_paths(
        std::iter::once(venv.join("bin")).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )),
    )
    .map_err(|e| format!("PATH: {e}"))
}

/// `python -m pip download` of the wheels of `packages` alone (no dependencies, no source
/// distributions) into `out`.
pub fn pip_download(python: &Path, out: &Path, packages: &[&str]) -> Command {
    let mut command = Command::new(python);
    command
        .args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "-d",
        ])
        .arg(out)
        .args(packages);
    command
}

/// Builds the wheel from this tree and installs it into `venv`; returns a `PATH` that
/// puts the environment's programs (python, hvdrun) first.
pub fn install_wheel(root: &Path, venv: &Path) -> Result<OsString, String> {
    let path = path_with(venv)?;
    let wheels = root.join("target/hvd-wheel");
    // One wheel in the folder, so the install below cannot pick a stale one.
    let _ = std::fs::remove_dir_all(&wheels);
    run(Command::new(root.join("hvd-python/build-wheel"))
        .arg("--out")
        .arg(&wheels)
        .env("PATH", &path))?;
    let wheel = std::fs::read_dir(&wheels)
        .map_err(|e| format!("{}: {e}", wheels.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .ok_or_else(|| format!("maturin left no wheel in {}", wheels.display()))?;
    run(Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--force-reinstall", "--no-deps"])
        .arg(&wheel))?;
    Ok(path)
}

/// The Python environment with this tree's wheel installed.
pub struct Installed {
    pub venv: PathBuf,
    /// `PATH` with the environment's programs (python, hvdrun, horovodrun) first.
    pub path: OsString,
}

impl Installed {
    /// Builds the wheel and installs it into `venv`.
    pub fn new(root: &Path, venv: &Path) -> Result<Installed, String> {
        let path = install_wheel(root, venv)?;
        Ok(Installed {
            venv: venv.to_path_buf(),
            path,
        })
    }

    /// Runs pytest over `tests` (paths and options, from the workspace root) with
    /// `env`; an empty collection is a failure.
    pub fn pytest(&self, root: &Path, tests: &[&str], env: &[(&str, &Path)]) -> Result<(), String> {
        let mut command = Command::new(self.venv.join("bin/python"));
        command
            .args(["-m", "pytest", "-q", "-rs"])
            .args(tests)
            .current_dir(root)
            .env("PATH", &self.path);
        for (key, value) in env {
            command.env(key, value);
        }
        let status = command
            .status()
            .map_err(|e| format!("could not run pytest: {e}"))?;
        match status.code() {
            Some(0) => Ok(()),
            Some(5) => Err(format!("pytest collected no tests in {}", tests.join(" "))),
            _ => Err(format!(
                "the Python tests {} failed ({status})",
                tests.join(" ")
            )),
        }
    }
}

/// Makes the environment: a venv (python3-venv from apt first, as root, when Python
/// lacks it) and the packages the tests need from PyPI (torch is ~3 GB, tensorflow-cpu
/// ~1.6 GB).
pub fn make(venv: &Path) -> Result<(), String> {
    let fresh = || {
        Command::new("python3")
            .args(["-m", "venv"])
            .arg(venv)
            .status()
            .is_ok_and(|s| s.success())
    };
    let made =
        fresh() || (crate::requirements::apt_install(&["python3-venv", "python3-pip"]) && fresh());
    if !made {
        return Err(format!(
            "could not make a virtual environment at {} (needs python3-venv)",
            venv.display()
        ));
    }
    println!(
        "test-cluster: installing {PACKAGES} into {}",
        venv.display()
    );
    run(Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet"])
        .args(PACKAGES.split(' ')))?;
    ready(venv)
}

/// torchvision and pillow, which Horovod's examples import, installed when missing: pinned
/// to the environment's torch so that pip neither swaps torch nor pairs a mismatched build.
pub fn ensure_torchvision(venv: &Path) -> Result<(), String> {
    let python = venv.join("bin/python");
    let probe = |code: &str| {
        Command::new(&python)
            .args(["-c", code])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    if probe("import torchvision, PIL").is_some() {
        return Ok(());
    }
    let torch = probe("import torch; print(torch.__version__.split('+')[0])")
        .ok_or_else(|| format!("no torch in {}", venv.display()))?;
    println!(
        "installing torchvision and pillow (for torch {torch}) into {}",
        venv.display()
    );
    run(Command::new(venv.join("bin/pip")).args([
        "install",
        "--quiet",
        &format!("torch=={torch}"),
        "torchvision",
        "pillow",
    ]))
}

fn run(command: &mut Command) -> Result<(), String> {
    let status = command
        .status()
        .map_err(|e| format!("could not run {command:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{command:?} failed ({status})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_environment_is_named_with_the_command_that_makes_it() {
        let venv = Path::new("/nonexistent/hvd-venv");
        let why = ready(venv).unwrap_err();
        assert!(why.contains("/nonexistent/hvd-venv"), "{why}");
        assert_eq!(
            install_hint(venv),
            "python3 -m venv /nonexistent/hvd-venv && /nonexistent/hvd-venv/bin/pip install \
             torch numpy maturin pytest cloudpickle tensorflow-cpu"
        );
        let why = ready_with(venv, "tensorflow", "tensorflow-cpu").unwrap_err();
        assert!(
            why.ends_with(&format!("; make it with: {}", install_hint(venv))),
            "{why}"
        );
    }
}
