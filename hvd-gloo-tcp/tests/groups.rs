//! Groups beyond the conformance suite: sub-groups used from several threads at once, and
//! an explicit interface.

use std::sync::Arc;
use std::thread;

use hvd_core::{Collective, MemoryStore, ReduceOp, Reduction, Store, TensorMut};
use hvd_gloo_tcp::{TcpCollective, TcpConfig};
use hvd_testkit::threads;

fn connect_all(size: usize, config: TcpConfig) -> Vec<hvd_core::Result<TcpCollective>> {
    threads::connect_all(size, |store, rank| {
        TcpCollective::connect(store, rank, size, config.clone())
    })
}

fn sum_of(group: &dyn Collective, value: i64) -> i64 {
    let mut x = [value];
    group
        .allreduce(
            &mut [TensorMut::from_slice("x", &mut x)],
            Reduction::new(ReduceOp::Sum),
        )
        .unwrap();
    x[0]
}

#[test]
fn a_parent_and_its_sub_group_run_calls_from_different_threads_at_once() {
    let groups: Vec<TcpCollective> = connect_all(3, TcpConfig::default())
        .into_iter()
        .map(Result::unwrap)
        .collect();
    thread::scope(|scope| {
        for (rank, parent) in groups.iter().enumerate() {
            scope.spawn(move || {
                let sub = parent.split(&[2, 0]).unwrap();
                thread::scope(|inner| {
                    inner.spawn(|| {
                        for _ in 0..200 {
                            assert_eq!(sum_of(parent, 1), 3);
                        }
                    });
                    if let Some(sub) = &sub {
                        inner.spawn(|| {
                            for _ in 0..200 {
                                assert_eq!(sum_of(sub.as_ref(), 10), 20);
                            }
                        });
                    }
                });
                assert_eq!(sub.is_some(), rank != 1);
            });
        }
    });
}

#[test]
fn an_explicit_interface_is_used_for_listening_and_dialing() {
    let mut config = TcpConfig::default();
    config.interface = Some("lo".into());
    let groups: Vec<TcpCollective> = connect_all(2, config)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let sums: Vec<i64> = thread::scope(|scope| {
        let handles: Vec<_> = groups
            .iter()
            .map(|g| scope.spawn(move || sum_of(g, 5)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(sums, [10, 10]);
}

#[test]
fn an_interface_that_does_not_exist_is_a_config_error() {
    let mut config = TcpConfig::default();
    config.interface = Some("nope0".into());
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let err = TcpCollective::connect(store, 0, 2, config)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("invalid value \"nope0\" for HVD_IFACE: expected the name of an interface that is up and has an IP address on this host (here: lo"),
        "{err}"
    );
}

#[test]
fn a_rank_outside_the_group_is_a_config_error() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let err = TcpCollective::connect(store, 2, 2, TcpConfig::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid value \"2\" for rank: expected a rank below the group size 2"
    );
}
