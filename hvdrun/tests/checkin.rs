//! A rank counts as connected once it reaches the launcher's rendezvous, however it goes
//! on: `hvd::init()`, or `World::from_env()` and a transport of its own (as the GPU
//! bundle's conformance check does). Before, only `hvd::init()` counted, and such a job
//! was stopped at its start timeout with every rank "still running".

use std::time::Duration;

use hvdrun::{Job, JobOutcome};

const RANK_ARGS: [&str; 5] = [
    "world_only_rank",
    "--exact",
    "--ignored",
    "--nocapture",
    "--test-threads=1",
];

#[test]
#[ignore = "one rank of a job launched by the other tests of this file"]
fn world_only_rank() {
    let world = hvd::World::from_env().unwrap();
    assert_eq!(world.launcher, "hvdrun");
    // Long past the start timeout below: only the check-in keeps the job alive.
    std::thread::sleep(Duration::from_secs(3));
}

#[test]
fn a_rank_that_only_reads_its_world_is_connected() {
    let job = Job::new(
        std::env::current_exe().unwrap(),
        RANK_ARGS.map(String::from).to_vec(),
        2,
    )
    .start_timeout(Duration::from_secs(1));
    assert_eq!(job.run().unwrap(), JobOutcome::Success);
}
