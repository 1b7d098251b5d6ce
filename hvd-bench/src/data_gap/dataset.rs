//! The benchmark's JPEG dataset, made here: images of varied sizes (400-640 × 300-480,
//! quality 90, about ImageNet's), each drawn from (seed, index) alone, in
//! torchvision's `ImageFolder` layout, cached under a folder named by its parameters so
//! that a rerun finds it instead of encoding it again.

use std::fs;
use std::path::{Path, PathBuf};

use jpeg_encoder::{ColorType, Encoder};

/// Classes (sub-folders) the images are spread over.
const CLASSES: usize = 10;
/// JPEG quality, as ImageNet's photographs are typically saved.
pub const QUALITY: u8 = 90;

/// What fixes the dataset's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatasetSpec {
    pub images: usize,
    pub seed: u64,
}

impl DatasetSpec {
    /// The cache folder's name: every parameter that changes a byte, and a version for
    /// the generator itself.
    pub fn key(&self) -> String {
        format!("jpeg-v1-n{}-s{}-q{QUALITY}", self.images, self.seed)
    }

    /// Where the images are under `cache`.
    pub fn root(&self, cache: &Path) -> PathBuf {
        cache.join(self.key())
    }
}

/// SplitMix64: a good, tiny generator whose output depends on its seed alone.
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Image `index`'s width and height, and its RGB pixels: gradients, bands and noise,
/// so that the entropy coder has a photograph's work to do (about 100 KiB at quality
/// 90), not a flat colour's.
pub fn image(seed: u64, index: usize) -> (u16, u16, Vec<u8>) {
    let mut state = seed ^ (index as u64).wrapping_mul(0xA24B_AED4_963E_E407);
    let width = 400 + (splitmix(&mut state) % 241) as usize;
    let height = 300 + (splitmix(&mut state) % 181) as usize;
    let params: Vec<u64> = (0..6).map(|_| splitmix(&mut state) % 7 + 1).collect();
    let mut pixels = vec![0u8; width * height * 3];
    let mut noise = splitmix(&mut state) | 1;
    for y in 0..height {
        for x in 0..width {
            // xorshift: cheap per-pixel noise.
            noise ^= noise << 13;
            noise ^= noise >> 7;
            noise ^= noise << 17;
            let at = (y * width + x) * 3;
            let (x, y) = (x as u64, y as u64);
            let band = ((x / (8 * params[3]) + y / (8 * params[4])) % 2) * 40;
            pixels[at] = ((x * params[0] / 3 + band + (noise & 31)) % 256) as u8;
            pixels[at + 1] = ((y * params[1] / 3 + band + ((noise >> 8) & 31)) % 256) as u8;
            pixels[at + 2] = (((x + y) * params[2] / 5 + ((noise >> 16) & 63)) % 256) as u8;
        }
    }
    (width as u16, height as u16, pixels)
}

/// Image `index` encoded as a JPEG.
pub fn jpeg(seed: u64, index: usize) -> Result<Vec<u8>, String> {
    let (width, height, pixels) = image(seed, index);
    let mut bytes = Vec::with_capacity(128 << 10);
    Encoder::new(&mut bytes, QUALITY)
        .encode(&pixels, width, height, ColorType::Rgb)
        .map_err(|e| format!("encoding image {index}: {e}"))?;
    Ok(bytes)
}

/// The dataset's folder under `cache`, made first if it is not there. It is written
/// under a temporary name and renamed, so an interrupted run leaves no half dataset
/// that a later one would take for whole.
pub fn ensure(spec: DatasetSpec, cache: &Path) -> Result<PathBuf, String> {
    let root = spec.root(cache);
    if root.is_dir() {
        return Ok(root);
    }
    if spec.images == 0 {
        return Err("--images must be at least 1".into());
    }
    let io = |path: &Path, e: std::io::Error| format!("{}: {e}", path.display());
    let partial = cache.join(format!("{}.partial-{}", spec.key(), std::process::id()));
    for class in 0..CLASSES {
        let dir = partial.join(format!("class{class:02}"));
        fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
    }
    for index in 0..spec.images {
        let path = partial
            .join(format!("class{:02}", index % CLASSES))
            .join(format!("{index:06}.jpg"));
        fs::write(&path, jpeg(spec.seed, index)?).map_err(|e| io(&path, e))?;
    }
    match fs::rename(&partial, &root) {
        Ok(()) => Ok(root),
        // Another run made it meanwhile: use theirs.
        Err(_) if root.is_dir() => {
            let _ = fs::remove_dir_all(&partial);
            Ok(root)
        }
        Err(e) => Err(io(&root, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_drawn_from_seed_and_index_alone_within_the_sizes() {
        let (a, b) = (jpeg(7, 3).unwrap(), jpeg(7, 3).unwrap());
        assert_eq!(a, b);
        assert_ne!(jpeg(7, 4).unwrap(), a);
        assert_ne!(jpeg(8, 3).unwrap(), a);
        for index in 0..20 {
            let (w, h, pixels) = image(1, index);
            assert!(
                (400..=640).contains(&w) && (300..=480).contains(&h),
                "{w}x{h}"
            );
            assert_eq!(pixels.len(), w as usize * h as usize * 3);
        }
        // A photograph's size at quality 90, not a flat colour's few KiB.
        assert!(a.len() > 40 << 10, "{} bytes", a.len());
        assert_eq!(&a[..2], &[0xFF, 0xD8]);
    }

    #[test]
    fn a_cached_dataset_is_found_again_and_keyed_by_its_parameters() {
        let cache = tempfile::tempdir().unwrap();
        let spec = DatasetSpec {
            images: 12,
            seed: 5,
        };
        let root = ensure(spec, cache.path()).unwrap();
        let first = root.join("class02").join("000002.jpg");
        assert_eq!(fs::read(&first).unwrap(), jpeg(5, 2).unwrap());
        // A rerun uses the folder as it is (a marker file survives).
        fs::write(root.join("marker"), b"kept").unwrap();
        assert_eq!(ensure(spec, cache.path()).unwrap(), root);
        assert!(root.join("marker").exists());
        let other = ensure(
            DatasetSpec {
                images: 12,
                seed: 6,
            },
            cache.path(),
        )
        .unwrap();
        assert_ne!(other, root);
        let count = walk(&root);
        assert_eq!(count, 12);
        assert_eq!(
            ensure(DatasetSpec { images: 0, seed: 1 }, cache.path()),
            Err("--images must be at least 1".to_string())
        );
    }

    fn walk(root: &Path) -> usize {
        fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .map(|d| fs::read_dir(d).unwrap().count())
            .sum()
    }
}
