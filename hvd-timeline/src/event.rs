//! What the recorder keeps of each event: compact, with tensor and activity names interned,
//! until rank 0 renders it as Chrome JSON.

use hvd_core::trace::SpanArgs;

use crate::align::ClockOffset;

/// The Chrome trace phase of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// `B`: a span starts.
    Begin,
    /// `E`: the innermost open span of the row ends.
    End,
    /// `i`: a moment, drawn as an arrow on its row.
    Instant,
    /// `X` with zero duration: a tick inside the enclosing span, as Horovod draws each
    /// rank's readiness inside `NEGOTIATE_<OP>`.
    Tick,
}

impl Phase {
    const ALL: [Phase; 4] = [Phase::Begin, Phase::End, Phase::Instant, Phase::Tick];

    /// A stable one-byte code for the wire format.
    pub fn code(self) -> u8 {
        match self {
            Phase::Begin => 0,
            Phase::End => 1,
            Phase::Instant => 2,
            Phase::Tick => 3,
        }
    }

    pub fn from_code(code: u8) -> Option<Phase> {
        Self::ALL.get(usize::from(code)).copied()
    }
}

/// The row an event sits on: a thread row inside its rank's process row.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum RowKey {
    /// The dedicated row of `CYCLE_START` marks.
    Cycles,
    /// The row of one tensor, by name.
    Tensor(String),
}

/// One event of one rank, on that rank's clock.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    pub phase: Phase,
    /// Nanoseconds on the recording rank's clock.
    pub ts_ns: u64,
    /// Index into the batch's (or recorder's) rows.
    pub row: u32,
    /// Index into the batch's (or recorder's) activity names.
    pub name: u32,
    pub args: SpanArgs,
}

/// The events one rank sends to rank 0 in one flush, with the tables their indices point
/// into and the rank's clock offset from rank 0.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Batch {
    /// `None` until the clocks have been aligned: timestamps are then taken as they are.
    pub clock: Option<ClockOffset>,
    pub rows: Vec<RowKey>,
    pub names: Vec<String>,
    pub events: Vec<Event>,
}
