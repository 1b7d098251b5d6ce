//! Small repeated allreduces ride the negotiation round.
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
//! costs every rank its bytes. A rank that was ready shows the round on the tensor's
//! Timeline row as `ALLREDUCE_IN_NEGOTIATION`, whether or not the guess held.

use std::sync::Arc;

use hvd_core::trace::Tracer;
use hvd_core::{Device, ReduceOp, Reduction, Result, TensorMut, kernels};

use super::engine::{Engine, FLAGS, Progress};
use super::request::{Name, Op};
use super::response::{Plan, Response};

/// The most data one negotiation round carries: a guess that fails sends this much for
/// nothing.
pub(crate) const MAX_BYTES: usize = 16 * 1024;

/// The timeline span of a tensor that travelled in the negotiation round.
const SPAN: &str = "ALLREDUCE_IN_NEGOTIATION";

/// One expected tensor and where its bytes go in the round.
struct Rider {
    slot: usize,
    name: Name,
    plan: Arc<Plan>,
    reduction: Reduction,
    bytes: std::ops::Range<usize>,
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

impl Engine {
    /// The expected tensors and their layout, when this cycle speculates.
    fn riders(&self) -> Option<Vec<Rider>> {
        let slots = self.expectation.expected()?;
        if self.anyone_joined() {
            return None;
        }
        let mut end = 0;
        let mut riders = Vec::with_capacity(slots.len());
        for &slot in slots {
            let response = self.cache.response(slot)?;
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

    /// Copies this rank's expected tensors into `data`, prescaled, when it has every
    /// one waiting on its cache slot in host memory of the agreed size; otherwise leaves
    /// `data` zeroed. Returns whether it had them.
    fn fill(&mut self, riders: &[Rider], data: &mut [u8]) -> bool {
        for r in riders {
            let into = &mut data[r.bytes.clone()];
            let mine = self
                .pending
                .get_mut(&r.name)
                .filter(|p| p.progress == Progress::Cached(r.slot))
                .and_then(|p| p.work.host_bytes())
                .filter(|bytes| bytes.len() == into.len());
            let Some(bytes) = mine else {
                data.fill(0);
                return false;
            };
            into.copy_from_slice(bytes);
            kernels::prescale(r.plan.dtype, r.reduction, into);
        }
        true
    }

    /// The negotiation round: ANDs `flags` across ranks and, when the ranks expect a set
    /// of small cached allreduces, carries their data too. Returns the cache slots and
    /// responses of the tensors that completed in the round (their flags are cleared).
    pub(super) fn negotiate(&mut self, flags: &mut [u8]) -> Result<Vec<(usize, Response)>> {
        let Some(riders) = self.riders() else {
            self.and_flags(flags)?;
            return Ok(Vec::new());
        };
        let mut data = vec![0u8; riders.last().map_or(0, |r| r.bytes.end)];
        let ready = self.fill(&riders, &mut data);
        let mut counts: Vec<i32> = flags.iter().map(|&f| i32::from(f)).collect();
        counts.push(i32::from(ready));
        if ready {
            for r in &riders {
                self.trace.recorder.begin(&r.name, SPAN, Default::default());
            }
        }
        let result = self.round_trip(&riders, &mut counts, &mut data);
        if ready {
            riders
                .iter()
                .for_each(|r| self.trace.recorder.end(&r.name, SPAN));
        }
        result?;
        let ranks = self.control.topology().size();
        let everyone = |count: &i32| usize::try_from(*count) == Ok(ranks);
        for (flag, count) in flags.iter_mut().zip(&counts) {
            *flag = u8::from(everyone(count));
        }
        if !counts.last().is_some_and(everyone) {
            self.expectation.missed(data.len());
            return Ok(Vec::new());
        }
        Ok(self.complete_riders(riders, flags, &mut data, ranks))
    }

    /// One allreduce of the counts and the riders' data, summed.
    fn round_trip(&self, riders: &[Rider], counts: &mut [i32], data: &mut [u8]) -> Result<()> {
        let mut views = vec![TensorMut::from_slice("hvd.negotiate", counts)];
        let mut rest = data;
        for r in riders {
            let (mine, tail) = rest.split_at_mut(r.bytes.len());
            rest = tail;
            views.push(TensorMut::from_bytes(
                &r.name,
                r.plan.dtype,
                &r.plan.shape[..],
                mine,
            )?);
        }
        self.control
            .allreduce(&mut views, Reduction::new(ReduceOp::Sum))
    }

    /// Every rank sent its data: finishes each reduction into its caller's tensor.
    fn complete_riders(
        &mut self,
        riders: Vec<Rider>,
        flags: &mut [u8],
        data: &mut [u8],
        ranks: usize,
    ) -> Vec<(usize, Response)> {
        let completed = self.queue.finished(riders.iter().map(|r| &*r.name));
        self.stats.completed(completed);
        let mut rode = Vec::with_capacity(riders.len());
        for r in riders {
            flags[FLAGS + r.slot] = 0;
            rode.extend(self.cache.hit(r.slot).map(|response| (r.slot, response)));
            self.stats.cache_hit();
            self.stats.speculated();
            let result = &mut data[r.bytes.clone()];
            kernels::finish(r.plan.dtype, r.reduction, ranks, result);
            if let Some(mut pending) = self.pending.remove(&r.name) {
                self.trace.recorder.queue_end(&r.name);
                if let Some(bytes) = pending.work.host_bytes() {
                    bytes.copy_from_slice(result);
                }
                pending.work.succeed();
            }
        }
        rode
    }
}
