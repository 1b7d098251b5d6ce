//! Encoded bytes to RGB pixels.

use zune_jpeg::JpegDecoder;
use zune_jpeg::zune_core::bytestream::ZCursor;
use zune_jpeg::zune_core::colorspace::ColorSpace;
use zune_jpeg::zune_core::options::DecoderOptions;

use crate::source::Encoding;

/// The largest side decoded: a corrupt header claiming more would cost gigabytes.
const MAX_SIDE: usize = 1 << 14;

/// RGB pixels, 3 bytes each, row after row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rgb<'a> {
    pub pixels: &'a [u8],
    pub width: usize,
    pub height: usize,
}

/// Decodes `bytes` into `scratch` (reusing its capacity), or borrows them when they are
/// pixels already. The error says what is wrong with the bytes.
pub(crate) fn decode<'a>(
    bytes: &'a [u8],
    encoding: Encoding,
    scratch: &'a mut Vec<u8>,
) -> Result<Rgb<'a>, String> {
    match encoding {
        Encoding::Rgb { width, height } => {
            let (width, height) = (width as usize, height as usize);
            if bytes.len() != width * height * 3 || width == 0 || height == 0 {
                return Err(format!(
                    "{} bytes are not {width} x {height} RGB pixels",
                    bytes.len()
                ));
            }
            Ok(Rgb {
                pixels: bytes,
                width,
                height,
            })
        }
        Encoding::Jpeg => decode_jpeg(bytes, scratch),
    }
}

fn decode_jpeg<'a>(bytes: &[u8], scratch: &'a mut Vec<u8>) -> Result<Rgb<'a>, String> {
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
    Ok(Rgb {
        pixels: scratch,
        width,
        height,
    })
}
