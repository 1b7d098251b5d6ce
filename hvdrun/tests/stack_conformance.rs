//! The public conformance suite through the stack the runtime really runs its data
//! collectives through (`hvd::runtime::Stack`: `Timeline<Fusion<transport>>`, recording,
//! with a 4 KiB fusion threshold), over real transports, with every rank a process.
//! TCP, shared memory and libfabric's tcp provider take a batch whole (they
//! scatter-gather it), so Fusion passes it through and the trace must show no copy; over
//! MPI (in builds that have it) Fusion packs tensors into its buffer, in several rounds,
//! and the trace must show it.

use std::path::Path;
use std::sync::Arc;

use hvd::core::conformance::{Options, run_rank};
use hvd_timeline::{TraceFile, flush};
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
    let recorder = Arc::new(hvd::runtime::Recorder::new());
    recorder.start();
    let stack = hvd::runtime::Stack::build(Arc::from(transport), THRESHOLD, &recorder);
    let report = run_rank(stack.collective(), &Options::quick())
        .unwrap_or_else(|failure| panic!("FAILED through the stack over {name}: {failure}"));
    recorder.stop();
    let recorded = recorder.pending() > 0;
    // Rank 0 writes the job's trace; the report counts the tensors Fusion packed.
    let out = std::env::var("HVD_TEST_OUT").unwrap();
    let trace = Path::new(&out).join("trace.json");
    let mut file = (world.rank == 0).then(|| TraceFile::create(&trace).unwrap());
    flush(&recorder, stack.collective(), file.as_mut()).unwrap();
    drop(file);
    let packed = match world.rank {
        0 => std::fs::read_to_string(&trace)
            .unwrap()
            .matches("MEMCPY_IN_FUSION_BUFFER")
            .count(),
        _ => 0,
    };
    let line = format!(
        "{name} passed {} recorded {recorded} packed {packed}",
        report.passed.len()
    );
    std::fs::write(Path::new(&out).join(format!("rank{}", world.rank)), line).unwrap();
}

/// Every rank's line: the transport, that checks passed, that the Timeline recorded;
/// and on rank 0, which read the trace, whether Fusion packed (`packs`) or not.
fn assert_reports(out: &Path, np: usize, backend: &str, packs: bool) {
    for rank in 0..np {
        let line = std::fs::read_to_string(out.join(format!("rank{rank}")))
            .unwrap_or_else(|e| panic!("{backend}: rank {rank} wrote no report: {e}"));
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(words.len(), 7, "{backend}, rank {rank}: {line}");
        assert_eq!(words[0], backend, "rank {rank}: {line}");
        assert!(
            words[2].parse::<usize>().unwrap() > 0,
            "rank {rank}: {line}"
        );
        assert_eq!(&words[3..5], ["recorded", "true"], "rank {rank}: {line}");
        if rank == 0 {
            let packed: usize = words[6].parse().unwrap();
            assert_eq!(packed > 0, packs, "{backend}: {line}");
        }
    }
}

fn through_hvdrun(np: usize, backend: &str, packs: bool, vars: &[(&str, &str)]) {
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
    assert_reports(out.path(), np, backend, packs);
}

#[test]
fn over_tcp() {
    through_hvdrun(3, "tcp", false, &[]);
}

#[test]
fn over_shared_memory() {
    through_hvdrun(3, "shm", false, &[]);
}

#[cfg(feature = "rdma")]
#[test]
fn over_libfabric_tcp() {
    through_hvdrun(3, "rdma", false, &[("HVD_RDMA_PROVIDER", "tcp;ofi_rxm")]);
}

#[cfg(feature = "mpi")]
#[test]
#[cfg_attr(
    not(hvd_have_mpirun),
    ignore = "needs mpirun: apt-get install openmpi-bin"
)]
fn over_mpi() {
    use std::process::Command;

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
    assert_reports(out.path(), 2, "mpi", true);
}
