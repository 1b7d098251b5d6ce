//! The checks of the suite, grouped by operation, and the data helpers they share.

mod adasum;
mod allreduce;
mod errors;
mod groups;
mod movement;
mod reducescatter;

use super::context::Check;
use super::values::{contribution, reduced};

/// Every check, in the order they run.
pub(super) fn all() -> Vec<Check> {
    let mut checks = Vec::new();
    checks.extend(errors::checks());
    checks.extend(allreduce::checks());
    checks.extend(movement::checks());
    checks.extend(reducescatter::checks());
    checks.extend(adasum::checks());
    checks.extend(groups::checks());
    checks
}

/// Bytes that no check expects, to fill outputs before a call so that a transport that
/// leaves them untouched is caught.
fn poison(bytes: usize) -> Vec<u8> {
    vec![0xA5; bytes]
}
