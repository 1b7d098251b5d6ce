//! One call of the [`Collective`] trait as a value: which operation ([`OpKind`]) and its
//! arguments ([`Operation`]), so that code which treats every operation alike (tracing,
//! routing by device, reporting failures) is written once.

use crate::{Collective, Device, Reduction, Result, Tensor, TensorMut};

/// Which operation of the [`Collective`] trait a call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum OpKind {
    Allreduce = 1,
    Broadcast = 2,
    Allgather = 3,
    Alltoall = 4,
    Reducescatter = 5,
    Barrier = 6,
}

impl OpKind {
    /// Every operation, in the order of their codes.
    pub const ALL: [OpKind; 6] = [
        OpKind::Allreduce,
        OpKind::Broadcast,
        OpKind::Allgather,
        OpKind::Alltoall,
        OpKind::Reducescatter,
        OpKind::Barrier,
    ];

    /// The lower-case name used in messages (`"allreduce"`).
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Allreduce => "allreduce",
            OpKind::Broadcast => "broadcast",
            OpKind::Allgather => "allgather",
            OpKind::Alltoall => "alltoall",
            OpKind::Reducescatter => "reducescatter",
            OpKind::Barrier => "barrier",
        }
    }

    /// The byte that stands for the operation in a transport's frames.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The operation a frame's byte stands for, if any.
    pub fn from_code(code: u8) -> Option<OpKind> {
        Self::ALL.into_iter().find(|op| op.code() == code)
    }
}

impl std::fmt::Display for OpKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The arguments of one call of a data operation or barrier of the [`Collective`] trait.
///
/// `'c` is the call's borrow of its arguments and `'t` the lifetime of the tensors it
/// writes; inputs are only read, so they are borrowed for the call alone.
#[derive(Debug)]
pub enum Operation<'c, 't> {
    Allreduce {
        tensors: &'c mut [TensorMut<'t>],
        reduction: Reduction,
    },
    Broadcast {
        tensors: &'c mut [TensorMut<'t>],
        root: usize,
    },
    Allgather {
        input: &'c Tensor<'c>,
        output: &'c mut TensorMut<'t>,
        counts: &'c [usize],
    },
    Alltoall {
        input: &'c Tensor<'c>,
        send_counts: &'c [usize],
        output: &'c mut TensorMut<'t>,
        recv_counts: &'c [usize],
    },
    Reducescatter {
        input: &'c Tensor<'c>,
        output: &'c mut TensorMut<'t>,
        counts: &'c [usize],
        reduction: Reduction,
    },
    Barrier,
}

impl Operation<'_, '_> {
    /// Which operation this is.
    pub fn kind(&self) -> OpKind {
        match self {
            Operation::Allreduce { .. } => OpKind::Allreduce,
            Operation::Broadcast { .. } => OpKind::Broadcast,
            Operation::Allgather { .. } => OpKind::Allgather,
            Operation::Alltoall { .. } => OpKind::Alltoall,
            Operation::Reducescatter { .. } => OpKind::Reducescatter,
            Operation::Barrier => OpKind::Barrier,
        }
    }

    /// The device and name of the call's first tensor (the input of a single-tensor
    /// operation); `None` for a barrier or an empty batch. A call's tensors share one
    /// device: the engine batches tensors of one device only.
    pub fn first_tensor(&self) -> Option<(Device, &str)> {
        match self {
            Operation::Allreduce { tensors, .. } | Operation::Broadcast { tensors, .. } => {
                tensors.first().map(|t| (t.device(), t.name()))
            }
            Operation::Allgather { input, .. }
            | Operation::Alltoall { input, .. }
            | Operation::Reducescatter { input, .. } => Some((input.device(), input.name())),
            Operation::Barrier => None,
        }
    }

    /// Runs the call on `collective`.
    pub fn run<C: Collective + ?Sized>(self, collective: &C) -> Result<()> {
        match self {
            Operation::Allreduce { tensors, reduction } => collective.allreduce(tensors, reduction),
            Operation::Broadcast { tensors, root } => collective.broadcast(tensors, root),
            Operation::Allgather {
                input,
                output,
                counts,
            } => collective.allgather(input, output, counts),
            Operation::Alltoall {
                input,
                send_counts,
                output,
                recv_counts,
            } => collective.alltoall(input, send_counts, output, recv_counts),
            Operation::Reducescatter {
                input,
                output,
                counts,
                reduction,
            } => collective.reducescatter(input, output, counts, reduction),
            Operation::Barrier => collective.barrier(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_are_none() {
        for op in OpKind::ALL {
            assert_eq!(OpKind::from_code(op.code()), Some(op));
        }
        assert_eq!(OpKind::from_code(0), None);
        assert_eq!(OpKind::from_code(7), None);
        assert_eq!(OpKind::Reducescatter.to_string(), "reducescatter");
    }
}
