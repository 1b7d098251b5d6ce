//! An in-process reference transport: ranks are threads, one [`LocalCollective`] each.
//!
//! Every operation is an *exchange*: each rank posts what it contributes to a shared
//! board, waits until every rank has posted, and computes its own result from all
//! contributions, reducing in rank order with [`crate::kernels`]. That is slow (every rank
//! reduces everything) and obviously correct, which is the point: it is the yardstick for
//! middleware, the runtime, and the conformance suite itself.
//!
//! It is strict where real transports cannot afford to be: ranks that call different
//! operations, or disagree about dtypes or counts, all get an error instead of garbage.
//! Dropping a rank's collective marks it departed, and every rank waiting for it gets
//! [`Error::PeerLost`](crate::Error::PeerLost), which makes failure paths testable.

mod board;
mod collective;

pub use collective::{LocalCollective, LocalGroup};
