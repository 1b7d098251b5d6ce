//! The model's check as a picture: predicted against measured efficiency, one dot per
//! run coloured by model, on the diagonal where they agree and between the grey lines
//! where they agree within 5 points. Written as a PNG with no text: the README says what
//! the axes are (both 0 to 100 %, grid every 25 %).

use std::path::Path;

pub struct Point {
    pub measured: f64,
    pub predicted: f64,
    pub series: String,
}

const SIZE: usize = 480;
const MARGIN: usize = 30;

struct Canvas {
    pixels: Vec<[u8; 3]>,
}

impl Canvas {
    fn set(&mut self, x: usize, y: usize, colour: [u8; 3]) {
        if x < SIZE && y < SIZE {
            self.pixels[y * SIZE + x] = colour;
        }
    }

    /// The pixel of efficiency `(measured, predicted)`, origin at the bottom left.
    fn at(value: f64) -> usize {
        let span = (SIZE - 2 * MARGIN) as f64;
        MARGIN + (value.clamp(0.0, 1.0) * span).round() as usize
    }

    fn dot(&mut self, x: f64, y: f64, colour: [u8; 3]) {
        let (cx, cy) = (Canvas::at(x) as i64, (SIZE - Canvas::at(y)) as i64);
        for dy in -4i64..=4 {
            for dx in -4i64..=4 {
                if dx * dx + dy * dy <= 16 {
                    self.set((cx + dx) as usize, (cy + dy) as usize, colour);
                }
            }
        }
    }

    /// The line `predicted = measured + offset` over the plot, every `dash`-th pixel.
    fn diagonal(&mut self, offset: f64, colour: [u8; 3], dash: usize) {
        for i in 0..=1000 {
            let x = i as f64 / 1000.0;
            let y = x + offset;
            if (0.0..=1.0).contains(&y) && (i / 4) % dash == 0 {
                self.set(Canvas::at(x), SIZE - Canvas::at(y), colour);
            }
        }
    }
}

fn colour(series: &str) -> [u8; 3] {
    match series {
        "resnet101" => [31, 119, 180],
        "inception3" => [44, 160, 44],
        "vgg16" => [214, 39, 40],
        "resnet50" => [148, 103, 189],
        _ => [127, 127, 127],
    }
}

pub fn write(path: &Path, points: &[Point]) -> Result<(), String> {
    let mut canvas = Canvas {
        pixels: vec![[255; 3]; SIZE * SIZE],
    };
    for step in 0..=4 {
        let at = Canvas::at(step as f64 / 4.0);
        let shade = if step == 0 { [0; 3] } else { [225; 3] };
        for i in MARGIN..=SIZE - MARGIN {
            canvas.set(at, i, shade);
            canvas.set(i, SIZE - at, shade);
        }
    }
    canvas.diagonal(0.0, [0; 3], 1);
    canvas.diagonal(0.05, [150; 3], 2);
    canvas.diagonal(-0.05, [150; 3], 2);
    for p in points {
        canvas.dot(p.measured, p.predicted, colour(&p.series));
    }
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), SIZE as u32, SIZE as u32);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let bytes: Vec<u8> = canvas.pixels.concat();
    encoder
        .write_header()
        .and_then(|mut w| w.write_image_data(&bytes))
        .map_err(|e| format!("{}: {e}", path.display()))
}
