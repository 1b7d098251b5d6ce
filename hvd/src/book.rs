//! The book's Rust examples (`docs/src`), compiled as this crate's doctests so that the
//! book cannot drift from the API. Only `cargo test --doc` sees this module; `cargo xtask
//! book` fails on a page with Rust blocks that is not included here.

#[doc = include_str!("../../README.md")]
pub struct Readme;

#[doc = include_str!("../../docs/src/quick-start/rust.md")]
#[cfg(feature = "candle")]
pub struct QuickStartRust;

#[doc = include_str!("../../docs/src/elastic.md")]
pub struct Elastic;

#[doc = include_str!("../../docs/src/input-pipeline.md")]
#[cfg(feature = "data")]
pub struct InputPipeline;

#[doc = include_str!("../../docs/src/process-sets.md")]
pub struct ProcessSets;

#[doc = include_str!("../../docs/src/extending.md")]
pub struct Extending;
