//! # hvd-nccl: NVIDIA NCCL for GPU tensors (in progress)
//!
//! NCCL is loaded at run time with `dlopen` (`HVD_NCCL_LIBRARY`, then `libnccl.so.2`,
//! which pip's `nvidia-nccl-cu12`/`cu13` wheels and runtime-only installs provide, then
//! `libnccl.so`), so the crate builds and runs on a machine without CUDA: a missing
//! library or symbol is an [`Error`](hvd_core::Error) naming it and how to get it, never a
//! panic. hvd binds the few entry points it calls itself rather than through cudarc, whose
//! loader panics on a missing library and whose `dynamic-linking` and `dynamic-loading`
//! features cannot meet in one build (candle turns on the first).
//!
//! What is here so far: loading and the NCCL version ([`version`]), and the mapping of
//! hvd's dtypes and reductions to NCCL's ([`mapping`]). The `Collective` over NCCL
//! communicators needs a GPU to be proven and is not in this crate yet.

mod library;
pub mod mapping;

pub use library::{LIBRARY_VAR, Version, version};
