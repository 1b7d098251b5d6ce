//! The public conformance suite through the stack the runtime really runs its data
//! collectives through (`hvd::runtime::Stack`: `Timeline<Fusion<transport>>`, recording,
//! with a 4 KiB fusion threshold so that packs, several rounds of them and the too-large
//! path all run), over real transports, with every rank a process: TCP and shared memory
//! (which take a batch whole, scatter-gathering it) and, in builds that have them,
//! libfabric's tcp provider and MPI (where Fusion packs tensors into its buffer).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use hvd::core::conformance::{Options, run_rank};
use hvd_timeline::Recorder;
use hvdrun::{Job, JobOutcome};

const THRESHOLD: usize = 4 << 10;
const RANK_ARGS: [&str; 5] = [
    "stack_rank",
    "--exact",
    "--ignored",
    "--nocapture",
    "--test-threads=1",
];

#[test]
#[ignore = "one rank of a job launched by the other tests of this file"]
fn stack_rank() {
    let world = hvd::World::from_env().unwrap();
    let backend = hvd::Backend::from_env().unwrap();
    let transport = hvd::transport::connect(backend, &world).unwrap();
    let name = transport.backend();
    let recorder = Arc::new(Recorder::new());
    recorder.start();
    let stack = hvd::runtime::Stack::build(Arc::from(transport), THRESHOLD, &recorder);
    let report = run_rank(stack.collective(), &Options::quick())
        .unwrap_or_else(|failure| panic!("FAILED through the stack over {name}: {failure}"));
    let line = format!(
        "{name} passed {} recorded {}",
        report.passed.len(),
        recorder.pending() > 0
    );
    let out = std::env::var("HVD_TEST_OUT").unwrap();
    std::fs::write(Path::new(&out).join(format!("rank{}", world.rank)), line).unwrap();
}

/// Every rank's line: the transport, that checks passed, and that the Timeline recorded.
fn assert_reports(out: &Path, np: usize, backend: &str) {
    for rank in 0..np {
        let line = std::fs::read_to_string(out.join(format!("rank{rank}")))
            .unwrap_or_else(|e| panic!("{backend}: rank {rank} wrote no report: {e}"));
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(words.len(), 5, "{backend}, rank {rank}: {line}");
        assert_eq!(words[0], backend, "rank {rank}: {line}");
        assert!(
            words[2].parse::<usize>().unwrap() > 0,
            "rank {rank}: {line}"
        );
        assert_eq!(&words[3..], ["recorded", "true"], "rank {rank}: {line}");
    }
}

fn through_hvdrun(np: usize, backend: &str, vars: &[(&str, &str)]) {
    let out = tempfile::tempdir().unwrap();
    let mut job = Job::new(
        std::env::current_exe().unwrap(),
        RANK_ARGS.map(String::from).to_vec(),
        np,
    )
    .env("HVD_BACKEND", backend)
    .env("HVD_TEST_OUT", out.path().to_str().unwrap());
    for (name, value) in vars {
        job = job.env(*name, *value);
    }
    assert_eq!(job.run().unwrap(), JobOutcome::Success, "{backend}");
    assert_reports(out.path(), np, backend);
}

#[test]
fn over_tcp() {
    through_hvdrun(3, "tcp", &[]);
}

#[test]
fn over_shared_memory() {
    through_hvdrun(3, "shm", &[]);
}

#[cfg(feature = "rdma")]
#[test]
fn over_libfabric_tcp() {
    through_hvdrun(3, "rdma", &[("HVD_RDMA_PROVIDER", "tcp;ofi_rxm")]);
}

#[cfg(feature = "mpi")]
#[test]
#[cfg_attr(
    not(hvd_have_mpirun),
    ignore = "needs mpirun: apt-get install openmpi-bin"
)]
fn over_mpi() {
    let out = tempfile::tempdir().unwrap();
    let status = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "2"])
        .args(["-x", "HVD_BACKEND=mpi", "-x"])
        .arg(format!("HVD_TEST_OUT={}", out.path().display()))
        .arg(std::env::current_exe().unwrap())
        .args(RANK_ARGS)
        .env_remove("HVD_RANK")
        .env_remove("HVD_SIZE")
        .status()
        .unwrap();
    assert!(status.success(), "mpirun: {status}");
    assert_reports(out.path(), 2, "mpi");
}
