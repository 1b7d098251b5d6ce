//! The monotonic clock every event is stamped with.

use std::sync::OnceLock;
use std::time::Instant;

/// The process's time origin: the first time anything in the process read this clock.
/// Ranks that are threads of one process share it, so their clocks agree exactly; ranks in
/// different processes are brought onto rank 0's clock by
/// [`align_clocks`](crate::align_clocks).
static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds since the process's time origin, from a monotonic clock (wall-clock jumps
/// would tear spans apart).
pub(crate) fn now_ns() -> u64 {
    let epoch = EPOCH.get_or_init(Instant::now);
    // Saturates after 584 years of uptime.
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}
