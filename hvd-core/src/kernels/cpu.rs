//! Picks the instruction set at run time. The build targets baseline x86-64 (SSE2), so the
//! fast kernels are compiled again with wider instruction sets enabled and the widest one
//! the CPU has is used: AVX2 doubles the vector width, AVX-512 doubles it again and packs
//! 32-bit lanes to 16 in one instruction (bf16). Other architectures run the portable
//! build.

use super::fast;
use crate::{DType, ReduceOp};

/// Defines `$isa::{reduce_into, scale, divide}`: the fast kernels compiled with
/// `$features` enabled.
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
macro_rules! compile_for {
    ($isa:ident, $features:literal) => {
        mod $isa {
            use super::fast;
            use crate::{DType, ReduceOp};

            #[target_feature(enable = $features)]
            pub(super) fn reduce_into(dtype: DType, op: ReduceOp, acc: &mut [u8], src: &[u8]) {
                fast::reduce_into(dtype, op, acc, src);
            }

            #[target_feature(enable = $features)]
            pub(super) fn scale(dtype: DType, data: &mut [u8], factor: f64) {
                fast::scale(dtype, data, factor);
            }

            #[target_feature(enable = $features)]
            pub(super) fn divide(dtype: DType, data: &mut [u8], ranks: usize) {
                fast::divide(dtype, data, ranks);
            }
        }
    };
}

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
compile_for!(avx512, "avx512f,avx512bw,avx512vl,avx2,f16c");
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
compile_for!(avx2, "avx2,f16c");

/// An instruction set that this CPU runs: values are only made by detection, which is
/// what makes running its kernels sound.
#[derive(Debug, Clone, Copy)]
pub(super) struct Isa(Kind);

#[derive(Debug, Clone, Copy)]
enum Kind {
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    Avx512,
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    Avx2,
    Portable,
}

impl Kind {
    /// Widest first.
    const ALL: &[Kind] = &[
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        Kind::Avx512,
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        Kind::Avx2,
        Kind::Portable,
    ];

    /// Whether the CPU runs this kind (the checks are cached loads).
    fn detected(self) -> bool {
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        use std::arch::is_x86_feature_detected as has;
        match self {
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Kind::Avx512 => has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("f16c"),
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Kind::Avx2 => has!("avx2") && has!("f16c"),
            Kind::Portable => true,
        }
    }
}

impl Isa {
    /// Every instruction set this CPU runs, widest first.
    pub(super) fn supported() -> impl Iterator<Item = Isa> {
        Kind::ALL.iter().copied().filter(|k| k.detected()).map(Isa)
    }

    /// The widest instruction set this CPU runs.
    pub(super) fn best() -> Isa {
        Isa::supported().next().unwrap_or(Isa(Kind::Portable))
    }

    pub(super) fn reduce_into(self, dtype: DType, op: ReduceOp, acc: &mut [u8], src: &[u8]) {
        match self.0 {
            // SAFETY: an `Isa` is only made for an instruction set the CPU was detected to run.
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Kind::Avx512 => unsafe { avx512::reduce_into(dtype, op, acc, src) },
            // SAFETY: as above.
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Kind::Avx2 => unsafe { avx2::reduce_into(dtype, op, acc, src) },
            Kind::Portable => fast::reduce_into(dtype, op, acc, src),
        }
    }

    pub(super) fn scale(self, dtype: DType, data: &mut [u8], factor: f64) {
        match self.0 {
            // SAFETY: an `Isa` is only made for an instruction set the CPU was detected to run.
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Kind::Avx512 => unsafe { avx512::scale(dtype, data, factor) },
            // SAFETY: as above.
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Kind::Avx2 => unsafe { avx2::scale(dtype, data, factor) },
            Kind::Portable => fast::scale(dtype, data, factor),
        }
    }

    pub(super) fn divide(self, dtype: DType, data: &mut [u8], ranks: usize) {
        match self.0 {
            // SAFETY: an `Isa` is only made for an instruction set the CPU was detected to run.
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Kind::Avx512 => unsafe { avx512::divide(dtype, data, ranks) },
            // SAFETY: as above.
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Kind::Avx2 => unsafe { avx2::divide(dtype, data, ranks) },
            Kind::Portable => fast::divide(dtype, data, ranks),
        }
    }
}
