//! Reduction operations and their scale factors.

use std::fmt;
use std::str::FromStr;

use crate::Error;

/// How allreduce and reducescatter combine the ranks' values.
///
/// Semantics that every transport must follow (the kernels in [`crate::kernels`] are the
/// reference):
/// - Integer `Sum` and `Product` wrap on overflow (two's complement), identically on every
///   rank and transport.
/// - Integer `Average` is the wrapped sum divided by the number of ranks, truncated toward
///   zero (`-7 / 2 == -3`). Float `Average` is the sum divided by the number of ranks.
/// - `bool`: `Sum` and `Max` are logical OR (any rank true), `Product` and `Min` are logical
///   AND (every rank true). `Average` is not defined for bool and is rejected.
/// - Float `Min`/`Max` of a NaN and a number give the number, and -0 counts as below +0
///   (IEEE 754-2019 `minimumNumber`/`maximumNumber`), so the result never depends on the
///   order in which ranks are combined.
/// - f16 and bf16 are combined in f32 and rounded back to nearest, ties to even.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReduceOp {
    Sum,
    Average,
    Min,
    Max,
    Product,
}

impl ReduceOp {
    /// Every reduce op, in a fixed order (the wire code order).
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Average,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::Product,
    ];

    /// The lower-case name used in messages.
    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Average => "average",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::Product => "product",
        }
    }

    /// A stable one-byte code for wire formats: the position in [`ReduceOp::ALL`]. A
    /// const fn, so codes can be type parameters.
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

    /// The op of a wire code, if the code is known.
    pub fn from_code(code: u8) -> Option<ReduceOp> {
        Self::ALL.get(code as usize).copied()
    }

    /// The op that the ranks' values are combined with; `Average` combines with `Sum` and
    /// divides afterwards.
    pub const fn combining_op(self) -> ReduceOp {
        match self {
            ReduceOp::Average => ReduceOp::Sum,
            other => other,
        }
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ReduceOp {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let lower = s.to_ascii_lowercase();
        let alias = match lower.as_str() {
            "avg" | "mean" => "average",
            "prod" => "product",
            other => other,
        };
        Self::ALL
            .into_iter()
            .find(|o| o.name() == alias)
            .ok_or_else(|| Error::Config {
                name: "reduce op".into(),
                value: s.into(),
                expected: "one of sum, average, min, max, product".into(),
            })
    }
}

/// A reduction: the op plus Horovod's scale factors.
///
/// `prescale` multiplies each rank's contribution before it is combined, `postscale`
/// multiplies the combined result (after the division of `Average`). Floats are scaled in
/// their own precision, as Horovod does: f64 in f64, f32 in f32 with the factor rounded
/// to f32, f16 and bf16 in f32 and rounded back (the same bits on every CPU). Integer
/// tensors are scaled through `f64` and truncated toward zero, saturating at the type's
/// bounds. A factor of exactly 1.0 leaves the data untouched.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reduction {
    pub op: ReduceOp,
    pub prescale: f64,
    pub postscale: f64,
}

impl Reduction {
    /// A reduction with no scaling.
    pub const fn new(op: ReduceOp) -> Self {
        Reduction {
            op,
            prescale: 1.0,
            postscale: 1.0,
        }
    }

    /// Sets the factor applied to each contribution before the reduction.
    pub const fn with_prescale(mut self, factor: f64) -> Self {
        self.prescale = factor;
        self
    }

    /// Sets the factor applied to the result after the reduction.
    pub const fn with_postscale(mut self, factor: f64) -> Self {
        self.postscale = factor;
        self
    }
}

impl From<ReduceOp> for Reduction {
    fn from(op: ReduceOp) -> Self {
        Reduction::new(op)
    }
}
