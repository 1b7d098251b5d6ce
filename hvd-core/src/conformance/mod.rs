//! The public conformance suite: what every [`Collective`] must do.
//!
//! Run it over one instance per rank, all ranks at once:
//! - [`run_threads`] for ranks as threads of one process (any transport that can connect
//!   several instances inside one process, such as the reference or TCP);
//! - [`run_rank`] from each process of a multi-process job (under a launcher or mpirun).
//!
//! A device transport runs the same checks on device memory: [`run_threads_on`] and
//! [`run_rank_on`] take a [`DeviceMemory`] per rank (with a stream of its own, not the
//! transport's) in which every tensor of the suite lives. Inputs are copied there on
//! that memory's stream and marked ready after it, and results read back on it, so a
//! transport that does not wait for its inputs, or returns before its results are
//! written, fails the checks (reliably so against a lazy GPU double).
//!
//! The suite covers every operation x dtype x reduce op; sizes 0, 1, odd, not divisible
//! by the rank count, up to [`Options::max_bytes`] (64 MiB by default); batches of mixed
//! dtypes; prescale and postscale; allgather with zero-length contributions; alltoall with
//! uneven and zero splits; reducescatter with uneven blocks; broadcast from every root;
//! sub-groups; [`Options::repeats`] small allreduces in a row; Adasum
//! ([`crate::adasum`], built on alltoall and allreduce); and the error a bad call must
//! give. Values are small integers so that every sum and product is exact in every
//! dtype (f16 and bf16 included); only division and scaling are compared with a
//! tolerance ([`values::tolerance`]).
//!
//! After every check the ranks agree (through the collective under test) whether anyone
//! failed, so that one rank's failure stops every rank instead of desynchronising them.
//! A [`Failure`] names the check, the rank, and the expected and actual values.

mod checks;
mod context;
pub mod values;

use std::fmt;
use std::sync::{Arc, Mutex};

use crate::{Collective, DeviceMemory};
pub use context::{Buffer, Context, compare};

/// What the suite covers.
#[derive(Debug, Clone)]
pub struct Options {
    /// Size in bytes of the largest tensors (f32 allreduce, allgather, broadcast, alltoall).
    pub max_bytes: usize,
    /// How many small allreduces run back to back.
    pub repeats: usize,
    /// Whether to check `split` (sub-groups).
    pub subgroups: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_bytes: 64 << 20,
            repeats: 1000,
            subgroups: true,
        }
    }
}

impl Options {
    /// A faster variant for many rank counts: 4 MiB tensors, 100 repeats.
    pub fn quick() -> Self {
        Options {
            max_bytes: 4 << 20,
            repeats: 100,
            subgroups: true,
        }
    }
}

/// What a successful run did on one rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub rank: usize,
    pub size: usize,
    /// Names of the checks that passed, in order.
    pub passed: Vec<String>,
}

/// A check that failed on a rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub check: String,
    pub rank: usize,
    pub detail: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "conformance check '{}' failed on rank {}: {}",
            self.check, self.rank, self.detail
        )
    }
}

impl std::error::Error for Failure {}

/// Runs the whole suite on this rank. Every rank of the group must call it at the same
/// time with the same options.
pub fn run_rank(group: &dyn Collective, options: &Options) -> Result<Report, Failure> {
    run_suite(group, None, options)
}

/// Runs the whole suite on this rank with every tensor in `memory` (a device's). Every
/// rank of the group must call it at the same time with the same options.
pub fn run_rank_on(
    group: &dyn Collective,
    memory: Arc<dyn DeviceMemory>,
    options: &Options,
) -> Result<Report, Failure> {
    run_suite(group, Some(memory), options)
}

fn run_suite(
    group: &dyn Collective,
    memory: Option<Arc<dyn DeviceMemory>>,
    options: &Options,
) -> Result<Report, Failure> {
    let mut cx = Context::new(group, options, memory);
    for check in checks::all() {
        cx.run(check)?;
    }
    Ok(cx.into_report())
}

/// Runs the suite with `size` ranks as threads: thread `r` calls `connect(r)` to get its
/// collective, then [`run_rank`]. Returns the first rank's own failure (rather than the
/// others' reports that someone failed).
pub fn run_threads<C, F>(size: usize, options: &Options, connect: F) -> Result<(), Failure>
where
    C: Collective,
    F: Fn(usize) -> crate::Result<C> + Sync,
{
    in_threads(size, |rank| {
        let group = connect(rank).map_err(|e| connect_failure(rank, e))?;
        run_rank(&group, options)
    })
}

/// Runs the suite on device memory with `size` ranks as threads: thread `r` calls
/// `connect(r)` for its collective and the device memory its tensors live in, then
/// [`run_rank_on`].
pub fn run_threads_on<C, F>(size: usize, options: &Options, connect: F) -> Result<(), Failure>
where
    C: Collective,
    F: Fn(usize) -> crate::Result<(C, Arc<dyn DeviceMemory>)> + Sync,
{
    in_threads(size, |rank| {
        let (group, memory) = connect(rank).map_err(|e| connect_failure(rank, e))?;
        run_rank_on(&group, memory, options)
    })
}

fn connect_failure(rank: usize, e: crate::Error) -> Failure {
    Failure {
        check: "connect".into(),
        rank,
        detail: e.to_string(),
    }
}

/// Runs `rank_body` for every rank on a thread of its own; the first rank's own failure.
fn in_threads(
    size: usize,
    rank_body: impl Fn(usize) -> Result<Report, Failure> + Sync,
) -> Result<(), Failure> {
    let results: Vec<Result<Report, Failure>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..size)
            .map(|rank| {
                let rank_body = &rank_body;
                scope.spawn(move || rank_body(rank))
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(rank, h)| {
                h.join().unwrap_or_else(|panic| {
                    Err(Failure {
                        check: "thread".into(),
                        rank,
                        detail: format!("panicked: {}", panic_text(&panic)),
                    })
                })
            })
            .collect()
    });
    first_failure(results)
}

/// Runs the suite over a group whose collectives already exist, one thread each.
pub fn run_group<C: Collective>(group: Vec<C>, options: &Options) -> Result<(), Failure> {
    let size = group.len();
    let slots: Mutex<Vec<Option<C>>> = Mutex::new(group.into_iter().map(Some).collect());
    run_threads(size, options, |rank| {
        let taken = slots.lock().unwrap_or_else(|e| e.into_inner())[rank].take();
        taken.ok_or_else(|| crate::Error::invalid(rank, "conformance", "group", "taken twice"))
    })
}

fn first_failure(results: Vec<Result<Report, Failure>>) -> Result<(), Failure> {
    let failures: Vec<Failure> = results.into_iter().filter_map(Result::err).collect();
    let own = failures
        .iter()
        .find(|f| !f.detail.starts_with(context::OTHER_RANK_FAILED));
    match own.or(failures.first()) {
        Some(f) => Err(f.clone()),
        None => Ok(()),
    }
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "non-string panic".into())
}
