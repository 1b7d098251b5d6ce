//! Decides whether the ABI check runs: it needs the real `cuda.h` and `nccl.h`, which
//! `cargo xtask test-cluster` fetches from PyPI (`HVD_CUDA_INCLUDE`, or the folder it
//! keeps them in). Without them the check is compiled as ignored, saying why.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rustc-check-cfg=cfg(hvd_have_cuda_headers)");
    println!("cargo::rerun-if-env-changed=HVD_CUDA_INCLUDE");
    println!("cargo::rerun-if-env-changed=HOME");
    let dirs: Vec<PathBuf> = match std::env::var_os("HVD_CUDA_INCLUDE") {
        Some(value) => std::env::split_paths(&value).collect(),
        None => std::env::var_os("HOME")
            .map(|home| vec![Path::new(&home).join(".cache/hvd-cuda-headers/include")])
            .unwrap_or_default(),
    };
    let has = |header: &str| dirs.iter().any(|d| d.join(header).is_file());
    if has("cuda.h") && has("nccl.h") {
        for dir in &dirs {
            println!("cargo::rerun-if-changed={}", dir.display());
        }
        let joined = std::env::join_paths(&dirs).unwrap_or_default();
        println!("cargo::rustc-cfg=hvd_have_cuda_headers");
        println!(
            "cargo::rustc-env=HVD_CUDA_INCLUDE_DIRS={}",
            joined.to_string_lossy()
        );
    }
}
