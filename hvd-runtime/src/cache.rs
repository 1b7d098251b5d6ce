//! The response cache: tensors negotiated before skip the announcement round.
//!
//! A successful response is remembered in a numbered slot with every rank's request.
//! When a rank submits the same tensor again with the same request, it only sets the
//! slot's bit in a small vector that the ranks AND together each cycle; a bit set on
//! every rank means the cached response runs at once. Every rank changes its cache in the
//! same way at the same point of the same cycle, so slot numbers agree everywhere.

use rustc_hash::FxHashMap;

use super::request::{Name, OpKind, Request};
use super::response::Response;

struct Cached {
    response: Response,
    requests: Vec<Option<Request>>,
    last_used: u64,
}

pub(crate) struct ResponseCache {
    capacity: usize,
    slots: Vec<Option<Cached>>,
    by_name: FxHashMap<Name, usize>,
    clock: u64,
}

impl ResponseCache {
    pub fn new(capacity: usize) -> Self {
        ResponseCache {
            capacity,
            slots: Vec::new(),
            by_name: FxHashMap::default(),
            clock: 0,
        }
    }

    /// Number of slots in use or freed; the length of the per-cycle bit vector.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// The slot holding `name` if `rank`'s cached request equals `request`.
    pub fn lookup(&self, rank: usize, request: &Request) -> Option<usize> {
        let slot = *self.by_name.get(&request.name)?;
        let cached = self.slots[slot].as_ref()?;
        (cached.requests[rank].as_ref() == Some(request)).then_some(slot)
    }

    /// Whether slot `slot` still holds `name`.
    pub fn holds(&self, slot: usize, name: &str) -> bool {
        self.by_name.get(name) == Some(&slot)
    }

    /// The response in `slot`, marking it used.
    pub fn hit(&mut self, slot: usize) -> Option<Response> {
        self.clock += 1;
        let cached = self.slots.get_mut(slot)?.as_mut()?;
        cached.last_used = self.clock;
        Some(cached.response.clone())
    }

    /// The response in `slot`, without marking it used.
    pub fn response(&self, slot: usize) -> Option<&Response> {
        Some(&self.slots.get(slot)?.as_ref()?.response)
    }

    /// The op of the tensor in `slot`.
    pub fn kind(&self, slot: usize) -> Option<OpKind> {
        Some(self.slots.get(slot)?.as_ref()?.response.kind)
    }

    /// Remembers a response if it can be reused: a successful data collective that every
    /// rank took part in. Evicts the least recently used entry when full.
    pub fn insert(&mut self, response: &Response, requests: &[Option<Request>]) {
        let reusable = matches!(
            response.kind,
            OpKind::Allreduce
                | OpKind::Allgather
                | OpKind::Broadcast
                | OpKind::Alltoall
                | OpKind::Reducescatter
        ) && response.outcome.is_ok()
            && requests.iter().all(Option::is_some);
        if self.capacity == 0 || !reusable {
            return;
        }
        self.invalidate(&response.name);
        let slot = match self.slots.iter().position(Option::is_none) {
            Some(free) => free,
            None if self.slots.len() < self.capacity => {
                self.slots.push(None);
                self.slots.len() - 1
            }
            None => self.evict_least_recent(),
        };
        self.clock += 1;
        self.slots[slot] = Some(Cached {
            response: response.clone(),
            requests: requests.to_vec(),
            last_used: self.clock,
        });
        self.by_name.insert(response.name.clone(), slot);
    }

    fn evict_least_recent(&mut self) -> usize {
        let (slot, name) = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                c.as_ref()
                    .map(|c| (c.last_used, i, c.response.name.clone()))
            })
            .min()
            .map(|(_, i, name)| (i, name))
            .unwrap_or((0, Name::from("")));
        self.by_name.remove(&name);
        self.slots[slot] = None;
        slot
    }

    /// Forgets `name` (a rank asked for it differently, so the entry is stale).
    pub fn invalidate(&mut self, name: &str) {
        if let Some(slot) = self.by_name.remove(name) {
            self.slots[slot] = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Op;
    use crate::response::decide;
    use hvd_core::{Compression, DType, ReduceOp, Reduction};

    fn sum(name: &str, len: usize) -> Request {
        let op = Op::Allreduce {
            reduction: Reduction::new(ReduceOp::Sum),
            compression: Compression::None,
        };
        Request::new(name, op, DType::F32, vec![len])
    }

    fn cache_response(cache: &mut ResponseCache, name: &str, len: usize) -> Request {
        let r = sum(name, len);
        let requests = vec![Some(r.clone()), Some(r.clone())];
        cache.insert(&decide(name, (0, &r), &requests, 0), &requests);
        r
    }

    #[test]
    fn a_changed_shape_misses_and_the_same_request_hits() {
        let mut cache = ResponseCache::new(4);
        let r = cache_response(&mut cache, "w", 8);
        assert_eq!(cache.lookup(1, &r), Some(0));
        let changed = sum("w", 9);
        assert_eq!(cache.lookup(1, &changed), None);
    }

    #[test]
    fn full_cache_evicts_the_least_recently_used() {
        let mut cache = ResponseCache::new(2);
        let a = cache_response(&mut cache, "a", 1);
        let b = cache_response(&mut cache, "b", 1);
        cache.hit(0);
        let c = cache_response(&mut cache, "c", 1);
        assert_eq!(cache.lookup(0, &a), Some(0));
        assert_eq!(cache.lookup(0, &b), None);
        assert_eq!(cache.lookup(0, &c), Some(1));
        assert_eq!(cache.slots(), 2);
    }

    #[test]
    fn capacity_zero_caches_nothing() {
        let mut cache = ResponseCache::new(0);
        let a = cache_response(&mut cache, "a", 1);
        assert_eq!(cache.lookup(0, &a), None);
    }
}
