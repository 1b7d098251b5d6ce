//! How long the simulated forward and backward passes take, and when each layer's
//! gradients become ready.
//!
//! The default compute time of a batch comes from published single-GPU training
//! throughput: TensorFlow's tf_cnn_benchmarks on one NVIDIA Tesla P100 (DGX-1),
//! synthetic ImageNet data, batch size 32 (TensorFlow performance guide, "Benchmarks",
//! May 2017): Inception v3 128 img/sec, ResNet-50 195, ResNet-152 82.7, VGG-16 144.
//! ResNet-101 is not listed; its time per image is interpolated between ResNet-50's and
//! ResNet-152's by forward multiply-accumulates. The P100 is the GPU of the Horovod
//! paper's experiments. A batch's time is the time per image times the batch size.
//!
//! The backward pass takes two thirds of a batch's compute (it computes the gradients of
//! both the inputs and the weights, each about one forward pass), spread over the layers
//! in reverse order in proportion to each layer's multiply-accumulates: a layer's
//! gradients are ready once its share of the backward pass has elapsed.

use std::time::Duration;

use super::models::{Architecture, Model};
use super::options::SyntheticArgs;

/// Published P100 training throughput at batch size 32, in images per second.
fn p100_images_per_sec(architecture: Architecture) -> Option<f64> {
    match architecture {
        Architecture::Inception3 => Some(128.0),
        Architecture::Resnet50 => Some(195.0),
        Architecture::Resnet152 => Some(82.7),
        Architecture::Vgg16 => Some(144.0),
        Architecture::Resnet101 => None,
    }
}

/// Seconds per image on a P100, published or interpolated by multiply-accumulates.
pub fn p100_seconds_per_image(architecture: Architecture) -> f64 {
    if let Some(rate) = p100_images_per_sec(architecture) {
        return 1.0 / rate;
    }
    let low = Architecture::Resnet50;
    let high = Architecture::Resnet152;
    let (t_low, t_high) = (p100_seconds_per_image(low), p100_seconds_per_image(high));
    let macs = |a: Architecture| a.build().macs() as f64;
    let (m_low, m_high) = (macs(low), macs(high));
    t_low + (t_high - t_low) * (macs(architecture) - m_low) / (m_high - m_low)
}

/// The compute of one batch: `--compute-ms`, or the model's P100 time per image times
/// the batch size; times `--compute-scale`.
pub fn batch_compute(args: &SyntheticArgs) -> Result<Duration, String> {
    let seconds = args.compute_ms.map_or_else(
        || p100_seconds_per_image(args.model) * args.batch_size as f64,
        |ms| ms / 1e3,
    );
    Duration::try_from_secs_f64(seconds * args.compute_scale).map_err(|_| {
        format!(
            "the compute time of a batch ({seconds} s x {}) is out of range",
            args.compute_scale
        )
    })
}

/// Share of a batch's compute spent in the backward pass.
const BACKWARD_SHARE: f64 = 2.0 / 3.0;

/// One simulated batch.
#[derive(Debug, Clone, PartialEq)]
pub struct ComputePlan {
    pub forward: Duration,
    pub backward: Duration,
    /// In backward order: a layer's index and when, counted from the start of the backward
    /// pass, its gradients are ready.
    pub releases: Vec<(usize, Duration)>,
}

impl ComputePlan {
    /// Spreads `batch` of compute over `model`'s layers.
    pub fn new(model: &Model, batch: Duration) -> ComputePlan {
        let backward = batch.mul_f64(BACKWARD_SHARE);
        let total = model.macs().max(1) as f64;
        let mut done = 0u64;
        let releases = model
            .layers
            .iter()
            .enumerate()
            .rev()
            .map(|(index, layer)| {
                done += layer.macs;
                (index, backward.mul_f64(done as f64 / total))
            })
            .collect();
        ComputePlan {
            forward: batch - backward,
            backward,
            releases,
        }
    }

    pub fn batch(&self) -> Duration {
        self.forward + self.backward
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resnet101_sits_between_its_neighbours_by_work() {
        let t50 = p100_seconds_per_image(Architecture::Resnet50);
        let t101 = p100_seconds_per_image(Architecture::Resnet101);
        let t152 = p100_seconds_per_image(Architecture::Resnet152);
        assert!((t50 - 1.0 / 195.0).abs() < 1e-12);
        assert!(t50 < t101 && t101 < t152, "{t50} {t101} {t152}");
        // 7.80 GMACs lies at half of 4.09..11.51: about 116 img/sec.
        assert!((1.0 / t101 - 116.0).abs() < 1.0, "{}", 1.0 / t101);
    }

    #[test]
    fn backward_releases_every_layer_in_reverse_by_work() {
        let model = Architecture::Vgg16.build();
        let plan = ComputePlan::new(&model, Duration::from_millis(300));
        assert_eq!(plan.forward, Duration::from_millis(100));
        assert_eq!(plan.backward, Duration::from_millis(200));
        let order: Vec<usize> = plan.releases.iter().map(|r| r.0).collect();
        let expected: Vec<usize> = (0..model.layers.len()).rev().collect();
        assert_eq!(order, expected);
        assert!(plan.releases.windows(2).all(|w| w[0].1 <= w[1].1));
        assert_eq!(plan.releases.last().map(|r| r.1), Some(plan.backward));
        // The classifier is 0.8 % of VGG-16's work but 89 % of its parameters: all of it
        // is ready within the first 1 % of the backward pass.
        let classifier_ready = plan.releases[2].1;
        assert!(
            classifier_ready < plan.backward / 100,
            "{classifier_ready:?}"
        );
    }
}
