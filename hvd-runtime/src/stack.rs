//! The middleware stack, built in one place you can read top to bottom.
//!
//! Public so that tests (and anyone composing their own runtime) can run the very stack
//! the engine runs its data collectives through over a transport of their choosing.

use std::sync::Arc;

use hvd_core::{Collective, Result};
use hvd_fusion::Fusion;
use hvd_timeline::{Recorder, Timeline};

use crate::router::Router;

type Fused = Fusion<Arc<dyn Collective>>;

/// The job's transports wrapped in hvd's middleware (`Timeline<Fusion<Router>>`), with
/// handles to the layers the runtime adjusts while it runs.
///
/// The engine hands each cycle's agreed batches to the top whole; Fusion alone decides
/// how they travel (packed, or in runs of at most its threshold), so the threshold lives
/// in one place. A process set's stack is made by [`split`](Self::split) and follows this
/// one's threshold.
#[derive(Clone)]
pub struct Stack {
    /// The transports under the middleware; negotiation runs on the host one, bare.
    router: Router,
    top: Arc<dyn Collective>,
    fusion: Arc<Fused>,
    recorder: Arc<Recorder>,
    /// The Fusion of the stack this one was split from, whose threshold (the job's, which
    /// the autotuner changes) this one follows.
    parent: Option<Arc<Fused>>,
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("transport", &self.top.backend())
            .field("fusion_threshold", &self.fusion.threshold())
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
        Stack::wrap(router, fusion_threshold, recorder.clone(), None)
    }

    fn wrap(
        router: Router,
        fusion_threshold: usize,
        recorder: Arc<Recorder>,
        parent: Option<Arc<Fused>>,
    ) -> Stack {
        // Router: each call to the transport for its tensors' memory.
        let routed: Arc<dyn Collective> = Arc::new(router.clone());
        // Tensor Fusion: a cycle's batch of small tensors becomes a few large collectives.
        // It reports its copies into and out of the fusion buffer to the timeline.
        let fusion = Arc::new(Fusion::new(routed, fusion_threshold).with_tracer(recorder.clone()));
        // Timeline: every collective as a span on each of its tensors' rows.
        let timeline = Timeline::new(fusion.clone(), recorder.clone());
        Stack {
            router,
            top: Arc::new(timeline),
            fusion,
            recorder,
            parent,
        }
    }

    /// The outermost layer, through which data collectives run.
    pub fn collective(&self) -> &dyn Collective {
        self.top.as_ref()
    }

    /// The bare host transport under the middleware.
    pub fn transport(&self) -> &Arc<dyn Collective> {
        self.router.host()
    }

    /// The largest batch Fusion hands the transport in one call, in bytes.
    pub fn fusion_threshold(&self) -> usize {
        self.fusion.threshold()
    }

    /// The same stack over the sub-group of `members` (global ranks), `None` on a rank
    /// that is not one. It starts from this stack's threshold and then follows it: the
    /// process set's engine applies a change after a cycle its members agree on.
    pub fn split(&self, members: &[usize]) -> Result<Option<Stack>> {
        let Some(sub) = self.router.split_router(members)? else {
            return Ok(None);
        };
        let threshold = self.fusion_threshold();
        let parent = Some(self.fusion.clone());
        Ok(Some(Stack::wrap(
            sub,
            threshold,
            self.recorder.clone(),
            parent,
        )))
    }

    /// The threshold of the stack this one was split from, when it differs from this
    /// one's: the change the engine must have its members agree on before applying.
    pub(crate) fn followed_threshold(&self) -> Option<usize> {
        let wanted = self.parent.as_ref()?.threshold();
        (wanted != self.fusion_threshold()).then_some(wanted)
    }

    /// Changes the fusion threshold; every member must change it after the same cycle.
    pub(crate) fn set_fusion_threshold(&self, bytes: usize) {
        self.fusion.set_threshold(bytes);
    }
}
