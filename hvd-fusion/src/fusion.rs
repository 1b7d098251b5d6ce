//! [`Fusion`]: the `Collective` middleware that packs batches.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use hvd_core::layer::Layer;
use hvd_core::trace::Tracer;
use hvd_core::{Collective, DeviceMemory, Operation, Result, TensorMut, validate};

use crate::batch;
use crate::buffer::FusionBuffer;
use crate::device::{self, DeviceFusionBuffer};
use crate::fused_op::FusedOp;
use crate::pack;

/// Horovod's default fusion threshold: 128 MiB (`HVD_FUSION_THRESHOLD`, alias
/// `HOROVOD_FUSION_THRESHOLD`, read by the facade).
pub const DEFAULT_THRESHOLD: usize = 128 << 20;

/// Tensor Fusion: a [`Collective`] that packs each batch of small tensors into as few
/// calls of the `inner` collective as the threshold allows. See the [crate docs](crate).
pub struct Fusion<C: Collective> {
    inner: C,
    /// The sub-groups made by `split` start from its value and then keep their own: the
    /// members of a sub-group must change theirs before the same call of the sub-group,
    /// which a change made through the parent cannot promise.
    threshold: AtomicUsize,
    buffer: Mutex<FusionBuffer>,
    /// The same for device batches, in the device's memory.
    device_buffer: Mutex<DeviceFusionBuffer>,
    /// Receives the copies into and out of the fusion buffer (for the Timeline).
    tracer: Option<Arc<dyn Tracer>>,
}

impl<C: Collective> Fusion<C> {
    /// Wraps `inner`, packing up to `threshold_bytes` bytes per pack; 0 turns fusion off.
    pub fn new(inner: C, threshold_bytes: usize) -> Self {
        Fusion::with_parts(inner, threshold_bytes, None)
    }

    /// Reports a `MEMCPY_IN_FUSION_BUFFER` and a `MEMCPY_OUT_FUSION_BUFFER` span to
    /// `tracer` for every tensor copied into and out of the fusion buffer, on the tensor's
    /// own row, with its dtype, shape and bytes. Sub-groups made by `split` report to the
    /// same tracer.
    pub fn with_tracer(mut self, tracer: Arc<dyn Tracer>) -> Self {
        self.tracer = Some(tracer);
        self
    }

    fn with_parts(inner: C, threshold: usize, tracer: Option<Arc<dyn Tracer>>) -> Self {
        Fusion {
            inner,
            threshold: AtomicUsize::new(threshold),
            buffer: Mutex::new(FusionBuffer::default()),
            device_buffer: Mutex::new(DeviceFusionBuffer::default()),
            tracer,
        }
    }

    /// The largest pack in bytes; 0 when fusion is off.
    pub fn threshold(&self) -> usize {
        self.threshold.load(Ordering::Relaxed)
    }

    /// Changes the threshold from the next call on (an autotuner does this at run time).
    ///
    /// Every rank must make the same change before the same call, or the ranks pack
    /// differently and their inner calls no longer match. The fusion buffer keeps its size
    /// when the threshold shrinks.
    pub fn set_threshold(&self, bytes: usize) {
        self.threshold.store(bytes, Ordering::Relaxed);
    }

    /// Carries out `op` on the batch: packs through the fusion buffer, the rest as it is.
    fn fuse(&self, tensors: &mut [TensorMut<'_>], op: FusedOp) -> Result<()> {
        // Read once: a concurrent `set_threshold` must not change the plan halfway.
        let threshold = self.threshold();
        if tensors.len() < 2 {
            return op.call(&self.inner, tensors, false);
        }
        // Device tensors pack into a buffer in the device's memory, when the transport
        // offers it.
        if threshold > 0
            && let Some(device) = device::batch_device(tensors)
            && let Some(memory) = self.inner.device_memory(device)
        {
            return self.fuse_on_device(tensors, op, threshold, &memory);
        }
        // A transport that moves a batch whole without copying (scatter-gather I/O) does
        // what packing would, minus two copies of every byte. The threshold still bounds
        // each call, and 0 still means one call per tensor, as Horovod without fusion.
        if threshold == 0 || self.inner.fuses_batches() {
            for run in pack::runs(tensors.iter().map(TensorMut::byte_len), threshold) {
                op.call(&self.inner, &mut tensors[run], false)?;
            }
            return Ok(());
        }
        let plan = pack::plan(&batch::items(tensors, |d| op.packed_dtype(d)), threshold);
        tracing::trace!(
            tensors = tensors.len(),
            rounds = plan.rounds.len(),
            alone = plan.alone.len(),
            "fusing a batch"
        );
        let rank = self.inner.topology().rank();
        // Asked once per batch, so that a tracer switched on or off halfway cannot leave a
        // begin without its end.
        let tracer = self.tracer.as_deref().filter(|t| t.enabled());
        // The buffer is scratch space: after a panic elsewhere it is as good as ever.
        let mut buffer = self.buffer.lock().unwrap_or_else(PoisonError::into_inner);
        for round in &plan.rounds {
            let mut regions = round.carve(buffer.region(round.bytes()));
            if op.sends(rank) {
                for (pack, region) in round.packs.iter().zip(regions.iter_mut()) {
                    batch::copy_in(tensors, pack, region, tracer, |bytes| {
                        op.prepare(pack.dtype, bytes)
                    })?;
                }
            }
            let names: Vec<String> = round
                .packs
                .iter()
                .map(|p| batch::pack_name(tensors, p))
                .collect();
            let mut views = batch::pack_views(&round.packs, &names, &mut regions)?;
            op.call(&self.inner, &mut views, true)?;
            drop(views);
            if op.receives(rank) {
                for (pack, region) in round.packs.iter().zip(&regions) {
                    batch::copy_out(tensors, pack, region, tracer)?;
                }
            }
        }
        if plan.alone.is_empty() {
            return Ok(());
        }
        batch::with_subset(tensors, &plan.alone, |alone| {
            op.call(&self.inner, alone, false)
        })
    }
}

impl<C: Collective> Fusion<C> {
    /// Packs a device batch in the device fusion buffer: per round, one batched copy in
    /// (on the transport's stream, so no wait before the call), the inner call on the
    /// packs (which applies the prescale itself: there is no kernel to apply it here),
    /// and one batched copy out, waited for before the results are handed back.
    fn fuse_on_device(
        &self,
        tensors: &mut [TensorMut<'_>],
        op: FusedOp,
        threshold: usize,
        memory: &Arc<dyn DeviceMemory>,
    ) -> Result<()> {
        let plan = pack::plan(&device::items(tensors, |d| op.packed_dtype(d)), threshold);
        let rank = self.inner.topology().rank();
        let tracer = self.tracer.as_deref().filter(|t| t.enabled());
        let mut buffer = self
            .device_buffer
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for round in &plan.rounds {
            let base = buffer.region(memory, round.bytes())?;
            if op.sends(rank) {
                let copies = device::copies(tensors, round, base, true)?;
                device::traced(tracer, tensors, &round.packs, true, || memory.copy(&copies))?;
            }
            let names: Vec<String> = round
                .packs
                .iter()
                .map(|p| batch::pack_name(tensors, p))
                .collect();
            let mut views = round
                .packs
                .iter()
                .zip(&names)
                .map(|(pack, name)| {
                    let region = base.slice(pack.offset, pack.bytes).unwrap_or(base);
                    let len = pack.bytes / pack.dtype.size();
                    TensorMut::from_device(name, pack.dtype, vec![len], region)
                })
                .collect::<Result<Vec<_>>>()?;
            op.call(&self.inner, &mut views, false)?;
            drop(views);
            if op.receives(rank) {
                let copies = device::copies(tensors, round, base, false)?;
                device::traced(tracer, tensors, &round.packs, false, || {
                    memory.copy(&copies).and_then(|()| memory.synchronize())
                })?;
            }
        }
        if plan.alone.is_empty() {
            return Ok(());
        }
        batch::with_subset(tensors, &plan.alone, |alone| {
            op.call(&self.inner, alone, false)
        })
    }
}

impl<C: Collective> fmt::Debug for Fusion<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fusion")
            .field("inner", &self.inner.backend())
            .field("threshold", &self.threshold())
            .field("tracer", &self.tracer)
            .finish_non_exhaustive()
    }
}

impl<C: Collective> Layer for Fusion<C> {
    type Inner = C;

    fn inner(&self) -> &C {
        &self.inner
    }

    /// Allreduces and broadcasts are packed; every other call goes through as it is.
    fn call(&self, op: Operation<'_, '_>) -> Result<()> {
        match op {
            Operation::Allreduce { tensors, reduction } => {
                // Before packing, so that a bad call names the caller's tensor, as unfused.
                validate::allreduce(self.inner.topology().rank(), tensors, reduction)?;
                self.fuse(tensors, FusedOp::Allreduce(reduction))
            }
            // A root out of range goes to the inner collective unpacked, whose refusal
            // then names the batch exactly as unfused.
            Operation::Broadcast { tensors, root } if root < self.inner.topology().size() => {
                self.fuse(tensors, FusedOp::Broadcast { root })
            }
            other => other.run(&self.inner),
        }
    }

    fn split(this: &Self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        let sub = this.inner.split(members)?;
        Ok(sub.map(|sub| {
            let fused = Fusion::with_parts(sub, this.threshold(), this.tracer.clone());
            Box::new(fused) as Box<dyn Collective>
        }))
    }

    fn fuses_batches(_: &Self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use hvd_core::reference::LocalGroup;
    use hvd_core::trace::SpanArgs;
    use hvd_core::{DType, ReduceOp, Reduction};

    use super::*;
    use crate::{MEMCPY_IN_FUSION_BUFFER as IN, MEMCPY_OUT_FUSION_BUFFER as OUT};

    /// What a tracer heard: `B`/`E`, tensor, activity, args of a begin.
    type Heard = (char, String, &'static str, Option<SpanArgs>);

    #[derive(Default)]
    struct Log {
        on: AtomicBool,
        heard: Mutex<Vec<Heard>>,
    }

    impl Log {
        fn take(&self) -> Vec<Heard> {
            std::mem::take(&mut *self.heard.lock().unwrap())
        }
    }

    fn activity(name: &str) -> &'static str {
        [IN, OUT].into_iter().find(|a| *a == name).unwrap()
    }

    impl Tracer for Log {
        fn enabled(&self) -> bool {
            self.on.load(Ordering::Relaxed)
        }
        fn begin(&self, tensor: &str, name: &str, args: SpanArgs) {
            let event = ('B', tensor.to_owned(), activity(name), Some(args));
            self.heard.lock().unwrap().push(event);
        }
        fn end(&self, tensor: &str, name: &str) {
            let event = ('E', tensor.to_owned(), activity(name), None);
            self.heard.lock().unwrap().push(event);
        }
        fn instant(&self, _: &str, _: &str) {
            unreachable!("fusion reports spans only")
        }
    }

    fn spans(activity: &'static str, tensors: &[(&str, SpanArgs)]) -> Vec<Heard> {
        tensors
            .iter()
            .flat_map(|(name, args)| {
                [
                    ('B', name.to_string(), activity, Some(args.clone())),
                    ('E', name.to_string(), activity, None),
                ]
            })
            .collect()
    }

    #[test]
    fn each_packed_tensor_gets_memcpy_spans_with_its_args() {
        let log = Arc::new(Log::default());
        let rank = LocalGroup::new(1).build().remove(0);
        let fusion = Fusion::new(rank, 1024).with_tracer(log.clone());
        let (mut a, mut b, mut big) = (vec![1.0f32; 4], vec![2u8; 6], vec![3.0f32; 1000]);
        fn views<'v>(a: &'v mut [f32], b: &'v mut [u8], big: &'v mut [f32]) -> [TensorMut<'v>; 3] {
            [
                TensorMut::from_slice("a", a),
                TensorMut::from_bytes("b", DType::U8, vec![2, 3], b).unwrap(),
                // Larger than the threshold: reduced where it is, no copy, no span.
                TensorMut::from_slice("big", big),
            ]
        }
        let sum = Reduction::new(ReduceOp::Sum);

        fusion
            .allreduce(&mut views(&mut a, &mut b, &mut big), sum)
            .unwrap();
        assert_eq!(
            log.take(),
            [],
            "nothing is reported while the tracer is off"
        );

        log.on.store(true, Ordering::Relaxed);
        fusion
            .allreduce(&mut views(&mut a, &mut b, &mut big), sum)
            .unwrap();
        let packed = [
            ("a", SpanArgs::of(DType::F32, &[4], 16)),
            ("b", SpanArgs::of(DType::U8, &[2, 3], 6)),
        ];
        // Packs by dtype: a's pack, then b's, each copied in, then each copied out.
        let expected = [spans(IN, &packed), spans(OUT, &packed)].concat();
        assert_eq!(log.take(), expected);

        // The root of a broadcast only copies in; its own data needs no copy back.
        fusion
            .broadcast(&mut views(&mut a, &mut b, &mut big), 0)
            .unwrap();
        assert_eq!(log.take(), spans(IN, &packed));
    }
}
