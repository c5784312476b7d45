//! JPEG images to 8-bit luma, for MJPEG cameras and JPEG files: only the Y plane is made
//! (libjpeg-turbo decodes every component's entropy-coded data, as it must, but runs the
//! inverse DCT of luma alone, with no upsampling or colour conversion), straight into the
//! caller's buffer, optionally at 1/2, 1/4 or 1/8 of the size by libjpeg's DCT scaling.
//!
//! The decoder is libjpeg-turbo's, through its TurboJPEG API ([`turbo`]), chosen by
//! measurement against zune-jpeg and OpenCV (BENCHMARKS.md#jpeg-decoders). It is the
//! library OpenCV decodes with, so the luma equals `cv2.imdecode(buf,
//! cv2.IMREAD_GRAYSCALE)` (and `IMREAD_REDUCED_GRAYSCALE_N` scaled) byte for byte, which
//! the conformance test checks.
//!
//! An image is decoded only whole: its markers are walked to its EOI first ([`markers`]),
//! one of more than [`MAX_SCANS`] scans is refused before decoding, and a decoder warning
//! other than stray bytes before a marker (which loses no pixel)
//! makes it corrupt, as do a size other than the one expected. Frames without Huffman
//! tables (the AVI1 style of UVC cameras) take the standard tables, as libjpeg-turbo does.
//! Knows nothing of OpenCL, capture or files.

mod markers;
mod turbo;

use std::ffi::{c_int, c_ulong, c_void, CStr};
use std::fmt;
use std::ptr::NonNull;
use std::str::FromStr;

pub use markers::{jpeg_end, next_image, walk, Part, Unwhole, Walk};
pub use turbo::LibraryError;

use edgesight_frame::frame::Size;

/// The most scans an image may have. A progressive image's data is decoded again for each
/// scan (a 49 MB one of 499 scans took 6.5 s); encoders' progressions write about ten
/// (libjpeg's and mozjpeg's), and libjpeg-turbo 2.1's own limit (`TJFLAG_LIMITSCANS`) is 500.
pub const MAX_SCANS: u32 = 64;

/// How much smaller than the image its decoded luma is (libjpeg's DCT scaling: each side
/// is the image's divided by [`Scale::divisor`], rounded up).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Scale {
    /// The image's own size.
    #[default]
    Full,
    /// Half the width and height (1/2).
    Half,
    /// A quarter of the width and height (1/4).
    Quarter,
    /// An eighth of the width and height (1/8).
    Eighth,
}

impl Scale {
    /// Every scale, from full size down.
    pub const ALL: [Scale; 4] = [Scale::Full, Scale::Half, Scale::Quarter, Scale::Eighth];

    /// What each side of the image is divided by (rounding up): 1, 2, 4 or 8.
    pub fn divisor(self) -> u32 {
        match self {
            Scale::Full => 1,
            Scale::Half => 2,
            Scale::Quarter => 4,
            Scale::Eighth => 8,
        }
    }

    /// The decoded size of an image of `size`.
    pub fn apply(self, size: Size) -> Size {
        Size {
            width: size.width.div_ceil(self.divisor()),
            height: size.height.div_ceil(self.divisor()),
        }
    }
}

impl fmt::Display for Scale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scale::Full => f.write_str("1"),
            other => write!(f, "1/{}", other.divisor()),
        }
    }
}

/// A scale that is not 1, 1/2, 1/4 or 1/8.
#[derive(Debug, thiserror::Error)]
#[error("invalid scale '{0}' (expected 1, 1/2, 1/4 or 1/8)")]
pub struct InvalidScale(pub String);

impl FromStr for Scale {
    type Err = InvalidScale;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let divisor = match s.trim() {
            "1" | "1/1" => 1,
            "1/2" => 2,
            "1/4" => 4,
            "1/8" => 8,
            _ => 0,
        };
        Scale::ALL
            .into_iter()
            .find(|scale| scale.divisor() == divisor)
            .ok_or_else(|| InvalidScale(s.to_string()))
    }
}

/// Why an image gave no luma.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JpegError {
    /// The decoder's library cannot be loaded, or failed a call.
    #[error(transparent)]
    Library(#[from] LibraryError),
    /// The bytes are not a whole, undamaged JPEG image of the expected size.
    #[error("{0}")]
    Corrupt(Corruption),
    /// The caller's buffer cannot hold the luma.
    #[error("a buffer of {have} bytes cannot hold {size} luma with rows {pitch} bytes apart")]
    Buffer {
        /// The buffer's length in bytes.
        have: usize,
        /// The width and height in pixels it must hold (after scaling, when decoding).
        size: Size,
        /// Bytes from one row's start to the next's.
        pitch: usize,
    },
}

/// What is wrong with a corrupt image: plain values (the decoder's message in a fixed
/// buffer), so that a stream of damaged frames costs no allocation until one is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Corruption {
    /// The marker walk did not reach the end-of-image marker.
    Unwhole(Unwhole),
    /// An image of another size than the stream's.
    Size {
        /// The image's size from its frame header, in pixels.
        got: Size,
        /// The size the caller expected, in pixels.
        want: Size,
    },
    /// No frame header, or one with a size of 0.
    Empty {
        /// The frame header's width in pixels (0 without a frame header).
        width: i32,
        /// The frame header's height in pixels (0 without a frame header).
        height: i32,
    },
    /// More bytes than the decoder takes.
    TooLong(usize),
    /// More scans than [`MAX_SCANS`].
    Scans(u32),
    /// libjpeg-turbo's message about the damage it met.
    Decoder(DecoderMessage),
}

/// The bytes of a decoder message kept: libjpeg's messages about damaged data are 26 to
/// about 60 bytes ("Corrupt JPEG data: 12 extraneous bytes before marker 0xd9"); a longer
/// one is cut, and a small error keeps results cheap to move.
const MESSAGE_BYTES: usize = 96;

/// A decoder message, copied into a fixed buffer.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DecoderMessage {
    text: [u8; MESSAGE_BYTES],
    len: u8,
}

impl DecoderMessage {
    fn new(text: &[u8]) -> DecoderMessage {
        let mut message = DecoderMessage {
            text: [0; MESSAGE_BYTES],
            len: 0,
        };
        let len = text.len().min(message.text.len());
        message.text[..len].copy_from_slice(&text[..len]);
        message.len = len as u8;
        message
    }

    fn as_str(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.text[..usize::from(self.len)])
    }
}

impl fmt::Debug for DecoderMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Corruption::Unwhole(why) => write!(f, "{why}"),
            Corruption::Size { got, want } => {
                write!(f, "a {got} image where {want} ones are expected")
            }
            Corruption::Empty { width, height } => {
                write!(
                    f,
                    "no frame size (a frame header of {width}x{height}, or none)"
                )
            }
            Corruption::TooLong(len) => write!(f, "{len} bytes is too long"),
            Corruption::Scans(scans) => {
                write!(
                    f,
                    "{scans} scans, more than the {MAX_SCANS} an image may have"
                )
            }
            Corruption::Decoder(message) => f.write_str(message.as_str().trim_end()),
        }
    }
}

/// A TurboJPEG decompressor: one per source, used by one thread at a time.
pub struct LumaDecoder {
    library: &'static turbo::TurboJpeg,
    handle: NonNull<c_void>,
    /// Whether the handle holds Huffman tables an image defined. libjpeg keeps tables from
    /// one image to the next and fills in the standard ones only where none is held, so
    /// an image without tables after one with them would be decoded with the wrong ones:
    /// such an image gets a fresh handle.
    holds_tables: bool,
}

// SAFETY: a TurboJPEG handle holds no thread-local state; it may move between threads as
// long as one uses it at a time, which `&mut self` on every call ensures.
unsafe impl Send for LumaDecoder {}

/// The one warning that loses no pixel: stray bytes between the end of a scan's data and
/// the next marker (libjpeg's JWRN_EXTRANEOUS_DATA), which some cameras' frames always have.
const HARMLESS_WARNING: &str = "extraneous bytes before marker";

impl LumaDecoder {
    /// A decoder, loading libturbojpeg on first use.
    pub fn new() -> Result<LumaDecoder, JpegError> {
        let library = turbo::library()?;
        Ok(LumaDecoder {
            library,
            handle: new_handle(library)?,
            holds_tables: false,
        })
    }

    /// Makes sure an image that does (or does not) define Huffman tables is decoded with
    /// its own or the standard ones.
    fn prepare(&mut self, defines_tables: bool) -> Result<(), JpegError> {
        if !defines_tables && self.holds_tables {
            let fresh = new_handle(self.library)?;
            // SAFETY: the old handle is live and, replaced here, used by nothing after.
            unsafe { (self.library.destroy)(self.handle.as_ptr()) };
            self.handle = fresh;
        }
        self.holds_tables = defines_tables;
        Ok(())
    }

    /// The decoder's message for the call that just failed.
    fn message(&self) -> DecoderMessage {
        // SAFETY: the handle is live; tjGetErrorStr2 returns a NUL-terminated string it
        // owns (valid until the next call on the handle), copied out at once.
        let text = unsafe { (self.library.get_error_str2)(self.handle.as_ptr()) };
        if text.is_null() {
            return DecoderMessage::new(b"unknown error");
        }
        // SAFETY: non-null and NUL-terminated, as above.
        DecoderMessage::new(unsafe { CStr::from_ptr(text) }.to_bytes())
    }

    /// The size of the whole image `jpeg` holds, from its frame header (its markers walked
    /// to its EOI first).
    pub fn size(&mut self, jpeg: &[u8]) -> Result<Size, JpegError> {
        Ok(whole(jpeg)?.1)
    }

    /// Decodes the image in `jpeg` (from its SOI; bytes after its EOI are ignored), which
    /// must be `expect` in size, into `out` at `scale`: [`Scale::apply`] of `expect`, rows
    /// `pitch` bytes apart. Nothing outside those rows' pixels is written.
    pub fn decode(
        &mut self,
        jpeg: &[u8],
        expect: Size,
        scale: Scale,
        out: &mut [u8],
        pitch: usize,
    ) -> Result<(), JpegError> {
        let (end, size, defines_tables) = whole(jpeg)?;
        let jpeg = &jpeg[..end];
        let length = c_ulong::try_from(jpeg.len())
            .map_err(|_| JpegError::Corrupt(Corruption::TooLong(jpeg.len())))?;
        self.prepare(defines_tables)?;
        if size != expect {
            return Err(JpegError::Corrupt(Corruption::Size {
                got: size,
                want: expect,
            }));
        }
        let scaled = scale.apply(size);
        let (w, h) = (scaled.width as usize, scaled.height as usize);
        let too_small = || JpegError::Buffer {
            have: out.len(),
            size: scaled,
            pitch,
        };
        let need = pitch
            .checked_mul(h - 1)
            .and_then(|rows| rows.checked_add(w))
            .ok_or_else(too_small)?;
        if pitch < w || out.len() < need {
            return Err(too_small());
        }
        let as_int = |v: usize| c_int::try_from(v).map_err(|_| too_small());
        let (width, height, row) = (as_int(w)?, as_int(h)?, as_int(pitch)?);
        // SAFETY: the handle is live; the call reads the `length` bytes of `jpeg` and
        // writes `height` rows of `width` grey pixels `row` bytes apart from `out`'s start:
        // at most `need` bytes, which `out` holds (checked above). Asked for exactly the
        // scaled size of this image (its frame header's, checked above), TurboJPEG picks
        // that scale, so it writes no other size; were the header it reads another, it
        // would fit that into the same rows.
        let status = unsafe {
            (self.library.decompress2)(
                self.handle.as_ptr(),
                jpeg.as_ptr(),
                length,
                out.as_mut_ptr(),
                width,
                row,
                height,
                turbo::PIXEL_FORMAT_GRAY,
                turbo::DECODE_FLAGS,
            )
        };
        if status == 0 {
            return Ok(());
        }
        // SAFETY: the handle is live; tjGetErrorCode reads its last error's kind.
        let kind = unsafe { (self.library.get_error_code)(self.handle.as_ptr()) };
        let message = self.message();
        if kind == turbo::ERROR_WARNING && message.as_str().contains(HARMLESS_WARNING) {
            return Ok(());
        }
        Err(JpegError::Corrupt(Corruption::Decoder(message)))
    }
}

/// Encodes an RGB image (`size`, rows packed) as a 4:2:2 JPEG of `quality` (1-100), as a
/// UVC camera's MJPEG frame: the frames `edgesight bench --format mjpeg` decodes.
pub fn encode_rgb(rgb: &[u8], size: Size, quality: u8) -> Result<Vec<u8>, JpegError> {
    encode(rgb, size, 3, quality)
}

/// Encodes a luma image (`size`, one byte a pixel, rows packed) as a greyscale JPEG of
/// `quality` (1-100): an event's picture.
pub fn encode_luma(luma: &[u8], size: Size, quality: u8) -> Result<Vec<u8>, JpegError> {
    encode(luma, size, 1, quality)
}

/// Encodes packed pixels of `channels` bytes (1: grey, 3: RGB at 4:2:2).
fn encode(pixels: &[u8], size: Size, channels: usize, quality: u8) -> Result<Vec<u8>, JpegError> {
    let library = turbo::library()?;
    let (w, h) = (size.width as usize, size.height as usize);
    let too_small = || JpegError::Buffer {
        have: pixels.len(),
        size,
        pitch: channels * w,
    };
    if pixels.len() < channels * w * h {
        return Err(too_small());
    }
    let (format, subsampling) = match channels {
        1 => (turbo::PIXEL_FORMAT_GRAY, turbo::SUBSAMPLING_GRAY),
        _ => (turbo::PIXEL_FORMAT_RGB, turbo::SUBSAMPLING_422),
    };
    let as_int = |v: usize| c_int::try_from(v).map_err(|_| too_small());
    let (width, height, pitch) = (as_int(w)?, as_int(h)?, as_int(channels * w)?);
    // SAFETY: tjInitCompress takes nothing and returns a new handle or null.
    let handle =
        NonNull::new(unsafe { (library.init_compress)() }).ok_or(LibraryError::Failed {
            call: "tjInitCompress",
        })?;
    let (mut out, mut len): (*mut u8, c_ulong) = (std::ptr::null_mut(), 0);
    // SAFETY: the handle is live; the call reads `height` rows of `width` pixels of
    // `format` `pitch` bytes apart from `pixels`, which holds them (checked above), and allocates
    // the JPEG's buffer itself (`out` null), returning it and its length in the locals.
    let status = unsafe {
        (library.compress2)(
            handle.as_ptr(),
            pixels.as_ptr(),
            width,
            pitch,
            height,
            format,
            &mut out,
            &mut len,
            subsampling,
            c_int::from(quality.clamp(1, 100)),
            0,
        )
    };
    let encoded = if status == 0 && !out.is_null() {
        // SAFETY: on success `out` holds `len` bytes the library allocated.
        Ok(unsafe { std::slice::from_raw_parts(out, len as usize) }.to_vec())
    } else {
        Err(JpegError::from(LibraryError::Failed {
            call: "tjCompress2",
        }))
    };
    // SAFETY: `out` is null or the library's buffer, freed once; the handle is live and
    // used by nothing after.
    unsafe {
        (library.free)(out);
        (library.destroy)(handle.as_ptr());
    }
    encoded
}

/// Where the whole image in `jpeg` ends, its size (from its frame header, read by the
/// same walk: no second parse by the decoder) and whether it defines Huffman tables; an
/// image of more than [`MAX_SCANS`] scans is refused here, before anything decodes it.
fn whole(jpeg: &[u8]) -> Result<(usize, Size, bool), JpegError> {
    let mut notes = markers::Notes::default();
    let end = markers::walk_noting(jpeg, &mut notes)
        .end()
        .map_err(|why| JpegError::Corrupt(Corruption::Unwhole(why)))?;
    if notes.scans > MAX_SCANS {
        return Err(JpegError::Corrupt(Corruption::Scans(notes.scans)));
    }
    let (width, height) = notes.size.unwrap_or((0, 0));
    if width == 0 || height == 0 {
        return Err(JpegError::Corrupt(Corruption::Empty {
            width: i32::from(width),
            height: i32::from(height),
        }));
    }
    let size = Size {
        width: u32::from(width),
        height: u32::from(height),
    };
    Ok((end, size, notes.huffman_tables))
}

/// A new TurboJPEG decompressor handle.
fn new_handle(library: &turbo::TurboJpeg) -> Result<NonNull<c_void>, JpegError> {
    // SAFETY: tjInitDecompress takes nothing and returns a new handle or null.
    let handle = unsafe { (library.init_decompress)() };
    NonNull::new(handle).ok_or(JpegError::from(LibraryError::Failed {
        call: "tjInitDecompress",
    }))
}

impl Drop for LumaDecoder {
    fn drop(&mut self) {
        // SAFETY: the handle is live and used by nothing else after this.
        unsafe { (self.library.destroy)(self.handle.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_parse_print_and_round_sizes_up() {
        for scale in Scale::ALL {
            assert_eq!(scale.to_string().parse::<Scale>().unwrap(), scale);
        }
        assert_eq!("1/1".parse::<Scale>().unwrap(), Scale::Full);
        for bad in ["2", "1/3", "0", "", "half"] {
            assert!(bad.parse::<Scale>().is_err(), "{bad}");
        }
        let size = Size {
            width: 1921,
            height: 1081,
        };
        assert_eq!(Scale::Full.apply(size), size);
        assert_eq!(
            Scale::Eighth.apply(size),
            Size {
                width: 241,
                height: 136
            }
        );
    }
}
