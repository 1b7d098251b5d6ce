//! Stall attribution: how much of an epoch the job lost because some rank waited for
//! its data, and which rank it was.
//!
//! A rank that waits for its batch reaches the step's allreduce late, and every other
//! rank waits for it there: a per-rank profiler sees that wait as communication. Here
//! every rank times each step with a [`StepClock`] (the wait for data, the time blocked
//! in collectives, the step's wall time), the ranks exchange these few numbers once at
//! the end of the epoch, and [`attribute()`] splits every step of every rank into four
//! parts that add up to its wall time:
//!
//! - **data**: blocked waiting for the next batch;
//! - **compute**: everything else outside collectives (forward, backward, optimizer);
//! - **waiting for others**: the part of the collectives spent until the last rank
//!   arrived;
//! - **own communication**: the rest of the collectives.
//!
//! Every rank leaves step `k - 1`'s allreduce at about the same moment, so the rank that
//! arrives last at step `k`'s is the one with the most data wait plus compute, and the
//! others wait for the difference; no clocks need to agree. Without data waits the last
//! rank would have arrived after the most compute of any rank, so the step lost
//! `max(data + compute) - max(compute)` to data; that loss, summed over the epoch and
//! divided by its wall time, is the job's data-bound share (what synthetic input would
//! have saved), and it is charged to the rank that was last.

mod attribute;
mod clock;

pub use attribute::{RankParts, StallReport, attribute};
pub use clock::{DATA_ROW, DATA_WAIT, StepClock, StepTimes};
