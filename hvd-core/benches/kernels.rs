//! Throughput of the reduction kernels on buffers far larger than the caches, one thread,
//! against a plain memcpy of the same size.
//!
//! Every benchmark counts the bytes of the accumulator (the destination, for memcpy), so
//! the numbers compare directly. `reduce_into` moves more memory per counted byte than
//! memcpy does: it reads the accumulator and the source and writes the accumulator, three
//! streams to memcpy's two.
//!
//! Run with `cargo bench -p hvd-core --bench kernels`.

use divan::Bencher;
use divan::counter::BytesCount;
use hvd_core::{DType, ReduceOp, bf16, f16, kernels};

/// 64 MiB: well beyond the last-level cache (32 MiB on the AMD EPYC this was tuned on), so
/// every kernel runs from memory.
const BYTES: usize = 64 << 20;

fn main() {
    divan::main();
}

#[divan::bench]
fn memcpy(bencher: Bencher) {
    let src = vec![1u8; BYTES];
    let mut dst = vec![2u8; BYTES];
    bencher
        .counter(BytesCount::new(BYTES))
        .bench_local(|| divan::black_box(&mut dst[..]).copy_from_slice(divan::black_box(&src)));
}

/// Reduces a source full of `value` into an accumulator full of `value`, again and again.
/// Values are chosen so that repeated sums stay ordinary numbers or saturate to infinity,
/// which the hardware handles at full speed (no subnormals).
fn reduce<T: bytemuck::Pod>(bencher: Bencher, dtype: DType, op: ReduceOp, value: T) {
    let src = vec![value; BYTES / size_of::<T>()];
    let mut acc = src.clone();
    bencher.counter(BytesCount::new(BYTES)).bench_local(|| {
        kernels::reduce_into(
            dtype,
            op,
            divan::black_box(bytemuck::cast_slice_mut(&mut acc)),
            divan::black_box(bytemuck::cast_slice(&src)),
        );
    });
}

#[divan::bench]
fn f32_sum(bencher: Bencher) {
    reduce(bencher, DType::F32, ReduceOp::Sum, 1.5f32);
}

#[divan::bench]
fn f16_sum(bencher: Bencher) {
    reduce(bencher, DType::F16, ReduceOp::Sum, f16::from_f32(1.5));
}

#[divan::bench]
fn bf16_sum(bencher: Bencher) {
    reduce(bencher, DType::BF16, ReduceOp::Sum, bf16::from_f32(1.5));
}

#[divan::bench]
fn f64_sum(bencher: Bencher) {
    reduce(bencher, DType::F64, ReduceOp::Sum, 1.5f64);
}

#[divan::bench]
fn i32_sum(bencher: Bencher) {
    reduce(bencher, DType::I32, ReduceOp::Sum, 3i32);
}

#[divan::bench]
fn f32_max(bencher: Bencher) {
    reduce(bencher, DType::F32, ReduceOp::Max, 1.5f32);
}

#[divan::bench]
fn u8_sum(bencher: Bencher) {
    reduce(bencher, DType::U8, ReduceOp::Sum, 3u8);
}
