//! The public conformance suite, with ranks as threads, over the `tcp;ofi_rxm` and `shm`
//! providers. Groups of more than 4 use the quick options to keep the run short on 2 cores.

use std::sync::Arc;

use hvd_core::MemoryStore;
use hvd_core::conformance::{Options, run_threads};
use hvd_rdma::{RdmaCollective, RdmaConfig};

fn suite(provider: &str, size: usize) {
    let mut config = RdmaConfig::default();
    config.provider = Some(provider.into());
    suite_with(config, size, hvd_testkit::conformance::options_for(size));
}

fn suite_with(config: RdmaConfig, size: usize, options: Options) {
    let store = Arc::new(MemoryStore::new());
    let provider = config.provider.clone().unwrap_or_default();
    run_threads(size, &options, |rank| {
        RdmaCollective::connect(store.clone(), rank, size, config.clone())
    })
    .unwrap_or_else(|failure| panic!("{provider}, {size} ranks: {failure}"));
}

mod tcp {
    hvd_testkit::conformance_by_size!(
        |size| super::suite("tcp;ofi_rxm", size),
        #[cfg_attr(not(have_libfabric), ignore = "needs libfabric: apt-get install libfabric1")]
    );
}

mod shm {
    hvd_testkit::conformance_by_size!(
        |size| super::suite("shm", size),
        #[cfg_attr(not(have_libfabric), ignore = "needs libfabric: apt-get install libfabric1")]
    );
}

/// The path of providers that need registered memory (verbs, EFA), on those that do not.
fn registered(provider: &str, size: usize) {
    let mut config = RdmaConfig::default();
    config.provider = Some(provider.into());
    config.register_memory = true;
    suite_with(config, size, Options::quick());
}

#[test]
#[cfg_attr(
    not(have_libfabric),
    ignore = "needs libfabric: apt-get install libfabric1"
)]
fn tcp_three_ranks_in_registered_memory() {
    registered("tcp;ofi_rxm", 3);
}

#[test]
#[cfg_attr(
    not(have_libfabric),
    ignore = "needs libfabric: apt-get install libfabric1"
)]
fn shm_three_ranks_in_registered_memory() {
    registered("shm", 3);
}
