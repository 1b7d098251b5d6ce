//! What reaches the inner collective: a recording wrapper around the reference transport
//! shows how many calls `Fusion` makes, with which tensors and reductions.

use std::sync::{Arc, Mutex};

use hvd_core::layer::Layer;
use hvd_core::reference::LocalGroup;
use hvd_core::{
    Collective, DType, DeviceBuffer, MemoryMut, Operation, ReduceOp, Reduction, Result, TensorMut,
};
use hvd_fusion::{DEFAULT_THRESHOLD, Fusion};

/// One tensor as the inner collective saw it.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    name: String,
    dtype: DType,
    len: usize,
    /// Address of the first byte, host or device.
    addr: usize,
}

/// One batched call that reached the inner collective.
#[derive(Debug, Clone, PartialEq)]
struct Call {
    op: &'static str,
    reduction: Option<Reduction>,
    tensors: Vec<Seen>,
}

/// Records every allreduce and broadcast, then forwards everything to the reference.
/// Sub-groups record into the same log.
struct Recording {
    inner: Box<dyn Collective>,
    calls: Arc<Mutex<Vec<Call>>>,
    /// What it answers to `fuses_batches`: whether it stands for a scatter-gathering
    /// transport.
    scatter_gathers: bool,
}

impl Recording {
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    fn record(&self, op: &'static str, reduction: Option<Reduction>, tensors: &mut [TensorMut]) {
        let tensors = tensors
            .iter_mut()
            .map(|t| Seen {
                name: t.name().to_owned(),
                dtype: t.dtype(),
                len: t.len(),
                addr: match t.memory() {
                    MemoryMut::Host(bytes) => bytes.as_ptr().addr(),
                    MemoryMut::Device(buffer) | MemoryMut::DeviceInto { output: buffer, .. } => {
                        buffer.ptr() as usize
                    }
                },
            })
            .collect();
        self.calls.lock().unwrap().push(Call {
            op,
            reduction,
            tensors,
        });
    }
}

impl Layer for Recording {
    type Inner = dyn Collective;

    fn inner(&self) -> &(dyn Collective + 'static) {
        self.inner.as_ref()
    }

    fn call(&self, op: Operation<'_, '_>) -> Result<()> {
        match op {
            Operation::Allreduce { tensors, reduction } => {
                self.record("allreduce", Some(reduction), tensors);
                self.inner.allreduce(tensors, reduction)
            }
            Operation::Broadcast { tensors, root } => {
                self.record("broadcast", None, tensors);
                self.inner.broadcast(tensors, root)
            }
            other => other.run(self.inner.as_ref()),
        }
    }

    fn fuses_batches(this: &Self) -> bool {
        this.scatter_gathers
    }

    fn split(this: &Self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        let sub = this.inner.split(members)?;
        Ok(sub.map(|inner| {
            let calls = this.calls.clone();
            let scatter_gathers = this.scatter_gathers;
            Box::new(Recording {
                inner,
                calls,
                scatter_gathers,
            }) as Box<dyn Collective>
        }))
    }
}

/// A one-rank group behind a recorder behind `Fusion`: enough to see the inner calls.
fn fused(threshold: usize) -> Fusion<Recording> {
    recorded(threshold, false)
}

fn recorded(threshold: usize, scatter_gathers: bool) -> Fusion<Recording> {
    let inner = Box::new(LocalGroup::new(1).build().remove(0));
    let calls = Arc::default();
    let recording = Recording {
        inner,
        calls,
        scatter_gathers,
    };
    Fusion::new(recording, threshold)
}

fn names(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("grad.{i}")).collect()
}

fn shapes(calls: &[Call]) -> Vec<Vec<(DType, usize)>> {
    calls
        .iter()
        .map(|c| c.tensors.iter().map(|t| (t.dtype, t.len)).collect())
        .collect()
}

const SUM: Reduction = Reduction::new(ReduceOp::Sum);

#[test]
fn two_hundred_64_kib_tensors_make_one_inner_call() {
    let group = fused(DEFAULT_THRESHOLD);
    let names = names(200);
    let mut data: Vec<Vec<f32>> = (0..200).map(|i| vec![i as f32; 16 << 10]).collect();
    let mut batch: Vec<TensorMut> = names
        .iter()
        .zip(&mut data)
        .map(|(n, d)| TensorMut::from_slice(n, d))
        .collect();
    group
        .allreduce(&mut batch, SUM.with_postscale(2.0))
        .unwrap();
    drop(batch);
    let calls = group.inner().calls();
    assert_eq!(shapes(&calls), [vec![(DType::F32, 200 * (16 << 10))]]);
    assert_eq!(calls[0].tensors[0].name, "grad.0 and 199 more, fused");
    assert_eq!(
        calls[0].tensors[0].addr % 64,
        0,
        "packs are 64-byte aligned"
    );
    assert_eq!(calls[0].reduction, Some(SUM.with_postscale(2.0)));
    assert!(
        data.iter()
            .enumerate()
            .all(|(i, d)| d.iter().all(|v| *v == 2.0 * i as f32))
    );
}

#[test]
fn threshold_zero_passes_every_tensor_through_alone_as_it_is() {
    let group = fused(0);
    let names = names(200);
    let mut data: Vec<Vec<f32>> = (0..200).map(|_| vec![1.0; 16 << 10]).collect();
    let addrs: Vec<usize> = data.iter().map(|d| d.as_ptr().addr()).collect();
    let mut batch: Vec<TensorMut> = names
        .iter()
        .zip(&mut data)
        .map(|(n, d)| TensorMut::from_slice(n, d))
        .collect();
    group.allreduce(&mut batch, SUM).unwrap();
    let calls = group.inner().calls();
    assert_eq!(
        calls.len(),
        200,
        "one call per tensor, as Horovod without fusion"
    );
    let seen: Vec<usize> = calls
        .iter()
        .flat_map(|c| &c.tensors)
        .map(|t| t.addr)
        .collect();
    assert_eq!(seen, addrs);
}

#[test]
fn a_scatter_gathering_inner_gets_the_batch_uncopied_in_runs_that_fit_the_threshold() {
    // 10 tensors of 1 KiB, 4 KiB threshold: runs of 4, 4 and 2, in order.
    let group = recorded(4096, true);
    let names = names(10);
    let mut data: Vec<Vec<f32>> = (0..10).map(|_| vec![1.0; 256]).collect();
    let addrs: Vec<usize> = data.iter().map(|d| d.as_ptr().addr()).collect();
    let mut batch: Vec<TensorMut> = names
        .iter()
        .zip(&mut data)
        .map(|(n, d)| TensorMut::from_slice(n, d))
        .collect();
    group.allreduce(&mut batch, SUM).unwrap();
    let calls = group.inner().calls();
    let sizes: Vec<usize> = calls.iter().map(|c| c.tensors.len()).collect();
    assert_eq!(sizes, [4, 4, 2]);
    let seen: Vec<usize> = calls
        .iter()
        .flat_map(|c| &c.tensors)
        .map(|t| t.addr)
        .collect();
    assert_eq!(seen, addrs, "the caller's own memory, in batch order");
}

#[test]
fn interleaved_f32_and_f16_make_one_pack_per_dtype_in_one_call() {
    let group = fused(DEFAULT_THRESHOLD);
    let (mut a, mut b) = (vec![1.0f32; 5], vec![2.0f32; 7]);
    let (mut c, mut d) = (vec![hvd_core::f16::ONE; 3], vec![hvd_core::f16::ONE; 9]);
    let mut batch = [
        TensorMut::from_slice("a", &mut a),
        TensorMut::from_slice("c", &mut c),
        TensorMut::from_slice("b", &mut b),
        TensorMut::from_slice("d", &mut d),
    ];
    group.allreduce(&mut batch, SUM).unwrap();
    let calls = group.inner().calls();
    assert_eq!(shapes(&calls), [vec![(DType::F32, 12), (DType::F16, 12)]]);
    let packs: Vec<&str> = calls[0].tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(packs, ["a and 1 more, fused", "c and 1 more, fused"]);
}

#[test]
fn a_tensor_over_the_threshold_reaches_the_inner_uncopied_with_the_prescale() {
    let group = fused(4 << 10);
    let (mut a, mut big, mut b) = (vec![1.0f32; 10], vec![3.0f32; 2048], vec![2.0f32; 10]);
    let big_addr = big.as_ptr().addr();
    let mut batch = [
        TensorMut::from_slice("a", &mut a),
        TensorMut::from_slice("big", &mut big),
        TensorMut::from_slice("b", &mut b),
    ];
    let scaled = SUM.with_prescale(2.0).with_postscale(0.5);
    group.allreduce(&mut batch, scaled).unwrap();
    let calls = group.inner().calls();
    assert_eq!(
        shapes(&calls),
        [vec![(DType::F32, 20)], vec![(DType::F32, 2048)]]
    );
    // The pack's prescale was applied while copying in; the big tensor carries its own.
    assert_eq!(calls[0].reduction, Some(scaled.with_prescale(1.0)));
    assert_eq!(calls[1].reduction, Some(scaled));
    assert_eq!(
        calls[1].tensors[0],
        Seen {
            name: "big".into(),
            dtype: DType::F32,
            len: 2048,
            addr: big_addr
        }
    );
    assert_eq!((a[0], big[0], b[0]), (1.0, 3.0, 2.0));
}

#[test]
fn packs_close_at_the_threshold_and_each_round_fits_it() {
    let group = fused(4 << 10);
    let names = names(10);
    let mut data: Vec<Vec<f32>> = (0..10).map(|_| vec![1.0; 256]).collect();
    let mut batch: Vec<TensorMut> = names
        .iter()
        .zip(&mut data)
        .map(|(n, d)| TensorMut::from_slice(n, d))
        .collect();
    group.allreduce(&mut batch, SUM).unwrap();
    assert_eq!(
        shapes(&group.inner().calls()),
        [
            vec![(DType::F32, 1024)],
            vec![(DType::F32, 1024)],
            vec![(DType::F32, 512)]
        ]
    );
}

#[test]
fn a_batch_of_one_passes_straight_through() {
    let group = fused(DEFAULT_THRESHOLD);
    let mut only = vec![1i32; 3];
    let addr = only.as_ptr().addr();
    group
        .allreduce(&mut [TensorMut::from_slice("only", &mut only)], SUM)
        .unwrap();
    let calls = group.inner().calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].tensors[0].addr, calls[0].tensors[0].len),
        (addr, 3)
    );
}

#[test]
fn broadcast_packs_mixed_dtypes_as_bytes_and_sends_large_ones_alone() {
    let group = fused(4 << 10);
    let (mut a, mut b, mut big) = (vec![1.0f32; 3], vec![7i64; 2], vec![9u8; 5000]);
    let mut mask = vec![1u8; 5];
    let big_addr = big.as_ptr().addr();
    let mut batch = [
        TensorMut::from_slice("a", &mut a),
        TensorMut::from_slice("b", &mut b),
        TensorMut::from_bytes("mask", DType::Bool, vec![5], &mut mask).unwrap(),
        TensorMut::from_slice("big", &mut big),
    ];
    group.broadcast(&mut batch, 0).unwrap();
    let calls = group.inner().calls();
    assert_eq!(
        shapes(&calls),
        [vec![(DType::U8, 12 + 16 + 5)], vec![(DType::U8, 5000)]]
    );
    assert_eq!(calls[0].op, "broadcast");
    assert_eq!(calls[1].tensors[0].addr, big_addr);
    assert_eq!((a[0], b[1], mask[4], big[4999]), (1.0, 7, 1, 9));
}

#[test]
fn device_tensors_pass_through_unfused() {
    let group = fused(DEFAULT_THRESHOLD);
    let (mut a, mut b) = (vec![1.0f32; 4], vec![2.0f32; 4]);
    // SAFETY: nothing dereferences this address: the recorder only reads it, and the
    // reference transport refuses device memory before touching it.
    let gpu = unsafe { DeviceBuffer::cuda(0, 0x1000, 16) };
    let mut batch = [
        TensorMut::from_slice("a", &mut a),
        TensorMut::from_device("gpu", DType::F32, vec![4], gpu).unwrap(),
        TensorMut::from_slice("b", &mut b),
    ];
    let err = group.allreduce(&mut batch, SUM).unwrap_err();
    assert_eq!(
        err.to_string(),
        "local transport does not support cuda:0 memory (rank 0, allreduce of 'gpu')"
    );
    let calls = group.inner().calls();
    assert_eq!(
        shapes(&calls),
        [vec![(DType::F32, 8)], vec![(DType::F32, 4)]]
    );
    assert_eq!(calls[1].tensors[0].addr, 0x1000);
}

#[test]
fn sub_groups_start_from_the_parents_threshold_and_keep_their_own() {
    let group = fused(DEFAULT_THRESHOLD);
    let sub = group.split(&[0]).unwrap().expect("rank 0 is a member");
    let pair = |sub: &dyn Collective| {
        let (mut a, mut b) = (vec![1u16; 2], vec![2u16; 3]);
        let mut batch = [
            TensorMut::from_slice("a", &mut a),
            TensorMut::from_slice("b", &mut b),
        ];
        sub.allreduce(&mut batch, SUM).unwrap();
    };
    pair(sub.as_ref());
    // The sub-group's members may be between two calls of it when the parent changes:
    // the change reaches the sub-group only through its own set_threshold.
    group.set_threshold(0);
    assert_eq!(group.threshold(), 0);
    pair(sub.as_ref());
    assert_eq!(
        shapes(&group.inner().calls()),
        [vec![(DType::U16, 5)], vec![(DType::U16, 5)]]
    );
}
