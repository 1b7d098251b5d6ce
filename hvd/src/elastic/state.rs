//! [`State`]: what an elastic job keeps across rounds, and [`TensorState`], a ready one.

use std::collections::BTreeMap;

use hvd_core::wire::{Reader, Writer};
use hvd_core::{DType, Element, Error, Result};

use crate::Hvd;

/// What an elastic job keeps across rounds. [`Context::commit`](super::Context::commit)
/// saves it in memory; after a failure every survivor restores its last commit; when a
/// round starts, the rank holding the newest commit sends it to every other rank (a
/// newcomer included) with `sync`.
pub trait State {
    /// Keeps the current state as the last commit.
    fn save(&mut self) -> Result<()>;

    /// Returns to the last commit: the work done since is done again.
    fn restore(&mut self) -> Result<()>;

    /// Makes every rank's state `root`'s. Collective over the round: every rank calls it
    /// with the same root, a rank that joined with nothing included.
    fn sync(&mut self, hvd: &Hvd, root: usize) -> Result<()>;

    /// Called when a round starts, before `sync`: what depends on the job's size (a
    /// learning rate scaled by it, a sampler's shares) is recomputed here.
    fn reset(&mut self, hvd: &Hvd) -> Result<()> {
        let _ = hvd;
        Ok(())
    }
}

/// One named value of a [`TensorState`].
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    dtype: DType,
    len: usize,
    bytes: Vec<u8>,
}

type Entries = BTreeMap<String, Entry>;

/// A [`State`] of named vectors of any element type hvd has, and counters: what a
/// training loop without a framework keeps (weights, a sampler's place, a step count).
///
/// `sync` sends the root's manifest (every name, dtype and length) first, so a rank
/// that lacks an entry (a newcomer with no optimizer state yet) gets it instead of
/// waiting for a tensor it does not know, and drops the ones the root has not.
#[derive(Debug, Clone, Default)]
pub struct TensorState {
    current: Entries,
    committed: Entries,
}

impl TensorState {
    pub fn new() -> Self {
        TensorState::default()
    }

    /// Sets `name` to `values`.
    pub fn set<T: Element>(&mut self, name: &str, values: &[T]) {
        let entry = Entry {
            dtype: T::DTYPE,
            len: values.len(),
            bytes: bytemuck::cast_slice(values).to_vec(),
        };
        self.current.insert(name.to_owned(), entry);
    }

    /// The values of `name`, if it holds elements of type `T`.
    pub fn get<T: Element>(&self, name: &str) -> Option<Vec<T>> {
        let entry = self.current.get(name).filter(|e| e.dtype == T::DTYPE)?;
        let size = std::mem::size_of::<T>();
        Some(
            entry
                .bytes
                .chunks_exact(size)
                .map(bytemuck::pod_read_unaligned)
                .collect(),
        )
    }

    /// Sets `name` to unsigned counters (kept as `i64`, which every transport reduces).
    pub fn set_u64s(&mut self, name: &str, values: &[u64]) {
        let words: Vec<i64> = values.iter().map(|v| *v as i64).collect();
        self.set(name, &words);
    }

    /// The counters of `name`, if set with [`set_u64s`](Self::set_u64s).
    pub fn get_u64s(&self, name: &str) -> Option<Vec<u64>> {
        Some(
            self.get::<i64>(name)?
                .into_iter()
                .map(|v| v as u64)
                .collect(),
        )
    }

    /// Sets the counter `name`.
    pub fn set_u64(&mut self, name: &str, value: u64) {
        self.set_u64s(name, &[value]);
    }

    /// The counter `name`, if set.
    pub fn get_u64(&self, name: &str) -> Option<u64> {
        match self.get_u64s(name)?.as_slice() {
            [value] => Some(*value),
            _ => None,
        }
    }

    /// The names of the entries, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.current.keys().map(String::as_str)
    }

    fn manifest(&self) -> Vec<u8> {
        let mut out = Writer::new();
        out.count(self.current.len());
        for (name, entry) in &self.current {
            out.str(name).u8(dtype_code(entry.dtype)).usize(entry.len);
        }
        out.into_bytes()
    }

    /// Makes the entries those of `manifest`: missing ones as zeros, others dropped.
    fn follow(&mut self, manifest: &[u8], rank: usize) -> Result<()> {
        // The reader names the message itself.
        let mut r = Reader::reporting(manifest, "elastic state manifest", Error::Store);
        let mut entries = Entries::new();
        // Each entry takes at least its name's length, a dtype and a length.
        for _ in 0..r.count("entries", 13)? {
            let name = r.string("name", 4096)?;
            let dtype = dtype_of(r.u8("dtype")?, rank)?;
            let len = r.usize("length")?;
            let entry = match self.current.remove(&name) {
                Some(mine) if mine.dtype == dtype && mine.len == len => mine,
                _ => Entry {
                    dtype,
                    len,
                    bytes: vec![0; len * dtype.size()],
                },
            };
            entries.insert(name, entry);
        }
        r.end()?;
        self.current = entries;
        Ok(())
    }
}

/// The elastic sampler (from hvd-core) keeps its place in the job's state.
impl hvd_core::sampler::CounterStore for TensorState {
    fn set_u64s(&mut self, name: &str, values: &[u64]) {
        TensorState::set_u64s(self, name, values);
    }

    fn get_u64s(&self, name: &str) -> Option<Vec<u64>> {
        TensorState::get_u64s(self, name)
    }
}

fn dtype_code(dtype: DType) -> u8 {
    DType::ALL.iter().position(|d| *d == dtype).unwrap_or(0) as u8
}

fn dtype_of(code: u8, rank: usize) -> Result<DType> {
    DType::ALL.get(usize::from(code)).copied().ok_or_else(|| {
        Error::invalid(
            rank,
            "elastic sync",
            "hvd.elastic.manifest",
            format!("the root sent dtype code {code}, which this build does not know"),
        )
    })
}

impl State for TensorState {
    fn save(&mut self) -> Result<()> {
        self.committed = self.current.clone();
        Ok(())
    }

    fn restore(&mut self) -> Result<()> {
        self.current = self.committed.clone();
        Ok(())
    }

    fn sync(&mut self, hvd: &Hvd, root: usize) -> Result<()> {
        let manifest = broadcast_bytes(hvd, "hvd.elastic.manifest", self.manifest(), root)?;
        self.follow(&manifest, hvd.rank())?;
        let handles = self
            .current
            .iter_mut()
            .map(|(name, entry)| {
                let bytes = std::mem::take(&mut entry.bytes);
                hvd.broadcast_async(&format!("hvd.elastic.state.{name}"), bytes, root)
            })
            .collect::<Result<Vec<_>>>()?;
        for (entry, handle) in self.current.values_mut().zip(handles) {
            entry.bytes = handle.wait()?;
        }
        Ok(())
    }
}

/// Broadcasts bytes whose length only `root` knows: the length first, then the bytes.
pub(crate) fn broadcast_bytes(
    hvd: &Hvd,
    name: &str,
    bytes: Vec<u8>,
    root: usize,
) -> Result<Vec<u8>> {
    let len = hvd.broadcast(&format!("{name}.len"), vec![bytes.len() as i64], root)?[0];
    let len = usize::try_from(len).map_err(|_| {
        Error::invalid(
            hvd.rank(),
            "broadcast",
            name,
            format!("the root sent a length of {len}"),
        )
    })?;
    let mut mine = bytes;
    mine.resize(len, 0);
    hvd.broadcast(name, mine, root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restore_returns_to_the_last_save() {
        let mut state = TensorState::new();
        state.set("w", &[1.0f64, 2.0]);
        state.set_u64("step", 3);
        state.save().unwrap();
        state.set("w", &[9.0f64, 9.0]);
        state.set_u64("step", 4);
        state.set("extra", &[1u8]);
        state.restore().unwrap();
        assert_eq!(state.get::<f64>("w"), Some(vec![1.0, 2.0]));
        assert_eq!(state.get_u64("step"), Some(3));
        assert_eq!(state.get::<u8>("extra"), None);
        assert_eq!(
            state.get::<f32>("w"),
            None,
            "another element type is not this one"
        );
    }

    #[test]
    fn a_manifest_fills_what_is_missing_and_drops_what_the_root_lacks() {
        let mut root = TensorState::new();
        root.set("w", &[1.5f32, 2.5]);
        root.set("momentum", &[0.25f32, 0.5]);
        let mut newcomer = TensorState::new();
        newcomer.set("w", &[0.0f32, 0.0]);
        newcomer.set("stale", &[1i64]);
        newcomer.follow(&root.manifest(), 1).unwrap();
        assert_eq!(newcomer.names().collect::<Vec<_>>(), ["momentum", "w"]);
        assert_eq!(newcomer.get::<f32>("momentum"), Some(vec![0.0, 0.0]));
        assert_eq!(
            newcomer.follow(b"\x01\x00", 1).unwrap_err().to_string(),
            "store: elastic state manifest: truncated: expected 4 bytes for the number of entries, 2 left"
        );
    }
}
