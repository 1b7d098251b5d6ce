//! [`Layer`]: the one way to write a [`Collective`] that wraps another.
//!
//! Middleware (Tensor Fusion, the Timeline, a router, a failure witness) and newtypes
//! over a driver implement `Layer` instead of the whole trait: every data operation and
//! barrier reaches [`Layer::call`] as one [`Operation`], which forwards to the inner
//! collective unless the layer overrides it, and the descriptive methods forward alike.
//! A layer writes only what it changes, and a new method of [`Collective`] is a change
//! to this file (and to the transports that implement it), not to every wrapper.
//!
//! ```
//! use hvd_core::layer::Layer;
//! use hvd_core::{Collective, OpKind, Operation, Result};
//! use std::sync::atomic::{AtomicUsize, Ordering};
//!
//! /// Counts the barriers that pass; everything else goes through untouched.
//! struct CountBarriers<C> {
//!     inner: C,
//!     barriers: AtomicUsize,
//! }
//!
//! impl<C: Collective> Layer for CountBarriers<C> {
//!     type Inner = C;
//!     fn inner(&self) -> &C {
//!         &self.inner
//!     }
//!     fn call(&self, op: Operation<'_, '_>) -> Result<()> {
//!         if op.kind() == OpKind::Barrier {
//!             self.barriers.fetch_add(1, Ordering::Relaxed);
//!         }
//!         op.run(&self.inner)
//!     }
//!     fn split(this: &Self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
//!         this.inner.split(members)
//!     }
//! }
//!
//! let [group] = hvd_core::reference::LocalGroup::new(1).build().try_into().unwrap();
//! let counted = CountBarriers { inner: group, barriers: AtomicUsize::new(0) };
//! counted.barrier()?;
//! assert_eq!(counted.barriers.load(Ordering::Relaxed), 1);
//! # Ok::<(), hvd_core::Error>(())
//! ```

use std::sync::Arc;

use crate::{
    Collective, Device, DeviceMemory, Operation, Reduction, Result, Tensor, TensorMut, Topology,
};

/// A [`Collective`] made by wrapping another one, its [`inner`](Layer::inner)
/// collective. Implementing `Layer` implements [`Collective`].
///
/// The hooks that stand for [`Collective`]'s own methods take `this: &Self` rather than
/// `self`, like `Rc::strong_count`: they are never candidates for method calls, so code
/// that has both traits in scope calls `.split()` or `.backend()` on anything without
/// ambiguity.
pub trait Layer: Send + Sync {
    /// The collective this one wraps.
    type Inner: Collective + ?Sized;

    /// The wrapped collective, which every hook forwards to by default.
    fn inner(&self) -> &Self::Inner;

    /// Every data operation and barrier. The default runs it on the inner collective.
    fn call(&self, op: Operation<'_, '_>) -> Result<()> {
        op.run(self.inner())
    }

    /// Sub-groups, as [`Collective::split`]. No default: a layer decides whether its
    /// sub-groups are wrapped like itself, and forgetting to would silently drop it.
    fn split(this: &Self, members: &[usize]) -> Result<Option<Box<dyn Collective>>>;

    /// As [`Collective::topology`]; the inner collective's by default.
    fn topology(this: &Self) -> &Topology {
        this.inner().topology()
    }

    /// As [`Collective::backend`]; the inner collective's by default.
    fn backend(this: &Self) -> &'static str {
        this.inner().backend()
    }

    /// As [`Collective::supports`]; the inner collective's by default.
    fn supports(this: &Self, device: Device) -> bool {
        this.inner().supports(device)
    }

    /// As [`Collective::backend_on`]; the inner collective's by default.
    fn backend_on(this: &Self, device: Device) -> &'static str {
        this.inner().backend_on(device)
    }

    /// As [`Collective::fuses_batches`]; the inner collective's by default.
    fn fuses_batches(this: &Self) -> bool {
        this.inner().fuses_batches()
    }

    /// As [`Collective::device_memory`]; the inner collective's by default.
    fn device_memory(this: &Self, device: Device) -> Option<Arc<dyn DeviceMemory>> {
        this.inner().device_memory(device)
    }
}

impl<L: Layer> Collective for L {
    fn topology(&self) -> &Topology {
        Layer::topology(self)
    }

    fn backend(&self) -> &'static str {
        Layer::backend(self)
    }

    fn supports(&self, device: Device) -> bool {
        Layer::supports(self, device)
    }

    fn backend_on(&self, device: Device) -> &'static str {
        Layer::backend_on(self, device)
    }

    fn fuses_batches(&self) -> bool {
        Layer::fuses_batches(self)
    }

    fn device_memory(&self, device: Device) -> Option<Arc<dyn DeviceMemory>> {
        Layer::device_memory(self, device)
    }

    fn allreduce(&self, tensors: &mut [TensorMut<'_>], reduction: Reduction) -> Result<()> {
        self.call(Operation::Allreduce { tensors, reduction })
    }

    fn broadcast(&self, tensors: &mut [TensorMut<'_>], root: usize) -> Result<()> {
        self.call(Operation::Broadcast { tensors, root })
    }

    fn allgather(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
    ) -> Result<()> {
        self.call(Operation::Allgather {
            input,
            output,
            counts,
        })
    }

    fn alltoall(
        &self,
        input: &Tensor<'_>,
        send_counts: &[usize],
        output: &mut TensorMut<'_>,
        recv_counts: &[usize],
    ) -> Result<()> {
        self.call(Operation::Alltoall {
            input,
            send_counts,
            output,
            recv_counts,
        })
    }

    fn reducescatter(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
        reduction: Reduction,
    ) -> Result<()> {
        self.call(Operation::Reducescatter {
            input,
            output,
            counts,
            reduction,
        })
    }

    fn barrier(&self) -> Result<()> {
        self.call(Operation::Barrier)
    }

    fn split(&self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        Layer::split(self, members)
    }
}

/// A boxed collective is a collective, so middleware can wrap either.
impl<C: Collective + ?Sized> Layer for Box<C> {
    type Inner = C;
    fn inner(&self) -> &C {
        self
    }
    fn split(this: &Self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        this.inner().split(members)
    }
}

/// A shared collective is a collective, so middleware can wrap either.
impl<C: Collective + ?Sized> Layer for Arc<C> {
    type Inner = C;
    fn inner(&self) -> &C {
        self
    }
    fn split(this: &Self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        this.inner().split(members)
    }
}
