//! The public conformance suite over `Hierarchical`: shared memory within each host,
//! hosts simulated by the in-process reference transport's host layout (every rank a
//! thread). Across real hosts (network namespaces) it is tested through hvdrun in the
//! `hvd` crate.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hvd_core::conformance::{Options, run_threads};
use hvd_core::reference::LocalGroup;
use hvd_core::{MemoryStore, PrefixStore, Topology};
use hvd_hierarchical::Hierarchical;
use hvd_shm::{ShmCollective, ShmConfig};

/// The suite over a job whose rank `r` runs on host `hosts[r]`.
fn suite(hosts: &[u32], options: Options) {
    let size = hosts.len();
    let flats = LocalGroup::new(size)
        .hosts(hosts.to_vec())
        .timeout(Duration::from_secs(60))
        .build();
    let flats = Mutex::new(flats.into_iter().map(Some).collect::<Vec<_>>());
    let store = Arc::new(MemoryStore::new());
    let mut config = ShmConfig::default();
    config.job_id = format!("hier{}", std::process::id());
    run_threads(size, &options, |rank| {
        let flat = flats.lock().unwrap()[rank]
            .take()
            .expect("one flat group per rank");
        let topology = Topology::from_hosts(rank, hosts.to_vec());
        let host_store = PrefixStore::new(store.clone(), format!("host{}", hosts[rank]));
        let local = ShmCollective::connect(
            Arc::new(host_store),
            topology.local_rank(),
            topology.local_size(),
            config.clone(),
        )?;
        Hierarchical::new(flat, local)
    })
    .unwrap_or_else(|failure| panic!("hosts {hosts:?}: {failure}"));
}

#[test]
fn two_hosts_of_two_ranks() {
    suite(&[0, 0, 1, 1], Options::default());
}

#[test]
fn interleaved_hosts() {
    suite(&[0, 1, 0, 1, 0, 1], Options::quick());
}

#[test]
fn hosts_of_different_sizes_use_leaders() {
    suite(&[0, 0, 0, 1, 2, 2], Options::quick());
}

#[test]
fn one_host_and_one_rank() {
    suite(&[0, 0, 0], Options::quick());
    suite(&[0], Options::quick());
}

#[test]
fn four_hosts_of_two() {
    suite(&[0, 0, 1, 1, 2, 2, 3, 3], Options::quick());
}
