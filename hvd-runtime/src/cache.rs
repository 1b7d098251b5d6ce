//! The response cache: tensors negotiated before skip the announcement round.
//!
//! A successful response is remembered in a numbered slot with every rank's request.
//! When a rank submits the same tensor again with the same request, it only sets the
//! slot's bit in a small vector that the ranks combine each cycle; a bit set on every
//! rank means the cached response runs at once. Every rank changes its cache in the
//! same way at the same point of the same cycle, so slot numbers agree everywhere.
//!
//! A full cache frees its least recently used eighth at once: a job with more tensors
//! per step than entries inserts on every announcement, and one scan per insert made
//! such a cycle quadratic (2 000 tensors over 1 024 entries: 12 ms of a 19 ms cycle).
//! It also says once that the cache is too small, since such a job announces those
//! tensors every step.

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
    /// Empty slots, taken before the vector grows.
    free: Vec<usize>,
    by_name: FxHashMap<Name, usize>,
    clock: u64,
    /// Set once the cache has had to evict (and said so).
    evicted: bool,
}

impl ResponseCache {
    pub fn new(capacity: usize) -> Self {
        ResponseCache {
            capacity,
            slots: Vec::new(),
            free: Vec::new(),
            by_name: FxHashMap::default(),
            clock: 0,
            evicted: false,
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
    /// rank took part in. When full, first frees the least recently used eighth.
    pub fn insert(&mut self, response: &Response, requests: &[Option<Request>]) {
        let data = |op| op != hvd_core::OpKind::Barrier;
        let reusable = matches!(response.kind, OpKind::Collective(op) if data(op))
            && response.outcome.is_ok()
            && requests.iter().all(Option::is_some);
        if self.capacity == 0 || !reusable {
            return;
        }
        self.invalidate(&response.name);
        if self.free.is_empty() {
            if self.slots.len() < self.capacity {
                self.free.push(self.slots.len());
                self.slots.push(None);
            } else {
                self.evict_least_recent();
            }
        }
        let Some(slot) = self.free.pop() else {
            return;
        };
        self.clock += 1;
        self.slots[slot] = Some(Cached {
            response: response.clone(),
            requests: requests.to_vec(),
            last_used: self.clock,
        });
        self.by_name.insert(response.name.clone(), slot);
    }

    /// Frees the least recently used eighth of the entries (at least one).
    fn evict_least_recent(&mut self) {
        let mut used: Vec<(u64, usize)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().map(|c| (c.last_used, i)))
            .collect();
        if used.is_empty() {
            return;
        }
        let count = (used.len() / 8).max(1);
        used.select_nth_unstable(count - 1);
        // Uses are numbered by one clock, so no two entries tie and every rank frees the
        // same ones; pushed highest first, the lowest slot is reused first.
        let mut oldest: Vec<usize> = used[..count].iter().map(|&(_, slot)| slot).collect();
        oldest.sort_unstable_by(|a, b| b.cmp(a));
        for slot in oldest {
            if let Some(cached) = self.slots[slot].take() {
                self.by_name.remove(&cached.response.name);
            }
            self.free.push(slot);
        }
        if !self.evicted {
            self.evicted = true;
            tracing::warn!(
                "the response cache is full ({} entries): tensors beyond it are announced in \
                 full every step; set HVD_CACHE_CAPACITY above the number of tensors a step \
                 submits",
                self.capacity
            );
        }
    }

    /// Forgets `name` (a rank asked for it differently, so the entry is stale).
    pub fn invalidate(&mut self, name: &str) {
        if let Some(slot) = self.by_name.remove(name) {
            self.slots[slot] = None;
            self.free.push(slot);
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
    fn a_full_cache_frees_its_least_recent_eighth_at_once() {
        let mut cache = ResponseCache::new(16);
        let names: Vec<String> = (0..16).map(|i| format!("t{i}")).collect();
        let requests: Vec<Request> = names
            .iter()
            .map(|n| cache_response(&mut cache, n, 1))
            .collect();
        // t0 and t1 are used again: t2 and t3 become the least recent.
        cache.hit(0);
        cache.hit(1);
        let late = cache_response(&mut cache, "late", 1);
        let held = |cache: &ResponseCache, r: &Request| cache.lookup(0, r).is_some();
        assert!(!held(&cache, &requests[2]) && !held(&cache, &requests[3]));
        assert!(requests.iter().skip(4).all(|r| held(&cache, r)));
        assert!(held(&cache, &requests[0]) && held(&cache, &late));
        // The second freed slot takes the next entry without evicting again.
        let later = cache_response(&mut cache, "later", 1);
        assert!(held(&cache, &later) && requests.iter().skip(4).all(|r| held(&cache, r)));
        assert_eq!(cache.slots(), 16);
    }

    #[test]
    fn capacity_zero_caches_nothing() {
        let mut cache = ResponseCache::new(0);
        let a = cache_response(&mut cache, "a", 1);
        assert_eq!(cache.lookup(0, &a), None);
    }
}
