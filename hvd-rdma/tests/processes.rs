//! Ranks as processes (see `hvd_testkit::processes`), over the `tcp;ofi_rxm` and `shm`
//! providers: the conformance suite, and a rank killed mid-call.

use std::time::Duration;

use hvd_core::Result;
use hvd_core::conformance::Options;
use hvd_rdma::{RdmaCollective, RdmaConfig};
use hvd_testkit::processes::ChildRank;
use hvd_testkit::{conformance, scenarios};

fn connect(child: &ChildRank) -> Result<RdmaCollective> {
    let config = RdmaConfig::from_env()?;
    RdmaCollective::connect(child.store.clone(), child.rank, child.size, config)
}

fn conformance_in_processes(test: &str, provider: &str, size: usize, options: Options) {
    let env = [("HVD_RDMA_PROVIDER", provider)];
    conformance::in_processes(test, size, options, &env, connect);
}

#[test]
#[cfg_attr(
    not(have_libfabric),
    ignore = "needs libfabric: apt-get install libfabric1"
)]
fn conformance_in_two_processes_over_tcp() {
    let test = "conformance_in_two_processes_over_tcp";
    conformance_in_processes(test, "tcp;ofi_rxm", 2, Options::default());
}

#[test]
#[cfg_attr(
    not(have_libfabric),
    ignore = "needs libfabric: apt-get install libfabric1"
)]
fn conformance_in_three_processes_over_tcp() {
    let test = "conformance_in_three_processes_over_tcp";
    conformance_in_processes(test, "tcp;ofi_rxm", 3, Options::quick());
}

#[test]
#[cfg_attr(
    not(have_libfabric),
    ignore = "needs libfabric: apt-get install libfabric1"
)]
fn conformance_in_three_processes_over_shm() {
    let test = "conformance_in_three_processes_over_shm";
    conformance_in_processes(test, "shm", 3, Options::quick());
}

/// Rank 2 of 4 is killed mid-allreduce: every survivor must fail within the call
/// timeout naming rank 2 and the provider.
fn a_killed_rank_is_named_by_every_survivor(test: &str, provider: &str) {
    let env = [("HVD_RDMA_PROVIDER", provider), ("HVD_RDMA_TIMEOUT", "3")];
    let Some(killed) = scenarios::kill_mid_call(test, 4, 2, &env, connect) else {
        return;
    };
    assert!(
        killed.noticed_within < Duration::from_secs(8),
        "the survivors took {:?} to notice",
        killed.noticed_within
    );
    for (rank, error) in killed.errors {
        let lost = format!("rank {rank}: lost rank 2 during allreduce of tensor 'big': ");
        let silent = format!(
            "rank {rank}: allreduce of tensor 'big' timed out after 3s waiting for rank 2 "
        );
        assert!(
            (error.starts_with(&lost) || error.starts_with(&silent)) && error.contains(provider),
            "rank {rank}: {error}"
        );
    }
}

#[test]
#[cfg_attr(
    not(have_libfabric),
    ignore = "needs libfabric: apt-get install libfabric1"
)]
fn a_killed_rank_is_named_by_every_survivor_over_tcp() {
    let test = "a_killed_rank_is_named_by_every_survivor_over_tcp";
    a_killed_rank_is_named_by_every_survivor(test, "tcp;ofi_rxm");
}

#[test]
#[ignore = "libfabric's shm provider can leave a survivor spinning inside fi_tsendv on a lock the killed rank held (see the crate docs); run with --ignored to see it"]
fn a_killed_rank_is_named_by_every_survivor_over_shm() {
    let test = "a_killed_rank_is_named_by_every_survivor_over_shm";
    a_killed_rank_is_named_by_every_survivor(test, "shm");
}
