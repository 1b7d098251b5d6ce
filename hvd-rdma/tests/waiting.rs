//! How a rank waits: over a provider that moves data on sockets, a rank whose peer is
//! late blocks in the kernel after a short spin, leaving its core to the ranks that
//! share it, and still wakes as soon as the peer's data comes.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use hvd_core::{Collective, MemoryStore, ReduceOp, Reduction, Result, TensorMut};
use hvd_rdma::{RdmaCollective, RdmaConfig};

/// How late the second rank joins the allreduce.
const LATE: Duration = Duration::from_millis(400);

/// CPU time this thread has used, and how many times it has gone to sleep (voluntary
/// context switches).
fn thread_usage() -> (Duration, i64) {
    // SAFETY: plain data, for which zero is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid rusage for the calling thread.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (time(usage.ru_utime) + time(usage.ru_stime), usage.ru_nvcsw)
}

#[test]
#[cfg_attr(
    not(have_libfabric),
    ignore = "needs libfabric: apt-get install libfabric1"
)]
fn a_rank_waiting_over_tcp_blocks_instead_of_burning_its_core() -> Result<()> {
    let store = Arc::new(MemoryStore::new());
    let mut config = RdmaConfig::default();
    config.provider = Some("tcp;ofi_rxm".into());
    let ranks: Vec<_> = (0..2)
        .map(|rank| {
            let (store, config) = (store.clone(), config.clone());
            thread::spawn(move || -> Result<(Vec<f32>, Duration, Duration, i64)> {
                let group = RdmaCollective::connect(store, rank, 2, config)?;
                group.barrier()?;
                if rank == 1 {
                    thread::sleep(LATE);
                }
                let mut values = vec![rank as f32 + 1.0; 1024];
                let (started, (cpu, sleeps)) = (Instant::now(), thread_usage());
                group.allreduce(
                    &mut [TensorMut::from_slice("late", &mut values)],
                    Reduction::new(ReduceOp::Sum),
                )?;
                let (cpu_after, sleeps_after) = thread_usage();
                Ok((
                    values,
                    started.elapsed(),
                    cpu_after - cpu,
                    sleeps_after - sleeps,
                ))
            })
        })
        .collect();
    let results: Vec<_> = ranks
        .into_iter()
        .map(|h| h.join().unwrap_or_else(|_| panic!("a rank panicked")))
        .collect::<Result<_>>()?;
    let (values, waited, cpu, slept) = &results[0];
    assert!(values.iter().all(|v| *v == 3.0), "{:?}", &values[..4]);
    assert!(*waited >= LATE / 2, "rank 0 waited only {waited:?}");
    // Napping between polls sleeps thousands of times, each wake-up costing CPU; a rank
    // blocked on the descriptor sleeps once per 10 ms at most, and costs the spin.
    assert!(
        *slept < 200,
        "rank 0 slept {slept} times while waiting {waited:?} for its peer"
    );
    assert!(
        *cpu < *waited / 10,
        "rank 0 used {cpu:?} of CPU while waiting {waited:?} for its peer"
    );
    Ok(())
}
