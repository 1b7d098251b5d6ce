//! The store keys through which ranks tell their launcher how they are doing.

use hvd_core::Store;
use hvd_core::driver::blame;

/// The store counter every rank adds 1 to once its transport is connected.
pub const CHECKIN_KEY: &str = "hvd.checkin";

/// The store key rank `rank` sets once its transport is connected.
pub fn checkin_key(rank: usize) -> String {
    format!("{CHECKIN_KEY}.{rank}")
}

/// The store key where rank `reporter` names the global rank it lost.
pub fn lost_key(reporter: usize) -> String {
    format!("hvd.lost.{reporter}")
}

/// The global rank `reporter` said it lost, if it said so.
pub fn lost_by(store: &dyn Store, reporter: usize) -> Option<usize> {
    blame::posted_rank(store, &lost_key(reporter))
}
