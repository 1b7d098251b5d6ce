//! What a rank asks the job to do with one named tensor.

use std::fmt;

use hvd_core::{Compression, DType, Device, Reduction};

/// Which collective, without its fields: for names, wire codes and the checks that only
/// need the kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum OpKind {
    Allreduce,
    Allgather,
    Broadcast,
    Alltoall,
    Reducescatter,
    Barrier,
    Join,
    AddProcessSet,
    RemoveProcessSet,
    Adasum,
}

impl OpKind {
    pub const ALL: [OpKind; 10] = [
        OpKind::Allreduce,
        OpKind::Allgather,
        OpKind::Broadcast,
        OpKind::Alltoall,
        OpKind::Reducescatter,
        OpKind::Barrier,
        OpKind::Join,
        OpKind::AddProcessSet,
        OpKind::RemoveProcessSet,
        OpKind::Adasum,
    ];

    pub fn name(self) -> &'static str {
        match self {
            OpKind::Allreduce => "allreduce",
            OpKind::Allgather => "allgather",
            OpKind::Broadcast => "broadcast",
            OpKind::Alltoall => "alltoall",
            OpKind::Reducescatter => "reducescatter",
            OpKind::Barrier => "barrier",
            OpKind::Join => "join",
            OpKind::AddProcessSet => "add_process_set",
            OpKind::RemoveProcessSet => "remove_process_set",
            OpKind::Adasum => "adasum",
        }
    }

    pub fn code(self) -> u8 {
        Self::ALL.iter().position(|k| *k == self).unwrap_or(0) as u8
    }

    pub fn from_code(code: u8) -> Option<OpKind> {
        Self::ALL.get(code as usize).copied()
    }

    /// Whether the first dimension may differ between ranks.
    pub fn first_dim_varies(self) -> bool {
        matches!(self, OpKind::Allgather | OpKind::Alltoall)
    }

    /// Whether the op can run while some ranks have joined (they contribute zeros).
    pub fn allowed_while_joined(self) -> bool {
        matches!(self, OpKind::Allreduce | OpKind::Join)
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The collective a request is for, with the fields only it has. Ranks must agree on
/// all of them (see `response.rs`).
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
            Op::Allreduce { .. } => OpKind::Allreduce,
            Op::Allgather => OpKind::Allgather,
            Op::Broadcast { .. } => OpKind::Broadcast,
            Op::Alltoall { .. } => OpKind::Alltoall,
            Op::Reducescatter { .. } => OpKind::Reducescatter,
            Op::Barrier => OpKind::Barrier,
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

/// The stack call a batch makes.
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
