//! The ABI check: `abi/check.c`, compiled against the real `cuda.h` and `nccl.h`, calls
//! the double through its C entry points (see the C file for what it covers).

#[test]
#[cfg_attr(
    not(hvd_have_cuda_headers),
    ignore = "needs the real cuda.h and nccl.h: cargo xtask test-cluster fetches them from \
              PyPI, or set HVD_CUDA_INCLUDE to their folders"
)]
fn a_c_program_built_against_the_real_headers_runs_on_the_double() {
    #[cfg(hvd_have_cuda_headers)]
    {
        let library = hvd_gpu_double::library_path().unwrap();
        let out = tempfile_dir();
        let program = out.join("check");
        let mut cc = std::process::Command::new("cc");
        cc.args(["-std=c11", "-Wall", "-Werror", "-pthread"]);
        for dir in std::env::split_paths(env!("HVD_CUDA_INCLUDE_DIRS")) {
            cc.arg("-I").arg(dir);
        }
        let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        cc.arg(here.join("tests/abi/check.c"))
            .arg("-o")
            .arg(&program)
            .arg(&library)
            .arg(format!(
                "-Wl,-rpath,{}",
                library.parent().unwrap().display()
            ));
        let built = cc.output().expect("a C compiler (cc)");
        assert!(
            built.status.success(),
            "compiling the ABI check:\n{}",
            String::from_utf8_lossy(&built.stderr)
        );
        let ran = std::process::Command::new(&program).output().unwrap();
        let stdout = String::from_utf8_lossy(&ran.stdout);
        assert!(
            ran.status.success() && stdout.starts_with("ABI OK (driver 13000, NCCL 22809)"),
            "{stdout}{}",
            String::from_utf8_lossy(&ran.stderr)
        );
        let _ = std::fs::remove_dir_all(out);
    }
}

#[cfg(hvd_have_cuda_headers)]
fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("hvd-gpu-double-abi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
