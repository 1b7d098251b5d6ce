//! Ranks as processes (see `hvd_testkit::processes`): the conformance suite, and a rank
//! killed mid-call.

use std::time::Duration;

use hvd_core::Result;
use hvd_core::conformance::Options;
use hvd_gloo_tcp::{TcpCollective, TcpConfig};
use hvd_testkit::processes::ChildRank;
use hvd_testkit::{conformance, scenarios};

fn connect(child: &ChildRank) -> Result<TcpCollective> {
    let config = TcpConfig::from_env()?;
    TcpCollective::connect(child.store.clone(), child.rank, child.size, config)
}

#[test]
fn conformance_in_two_processes() {
    let test = "conformance_in_two_processes";
    conformance::in_processes(test, 2, Options::default(), &[], connect);
}

#[test]
fn conformance_in_four_processes() {
    let test = "conformance_in_four_processes";
    conformance::in_processes(test, 4, Options::quick(), &[], connect);
}

#[test]
fn a_killed_rank_is_named_by_every_survivor() {
    let test = "a_killed_rank_is_named_by_every_survivor";
    let Some(killed) = scenarios::kill_mid_call(test, 4, 2, &[], connect) else {
        return;
    };
    assert!(
        killed.noticed_within < Duration::from_secs(5),
        "the survivors took {:?} to notice",
        killed.noticed_within
    );
    for (rank, error) in killed.errors {
        let lost = format!("rank {rank}: lost rank 2 during allreduce of tensor 'big': ");
        assert!(error.starts_with(&lost), "rank {rank}: {error}");
    }
}
