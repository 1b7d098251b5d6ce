//! `ncclGroupStart`/`ncclGroupEnd`: calls made in a group are queued on this thread and
//! enqueued together, one stream task per communicator; a call outside a group is a group
//! of its own.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::comm::Member;
use super::ops::{self, Op};
use super::{Failure, IN_PROGRESS, INVALID_ARGUMENT, INVALID_USAGE, SUCCESS};
use crate::config::settings;
use crate::cuda::context;
use crate::cuda::stream::Stream;

/// How long lazy mode keeps a non-blocking group in progress.
const LAZY_ENQUEUE: std::time::Duration = std::time::Duration::from_millis(5);

struct Call {
    member: Arc<Member>,
    stream: usize,
    op: Op,
}

#[derive(Default)]
struct Group {
    depth: u32,
    calls: Vec<Call>,
    /// The first error of a call in the group: `ncclGroupEnd` returns it and drops the
    /// group.
    error: Option<Failure>,
}

thread_local! {
    static GROUP: RefCell<Group> = RefCell::new(Group::default());
}

pub(crate) fn start() {
    GROUP.with_borrow_mut(|g| g.depth += 1);
}

/// Adds a checked call; outside a group it is enqueued at once.
pub(crate) fn add(member: Arc<Member>, stream: usize, op: Op) -> Result<i32, Failure> {
    let depth = GROUP.with_borrow_mut(|g| {
        g.calls.push(Call { member, stream, op });
        g.depth
    });
    if depth > 0 {
        return Ok(SUCCESS);
    }
    let calls = GROUP.with_borrow_mut(|g| std::mem::take(&mut g.calls));
    enqueue(calls)
}

/// Records a call's error for the group's end.
pub(crate) fn fail(failure: Failure) {
    GROUP.with_borrow_mut(|g| {
        if g.depth > 0 && g.error.is_none() {
            g.error = Some(failure);
        }
    });
}

/// Ends a group; the outermost end enqueues it (or drops it after an error).
pub(crate) fn end() -> Result<i32, Failure> {
    let finished = GROUP.with_borrow_mut(|g| {
        if g.depth == 0 {
            return Err(Failure::new(
                INVALID_USAGE,
                "ncclGroupEnd without ncclGroupStart",
            ));
        }
        g.depth -= 1;
        if g.depth > 0 {
            return Ok(None);
        }
        let calls = std::mem::take(&mut g.calls);
        match g.error.take() {
            Some(failure) => Err(failure),
            None => Ok(Some(calls)),
        }
    })?;
    finished.map_or(Ok(SUCCESS), enqueue)
}

/// The communicators of the group this thread is building.
pub(crate) fn members() -> Vec<Arc<Member>> {
    GROUP.with_borrow(|g| {
        let mut members: Vec<Arc<Member>> = Vec::new();
        for call in &g.calls {
            if !members.iter().any(|m| Arc::ptr_eq(m, &call.member)) {
                members.push(call.member.clone());
            }
        }
        members
    })
}

/// Drops the group this thread is building (after a failed call, as NCCL does).
pub(crate) fn discard() {
    GROUP.with_borrow_mut(|g| {
        g.calls.clear();
        g.error = None;
        g.depth = 0;
    });
}

/// The stream a handle names for a communicator of device `ordinal`.
fn stream_for(handle: usize, ordinal: u32) -> Result<Arc<Stream>, Failure> {
    let stream = match handle {
        0..=2 => context::contexts()[ordinal as usize].null_stream(),
        _ => crate::cuda::api::STREAMS.get(handle).ok_or_else(|| {
            Failure::new(
                INVALID_ARGUMENT,
                format!("stream {handle:#x} is not a live stream"),
            )
        })?,
    };
    if stream.ordinal != ordinal {
        return Err(Failure::new(
            INVALID_ARGUMENT,
            format!(
                "the stream belongs to device {} but the communicator to device {ordinal}",
                stream.ordinal
            ),
        ));
    }
    Ok(stream)
}

fn enqueue(calls: Vec<Call>) -> Result<i32, Failure> {
    // Per communicator, in the order of their first call.
    let mut by_member: Vec<(Arc<Member>, usize, Vec<Op>)> = Vec::new();
    for call in calls {
        match by_member
            .iter_mut()
            .find(|(m, ..)| Arc::ptr_eq(m, &call.member))
        {
            Some((_, stream, ops)) if *stream == call.stream => ops.push(call.op),
            Some(_) => {
                return Err(Failure::new(
                    INVALID_USAGE,
                    "the calls of one communicator in a group use different streams (the double needs one)",
                ));
            }
            None => by_member.push((call.member, call.stream, vec![call.op])),
        }
    }
    let mut result = SUCCESS;
    for (member, handle, ops) in by_member {
        let stream = stream_for(handle, member.ordinal)?;
        if member.blocking {
            submit(&member, &stream, ops);
            continue;
        }
        // A non-blocking communicator is in progress until its calls are on the stream.
        member.begin_background();
        result = IN_PROGRESS;
        std::thread::spawn(move || {
            // Lazy mode keeps the call in progress long enough for a caller that does not
            // wait for it to record its events too early.
            if settings().lazy {
                std::thread::sleep(LAZY_ENQUEUE);
            }
            submit(&member, &stream, ops);
            member.end_background();
        });
    }
    Ok(result)
}

fn submit(member: &Arc<Member>, stream: &Arc<Stream>, ops: Vec<Op>) {
    let context = &context::contexts()[stream.ordinal as usize];
    member.outstanding.fetch_add(1, Ordering::AcqRel);
    let member = member.clone();
    context.enqueue(stream, Vec::new(), move || {
        ops::run(&member, &ops);
        member.outstanding.fetch_sub(1, Ordering::AcqRel);
    });
}
