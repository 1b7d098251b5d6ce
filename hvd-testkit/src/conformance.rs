//! The public conformance suite, in threads and in processes.

use std::time::{Duration, Instant};

use hvd_core::conformance::{Options, run_rank, run_threads};
use hvd_core::{Collective, Result};

use crate::processes::{ChildRank, child_group, launch, wait};

/// The options for a group of `size`: full tensors up to 4 ranks, the quick options (4
/// MiB tensors) above, to keep large groups short on a small machine.
pub fn options_for(size: usize) -> Options {
    if size <= 4 {
        Options::default()
    } else {
        Options::quick()
    }
}

/// Runs the suite with `size` ranks as threads, each with the group `connect(rank)`
/// makes; panics with the failure, naming `what` was tested.
pub fn in_threads<C: Collective>(
    what: &str,
    size: usize,
    connect: impl Fn(usize) -> Result<C> + Sync,
) {
    run_threads(size, &options_for(size), connect)
        .unwrap_or_else(|failure| panic!("{what}, {size} ranks: {failure}"));
}

/// The suite with ranks as processes. In the test itself: launches `size` ranks of
/// `test` with `env`, and requires every rank to pass and exit 0 within two minutes. In
/// a rank: runs the suite on the group `connect` makes.
pub fn in_processes<C: Collective>(
    test: &str,
    size: usize,
    options: Options,
    env: &[(&str, &str)],
    connect: impl FnOnce(&ChildRank) -> Result<C>,
) {
    if let Some(group) = child_group(connect) {
        match run_rank(&group, &options) {
            Ok(report) => println!("PASSED {} checks", report.passed.len()),
            Err(failure) => panic!("FAILED {failure}"),
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut ranks = launch(test, size, dir.path(), env);
    wait(&mut ranks, Instant::now() + Duration::from_secs(120));
    for (rank, r) in ranks.iter().enumerate() {
        let output = r.output();
        assert!(
            r.succeeded() && output.contains("PASSED"),
            "{test}: rank {rank} of {size} ({:?}):\n{output}",
            r.exit
        );
    }
}

/// Tests named `one_rank` to `eight_ranks`, each calling `$suite(size)`, with the
/// attributes given after it (`suite, #[cfg_attr(..., ignore = ...)]`) on every one.
#[macro_export]
macro_rules! conformance_by_size {
    ($suite:expr $(, #[$attr:meta])* $(,)?) => {
        $crate::conformance_by_size!(@each [$(#[$attr])*] ($suite);
            one_rank = 1, two_ranks = 2, three_ranks = 3, four_ranks = 4,
            five_ranks = 5, six_ranks = 6, seven_ranks = 7, eight_ranks = 8);
    };
    (@each $attrs:tt $suite:tt; $($name:ident = $size:literal),*) => {
        $($crate::conformance_by_size!(@one $attrs $suite $name $size);)*
    };
    (@one [$($attr:tt)*] $suite:tt $name:ident $size:literal) => {
        #[test]
        $($attr)*
        fn $name() {
            $suite($size);
        }
    };
}
