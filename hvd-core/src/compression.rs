//! Gradient compression, as Horovod's `Compression.fp16`: float tensors travel as 16-bit
//! floats and come back in their own dtype. It halves (f32) or quarters (f64) the bytes
//! an allreduce moves, at the precision of the wire type; ranks reduce in f32 and round
//! after each step (see [`ReduceOp`](crate::ReduceOp)).

use std::fmt;
use std::str::FromStr;

use crate::{DType, Error};

/// How float tensors travel in an allreduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// As they are.
    #[default]
    None,
    /// As IEEE half precision: 11 significant bits, values up to 65504. Gradients that
    /// may overflow that range should be prescaled (or use `Bf16`).
    Fp16,
    /// As bfloat16: f32's range, 8 significant bits.
    Bf16,
}

impl Compression {
    pub const ALL: [Compression; 3] = [Compression::None, Compression::Fp16, Compression::Bf16];

    /// The name used in options and messages (`none`, `fp16`, `bf16`).
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Fp16 => "fp16",
            Compression::Bf16 => "bf16",
        }
    }

    /// The dtype a tensor of `dtype` travels as, when this compression changes it: f32
    /// and f64 become f16 or bf16; every other dtype travels as it is (`None`).
    pub fn wire_dtype(self, dtype: DType) -> Option<DType> {
        let wire = match self {
            Compression::None => return None,
            Compression::Fp16 => DType::F16,
            Compression::Bf16 => DType::BF16,
        };
        crate::kernels::cast::is_supported(dtype, wire).then_some(wire)
    }

    /// A one-byte code for wire formats.
    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Option<Compression> {
        Self::ALL.get(usize::from(code)).copied()
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Compression {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" | "off" | "0" => Ok(Compression::None),
            "fp16" | "f16" | "float16" | "half" => Ok(Compression::Fp16),
            "bf16" | "bfloat16" => Ok(Compression::Bf16),
            _ => Err(Error::Config {
                name: "compression".into(),
                value: s.into(),
                expected: "none, fp16 or bf16".into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_round_trip() {
        for c in Compression::ALL {
            assert_eq!(c.name().parse::<Compression>().unwrap(), c);
            assert_eq!(Compression::from_code(c.code()), Some(c));
        }
        assert_eq!("Half".parse::<Compression>().unwrap(), Compression::Fp16);
        assert_eq!(Compression::from_code(3), None);
    }

    #[test]
    fn only_wide_floats_are_narrowed() {
        assert_eq!(Compression::Bf16.wire_dtype(DType::F32), Some(DType::BF16));
        assert_eq!(Compression::Fp16.wire_dtype(DType::F64), Some(DType::F16));
        assert_eq!(Compression::Fp16.wire_dtype(DType::BF16), None);
        assert_eq!(Compression::Bf16.wire_dtype(DType::I64), None);
        assert_eq!(Compression::None.wire_dtype(DType::F32), None);
    }

    #[test]
    fn a_bad_name_says_what_is_accepted() {
        let err = "fp8".parse::<Compression>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid value \"fp8\" for compression: expected none, fp16 or bf16"
        );
    }
}
