//! Choosing decode threads and prefetch depth from what was measured: one thread's time
//! per image, and the training step's time when its batch is ready.

/// What the host allows one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TuneLimits {
    /// The host's cores.
    pub cores: usize,
    /// Ranks on this host.
    pub local_ranks: usize,
    /// The cores this rank may take: an equal share ([`even`](Self::even)) or its part
    /// of the host's cores by what each local rank needs ([`by_need`](Self::by_need)).
    pub share: usize,
    /// Bytes the batch buffers (threads + prefetch of them) may take.
    pub memory_budget: usize,
}

/// The batch buffers' default budget: 1 GiB.
const MEMORY_BUDGET: usize = 1 << 30;

impl TuneLimits {
    /// `cores` split evenly between `local_ranks`, which every rank computes alike from
    /// the job's local size, so none takes every core; 1 GiB of buffers.
    pub fn even(cores: usize, local_ranks: usize) -> Self {
        let local_ranks = local_ranks.max(1);
        TuneLimits {
            cores,
            local_ranks,
            share: (cores / local_ranks).max(1),
            memory_budget: MEMORY_BUDGET,
        }
    }

    /// `cores` split between the host's ranks by the threads each needs (`needs`, in
    /// local rank order; this rank is `me`), as [`share_cores`] does; 1 GiB of buffers.
    pub fn by_need(cores: usize, needs: &[usize], me: usize) -> Self {
        let shares = share_cores(cores, needs);
        TuneLimits {
            cores,
            local_ranks: needs.len().max(1),
            share: shares.get(me).copied().unwrap_or(1),
            memory_budget: MEMORY_BUDGET,
        }
    }

    /// This host's cores split evenly between `local_ranks`.
    pub fn host(local_ranks: usize) -> Self {
        TuneLimits::even(host_cores(), local_ranks)
    }

    /// This rank's share of the cores, at least one; an equal share of `cores` where
    /// `share` is 0 (limits written out by hand).
    pub fn cores_per_rank(&self) -> usize {
        match self.share {
            0 => (self.cores / self.local_ranks.max(1)).max(1),
            share => share,
        }
    }
}

/// The cores this process may run on.
pub fn host_cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Splits a host's `cores` between its ranks by the decode threads each needs (0 counts
/// as 1). When they fit, each rank gets its need and the spare cores go round from the
/// first rank. When they do not, each gets cores in proportion to its need, at least one:
/// a synchronous step waits for the rank that is shortest of data, and an equal fraction
/// of every rank's need is what makes the shortest rank least short. Every rank computes
/// the same split from the same needs.
pub fn share_cores(cores: usize, needs: &[usize]) -> Vec<usize> {
    let needs: Vec<u128> = needs.iter().map(|n| (*n).max(1) as u128).collect();
    let wanted: u128 = needs.iter().sum();
    let ranks = needs.len();
    if wanted <= cores as u128 {
        let spare = cores - wanted as usize;
        return needs
            .iter()
            .enumerate()
            .map(|(i, n)| *n as usize + spare / ranks + usize::from(i < spare % ranks))
            .collect();
    }
    if cores <= ranks {
        return vec![1; ranks];
    }
    let mut shares: Vec<usize> = needs
        .iter()
        .map(|n| ((cores as u128 * n / wanted) as usize).max(1))
        .collect();
    // Flooring leaves cores over and the floor of one core can take too many: a core
    // left over goes to the rank with the smallest fraction of its need, and one too
    // many comes from the rank with the largest (the first such rank on a tie).
    let below = |shares: &[usize], a: usize, b: usize| {
        (shares[a] as u128 * needs[b]).cmp(&(shares[b] as u128 * needs[a]))
    };
    loop {
        let total: usize = shares.iter().sum();
        if total < cores {
            let shortest = (0..ranks)
                .min_by(|a, b| below(&shares, *a, *b))
                .expect("more cores than ranks");
            shares[shortest] += 1;
        } else if total > cores {
            let richest = (0..ranks)
                .filter(|r| shares[*r] > 1)
                .min_by(|a, b| below(&shares, *b, *a))
                .expect("more cores than ranks, so one rank has two");
            shares[richest] -= 1;
        } else {
            return shares;
        }
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

impl Load {
    /// One batch's seconds on one decode thread.
    fn batch_latency(&self) -> f64 {
        self.batch_images.max(1.0) * self.seconds_per_image.max(1e-9)
    }

    /// The step's seconds when its batch is ready, never zero.
    fn step(&self) -> f64 {
        self.step_seconds.max(1e-6)
    }

    /// Decode threads that keep up with the step, with 20 % headroom: each thread fills
    /// a whole batch, so `k` threads deliver `k` batches in one batch's latency, and the
    /// step's demand is met with `k ≥ latency / step`.
    pub fn threads_needed(&self) -> usize {
        ((HEADROOM * self.batch_latency() / self.step()).ceil() as usize).max(1)
    }
}

/// Threads and prefetch for a load, and whether they keep up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tuning {
    pub threads: usize,
    /// The cores this rank was given ([`TuneLimits::share`]).
    pub share: usize,
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

/// [`Load::threads_needed`] threads within this rank's share of the cores. Prefetch
/// covers half a batch latency of jitter (at least two batches); threads and prefetch
/// stay within the memory budget.
pub fn plan(load: Load, limits: TuneLimits) -> Tuning {
    let per_image = load.seconds_per_image.max(1e-9);
    let (step, latency) = (load.step(), load.batch_latency());
    let threads_needed = load.threads_needed();
    // Every thread fills a buffer of its own: the budget bounds threads and prefetch.
    let by_memory = limits.memory_budget / load.batch_bytes.max(1);
    let threads = threads_needed
        .min(limits.cores_per_rank())
        .min(by_memory.saturating_sub(1).max(1));
    let wanted = ((0.5 * latency / step).ceil() as usize).max(2);
    let prefetch = wanted.min(by_memory.saturating_sub(threads)).max(1);
    Tuning {
        threads,
        share: limits.cores_per_rank(),
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
        TuneLimits::even(cores, local_ranks)
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

    #[test]
    fn needs_that_fit_are_met_and_the_spare_cores_go_round() {
        assert_eq!(share_cores(16, &[2, 6, 1, 3]), vec![3, 7, 2, 4]);
        assert_eq!(share_cores(4, &[0, 0]), vec![2, 2]);
        assert_eq!(share_cores(8, &[]), Vec::<usize>::new());
    }

    #[test]
    fn a_short_host_leaves_every_rank_the_same_fraction_of_its_need() {
        // 12 threads wanted of 8 cores: two thirds of each need.
        assert_eq!(share_cores(8, &[3, 9]), vec![2, 6]);
        // 8 × 2/11 and 8 × 9/11 floor to 1 and 6; the core left over goes to the rank
        // with the smaller fraction of its need (1 of 2 against 6 of 9).
        assert_eq!(share_cores(8, &[2, 9]), vec![2, 6]);
        // A tie goes to the first rank.
        assert_eq!(share_cores(7, &[4, 4, 4]), vec![3, 2, 2]);
        // Fewer cores than ranks: one each.
        assert_eq!(share_cores(2, &[5, 5, 5, 5]), vec![1, 1, 1, 1]);
        // The floor of one core each takes one too many, given back by the richest.
        assert_eq!(share_cores(16, &[1, 1, 1000]), vec![1, 1, 14]);
        // Needs too large to add up in a usize still split.
        assert_eq!(share_cores(4, &[usize::MAX, usize::MAX]), vec![2, 2]);
        for (cores, needs) in [(8, vec![3, 9]), (7, vec![4, 4, 4]), (16, vec![1, 30, 2])] {
            assert_eq!(share_cores(cores, &needs).iter().sum::<usize>(), cores);
        }
    }

    #[test]
    fn a_rank_that_needs_more_than_the_rest_gets_more_threads() {
        let light = Load {
            seconds_per_image: 0.001,
            batch_images: 64.0,
            step_seconds: 0.1,
            batch_bytes: 38 * MB,
        };
        let heavy = Load {
            seconds_per_image: 0.007,
            ..light
        };
        assert_eq!((light.threads_needed(), heavy.threads_needed()), (1, 6));
        let needs = [light.threads_needed(), heavy.threads_needed()];
        // An even split of 8 cores gives the heavy rank 4 of the 6 it needs.
        assert_eq!(plan(heavy, limits(8, 2)).threads, 4);
        // Limits written out by hand without a share split evenly.
        let by_hand = TuneLimits {
            cores: 8,
            local_ranks: 2,
            share: 0,
            memory_budget: 1 << 30,
        };
        assert_eq!(plan(heavy, by_hand).threads, 4);
        let t = plan(heavy, TuneLimits::by_need(8, &needs, 1));
        assert_eq!((t.threads, t.threads_needed), (6, 6));
        assert!(t.keeps_up());
        assert_eq!(plan(light, TuneLimits::by_need(8, &needs, 0)).threads, 1);
    }
}
