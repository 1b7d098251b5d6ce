//! Failures with ranks as threads: what every surviving rank is told.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use hvd_core::{Collective, MemoryStore, Store, TensorMut};
use hvd_gloo_tcp::{TcpCollective, TcpConfig};
use hvd_testkit::{scenarios, threads};

fn config(start_timeout: Duration) -> TcpConfig {
    let mut config = TcpConfig::default();
    config.start_timeout = start_timeout;
    config
}

/// Connects `size` ranks, rank `r` with `configs(r)`, each in its own thread, and returns
/// what each one's `connect` returned, as text.
fn connect_all(
    size: usize,
    configs: impl Fn(usize) -> TcpConfig + Sync,
) -> Vec<Result<TcpCollective, String>> {
    threads::connect_all(size, |store, rank| {
        TcpCollective::connect(store, rank, size, configs(rank))
    })
    .into_iter()
    .map(|r| r.map_err(|e| e.to_string()))
    .collect()
}

#[test]
fn a_rank_that_never_starts_is_named_by_the_others() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let started = Instant::now();
    let handles: Vec<_> = (0..2)
        .map(|rank| {
            let store = store.clone();
            thread::spawn(move || {
                TcpCollective::connect(store, rank, 3, config(Duration::from_secs(1)))
                    .unwrap_err()
                    .to_string()
            })
        })
        .collect();
    for (rank, handle) in handles.into_iter().enumerate() {
        assert_eq!(
            handle.join().unwrap(),
            format!(
                "rank {rank}: connect of tensor 'rendezvous' timed out after 1s waiting for rank 2 to appear: never published an endpoint under 'tcp/addr/2' (not started, crashed, or given another store?)"
            )
        );
    }
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_rank_with_another_secret_is_refused() {
    let results = connect_all(2, |rank| {
        let mut config = config(Duration::from_secs(2));
        config.secret = if rank == 1 {
            b"wrong".to_vec()
        } else {
            b"right".to_vec()
        };
        config
    });
    let rank0 = results[0].as_ref().unwrap_err();
    assert_eq!(
        rank0,
        "rank 0: connect of tensor 'rendezvous' timed out after 2s waiting for rank 1 to connect: they published endpoints but completed no handshake with this rank (another HVD_SECRET or HVD_JOB_ID, or a network that drops connections to 0?)"
    );
    let rank1 = results[1].as_ref().unwrap_err();
    let expected_end = "handshake failed: it could not prove that it holds the shared secret (HVD_SECRET differs between ranks)";
    assert!(
        rank1.starts_with("rank 1: protocol error from rank 0 (127.0.0.1:")
            && rank1.ends_with(expected_end),
        "{rank1}"
    );
}

#[test]
fn a_rank_of_another_job_is_refused() {
    let results = connect_all(2, |rank| {
        let mut config = config(Duration::from_secs(2));
        config.job_id = format!("job-{}", rank.min(1));
        config
    });
    let rank1 = results[1].as_ref().unwrap_err();
    assert!(
        rank1.ends_with("handshake failed: it closed the connection before its greeting (it refuses callers of another job, group size or protocol version)"),
        "{rank1}"
    );
    assert!(
        results[0]
            .as_ref()
            .unwrap_err()
            .contains("waiting for rank 1 to connect")
    );
}

#[test]
fn a_peer_that_leaves_mid_call_is_named_by_every_rank_even_far_ones() {
    let groups: Vec<TcpCollective> = connect_all(4, |_| TcpConfig::default())
        .into_iter()
        .map(Result::unwrap)
        .collect();
    for survivor in scenarios::leave_mid_call(groups, 2) {
        let (rank, first) = (survivor.rank, &survivor.error);
        let prefix = format!("rank {rank}: lost rank 2 during allreduce of tensor 'big': ");
        assert!(first.starts_with(&prefix), "{first}");
        assert!(
            survivor.took < Duration::from_secs(5),
            "rank {rank} took {:?}",
            survivor.took
        );
        if rank == 0 {
            // Rank 0 exchanges nothing with rank 2 in a ring of 4: it hears from the others.
            assert!(
                first.starts_with(&format!("{prefix}reported by rank ")),
                "{first}"
            );
        }
    }
}

/// Rank 0 of a pair whose rank 1 never calls waits for rank 1's broadcast, polling for
/// `busy_poll`, under a 300 ms timeout: the error, and how long it took.
fn broadcast_from_a_silent_peer(busy_poll: Option<Duration>) -> (String, Duration) {
    let groups: Vec<TcpCollective> = connect_all(2, |_| {
        let mut config = TcpConfig::default();
        config.op_timeout = Duration::from_millis(300);
        config.busy_poll = busy_poll;
        config
    })
    .into_iter()
    .map(Result::unwrap)
    .collect();
    let mut x = vec![0u8; 100];
    let started = std::time::Instant::now();
    let err = groups[0]
        .broadcast(&mut [TensorMut::from_slice("w", &mut x)], 1)
        .unwrap_err();
    (err.to_string(), started.elapsed())
}

const SILENT_PEER: &str = "rank 0: broadcast of tensor 'w' timed out after 300ms waiting for rank 1 (frame 0 from rank 1 has not arrived)";

#[test]
fn a_silent_peer_times_out_naming_it() {
    assert_eq!(broadcast_from_a_silent_peer(None).0, SILENT_PEER);
}

#[test]
fn a_poll_longer_than_the_timeout_still_times_out() {
    // Poll "forever", as HVD_TCP_BUSY_POLL=1h does on a busy host.
    let (err, took) = broadcast_from_a_silent_peer(Some(Duration::from_secs(3600)));
    assert_eq!(err, SILENT_PEER);
    assert!(took < Duration::from_secs(60), "{took:?}");
}
