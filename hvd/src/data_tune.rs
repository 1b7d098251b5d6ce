//! Tuning every rank's loader at once: each rank measures what its loader needs (decode
//! threads that keep up with its step), the ranks exchange their needs (one small
//! allgather), and the ranks on a host split its cores in proportion to what each needs
//! ([`share_cores`](hvd_data::share_cores)) instead of each taking an equal share or every core.
//!
//! ```no_run
//! use hvd::data::{Augment, ElasticSampler, Loader, LoaderOptions, Synthetic, host_cores};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let hvd = hvd::init()?;
//! let mut loader = Loader::new(
//!     Synthetic::new(1024, 256, 256, 10),
//!     Augment::train(224),
//!     LoaderOptions::default(),
//! )?;
//! let mut sampler = ElasticSampler::new(1024, 64);
//! let mut clock = hvd::data_stall::step_clock(&hvd);
//! for epoch in 0..3 {
//!     sampler.set_epoch(epoch);
//!     let mut batches = loader.epoch(&sampler, hvd.rank(), hvd.size())?;
//!     while let Some(batch) = clock.data(|| batches.next_batch())? {
//!         let _ = batch; // forward, backward, allreduce
//!         sampler.advance();
//!         clock.step();
//!     }
//!     drop(batches);
//!     hvd::data_tune::autotune(&hvd, &mut loader, clock.steps(), host_cores())?;
//!     hvd::data_stall::epoch_report(&hvd, &mut clock)?;
//! }
//! # Ok(())
//! # }
//! ```

use hvd_core::Result;
use hvd_data::{Loader, StepTimes, TuneLimits, Tuning};

use crate::Hvd;

/// The allgather's tensor name: the job's Timeline and errors show it.
const CLAIMS: &str = "hvd.data_tune.claims";

/// Sets the next epochs' threads and prefetch of every rank's `loader` (collective: every
/// rank calls it after the same epoch): the load measured since the last call (the
/// loader's decode rate and `steps`, a [`StepClock`](crate::data_stall::StepClock)'s),
/// within this rank's part of its host's `cores` split by need. `cores` is usually
/// [`host_cores`](hvd_data::host_cores); where the ranks of a host give different
/// numbers, the fewest counts. A rank that measured nothing keeps its settings (`None`),
/// and its threads are set aside before the others split the rest. The measurement is
/// taken before the exchange: if the exchange fails, the next call measures afresh.
pub fn autotune(
    hvd: &Hvd,
    loader: &mut Loader,
    steps: &[StepTimes],
    cores: usize,
) -> Result<Option<Tuning>> {
    let load = loader.measure(steps);
    // A need to share by is positive; the threads a rank keeps are sent negative.
    let claim = match load {
        Some(load) => i64::try_from(load.threads_needed()).unwrap_or(i64::MAX),
        None => -i64::try_from(loader.options().threads.max(1)).unwrap_or(i64::MAX),
    };
    let cores = i64::try_from(cores).unwrap_or(i64::MAX);
    let claims = hvd.allgather(CLAIMS, vec![claim, cores])?;
    let Some(load) = load else {
        return Ok(None);
    };
    let host = Host::of(hvd, &claims);
    let limits = TuneLimits::by_need(host.cores.saturating_sub(host.kept), &host.needs, host.me);
    Ok(Some(loader.tune(load, limits)))
}

/// What the ranks of this rank's host asked for.
struct Host {
    /// The fewest cores a rank of the host said it may use (CPU affinity and quotas
    /// can differ between ranks): the split never exceeds what every rank can run on.
    cores: usize,
    /// Threads of local ranks that measured nothing and keep their settings.
    kept: usize,
    /// The needs of the local ranks that measured, in local rank order.
    needs: Vec<usize>,
    /// This rank's place in `needs`.
    me: usize,
}

impl Host {
    /// From every rank's `[claim, cores]`, in rank order.
    fn of(hvd: &Hvd, claims: &[i64]) -> Host {
        let hosts = hvd
            .topology()
            .expect("every rank is a member of the global set")
            .hosts();
        let mine = hosts[hvd.rank()];
        let mut host = Host {
            cores: usize::MAX,
            kept: 0,
            needs: Vec::new(),
            me: 0,
        };
        let pairs = claims.chunks_exact(2).zip(hosts);
        for (rank, (pair, host_of_rank)) in pairs.enumerate() {
            let (claim, cores) = (&pair[0], pair[1]);
            if *host_of_rank != mine {
                continue;
            }
            host.cores = host.cores.min(usize::try_from(cores).unwrap_or(1));
            let threads = usize::try_from(claim.unsigned_abs()).unwrap_or(usize::MAX);
            if *claim < 0 {
                host.kept = host.kept.saturating_add(threads);
                continue;
            }
            if rank == hvd.rank() {
                host.me = host.needs.len();
            }
            host.needs.push(threads);
        }
        host
    }
}
