//! [`Recorder`]: this rank's events, buffered in memory until the next flush.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use hvd_core::trace::{SpanArgs, Tracer};

use crate::align::ClockOffset;
use crate::clock;
use crate::event::{Batch, Event, Phase, RowKey};

/// The span of a tensor's wait in the runtime's queue.
pub const QUEUE: &str = "QUEUE";
/// The instant marking the start of a negotiation cycle, on the dedicated cycles row.
pub const CYCLE_START: &str = "CYCLE_START";
/// The prefix of negotiation spans: `NEGOTIATE_ALLREDUCE`, `NEGOTIATE_BROADCAST`, ...
pub const NEGOTIATE_PREFIX: &str = "NEGOTIATE_";

/// Records this rank's timeline events in memory; [`flush`](crate::flush) sends them to
/// rank 0's file.
///
/// Stopped when created: [`start`](Recorder::start) and [`stop`](Recorder::stop) switch
/// recording at run time. While stopped, every hook returns after one atomic load. A span
/// that began while recording still gets its end after a stop, so that every row stays
/// balanced; an end whose begin was not recorded is dropped for the same reason. An end
/// closes its span only when it is the innermost one open on the row, which is how spans
/// nest in a Chrome trace.
///
/// Shared (`Arc<Recorder>`) by the runtime, the [`Timeline`](crate::Timeline) middleware
/// and Tensor Fusion (as its [`Tracer`]); every hook takes one short lock.
///
/// Events stay in memory until the next [`flush`](crate::flush), a few dozen bytes each:
/// the runtime flushes every few cycles so that the buffer stays small.
pub struct Recorder {
    started: AtomicBool,
    mark_cycles: AtomicBool,
    /// Spans begun and not yet ended, so that `end` returns at once when none is open.
    open: AtomicUsize,
    /// Set while a flush runs, so that the flush's own collectives, made through a
    /// [`Timeline`](crate::Timeline) on this recorder, do not record themselves.
    flushing: AtomicBool,
    buffer: Mutex<Buffer>,
}

/// The lock-protected part: interned rows and names, and the events since the last flush.
#[derive(Default)]
struct Buffer {
    rows: Vec<Row>,
    tensor_rows: HashMap<Box<str>, u32>,
    cycle_row: Option<u32>,
    names: Vec<Box<str>>,
    name_ids: HashMap<Box<str>, u32>,
    events: Vec<Event>,
    clock: Option<ClockOffset>,
}

/// What the recorder tracks per row beyond its events.
struct Row {
    key: RowKey,
    /// Names of the spans open on the row, innermost last.
    open: Vec<u32>,
    /// The name of the open `NEGOTIATE_<OP>` span, whose ticks and end are expected.
    negotiating: Option<u32>,
}

impl Buffer {
    fn intern_row(&mut self, key: RowKey) -> u32 {
        let id = self.rows.len() as u32;
        self.rows.push(Row {
            key,
            open: Vec::new(),
            negotiating: None,
        });
        id
    }

    fn tensor_row(&mut self, tensor: &str) -> u32 {
        if let Some(id) = self.tensor_rows.get(tensor) {
            return *id;
        }
        let id = self.intern_row(RowKey::Tensor(tensor.to_owned()));
        self.tensor_rows.insert(tensor.into(), id);
        id
    }

    fn cycle_row(&mut self) -> u32 {
        match self.cycle_row {
            Some(id) => id,
            None => {
                let id = self.intern_row(RowKey::Cycles);
                self.cycle_row = Some(id);
                id
            }
        }
    }

    fn name(&mut self, activity: &str) -> u32 {
        if let Some(id) = self.name_ids.get(activity) {
            return *id;
        }
        let id = self.names.len() as u32;
        self.names.push(activity.into());
        self.name_ids.insert(activity.into(), id);
        id
    }

    fn push(&mut self, phase: Phase, ts_ns: u64, row: u32, name: u32, args: SpanArgs) {
        self.events.push(Event {
            phase,
            ts_ns,
            row,
            name,
            args,
        });
    }

    fn begin(&mut self, ts_ns: u64, row: u32, activity: &str, args: SpanArgs) -> u32 {
        let name = self.name(activity);
        self.rows[row as usize].open.push(name);
        self.push(Phase::Begin, ts_ns, row, name, args);
        name
    }

    /// Ends span `name` of `tensor` if it is the innermost open one there; false when it
    /// is not, which happens only when its begin was not recorded (recording was off), and
    /// then closing another span would tear the row apart.
    fn end(&mut self, ts_ns: u64, tensor: &str, name: Option<u32>) -> bool {
        let (Some(&row), Some(name)) = (self.tensor_rows.get(tensor), name) else {
            return false;
        };
        let open = &mut self.rows[row as usize].open;
        if open.last() != Some(&name) {
            return false;
        }
        open.pop();
        self.push(Phase::End, ts_ns, row, name, SpanArgs::default());
        true
    }

    fn point(&mut self, phase: Phase, ts_ns: u64, row: u32, activity: &str) {
        let name = self.name(activity);
        self.push(phase, ts_ns, row, name, SpanArgs::default());
    }

    /// Moves the events out, with tables holding only the rows and names they use.
    fn take(&mut self) -> Batch {
        let events = std::mem::take(&mut self.events);
        let mut batch = Batch {
            clock: self.clock,
            events: Vec::with_capacity(events.len()),
            ..Batch::default()
        };
        let mut row_ids = vec![u32::MAX; self.rows.len()];
        let mut name_ids = vec![u32::MAX; self.names.len()];
        for mut event in events {
            let row = &mut row_ids[event.row as usize];
            if *row == u32::MAX {
                *row = batch.rows.len() as u32;
                batch.rows.push(self.rows[event.row as usize].key.clone());
            }
            let name = &mut name_ids[event.name as usize];
            if *name == u32::MAX {
                *name = batch.names.len() as u32;
                batch
                    .names
                    .push(self.names[event.name as usize].to_string());
            }
            (event.row, event.name) = (*row, *name);
            batch.events.push(event);
        }
        batch
    }
}

impl Recorder {
    /// A stopped recorder with cycle marking off.
    pub fn new() -> Self {
        // Pins the process's time origin before the first event.
        clock::now_ns();
        Recorder {
            started: AtomicBool::new(false),
            mark_cycles: AtomicBool::new(false),
            open: AtomicUsize::new(0),
            flushing: AtomicBool::new(false),
            buffer: Mutex::new(Buffer::default()),
        }
    }

    /// Starts recording (again).
    pub fn start(&self) {
        self.started.store(true, Ordering::Relaxed);
    }

    /// Stops recording new events; open spans still end. Buffered events stay until the
    /// next flush.
    pub fn stop(&self) {
        self.started.store(false, Ordering::Relaxed);
    }

    /// Whether events are being recorded.
    pub fn is_started(&self) -> bool {
        self.started.load(Ordering::Relaxed)
    }

    /// Switches `CYCLE_START` marks on or off (`HVD_TIMELINE_MARK_CYCLES=1`, read by the
    /// runtime).
    pub fn set_mark_cycles(&self, on: bool) {
        self.mark_cycles.store(on, Ordering::Relaxed);
    }

    /// Marks the start of a negotiation cycle: an instant `CYCLE_START` on the cycles row,
    /// when recording and cycle marking are both on.
    pub fn mark_cycle(&self) {
        if !self.is_started() || !self.mark_cycles.load(Ordering::Relaxed) {
            return;
        }
        let mut b = self.lock();
        let row = b.cycle_row();
        b.point(Phase::Instant, clock::now_ns(), row, CYCLE_START);
    }

    /// `tensor` starts negotiation for `op` (`"allreduce"`, any case): opens
    /// `NEGOTIATE_ALLREDUCE` on its row. While it is open, further calls are ignored: a
    /// tensor can take several cycles to negotiate, and its first request is when it
    /// started waiting.
    pub fn negotiate_begin(&self, tensor: &str, op: &str) {
        if !self.is_started() {
            return;
        }
        let mut b = self.lock();
        let row = b.tensor_row(tensor);
        if b.rows[row as usize].negotiating.is_some() {
            return;
        }
        let activity = format!("{NEGOTIATE_PREFIX}{}", op.to_ascii_uppercase());
        let name = b.begin(clock::now_ns(), row, &activity, SpanArgs::default());
        b.rows[row as usize].negotiating = Some(name);
        self.open.fetch_add(1, Ordering::Relaxed);
    }

    /// `rank` is ready to run `tensor`: a tick named after the rank inside the open
    /// negotiation span (Horovod's view of who was early and who was late).
    pub fn negotiate_rank_ready(&self, tensor: &str, rank: usize) {
        if !self.is_started() {
            return;
        }
        let mut b = self.lock();
        let Some(&row) = b.tensor_rows.get(tensor) else {
            return;
        };
        if b.rows[row as usize].negotiating.is_some() {
            b.point(Phase::Tick, clock::now_ns(), row, &rank.to_string());
        }
    }

    /// Negotiation of `tensor` is over: closes its `NEGOTIATE_<OP>` span.
    pub fn negotiate_end(&self, tensor: &str) {
        if self.open.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut b = self.lock();
        let Some(&row) = b.tensor_rows.get(tensor) else {
            return;
        };
        let name = b.rows[row as usize].negotiating.take();
        if b.end(clock::now_ns(), tensor, name) {
            self.open.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// `tensor` enters the queue of work for the background thread: opens `QUEUE`.
    pub fn queue_begin(&self, tensor: &str) {
        self.begin(tensor, QUEUE, SpanArgs::default());
    }

    /// `tensor` leaves the queue: closes `QUEUE`.
    pub fn queue_end(&self, tensor: &str) {
        self.end(tensor, QUEUE);
    }

    /// This rank's clock offset from rank 0 (from [`align_clocks`](crate::align_clocks)):
    /// rank 0 subtracts it from the timestamps of every batch flushed from now on.
    pub fn set_clock_offset(&self, offset: ClockOffset) {
        self.lock().clock = Some(offset);
    }

    /// Number of events waiting for the next flush.
    pub fn pending(&self) -> usize {
        self.lock().events.len()
    }

    /// Whether the [`Timeline`](crate::Timeline) middleware records calls now: while
    /// started, except during a flush.
    pub(crate) fn records_calls(&self) -> bool {
        self.is_started() && !self.flushing.load(Ordering::Relaxed)
    }

    /// Stops the middleware from recording until the guard drops (the length of a flush).
    pub(crate) fn quiet(&self) -> Quiet<'_> {
        self.flushing.store(true, Ordering::Relaxed);
        Quiet(&self.flushing)
    }

    /// Opens `activity` on the rows of `tensors` at one timestamp, under one lock: the
    /// hot path of the [`Timeline`](crate::Timeline) middleware.
    pub(crate) fn begin_all<'t>(
        &self,
        activity: &str,
        tensors: impl IntoIterator<Item = (&'t str, SpanArgs)>,
    ) {
        let mut b = self.lock();
        let ts = clock::now_ns();
        let mut opened = 0;
        for (tensor, args) in tensors {
            let row = b.tensor_row(tensor);
            b.begin(ts, row, activity, args);
            opened += 1;
        }
        self.open.fetch_add(opened, Ordering::Relaxed);
    }

    /// Closes `activity` on the rows of `tensors` at one timestamp.
    pub(crate) fn end_all<'t>(&self, activity: &str, tensors: impl IntoIterator<Item = &'t str>) {
        let mut b = self.lock();
        let ts = clock::now_ns();
        let name = b.name_ids.get(activity).copied();
        let mut closed = 0;
        for tensor in tensors {
            closed += usize::from(b.end(ts, tensor, name));
        }
        self.open.fetch_sub(closed, Ordering::Relaxed);
    }

    /// Moves the buffered events out for a flush.
    pub(crate) fn take_batch(&self) -> Batch {
        self.lock().take()
    }

    fn lock(&self) -> MutexGuard<'_, Buffer> {
        // Events are plain data: after a panic elsewhere they are as good as ever.
        self.buffer.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// See [`Recorder::quiet`]; dropping it (also on an early return) lets recording resume.
pub(crate) struct Quiet<'a>(&'a AtomicBool);

impl Drop for Quiet<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("started", &self.is_started())
            .field("mark_cycles", &self.mark_cycles.load(Ordering::Relaxed))
            .field("pending", &self.pending())
            .finish_non_exhaustive()
    }
}

impl Tracer for Recorder {
    fn enabled(&self) -> bool {
        self.is_started()
    }

    fn begin(&self, tensor: &str, activity: &str, args: SpanArgs) {
        if !self.is_started() {
            return;
        }
        let mut b = self.lock();
        let row = b.tensor_row(tensor);
        b.begin(clock::now_ns(), row, activity, args);
        self.open.fetch_add(1, Ordering::Relaxed);
    }

    fn end(&self, tensor: &str, activity: &str) {
        if self.open.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut b = self.lock();
        let name = b.name_ids.get(activity).copied();
        if b.end(clock::now_ns(), tensor, name) {
            self.open.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn instant(&self, tensor: &str, activity: &str) {
        if !self.is_started() {
            return;
        }
        let mut b = self.lock();
        let row = b.tensor_row(tensor);
        b.point(Phase::Instant, clock::now_ns(), row, activity);
    }
}
