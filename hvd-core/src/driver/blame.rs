//! Naming the rank to blame. When one rank dies or freezes, the ranks that wait for it
//! fail too, and so do the ranks waiting for those: the first failure anyone sees is
//! usually a consequence. Transports and the launcher find the cause the same way: each
//! rank that fails posts whom it waits for (or lost) in the group's store, and the chain
//! of posts is followed to the rank that posts nothing. This module holds those parts:
//!
//! - [`post_rank`] and [`posted_rank`]: a rank number under a key of the store;
//! - [`follow`]: the [`Chain`] of waits from one rank to its end, or to a cycle;
//! - [`settle`]: rereading the posts for a grace period, until they decide.

use std::time::{Duration, Instant};

use crate::{Result, Store};

/// How often [`settle`] looks again.
pub const REREAD: Duration = Duration::from_millis(20);

/// Posts `rank` under `key`, as decimal text.
pub fn post_rank(store: &dyn Store, key: &str, rank: usize) -> Result<()> {
    store.set(key, rank.to_string().as_bytes())
}

/// The rank posted under `key`; `None` when nothing readable is there (a store that is
/// gone, garbage), which ends a chain like a rank that posted nothing.
pub fn posted_rank(store: &dyn Store, key: &str) -> Option<usize> {
    let bytes = store.try_get(key).ok()??;
    std::str::from_utf8(&bytes).ok()?.trim().parse().ok()
}

/// The ranks met following waits from a start: each waits for the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// The ranks in order, the start first, each once.
    pub path: Vec<usize>,
    /// The rank already on `path` that the last one waits for, when the chain closes
    /// into a cycle (ranks waiting for each other) instead of ending.
    pub closed_by: Option<usize>,
}

impl Chain {
    /// The last rank reached: the silent one when the chain ends.
    pub fn end(&self) -> usize {
        self.path[self.path.len() - 1]
    }

    pub fn is_cycle(&self) -> bool {
        self.closed_by.is_some()
    }
}

/// Follows the waits from `start` in a group of `size`: `next(r)` is the rank `r` waits
/// for, if it said. A rank outside the group ends the chain, as no post does.
pub fn follow(start: usize, size: usize, mut next: impl FnMut(usize) -> Option<usize>) -> Chain {
    let mut path = vec![start];
    let mut at = start;
    while let Some(n) = next(at).filter(|n| *n < size) {
        if path.contains(&n) {
            return Chain {
                path,
                closed_by: Some(n),
            };
        }
        path.push(n);
        at = n;
    }
    Chain {
        path,
        closed_by: None,
    }
}

/// What one look at the posts found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Look<T> {
    /// The answer, which later posts cannot change.
    Decided(T),
    /// The best answer so far: posts still missing may change it.
    Open(T),
}

/// Looks with `look` every [`REREAD`] until it decides or `grace` has passed, and
/// returns what the last look found. Ranks stalled by one failure fail within moments
/// of each other, so a short wait for their posts is cheap next to blaming the wrong one.
pub fn settle<T>(grace: Duration, mut look: impl FnMut() -> Look<T>) -> T {
    let deadline = Instant::now() + grace;
    loop {
        match look() {
            Look::Decided(answer) => return answer,
            Look::Open(answer) if Instant::now() >= deadline => return answer,
            Look::Open(_) => std::thread::sleep(REREAD),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryStore;

    fn waits(posts: &[Option<usize>]) -> impl FnMut(usize) -> Option<usize> + '_ {
        |r| posts[r]
    }

    #[test]
    fn a_chain_ends_at_the_rank_that_posts_nothing() {
        // 0 waits for 1, 1 for 2, 2 for 3; 3 said nothing.
        let posts = [Some(1), Some(2), Some(3), None];
        let chain = follow(0, 4, waits(&posts));
        assert_eq!(chain.path, vec![0, 1, 2, 3]);
        assert_eq!((chain.end(), chain.is_cycle()), (3, false));
        assert_eq!(follow(3, 4, waits(&posts)).path, vec![3]);
    }

    #[test]
    fn ranks_waiting_for_each_other_close_a_cycle() {
        let posts = [Some(1), Some(0), Some(0)];
        let back = follow(0, 3, waits(&posts));
        assert_eq!((back.path, back.closed_by), (vec![0, 1], Some(0)));
        // A cycle further on ends at the rank that closes it.
        let further = follow(2, 3, waits(&posts));
        assert_eq!((further.end(), further.closed_by), (1, Some(0)));
        let own = follow(1, 2, |_| Some(1));
        assert_eq!((own.path, own.closed_by), (vec![1], Some(1)));
    }

    #[test]
    fn a_rank_outside_the_group_ends_the_chain() {
        let chain = follow(0, 2, |r| [Some(1), Some(7)][r]);
        assert_eq!((chain.end(), chain.is_cycle()), (1, false));
    }

    #[test]
    fn posted_ranks_round_trip_and_garbage_is_no_post() {
        let store = MemoryStore::new();
        post_rank(&store, "w/0", 3).unwrap();
        store.set("w/1", b" 2\n").unwrap();
        store.set("w/2", b"not a rank").unwrap();
        let read: Vec<_> = (0..4)
            .map(|r| posted_rank(&store, &format!("w/{r}")))
            .collect();
        assert_eq!(read, vec![Some(3), Some(2), None, None]);
    }

    #[test]
    fn settling_stops_at_a_decision_or_at_the_grace_with_the_last_look() {
        let mut looks = 0;
        let decided = settle(Duration::from_secs(60), || {
            looks += 1;
            if looks == 3 {
                Look::Decided(looks)
            } else {
                Look::Open(0)
            }
        });
        assert_eq!(decided, 3);
        let mut looks = 0;
        let started = Instant::now();
        let open = settle(Duration::from_millis(50), || {
            looks += 1;
            Look::Open(looks)
        });
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert!(open >= 2, "looked {open} times");
        assert_eq!(settle(Duration::ZERO, || Look::Open("once")), "once");
    }
}
