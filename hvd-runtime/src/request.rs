//! What a rank asks the job to do with one named tensor.

use std::fmt;

use hvd_core::{Compression, DType, Device, OpKind as CollectiveKind, Reduction};

/// Which operation a request is for, without its fields: for names, wire codes and the
/// checks that only need the kind. It extends hvd-core's [`OpKind`](hvd_core::OpKind)
/// kinds, which keep their codes, with the operations only negotiation knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum OpKind {
    /// An operation of the transport contract, run through the stack.
    Collective(CollectiveKind),
    Join,
    AddProcessSet,
    RemoveProcessSet,
    /// An allreduce that combines with Adasum (several calls of the stack).
    Adasum,
}

/// The kinds only the runtime has.
const RUNTIME_ONLY: [OpKind; 4] = [
    OpKind::Join,
    OpKind::AddProcessSet,
    OpKind::RemoveProcessSet,
    OpKind::Adasum,
];

impl OpKind {
    pub const ALLREDUCE: OpKind = OpKind::Collective(CollectiveKind::Allreduce);

    /// Every kind, in the order of their codes.
    pub fn all() -> impl Iterator<Item = OpKind> {
        CollectiveKind::ALL
            .into_iter()
            .map(OpKind::Collective)
            .chain(RUNTIME_ONLY)
    }

    pub fn name(self) -> &'static str {
        match self {
            OpKind::Collective(op) => op.name(),
            OpKind::Join => "join",
            OpKind::AddProcessSet => "add_process_set",
            OpKind::RemoveProcessSet => "remove_process_set",
            OpKind::Adasum => "adasum",
        }
    }

    /// The byte that stands for the kind in a negotiation message: hvd-core's code for a
    /// collective, the codes after the last of those for the rest.
    pub fn code(self) -> u8 {
        match self {
            OpKind::Collective(op) => op.code(),
            OpKind::Join => 7,
            OpKind::AddProcessSet => 8,
            OpKind::RemoveProcessSet => 9,
            OpKind::Adasum => 10,
        }
    }

    pub fn from_code(code: u8) -> Option<OpKind> {
        Self::all().find(|kind| kind.code() == code)
    }

    /// Whether the first dimension may differ between ranks.
    pub fn first_dim_varies(self) -> bool {
        matches!(
            self,
            OpKind::Collective(CollectiveKind::Allgather | CollectiveKind::Alltoall)
        )
    }

    /// Whether the op can run while some ranks have joined (they contribute zeros).
    pub fn allowed_while_joined(self) -> bool {
        matches!(self, OpKind::ALLREDUCE | OpKind::Join)
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The collective a request is for, with the fields only it has. Ranks must agree on
/// all of them (see `response.rs`). Beside hvd-core's [`Operation`](hvd_core::Operation),
/// which borrows one call's tensors, this is the owned form that ranks send each other.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Op {
    Allreduce {
        reduction: Reduction,
        /// How float tensors travel (narrowed to 16 bits, or as they are).
        compression: Compression,
    },
    Allgather,
    Broadcast {
        root: usize,
    },
    Alltoall {
        /// Rows sent to each rank.
        splits: Vec<usize>,
    },
    Reducescatter {
        reduction: Reduction,
    },
    Barrier,
    Join,
    AddProcessSet {
        /// Global ranks of the new set.
        members: Vec<usize>,
    },
    RemoveProcessSet {
        id: usize,
    },
    /// An allreduce that combines with Adasum instead of a reduce op.
    Adasum,
}

impl Op {
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Allreduce { .. } => OpKind::ALLREDUCE,
            Op::Allgather => OpKind::Collective(CollectiveKind::Allgather),
            Op::Broadcast { .. } => OpKind::Collective(CollectiveKind::Broadcast),
            Op::Alltoall { .. } => OpKind::Collective(CollectiveKind::Alltoall),
            Op::Reducescatter { .. } => OpKind::Collective(CollectiveKind::Reducescatter),
            Op::Barrier => OpKind::Collective(CollectiveKind::Barrier),
            Op::Join => OpKind::Join,
            Op::AddProcessSet { .. } => OpKind::AddProcessSet,
            Op::RemoveProcessSet { .. } => OpKind::RemoveProcessSet,
            Op::Adasum => OpKind::Adasum,
        }
    }

    /// What makes responses run as one batch through the stack: allreduces with one
    /// reduction, broadcasts from one root, Adasum. `None` for ops that run alone.
    pub fn batch_key(&self) -> Option<BatchKey> {
        match *self {
            Op::Allreduce { reduction, .. } => Some(BatchKey::Allreduce(reduction)),
            Op::Broadcast { root } => Some(BatchKey::Broadcast(root)),
            Op::Adasum => Some(BatchKey::Adasum),
            _ => None,
        }
    }
}

/// The stack call a batch makes: an [`Op`] without what may differ inside one batch
/// (an allreduce's compression), so that neighbours compare by it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum BatchKey {
    Allreduce(Reduction),
    Broadcast(usize),
    /// [`hvd_core::adasum::allreduce`] over the stack.
    Adasum,
}

/// A tensor's name. Shared, not copied: one name travels from the submission through the
/// queue, the pending table, the response cache and back to the handle every step.
pub(crate) type Name = std::sync::Arc<str>;

/// One rank's request for one named tensor: everything the ranks must agree on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Request {
    pub name: Name,
    pub op: Op,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub device: Device,
}

impl Request {
    /// A request for a tensor in host memory.
    pub fn new(name: impl Into<Name>, op: Op, dtype: DType, shape: Vec<usize>) -> Self {
        Request {
            name: name.into(),
            op,
            dtype,
            shape,
            device: Device::Cpu,
        }
    }

    /// A request of an operation without a tensor (barrier, join, process sets).
    pub fn control(name: impl Into<Name>, op: Op) -> Self {
        Request::new(name, op, DType::U8, Vec::new())
    }

    pub fn kind(&self) -> OpKind {
        self.op.kind()
    }

    /// Rows (the first dim; 1 for a scalar).
    pub fn rows(&self) -> usize {
        self.shape.first().copied().unwrap_or(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collectives_keep_their_core_codes_and_every_code_is_one_kind() {
        for op in CollectiveKind::ALL {
            assert_eq!(OpKind::Collective(op).code(), op.code());
        }
        let kinds: Vec<OpKind> = OpKind::all().collect();
        for kind in &kinds {
            assert_eq!(OpKind::from_code(kind.code()), Some(*kind), "{kind}");
        }
        let mut codes: Vec<u8> = kinds.iter().map(|k| k.code()).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), kinds.len(), "codes {codes:?}");
        assert_eq!(OpKind::from_code(0), None);
        assert_eq!(OpKind::from_code(11), None);
    }
}
