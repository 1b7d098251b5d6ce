//! The packing plan: which tensors of a batch share a pack, and which packs share an inner
//! call. A pure function of the tensors' dtypes and sizes and the threshold, so that every
//! rank, given the same batch, makes the same inner calls.

use std::ops::Range;

use hvd_core::DType;

/// Where every pack starts in the fusion buffer: a multiple of this many bytes, so that
/// each pack's first element sits on a cache line and the kernels' wide loads never
/// straddle one at the start. Also a multiple of every dtype's size.
pub(crate) const ALIGN: usize = 64;

/// What the plan needs to know about one tensor of a batch (not an operation: a batch
/// is of one [`FusedOp`](crate::fused_op::FusedOp)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Item {
    /// `bytes` bytes of `dtype` in memory the fusion buffer is on (the host's, or the
    /// device's whose memory the transport offers): may be packed.
    Packable(DType, usize),
    /// Memory the fusion buffer cannot hold: always alone.
    Alone,
}

/// Tensors of one dtype, copied back to back into one region of the fusion buffer and
/// reduced as one tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pack {
    pub dtype: DType,
    /// Indices into the batch, ascending.
    pub members: Vec<usize>,
    /// Sum of the members' byte lengths: at most the threshold.
    pub bytes: usize,
    /// Start of the pack in the fusion buffer, a multiple of [`ALIGN`].
    pub offset: usize,
}

/// Packs that go to the inner collective as one batch: together they fit the threshold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Round {
    pub packs: Vec<Pack>,
}

impl Round {
    /// Bytes of fusion buffer the round needs.
    pub fn bytes(&self) -> usize {
        self.packs.last().map_or(0, |p| p.offset + p.bytes)
    }

    /// Cuts a buffer of [`Round::bytes`] bytes into one region per pack, in pack order.
    pub fn carve<'b>(&self, mut buffer: &'b mut [u8]) -> Vec<&'b mut [u8]> {
        let mut regions = Vec::with_capacity(self.packs.len());
        let mut at = 0;
        for pack in &self.packs {
            let (_, rest) = std::mem::take(&mut buffer).split_at_mut(pack.offset - at);
            let (region, rest) = rest.split_at_mut(pack.bytes);
            regions.push(region);
            buffer = rest;
            at = pack.offset + pack.bytes;
        }
        regions
    }
}

/// How one batch is carried out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub rounds: Vec<Round>,
    /// Tensors passed to the inner collective as they are (larger than the threshold, or
    /// not in host memory), ascending.
    pub alone: Vec<usize>,
}

/// Plans a batch.
///
/// Tensors are grouped by dtype (dtypes in order of first appearance), looking past
/// tensors of other dtypes as Horovod does for mixed precision. Each dtype's tensors fill
/// packs of at most `threshold` bytes in batch order, a new pack starting when the next
/// tensor does not fit; a tensor larger than `threshold` goes alone, uncopied. Packs then
/// fill rounds the same way, each pack at the next [`ALIGN`]ed offset, so that one round
/// never needs more than `threshold` bytes of buffer.
pub(crate) fn plan(items: &[Item], threshold: usize) -> Plan {
    let mut alone = Vec::new();
    let mut dtypes: Vec<DType> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match *item {
            Item::Packable(dtype, bytes) if bytes <= threshold => {
                if !dtypes.contains(&dtype) {
                    dtypes.push(dtype);
                }
            }
            Item::Packable(..) | Item::Alone => alone.push(i),
        }
    }
    let packs = dtypes
        .into_iter()
        .flat_map(|dtype| packs_of(items, dtype, threshold));
    Plan {
        rounds: rounds(packs, threshold),
        alone,
    }
}

/// Fills packs with the tensors of `dtype` that fit the threshold, in batch order.
fn packs_of(items: &[Item], dtype: DType, threshold: usize) -> Vec<Pack> {
    let mut packs: Vec<Pack> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Item::Packable(d, bytes) = *item else {
            continue;
        };
        if d != dtype || bytes > threshold {
            continue;
        }
        match packs.last_mut() {
            Some(pack) if pack.bytes + bytes <= threshold => {
                pack.members.push(i);
                pack.bytes += bytes;
            }
            _ => packs.push(Pack {
                dtype,
                members: vec![i],
                bytes,
                offset: 0,
            }),
        }
    }
    packs
}

/// Cuts a batch of tensors of `sizes` bytes into consecutive runs of at most `threshold`
/// bytes, in order; a tensor larger than `threshold` is a run of its own. For an inner
/// collective that moves a whole batch without copying (scatter-gather), a run is what a
/// pack is to one that does not: the threshold bounds each call either way.
pub(crate) fn runs(sizes: impl IntoIterator<Item = usize>, threshold: usize) -> Vec<Range<usize>> {
    let mut runs: Vec<Range<usize>> = Vec::new();
    let mut bytes = 0;
    for (i, size) in sizes.into_iter().enumerate() {
        match runs.last_mut() {
            Some(run) if bytes + size <= threshold => {
                run.end = i + 1;
                bytes += size;
            }
            _ => {
                runs.push(i..i + 1);
                bytes = size;
            }
        }
    }
    runs
}

/// Places packs into rounds of at most `threshold` bytes, in order.
fn rounds(packs: impl IntoIterator<Item = Pack>, threshold: usize) -> Vec<Round> {
    let mut rounds: Vec<Round> = Vec::new();
    for mut pack in packs {
        let offset = rounds
            .last()
            .map_or(0, |r| r.bytes().next_multiple_of(ALIGN));
        match rounds.last_mut() {
            Some(round) if offset + pack.bytes <= threshold => {
                pack.offset = offset;
                round.packs.push(pack);
            }
            _ => rounds.push(Round { packs: vec![pack] }),
        }
    }
    rounds
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn host(dtype: DType, bytes: usize) -> Item {
        Item::Packable(dtype, bytes)
    }

    fn members(plan: &Plan) -> Vec<(DType, Vec<usize>)> {
        plan.rounds
            .iter()
            .flat_map(|r| &r.packs)
            .map(|p| (p.dtype, p.members.clone()))
            .collect()
    }

    #[test]
    fn runs_are_consecutive_and_fit_the_threshold() {
        assert_eq!(runs([10, 10, 10, 10], 25), [0..2, 2..4]);
        assert_eq!(
            runs([10, 30, 10], 25),
            [0..1, 1..2, 2..3],
            "30 bytes go alone"
        );
        assert_eq!(runs([10, 10], 0), [0..1, 1..2], "threshold 0: one each");
        assert_eq!(runs([], 25), Vec::<Range<usize>>::new());
    }

    #[test]
    fn interleaved_dtypes_make_one_pack_each_in_one_round() {
        let items = [
            host(DType::F32, 16),
            host(DType::F16, 8),
            host(DType::F32, 16),
            host(DType::F16, 8),
        ];
        let plan = plan(&items, 1024);
        assert_eq!(
            members(&plan),
            [(DType::F32, vec![0, 2]), (DType::F16, vec![1, 3])]
        );
        assert_eq!(plan.rounds.len(), 1);
        assert_eq!(plan.rounds[0].packs[1].offset, 64);
        assert!(plan.alone.is_empty());
    }

    #[test]
    fn a_tensor_over_the_threshold_and_device_tensors_go_alone() {
        let items = [
            host(DType::F32, 40),
            Item::Alone,
            host(DType::F32, 41),
            host(DType::F32, 40),
        ];
        let plan = plan(&items, 40);
        assert_eq!(plan.alone, [1, 2]);
        assert_eq!(
            members(&plan),
            [(DType::F32, vec![0]), (DType::F32, vec![3])]
        );
        assert_eq!(plan.rounds.len(), 2, "two full packs cannot share 40 bytes");
    }

    #[test]
    fn a_pack_closes_when_the_next_tensor_does_not_fit() {
        let items = [
            host(DType::I32, 12),
            host(DType::I32, 12),
            host(DType::I32, 8),
        ];
        let plan = plan(&items, 20);
        assert_eq!(
            members(&plan),
            [(DType::I32, vec![0]), (DType::I32, vec![1, 2])]
        );
    }

    fn dtype() -> impl Strategy<Value = DType> {
        prop::sample::select(&DType::ALL[..])
    }

    fn item() -> impl Strategy<Value = Item> {
        prop_oneof![
            9 => (dtype(), 0usize..300).prop_map(|(d, n)| Item::Packable(d, n * d.size())),
            1 => Just(Item::Alone),
        ]
    }

    fn threshold() -> impl Strategy<Value = usize> {
        prop_oneof![
            Just(0usize),
            1usize..16,
            16usize..2048,
            Just(usize::MAX / 2)
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn every_tensor_is_planned_once_within_the_threshold_in_order(
            items in prop::collection::vec(item(), 0..40),
            threshold in threshold(),
        ) {
            let plan = plan(&items, threshold);
            let mut seen = vec![0usize; items.len()];
            for i in &plan.alone {
                seen[*i] += 1;
                let oversized = matches!(items[*i], Item::Packable(_, b) if b > threshold);
                prop_assert!(oversized || items[*i] == Item::Alone);
            }
            prop_assert!(plan.alone.windows(2).all(|w| w[0] < w[1]));
            let mut last_of_dtype: Vec<(DType, usize)> = Vec::new();
            for round in &plan.rounds {
                prop_assert!(!round.packs.is_empty());
                prop_assert!(round.bytes() <= threshold);
                let mut buffer = vec![0u8; round.bytes()];
                let base = buffer.as_ptr().addr();
                let regions = round.carve(&mut buffer);
                for (pack, region) in round.packs.iter().zip(&regions) {
                    prop_assert_eq!(region.len(), pack.bytes);
                    prop_assert_eq!(region.as_ptr().addr() - base, pack.offset);
                }
                let mut end = 0;
                for pack in &round.packs {
                    prop_assert_eq!(pack.offset % ALIGN, 0);
                    prop_assert!(pack.offset >= end, "packs overlap");
                    end = pack.offset + pack.bytes;
                    let mut bytes = 0;
                    for i in &pack.members {
                        seen[*i] += 1;
                        let Item::Packable(d, b) = items[*i] else {
                            return Err(TestCaseError::fail("device tensor packed"));
                        };
                        prop_assert_eq!(d, pack.dtype);
                        bytes += b;
                        // Per-dtype batch order holds across packs and rounds.
                        match last_of_dtype.iter_mut().find(|(d, _)| *d == pack.dtype) {
                            Some((_, last)) => {
                                prop_assert!(*i > *last);
                                *last = *i;
                            }
                            None => last_of_dtype.push((pack.dtype, *i)),
                        }
                    }
                    prop_assert_eq!(bytes, pack.bytes);
                }
            }
            prop_assert!(seen.iter().all(|n| *n == 1), "planned counts {:?}", seen);
            // Greedy: a pack closed only because its dtype's next tensor did not fit.
            let packs: Vec<&Pack> = plan.rounds.iter().flat_map(|r| &r.packs).collect();
            for w in packs.windows(2) {
                if w[0].dtype == w[1].dtype {
                    let Item::Packable(_, next) = items[w[1].members[0]] else {
                        return Err(TestCaseError::fail("device tensor packed"));
                    };
                    prop_assert!(w[0].bytes + next > threshold);
                }
            }
        }
    }
}
