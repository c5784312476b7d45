//! Reading a single frame from a file: an image (PNG, JPEG, PGM/PPM) or a raw camera frame
//! of a given format and size. Every error names the file. A JPEG gives its luma only,
//! through the same decoder as MJPEG cameras ([`crate::jpeg`]).
//!
//! Nothing is read whole on trust: a raw frame reads exactly the bytes its layout needs, an
//! image file at most [`MAX_IMAGE_FILE_BYTES`], and the decoders are held to the largest
//! frame the pipeline takes. Only regular files are read (a device or a pipe has no size to
//! check, and `/dev/zero` never ends). An image whose data stops early is refused rather
//! than decoded with its missing part filled in.

use std::fs::File;
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};

use image::{DynamicImage, ImageFormat, ImageReader, Limits};

use crate::jpeg::{self, JpegError, LibraryError, LumaDecoder, Scale, Unwhole};
use edgesight_frame::files::OpenError;
use edgesight_frame::frame::{FrameLayout, PixelFormat, Size, MAX_PIXELS, MAX_WIDTH};

/// The most bytes a decoder may allocate for one image: the largest frame the pipeline
/// takes ([`MAX_PIXELS`]) at the widest pixel the decoders produce, 16-bit RGBA (8 bytes).
pub(crate) const MAX_DECODED_BYTES: u64 = MAX_PIXELS * 8;

/// The largest image file read: an uncompressed image of [`MAX_DECODED_BYTES`] plus 1 MiB
/// of headers and metadata (about 130 MiB). No file the pipeline could use is larger.
pub const MAX_IMAGE_FILE_BYTES: u64 = MAX_DECODED_BYTES + (1 << 20);

/// A frame read from a file: its layout and bytes (rows packed, no padding).
#[derive(Debug)]
pub struct LoadedFrame {
    /// The frame's pixel format and size in pixels; its stride is a packed row's bytes.
    pub layout: FrameLayout,
    /// The frame's pixels, rows packed: exactly the layout's frame bytes.
    pub bytes: Vec<u8>,
}

/// Why a file gave no frame; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file cannot be opened or read; `cause` is in the message, not a source of its
    /// own, so a chain printed with `{:#}` says it once.
    #[error("{path}: {cause}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error from opening or reading it.
        cause: std::io::Error,
    },
    /// The path names something other than a regular file (a directory, a device, a FIFO).
    #[error("{path}: not a regular file ({kind}); give an image file or a raw frame file")]
    NotAFile {
        /// The path given.
        path: PathBuf,
        /// What it names instead, e.g. "a directory" or "a character device".
        kind: &'static str,
    },
    /// The image file is larger than [`MAX_IMAGE_FILE_BYTES`].
    #[error("{path}: {bytes} bytes is more than an image file may have ({MAX_IMAGE_FILE_BYTES} bytes, enough for the largest frame the pipeline takes)")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The file's length in bytes.
        bytes: u64,
    },
    /// The file is no image the decoders read, its decoding failed, or a scale other than
    /// 1 was given for an image that is not a JPEG.
    #[error("{path}: not a readable PNG, JPEG or PGM/PPM image ({reason}); for a raw frame give --format and --size")]
    Decode {
        /// The file.
        path: PathBuf,
        /// The decoder's message, or what was refused.
        reason: String,
    },
    /// The image's data stops before its end (see [`Incomplete`]).
    #[error("{path}: incomplete {} image: {reason}", reason.format())]
    Incomplete {
        /// The file.
        path: PathBuf,
        /// Which image format it is and where its data stops.
        reason: Incomplete,
    },
    /// A raw frame file whose length is not exactly one frame of the given format and size.
    #[error("{path}: a raw {format} frame of {size} is {expected} bytes, the file has {actual}")]
    RawSize {
        /// The file.
        path: PathBuf,
        /// The pixel format given for the raw frame.
        format: PixelFormat,
        /// The frame size given, in pixels.
        size: Size,
        /// Bytes one packed frame of that format and size takes.
        expected: usize,
        /// The file's length in bytes (or the bytes read, if it changed while being read).
        actual: u64,
    },
    /// A frame size or format the pipeline cannot take (empty, too wide, too many pixels).
    #[error("{path}: {reason}")]
    Layout {
        /// The file.
        path: PathBuf,
        /// The layout check's message.
        reason: String,
    },
    /// The decoder a JPEG needs is missing.
    #[error("{path}: {reason}")]
    Library {
        /// The file.
        path: PathBuf,
        /// Why libjpeg-turbo's TurboJPEG library cannot be used.
        reason: LibraryError,
    },
    /// An image of another layout than the one asked for (a JPEG's known from its frame
    /// header, before any decoding).
    #[error("{path}: {} {}x{}, where {} {}x{} is wanted", got.format, got.width, got.height, want.format, want.width, want.height)]
    OtherLayout {
        /// The file.
        path: PathBuf,
        /// The layout the image gives (at the scale asked for).
        got: FrameLayout,
        /// The layout asked for.
        want: FrameLayout,
    },
}

/// Reads `path` as a raw frame when `raw` is given, else as an image file.
pub fn load(path: &Path, raw: Option<(PixelFormat, Size)>) -> Result<LoadedFrame, InputError> {
    let frame = match raw {
        Some((format, size)) => raw_frame(path, format, size)?,
        None => image_frame(path, Scale::Full, None)?,
    };
    check_layout(path, &frame.layout)?;
    Ok(frame)
}

/// Reads `path` as an image file, a JPEG's luma decoded at `scale` (other images refuse
/// a scale other than 1).
pub fn load_image(path: &Path, scale: Scale) -> Result<LoadedFrame, InputError> {
    let frame = image_frame(path, scale, None)?;
    check_layout(path, &frame.layout)?;
    Ok(frame)
}

/// [`load_image`] of an image that must give a frame of `want`'s layout, or
/// [`InputError::OtherLayout`]: a JPEG of another size is refused from its frame header,
/// before any decoding (decoding one may take seconds).
pub fn load_image_as(
    path: &Path,
    scale: Scale,
    want: FrameLayout,
) -> Result<LoadedFrame, InputError> {
    let frame = image_frame(path, scale, Some(want))?;
    if frame.layout != want {
        return Err(InputError::OtherLayout {
            path: path.to_path_buf(),
            got: frame.layout,
            want,
        });
    }
    Ok(frame)
}

fn check_layout(path: &Path, layout: &FrameLayout) -> Result<(), InputError> {
    layout.validate().map_err(|e| InputError::Layout {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// Opens `path` for reading if it is a regular file, with its length.
fn open_regular(path: &Path) -> Result<(File, u64), InputError> {
    edgesight_frame::files::open_regular(path).map_err(|e| match e {
        OpenError::Io(cause) => InputError::Read {
            path: path.to_path_buf(),
            cause,
        },
        OpenError::NotRegular(kind) => InputError::NotAFile {
            path: path.to_path_buf(),
            kind,
        },
    })
}

/// Reads at most `limit` bytes of `file`, and one more so that a file that grew since its
/// length was taken shows as longer than `limit`.
fn read_up_to(path: &Path, file: File, limit: u64) -> Result<Vec<u8>, InputError> {
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|cause| InputError::Read {
            path: path.to_path_buf(),
            cause,
        })?;
    Ok(bytes)
}

fn raw_frame(path: &Path, format: PixelFormat, size: Size) -> Result<LoadedFrame, InputError> {
    let layout = FrameLayout::packed(format, size.width, size.height);
    // A size the pipeline refuses is refused before its byte count is named or read.
    check_layout(path, &layout)?;
    let expected = layout.frame_bytes();
    let wrong_size = |actual| InputError::RawSize {
        path: path.to_path_buf(),
        format,
        size,
        expected,
        actual,
    };
    let (file, len) = open_regular(path)?;
    if len != expected as u64 {
        return Err(wrong_size(len));
    }
    let bytes = read_up_to(path, file, expected as u64)?;
    if bytes.len() != expected {
        // The file changed between its length and its read.
        return Err(wrong_size(bytes.len() as u64));
    }
    Ok(LoadedFrame { layout, bytes })
}

fn image_frame(
    path: &Path,
    scale: Scale,
    want: Option<FrameLayout>,
) -> Result<LoadedFrame, InputError> {
    let (file, len) = open_regular(path)?;
    if len > MAX_IMAGE_FILE_BYTES {
        return Err(InputError::TooLarge {
            path: path.to_path_buf(),
            bytes: len,
        });
    }
    let bytes = read_up_to(path, file, MAX_IMAGE_FILE_BYTES)?;
    if bytes.len() as u64 > MAX_IMAGE_FILE_BYTES {
        return Err(InputError::TooLarge {
            path: path.to_path_buf(),
            bytes: bytes.len() as u64,
        });
    }
    decode_image(path, &bytes, scale, want)
}

/// Decodes an image file's bytes into a frame: the format from the content, completeness
/// checked first, the size checked from the header before any pixel is decoded.
fn decode_image(
    path: &Path,
    bytes: &[u8],
    scale: Scale,
    want: Option<FrameLayout>,
) -> Result<LoadedFrame, InputError> {
    if bytes.starts_with(&[0xFF, 0xD8]) {
        return decode_jpeg(path, bytes, scale, want);
    }
    if scale != Scale::Full {
        return Err(InputError::Decode {
            path: path.to_path_buf(),
            reason: format!("a scale of {scale} applies to JPEG images only"),
        });
    }
    let decode_error = |e: image::ImageError| InputError::Decode {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let reader = || {
        ImageReader::new(Cursor::new(bytes))
            .with_guessed_format()
            .map_err(|cause| InputError::Read {
                path: path.to_path_buf(),
                cause,
            })
    };
    let format = reader()?.format();
    if let Some(format) = format {
        check_complete(path, format, bytes)?;
    }
    let (width, height) = reader()?.into_dimensions().map_err(decode_error)?;
    check_layout(path, &FrameLayout::packed(PixelFormat::Grey, width, height))?;

    let mut reader = reader()?;
    reader.limits(decoder_limits());
    let decoded = reader.decode().map_err(|e| match e {
        // A PGM/PPM whose samples stop early.
        image::ImageError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            InputError::Incomplete {
                path: path.to_path_buf(),
                reason: Incomplete::Samples,
            }
        }
        e => decode_error(e),
    })?;
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

/// What the decoders may take: the widest row and the most pixels the pipeline takes, and
/// no more memory than such a frame at 8 bytes a pixel.
fn decoder_limits() -> Limits {
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_WIDTH);
    limits.max_image_height = Some(u32::try_from(MAX_PIXELS).unwrap_or(u32::MAX));
    limits.max_alloc = Some(MAX_DECODED_BYTES);
    limits
}

/// Refuses a PNG whose data stops before its IEND chunk, which the PNG decoder accepts.
fn check_complete(path: &Path, format: ImageFormat, bytes: &[u8]) -> Result<(), InputError> {
    if format != ImageFormat::Png {
        return Ok(());
    }
    png_end(bytes)
        .map(|_| ())
        .map_err(|reason| InputError::Incomplete {
            path: path.to_path_buf(),
            reason: Incomplete::Png(reason),
        })
}

/// Decodes a JPEG file's luma (only the Y plane: a colour JPEG's luma is its Y, not the
/// grey of its decoded RGB, and equals OpenCV's `imread(path, IMREAD_GRAYSCALE)`). An
/// image whose data stops before its EOI is refused: decoders fill what they could not
/// read with grey and call it success.
fn decode_jpeg(
    path: &Path,
    bytes: &[u8],
    scale: Scale,
    want: Option<FrameLayout>,
) -> Result<LoadedFrame, InputError> {
    let end = jpeg::jpeg_end(bytes).map_err(|reason| InputError::Incomplete {
        path: path.to_path_buf(),
        reason: Incomplete::Jpeg(reason),
    })?;
    let decode_error = |e: JpegError| match e {
        JpegError::Library(reason) => InputError::Library {
            path: path.to_path_buf(),
            reason,
        },
        e => InputError::Decode {
            path: path.to_path_buf(),
            reason: e.to_string(),
        },
    };
    let mut decoder = LumaDecoder::new().map_err(decode_error)?;
    let size = decoder.size(&bytes[..end]).map_err(decode_error)?;
    // The image's own size is held to the pipeline's limits before anything is decoded.
    check_layout(
        path,
        &FrameLayout::packed(PixelFormat::Grey, size.width, size.height),
    )?;
    let scaled = scale.apply(size);
    let layout = FrameLayout::packed(PixelFormat::Grey, scaled.width, scaled.height);
    if let Some(want) = want.filter(|&want| want != layout) {
        return Err(InputError::OtherLayout {
            path: path.to_path_buf(),
            got: layout,
            want,
        });
    }
    let mut luma = vec![0u8; layout.frame_bytes()];
    decoder
        .decode(
            &bytes[..end],
            size,
            scale,
            &mut luma,
            layout.stride as usize,
        )
        .map_err(decode_error)?;
    Ok(LoadedFrame {
        layout,
        bytes: luma,
    })
}

/// Why an image's data stops before its end.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Incomplete {
    /// A JPEG's marker walk stops before its end-of-image marker.
    #[error(transparent)]
    Jpeg(Unwhole),
    /// A PNG's chunk walk stops before its IEND chunk.
    #[error(transparent)]
    Png(PngUnwhole),
    /// A PGM/PPM's samples stop before its size's worth.
    #[error("the pixel data ends early")]
    Samples,
}

impl Incomplete {
    /// The image format, as the error names it.
    pub fn format(&self) -> &'static str {
        match self {
            Incomplete::Jpeg(_) => "JPEG",
            Incomplete::Png(_) => "PNG",
            Incomplete::Samples => "PGM/PPM",
        }
    }
}

/// Why a PNG's chunk walk does not reach its IEND chunk.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PngUnwhole {
    /// The first eight bytes are not PNG's signature.
    #[error("no PNG signature")]
    NoSignature,
    /// The data, `len` bytes, ends inside a chunk's length and type.
    #[error("the data ends at byte {len} in a chunk header, before the IEND chunk")]
    InHeader {
        /// The data's length in bytes.
        len: usize,
    },
    /// The data, `len` bytes, ends inside the chunk of type `kind` starting at `at`.
    #[error(
        "the data ends at byte {len} inside the {} chunk at byte {at}, before the IEND chunk",
        String::from_utf8_lossy(kind)
    )]
    InChunk {
        /// The data's length in bytes.
        len: usize,
        /// The chunk's four-byte type, e.g. `IDAT`.
        kind: [u8; 4],
        /// Byte offset of the chunk's start (its length field).
        at: usize,
    },
}

/// Walks a PNG's chunks by their lengths to IEND; returns the offset just past IEND's CRC,
/// or why the walk could not reach it.
pub(crate) fn png_end(bytes: &[u8]) -> Result<usize, PngUnwhole> {
    const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
    if bytes.get(..8) != Some(&SIGNATURE) {
        return Err(PngUnwhole::NoSignature);
    }
    let mut at = 8;
    loop {
        let Some(header) = bytes.get(at..at + 8) else {
            return Err(PngUnwhole::InHeader { len: bytes.len() });
        };
        let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let kind = [header[4], header[5], header[6], header[7]];
        // Length, type, data and CRC.
        let end = at.saturating_add(12).saturating_add(len);
        if end > bytes.len() {
            return Err(PngUnwhole::InChunk {
                len: bytes.len(),
                kind,
                at,
            });
        }
        if &kind == b"IEND" {
            return Ok(end);
        }
        at = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_walk_needs_the_whole_iend_chunk() {
        let mut png = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
        png.extend([0, 0, 0, 1, b't', b'E', b'X', b't', b'x', 1, 2, 3, 4]);
        png.extend([0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xAE, 0x42, 0x60, 0x82]);
        assert_eq!(png_end(&png), Ok(png.len()));
        // The tEXt chunk takes bytes 8 to 21 (a byte of data), IEND 21 to 33.
        for cut in 0..png.len() {
            let want = match cut {
                0..8 => PngUnwhole::NoSignature,
                8..16 | 21..29 => PngUnwhole::InHeader { len: cut },
                16..21 => PngUnwhole::InChunk {
                    len: cut,
                    kind: *b"tEXt",
                    at: 8,
                },
                _ => PngUnwhole::InChunk {
                    len: cut,
                    kind: *b"IEND",
                    at: 21,
                },
            };
            assert_eq!(png_end(&png[..cut]), Err(want), "cut at {cut}");
        }
        assert_eq!(
            png_end(&png[..30]).unwrap_err().to_string(),
            "the data ends at byte 30 inside the IEND chunk at byte 21, before the IEND chunk"
        );
        assert_eq!(
            png_end(&png[..9]).unwrap_err().to_string(),
            "the data ends at byte 9 in a chunk header, before the IEND chunk"
        );
    }

    #[test]
    fn decoder_limits_allow_exactly_the_largest_frame() {
        let limits = decoder_limits();
        assert!(limits.check_dimensions(MAX_WIDTH, 1).is_ok());
        assert!(limits.check_dimensions(MAX_WIDTH + 1, 1).is_err());
        assert!(limits.check_dimensions(1, MAX_PIXELS as u32).is_ok());
        assert_eq!(MAX_IMAGE_FILE_BYTES, 135_792_648);
    }
}
