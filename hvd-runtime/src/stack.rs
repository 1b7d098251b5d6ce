//! The middleware stack, built in one place you can read top to bottom.
//!
//! Public so that tests (and anyone composing their own runtime) can run the very stack
//! the engine runs its data collectives through over a transport of their choosing.

use std::sync::Arc;

use hvd_core::layer::Layer;
use hvd_core::{Collective, Device, DeviceMemory, Result};
use hvd_fusion::Fusion;
use hvd_timeline::{Recorder, Timeline};

use crate::router::Router;

/// The middleware every data collective goes down, top to bottom.
type Layers = Timeline<Fusion<Router>>;

/// The job's transports wrapped in hvd's middleware (`Timeline<Fusion<Router>>`), with
/// handles to the layers the runtime adjusts while it runs.
///
/// The engine hands each cycle's agreed batches to the top whole; Fusion alone decides
/// how they travel (packed, or in runs of at most its threshold), so the threshold lives
/// in one place. A process set's stack is made by [`split`](Self::split) and follows this
/// one's threshold.
#[derive(Clone)]
pub struct Stack {
    top: Arc<Layers>,
    /// The stack this one was split from, whose Fusion threshold (the job's, which the
    /// autotuner changes) this one follows.
    parent: Option<Arc<Layers>>,
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("transport", &self.top.backend())
            .field("fusion_threshold", &self.fusion_threshold())
            .finish()
    }
}

impl Stack {
    /// Wraps `transport`, innermost first; Fusion packs up to `fusion_threshold` bytes.
    pub fn build(
        transport: Arc<dyn Collective>,
        fusion_threshold: usize,
        recorder: &Arc<Recorder>,
    ) -> Stack {
        Stack::routed(Router::new(transport), fusion_threshold, recorder)
    }

    /// Wraps the transports of `router` (a host one, and device ones).
    pub fn routed(router: Router, fusion_threshold: usize, recorder: &Arc<Recorder>) -> Stack {
        Stack::wrap(router, fusion_threshold, recorder, None)
    }

    /// The one place the middleware is put together. Top to bottom: the Timeline records
    /// every collective as a span on each of its tensors' rows; Tensor Fusion turns a
    /// cycle's batch of small tensors into a few large collectives (and reports its
    /// copies to the Timeline); the Router sends each call to the transport for its
    /// tensors' memory (the facade `hvd` connects those, in its `transport::connect`).
    fn wrap(
        router: Router,
        fusion_threshold: usize,
        recorder: &Arc<Recorder>,
        parent: Option<Arc<Layers>>,
    ) -> Stack {
        let top: Layers = Timeline::new(
            Fusion::new(router, fusion_threshold).with_tracer(recorder.clone()),
            recorder.clone(),
        );
        Stack {
            top: Arc::new(top),
            parent,
        }
    }

    fn fusion(&self) -> &Fusion<Router> {
        Layer::inner(&*self.top)
    }

    fn router(&self) -> &Router {
        Layer::inner(self.fusion())
    }

    /// The outermost layer, through which data collectives run.
    pub fn collective(&self) -> &dyn Collective {
        self.top.as_ref()
    }

    /// Whether device tensors can be copied to the host and back (see
    /// [`host_copies`](Self::host_copies)).
    pub(crate) fn copies_devices(&self) -> bool {
        self.router().copies_devices()
    }

    /// The memory that copies `device`'s tensors to the host and back: the device
    /// transport's, or host staging's.
    pub(crate) fn host_copies(
        &self,
        device: Device,
        op: &str,
        tensor: &str,
    ) -> Result<Arc<dyn DeviceMemory>> {
        self.router().host_copies(device, op, tensor)
    }

    /// The bare host transport under the middleware.
    pub fn transport(&self) -> &Arc<dyn Collective> {
        self.router().host()
    }

    /// The largest batch Fusion hands the transport in one call, in bytes.
    pub fn fusion_threshold(&self) -> usize {
        self.fusion().threshold()
    }

    /// The same stack over the sub-group of `members` (global ranks), `None` on a rank
    /// that is not one. It starts from this stack's threshold and then follows it: the
    /// process set's engine applies a change after a cycle its members agree on.
    pub fn split(&self, members: &[usize]) -> Result<Option<Stack>> {
        let Some(sub) = self.router().split_router(members)? else {
            return Ok(None);
        };
        let threshold = self.fusion_threshold();
        let parent = Some(self.top.clone());
        let recorder = self.top.recorder();
        Ok(Some(Stack::wrap(sub, threshold, recorder, parent)))
    }

    /// The threshold of the stack this one was split from, when it differs from this
    /// one's: the change the engine must have its members agree on before applying.
    pub(crate) fn followed_threshold(&self) -> Option<usize> {
        let wanted = Layer::inner(&**self.parent.as_ref()?).threshold();
        (wanted != self.fusion_threshold()).then_some(wanted)
    }

    /// Changes the fusion threshold; every member must change it after the same cycle.
    pub(crate) fn set_fusion_threshold(&self, bytes: usize) {
        self.fusion().set_threshold(bytes);
    }
}
