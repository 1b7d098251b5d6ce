//! # hvd-data: an input pipeline that keeps every rank fed
//!
//! A rank that waits for its next batch makes every other rank wait in the next
//! allreduce. This crate prepares batches ahead on a pool of threads, and cuts each
//! rank's share from the job's [`ElasticSampler`], so that every sample is seen exactly
//! once per epoch, whatever happens to the number of ranks:
//!
//! - [`source`]: where images come from: a folder per class ([`ImageFolder`]),
//!   WebDataset-style tar shards ([`TarShards`]), memory ([`InMemory`]: JPEGs or PNGs,
//!   or decoded RGB, grey or `f32` pixels) or nothing at all ([`Synthetic`]);
//! - [`Augment`]: random resized crop, flip and normalisation, drawn from (seed, epoch,
//!   sample) alone, so a sample looks the same whichever thread prepares it; or
//!   ([`Augment::exact`]) samples already the model's size, grey or RGB, only normalised;
//! - [`Loader`]: decode threads, a bounded queue of reused batch buffers, batches in step
//!   order as one NCHW `f32` block and their labels;
//! - [`Loader::autotune`]: threads and prefetch chosen from the measured decode rate
//!   and step time, each rank taking its share of the host's cores (in proportion to
//!   what each needs when the ranks exchange their needs, [`share_cores`]), within a
//!   memory budget ([`plan`]), with a warning when the host cannot keep up whatever it
//!   does;
//! - [`stall`]: each step of each rank split into data wait, compute, own communication
//!   and waiting for other ranks, and the job's wait charged to the rank whose data was
//!   late ([`StepClock`], [`attribute`]).
//!
//! ```no_run
//! use hvd_data::{Augment, ElasticSampler, ImageFolder, Loader, LoaderOptions, Source};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (rank, size) = (0, 4);
//! let source = ImageFolder::open("imagenet/train")?;
//! let mut sampler = ElasticSampler::new(source.len(), 256).seed(Some(42));
//! let mut loader = Loader::new(source, Augment::train(224), LoaderOptions::default())?;
//! for epoch in 0..90 {
//!     sampler.set_epoch(epoch);
//!     let mut batches = loader.epoch(&sampler, rank, size)?;
//!     while let Some(batch) = batches.next_batch()? {
//!         let (images, labels) = (batch.images(), batch.labels()); // [n, 3, 224, 224]
//!         # let _ = (images, labels);
//!         // forward, backward, allreduce ...
//!         sampler.advance();
//!     }
//! }
//! # Ok(())
//! # }
//! ```

mod augment;
mod decode;
mod error;
mod loader;
pub mod source;
pub mod stall;

pub use augment::{Augment, Crop, IMAGENET_MEAN, IMAGENET_STD};
pub use decode::MAX_SIDE;
pub use error::{Error, Result};
pub use hvd_core::sampler::ElasticSampler;
pub use loader::{
    Batch, DecodePriority, DecodeRate, Epoch, Load, Loader, LoaderOptions, TuneLimits, Tuning,
    host_cores, plan, share_cores,
};
pub use source::{ImageFolder, InMemory, Source, Synthetic, TarShards};
pub use stall::{StallReport, StepClock, StepTimes, attribute};
