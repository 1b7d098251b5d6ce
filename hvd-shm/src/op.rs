//! Names of operations, for errors, and the codes by which ranks check that they run
//! the same one.

use hvd_core::OpKind;

/// hvd-core's [`OpKind`] with the allreduce split by algorithm: what a step publishes,
/// so that ranks running different algorithms are caught. Codes start at 1, so that the
/// zeroes of a fresh segment describe no operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Allreduce of tensors copied in whole, every rank reducing all of them.
    AllreduceWhole = 1,
    /// Allreduce of one tensor in shares, each rank reducing one.
    AllreduceSplit,
    Broadcast,
    Allgather,
    Alltoall,
    Reducescatter,
    Barrier,
}

impl Op {
    const ALL: [Op; 7] = [
        Op::AllreduceWhole,
        Op::AllreduceSplit,
        Op::Broadcast,
        Op::Allgather,
        Op::Alltoall,
        Op::Reducescatter,
        Op::Barrier,
    ];

    /// The operation of the transport contract this is.
    pub(crate) fn kind(self) -> OpKind {
        match self {
            Op::AllreduceWhole | Op::AllreduceSplit => OpKind::Allreduce,
            Op::Broadcast => OpKind::Broadcast,
            Op::Allgather => OpKind::Allgather,
            Op::Alltoall => OpKind::Alltoall,
            Op::Reducescatter => OpKind::Reducescatter,
            Op::Barrier => OpKind::Barrier,
        }
    }

    /// The code a step of this operation publishes; a broadcast includes its root, so
    /// ranks that disagree on it are caught.
    pub(crate) fn code(self, root: usize) -> u64 {
        self as u64 | (root as u64) << 8
    }

    /// How a published code reads in a message.
    pub(crate) fn describe(code: u64) -> String {
        let op = Self::ALL.into_iter().find(|op| *op as u64 == code & 0xff);
        match op {
            Some(Op::Broadcast) => format!("broadcast from root {}", code >> 8),
            Some(Op::AllreduceWhole) => "allreduce (copied whole)".into(),
            Some(Op::AllreduceSplit) => "allreduce (split in shares)".into(),
            Some(op) => op.kind().name().into(),
            None => format!("unknown operation code {code:#x}"),
        }
    }
}

/// The call a step belongs to, for errors.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'a> {
    pub(crate) op: Op,
    pub(crate) tensor: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_read_back_as_their_operation() {
        assert_eq!(Op::describe(Op::Broadcast.code(3)), "broadcast from root 3");
        assert_eq!(Op::describe(Op::Barrier.code(0)), "barrier");
        assert_eq!(Op::describe(0xee), "unknown operation code 0xee");
    }
}
