//! Rendering ranks' batches as Chrome Trace Event Format objects: rank `r` is process
//! `pid = r`, each tensor a thread row with one `tid` per tensor name across the job, and
//! the metadata that names them.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use hvd_core::trace::SpanArgs;

use crate::align::ClockOffset;
use crate::event::{Batch, Event, Phase, RowKey};
use crate::json::{self, List};

/// The `tid` of the cycles row: first, above every tensor.
const CYCLES_TID: u32 = 0;
/// The thread name of the cycles row.
pub const CYCLES_ROW: &str = "cycles";

/// What rank 0 remembers between flushes so that ids stay stable and metadata is written
/// once.
#[derive(Debug, Default)]
pub(crate) struct Layout {
    /// One `tid` per row across all ranks, so a tensor sits at the same height in every
    /// rank's process.
    tids: HashMap<RowKey, u32>,
    /// Rows already named, per rank.
    named_rows: HashSet<(usize, u32)>,
    /// Ranks whose process is named.
    named_ranks: HashSet<usize>,
    /// The clock offset last written as each rank's label.
    labels: HashMap<usize, ClockOffset>,
}

impl Layout {
    fn tid(&mut self, row: &RowKey) -> u32 {
        if *row == RowKey::Cycles {
            return CYCLES_TID;
        }
        let next = self.tids.len() as u32 + 1;
        *self.tids.entry(row.clone()).or_insert(next)
    }

    /// Appends rank `pid`'s batch to `out`, timestamps moved onto rank 0's clock.
    pub fn render(&mut self, pid: usize, batch: &Batch, out: &mut List) {
        if self.named_ranks.insert(pid) {
            metadata(out, "process_name", pid, None, |s| {
                s.push_str("\"name\":");
                json::string(s, &format!("rank {pid}"));
            });
            metadata(out, "process_sort_index", pid, None, |s| {
                let _ = write!(s, "\"sort_index\":{pid}");
            });
        }
        if let Some(clock) = batch.clock
            && self.labels.insert(pid, clock) != Some(clock)
        {
            metadata(out, "process_labels", pid, None, |s| {
                s.push_str("\"labels\":");
                json::string(s, &clock_label(clock));
            });
        }
        let offset = batch.clock.map_or(0, |c| c.offset_ns);
        let tids: Vec<u32> = batch.rows.iter().map(|row| self.tid(row)).collect();
        for event in &batch.events {
            let tid = tids[event.row as usize];
            if self.named_rows.insert((pid, tid)) {
                let name = match &batch.rows[event.row as usize] {
                    RowKey::Cycles => CYCLES_ROW,
                    RowKey::Tensor(name) => name,
                };
                metadata(out, "thread_name", pid, Some(tid), |s| {
                    s.push_str("\"name\":");
                    json::string(s, name);
                });
                metadata(out, "thread_sort_index", pid, Some(tid), |s| {
                    let _ = write!(s, "\"sort_index\":{tid}");
                });
            }
            let ts = i64::try_from(event.ts_ns)
                .unwrap_or(i64::MAX)
                .saturating_sub(offset);
            render_event(
                out.next(),
                event,
                &batch.names[event.name as usize],
                ts,
                pid,
                tid,
            );
        }
    }
}

/// "clock offset from rank 0: +1.250 us ± 0.040 us", shown under the process name.
fn clock_label(clock: ClockOffset) -> String {
    let mut s = String::from("clock offset from rank 0: ");
    if clock.offset_ns >= 0 {
        s.push('+');
    }
    json::micros(&mut s, clock.offset_ns);
    s.push_str(" us ± ");
    json::micros(&mut s, i64::try_from(clock.error_ns).unwrap_or(i64::MAX));
    s.push_str(" us");
    s
}

fn metadata(
    out: &mut List,
    name: &str,
    pid: usize,
    tid: Option<u32>,
    args: impl FnOnce(&mut String),
) {
    let s = out.next();
    let _ = write!(s, "{{\"name\":\"{name}\",\"ph\":\"M\",\"pid\":{pid}");
    if let Some(tid) = tid {
        let _ = write!(s, ",\"tid\":{tid}");
    }
    s.push_str(",\"args\":{");
    args(s);
    s.push_str("}}");
}

fn render_event(s: &mut String, event: &Event, name: &str, ts_ns: i64, pid: usize, tid: u32) {
    s.push_str("{\"name\":");
    json::string(s, name);
    let ph = match event.phase {
        Phase::Begin => "\"B\"",
        Phase::End => "\"E\"",
        // Thread scope: the arrow sits on the event's own row.
        Phase::Instant => "\"i\",\"s\":\"t\"",
        Phase::Tick => "\"X\",\"dur\":0",
    };
    let _ = write!(s, ",\"ph\":{ph},\"ts\":");
    json::micros(s, ts_ns);
    let _ = write!(s, ",\"pid\":{pid},\"tid\":{tid}");
    render_args(s, &event.args);
    s.push('}');
}

fn render_args(s: &mut String, args: &SpanArgs) {
    if *args == SpanArgs::default() {
        return;
    }
    s.push_str(",\"args\":{");
    let mut first = true;
    let mut key = |s: &mut String, key: &str| {
        if !std::mem::take(&mut first) {
            s.push(',');
        }
        let _ = write!(s, "\"{key}\":");
    };
    if let Some(dtype) = args.dtype {
        key(s, "dtype");
        json::string(s, dtype.name());
    }
    if let Some(shape) = &args.shape {
        key(s, "shape");
        s.push('[');
        for (i, dim) in shape.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            let _ = write!(s, "{dim}");
        }
        s.push(']');
    }
    if let Some(bytes) = args.bytes {
        key(s, "bytes");
        let _ = write!(s, "{bytes}");
    }
    s.push('}');
}
