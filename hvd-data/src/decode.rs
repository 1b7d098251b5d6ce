//! Encoded bytes to pixels: JPEG and PNG decoded to RGB; decoded samples borrowed as
//! they are.

use zune_jpeg::JpegDecoder;
use zune_jpeg::zune_core::bytestream::ZCursor;
use zune_jpeg::zune_core::colorspace::ColorSpace;
use zune_jpeg::zune_core::options::DecoderOptions;
use zune_png::PngDecoder;

use crate::source::Encoding;

/// The largest side of an image decoded, made or loaded: a corrupt header claiming more
/// would cost gigabytes.
pub const MAX_SIDE: usize = 1 << 14;

/// Pixels row after row, `channels` values each (interleaved): bytes, or native-endian
/// `f32`s when `float`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Image<'a> {
    pub pixels: &'a [u8],
    pub width: usize,
    pub height: usize,
    pub channels: usize,
    pub float: bool,
}

impl<'a> Image<'a> {
    /// Decoded RGB bytes.
    fn rgb(pixels: &'a [u8], width: usize, height: usize) -> Self {
        Image {
            pixels,
            width,
            height,
            channels: 3,
            float: false,
        }
    }

    /// What the pixels are, for errors.
    pub fn describe(&self) -> String {
        let kind = match (self.channels, self.float) {
            (1, false) => "grey".to_string(),
            (3, false) => "RGB".to_string(),
            (c, false) => format!("{c}-channel"),
            (c, true) => format!("{c}-channel f32"),
        };
        format!("{kind} image of {} x {}", self.width, self.height)
    }
}

/// Decodes `bytes` into `scratch` (reusing its capacity), or borrows them when they are
/// pixels already. The error says what is wrong with the bytes.
pub(crate) fn decode<'a>(
    bytes: &'a [u8],
    encoding: Encoding,
    scratch: &'a mut Vec<u8>,
) -> Result<Image<'a>, String> {
    let (width, height, channels, float, what) = match encoding {
        Encoding::Jpeg => return decode_jpeg(bytes, scratch),
        Encoding::Png => return decode_png(bytes, scratch),
        Encoding::Rgb { width, height } => (width, height, 3, false, "RGB pixels"),
        Encoding::Grey { width, height } => (width, height, 1, false, "grey pixels"),
        Encoding::F32 {
            width,
            height,
            channels,
        } => (width, height, channels, true, "f32 pixels"),
    };
    let (width, height, channels) = (width as usize, height as usize, channels as usize);
    let value = if float { size_of::<f32>() } else { 1 };
    let expected = width
        .checked_mul(height)
        .and_then(|n| n.checked_mul(channels * value));
    if expected != Some(bytes.len()) || width == 0 || height == 0 || channels == 0 {
        return Err(format!(
            "{} bytes are not {width} x {height} {what} of {channels} channel(s)",
            bytes.len()
        ));
    }
    Ok(Image {
        pixels: bytes,
        width,
        height,
        channels,
        float,
    })
}

/// A header's `(width, height)`, which a decoder has once the header was read.
fn dimensions(format: &str, found: Option<(usize, usize)>) -> Result<(usize, usize), String> {
    found.ok_or_else(|| format!("invalid {format}: no dimensions in its header"))
}

/// Strict (a truncated file is an error, not an image padded with grey) and bounded
/// (a corrupt header cannot claim gigabytes).
fn guarded(options: DecoderOptions) -> DecoderOptions {
    options
        .set_strict_mode(true)
        .set_max_width(MAX_SIDE)
        .set_max_height(MAX_SIDE)
}

fn decode_jpeg<'a>(bytes: &[u8], scratch: &'a mut Vec<u8>) -> Result<Image<'a>, String> {
    let options = DecoderOptions::default().jpeg_set_out_colorspace(ColorSpace::RGB);
    let mut decoder = JpegDecoder::new_with_options(ZCursor::new(bytes), guarded(options));
    let invalid = |e| format!("invalid JPEG: {e}");
    decoder.decode_headers().map_err(invalid)?;
    let (width, height) = dimensions("JPEG", decoder.dimensions())?;
    let size = decoder
        .output_buffer_size()
        .ok_or_else(|| format!("invalid JPEG: {width} x {height} is too large"))?;
    if width == 0 || height == 0 || size != width * height * 3 {
        return Err(format!(
            "invalid JPEG: {width} x {height} with {size} output bytes"
        ));
    }
    scratch.resize(size, 0);
    decoder.decode_into(&mut scratch[..]).map_err(invalid)?;
    Ok(Image::rgb(scratch, width, height))
}

fn decode_png<'a>(bytes: &[u8], scratch: &'a mut Vec<u8>) -> Result<Image<'a>, String> {
    // 16-bit samples become 8-bit ones; palettes are expanded by the decoder.
    let options = DecoderOptions::default().png_set_strip_to_8bit(true);
    let mut decoder = PngDecoder::new_with_options(ZCursor::new(bytes), guarded(options));
    let invalid = |e: zune_png::error::PngDecodeErrors| {
        format!("invalid PNG: {}", format!("{e:?}").trim_end())
    };
    decoder.decode_headers().map_err(invalid)?;
    let (width, height) = dimensions("PNG", decoder.dimensions())?;
    let channels = decoder
        .colorspace()
        .map(|c| c.num_components())
        .ok_or_else(|| "invalid PNG: no colour type in its header".to_string())?;
    let size = width
        .checked_mul(height)
        .and_then(|n| n.checked_mul(channels))
        .filter(|&n| n > 0 && matches!(channels, 1..=4))
        .ok_or_else(|| format!("invalid PNG: {width} x {height} of {channels} channel(s)"))?;
    // Decoded after the room for the RGB output, then spread into that room: the two
    // never overlap, and the scratch buffer keeps its capacity for the next image.
    let rgb = width * height * 3;
    scratch.resize(rgb + size, 0);
    decoder.decode_into(&mut scratch[rgb..]).map_err(invalid)?;
    let (out, decoded) = scratch.split_at_mut(rgb);
    to_rgb(decoded, channels, out);
    scratch.truncate(rgb);
    Ok(Image::rgb(scratch, width, height))
}

/// `decoded` pixels of `channels` bytes each as RGB into `out`: grey repeated, alpha
/// dropped.
fn to_rgb(decoded: &[u8], channels: usize, out: &mut [u8]) {
    for (pixel, rgb) in decoded.chunks_exact(channels).zip(out.chunks_exact_mut(3)) {
        match channels {
            1 | 2 => rgb.fill(pixel[0]),
            _ => rgb.copy_from_slice(&pixel[..3]),
        }
    }
}
