//! JPEG images to 8-bit luma, for MJPEG cameras and JPEG files: only the Y plane is made
//! (libjpeg-turbo decodes every component's entropy-coded data, as it must, but runs the
//! inverse DCT of luma alone, with no upsampling or colour conversion), straight into the
//! caller's buffer, optionally at 1/2, 1/4 or 1/8 of the size by libjpeg's DCT scaling.
//!
//! The decoder is libjpeg-turbo's, through its TurboJPEG API ([`turbo`]), chosen by
//! measurement against zune-jpeg and OpenCV (BENCHMARKS.md, "JPEG decoders"). It is the
//! library OpenCV decodes with, so the luma equals `cv2.imdecode(buf,
//! cv2.IMREAD_GRAYSCALE)` (and `IMREAD_REDUCED_GRAYSCALE_N` scaled) byte for byte, which
//! the conformance test checks.
//!
//! An image is decoded only whole: its markers are walked to its EOI first ([`markers`]),
//! and a decoder warning other than stray bytes before a marker (which loses no pixel)
//! makes it corrupt, as do a size other than the one expected. Frames without Huffman
//! tables (the AVI1 style of UVC cameras) take the standard tables, as libjpeg-turbo does.
//! Knows nothing of OpenCL, capture or files.

mod markers;
mod turbo;

use std::ffi::{c_int, c_ulong, c_void, CStr};
use std::fmt;
use std::ptr::NonNull;
use std::str::FromStr;

pub use markers::{jpeg_end, next_image, walk, Walk};

use crate::frame::Size;

/// How much smaller than the image its decoded luma is (libjpeg's DCT scaling: each side
/// is the image's divided by [`Scale::divisor`], rounded up).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Scale {
    #[default]
    Full,
    Half,
    Quarter,
    Eighth,
}

impl Scale {
    pub const ALL: [Scale; 4] = [Scale::Full, Scale::Half, Scale::Quarter, Scale::Eighth];

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
    /// The decoder's library cannot be loaded.
    #[error("{0}")]
    Library(String),
    /// The bytes are not a whole, undamaged JPEG image of the expected size.
    #[error("{0}")]
    Corrupt(String),
    /// The caller's buffer cannot hold the luma.
    #[error("a buffer of {have} bytes cannot hold {size} luma with rows {pitch} bytes apart")]
    Buffer {
        have: usize,
        size: Size,
        pitch: usize,
    },
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
        let library = turbo::library().map_err(JpegError::Library)?;
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
    fn message(&self) -> String {
        // SAFETY: the handle is live; tjGetErrorStr2 returns a NUL-terminated string it
        // owns (valid until the next call on the handle), copied out at once.
        let text = unsafe { (self.library.get_error_str2)(self.handle.as_ptr()) };
        if text.is_null() {
            return "unknown error".into();
        }
        // SAFETY: non-null and NUL-terminated, as above.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .trim_end()
            .to_string()
    }

    /// The size of the whole image `jpeg` holds (its markers walked to its EOI first).
    pub fn size(&mut self, jpeg: &[u8]) -> Result<Size, JpegError> {
        let end = whole(jpeg)?.0;
        self.header(&jpeg[..end])
    }

    /// The image's size from its frame header; `jpeg` ends at its EOI.
    fn header(&mut self, jpeg: &[u8]) -> Result<Size, JpegError> {
        let length = c_ulong::try_from(jpeg.len())
            .map_err(|_| JpegError::Corrupt(format!("{} bytes is too long", jpeg.len())))?;
        let (mut width, mut height, mut subsampling, mut colourspace) = (0, 0, 0, 0);
        // SAFETY: the handle is live; the call reads `length` bytes of `jpeg` and writes
        // four ints into the live locals it is given.
        let status = unsafe {
            (self.library.decompress_header3)(
                self.handle.as_ptr(),
                jpeg.as_ptr(),
                length,
                &mut width,
                &mut height,
                &mut subsampling,
                &mut colourspace,
            )
        };
        if status != 0 {
            return Err(JpegError::Corrupt(self.message()));
        }
        match (u32::try_from(width), u32::try_from(height)) {
            (Ok(width @ 1..), Ok(height @ 1..)) => Ok(Size { width, height }),
            _ => Err(JpegError::Corrupt(format!("a size of {width}x{height}"))),
        }
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
        let (end, defines_tables) = whole(jpeg)?;
        let jpeg = &jpeg[..end];
        self.prepare(defines_tables)?;
        let size = self.header(jpeg)?;
        if size != expect {
            return Err(JpegError::Corrupt(format!(
                "a {size} image where {expect} ones are expected"
            )));
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
        // SAFETY: the handle is live; the call reads the `jpeg.len()` bytes of `jpeg`
        // (its length fit a c_ulong in `header`) and writes `height` rows of `width` grey
        // pixels `row` bytes apart from `out`'s start: at most `need` bytes, which `out`
        // holds (checked above). Asked for exactly the scaled size of this image (checked
        // against its header), TurboJPEG picks that scale, so it writes no other size.
        let status = unsafe {
            (self.library.decompress2)(
                self.handle.as_ptr(),
                jpeg.as_ptr(),
                jpeg.len() as c_ulong,
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
        if kind == turbo::ERROR_WARNING && message.contains(HARMLESS_WARNING) {
            return Ok(());
        }
        Err(JpegError::Corrupt(message))
    }
}

/// Where the whole image in `jpeg` ends, and whether it defines Huffman tables.
fn whole(jpeg: &[u8]) -> Result<(usize, bool), JpegError> {
    let mut tables = false;
    let end = markers::walk_noting(jpeg, &mut tables)
        .end()
        .map_err(JpegError::Corrupt)?;
    Ok((end, tables))
}

/// A new TurboJPEG decompressor handle.
fn new_handle(library: &turbo::TurboJpeg) -> Result<NonNull<c_void>, JpegError> {
    // SAFETY: tjInitDecompress takes nothing and returns a new handle or null.
    let handle = unsafe { (library.init_decompress)() };
    NonNull::new(handle)
        .ok_or_else(|| JpegError::Library(format!("{}: tjInitDecompress failed", turbo::LIBRARY)))
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
