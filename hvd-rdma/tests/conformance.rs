//! The public conformance suite, with ranks as threads, over the `tcp;ofi_rxm` and `shm`
//! providers. Groups of more than 4 use the quick options to keep the run short on 2 cores.

use std::sync::Arc;

use hvd_core::MemoryStore;
use hvd_core::conformance::{Options, run_threads};
use hvd_rdma::{RdmaCollective, RdmaConfig};

fn suite(provider: &str, size: usize, options: Options) {
    let mut config = RdmaConfig::default();
    config.provider = Some(provider.into());
    suite_with(config, size, options);
}

fn suite_with(config: RdmaConfig, size: usize, options: Options) {
    let store = Arc::new(MemoryStore::new());
    let provider = config.provider.clone().unwrap_or_default();
    run_threads(size, &options, |rank| {
        RdmaCollective::connect(store.clone(), rank, size, config.clone())
    })
    .unwrap_or_else(|failure| panic!("{provider}, {size} ranks: {failure}"));
}

macro_rules! sizes {
    ($provider:literal: $($name:ident = $size:literal, $options:expr;)*) => {$(
        #[test]
        #[cfg_attr(not(have_libfabric), ignore = "needs libfabric: apt-get install libfabric1")]
        fn $name() {
            suite($provider, $size, $options);
        }
    )*};
}

sizes! { "tcp;ofi_rxm":
    tcp_one_rank = 1, Options::default();
    tcp_two_ranks = 2, Options::default();
    tcp_three_ranks = 3, Options::default();
    tcp_four_ranks = 4, Options::default();
    tcp_five_ranks = 5, Options::quick();
    tcp_six_ranks = 6, Options::quick();
    tcp_seven_ranks = 7, Options::quick();
    tcp_eight_ranks = 8, Options::quick();
}

sizes! { "shm":
    shm_one_rank = 1, Options::default();
    shm_two_ranks = 2, Options::default();
    shm_three_ranks = 3, Options::default();
    shm_four_ranks = 4, Options::default();
    shm_five_ranks = 5, Options::quick();
    shm_six_ranks = 6, Options::quick();
    shm_seven_ranks = 7, Options::quick();
    shm_eight_ranks = 8, Options::quick();
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
