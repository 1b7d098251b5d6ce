//! With no NCCL to load (the override names a library that is not there), the version
//! call is an error naming what was tried and how to install NCCL. A test binary of its
//! own: the library is loaded once per process.

#[test]
fn a_missing_nccl_is_an_error_naming_the_library_and_how_to_get_it() {
    // SAFETY: the only thread of this test binary that reads the environment.
    unsafe { std::env::set_var(hvd_nccl::LIBRARY_VAR, "libhvd-no-such-nccl.so.2") };
    let text = hvd_nccl::version().unwrap_err().to_string();
    assert!(
        text.starts_with("NCCL (libhvd-no-such-nccl.so.2) is not available"),
        "{text}"
    );
    assert!(text.contains("pip install nvidia-nccl-cu12"), "{text}");
    assert!(
        text.contains("libhvd-no-such-nccl.so.2: cannot open shared object file"),
        "{text}"
    );
}
