//! Failures with ranks as threads: a rank that never publishes its address, a silent
//! peer, a provider that does not exist. Each asserts the text every rank gets.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use hvd_core::{Collective, MemoryStore, ReduceOp, Reduction, Result, Store, TensorMut};
use hvd_rdma::{RdmaCollective, RdmaConfig};

fn config(provider: &str) -> RdmaConfig {
    let mut config = RdmaConfig::default();
    config.provider = Some(provider.into());
    config.start_timeout = Duration::from_secs(1);
    config.op_timeout = Duration::from_secs(1);
    config
}

/// Connects `ranks` of a group of `size`, each in a thread, and returns their results.
fn connect(
    ranks: &[usize],
    size: usize,
    config: &RdmaConfig,
    store: &Arc<MemoryStore>,
) -> Vec<Result<RdmaCollective>> {
    let handles: Vec<_> = ranks
        .iter()
        .map(|rank| {
            let (store, config, rank) = (store.clone(), config.clone(), *rank);
            thread::spawn(move || RdmaCollective::connect(store, rank, size, config))
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().unwrap_or_else(|_| panic!("a rank panicked")))
        .collect()
}

#[test]
#[cfg_attr(
    not(have_libfabric),
    ignore = "needs libfabric: apt-get install libfabric1"
)]
fn a_rank_that_never_publishes_its_address_is_named_by_the_others() {
    let store = Arc::new(MemoryStore::new());
    let started = Instant::now();
    let results = connect(&[0, 1], 3, &config("tcp;ofi_rxm"), &store);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    for (rank, result) in results.into_iter().enumerate() {
        let error = result.map(|_| ()).map_err(|e| e.to_string());
        assert_eq!(
            error,
            Err(format!(
                "rank {rank}: connect of tensor 'rendezvous' timed out after 1s waiting for rank 2 to publish its libfabric address under 'rdma/addr/<rank>'"
            ))
        );
    }
}

#[test]
#[cfg_attr(
    not(have_libfabric),
    ignore = "needs libfabric: apt-get install libfabric1"
)]
fn a_silent_peer_times_out_naming_it_and_the_provider() {
    let store = Arc::new(MemoryStore::new());
    let mut groups = connect(&[0, 1], 2, &config("shm"), &store).into_iter();
    let (Some(Ok(rank0)), Some(Ok(_silent))) = (groups.next(), groups.next()) else {
        panic!("the group did not form");
    };
    let mut values = vec![1.0f32; 16];
    let first = rank0.allreduce(
        &mut [TensorMut::from_slice("grad", &mut values)],
        Reduction::new(ReduceOp::Sum),
    );
    let error = first.map_err(|e| e.to_string()).err().unwrap_or_default();
    assert!(
        error.starts_with(
            "rank 0: allreduce of tensor 'grad' timed out after 1s waiting for rank 1 ("
        ) && error.ends_with(") over libfabric provider shm"),
        "{error}"
    );
    let again = rank0.barrier().map_err(|e| e.to_string());
    assert_eq!(again, Err(error), "a failed group stays failed");
}

#[test]
#[cfg_attr(
    not(have_libfabric),
    ignore = "needs libfabric: apt-get install libfabric1"
)]
fn a_provider_libfabric_lacks_is_named() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let error = RdmaCollective::connect(store, 0, 1, config("no-such-provider"))
        .map(|_| ())
        .map_err(|e| e.to_string());
    let text = error.err().unwrap_or_default();
    assert!(
        text.starts_with(
            "rdma transport does not support provider 'no-such-provider': libfabric (libfabric.so.1) offers it for no reliable tagged endpoint here"
        ),
        "{text}"
    );
}

#[test]
#[cfg_attr(
    not(have_libfabric),
    ignore = "needs libfabric: apt-get install libfabric1"
)]
fn providers_include_tcp_and_shm() -> Result<()> {
    let names: Vec<String> = hvd_rdma::providers()?.into_iter().map(|p| p.name).collect();
    assert!(names.iter().any(|n| n == "tcp;ofi_rxm"), "{names:?}");
    assert!(names.iter().any(|n| n == "shm"), "{names:?}");
    Ok(())
}
