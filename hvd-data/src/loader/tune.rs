//! Choosing decode threads and prefetch depth from what was measured: one thread's time
//! per image, and the training step's time when its batch is ready.

/// What the host allows one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TuneLimits {
    /// The host's cores.
    pub cores: usize,
    /// Ranks on this host: each takes an equal share of the cores, which every rank
    /// computes alike from the job's local size, so none takes every core.
    pub local_ranks: usize,
    /// Bytes the batch buffers (threads + prefetch of them) may take.
    pub memory_budget: usize,
}

impl TuneLimits {
    /// This host's cores shared by `local_ranks`, 1 GiB of buffers.
    pub fn host(local_ranks: usize) -> Self {
        TuneLimits {
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            local_ranks: local_ranks.max(1),
            memory_budget: 1 << 30,
        }
    }

    /// This rank's share of the cores, at least one.
    pub fn cores_per_rank(&self) -> usize {
        (self.cores / self.local_ranks.max(1)).max(1)
    }
}

/// The measured load, per rank.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Load {
    /// One decode thread's seconds per image (read, decode, augment).
    pub seconds_per_image: f64,
    /// Images in a batch.
    pub batch_images: f64,
    /// The step's seconds when its batch is ready: compute and communication.
    pub step_seconds: f64,
    /// Bytes of one batch buffer.
    pub batch_bytes: usize,
}

/// Threads and prefetch for a load, and whether they keep up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tuning {
    pub threads: usize,
    pub prefetch: usize,
    /// Threads the load needs (with headroom), which may exceed `threads`.
    pub threads_needed: usize,
    /// Images a second the chosen threads make (C, per rank).
    pub capacity: f64,
    /// Images a second the training step takes (D, per rank).
    pub demand: f64,
}

impl Tuning {
    /// Whether the loader keeps up with the step.
    pub fn keeps_up(&self) -> bool {
        self.capacity >= self.demand
    }

    /// The share of each step the rank will wait for data if it does not keep up.
    pub fn expected_data_bound(&self) -> f64 {
        if self.keeps_up() || self.demand <= 0.0 {
            0.0
        } else {
            1.0 - self.capacity / self.demand
        }
    }
}

/// Capacity above the demand the threads are chosen for: decode times vary from image
/// to image, and the host's other work takes cores now and then.
const HEADROOM: f64 = 1.2;

/// Each decode thread fills a whole batch, so a batch takes `batch × seconds per image`
/// on its thread, and `k` threads deliver `k` batches in that time: the step's demand
/// is met with `k ≥ batch latency / step`. Prefetch covers half a batch latency of
/// jitter (at least two batches); threads and prefetch stay within the memory budget.
pub fn plan(load: Load, limits: TuneLimits) -> Tuning {
    let per_image = load.seconds_per_image.max(1e-9);
    let step = load.step_seconds.max(1e-6);
    let latency = load.batch_images.max(1.0) * per_image;
    let threads_needed = ((HEADROOM * latency / step).ceil() as usize).max(1);
    // Every thread fills a buffer of its own: the budget bounds threads and prefetch.
    let by_memory = limits.memory_budget / load.batch_bytes.max(1);
    let threads = threads_needed
        .min(limits.cores_per_rank())
        .min(by_memory.saturating_sub(1).max(1));
    let wanted = ((0.5 * latency / step).ceil() as usize).max(2);
    let prefetch = wanted.min(by_memory.saturating_sub(threads)).max(1);
    Tuning {
        threads,
        prefetch,
        threads_needed,
        capacity: threads as f64 / per_image,
        demand: load.batch_images.max(1.0) / step,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: usize = 1 << 20;

    fn limits(cores: usize, local_ranks: usize) -> TuneLimits {
        TuneLimits {
            cores,
            local_ranks,
            memory_budget: 1 << 30,
        }
    }

    #[test]
    fn threads_follow_the_batch_latency_over_the_step() {
        // 64 images at 5 ms: a batch takes 0.32 s on one thread; the step takes 0.1 s.
        let load = Load {
            seconds_per_image: 0.005,
            batch_images: 64.0,
            step_seconds: 0.1,
            batch_bytes: 38 * MB,
        };
        let t = plan(load, limits(16, 1));
        assert_eq!((t.threads_needed, t.threads), (4, 4)); // ceil(1.2 × 3.2)
        assert_eq!(t.prefetch, 2);
        assert!((t.capacity - 800.0).abs() < 1e-6 && (t.demand - 640.0).abs() < 1e-6);
        assert!(t.keeps_up() && t.expected_data_bound() == 0.0);
    }

    #[test]
    fn local_ranks_share_the_cores_and_a_short_host_says_how_short() {
        let load = Load {
            seconds_per_image: 0.005,
            batch_images: 64.0,
            step_seconds: 0.05,
            batch_bytes: 38 * MB,
        };
        // Four ranks on 8 cores: 2 threads each, where 8 are needed.
        let t = plan(load, limits(8, 4));
        assert_eq!((t.threads_needed, t.threads), (8, 2));
        assert!(!t.keeps_up());
        assert!((t.expected_data_bound() - (1.0 - 400.0 / 1280.0)).abs() < 1e-9);
        // Half a batch latency of jitter is 3.2 steps: 4 batches ahead.
        assert_eq!(t.prefetch, 4);
    }

    #[test]
    fn the_memory_budget_bounds_the_prefetch_but_leaves_one() {
        let load = Load {
            seconds_per_image: 0.01,
            batch_images: 256.0,
            step_seconds: 0.1,
            batch_bytes: 150 * MB,
        };
        let t = plan(load, limits(64, 1));
        // 1 GiB holds 6 buffers of 150 MiB: 5 of the 31 threads needed, one ahead.
        assert_eq!((t.threads_needed, t.threads, t.prefetch), (31, 5, 1));
        assert!(!t.keeps_up());
        let roomy = plan(
            load,
            TuneLimits {
                memory_budget: 8 << 30,
                ..limits(64, 1)
            },
        );
        // ceil(0.5 × 2.56 / 0.1) ahead, within 54 buffers.
        assert_eq!((roomy.threads, roomy.prefetch), (31, 13));
    }

    #[test]
    fn nothing_measured_still_gives_one_thread_and_two_ahead() {
        let t = plan(
            Load {
                seconds_per_image: 0.0,
                batch_images: 0.0,
                step_seconds: 0.0,
                batch_bytes: 0,
            },
            limits(1, 3),
        );
        assert_eq!((t.threads, t.prefetch), (1, 2));
    }
}
