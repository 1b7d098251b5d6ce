//! Diagnosing a host: what each transport is built on and what the machine offers it,
//! for `hvdrun --check` and for errors. The providers say; this file asks them.

use hvd_core::Result;

use super::Backend;

impl Backend {
    /// What the transport is built on, with the library's version where it has one;
    /// an error when its library cannot be found at run time.
    pub fn library(self) -> Result<String> {
        self.compiled_provider()?.library()
    }

    /// What this host offers the transport, in lines (`hvdrun --check` prints them);
    /// `None` when it has nothing to say beyond its library, or this build lacks it.
    pub fn report(self) -> Option<Vec<String>> {
        self.provider()?.report()
    }
}

/// What this host offers the RDMA transport, in lines: libfabric's providers and the
/// RDMA devices with their ports, or why there are none. `None` in a build without the
/// `rdma` feature. The same as `Backend::Rdma.report()`.
pub fn rdma_report() -> Option<Vec<String>> {
    Backend::Rdma.report()
}

/// What this host offers NCCL jobs: the NCCL and CUDA driver versions and the GPUs, or
/// why it cannot run one. `None` in a build without the `nccl` feature. The same as
/// `Backend::Nccl.report()`, as one line.
pub fn nccl_report() -> Option<String> {
    Backend::Nccl.report().map(|lines| lines.join("\n"))
}
