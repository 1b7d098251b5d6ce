//! Naming the rank a failure came from. NCCL says that something failed (a remote error,
//! a timeout), not who: so every rank that fails posts what it saw in the rendezvous
//! store, in the order the ranks failed (a rank posts before it aborts, so its peers'
//! reactions come after it), and reads what the others posted. Named, the same way on
//! every survivor: a peer on this host whose process exited without posting; else, once
//! every rank posted, the first to fail with an error (or to leave); else, after a
//! grace period, a rank that never posted; and no one when every rank timed out.

use std::time::Duration;

use hvd_core::driver::blame::{self, Look};
use hvd_core::{Error, Store, Topology};

/// What this rank saw go wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seen {
    /// NCCL or the driver reported an error, in its words.
    Failed(String),
    /// The call did not finish in time.
    TimedOut,
    /// This rank left the group (its collective was dropped).
    Left,
}

/// A rank's post: its place in the order of failures, and what it saw.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Post {
    order: i64,
    seen: Seen,
}

impl Post {
    fn encode(&self) -> String {
        match &self.seen {
            Seen::Failed(text) => format!("{} failed {text}", self.order),
            Seen::TimedOut => format!("{} timeout", self.order),
            Seen::Left => format!("{} left", self.order),
        }
    }

    fn decode(bytes: &[u8]) -> Option<Post> {
        let text = std::str::from_utf8(bytes).ok()?;
        let (order, rest) = text.split_once(' ')?;
        let seen = match rest.split_once(' ') {
            Some(("failed", words)) => Seen::Failed(words.to_owned()),
            None if rest == "timeout" => Seen::TimedOut,
            None if rest == "left" => Seen::Left,
            _ => return None,
        };
        Some(Post {
            order: order.parse().ok()?,
            seen,
        })
    }
}

/// Where a group's posts live in the store, and who is in it.
pub(crate) struct Board<'a> {
    pub store: &'a dyn Store,
    /// The group's namespace.
    pub prefix: &'a str,
    pub topology: &'a Topology,
}

/// One failing call, for the error it becomes.
pub(crate) struct Call<'a> {
    pub op: &'static str,
    pub tensor: &'a str,
    /// How long the call waited before it gave up.
    pub waited: Duration,
    /// How long to wait for the others' posts.
    pub grace: Duration,
}

impl Board<'_> {
    fn key(&self, what: &str, rank: usize) -> String {
        format!("{}/{what}/{rank}", self.prefix)
    }

    /// Records this rank's process, for peers on the same host to watch.
    pub(crate) fn register(&self) -> hvd_core::Result<()> {
        let rank = self.topology.rank();
        self.store.set(
            &self.key("pid", rank),
            std::process::id().to_string().as_bytes(),
        )
    }

    /// Whether rank `r` registered (it reached the rendezvous).
    pub(crate) fn registered(&self, r: usize) -> bool {
        matches!(self.store.try_get(&self.key("pid", r)), Ok(Some(_)))
    }

    /// Posts what this rank saw, in the order of the group's failures (best effort: a
    /// store that is gone leaves the others to the pid checks and the timeout).
    pub(crate) fn post(&self, seen: Seen) {
        let rank = self.topology.rank();
        let order = self
            .store
            .add(&format!("{}/failures", self.prefix), 1)
            .unwrap_or(i64::MAX);
        let post = Post { order, seen };
        if let Err(e) = self
            .store
            .set(&self.key("failed", rank), post.encode().as_bytes())
        {
            tracing::debug!("rank {rank}: posting a failure: {e}");
        }
    }

    /// A peer on this host whose process has exited, with its pid.
    fn exited(&self, peer: usize) -> Option<u32> {
        let hosts = self.topology.hosts();
        if hosts[peer] != hosts[self.topology.rank()] {
            return None;
        }
        let bytes = self.store.try_get(&self.key("pid", peer)).ok()??;
        let pid: u32 = std::str::from_utf8(&bytes).ok()?.parse().ok()?;
        (pid != std::process::id() && hvd_core::process::has_exited(pid)).then_some(pid)
    }

    /// The error this rank reports for `call`, after it posted `mine`: it reads the
    /// others' posts (waiting up to `call.grace` for missing ones) and names the rank to
    /// blame.
    pub(crate) fn verdict(&self, call: &Call<'_>, mine: &Seen) -> Error {
        let (rank, size) = (self.topology.rank(), self.topology.size());
        let peers: Vec<usize> = (0..size).filter(|r| *r != rank).collect();
        let mut posts: Vec<Option<Post>> = vec![None; size];
        blame::settle(call.grace, || {
            for (r, post) in posts.iter_mut().enumerate() {
                if post.is_none() {
                    *post = self
                        .store
                        .try_get(&self.key("failed", r))
                        .ok()
                        .flatten()
                        .and_then(|b| Post::decode(&b));
                }
            }
            let missing: Vec<usize> = peers
                .iter()
                .copied()
                .filter(|p| posts[*p].is_none())
                .collect();
            // A peer that died cannot post: it is the cause of the others' errors.
            if let Some((peer, pid)) = missing.iter().find_map(|p| Some((*p, self.exited(*p)?))) {
                return Look::Decided(Error::PeerLost {
                    rank,
                    peer,
                    op: call.op,
                    tensor: call.tensor.into(),
                    cause: format!("its process (pid {pid}) exited"),
                });
            }
            match missing.is_empty() {
                true => Look::Decided(decide(rank, call, mine, &posts, culprit(&posts), &[])),
                false => Look::Open(decide(rank, call, mine, &posts, None, &missing)),
            }
        })
    }
}

/// The rank whose failure came first among those that failed on their own or left.
fn culprit(posts: &[Option<Post>]) -> Option<usize> {
    posts
        .iter()
        .enumerate()
        .filter_map(|(r, p)| p.as_ref().map(|p| (r, p)))
        .filter(|(_, p)| p.seen != Seen::TimedOut)
        .min_by_key(|(r, p)| (p.order, *r))
        .map(|(r, _)| r)
}

fn decide(
    rank: usize,
    call: &Call<'_>,
    mine: &Seen,
    posts: &[Option<Post>],
    first: Option<usize>,
    missing: &[usize],
) -> Error {
    let tensor = call.tensor.to_owned();
    match first {
        Some(peer) if peer != rank => {
            let cause = match posts[peer].as_ref().map(|p| &p.seen) {
                Some(Seen::Failed(text)) => format!("it failed: {text}"),
                _ => "it left the group (its collective was dropped)".into(),
            };
            return Error::PeerLost {
                rank,
                peer,
                op: call.op,
                tensor,
                cause,
            };
        }
        Some(_) => {
            if let Seen::Failed(text) = mine {
                return Error::Device {
                    rank,
                    op: call.op,
                    tensor,
                    cause: text.clone(),
                };
            }
        }
        None => {}
    }
    if let Some(&peer) = missing.first() {
        let rest: Vec<String> = missing[1..].iter().map(|r| r.to_string()).collect();
        let others = match rest.len() {
            0 => String::new(),
            1 => format!("; rank {} did not either", rest[0]),
            _ => format!("; ranks {} did not either", rest.join(", ")),
        };
        return Error::PeerSilent {
            rank,
            peer,
            op: call.op,
            tensor,
            waited: call.waited,
            detail: format!("it never reported how the call went{others}"),
        };
    }
    Error::Timeout {
        rank,
        op: call.op,
        tensor,
        waited: call.waited,
        waiting_for: format!(
            "NCCL to finish it: all {} ranks timed out in this call (the device work never finished)",
            posts.len()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(order: i64, seen: Seen) -> Option<Post> {
        Some(Post { order, seen })
    }

    fn call() -> Call<'static> {
        Call {
            op: "allreduce",
            tensor: "grad",
            waited: Duration::from_secs(5),
            grace: Duration::ZERO,
        }
    }

    #[test]
    fn posts_round_trip_and_garbage_is_no_post() {
        for seen in [
            Seen::Failed("remote error: x y".into()),
            Seen::TimedOut,
            Seen::Left,
        ] {
            let p = Post { order: 3, seen };
            assert_eq!(Post::decode(p.encode().as_bytes()), Some(p));
        }
        assert_eq!(Post::decode(b"3 exploded"), None);
        assert_eq!(Post::decode(b"x timeout"), None);
    }

    #[test]
    fn the_first_rank_to_fail_on_its_own_is_named_and_reports_its_own_error() {
        let posts = [
            post(2, Seen::Failed("remote error: rank 1 left".into())),
            post(1, Seen::Failed("injected".into())),
        ];
        let first = culprit(&posts);
        assert_eq!(first, Some(1));
        let survivor = decide(0, &call(), &Seen::Failed("x".into()), &posts, first, &[]);
        assert_eq!(
            survivor.to_string(),
            "rank 0: lost rank 1 during allreduce of tensor 'grad': it failed: injected"
        );
        let culprit = decide(
            1,
            &call(),
            &Seen::Failed("injected".into()),
            &posts,
            first,
            &[],
        );
        assert_eq!(
            culprit.to_string(),
            "rank 1: allreduce of tensor 'grad' failed on the device: injected"
        );
    }

    #[test]
    fn a_rank_that_never_posts_is_silent_and_timeouts_everywhere_blame_no_one() {
        let posts = [post(1, Seen::TimedOut), None, None];
        let silent = decide(0, &call(), &Seen::TimedOut, &posts, None, &[1, 2]);
        assert_eq!(
            silent.to_string(),
            "rank 0: allreduce of tensor 'grad' timed out after 5s waiting for rank 1 (it never \
             reported how the call went; rank 2 did not either)"
        );
        let posts = [post(1, Seen::TimedOut), post(2, Seen::TimedOut)];
        let hang = decide(0, &call(), &Seen::TimedOut, &posts, None, &[]);
        assert_eq!(
            hang.to_string(),
            "rank 0: allreduce of tensor 'grad' timed out after 5s waiting for NCCL to finish \
             it: all 2 ranks timed out in this call (the device work never finished)"
        );
    }
}
