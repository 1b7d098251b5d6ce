//! Faults injected on demand (`HVD_GPU_DOUBLE_FAULTS`), counted per process: whether
//! this call, collective or allocation is the one a fault names.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::config::{NCCL_VERSION, settings};
use crate::fault::{Fault, Stall};

/// Calls counted so far, by counter name and rank (`None`: every rank together).
type Counts = HashMap<(String, Option<usize>), u64>;
static COUNTS: Mutex<Option<Counts>> = Mutex::new(None);

/// Counts one more event `name` for `rank` (and for the process) and returns both counts.
fn count(name: &str, rank: Option<usize>) -> (u64, u64) {
    let mut counts = COUNTS.lock().unwrap_or_else(|e| e.into_inner());
    let counts = counts.get_or_insert_with(HashMap::new);
    let mut bump = |key: Option<usize>| {
        let n = counts.entry((name.to_owned(), key)).or_insert(0);
        *n += 1;
        *n
    };
    let all = bump(None);
    let mine = rank.map_or(all, |r| bump(Some(r)));
    (all, mine)
}

fn matches(nth: u64, rank: Option<usize>, counted: (u64, u64)) -> bool {
    match rank {
        None => counted.0 == nth,
        Some(_) => counted.1 == nth,
    }
}

/// Whether this call of `function` (by rank `rank`'s communicator) must fail.
pub(crate) fn fails(function: &str, rank: Option<usize>) -> bool {
    let faults = &settings().faults;
    if faults.is_empty() {
        return false;
    }
    let counted = count(function, rank);
    faults.iter().any(|f| match f {
        Fault::Fail {
            function: name,
            nth,
            rank: wanted,
        } => {
            name == function && wanted.is_none_or(|w| Some(w) == rank) && {
                matches(*nth, *wanted, counted)
            }
        }
        _ => false,
    })
}

/// Whether this collective (run on a stream for `rank`) must stall, and how.
pub(crate) fn stall(rank: usize) -> Option<Stall> {
    let faults = &settings().faults;
    if faults.is_empty() {
        return None;
    }
    let counted = count("collective", Some(rank));
    faults.iter().find_map(|f| match *f {
        Fault::RemoteError { nth, rank: wanted }
            if wanted.is_none_or(|w| w == rank) && matches(nth, wanted, counted) =>
        {
            Some(Stall::RemoteError)
        }
        Fault::Hang { nth, rank: wanted }
            if wanted.is_none_or(|w| w == rank) && matches(nth, wanted, counted) =>
        {
            Some(Stall::Hang)
        }
        _ => None,
    })
}

/// Whether this allocation must fail with out of memory.
pub(crate) fn out_of_memory() -> bool {
    let faults = &settings().faults;
    if faults.is_empty() {
        return false;
    }
    let (all, _) = count("alloc", None);
    faults
        .iter()
        .any(|f| matches!(f, Fault::OutOfMemory { nth } if *nth == all))
}

/// The version `ncclGetVersion` reports.
pub(crate) fn nccl_version() -> i32 {
    settings()
        .faults
        .iter()
        .find_map(|f| match f {
            Fault::Version(code) => Some(*code),
            _ => None,
        })
        .unwrap_or(NCCL_VERSION)
}
