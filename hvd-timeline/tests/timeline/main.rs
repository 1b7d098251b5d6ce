//! Integration tests of the timeline, in one binary (one link) with a module per subject.

mod clocks;
mod common;
mod conformance;
mod crash;
mod file;
mod ranks;
mod recording;
