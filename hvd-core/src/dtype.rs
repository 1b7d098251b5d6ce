//! Element types that hvd moves and reduces.

use std::fmt;
use std::str::FromStr;

use half::{bf16, f16};

use crate::Error;

/// The element type of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum DType {
    U8,
    I8,
    U16,
    I16,
    I32,
    I64,
    F16,
    BF16,
    F32,
    F64,
    /// One byte per element: 0 is false, anything else is true. Results are always 0 or 1.
    Bool,
}

impl DType {
    /// Every dtype, in a fixed order (the wire code order).
    pub const ALL: [DType; 11] = [
        DType::U8,
        DType::I8,
        DType::U16,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::Bool,
    ];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::U8 | DType::I8 | DType::Bool => 1,
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    /// The lower-case name used in messages and traces (`f32`, `bf16`, `bool`).
    pub const fn name(self) -> &'static str {
        match self {
            DType::U8 => "u8",
            DType::I8 => "i8",
            DType::U16 => "u16",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::Bool => "bool",
        }
    }

    /// True for the floating-point types.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// A stable one-byte code for wire formats: the position in [`DType::ALL`]. A const
    /// fn, so codes can be type parameters (MPI's user-defined operations need them).
    pub const fn code(self) -> u8 {
        let mut i = 0;
        while i < Self::ALL.len() {
            if Self::ALL[i] as u8 == self as u8 {
                return i as u8;
            }
            i += 1;
        }
        0
    }

    /// The dtype of a wire code, if the code is known.
    pub fn from_code(code: u8) -> Option<DType> {
        Self::ALL.get(code as usize).copied()
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let lower = s.to_ascii_lowercase();
        let alias = match lower.as_str() {
            "float32" | "float" => "f32",
            "float64" | "double" => "f64",
            "float16" | "half" => "f16",
            "bfloat16" => "bf16",
            "uint8" => "u8",
            "int8" => "i8",
            "uint16" => "u16",
            "int16" => "i16",
            "int32" | "int" => "i32",
            "int64" | "long" => "i64",
            other => other,
        };
        Self::ALL
            .into_iter()
            .find(|d| d.name() == alias)
            .ok_or_else(|| Error::Config {
                name: "dtype".into(),
                value: s.into(),
                expected: "one of u8, i8, u16, i16, i32, i64, f16, bf16, f32, f64, bool".into(),
            })
    }
}

/// A Rust type that is the element of a host tensor of dtype [`Element::DTYPE`].
///
/// Implemented for every plain-old-data element type. `bool` is not an `Element`: a `bool`
/// must never hold a byte other than 0 or 1, and bytes arriving from a network could, so
/// bool tensors travel as `u8` buffers of dtype [`DType::Bool`].
pub trait Element: bytemuck::Pod + Send + Sync + fmt::Debug + PartialEq {
    /// The dtype of this element type.
    const DTYPE: DType;
}

macro_rules! impl_element {
    ($($t:ty => $d:ident),* $(,)?) => {
        $(impl Element for $t { const DTYPE: DType = DType::$d; })*
    };
}

impl_element!(
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, i32 => I32, i64 => I64,
    f16 => F16, bf16 => BF16, f32 => F32, f64 => F64,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_sizes_match_rust_types() {
        for d in DType::ALL {
            assert_eq!(DType::from_code(d.code()), Some(d));
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
        }
        assert_eq!(DType::from_code(11), None);
        assert_eq!(DType::F16.size(), size_of::<f16>());
        assert_eq!(DType::BF16.size(), size_of::<bf16>());
        assert_eq!("float32".parse::<DType>().unwrap(), DType::F32);
    }

    #[test]
    fn unknown_dtype_names_the_accepted_forms() {
        let err = "f128".parse::<DType>().unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid value \"f128\" for dtype: expected one of u8, i8, u16, i16, i32, i64, f16, bf16, f32, f64, bool"
        );
    }
}
