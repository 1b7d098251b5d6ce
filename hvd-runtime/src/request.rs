//! What a rank asks the job to do with one named tensor.

use std::fmt;

use hvd_core::{Compression, DType, Device, ReduceOp, Reduction};

/// The collective a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum OpKind {
    Allreduce,
    Allgather,
    Broadcast,
    Alltoall,
    Reducescatter,
    Barrier,
    Join,
    /// Create a process set of the ranks in `Request::splits`.
    AddProcessSet,
    /// Remove the process set whose id is `Request::root`.
    RemoveProcessSet,
}

impl OpKind {
    pub const ALL: [OpKind; 9] = [
        OpKind::Allreduce,
        OpKind::Allgather,
        OpKind::Broadcast,
        OpKind::Alltoall,
        OpKind::Reducescatter,
        OpKind::Barrier,
        OpKind::Join,
        OpKind::AddProcessSet,
        OpKind::RemoveProcessSet,
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

/// One rank's request for one named tensor: everything the ranks must agree on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Request {
    pub name: String,
    pub kind: OpKind,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub device: Device,
    pub reduction: Reduction,
    /// Allreduce: how float tensors travel (narrowed to 16 bits, or as they are).
    pub compression: Compression,
    /// Broadcast root (or the process set id to remove).
    pub root: usize,
    /// Alltoall: rows sent to each rank. AddProcessSet: the member ranks.
    pub splits: Vec<usize>,
}

impl Request {
    /// A request with neutral values for the fields its op does not use.
    pub fn new(name: impl Into<String>, kind: OpKind, dtype: DType, shape: Vec<usize>) -> Self {
        Request {
            name: name.into(),
            kind,
            dtype,
            shape,
            device: Device::Cpu,
            reduction: Reduction::new(ReduceOp::Sum),
            compression: Compression::None,
            root: 0,
            splits: Vec::new(),
        }
    }

    /// Rows (the first dim; 1 for a scalar).
    pub fn rows(&self) -> usize {
        self.shape.first().copied().unwrap_or(1)
    }
}
