//! What a job sees when its ranks disagree: an error naming the rank, the operation and
//! the tensor, never a silent hang.
#![cfg(feature = "mpi")]

mod mpirun;

use std::time::Duration;

use hvd_core::{Collective, ReduceOp, Reduction, TensorMut};
use hvd_mpi::{MpiCollective, MpiConfig};

#[test]
fn a_call_no_other_rank_makes_ends_the_job_naming_it() {
    if mpirun::rank_body() {
        // Rank 0 allreduces while rank 1 waits in a barrier: neither call can complete.
        // The rank (from Open MPI's or MPICH's variables) picks the timeout, which is set
        // before the group exists.
        let timeout = if mpirun::is_rank_0() {
            Duration::from_secs(2)
        } else {
            Duration::from_secs(60)
        };
        let group = MpiCollective::world(MpiConfig::default().with_timeout(timeout)).unwrap();
        if group.topology().rank() == 0 {
            let mut grad = vec![1.0f32; 16];
            let _ = group.allreduce(
                &mut [TensorMut::from_slice("grad.lonely", &mut grad)],
                Reduction::new(ReduceOp::Sum),
            );
        } else {
            let _ = group.barrier();
        }
        println!("UNREACHABLE: a call returned");
        return;
    }
    ended_by_the_watchdog(
        "a_call_no_other_rank_makes_ends_the_job_naming_it",
        "hvd-mpi: rank 0: allreduce of tensor 'grad.lonely' timed out after 2s waiting for every rank of the MPI communicator to make the same call",
    );
}

/// Runs `test` as 2 ranks and checks that the watchdog ended the job with `said`, well
/// before the job's deadline and with no call returning.
fn ended_by_the_watchdog(test: &str, said: &str) {
    let job = mpirun::job(test, 2, &[], Duration::from_secs(60));
    assert!(
        job.status.is_some_and(|s| !s.success()) && !job.output.contains("UNREACHABLE"),
        "{:?}:\n{}",
        job.status,
        job.output
    );
    assert!(job.output.contains(said), "{}", job.output);
    assert!(job.took < Duration::from_secs(30), "took {:?}", job.took);
}

#[test]
fn an_mpi_error_comes_back_as_an_error_naming_the_call() {
    if mpirun::rank_body() {
        let group = MpiCollective::world(MpiConfig::default()).unwrap();
        let rank = group.topology().rank();
        // Rank 1 sends more than rank 0 has room for.
        let mut grad = vec![1i32; 4 + 4 * rank];
        let result = group.allreduce(
            &mut [TensorMut::from_slice("grad.uneven", &mut grad)],
            Reduction::new(ReduceOp::Sum),
        );
        match result {
            Err(e) => println!("RANK {rank} ERROR {e}"),
            Ok(()) => println!("RANK {rank} OK"),
        }
        return;
    }
    let job = mpirun::job(
        "an_mpi_error_comes_back_as_an_error_naming_the_call",
        2,
        &[],
        Duration::from_secs(60),
    );
    // Nothing aborted: the error came back to the caller, with MPI's reason (Open MPI's
    // words), and the job went on to exit normally.
    assert!(
        job.status.is_some_and(|s| s.success()),
        "{:?}:\n{}",
        job.status,
        job.output
    );
    assert!(
        job.output.contains(
            "RANK 0 ERROR rank 0: allreduce of tensor 'grad.uneven' failed in MPI_Allreduce: MPI_ERR_TRUNCATE: message truncated"
        ),
        "{}",
        job.output
    );
}

#[test]
fn a_rank_that_never_starts_hvd_ends_the_job_naming_the_world() {
    if mpirun::rank_body() {
        if mpirun::is_rank_0() {
            let world =
                MpiCollective::world(MpiConfig::default().with_timeout(Duration::from_secs(2)));
            println!("UNREACHABLE: the world was made: {}", world.is_ok());
        } else {
            // In MPI, but never in hvd: the program went another way.
            // SAFETY: initialises MPI once, with no arguments.
            unsafe { mpi::ffi::MPI_Init(std::ptr::null_mut(), std::ptr::null_mut()) };
            std::thread::sleep(Duration::from_secs(60));
        }
        return;
    }
    ended_by_the_watchdog(
        "a_rank_that_never_starts_hvd_ends_the_job_naming_the_world",
        "hvd-mpi: rank 0: connect of tensor 'MPI_COMM_WORLD' timed out after 2s waiting for every rank of the MPI communicator to make the same call",
    );
}
