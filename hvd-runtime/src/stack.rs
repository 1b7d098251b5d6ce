//! The middleware stack, built in one place you can read top to bottom.
//!
//! Public so that tests (and anyone composing their own runtime) can run the very stack
//! the engine runs its data collectives through over a transport of their choosing.

use std::sync::Arc;

use hvd_core::Collective;
use hvd_fusion::Fusion;
use hvd_timeline::{Recorder, Timeline};

/// A transport wrapped in hvd's middleware (`Timeline<Fusion<transport>>`), with handles
/// to the layers the runtime adjusts while it runs.
pub struct Stack {
    top: Box<dyn Collective>,
    fusion: Arc<Fusion<Arc<dyn Collective>>>,
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
        // Tensor Fusion: a cycle's batch of small tensors becomes a few large collectives.
        // It reports its copies into and out of the fusion buffer to the timeline.
        let fusion =
            Arc::new(Fusion::new(transport, fusion_threshold).with_tracer(recorder.clone()));
        // Timeline: every collective as a span on each of its tensors' rows.
        let timeline = Timeline::new(fusion.clone(), recorder.clone());
        Stack {
            top: Box::new(timeline),
            fusion,
        }
    }

    /// The outermost layer, through which data collectives run.
    pub fn collective(&self) -> &dyn Collective {
        self.top.as_ref()
    }

    /// Changes the fusion threshold (the autotuner does, in the same cycle on every rank).
    pub(crate) fn set_fusion_threshold(&self, bytes: usize) {
        self.fusion.set_threshold(bytes);
    }
}
