//! The shared board on which the ranks of a local group exchange contributions.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// What one rank contributes to one exchange.
#[derive(Debug)]
pub(crate) struct Post {
    /// The operation and everything ranks must agree on, in words ("allreduce sum [f32 x
    /// 4]"); compared across ranks.
    pub agreement: String,
    /// Per-rank metadata that need not agree (send counts of alltoall).
    pub counts: Vec<usize>,
    pub data: Vec<u8>,
}

#[derive(Debug, Default)]
struct Slot {
    posts: Vec<Option<Arc<Post>>>,
    readers_left: usize,
}

#[derive(Debug)]
struct State {
    slots: HashMap<u64, Slot>,
    departed: Vec<bool>,
}

/// A board shared by the `size` ranks of one group.
#[derive(Debug)]
pub(crate) struct Board {
    size: usize,
    state: Mutex<State>,
    posted: Condvar,
    /// Sub-groups created by `split`, keyed by the exchange that created them.
    pub subgroups: Mutex<HashMap<u64, Arc<Board>>>,
}

/// Who is exchanging, for error messages.
pub(crate) struct Caller<'a> {
    pub rank: usize,
    pub op: &'static str,
    pub tensor: &'a str,
    pub timeout: Duration,
}

impl Board {
    pub fn new(size: usize) -> Self {
        Board {
            size,
            state: Mutex::new(State {
                slots: HashMap::new(),
                departed: vec![false; size],
            }),
            posted: Condvar::new(),
            subgroups: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking rank thread poisons the lock; the board's state stays consistent
        // because every update is a single insert, so carry on.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks `rank` as gone, waking everyone who waits for it.
    pub fn depart(&self, rank: usize) {
        self.lock().departed[rank] = true;
        self.posted.notify_all();
    }

    /// Posts `post` as exchange number `seq` and returns every rank's post, in rank order,
    /// once all have arrived and agree.
    pub fn exchange(&self, seq: u64, caller: &Caller<'_>, post: Post) -> Result<Vec<Arc<Post>>> {
        let deadline = Instant::now() + caller.timeout;
        let mut state = self.lock();
        let size = self.size;
        let slot = state.slots.entry(seq).or_insert_with(|| Slot {
            posts: vec![None; size],
            readers_left: size,
        });
        slot.posts[caller.rank] = Some(Arc::new(post));
        self.posted.notify_all();
        loop {
            let slot = &state.slots[&seq];
            if let Some(missing) = slot.posts.iter().position(Option::is_none) {
                if state.departed[missing] {
                    return Err(Error::PeerLost {
                        rank: caller.rank,
                        peer: missing,
                        op: caller.op,
                        tensor: caller.tensor.into(),
                        cause: "its collective was dropped".into(),
                    });
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    let missing: Vec<_> = (0..size)
                        .filter(|r| slot.posts[*r].is_none())
                        .map(|r| r.to_string())
                        .collect();
                    return Err(Error::Timeout {
                        rank: caller.rank,
                        op: caller.op,
                        tensor: caller.tensor.into(),
                        waited: caller.timeout,
                        waiting_for: format!("rank(s) {}", missing.join(", ")),
                    });
                }
                state = self
                    .posted
                    .wait_timeout(state, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                continue;
            }
            let posts: Vec<Arc<Post>> = slot.posts.iter().flatten().cloned().collect();
            let slot = state.slots.get_mut(&seq).expect("slot present");
            slot.readers_left -= 1;
            if slot.readers_left == 0 {
                state.slots.remove(&seq);
            }
            return agree(caller, posts);
        }
    }
}

/// Checks that every rank called the same thing.
fn agree(caller: &Caller<'_>, posts: Vec<Arc<Post>>) -> Result<Vec<Arc<Post>>> {
    if let Some(other) = posts.iter().position(|p| p.agreement != posts[0].agreement) {
        return Err(Error::Mismatch {
            property: "calls",
            tensor: caller.tensor.into(),
            rank_a: 0,
            value_a: posts[0].agreement.clone(),
            rank_b: other,
            value_b: posts[other].agreement.clone(),
        });
    }
    Ok(posts)
}
