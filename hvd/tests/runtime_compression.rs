//! Gradient compression: float tensors narrowed to 16 bits for the transport and widened
//! back, chosen by the configuration or per call, agreed by every rank.

mod common;

use common::{config, job};
use hvd::{Compression, Config, ReduceOp, Reduction};

/// 1 + 2^-10 is an f16 but not a bf16 (which keeps 8 significant bits); 1 + 2^-12 is
/// neither. Summed over two ranks, each compression rounds them its own way.
const F16_ONLY: f32 = 1.0 + 1.0 / 1024.0;
const NEITHER: f32 = 1.0 + 1.0 / 4096.0;

fn with(compression: Compression) -> Config {
    Config {
        compression,
        ..config()
    }
}

fn sum_on_two_ranks(config: Config) -> Vec<Vec<f32>> {
    job(2, config, |hvd| {
        hvd.allreduce("g", vec![F16_ONLY, NEITHER, 3.0], ReduceOp::Sum)
            .unwrap()
    })
}

#[test]
fn the_configured_compression_rounds_to_its_wire_type() {
    let exact = [2.0 * F16_ONLY, 2.0 * NEITHER, 6.0];
    for out in sum_on_two_ranks(with(Compression::None)) {
        assert_eq!(out, exact);
    }
    for out in sum_on_two_ranks(with(Compression::Fp16)) {
        assert_eq!(out, [2.0 * F16_ONLY, 2.0, 6.0]);
    }
    for out in sum_on_two_ranks(with(Compression::Bf16)) {
        assert_eq!(out, [2.0, 2.0, 6.0]);
    }
}

#[test]
fn only_f32_and_f64_are_compressed() {
    let results = job(2, with(Compression::Bf16), |hvd| {
        let ints = hvd
            .allreduce("ints", vec![16_777_217i64], ReduceOp::Sum)
            .unwrap();
        let doubles = hvd
            .allreduce("doubles", vec![f64::from(F16_ONLY)], ReduceOp::Sum)
            .unwrap();
        let halves = hvd
            .allreduce(
                "halves",
                vec![hvd::core::f16::from_f32(F16_ONLY)],
                ReduceOp::Sum,
            )
            .unwrap();
        (ints, doubles, halves)
    });
    for (ints, doubles, halves) in results {
        assert_eq!(ints, [33_554_434]);
        assert_eq!(doubles, [2.0]);
        assert_eq!(halves, [hvd::core::f16::from_f32(2.0 * F16_ONLY)]);
    }
}

#[test]
fn a_call_can_choose_its_own_compression() {
    let results = job(2, with(Compression::Bf16), |hvd| {
        let wait = |name: &str, compression| {
            hvd.allreduce_compressed_async(
                name,
                vec![F16_ONLY],
                Reduction::new(ReduceOp::Sum),
                compression,
            )
            .unwrap()
            .wait()
            .unwrap()
        };
        (
            wait("none", Compression::None),
            wait("fp16", Compression::Fp16),
        )
    });
    for (none, fp16) in results {
        assert_eq!(none, [2.0 * F16_ONLY]);
        assert_eq!(fp16, [2.0 * F16_ONLY]);
    }
}

#[test]
fn a_fused_batch_mixes_compressed_and_plain_tensors() {
    // Many small tensors submitted together are fused: float ones travel as f16 and the
    // integer ones as they are, and every result comes back in its own dtype.
    let results = job(3, with(Compression::Fp16), |hvd| {
        let r = hvd.rank() as f32;
        let floats: Vec<_> = (0..40)
            .map(|i| {
                hvd.allreduce_async(
                    &format!("f{i}"),
                    vec![r + NEITHER; i + 1],
                    ReduceOp::Average,
                )
                .unwrap()
            })
            .collect();
        let ints: Vec<_> = (0..10i32)
            .map(|i| {
                hvd.allreduce_async(&format!("i{i}"), vec![i; 5], ReduceOp::Sum)
                    .unwrap()
            })
            .collect();
        let floats: Vec<Vec<f32>> = floats.into_iter().map(|h| h.wait().unwrap()).collect();
        let ints: Vec<Vec<i32>> = ints.into_iter().map(|h| h.wait().unwrap()).collect();
        (floats, ints)
    });
    for (floats, ints) in results {
        for (i, t) in floats.iter().enumerate() {
            // (0 + 1 + 2)/3 + 1: NEITHER's extra bit is lost on the wire.
            assert_eq!(t, &vec![2.0; i + 1], "f{i}");
        }
        for (i, t) in ints.iter().enumerate() {
            assert_eq!(t, &vec![3 * i as i32; 5], "i{i}");
        }
    }
}

#[test]
fn ranks_that_compress_differently_are_told_so() {
    let errors = job(2, config(), |hvd| {
        let compression = [Compression::Bf16, Compression::None][hvd.rank()];
        hvd.allreduce_compressed_async("grad.w1", vec![1.0f32], ReduceOp::Sum.into(), compression)
            .unwrap()
            .wait()
            .unwrap_err()
            .to_string()
    });
    assert_eq!(
        errors,
        ["Mismatched compressions for tensor 'grad.w1': rank 0 has bf16, rank 1 has none"; 2]
    );
}
