//! The middleware stack, built in one place you can read top to bottom.

use std::sync::Arc;

use hvd_core::Collective;
use hvd_fusion::Fusion;

use crate::runtime::Config;

/// A transport wrapped in hvd's middleware, with handles to the layers the runtime
/// adjusts while it runs.
pub(crate) struct Stack {
    top: Box<dyn Collective>,
    fusion: Arc<Fusion<Arc<dyn Collective>>>,
}

impl Stack {
    /// Wraps `transport`, innermost first.
    pub fn build(transport: Arc<dyn Collective>, config: &Config) -> Stack {
        // Tensor Fusion: a cycle's batch of small tensors becomes a few large collectives.
        let fusion = Arc::new(Fusion::new(transport, config.fusion_threshold));
        Stack {
            top: Box::new(fusion.clone()),
            fusion,
        }
    }

    /// The outermost layer, through which data collectives run.
    pub fn collective(&self) -> &dyn Collective {
        self.top.as_ref()
    }

    /// Changes the fusion threshold (the autotuner does, in the same cycle on every rank).
    pub fn set_fusion_threshold(&self, bytes: usize) {
        self.fusion.set_threshold(bytes);
    }
}
