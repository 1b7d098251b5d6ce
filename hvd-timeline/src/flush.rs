//! [`flush`]: every rank's buffered events into rank 0's file, collectively.

use hvd_core::{Collective, Error, Result};

use crate::gather::gather_bytes;
use crate::{Recorder, TraceFile, wire};

/// Sends the events `recorder` buffered since the last flush to rank 0 of `group`, which
/// appends every rank's events to `file`, moved onto its own clock.
///
/// Collective: every rank of `group` (the whole job, whose ranks become the trace's
/// processes) calls it at the same point, rank 0 with its [`TraceFile`] and the others
/// with `None`. A rank with nothing recorded sends a few bytes. The buffer is emptied even
/// when the flush fails.
pub fn flush(
    recorder: &Recorder,
    group: &dyn Collective,
    file: Option<&mut TraceFile>,
) -> Result<()> {
    let rank = group.topology().rank();
    // `group` is often the Timeline-wrapped stack itself; the flush is not the job's work.
    let _quiet = recorder.quiet();
    let bytes = wire::encode(&recorder.take_batch());
    let gathered = gather_bytes(group, "hvd.timeline", &bytes)?;
    // Checked after the gather, so that a misuse on one rank does not leave the others
    // waiting in it.
    let (file, gathered) = match (file, gathered) {
        (Some(file), Some(gathered)) => (file, gathered),
        (None, _) => return Ok(()),
        (Some(file), None) => {
            return Err(Error::invalid(
                rank,
                "timeline flush",
                file.path().display().to_string(),
                "only rank 0 writes the timeline file; other ranks pass None",
            ));
        }
    };
    let mut batches = Vec::with_capacity(gathered.len());
    for (from, bytes) in gathered.iter().enumerate() {
        let batch = wire::decode(bytes, rank, &format!("rank {from}"))?;
        batches.push((from, batch));
    }
    file.append(&batches)
}
