//! Without NCCL or the CUDA driver to load, the transport's entry points are errors
//! naming what was tried and how to install it, never a panic.

use hvd_nccl::{CudaMemory, NcclConfig};

#[test]
fn a_missing_nccl_is_an_error_naming_the_library_and_how_to_get_it() {
    let config = NcclConfig::default().with_libraries("libhvd-no-such-nccl.so.2", "libcuda.so.1");
    let text = hvd_nccl::version(&config).unwrap_err().to_string();
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

#[test]
fn a_missing_cuda_driver_is_an_error_naming_it_and_the_driver_to_install() {
    let config = NcclConfig::default().with_libraries("libnccl.so.2", "libhvd-no-such-cuda.so.1");
    let text = CudaMemory::new(&config, 0, 0).unwrap_err().to_string();
    assert!(
        text.starts_with(
            "the CUDA driver (libhvd-no-such-cuda.so.1) is not available: install the NVIDIA \
             driver (libcuda.so.1 comes with it), or set HVD_CUDA_LIBRARY to its path"
        ),
        "{text}"
    );
}
