//! How many images a second the loader decodes and augments, with 1 and 2 threads: the
//! capacity (C) side of the data gap. JPEGs of 400-640 × 300-480 at quality 90 (the sizes
//! of ImageNet's), made in memory, to 224 × 224 with the training transform.
//!
//! `cargo run --release -p hvd-data --example decode_rate -- [images] [threads...]`

use std::time::Instant;

use hvd_core::rng::SplitMix64;
use hvd_data::{Augment, ElasticSampler, InMemory, Loader, LoaderOptions};
use jpeg_encoder::{ColorType, Encoder};

/// A photo-like JPEG: smooth gradients with noise, so it compresses like a photo rather
/// than like a flat colour.
fn photo(rng: &mut SplitMix64) -> Vec<u8> {
    let width = 400 + rng.below(241) as u16;
    let height = 300 + rng.below(181) as u16;
    let (w, h) = (usize::from(width), usize::from(height));
    let mut pixels = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        for x in 0..w {
            let noise = rng.below(24) as usize;
            pixels.push(((x * 255 / w + noise) % 256) as u8);
            pixels.push(((y * 255 / h + noise) % 256) as u8);
            pixels.push((((x + y) * 128 / (w + h) + noise) % 256) as u8);
        }
    }
    let mut bytes = Vec::new();
    Encoder::new(&mut bytes, 90)
        .encode(&pixels, width, height, ColorType::Rgb)
        .expect("encoding in memory");
    bytes
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let images: usize = args.next().map_or(Ok(512), |a| a.parse())?;
    let threads: Vec<usize> = args.map(|a| a.parse()).collect::<Result<_, _>>()?;
    let threads = if threads.is_empty() {
        vec![1, 2]
    } else {
        threads
    };
    let mut rng = SplitMix64::new(1);
    let jpegs: Vec<(Vec<u8>, i64)> = (0..images)
        .map(|i| (photo(&mut rng), i as i64 % 10))
        .collect();
    let kib = jpegs.iter().map(|(b, _)| b.len()).sum::<usize>() as f64 / images as f64 / 1024.0;
    println!("{images} JPEGs, {kib:.0} KiB on average, to 224 x 224, batch 32");
    for threads in threads {
        let options = LoaderOptions {
            threads,
            prefetch: 2,
            ..Default::default()
        };
        let mut loader = Loader::new(InMemory::jpegs(jpegs.clone()), Augment::train(224), options)?;
        let sampler = ElasticSampler::new(images, 32);
        let started = Instant::now();
        let mut decoded = 0;
        let mut epoch = loader.epoch(&sampler, 0, 1)?;
        while let Some(batch) = epoch.next_batch()? {
            decoded += batch.len();
        }
        let seconds = started.elapsed().as_secs_f64();
        println!(
            "{{\"threads\": {threads}, \"images\": {decoded}, \"seconds\": {seconds:.3}, \"images_per_s\": {:.1}}}",
            decoded as f64 / seconds
        );
    }
    Ok(())
}
