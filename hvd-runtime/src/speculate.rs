//! Small repeated allreduces ride the negotiation round: which ones, where their bytes
//! go, and the one collective that carries them.
//!
//! In the cached steady state a cycle costs two collectives: the vector of flags and
//! cache bits the ranks agree on, then the data. For a small tensor both are one network
//! latency, so the runtime costs twice the bare transport. When the ranks expect a set
//! of cached allreduces (`expectation.rs`), they send its data inside the negotiation
//! round: one allreduce, summing the flags as counts (a flag is set everywhere when its
//! count is the rank count) next to the tensors. A rank that does not have the whole set
//! pending sends zeros and says so; the data is then dropped and the tensors take the
//! usual path, so a disagreement is still caught as before. Whether a cycle speculates,
//! and on what layout, depends only on what every rank shares (the expectation, the
//! response cache, whether a rank has joined), so the ranks always make the same call.
//!
//! Only host allreduces that combine by summing (sum and average, with any scale
//! factors), uncompressed, up to [`MAX_BYTES`] in all, ride: the data of a failed guess
//! costs every rank its bytes.
//!
//! The parts: negotiation lays the riders out ([`layout`]) and runs the round
//! ([`round_trip`]); the executor fills the [`Cargo`] with this rank's tensors and,
//! once every rank's data arrived, finishes the reductions and completes the callers.

use std::ops::Range;
use std::sync::Arc;

use hvd_core::{Collective, Device, ReduceOp, Reduction, Result, TensorMut};

use super::cache::ResponseCache;
use super::request::{Name, Op};
use super::response::{Plan, Response};

/// The most data one negotiation round carries: a guess that fails sends this much for
/// nothing.
pub(crate) const MAX_BYTES: usize = 16 * 1024;

/// One expected tensor and where its bytes go in the round.
pub(crate) struct Rider {
    pub slot: usize,
    pub name: Name,
    pub plan: Arc<Plan>,
    pub reduction: Reduction,
    pub bytes: Range<usize>,
}

/// The data of one speculative round.
pub(crate) struct Cargo {
    pub riders: Vec<Rider>,
    /// Every rider's bytes, one after the other, as laid out.
    pub data: Vec<u8>,
    /// Set by negotiation when this rank has every rider waiting on its cache slot.
    pub all_waiting: bool,
    /// Whether this rank put its own tensors in (else `data` is zeros).
    pub ready: bool,
    /// Set by negotiation when every rank's tensors arrived: `data` holds their sums.
    pub landed: bool,
}

impl Cargo {
    /// Zeros for `riders`, not yet loaded.
    pub fn new(riders: Vec<Rider>, all_waiting: bool) -> Cargo {
        let len = riders.last().map_or(0, |r| r.bytes.end);
        Cargo {
            riders,
            data: vec![0; len],
            all_waiting,
            ready: false,
            landed: false,
        }
    }
}

/// The reduction of a cached response that may ride the negotiation round.
fn rides(response: &Response) -> Option<(Arc<Plan>, Reduction)> {
    let plan = response.outcome.as_ref().ok()?;
    let Op::Allreduce {
        reduction,
        compression: _,
    } = plan.op
    else {
        return None;
    };
    let sums = reduction.op.combining_op() == ReduceOp::Sum;
    (sums && plan.device == Device::Cpu && plan.wire.is_none()).then(|| (plan.clone(), reduction))
}

/// The riders of the cache `slots` the ranks expect, laid out one after the other;
/// `None` when one of them may not ride or they are too large together.
pub(crate) fn layout(slots: &[usize], cache: &ResponseCache) -> Option<Vec<Rider>> {
    let mut end = 0;
    let mut riders = Vec::with_capacity(slots.len());
    for &slot in slots {
        let response = cache.response(slot)?;
        let (plan, reduction) = rides(response)?;
        let len = plan.dtype.size() * plan.shape.iter().product::<usize>();
        riders.push(Rider {
            slot,
            name: response.name.clone(),
            plan,
            reduction,
            bytes: end..end + len,
        });
        end += len;
    }
    (end <= MAX_BYTES).then_some(riders)
}

/// One allreduce over `control` of the counts and the riders' data, summed.
pub(crate) fn round_trip(
    control: &dyn Collective,
    counts: &mut [i32],
    cargo: &mut Cargo,
) -> Result<()> {
    let mut views = vec![TensorMut::from_slice("hvd.negotiate", counts)];
    let mut rest = &mut cargo.data[..];
    for r in &cargo.riders {
        let (mine, tail) = rest.split_at_mut(r.bytes.len());
        rest = tail;
        views.push(TensorMut::from_bytes(
            &r.name,
            r.plan.dtype,
            &r.plan.shape[..],
            mine,
        )?);
    }
    control.allreduce(&mut views, Reduction::new(ReduceOp::Sum))
}
