//! The transports compiled into this build, one line each: the only place that names
//! them. Their order is the order of preference among those that claim a job that names
//! none (MPI before shared memory), and the first host one is the fallback.

use hvd_core::provider::Provider;

static PROVIDERS: &[&dyn Provider] = &[
    #[cfg(feature = "gloo-tcp")]
    &hvd_gloo_tcp::TcpProvider,
    #[cfg(feature = "mpi")]
    &hvd_mpi::MpiProvider,
    #[cfg(feature = "shm")]
    &hvd_shm::ShmProvider,
    #[cfg(feature = "rdma")]
    &hvd_rdma::RdmaProvider,
    #[cfg(feature = "nccl")]
    &hvd_nccl::NcclProvider,
];

/// Every transport compiled in, in order of preference.
pub(super) fn providers() -> &'static [&'static dyn Provider] {
    PROVIDERS
}
