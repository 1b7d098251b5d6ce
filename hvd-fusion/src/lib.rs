//! # hvd-fusion: Tensor Fusion as `Collective` middleware
//!
//! A collective call costs a fixed latency (a round of messages around the ring) plus
//! time per byte. Gradients arrive as many small tensors, so latency dominates: on one
//! test machine torch.distributed over Gloo takes 204 ms to allreduce 200 tensors of
//! 64 KiB one by one, and 9.8 ms for the same bytes as one tensor. Horovod's Tensor Fusion
//! copies the small tensors of a cycle into one buffer, reduces the buffer, and copies the
//! results back. [`Fusion`] does the same as a [`Collective`](hvd_core::Collective) that
//! wraps another: the runtime hands it each cycle's ready tensors as one batch, and it
//! turns that batch into as few inner calls as it can.
//!
//! ```
//! use hvd_core::{Collective, ReduceOp, Reduction, TensorMut};
//! use hvd_core::reference::LocalGroup;
//! use hvd_fusion::{DEFAULT_THRESHOLD, Fusion};
//!
//! let rank0 = LocalGroup::new(1).build().remove(0);
//! let group = Fusion::new(rank0, DEFAULT_THRESHOLD);
//! let (mut w, mut b) = (vec![1.0f32; 1000], vec![2.0f32; 10]);
//! let mut batch = [TensorMut::from_slice("w", &mut w), TensorMut::from_slice("b", &mut b)];
//! group.allreduce(&mut batch, Reduction::new(ReduceOp::Average))?; // one inner call
//! # Ok::<(), hvd_core::Error>(())
//! ```
//!
//! ## The packing rule (allreduce)
//! - Tensors of a batch share the reduction but may differ in dtype. Host tensors are
//!   grouped by dtype (dtypes in order of first appearance), looking past tensors of other
//!   dtypes as Horovod does for mixed precision: `f32, f16, f32, f16` makes one `f32`
//!   pack and one `f16` pack.
//! - Each dtype's tensors fill packs of at most *threshold* bytes, in batch order; when
//!   the next tensor does not fit, a new pack starts.
//! - A tensor larger than the threshold goes to the inner collective alone and as it is:
//!   same memory, no copy (copying would cost more than the call it saves).
//! - Packs are copied into the fusion buffer, the reduction's prescale is applied there
//!   as each tensor is copied in (so the inner call runs with prescale 1.0 and the same
//!   op and postscale), reduced, and copied out. Packs that fit the threshold together go
//!   to the inner collective as one batch, which may mix dtypes.
//!
//! Fused results are the unfused results bit for bit on a transport that reduces each
//! element in the same rank order either way, as the reference transport does: every
//! kernel works element by element. A transport whose summation order depends on where
//! an element sits in the tensor (a ring's chunk boundaries move when tensors are packed)
//! can differ in the last bits of float sums, as Horovod's fused and unfused results do.
//!
//! ## Threshold
//! The largest pack in bytes, and so the size the fusion buffer grows to. Horovod's
//! default is 128 MiB ([`DEFAULT_THRESHOLD`]), set by `HVD_FUSION_THRESHOLD` (alias
//! `HOROVOD_FUSION_THRESHOLD`), which the facade reads. 0 turns fusion off: every call
//! makes one inner call per tensor, as Horovod without fusion. [`Fusion::set_threshold`]
//! changes it at run time (for an autotuner); every rank must change it before the same
//! call. Sub-groups made by `split` start from their parent's threshold and keep their
//! own, so that each group changes it at a call its members agree on.
//!
//! ## Device tensors
//! A batch of tensors on one device whose memory the inner collective offers (a GPU
//! transport's, on its own stream) packs the same way into a device fusion buffer: per
//! round, one batched device copy in, the inner call, one batched copy out, then one wait.
//! The copies run on the transport's stream, ordered with its call, and the copy in
//! waits on the device for the work each tensor is ready after, so the host never
//! blocks on the way in. The prescale is left to the inner call (no kernel scales on the
//! device here).
//!
//! ## Alignment
//! The fusion buffer is allocated once, grown on demand, and reused. Its base is 64-byte
//! aligned and every pack starts at a multiple of 64 bytes, so the kernels take their
//! fast path on aligned data; inside a pack, tensors sit back to back, which keeps each at
//! a multiple of its dtype's size.
//!
//! ## What passes through
//! - A batch of one tensor; every tensor on its own when the threshold is 0.
//! - Batches to an inner collective that scatter-gathers a batch itself
//!   ([`Collective::fuses_batches`](hvd_core::Collective::fuses_batches)): cut into
//!   consecutive runs of at most the threshold, each handed whole.
//! - Device tensors when the inner collective offers no memory for their device
//!   ([`Collective::device_memory`](hvd_core::Collective::device_memory)): unfused, in
//!   one inner call.
//! - `broadcast` packs like allreduce but ignores dtypes (it only moves bytes, so any mix
//!   shares one byte pack), copying in on the root only and out on the others.
//! - `allgather`, `alltoall`, `reducescatter`, `barrier`, `topology`, `backend` and
//!   `supports` go to the inner collective unchanged; `split` wraps the inner sub-group in
//!   a `Fusion` of its own.
//!
//! Bad calls are checked with [`hvd_core::validate`] before anything is packed, so their
//! errors read exactly as without fusion.
//!
//! ## Tracing
//! [`Fusion::with_tracer`] hands it a [`Tracer`](hvd_core::trace::Tracer) (the Timeline's
//! recorder), which receives a [`MEMCPY_IN_FUSION_BUFFER`] span around each tensor's copy
//! into the buffer (its prescale included) and a [`MEMCPY_OUT_FUSION_BUFFER`] span around
//! its copy back out, on the tensor's own row with its dtype, shape and bytes. Tensors that
//! pass through unpacked are not copied and get no span. Without a tracer, or while it is
//! disabled, nothing is recorded or built.

mod batch;
mod buffer;
mod device;
mod fused_op;
mod fusion;
mod pack;

pub use batch::{MEMCPY_IN_FUSION_BUFFER, MEMCPY_OUT_FUSION_BUFFER};
pub use fusion::{DEFAULT_THRESHOLD, Fusion};
