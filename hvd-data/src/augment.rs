//! Random resized crop, horizontal flip and normalisation, drawn from (seed, epoch,
//! sample) alone so that a sample looks the same whichever thread or rank prepares it;
//! or, for samples already the model's size (MNIST), normalisation alone.

use fast_image_resize::images::{TypedImage, TypedImageRef};
use fast_image_resize::pixels::U8x3;
use fast_image_resize::{FilterType, ResizeAlg, ResizeOptions, Resizer};
use hvd_core::rng::SplitMix64;

use crate::decode::Image;

/// ImageNet's channel means and standard deviations, which torchvision's models expect.
pub const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
pub const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

/// How each image becomes a `channels × size × size` block of `f32`s.
#[derive(Debug, Clone, PartialEq)]
pub struct Augment {
    /// The side of the square output.
    pub size: u32,
    /// The output's channels: 3 (RGB), or 1 (grey, [`exact`](Self::exact) only).
    pub channels: u32,
    /// Crop and resize each image (`true`); else ([`exact`](Self::exact)) take it as it
    /// is: it must be `size × size` with `channels` channels, and is only normalised.
    pub resize: bool,
    /// Training (`true`): a random crop of `scale` of the area and `ratio` of aspect, and
    /// a flip half of the time. Evaluation (`false`): the central `center` of the
    /// shorter side, never flipped.
    pub random: bool,
    pub scale: (f64, f64),
    pub ratio: (f64, f64),
    pub center: f64,
    pub mean: [f32; 3],
    pub std: [f32; 3],
}

impl Augment {
    /// torchvision's training transform: `RandomResizedCrop(size)`,
    /// `RandomHorizontalFlip()`, `Normalize(IMAGENET_MEAN, IMAGENET_STD)`.
    pub fn train(size: u32) -> Self {
        Augment {
            size,
            channels: 3,
            resize: true,
            random: true,
            scale: (0.08, 1.0),
            ratio: (3.0 / 4.0, 4.0 / 3.0),
            center: 0.875,
            mean: IMAGENET_MEAN,
            std: IMAGENET_STD,
        }
    }

    /// The evaluation transform: the central 87.5 % of the shorter side (`Resize(256)`,
    /// `CenterCrop(224)` at 224), normalised alike.
    pub fn eval(size: u32) -> Self {
        Augment {
            random: false,
            ..Augment::train(size)
        }
    }

    /// Samples taken as they are: `channels` (1 or 3) of `size × size` pixels, neither
    /// cropped, resized nor flipped; bytes become `v / 255`, `f32` samples stay as they
    /// are (a mean of 0 and a deviation of 1: set `mean` and `std` to normalise).
    pub fn exact(size: u32, channels: u32) -> Self {
        Augment {
            channels,
            resize: false,
            random: false,
            mean: [0.0; 3],
            std: [1.0; 3],
            ..Augment::train(size)
        }
    }

    /// The first setting out of range, by name, and why.
    pub(crate) fn invalid(&self) -> Option<(&'static str, String)> {
        if !matches!(self.channels, 1 | 3) {
            return Some((
                "Augment::channels",
                format!("{}: expected 1 (grey) or 3 (RGB)", self.channels),
            ));
        }
        if self.channels == 1 && self.resize {
            return Some((
                "Augment::channels",
                "1 with resize: grey output is for samples taken as they are \
                 (Augment::exact)"
                    .into(),
            ));
        }
        let (scale, ratio) = (self.scale, self.ratio);
        if !(scale.0 > 0.0 && scale.0 <= scale.1 && scale.1 <= 1.0) {
            return Some((
                "Augment::scale",
                format!("{scale:?}: expected 0 < low <= high <= 1"),
            ));
        }
        if !(ratio.0 > 0.0 && ratio.0 <= ratio.1 && ratio.1.is_finite()) {
            return Some((
                "Augment::ratio",
                format!("{ratio:?}: expected 0 < low <= high"),
            ));
        }
        if !(self.center > 0.0 && self.center <= 1.0) {
            return Some((
                "Augment::center",
                format!("{}: expected 0 < center <= 1", self.center),
            ));
        }
        if let Some(std) = self.std.iter().find(|s| !(s.is_finite() && **s != 0.0)) {
            return Some((
                "Augment::std",
                format!("{std}: a channel's std must be finite and not 0"),
            ));
        }
        None
    }

    /// How many `f32`s one image takes.
    pub fn sample_len(&self) -> usize {
        self.channels as usize * self.size as usize * self.size as usize
    }

    /// The crop and flip of sample `index` in `epoch`, for an image of `width` × `height`.
    pub fn plan(&self, seed: u64, epoch: u64, index: usize, width: usize, height: usize) -> Crop {
        let (w, h) = (width as f64, height as f64);
        if !self.resize {
            return Crop {
                left: 0.0,
                top: 0.0,
                width: w,
                height: h,
                flip: false,
            };
        }
        if !self.random {
            let side = w.min(h) * self.center;
            return Crop {
                left: (w - side) / 2.0,
                top: (h - side) / 2.0,
                width: side,
                height: side,
                flip: false,
            };
        }
        let mut rng = sample_rng(seed, epoch, index);
        let (low, high) = (self.ratio.0.ln(), self.ratio.1.ln());
        // torchvision's RandomResizedCrop: ten tries at a random area and aspect, then
        // the whole image clamped to the aspect range.
        for _ in 0..10 {
            let area = w * h * (self.scale.0 + rng.next_f64() * (self.scale.1 - self.scale.0));
            let aspect = (low + rng.next_f64() * (high - low)).exp();
            let cw = (area * aspect).sqrt().round();
            let ch = (area / aspect).sqrt().round();
            if cw >= 1.0 && ch >= 1.0 && cw <= w && ch <= h {
                let left = rng.below((w - cw) as u64 + 1) as f64;
                let top = rng.below((h - ch) as u64 + 1) as f64;
                let flip = rng.next_u64() & 1 == 1;
                return Crop {
                    left,
                    top,
                    width: cw,
                    height: ch,
                    flip,
                };
            }
        }
        let (cw, ch) = if w / h < self.ratio.0 {
            (w, (w / self.ratio.0).round().min(h))
        } else if w / h > self.ratio.1 {
            ((h * self.ratio.1).round().min(w), h)
        } else {
            (w, h)
        };
        Crop {
            left: ((w - cw) / 2.0).floor(),
            top: ((h - ch) / 2.0).floor(),
            width: cw,
            height: ch,
            flip: rng.next_u64() & 1 == 1,
        }
    }
}

/// A region of the source image, and whether the output is mirrored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Crop {
    pub left: f64,
    pub top: f64,
    pub width: f64,
    pub height: f64,
    pub flip: bool,
}

/// One generator per (seed, epoch, sample), independent of any other draw.
fn sample_rng(seed: u64, epoch: u64, index: usize) -> SplitMix64 {
    let mut mix = SplitMix64::new(seed);
    let mut mix = SplitMix64::new(mix.next_u64() ^ epoch);
    SplitMix64::new(mix.next_u64() ^ index as u64)
}

/// A decode thread's reusable state for [`Augment::apply`].
#[derive(Debug, Default)]
pub(crate) struct Resample {
    resizer: Resizer,
    resized: Vec<u8>,
}

impl Augment {
    /// Crops, resizes (bilinear with antialiasing, like Pillow's), flips and normalises
    /// `image` into `out` (`channels × size × size`, channel-major); or only normalises
    /// it, without `resize`.
    pub(crate) fn apply(
        &self,
        image: Image<'_>,
        crop: Crop,
        resample: &mut Resample,
        out: &mut [f32],
    ) -> Result<(), String> {
        let side = self.size as usize;
        if !self.resize {
            return self.take_as_is(image, out);
        }
        if image.channels != 3 || image.float {
            return Err(format!(
                "a {} cannot be cropped and resized (8-bit RGB only): take samples \
                 of the model's size as they are (Augment::exact)",
                image.describe()
            ));
        }
        // Typed to RGB: the untyped entry point would build the resizer for every pixel
        // type it knows.
        let source = TypedImageRef::<U8x3>::from_buffer(
            image.width as u32,
            image.height as u32,
            image.pixels,
        )
        .map_err(|e| format!("image of {} x {}: {e}", image.width, image.height))?;
        resample.resized.resize(side * side * 3, 0);
        let mut target =
            TypedImage::<U8x3>::from_buffer(self.size, self.size, &mut resample.resized)
                .map_err(|e| format!("resize buffer: {e}"))?;
        let options = ResizeOptions::new()
            .crop(crop.left, crop.top, crop.width, crop.height)
            .resize_alg(ResizeAlg::Convolution(FilterType::Bilinear));
        resample
            .resizer
            .resize_typed(&source, &mut target, &options)
            .map_err(|e| format!("resize of a {} x {} crop: {e}", crop.width, crop.height))?;
        normalise(&resample.resized, side, crop.flip, self, out);
        Ok(())
    }
}

impl Augment {
    /// `image`, already `channels × size × size`, normalised into `out`, channel-major.
    fn take_as_is(&self, image: Image<'_>, out: &mut [f32]) -> Result<(), String> {
        let (side, channels) = (self.size as usize, self.channels as usize);
        if (image.width, image.height, image.channels) != (side, side, channels) {
            return Err(format!(
                "a {} with {} channel(s) is not the {side} x {side} with {channels} \
                 channel(s) taken as it is (Augment::exact): resize the samples first",
                image.describe(),
                image.channels
            ));
        }
        let plane = side * side;
        for c in 0..channels {
            let (mean, std) = (self.mean[c], self.std[c]);
            let channel = &mut out[c * plane..(c + 1) * plane];
            if image.float {
                let values = image.pixels.chunks_exact(4 * channels);
                for (value, pixel) in channel.iter_mut().zip(values) {
                    let bytes = [
                        pixel[4 * c],
                        pixel[4 * c + 1],
                        pixel[4 * c + 2],
                        pixel[4 * c + 3],
                    ];
                    *value = (f32::from_ne_bytes(bytes) - mean) / std;
                }
            } else {
                for (value, pixel) in channel.iter_mut().zip(image.pixels.chunks_exact(channels)) {
                    *value = (f32::from(pixel[c]) / 255.0 - mean) / std;
                }
            }
        }
        Ok(())
    }
}

/// Interleaved RGB bytes to channel-major `f32`s, `(v / 255 - mean) / std`, mirrored
/// when `flip`.
fn normalise(pixels: &[u8], side: usize, flip: bool, augment: &Augment, out: &mut [f32]) {
    let plane = side * side;
    for c in 0..3 {
        let scale = 1.0 / (255.0 * augment.std[c]);
        let bias = -augment.mean[c] / augment.std[c];
        let channel = &mut out[c * plane..(c + 1) * plane];
        for (y, row) in channel.chunks_exact_mut(side).enumerate() {
            let source = &pixels[y * side * 3..(y + 1) * side * 3];
            for (x, value) in row.iter_mut().enumerate() {
                let sx = if flip { side - 1 - x } else { x };
                *value = f32::from(source[sx * 3 + c]) * scale + bias;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_draws_the_same_crop_whatever_else_was_drawn_and_another_epoch_differs() {
        let augment = Augment::train(32);
        let first = augment.plan(7, 3, 41, 500, 375);
        let _ = augment.plan(7, 3, 40, 500, 375);
        assert_eq!(augment.plan(7, 3, 41, 500, 375), first);
        assert_ne!(augment.plan(7, 4, 41, 500, 375), first);
        assert_ne!(augment.plan(8, 3, 41, 500, 375), first);
    }

    #[test]
    fn random_crops_stay_inside_the_image_and_within_the_ranges() {
        let augment = Augment::train(32);
        let mut flips = 0;
        for index in 0..2000 {
            let crop = augment.plan(1, 0, index, 640, 480);
            assert!(crop.left >= 0.0 && crop.top >= 0.0, "{crop:?}");
            assert!(crop.left + crop.width <= 640.0, "{crop:?}");
            assert!(crop.top + crop.height <= 480.0, "{crop:?}");
            let area = crop.width * crop.height / (640.0 * 480.0);
            assert!((0.07..=1.0).contains(&area), "{crop:?}");
            flips += usize::from(crop.flip);
        }
        assert!((850..1150).contains(&flips), "{flips} flips of 2000");
    }

    #[test]
    fn evaluation_takes_the_centre_and_never_flips() {
        let crop = Augment::eval(224).plan(1, 0, 5, 400, 200);
        assert_eq!(
            crop,
            Crop {
                left: 112.5,
                top: 12.5,
                width: 175.0,
                height: 175.0,
                flip: false
            }
        );
    }

    #[test]
    fn normalising_maps_bytes_through_mean_and_std_and_flips_rows() {
        let augment = Augment {
            mean: [0.5, 0.0, 0.0],
            std: [0.5, 1.0, 1.0],
            ..Augment::train(2)
        };
        // Two rows of two pixels; red 0/255 on the left/right, green 255 everywhere.
        let pixels = [0, 255, 9, 255, 255, 9, 0, 255, 9, 255, 255, 9];
        let mut out = [0.0f32; 12];
        normalise(&pixels, 2, true, &augment, &mut out);
        assert_eq!(&out[..4], &[1.0, -1.0, 1.0, -1.0]);
        assert_eq!(&out[4..8], &[1.0; 4]);
        assert!((out[8] - 9.0 / 255.0).abs() < 1e-6);
    }
}
