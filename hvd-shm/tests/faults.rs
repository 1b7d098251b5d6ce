//! Failures with ranks as threads: what every rank is told, and that nothing is left in
//! `/dev/shm` afterwards.

mod common;

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use hvd_core::{Collective, MemoryStore, ReduceOp, Reduction, Store, Tensor, TensorMut};
use hvd_shm::{ShmCollective, ShmConfig};
use hvd_testkit::{scenarios, threads};

/// Connects `size` ranks of `job`, each in its own thread, with `config` changed by
/// `adjust`, and returns the groups.
fn connect_all(job: &str, size: usize, adjust: impl Fn(&mut ShmConfig)) -> Vec<ShmCollective> {
    let mut config = common::config(job);
    adjust(&mut config);
    threads::connect_all(size, |store, rank| {
        ShmCollective::connect(store, rank, size, config.clone())
    })
    .into_iter()
    .map(|group| group.unwrap_or_else(|e| panic!("{job}: {e}")))
    .collect()
}

#[test]
fn a_rank_that_never_attaches_is_named_by_the_others() {
    let job = "never-attaches";
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut config = common::config(job);
    config.start_timeout = Duration::from_secs(1);
    let started = Instant::now();
    let handles: Vec<_> = (0..2)
        .map(|rank| {
            let (store, config) = (store.clone(), config.clone());
            thread::spawn(move || {
                ShmCollective::connect(store, rank, 3, config)
                    .unwrap_err()
                    .to_string()
            })
        })
        .collect();
    for (rank, handle) in handles.into_iter().enumerate() {
        let error = handle.join().unwrap();
        let start = format!(
            "rank {rank}: connect of tensor 'rendezvous' timed out after 1s waiting for rank 2 to attach to shared-memory segment '/dev/shm/hvd-shm-{job}-"
        );
        assert!(
            error.starts_with(&start)
                && error.ends_with("' (not started, crashed, or given another store?)"),
            "{error}"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    common::assert_no_leftovers(job);
}

#[test]
fn a_missing_rank_0_is_named_by_the_others() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut config = common::config("no-rank-0");
    config.start_timeout = Duration::from_millis(300);
    let error = ShmCollective::connect(store, 1, 2, config).unwrap_err();
    assert_eq!(
        error.to_string(),
        "rank 1: connect of tensor 'rendezvous' timed out after 300ms waiting for rank 0 to create the shared-memory segment: it never published 'shm/segment' in the store (not started, crashed, or given another store?)"
    );
}

/// A crashed job left a segment file and its record in the store: a rank told about it
/// refuses the file instead of reading it, and once the start timeout has passed without
/// a record of a live group, says why.
#[test]
fn a_stale_segment_is_refused_with_the_reason() {
    let job = "stale";
    let name = format!("hvd-shm-{job}-{:016x}", std::process::id());
    let path = std::path::Path::new("/dev/shm").join(&name);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    store
        .set("shm/segment", format!("{name} 1 4096").as_bytes())
        .unwrap();
    let mut config = common::config(job);
    config.start_timeout = Duration::from_millis(300);
    let connect = || {
        ShmCollective::connect(store.clone(), 1, 2, config.clone())
            .unwrap_err()
            .to_string()
    };
    std::fs::write(&path, b"garbage left").unwrap();
    let short = connect();
    // A file of the right size, but whose header is someone else's.
    std::fs::write(&path, vec![0x5au8; 4096 * 5]).unwrap();
    let foreign = connect();
    // Another job of the same name runs beside the leftover: its segment is its own.
    let groups = connect_all(job, 2, |_| ());
    thread::scope(|scope| {
        for group in &groups {
            scope.spawn(|| group.barrier().unwrap());
        }
    });
    drop(groups);
    assert_eq!(common::leftovers(job), vec![name.clone()]);
    std::fs::remove_file(&path).unwrap();
    let gone = connect();
    let start = format!(
        "rank 1: protocol error from rank 0: cannot attach to shared-memory segment '/dev/shm/{name}': "
    );
    assert_eq!(
        short,
        format!(
            "{start}it is not this group's segment: it holds 12 bytes where this group needs 20480"
        )
    );
    assert!(
        foreign.starts_with(&format!(
            "{start}it is not this group's segment: its header (magic, token, ranks, slot bytes) is"
        )),
        "{foreign}"
    );
    assert_eq!(
        gone,
        format!(
            "{start}it does not exist on this host (rank 0 runs on another host or gave up, or the store holds an earlier job's record)"
        )
    );
    common::assert_no_leftovers(job);
}

#[test]
fn a_peer_that_leaves_mid_call_is_named_by_every_rank() {
    let job = "leaves";
    let groups = connect_all(job, 4, |_| ());
    common::assert_no_leftovers(job);
    for survivor in scenarios::leave_mid_call(groups, 2) {
        let (rank, first) = (survivor.rank, &survivor.error);
        let prefix = format!("rank {rank}: lost rank 2 during allreduce of tensor 'big': ");
        assert!(
            *first == format!("{prefix}it left the group (its collective was dropped)")
                || (first.starts_with(&format!("{prefix}reported by rank "))
                    && first.ends_with(": it left the group (its collective was dropped)")),
            "{first}"
        );
        assert!(
            survivor.took < Duration::from_secs(2),
            "rank {rank} took {:?}",
            survivor.took
        );
    }
}

#[test]
fn a_silent_peer_times_out_naming_the_rank_behind() {
    let groups = connect_all("silent", 2, |config| {
        config.op_timeout = Duration::from_millis(300);
    });
    let mut x = vec![0u8; 100];
    let err = groups[0]
        .broadcast(&mut [TensorMut::from_slice("w", &mut x)], 1)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "rank 0: broadcast of tensor 'w' timed out after 300ms waiting for rank 1 (its step counter is behind: at 0, this rank waits for 1)"
    );
    let mut y = vec![0u8; 100];
    let err = groups[1]
        .broadcast(&mut [TensorMut::from_slice("w", &mut y)], 1)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "hvd is shut down: rank 0 gave up on this rank (1) during broadcast of tensor 'w': it published no step within the operation timeout"
    );
}

/// Ranks that pass different sizes or roots all get an error naming both ranks, and the
/// group still works afterwards.
/// `body` on every rank of `groups` at once, each in a thread; then a small allreduce on
/// each, which must still work. Every rank's result, in rank order.
fn then_the_group_goes_on<T: Send>(
    groups: &[ShmCollective],
    body: impl Fn(usize, &ShmCollective) -> T + Sync,
) -> Vec<T> {
    thread::scope(|scope| {
        let handles: Vec<_> = groups
            .iter()
            .enumerate()
            .map(|(rank, group)| {
                let body = &body;
                scope.spawn(move || {
                    let outcome = body(rank, group);
                    let mut one = [1i32];
                    group
                        .allreduce(
                            &mut [TensorMut::from_slice("one", &mut one)],
                            Reduction::new(ReduceOp::Sum),
                        )
                        .unwrap();
                    assert_eq!(one[0], groups.len() as i32, "rank {rank}");
                    outcome
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn mismatched_calls_are_named_on_every_rank_and_the_group_goes_on() {
    let groups = connect_all("mismatch", 2, |_| ());
    let outcomes = then_the_group_goes_on(&groups, |rank, group| {
        let mut x = vec![1.0f32; 10 * (rank + 1)];
        let sizes = group
            .allreduce(
                &mut [TensorMut::from_slice("x", &mut x)],
                Reduction::new(ReduceOp::Sum),
            )
            .unwrap_err()
            .to_string();
        let mut w = vec![0u8; 4];
        let roots = group
            .broadcast(&mut [TensorMut::from_slice("w", &mut w)], rank)
            .unwrap_err()
            .to_string();
        (sizes, roots)
    });
    assert_eq!(
        outcomes,
        [
            (
                "Mismatched sizes in bytes for tensor 'x': rank 0 has 40, rank 1 has 80".to_string(),
                "Mismatched operations for tensor 'w': rank 0 has broadcast from root 0, rank 1 has broadcast from root 1".to_string(),
            ),
            (
                "Mismatched sizes in bytes for tensor 'x': rank 1 has 80, rank 0 has 40".to_string(),
                "Mismatched operations for tensor 'w': rank 1 has broadcast from root 1, rank 0 has broadcast from root 0".to_string(),
            ),
        ]
    );
}

#[test]
fn alltoall_splits_that_disagree_are_named_on_every_rank_and_the_group_goes_on() {
    let groups = connect_all("splits", 2, |_| ());
    let outcomes = then_the_group_goes_on(&groups, |rank, group| {
        // Rank 0 sends rank 1 four bytes; rank 1 expects six.
        let recv = if rank == 1 { [6, 4] } else { [4, 4] };
        let input = vec![rank as u8; 8];
        let mut output = vec![0u8; recv.iter().sum()];
        group
            .alltoall(
                &Tensor::from_slice("a2a", &input),
                &[4, 4],
                &mut TensorMut::from_slice("a2a", &mut output),
                &recv,
            )
            .unwrap_err()
            .to_string()
    });
    let named = "Mismatched alltoall splits for tensor 'a2a': rank 0 has 4 bytes for rank 1, rank 1 has room for 6 bytes from rank 0";
    assert_eq!(outcomes, [named, named]);
}

/// A crashed job's record and segment are in the store when a new job starts in it: the
/// ranks that read the stale record wait for rank 0's, and the job works.
#[test]
fn a_new_job_works_over_a_stale_record_and_segment() {
    let job = "stale-then-new";
    let name = format!("hvd-shm-{job}-{:016x}", std::process::id());
    let path = std::path::Path::new("/dev/shm").join(&name);
    std::fs::write(&path, vec![0x5au8; 4096 * 5]).unwrap();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    store
        .set("shm/segment", format!("{name} 1 4096").as_bytes())
        .unwrap();
    let config = common::config(job);
    let handles: Vec<_> = (0..3)
        .map(|rank| {
            let (store, config) = (store.clone(), config.clone());
            thread::spawn(move || {
                if rank == 0 {
                    thread::sleep(Duration::from_millis(200));
                }
                let group = ShmCollective::connect(store, rank, 3, config)?;
                let mut x = [rank as i32 + 1];
                group.allreduce(
                    &mut [TensorMut::from_slice("x", &mut x)],
                    Reduction::new(ReduceOp::Sum),
                )?;
                Ok::<i32, hvd_core::Error>(x[0])
            })
        })
        .collect();
    for handle in handles {
        assert_eq!(handle.join().unwrap().unwrap(), 6);
    }
    assert_eq!(common::leftovers(job), vec![name]);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(store.try_get("shm/segment").unwrap(), None);
}
