//! Names of operations, for errors, and the codes by which ranks check that they run
//! the same one.

/// An operation, with the algorithm where the transport has two. Codes start at 1, so
/// that the zeroes of a fresh segment describe no operation.
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

    /// The operation's name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::AllreduceWhole | Op::AllreduceSplit => "allreduce",
            Op::Broadcast => "broadcast",
            Op::Allgather => "allgather",
            Op::Alltoall => "alltoall",
            Op::Reducescatter => "reducescatter",
            Op::Barrier => "barrier",
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
            Some(op) => op.name().into(),
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
