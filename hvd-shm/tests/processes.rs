//! Ranks as processes (see `hvd_testkit::processes`): the conformance suite, and a rank
//! killed mid-call; neither leaves anything in `/dev/shm`.

mod common;

use std::time::Duration;

use hvd_core::Result;
use hvd_core::conformance::Options;
use hvd_shm::{ShmCollective, ShmConfig};
use hvd_testkit::processes::ChildRank;
use hvd_testkit::{conformance, scenarios};

fn connect(child: &ChildRank) -> Result<ShmCollective> {
    let config = ShmConfig::from_env()?;
    ShmCollective::connect(child.store.clone(), child.rank, child.size, config)
}

/// The job id of `test`, which its segments carry in their names.
fn job(test: &str) -> String {
    test.replace('_', "-")
}

fn conformance_in_processes(test: &str, size: usize, options: Options) {
    let job = job(test);
    conformance::in_processes(test, size, options, &[("HVD_JOB_ID", &job)], connect);
    common::assert_no_leftovers(&job);
}

#[test]
fn conformance_in_two_processes() {
    conformance_in_processes("conformance_in_two_processes", 2, Options::default());
}

#[test]
fn conformance_in_three_processes() {
    conformance_in_processes("conformance_in_three_processes", 3, Options::quick());
}

#[test]
fn conformance_in_four_processes() {
    conformance_in_processes("conformance_in_four_processes", 4, Options::quick());
}

#[test]
fn a_killed_rank_is_named_by_every_survivor() {
    let test = "a_killed_rank_is_named_by_every_survivor";
    let job = job(test);
    let env = [("HVD_JOB_ID", job.as_str())];
    let Some(killed) = scenarios::kill_mid_call(test, 4, 2, &env, connect) else {
        return;
    };
    assert!(
        killed.noticed_within < Duration::from_secs(2),
        "the survivors took {:?} to notice",
        killed.noticed_within
    );
    for (rank, error) in killed.errors {
        let direct =
            format!("rank {rank}: lost rank 2 during allreduce of tensor 'big': its process (pid ");
        let reported =
            format!("rank {rank}: lost rank 2 during allreduce of tensor 'big': reported by rank ");
        assert!(
            (error.starts_with(&direct) && error.ends_with(") exited"))
                || (error.starts_with(&reported) && error.ends_with(": its process exited")),
            "rank {rank}: {error}"
        );
    }
    common::assert_no_leftovers(&job);
}
