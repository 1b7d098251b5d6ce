//! Encoded bytes to pixels: JPEG decoded to RGB; decoded samples borrowed as they are.

use zune_jpeg::JpegDecoder;
use zune_jpeg::zune_core::bytestream::ZCursor;
use zune_jpeg::zune_core::colorspace::ColorSpace;
use zune_jpeg::zune_core::options::DecoderOptions;

use crate::source::Encoding;

/// The largest side decoded: a corrupt header claiming more would cost gigabytes.
const MAX_SIDE: usize = 1 << 14;

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

impl Image<'_> {
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

fn decode_jpeg<'a>(bytes: &[u8], scratch: &'a mut Vec<u8>) -> Result<Image<'a>, String> {
    // Strict: a truncated file is an error, not an image padded with grey.
    let options = DecoderOptions::default()
        .jpeg_set_out_colorspace(ColorSpace::RGB)
        .set_strict_mode(true)
        .set_max_width(MAX_SIDE)
        .set_max_height(MAX_SIDE);
    let mut decoder = JpegDecoder::new_with_options(ZCursor::new(bytes), options);
    let invalid = |e| format!("invalid JPEG: {e}");
    decoder.decode_headers().map_err(invalid)?;
    let (width, height) = decoder
        .dimensions()
        .ok_or_else(|| "invalid JPEG: no dimensions in its header".to_string())?;
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
    Ok(Image {
        pixels: scratch,
        width,
        height,
        channels: 3,
        float: false,
    })
}
