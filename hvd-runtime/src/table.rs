//! The message table: every announced request, per tensor name and rank, until all ranks
//! have asked. Every rank keeps an identical copy because every rank adds the same
//! announcements in the same order.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::request::{Name, OpKind, Request};
use super::response::{Response, decide};

struct Entry {
    requests: Vec<Option<Request>>,
    /// When the first rank announced it: the agreed execution order.
    order: u64,
    /// When this rank first saw it (for the stall inspector only).
    since: Instant,
}

/// A tensor some ranks asked for long ago that others have not.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stall {
    pub name: String,
    pub submitted: Vec<usize>,
    pub missing: Vec<usize>,
    pub waited: Duration,
}

pub(crate) struct MessageTable {
    size: usize,
    entries: HashMap<Name, Entry>,
    next_order: u64,
    /// Ranks in the order they announced their join.
    join_order: Vec<usize>,
}

/// A ready response, with every rank's request (for the response cache).
pub(crate) struct Ready {
    pub response: Response,
    pub requests: Vec<Option<Request>>,
}

impl MessageTable {
    pub fn new(size: usize) -> Self {
        MessageTable {
            size,
            entries: HashMap::new(),
            next_order: 0,
            join_order: Vec::new(),
        }
    }

    /// Records `rank`'s request.
    pub fn add(&mut self, rank: usize, request: Request) {
        if request.kind() == OpKind::Join {
            self.join_order.push(rank);
        }
        let size = self.size;
        let order = &mut self.next_order;
        let entry = self.entries.entry(request.name.clone()).or_insert_with(|| {
            *order += 1;
            Entry {
                requests: vec![None; size],
                order: *order,
                since: Instant::now(),
            }
        });
        entry.requests[rank] = Some(request);
    }

    /// Which ranks have joined (announced a join that has not completed).
    pub fn joined(&self) -> Vec<bool> {
        let mut joined = vec![false; self.size];
        self.join_order.iter().for_each(|r| joined[*r] = true);
        joined
    }

    /// Removes and returns every entry that all ranks have asked for (joined ranks need not
    /// ask, except for the join itself), in the order they were first announced.
    pub fn take_ready(&mut self) -> Vec<Ready> {
        let joined = self.joined();
        let mut names: Vec<(u64, Name)> = self
            .entries
            .iter()
            .filter(|(_, e)| {
                let is_join = e
                    .requests
                    .iter()
                    .flatten()
                    .any(|r| r.kind() == OpKind::Join);
                e.requests
                    .iter()
                    .enumerate()
                    .all(|(rank, r)| r.is_some() || (joined[rank] && !is_join))
            })
            .map(|(name, e)| (e.order, name.clone()))
            .collect();
        names.sort();
        let last_joined = self.join_order.last().copied().unwrap_or(0);
        let mut ready = Vec::with_capacity(names.len());
        for (_, name) in names {
            let Some(entry) = self.entries.remove(&name) else {
                continue;
            };
            // An entry exists because some rank announced it.
            let Some(first) = entry
                .requests
                .iter()
                .enumerate()
                .find_map(|(rank, r)| r.as_ref().map(|r| (rank, r)))
            else {
                continue;
            };
            let response = decide(&name, first, &entry.requests, last_joined);
            if response.kind == OpKind::Join {
                self.join_order.clear();
            }
            ready.push(Ready {
                response,
                requests: entry.requests,
            });
        }
        ready
    }

    /// Removes `name` (a stalled tensor that is being failed); returns its op. The ranks
    /// of a failed join are no longer joined: they go on as before it.
    pub fn remove(&mut self, name: &str) -> Option<OpKind> {
        let entry = self.entries.remove(name)?;
        let askers: Vec<usize> = (0..self.size)
            .filter(|r| entry.requests[*r].is_some())
            .collect();
        let kind = entry.requests.into_iter().flatten().next()?.kind();
        if kind == OpKind::Join {
            self.join_order.retain(|r| !askers.contains(r));
        }
        Some(kind)
    }

    /// Entries some ranks have waited on for longer than `after`, oldest first.
    pub fn stalls(&self, after: Duration) -> Vec<Stall> {
        let joined = self.joined();
        let mut stalls: Vec<(u64, Stall)> = self
            .entries
            .iter()
            .filter(|(_, e)| e.since.elapsed() >= after)
            .map(|(name, e)| {
                let (submitted, missing): (Vec<usize>, Vec<usize>) = (0..self.size)
                    .filter(|r| !joined[*r] || e.requests[*r].is_some())
                    .partition(|r| e.requests[*r].is_some());
                (
                    e.order,
                    Stall {
                        name: name.to_string(),
                        submitted,
                        missing,
                        waited: e.since.elapsed(),
                    },
                )
            })
            .collect();
        stalls.sort_by_key(|(order, _)| *order);
        stalls.into_iter().map(|(_, s)| s).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Op;
    use hvd_core::{Compression, DType, ReduceOp, Reduction};

    fn req(name: &str, op: Op, dtype: DType, shape: &[usize]) -> Request {
        Request::new(name, op, dtype, shape.to_vec())
    }

    fn allreduce(reduction: Reduction) -> Op {
        Op::Allreduce {
            reduction,
            compression: Compression::None,
        }
    }

    const SUM: Reduction = Reduction::new(ReduceOp::Sum);

    #[test]
    fn ready_in_first_announced_order_whatever_order_ranks_submit() {
        let mut t = MessageTable::new(2);
        for name in ["a", "b", "c"] {
            t.add(0, req(name, allreduce(SUM), DType::F32, &[4]));
        }
        for name in ["c", "b"] {
            t.add(1, req(name, allreduce(SUM), DType::F32, &[4]));
        }
        let ready: Vec<String> = t
            .take_ready()
            .into_iter()
            .map(|r| r.response.name.to_string())
            .collect();
        assert_eq!(ready, ["b", "c"]);
        t.add(1, req("a", allreduce(SUM), DType::F32, &[4]));
        assert_eq!(t.take_ready().len(), 1);
    }

    #[test]
    fn each_mismatch_names_the_tensor_both_ranks_and_both_values() {
        let cases = [
            (
                req("g", allreduce(SUM), DType::F64, &[4]),
                "Mismatched data types for tensor 'g': rank 0 has f32, rank 1 has f64",
            ),
            (
                req("g", allreduce(SUM), DType::F32, &[2, 2]),
                "Mismatched shapes for tensor 'g': rank 0 has [4], rank 1 has [2, 2]",
            ),
            (
                req("g", Op::Broadcast { root: 0 }, DType::F32, &[4]),
                "Mismatched operations for tensor 'g': rank 0 has allreduce, rank 1 has broadcast",
            ),
            (
                req(
                    "g",
                    allreduce(Reduction::new(ReduceOp::Max)),
                    DType::F32,
                    &[4],
                ),
                "Mismatched reduce ops for tensor 'g': rank 0 has sum, rank 1 has max",
            ),
            (
                req("g", allreduce(SUM.with_postscale(0.5)), DType::F32, &[4]),
                "Mismatched postscale factors for tensor 'g': rank 0 has 1, rank 1 has 0.5",
            ),
        ];
        for (other, message) in cases {
            let mut t = MessageTable::new(2);
            t.add(0, req("g", allreduce(SUM), DType::F32, &[4]));
            t.add(1, other);
            let ready = t.take_ready();
            let err = ready[0].response.outcome.as_ref().unwrap_err();
            assert_eq!(err.to_string(), message);
        }
    }

    #[test]
    fn allgather_first_dims_may_differ_but_not_the_rest() {
        let mut t = MessageTable::new(2);
        t.add(0, req("x", Op::Allgather, DType::I32, &[3, 2]));
        t.add(1, req("x", Op::Allgather, DType::I32, &[5, 2]));
        let plan = t.take_ready().remove(0).response.outcome.unwrap();
        assert_eq!(plan.rows, [3, 5]);
        t.add(0, req("y", Op::Allgather, DType::I32, &[3, 2]));
        t.add(1, req("y", Op::Allgather, DType::I32, &[3, 4]));
        assert_eq!(
            t.take_ready()[0]
                .response
                .outcome
                .as_ref()
                .unwrap_err()
                .to_string(),
            "Mismatched shapes (all dims but the first must match) for tensor 'y': rank 0 has [3, 2], rank 1 has [3, 4]"
        );
    }

    #[test]
    fn joined_ranks_contribute_to_allreduce_and_join_reports_the_last() {
        let mut t = MessageTable::new(3);
        t.add(2, req("hvd.join", Op::Join, DType::U8, &[]));
        t.add(0, req("x", allreduce(SUM), DType::F32, &[1]));
        t.add(1, req("x", allreduce(SUM), DType::F32, &[1]));
        let plan = t.take_ready().remove(0).response.outcome.unwrap();
        assert_eq!(plan.joined, [false, false, true]);
        t.add(0, req("hvd.join", Op::Join, DType::U8, &[]));
        assert!(t.take_ready().is_empty());
        t.add(1, req("hvd.join", Op::Join, DType::U8, &[]));
        let join = t.take_ready().remove(0).response.outcome.unwrap();
        assert_eq!(join.last_joined, 1);
        assert_eq!(t.joined(), [false, false, false]);
    }

    #[test]
    fn a_failed_join_leaves_its_ranks_unjoined() {
        let mut t = MessageTable::new(2);
        t.add(0, req("hvd.join", Op::Join, DType::U8, &[]));
        assert_eq!(t.joined(), [true, false]);
        assert_eq!(t.remove("hvd.join"), Some(OpKind::Join));
        assert_eq!(t.joined(), [false, false]);
        // Rank 1's allreduce now waits for rank 0 instead of taking zeros from it.
        t.add(1, req("x", allreduce(SUM), DType::F32, &[1]));
        assert!(t.take_ready().is_empty());
    }

    #[test]
    fn broadcast_while_a_rank_has_joined_is_an_error() {
        let mut t = MessageTable::new(2);
        t.add(1, req("hvd.join", Op::Join, DType::U8, &[]));
        t.add(0, req("w", Op::Broadcast { root: 0 }, DType::F32, &[2]));
        assert_eq!(
            t.take_ready()[0]
                .response
                .outcome
                .as_ref()
                .unwrap_err()
                .to_string(),
            "rank 0: broadcast of tensor 'w' cannot run while rank 1 has joined: only allreduce can run while ranks have joined"
        );
    }

    #[test]
    fn a_device_allreduce_while_a_rank_has_joined_is_an_error() {
        let mut t = MessageTable::new(2);
        t.add(1, req("hvd.join", Op::Join, DType::U8, &[]));
        let mut gpu = req("g", allreduce(SUM), DType::F32, &[2]);
        gpu.device = hvd_core::Device::Cuda(0);
        t.add(0, gpu);
        assert_eq!(
            t.take_ready()[0]
                .response
                .outcome
                .as_ref()
                .unwrap_err()
                .to_string(),
            "rank 0: allreduce of tensor 'g' cannot run while rank 1 has joined: joined ranks contribute zeros to host tensors only, and this one is on cuda:0"
        );
    }

    #[test]
    fn ranks_agree_on_the_kind_of_device_not_its_ordinal() {
        let on = |device| {
            let mut r = req("g", allreduce(SUM), DType::F32, &[2]);
            r.device = device;
            r
        };
        let mut t = MessageTable::new(2);
        t.add(0, on(hvd_core::Device::Cuda(0)));
        t.add(1, on(hvd_core::Device::Cuda(1)));
        assert!(
            t.take_ready()[0].response.outcome.is_ok(),
            "each rank its own GPU"
        );
        t.add(0, on(hvd_core::Device::Cuda(0)));
        t.add(1, on(hvd_core::Device::Cpu));
        assert_eq!(
            t.take_ready()[0]
                .response
                .outcome
                .as_ref()
                .unwrap_err()
                .to_string(),
            "Mismatched devices for tensor 'g': rank 0 has cuda:0, rank 1 has cpu"
        );
    }

    #[test]
    fn stalls_name_who_submitted_and_who_is_missing() {
        let mut t = MessageTable::new(3);
        t.add(1, req("slow", allreduce(SUM), DType::F32, &[1]));
        let stalls = t.stalls(Duration::ZERO);
        assert_eq!(
            (stalls[0].submitted.clone(), stalls[0].missing.clone()),
            (vec![1], vec![0, 2])
        );
    }
}
