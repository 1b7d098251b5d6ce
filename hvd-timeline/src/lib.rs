//! # hvd-timeline: one Chrome trace of the whole job
//!
//! Horovod's timeline (`HOROVOD_TIMELINE=path`) records rank 0. This crate records every
//! rank into one file, with the clocks of all ranks aligned, so that a glance shows which
//! rank made everyone wait.
//!
//! ## Pieces, and how the runtime uses them
//! - [`Recorder`]: buffers this rank's events in memory. It is a
//!   [`Tracer`](hvd_core::trace::Tracer), so Tensor Fusion reports into it, and it has the
//!   runtime's hooks ([`Recorder::negotiate_begin`], [`Recorder::queue_begin`], ...).
//!   Stopped until [`Recorder::start`]; cheap while stopped (one atomic load per hook).
//! - [`Timeline`]: `Collective` middleware that records a span around every call of the
//!   collective it wraps (`Timeline<Fusion<transport>>`).
//! - [`align_clocks`]: measures every rank's clock offset from rank 0, with an error bound;
//!   [`Recorder::set_clock_offset`] takes this rank's.
//! - [`TraceFile`]: rank 0's file; [`flush`] (collective) moves every rank's buffered
//!   events into it.
//!
//! ```
//! use std::sync::Arc;
//! use hvd_core::{Collective, ReduceOp, Reduction, TensorMut};
//! use hvd_core::reference::LocalGroup;
//! use hvd_timeline::{Recorder, Timeline, TraceFile, align_clocks, flush};
//!
//! # let dir = tempfile::tempdir().map_err(|e| hvd_core::Error::io("tempdir", &e))?;
//! # let path = dir.path().join("timeline.json");
//! let recorder = Arc::new(Recorder::new());
//! let group = Timeline::new(LocalGroup::new(1).build().remove(0), recorder.clone());
//! let mut file = TraceFile::create(&path)?; // rank 0 only
//! recorder.set_clock_offset(align_clocks(&group, 10)?.local());
//! recorder.start();
//!
//! let mut grad = vec![1.0f32; 1000];
//! group.allreduce(&mut [TensorMut::from_slice("grad.w1", &mut grad)], Reduction::new(ReduceOp::Average))?;
//!
//! flush(&recorder, &group, Some(&mut file))?; // every rank; others pass None
//! # Ok::<(), hvd_core::Error>(())
//! ```
//!
//! The runtime's order: create the recorder (and the file on rank 0), build the stack with
//! `Timeline` outermost and the recorder as Fusion's tracer, `align_clocks` and
//! `set_clock_offset`, `start`; then per cycle `mark_cycle`, the queue and negotiation
//! hooks, the collective calls, and every N cycles `flush`; at shutdown a last `flush`.
//!
//! ## What is recorded
//! Spans (`B`/`E`), on the row of each tensor:
//!
//! | name | from | args |
//! |---|---|---|
//! | `QUEUE` | [`Recorder::queue_begin`] / [`Recorder::queue_end`] | |
//! | `NEGOTIATE_<OP>` (`NEGOTIATE_ALLREDUCE`, ...) | [`Recorder::negotiate_begin`] / [`Recorder::negotiate_end`] | |
//! | `<BACKEND>_<OP>`: `TCP_ALLREDUCE`, `TCP_BROADCAST`, `TCP_ALLGATHER`, `TCP_ALLTOALL`, `TCP_REDUCESCATTER`, `TCP_BARRIER` | [`Timeline`], backend upper-cased from `Collective::backend` | `dtype`, `shape`, `bytes` |
//! | `MEMCPY_IN_FUSION_BUFFER`, `MEMCPY_OUT_FUSION_BUFFER` | Tensor Fusion, per tensor of a pack | `dtype`, `shape`, `bytes` |
//! | `DATA_WAIT` | the input pipeline's step clock (`hvd::data_stall`, Python's `hvd.torch.data.instrument`), on each rank's `data` row: the wait for the next batch | |
//!
//! Inside `NEGOTIATE_<OP>`, [`Recorder::negotiate_rank_ready`] adds a tick (a zero-length
//! `X` event) named after each rank as it becomes ready, as Horovod does. `CYCLE_START`
//! instants (`i`) mark negotiation cycles on a row of their own when cycle marking is on
//! ([`Recorder::set_mark_cycles`]). A barrier's span sits on a row named `barrier`.
//! Every other [`Tracer`](hvd_core::trace::Tracer) call becomes a span or an instant with
//! the caller's name.
//!
//! Rows stay balanced: a span begun while recording ends even after a stop, and an end
//! whose begin was not recorded is dropped. The collectives of [`flush`] itself, when `group` is the
//! recording `Timeline`, are not recorded.
//!
//! ## Layout
//! - Each rank is a process: `pid` = rank, named `rank N` (`process_name` metadata) and
//!   sorted by rank. Once clocks are aligned, its `process_labels` read
//!   `clock offset from rank 0: +1.250 us ± 0.040 us`.
//! - Each tensor is a thread row: `tid` = a small number per tensor name, the same on
//!   every rank and for the whole file, named after the tensor (`thread_name`). `tid` 0 is
//!   the `cycles` row.
//! - `ts` is in microseconds (three decimals) on rank 0's monotonic clock, counted from
//!   when rank 0's process first used the timeline (events another rank recorded before
//!   that moment have a negative `ts`, which the viewers accept).
//!
//! ## Opening the file
//! Drop it on <https://ui.perfetto.dev> (or open it from there), or load it in
//! `chrome://tracing` in Chrome. Both read the JSON array format this file uses.
//!
//! ## Clock alignment and its error
//! Ranks stamp events with their own monotonic clock. [`align_clocks`] brackets the
//! moment each of several barriers completes: that moment lies between a rank's clock
//! reading before entering and after leaving, on every rank, so each barrier bounds the
//! offset of rank `r` from rank 0 to `[enter_r - exit_0, exit_r - enter_0]`. The
//! intersection over all rounds is a hard bound; the offset is its midpoint and the error
//! ([`ClockOffset::error_ns`]) its half-width, about one barrier latency after a few
//! rounds. The bound assumes the clocks keep the same rate; hosts' clocks drift by parts
//! per million, so a long job may measure again. Ranks that are threads of one process
//! share one clock, and their measured offsets are within the error of zero.
//!
//! ## Always valid JSON
//! [`TraceFile`] writes `[`, `]` at creation, and every flush writes its events over the
//! `]` followed by a new `]` in one write, so the file is a complete JSON array between
//! any two writes: a job killed at any moment leaves a trace that opens.

mod align;
mod chrome;
mod clock;
mod event;
mod flush;
mod gather;
mod json;
mod recorder;
mod timeline;
mod trace_file;
mod wire;

/// Entry point for the fuzz target in `fuzz/`: a batch of events another rank sends to
/// rank 0, decoded and written as rank 0 would. Compiled only with `--cfg fuzzing`.
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing {
    /// Decodes `bytes` as rank 1's batch and renders it into a trace file in `dir`.
    pub fn gather(bytes: &[u8], dir: &std::path::Path) {
        if let Ok(batch) = crate::wire::decode(bytes, 0, "rank 1")
            && let Ok(mut file) = crate::TraceFile::create(dir.join("trace.json"))
        {
            let _ = file.append(&[(1, batch)]);
        }
    }
}

pub use align::{ClockAlignment, ClockOffset, align_clocks};
pub use chrome::CYCLES_ROW;
pub use flush::flush;
pub use recorder::{CYCLE_START, NEGOTIATE_PREFIX, QUEUE, Recorder};
pub use timeline::{BARRIER_ROW, Timeline};
pub use trace_file::TraceFile;
