//! # hvd-testkit: what the tests of hvd's transports share
//!
//! Never published; a dev-dependency of the transports. Each transport's tests bring only
//! how to connect one rank and what its errors say:
//!
//! - [`processes`]: ranks as processes of the test binary itself (each test launches
//!   its own binary once per rank with `--exact <test>`), the child's side of it, and
//!   waiting with deadlines;
//! - [`threads`]: ranks as threads, each connecting in its own;
//! - [`conformance`]: the public conformance suite in threads and in processes, with
//!   the options that keep large groups quick on a small machine, and
//!   [`conformance_by_size!`] for the usual one-to-eight-ranks tests;
//! - [`scenarios`]: the failures every transport must report the same way: a rank
//!   that leaves mid-call, and a rank killed mid-call.

pub mod conformance;
pub mod processes;
pub mod scenarios;
pub mod threads;
