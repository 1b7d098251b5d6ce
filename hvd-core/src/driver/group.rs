//! [`Group`]: what the calls on one rank's member of a group share.

use std::sync::{Mutex, MutexGuard};

use crate::{Error, Result, validate};

/// The state of one rank's member of a group, behind one lock: one call runs at a time.
#[derive(Debug)]
pub struct Group<S> {
    rank: usize,
    calls: Mutex<Calls<S>>,
}

/// This rank's place in a sub-group about to be joined: see [`Group::split`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subgroup {
    /// This rank's rank in the sub-group.
    pub rank: usize,
    /// The sub-group's store namespace.
    pub prefix: String,
}

/// What [`Group::lock`] hands one call.
#[derive(Debug)]
pub struct Calls<S> {
    /// The transport's own state (its event loop, its shared segment).
    pub transport: S,
    seq: u32,
    splits: u64,
    poisoned: Option<Error>,
}

impl<S> Group<S> {
    /// The group of `rank`, over the transport's state.
    pub fn new(rank: usize, transport: S) -> Self {
        Group {
            rank,
            calls: Mutex::new(Calls {
                transport,
                seq: 0,
                splits: 0,
                poisoned: None,
            }),
        }
    }

    /// The state for one call, unless an earlier failure ended the group: then that
    /// failure, so every later call says what went wrong first.
    pub fn lock(&self) -> Result<MutexGuard<'_, Calls<S>>> {
        let calls = self.calls.lock().map_err(|_| Error::Shutdown {
            cause: format!(
                "rank {}: a thread panicked during a call on this group",
                self.rank
            ),
        })?;
        match &calls.poisoned {
            Some(error) => Err(error.clone()),
            None => Ok(calls),
        }
    }

    /// Counts a split of the group and returns its number, which names the sub-group's
    /// namespace. Every rank counts every split, member or not, so the numbers agree.
    fn next_split(&self) -> Result<u64> {
        let mut calls = self.lock()?;
        calls.splits += 1;
        Ok(calls.splits)
    }

    /// The start of [`Collective::split`](crate::Collective::split) on the group at
    /// `prefix` of `size` ranks: checks the members, counts the split, and says which
    /// rank this one is in the sub-group and where the sub-group's keys live; `None`
    /// when this rank is not a member.
    pub fn split(&self, prefix: &str, size: usize, members: &[usize]) -> Result<Option<Subgroup>> {
        validate::members(self.rank, size, members)?;
        let index = self.next_split()?;
        Ok(members
            .iter()
            .position(|m| *m == self.rank)
            .map(|rank| Subgroup {
                rank,
                prefix: subgroup_prefix(prefix, index, members),
            }))
    }
}

impl<S> Calls<S> {
    /// Numbers the next call; every rank numbers the same call alike.
    pub fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// Ends the group with `error`, which every later call returns.
    pub fn poison(&mut self, error: Error) {
        self.poisoned = Some(error);
    }
}

/// Refuses a rank outside a group of `size`.
pub fn check_rank(rank: usize, size: usize) -> Result<()> {
    if rank < size {
        return Ok(());
    }
    Err(Error::Config {
        name: "rank".into(),
        value: rank.to_string(),
        expected: format!("a rank below the group size {size}"),
    })
}

/// The store namespace of split number `index` of the group at `prefix`. The members
/// are part of it, so ranks that disagree on them never meet (and time out naming each
/// other) instead of forming a wrong group.
pub fn subgroup_prefix(prefix: &str, index: u64, members: &[usize]) -> String {
    format!("{prefix}/split{index}-{:016x}", fingerprint(members))
}

/// FNV-1a of the members: the same on every rank, build and platform (a device
/// transport derives its split's colour from it too).
pub fn fingerprint(members: &[usize]) -> u64 {
    members
        .iter()
        .flat_map(|m| (*m as u64).to_le_bytes())
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_group_returns_the_first_failure_to_every_later_call() {
        let group = Group::new(3, ());
        assert_eq!(group.lock().unwrap().next_seq(), 1);
        assert_eq!(group.next_split().unwrap(), 1);
        let first = Error::Shutdown {
            cause: "rank 1 left".into(),
        };
        group.lock().unwrap().poison(first.clone());
        for _ in 0..2 {
            assert_eq!(group.lock().unwrap_err().to_string(), first.to_string());
        }
        assert_eq!(
            group.next_split().unwrap_err().to_string(),
            first.to_string()
        );
    }

    #[test]
    fn subgroup_names_depend_on_the_split_and_its_members() {
        // FNV-1a of the members as little-endian u64s: the same on every build.
        let a = subgroup_prefix("tcp", 1, &[0, 2]);
        assert_eq!(a, "tcp/split1-c615adcb76ddf8a7");
        assert_ne!(a, subgroup_prefix("tcp", 1, &[2, 0]));
        assert_ne!(a, subgroup_prefix("tcp", 2, &[0, 2]));
    }

    #[test]
    fn a_rank_outside_the_group_is_refused() {
        assert!(check_rank(1, 2).is_ok());
        assert_eq!(
            check_rank(2, 2).unwrap_err().to_string(),
            "invalid value \"2\" for rank: expected a rank below the group size 2"
        );
    }
}
