//! The datasets: MNIST from its IDX files, or a synthetic stand-in with the same shape.
//! Training reads them through hvd's loader ([`Split::into_source`]); the test split is
//! scored in place ([`Split::batch`]).
//!
//! The synthetic dataset is ten classes of 28×28 grey images. Each class has a fixed
//! template: four thick strokes between random points of the central 16×16 area (the
//! same templates on every rank and every run). An example is its class's template
//! shifted by up to 3 pixels in each direction, dimmed to 50–100 % contrast, with
//! Gaussian pixel noise (σ 0.4) on top, clipped to [0, 1]. A linear model gets most of
//! it; a small MLP gets most of the rest, but never quite all, because the noise
//! sometimes blurs two classes together.

use std::path::Path;

use candle_core::{Device, Tensor};
use hvd::data::InMemory;
use hvd::data::source::{Encoding, Sample};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub const SIDE: usize = 28;
pub const PIXELS: usize = SIDE * SIDE;
pub const CLASSES: usize = 10;

/// Images (row-major 28×28) and their labels.
pub struct Split {
    images: Images,
    labels: Vec<u32>,
}

/// MNIST's bytes (a pixel is `v / 255`), or generated values in [0, 1].
enum Images {
    Bytes(Vec<u8>),
    Floats(Vec<f32>),
}

pub struct Dataset {
    pub train: Split,
    pub test: Split,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Split {
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// The examples at `indices` as a `(n, 784)` f32 image tensor and `(n,)` u32 labels.
    pub fn batch(
        &self,
        indices: &[usize],
        device: &Device,
    ) -> candle_core::Result<(Tensor, Tensor)> {
        let mut images = Vec::with_capacity(indices.len() * PIXELS);
        for &i in indices {
            let pixels = i * PIXELS..(i + 1) * PIXELS;
            match &self.images {
                Images::Bytes(bytes) => {
                    images.extend(bytes[pixels].iter().map(|&p| f32::from(p) / 255.0));
                }
                Images::Floats(floats) => images.extend_from_slice(&floats[pixels]),
            }
        }
        let labels: Vec<u32> = indices.iter().map(|&i| self.labels[i]).collect();
        Ok((
            Tensor::from_vec(images, (indices.len(), PIXELS), device)?,
            Tensor::from_vec(labels, indices.len(), device)?,
        ))
    }

    /// The split as a source for hvd's loader, one sample an image: MNIST's grey bytes,
    /// or the generated values as `f32`s. `Augment::exact(28, 1)` then hands over the
    /// pixels [`batch`](Self::batch) would.
    pub fn into_source(self) -> InMemory {
        let mut source = InMemory::default();
        let (width, height) = (SIDE as u32, SIDE as u32);
        let labels = self.labels.iter().map(|&l| i64::from(l));
        match self.images {
            Images::Bytes(bytes) => {
                let encoding = Encoding::Grey { width, height };
                for (pixels, label) in bytes.chunks_exact(PIXELS).zip(labels) {
                    source.push(pixels.to_vec(), Sample { label, encoding });
                }
            }
            Images::Floats(floats) => {
                let channels = 1;
                let encoding = Encoding::F32 {
                    width,
                    height,
                    channels,
                };
                for (pixels, label) in floats.chunks_exact(PIXELS).zip(labels) {
                    let bytes = pixels.iter().flat_map(|v| v.to_ne_bytes()).collect();
                    source.push(bytes, Sample { label, encoding });
                }
            }
        }
        source
    }
}

/// MNIST from the four uncompressed IDX files in `dir`.
pub fn mnist(dir: &Path) -> Result<Dataset, BoxError> {
    let split = |images: &str, labels: &str| -> Result<Split, BoxError> {
        let images = read_idx(&dir.join(images), 3)?;
        let labels = read_idx(&dir.join(labels), 1)?;
        if images.len() != labels.len() * PIXELS {
            return Err(format!(
                "{}: {} images of 28x28 pixels do not match {} labels",
                dir.display(),
                images.len() / PIXELS,
                labels.len()
            )
            .into());
        }
        if let Some(bad) = labels.iter().find(|&&l| usize::from(l) >= CLASSES) {
            return Err(format!("{}: label {bad} is not a digit", dir.display()).into());
        }
        Ok(Split {
            images: Images::Bytes(images),
            labels: labels.iter().map(|&l| u32::from(l)).collect(),
        })
    };
    Ok(Dataset {
        train: split("train-images-idx3-ubyte", "train-labels-idx1-ubyte")?,
        test: split("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")?,
    })
}

/// The bytes of an IDX file of unsigned bytes with `dims` dimensions (28×28 images
/// when there are 3).
fn read_idx(path: &Path, dims: usize) -> Result<Vec<u8>, BoxError> {
    let mut bytes = std::fs::read(path).map_err(|e| {
        format!(
            "{}: {e} (download MNIST and gunzip its four files into that directory)",
            path.display()
        )
    })?;
    let header = 4 + 4 * dims;
    let bad = |why: &str| format!("{}: not an MNIST IDX file: {why}", path.display());
    if bytes.len() < header || bytes[..3] != [0, 0, 8] || usize::from(bytes[3]) != dims {
        return Err(bad(&format!(
            "expected the header of a {dims}-D file of unsigned bytes"
        ))
        .into());
    }
    let sizes: Vec<usize> = bytes[4..header]
        .chunks_exact(4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .collect();
    if dims == 3 && sizes[1..] != [SIDE, SIDE] {
        return Err(bad(&format!("images are {}x{}, not 28x28", sizes[1], sizes[2])).into());
    }
    let data_len = bytes.len() - header;
    if data_len != sizes.iter().product::<usize>() {
        return Err(bad(&format!(
            "header says {sizes:?} but {data_len} bytes follow"
        ))
        .into());
    }
    // The file's own buffer, without its header: no second copy of 47 MB of images.
    Ok(bytes.split_off(header))
}

/// The synthetic dataset described at the top of this file: `train` and `test`
/// examples, the same for a given size on every rank.
pub fn synthetic(train: usize, test: usize) -> Dataset {
    let templates = templates(&mut StdRng::seed_from_u64(0x5eed));
    Dataset {
        train: render(&templates, train, &mut StdRng::seed_from_u64(1)),
        test: render(&templates, test, &mut StdRng::seed_from_u64(2)),
    }
}

fn templates(rng: &mut StdRng) -> Vec<Vec<f32>> {
    (0..CLASSES)
        .map(|_| {
            let mut image = vec![0f32; PIXELS];
            for _ in 0..4 {
                let mut point = || (rng.random_range(6.0..22.0), rng.random_range(6.0..22.0));
                stroke(&mut image, point(), point());
            }
            image
        })
        .collect()
}

/// Draws a line about 2.5 pixels thick from `a` to `b`, anti-aliased.
fn stroke(image: &mut [f32], a: (f32, f32), b: (f32, f32)) {
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let length2 = (dx * dx + dy * dy).max(1e-6);
    for y in 0..SIDE {
        for x in 0..SIDE {
            let (px, py) = (x as f32 - a.0, y as f32 - a.1);
            let t = ((px * dx + py * dy) / length2).clamp(0.0, 1.0);
            let distance = ((px - t * dx).powi(2) + (py - t * dy).powi(2)).sqrt();
            let ink = (2.0 - distance).clamp(0.0, 1.0);
            let pixel = &mut image[y * SIDE + x];
            *pixel = pixel.max(ink);
        }
    }
}

fn render(templates: &[Vec<f32>], n: usize, rng: &mut StdRng) -> Split {
    let mut images = Vec::with_capacity(n * PIXELS);
    let mut labels = Vec::with_capacity(n);
    for _ in 0..n {
        let label = rng.random_range(0..CLASSES);
        let (shift_x, shift_y) = (rng.random_range(-3..=3), rng.random_range(-3..=3));
        let contrast = rng.random_range(0.5..1.0);
        for y in 0..SIDE as i32 {
            for x in 0..SIDE as i32 {
                let (sx, sy) = (x - shift_x, y - shift_y);
                let ink = if (0..SIDE as i32).contains(&sx) && (0..SIDE as i32).contains(&sy) {
                    templates[label][sy as usize * SIDE + sx as usize]
                } else {
                    0.0
                };
                images.push((contrast * ink + 0.4 * gaussian(rng)).clamp(0.0, 1.0));
            }
        }
        labels.push(label as u32);
    }
    Split {
        images: Images::Floats(images),
        labels,
    }
}

/// A standard normal sample (Box–Muller).
fn gaussian(rng: &mut StdRng) -> f32 {
    let u: f32 = rng.random_range(f32::EPSILON..1.0);
    let v: f32 = rng.random();
    (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
}
