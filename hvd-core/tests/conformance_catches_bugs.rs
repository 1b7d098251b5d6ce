//! The conformance suite fails transports that get things wrong, and says what went wrong.

use hvd_core::conformance::{self, Options};
use hvd_core::layer::Layer;
use hvd_core::reference::{LocalCollective, LocalGroup};
use hvd_core::{Collective, DType, Operation, ReduceOp, Reduction, Result, TensorMut};

/// A transport with one deliberate bug, delegating everything else to the reference.
struct Buggy {
    inner: LocalCollective,
    bug: Bug,
}

#[derive(Clone, Copy)]
enum Bug {
    /// Average forgets to divide (for the dtypes where average is allowed).
    AverageIsSum,
    /// Broadcast leaves non-root buffers untouched (after checking the root).
    BroadcastNoop,
    /// Rank 1 corrupts the first byte of scaled allreduce results.
    Rank1CorruptsScaledResults,
    /// Accepts average for bool instead of refusing it.
    BoolAverageAccepted,
    /// Alltoall hands out blocks in reverse rank order.
    AlltoallReversed,
}

impl Buggy {
    fn allreduce(&self, tensors: &mut [TensorMut<'_>], reduction: Reduction) -> Result<()> {
        let mut r = reduction;
        let has_bool = tensors.iter().any(|t| t.dtype() == DType::Bool);
        match self.bug {
            Bug::AverageIsSum if r.op == ReduceOp::Average && !has_bool => r.op = ReduceOp::Sum,
            Bug::BoolAverageAccepted if r.op == ReduceOp::Average && has_bool => return Ok(()),
            _ => {}
        }
        self.inner.allreduce(tensors, r)?;
        let scaled = r.postscale != 1.0;
        if matches!(self.bug, Bug::Rank1CorruptsScaledResults)
            && scaled
            && self.topology().rank() == 1
            && let Some(byte) = tensors[0].host_mut().and_then(|b| b.first_mut())
        {
            *byte ^= 0x40;
        }
        Ok(())
    }

    fn reverse_blocks(output: &mut TensorMut<'_>, recv: &[usize]) {
        let width = output.dtype().size();
        let bytes = output.host_mut().expect("host memory");
        let mut blocks: Vec<Vec<u8>> = Vec::new();
        let mut offset = 0;
        for count in recv {
            blocks.push(bytes[offset..offset + count * width].to_vec());
            offset += count * width;
        }
        let reversed: Vec<u8> = blocks.into_iter().rev().flatten().collect();
        bytes.copy_from_slice(&reversed);
    }
}

impl Layer for Buggy {
    type Inner = LocalCollective;

    fn inner(&self) -> &LocalCollective {
        &self.inner
    }

    fn call(&self, op: Operation<'_, '_>) -> Result<()> {
        match (op, self.bug) {
            (Operation::Allreduce { tensors, reduction }, _) => self.allreduce(tensors, reduction),
            (Operation::Broadcast { root, .. }, Bug::BroadcastNoop)
                if root < self.topology().size() =>
            {
                Ok(())
            }
            (
                Operation::Alltoall {
                    input,
                    send_counts,
                    output,
                    recv_counts,
                },
                Bug::AlltoallReversed,
            ) => {
                self.inner
                    .alltoall(input, send_counts, output, recv_counts)?;
                Self::reverse_blocks(output, recv_counts);
                Ok(())
            }
            (other, _) => other.run(&self.inner),
        }
    }

    fn split(this: &Self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        this.inner.split(members)
    }

    fn backend(_: &Self) -> &'static str {
        "buggy"
    }
}

fn failure_of(size: usize, bug: Bug) -> conformance::Failure {
    let group: Vec<Buggy> = LocalGroup::new(size)
        .build()
        .into_iter()
        .map(|inner| Buggy { inner, bug })
        .collect();
    conformance::run_group(group, &Options::quick()).expect_err("the suite must catch the bug")
}

#[test]
fn average_that_does_not_divide_is_caught_with_expected_and_actual() {
    let f = failure_of(2, Bug::AverageIsSum);
    assert_eq!(f.check, "allreduce u8 average");
    assert_eq!(
        f.to_string(),
        "conformance check 'allreduce u8 average' failed on rank 0: 1 elements: tensor 't0' (1 x u8), element 0: expected 5, got 11 (1 element(s) differ)"
    );
}

#[test]
fn broadcast_that_moves_nothing_is_caught_on_non_root_ranks() {
    let f = failure_of(3, Bug::BroadcastNoop);
    // Every rank keeps going after a wrong result, so rank 0 reports what it saw as a
    // non-root of root 1.
    assert_eq!(
        (f.check.as_str(), f.rank),
        ("broadcast from every root", 0),
        "{f}"
    );
    assert!(
        f.detail
            .starts_with("root 1: tensor 'b0' (1001 x f32), element 0: expected 2, got "),
        "{f}"
    );
}

#[test]
fn a_bug_on_one_rank_is_reported_by_that_rank_and_stops_the_others() {
    let f = failure_of(2, Bug::Rank1CorruptsScaledResults);
    assert_eq!(
        (f.check.as_str(), f.rank),
        ("allreduce prescale and postscale", 1),
        "{f}"
    );
    assert!(f.detail.contains("element 0: expected"), "{f}");
}

#[test]
fn accepting_bool_average_is_caught_with_the_expected_error_text() {
    let f = failure_of(2, Bug::BoolAverageAccepted);
    assert_eq!(
        f.to_string(),
        "conformance check 'error: bool average' failed on rank 0: bool average allreduce succeeded; expected the error \"rank 0: invalid allreduce of tensor 'mask': average is not defined for bool; use max (any rank true) or min (every rank true)\""
    );
}

#[test]
fn alltoall_blocks_in_the_wrong_order_name_the_source_rank() {
    let f = failure_of(3, Bug::AlltoallReversed);
    assert_eq!(f.check, "alltoall uneven and zero splits");
    assert!(f.detail.contains("(from rank "), "{f}");
}
