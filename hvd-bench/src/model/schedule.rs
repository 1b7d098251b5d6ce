//! One training batch, simulated: the backward pass releases each layer's gradients
//! (the schedule `hvd-bench synthetic` follows), and the runtime sends what is ready as
//! one fused allreduce at a time, in order. The batch ends when the compute and the last
//! allreduce are both done; what the allreduces fail to hide is the cost of scaling.

use super::ring::Ring;

/// A batch's compute and its gradients: when each is ready (seconds from the batch's
/// start, in order) and its bytes on the wire.
#[derive(Debug, Clone)]
pub struct Batch {
    pub compute: f64,
    pub gradients: Vec<(f64, f64)>,
}

/// How the runtime sends gradients.
#[derive(Debug, Clone, Copy)]
pub struct Runtime {
    /// Tensor Fusion's buffer in bytes; 0 sends every tensor alone.
    pub fusion_threshold: f64,
    /// Each fused allreduce's negotiation, in ring steps of latency (a small allgather
    /// among the ranks before the data moves).
    pub negotiation_steps: f64,
    /// Seconds per byte on the wire that training adds to the bare allreduce: copies into
    /// and out of the fusion buffer, compression's casts, hand-offs to the background
    /// thread, and on the simulated cluster, ranks sharing the host's cores.
    pub per_byte: f64,
}

impl Batch {
    /// Seconds from the start of the batch to its end on `n` ranks.
    pub fn time(&self, ring: &Ring, n: usize, runtime: Runtime) -> f64 {
        if n <= 1 {
            return self.compute;
        }
        let negotiation = runtime.negotiation_steps * ring.alpha;
        let allreduce = |bytes: f64| ring.time(n, bytes) + bytes * runtime.per_byte;
        let mut free = 0.0f64;
        let mut next = 0;
        while next < self.gradients.len() {
            // A negotiation round takes everything ready by its start; then its tensors
            // go out in order, packed into fusion buffers (or one by one without fusion).
            let start = free.max(self.gradients[next].0);
            let mut done = start + negotiation;
            let mut buffer = 0.0;
            while next < self.gradients.len() && self.gradients[next].0 <= start {
                let size = self.gradients[next].1;
                if buffer > 0.0 && buffer + size > runtime.fusion_threshold {
                    done += allreduce(buffer);
                    buffer = 0.0;
                }
                buffer += size;
                next += 1;
            }
            free = done + allreduce(buffer);
        }
        free.max(self.compute)
    }

    /// Compute over the batch's time: the scaling efficiency the runs measure.
    pub fn efficiency(&self, ring: &Ring, n: usize, runtime: Runtime) -> f64 {
        self.compute / self.time(ring, n, runtime)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RING: Ring = Ring {
        alpha: 0.0,
        beta: 1e-9,
    };
    const FUSED: Runtime = Runtime {
        fusion_threshold: 1e12,
        negotiation_steps: 0.0,
        per_byte: 0.0,
    };

    #[test]
    fn communication_hidden_by_compute_costs_nothing() {
        // 1 MB ready at 0.1 s of a 1 s batch: 1.75 ms on 8 ranks, long done by the end.
        let batch = Batch {
            compute: 1.0,
            gradients: vec![(0.1, 1e6)],
        };
        assert_eq!(batch.efficiency(&RING, 8, FUSED), 1.0);
        assert_eq!(batch.efficiency(&RING, 1, FUSED), 1.0);
    }

    #[test]
    fn what_cannot_hide_extends_the_batch() {
        // 1 GB ready at 0.5 s: 2 (n-1)/n x 1 s = 1.5 s on 4 ranks, ending at 2 s.
        let batch = Batch {
            compute: 1.0,
            gradients: vec![(0.5, 1e9)],
        };
        assert!((batch.time(&RING, 4, FUSED) - 2.0).abs() < 1e-9);
        assert!((batch.efficiency(&RING, 4, FUSED) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn fusion_saves_the_latency_of_every_tensor_but_one() {
        let ring = Ring {
            alpha: 1e-3,
            beta: 0.0,
        };
        let batch = Batch {
            compute: 0.0,
            gradients: vec![(0.0, 1.0); 10],
        };
        // 2 ranks: 2 steps of 1 ms per allreduce; one fused, or ten alone.
        assert!((batch.time(&ring, 2, FUSED) - 2e-3).abs() < 1e-12);
        let alone = Runtime {
            fusion_threshold: 0.0,
            ..FUSED
        };
        assert!((batch.time(&ring, 2, alone) - 20e-3).abs() < 1e-12);
        // The runtime's own cost per byte adds to each allreduce.
        let costly = Runtime {
            per_byte: 1e-4,
            ..FUSED
        };
        assert!((batch.time(&ring, 2, costly) - 3e-3).abs() < 1e-12);
    }
}
