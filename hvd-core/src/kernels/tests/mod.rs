//! Tests of the kernels: the fast kernels against the reference, and the semantics spelt
//! out on small examples.

mod reference;
mod semantics;
