//! The collectives the sweeps measure, and how their bandwidth is counted.

use clap::ValueEnum;
use hvd_core::OpKind;

/// The collective a sweep measures: the data operations of hvd-core's [`OpKind`] (a
/// barrier moves no bytes), as a command-line value with nccl-tests' bus factor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BenchOp {
    Allreduce,
    Allgather,
    Broadcast,
    Alltoall,
    Reducescatter,
}

impl BenchOp {
    /// The operation of the transport contract it measures.
    pub fn kind(self) -> OpKind {
        match self {
            BenchOp::Allreduce => OpKind::Allreduce,
            BenchOp::Allgather => OpKind::Allgather,
            BenchOp::Broadcast => OpKind::Broadcast,
            BenchOp::Alltoall => OpKind::Alltoall,
            BenchOp::Reducescatter => OpKind::Reducescatter,
        }
    }

    pub fn name(self) -> &'static str {
        self.kind().name()
    }

    /// nccl-tests' bus bandwidth factor: how much of the data each rank's link carries.
    pub fn bus_factor(self, np: usize) -> f64 {
        let n = np as f64;
        match self {
            BenchOp::Allreduce => 2.0 * (n - 1.0) / n,
            BenchOp::Allgather | BenchOp::Alltoall | BenchOp::Reducescatter => (n - 1.0) / n,
            BenchOp::Broadcast => 1.0,
        }
    }
}
