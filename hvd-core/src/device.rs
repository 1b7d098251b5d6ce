//! Where tensor memory lives.

use std::fmt;

/// The memory a tensor's bytes live in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Device {
    /// Host memory.
    Cpu,
    /// Memory of the CUDA device with this ordinal.
    Cuda(u32),
}

impl Device {
    /// Whether both are memory of the same kind of device (both the host, or both CUDA
    /// devices, whatever their ordinals): what ranks must agree on for one tensor, as
    /// each rank drives its own GPU.
    pub fn same_kind(self, other: Device) -> bool {
        matches!(
            (self, other),
            (Device::Cpu, Device::Cpu) | (Device::Cuda(_), Device::Cuda(_))
        )
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(ordinal) => write!(f, "cuda:{ordinal}"),
        }
    }
}
