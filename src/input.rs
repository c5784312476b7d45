//! Reading a single frame from a file: an image (PNG, JPEG, PGM/PPM) or a raw camera frame
//! of a given format and size. Every error names the file.

use std::path::{Path, PathBuf};

use image::DynamicImage;

use crate::frame::{FrameLayout, PixelFormat, Size};

/// A frame read from a file: its layout and bytes (rows packed, no padding).
#[derive(Debug)]
pub struct LoadedFrame {
    pub layout: FrameLayout,
    pub bytes: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a readable PNG, JPEG or PGM/PPM image ({reason}); for a raw frame give --format and --size")]
    Decode { path: PathBuf, reason: String },
    #[error("{path}: a raw {format} frame of {size} is {expected} bytes, the file has {actual}")]
    RawSize {
        path: PathBuf,
        format: PixelFormat,
        size: Size,
        expected: usize,
        actual: usize,
    },
    #[error("{path}: --format and --size go together (a raw frame needs both)")]
    RawArgs { path: PathBuf },
    #[error("{path}: {reason}")]
    Layout { path: PathBuf, reason: String },
}

/// Reads `path` as a raw frame when `raw` is given, else as an image file.
pub fn load(path: &Path, raw: Option<(PixelFormat, Size)>) -> Result<LoadedFrame, InputError> {
    let bytes = std::fs::read(path).map_err(|source| InputError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let frame = match raw {
        Some((format, size)) => raw_frame(path, bytes, format, size)?,
        None => image_frame(path, &bytes)?,
    };
    frame.layout.validate().map_err(|e| InputError::Layout {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    Ok(frame)
}

fn raw_frame(
    path: &Path,
    bytes: Vec<u8>,
    format: PixelFormat,
    size: Size,
) -> Result<LoadedFrame, InputError> {
    let layout = FrameLayout::packed(format, size.width, size.height);
    let expected = layout.frame_bytes();
    if bytes.len() != expected {
        return Err(InputError::RawSize {
            path: path.to_path_buf(),
            format,
            size,
            expected,
            actual: bytes.len(),
        });
    }
    Ok(LoadedFrame { layout, bytes })
}

fn image_frame(path: &Path, bytes: &[u8]) -> Result<LoadedFrame, InputError> {
    let decoded = image::load_from_memory(bytes).map_err(|e| InputError::Decode {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let (width, height) = (decoded.width(), decoded.height());
    // 8-bit grey stays grey, colour keeps its channels; deeper images are reduced to 8 bits.
    let (format, bytes) = match decoded {
        DynamicImage::ImageLuma8(img) => (PixelFormat::Grey, img.into_raw()),
        DynamicImage::ImageRgb8(img) => (PixelFormat::Rgb24, img.into_raw()),
        DynamicImage::ImageRgba8(img) => (PixelFormat::Rgbx, img.into_raw()),
        other if other.color().has_color() => (PixelFormat::Rgbx, other.to_rgba8().into_raw()),
        other => (PixelFormat::Grey, other.to_luma8().into_raw()),
    };
    Ok(LoadedFrame {
        layout: FrameLayout::packed(format, width, height),
        bytes,
    })
}
