//! Pixel formats and frame geometry: what a frame's bytes mean, and how many of them there are.
//!
//! Knows nothing of OpenCL; both the kernels' launchers and the references take their
//! geometry from here, so a layout is validated once, before anything is enqueued.
//!
//! One room, long as it is: the formats' names, sample layouts and row and frame sizes
//! are one table that the launchers and the references both read, and its unit tests.
//! Why a frame was lost before the pipeline saw it is in `dropped.rs`.

mod dropped;

use std::fmt;
use std::str::FromStr;

pub use dropped::DropReason;

/// The largest frame the pipeline accepts: the u32 integral image of an all-white frame of
/// this many pixels still fits (255 * 16_843_009 < 2^32).
pub const MAX_PIXELS: u64 = 16_843_009;
/// The widest row. The blocked integrals do not depend on it (a band's left prefixes, the
/// widest sums along a row, keep their squared sums in u64 and their other sums reach
/// 255 x 16 x 65535, far below u32's limit); it stays where the old row sums put it, so the
/// accepted frames stay those the tests cover, and the image decoders are held to it.
pub const MAX_WIDTH: u32 = 65_535;

/// How a raw sensor's samples are stored, mono or Bayer. Samples wider than 8 bits are
/// reduced to 8 bits, rounding half up and saturating: `min(255, (v + 2^(s-1)) >> s)` with
/// `s` the bits beyond 8 ([`Samples::shift`]), `v` the whole stored word (a word with bits
/// set above its depth saturates).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Samples {
    /// One byte a sample.
    Eight,
    /// 10 significant bits in a little-endian 16-bit word.
    Le10,
    /// 12 significant bits in a little-endian 16-bit word.
    Le12,
    /// 16 bits, little-endian.
    Le16,
    /// MIPI CSI-2 RAW10: four samples in 5 bytes, their high 8 bits each, then one byte
    /// of their low 2 bits (the first sample's in bits 0-1).
    Mipi10,
    /// MIPI CSI-2 RAW12: two samples in 3 bytes, their high 8 bits each, then one byte of
    /// their low 4 bits (the first sample's in bits 0-3).
    Mipi12,
}

impl Samples {
    /// Every sample layout, 8 bits first, in declaration order: the tables of format
    /// names and V4L2 codes are indexed by it.
    pub const ALL: [Samples; 6] = [
        Samples::Eight,
        Samples::Le10,
        Samples::Le12,
        Samples::Le16,
        Samples::Mipi10,
        Samples::Mipi12,
    ];

    /// Significant bits of a sample.
    pub fn bits(self) -> u32 {
        match self {
            Samples::Eight => 8,
            Samples::Le10 | Samples::Mipi10 => 10,
            Samples::Le12 | Samples::Mipi12 => 12,
            Samples::Le16 => 16,
        }
    }

    /// The right shift that takes a sample to 8 bits.
    pub fn shift(self) -> u32 {
        self.bits() - 8
    }

    /// Bytes a row of `width` samples takes at the least (a partial MIPI group counts
    /// whole).
    pub fn row_bytes(self, width: u32) -> u64 {
        let width = u64::from(width);
        match self {
            Samples::Eight => width,
            Samples::Le10 | Samples::Le12 | Samples::Le16 => 2 * width,
            Samples::Mipi10 => width.div_ceil(4) * 5,
            Samples::Mipi12 => width.div_ceil(2) * 3,
        }
    }
}

/// The colour filter of a Bayer sensor, named as V4L2 names it: the colours of the first
/// row's first two pixels, then the second row's. (OpenCV names a pattern from its second
/// row and second column: V4L2's RGGB is OpenCV's `BayerBG`.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cfa {
    /// First row red, green; second row green, blue (OpenCV's `BayerBG`).
    Rggb,
    /// First row green, red; second row blue, green (OpenCV's `BayerGB`).
    Grbg,
    /// First row green, blue; second row red, green (OpenCV's `BayerGR`).
    Gbrg,
    /// First row blue, green; second row green, red (OpenCV's `BayerRG`).
    Bggr,
}

impl Cfa {
    /// Every pattern, in declaration order: the tables of Bayer format names and V4L2
    /// codes are indexed by it.
    pub const ALL: [Cfa; 4] = [Cfa::Rggb, Cfa::Grbg, Cfa::Gbrg, Cfa::Bggr];

    /// Where the red pixel of each 2x2 cell lies, as (column, row) parities.
    pub fn red_at(self) -> (u32, u32) {
        match self {
            Cfa::Rggb => (0, 0),
            Cfa::Grbg => (1, 0),
            Cfa::Gbrg => (0, 1),
            Cfa::Bggr => (1, 1),
        }
    }
}

/// The camera pixel formats the luma stage reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PixelFormat {
    /// 8-bit luma only (V4L2 `GREY`).
    Grey,
    /// Packed 4:2:2, Y0 U Y1 V (V4L2 `YUYV`).
    Yuyv,
    /// Packed 4:2:2, U Y0 V Y1 (V4L2 `UYVY`).
    Uyvy,
    /// Y plane followed by an interleaved UV plane at half height (V4L2 `NV12`).
    Nv12,
    /// Y plane followed by an interleaved VU plane at half height (V4L2 `NV21`).
    Nv21,
    /// Y plane followed by an interleaved UV plane at full height (V4L2 `NV16`).
    Nv16,
    /// Y plane followed by an interleaved VU plane at full height (V4L2 `NV61`).
    Nv61,
    /// Planar 4:2:0, the Y plane then U and V at half width and height (V4L2 `YU12`, I420).
    Yu12,
    /// Planar 4:2:0, the Y plane then V and U at half width and height (V4L2 `YV12`).
    Yv12,
    /// 3 bytes per pixel, R G B (V4L2 `RGB3`).
    Rgb24,
    /// 3 bytes per pixel, B G R (V4L2 `BGR3`).
    Bgr24,
    /// 4 bytes per pixel, R G B and an ignored byte.
    Rgbx,
    /// 4 bytes per pixel, B G R and an ignored byte (V4L2 `XR24` in memory order).
    Bgrx,
    /// Mono samples wider than 8 bits (V4L2 `Y10`, `Y12`, `Y16`, `Y10P`, `Y12P`), reduced
    /// to 8 bits as [`Samples`] says. (8-bit mono is [`PixelFormat::Grey`].)
    Mono(Samples),
    /// A Bayer sensor's raw mosaic (V4L2 `RGGB`, `RG10`, `pRAA`, ...): its samples reduced
    /// to 8 bits, then to luma as OpenCV's `cvtColor(COLOR_Bayer..2GRAY)` does.
    Bayer(Cfa, Samples),
}

/// The names of the mono formats wider than 8 bits, in [`Samples::ALL`] order (8-bit mono
/// is `grey`).
const MONO_NAMES: [&str; 6] = ["grey", "y10", "y12", "y16", "y10p", "y12p"];
/// The names of the Bayer formats, by [`Cfa::ALL`] and [`Samples::ALL`].
const BAYER_NAMES: [[&str; 6]; 4] = [
    ["rggb", "rggb10", "rggb12", "rggb16", "rggb10p", "rggb12p"],
    ["grbg", "grbg10", "grbg12", "grbg16", "grbg10p", "grbg12p"],
    ["gbrg", "gbrg10", "gbrg12", "gbrg16", "gbrg10p", "gbrg12p"],
    ["bggr", "bggr10", "bggr12", "bggr16", "bggr10p", "bggr12p"],
];

/// The formats with their own name, in the order help texts list them.
const NAMED: [PixelFormat; 13] = [
    PixelFormat::Grey,
    PixelFormat::Yuyv,
    PixelFormat::Uyvy,
    PixelFormat::Nv12,
    PixelFormat::Nv21,
    PixelFormat::Nv16,
    PixelFormat::Nv61,
    PixelFormat::Yu12,
    PixelFormat::Yv12,
    PixelFormat::Rgb24,
    PixelFormat::Bgr24,
    PixelFormat::Rgbx,
    PixelFormat::Bgrx,
];

impl PixelFormat {
    /// Every format, in the order help texts list them: the 8-bit ones, the wide mono
    /// ones, then the Bayer mosaics by pattern and depth.
    pub const ALL: [PixelFormat; 42] = {
        let mut all = [PixelFormat::Grey; 42];
        let mut n = 0;
        while n < NAMED.len() {
            all[n] = NAMED[n];
            n += 1;
        }
        let mut s = 1;
        while s < Samples::ALL.len() {
            all[n] = PixelFormat::Mono(Samples::ALL[s]);
            n += 1;
            s += 1;
        }
        let mut c = 0;
        while c < Cfa::ALL.len() {
            let mut s = 0;
            while s < Samples::ALL.len() {
                all[n] = PixelFormat::Bayer(Cfa::ALL[c], Samples::ALL[s]);
                n += 1;
                s += 1;
            }
            c += 1;
        }
        all
    };

    /// The lower-case name used on the command line and in configs.
    pub fn name(self) -> &'static str {
        match self {
            PixelFormat::Grey => "grey",
            PixelFormat::Yuyv => "yuyv",
            PixelFormat::Uyvy => "uyvy",
            PixelFormat::Nv12 => "nv12",
            PixelFormat::Nv21 => "nv21",
            PixelFormat::Nv16 => "nv16",
            PixelFormat::Nv61 => "nv61",
            PixelFormat::Yu12 => "yu12",
            PixelFormat::Yv12 => "yv12",
            PixelFormat::Rgb24 => "rgb24",
            PixelFormat::Bgr24 => "bgr24",
            PixelFormat::Rgbx => "rgbx",
            PixelFormat::Bgrx => "bgrx",
            PixelFormat::Mono(samples) => MONO_NAMES[samples as usize],
            PixelFormat::Bayer(cfa, samples) => BAYER_NAMES[cfa as usize][samples as usize],
        }
    }

    /// The samples of a raw sensor format (8 bits for grey); `None` for the others.
    pub fn samples(self) -> Option<Samples> {
        match self {
            PixelFormat::Grey => Some(Samples::Eight),
            PixelFormat::Mono(samples) | PixelFormat::Bayer(_, samples) => Some(samples),
            _ => None,
        }
    }

    /// Whether the frame starts with a plane of 8-bit luma, a byte a pixel (grey and the
    /// Y plane of the semi-planar and planar YUV formats): the luma stage copies it, and
    /// packed at stride = width the pipeline reads it in place.
    pub fn luma_plane_first(self) -> bool {
        matches!(
            self,
            PixelFormat::Grey
                | PixelFormat::Nv12
                | PixelFormat::Nv21
                | PixelFormat::Nv16
                | PixelFormat::Nv61
                | PixelFormat::Yu12
                | PixelFormat::Yv12
        )
    }

    /// Bytes a row of `width` pixels of the first (or only) plane takes at the least.
    pub fn row_bytes(self, width: u32) -> u64 {
        let width64 = u64::from(width);
        match self {
            _ if self.luma_plane_first() => width64,
            PixelFormat::Yuyv | PixelFormat::Uyvy => 2 * width64,
            PixelFormat::Rgb24 | PixelFormat::Bgr24 => 3 * width64,
            PixelFormat::Rgbx | PixelFormat::Bgrx => 4 * width64,
            PixelFormat::Mono(samples) | PixelFormat::Bayer(_, samples) => samples.row_bytes(width),
            _ => width64,
        }
    }

    /// Every name, comma-separated, for help and error texts.
    pub fn names() -> String {
        PixelFormat::ALL.map(PixelFormat::name).join(", ")
    }
}

impl fmt::Display for PixelFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown pixel format name.
#[derive(Debug, thiserror::Error)]
#[error("unknown pixel format '{0}' (expected one of {names})", names = PixelFormat::names())]
pub struct UnknownFormat(pub String);

impl FromStr for PixelFormat {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        // I420 is YU12's common name.
        let lower = if lower == "i420" {
            "yu12".into()
        } else {
            lower
        };
        PixelFormat::ALL
            .into_iter()
            .find(|f| f.name() == lower)
            .ok_or_else(|| UnknownFormat(s.to_string()))
    }
}

/// What a camera or a recording delivers: frames in a [`PixelFormat`], or JPEG images
/// (MJPEG) whose luma the host decodes into grey frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CaptureFormat {
    /// Uncompressed frames in this pixel format, handed to the luma stage as delivered.
    Pixels(PixelFormat),
    /// Motion JPEG: each frame a JPEG image (V4L2 `MJPG` or `JPEG`).
    Mjpeg,
}

impl CaptureFormat {
    /// The lower-case name used on the command line and in configs: the pixel format's,
    /// or `mjpeg`.
    pub fn name(self) -> &'static str {
        match self {
            CaptureFormat::Pixels(format) => format.name(),
            CaptureFormat::Mjpeg => "mjpeg",
        }
    }

    /// The pixel format, unless the frames are JPEG images.
    pub fn pixels(self) -> Option<PixelFormat> {
        match self {
            CaptureFormat::Pixels(format) => Some(format),
            CaptureFormat::Mjpeg => None,
        }
    }
}

impl fmt::Display for CaptureFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<PixelFormat> for CaptureFormat {
    fn from(format: PixelFormat) -> Self {
        CaptureFormat::Pixels(format)
    }
}

/// An unknown capture format name.
#[derive(Debug, thiserror::Error)]
#[error("unknown format '{0}' (expected mjpeg or a pixel format: {names})", names = PixelFormat::names())]
pub struct UnknownCaptureFormat(pub String);

impl FromStr for CaptureFormat {
    type Err = UnknownCaptureFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "mjpeg" | "mjpg" | "jpeg" => Ok(CaptureFormat::Mjpeg),
            _ => s
                .parse()
                .map(CaptureFormat::Pixels)
                .map_err(|_| UnknownCaptureFormat(s.to_string())),
        }
    }
}

/// A frame size, parsed from `WxH`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    /// Frame width in pixels (at least 1 when parsed).
    pub width: u32,
    /// Frame height in pixels, i.e. rows (at least 1 when parsed).
    pub height: u32,
}

/// A size that is not `WxH` with both sides at least 1.
#[derive(Debug, thiserror::Error)]
#[error("invalid size '{0}' (expected WIDTHxHEIGHT, both at least 1, e.g. 1920x1080)")]
pub struct InvalidSize(pub String);

impl FromStr for Size {
    type Err = InvalidSize;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || InvalidSize(s.to_string());
        let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
        let width: u32 = w.trim().parse().map_err(|_| bad())?;
        let height: u32 = h.trim().parse().map_err(|_| bad())?;
        if width == 0 || height == 0 {
            return Err(bad());
        }
        Ok(Size { width, height })
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

/// Where a frame's pixels lie in its buffer: format, size and the row stride in bytes
/// (V4L2's `bytesperline`, at least [`PixelFormat::row_bytes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameLayout {
    /// How the buffer's bytes encode the pixels.
    pub format: PixelFormat,
    /// Frame width in pixels.
    pub width: u32,
    /// Frame height in pixels, i.e. rows of the first plane.
    pub height: u32,
    /// Bytes from the start of one row of the first plane to the next (V4L2's
    /// `bytesperline`); the chroma planes' strides follow from it.
    pub stride: u32,
}

/// A layout the pipeline cannot take.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LayoutError {
    /// The width or the height is 0.
    #[error("frame size {width}x{height} is empty")]
    Empty {
        /// Frame width in pixels.
        width: u32,
        /// Frame height in pixels.
        height: u32,
    },
    /// Wider than [`MAX_WIDTH`], or more than [`MAX_PIXELS`] pixels in all.
    #[error("frame size {width}x{height} is too large (at most {MAX_PIXELS} pixels and a width of at most {MAX_WIDTH})")]
    TooLarge {
        /// Frame width in pixels.
        width: u32,
        /// Frame height in pixels.
        height: u32,
    },
    /// The row stride is shorter than one row of the format at this width.
    #[error("row stride {stride} is smaller than a {format} row of width {width} ({min} bytes)")]
    StrideTooSmall {
        /// The frame's pixel format.
        format: PixelFormat,
        /// Frame width in pixels.
        width: u32,
        /// The row stride given, in bytes.
        stride: u32,
        /// The shortest stride a row of this format and width needs, in bytes.
        min: u64,
    },
    /// The whole frame, every plane included, needs more bytes than a `usize` holds on
    /// this machine.
    #[error("a {format} frame of {width}x{height} with a row stride of {stride} needs more bytes than this machine can address")]
    TooManyBytes {
        /// The frame's pixel format.
        format: PixelFormat,
        /// Frame width in pixels.
        width: u32,
        /// Frame height in pixels.
        height: u32,
        /// The row stride, in bytes.
        stride: u32,
    },
}

impl FrameLayout {
    /// A layout with rows packed tightly (stride = [`PixelFormat::row_bytes`]). A row too
    /// wide for a u32 stride gets the largest stride, which [`FrameLayout::validate`]
    /// refuses.
    pub fn packed(format: PixelFormat, width: u32, height: u32) -> Self {
        FrameLayout {
            format,
            width,
            height,
            stride: u32::try_from(format.row_bytes(width)).unwrap_or(u32::MAX),
        }
    }

    /// Checks that the pipeline can process this layout.
    pub fn validate(&self) -> Result<(), LayoutError> {
        let (width, height) = (self.width, self.height);
        if width == 0 || height == 0 {
            return Err(LayoutError::Empty { width, height });
        }
        if width > MAX_WIDTH || u64::from(width) * u64::from(height) > MAX_PIXELS {
            return Err(LayoutError::TooLarge { width, height });
        }
        let min = self.min_stride();
        if u64::from(self.stride) < min {
            return Err(LayoutError::StrideTooSmall {
                format: self.format,
                width,
                stride: self.stride,
                min,
            });
        }
        if self.checked_frame_bytes().is_none() {
            return Err(LayoutError::TooManyBytes {
                format: self.format,
                width,
                height,
                stride: self.stride,
            });
        }
        Ok(())
    }

    fn min_stride(&self) -> u64 {
        self.format.row_bytes(self.width)
    }

    /// Pixels in the frame (saturated at `usize::MAX`, which only a layout
    /// [`FrameLayout::validate`] refuses can reach).
    pub fn pixels(&self) -> usize {
        (self.width as usize).saturating_mul(self.height as usize)
    }

    /// Bytes a buffer holding this frame needs: every plane, the last row of a plane
    /// counted in full, stride included, as V4L2 sizes its buffers. The chroma of NV12 and
    /// NV21 is `ceil(height / 2)` rows of the stride, of NV16 and NV61 `height` rows; YU12
    /// and YV12 have two chroma planes of `ceil(height / 2)` rows of `ceil(stride / 2)`.
    ///
    /// Saturates at `usize::MAX` where the true figure does not fit (a 32-bit machine, or a
    /// layout [`FrameLayout::validate`] refuses), so a size that overflowed can never pass
    /// for a small one; [`FrameLayout::checked_frame_bytes`] says when that happened.
    pub fn frame_bytes(&self) -> usize {
        self.checked_frame_bytes().unwrap_or(usize::MAX)
    }

    /// [`FrameLayout::frame_bytes`], or `None` where it does not fit in a `usize`.
    pub(crate) fn checked_frame_bytes(&self) -> Option<usize> {
        let stride = usize::try_from(self.stride).ok()?;
        let height = usize::try_from(self.height).ok()?;
        let half_height = height.div_ceil(2);
        let luma = stride.checked_mul(height)?;
        let chroma = match self.format {
            PixelFormat::Nv12 | PixelFormat::Nv21 => stride.checked_mul(half_height)?,
            PixelFormat::Nv16 | PixelFormat::Nv61 => luma,
            PixelFormat::Yu12 | PixelFormat::Yv12 => stride
                .div_ceil(2)
                .checked_mul(half_height)?
                .checked_mul(2)?,
            _ => 0,
        };
        luma.checked_add(chroma)
    }
}

/// OpenCV's 8-bit RGB to gray: 15-bit fixed-point weights, rounded half up. The one
/// definition that the reference and the test pattern's colours both take.
pub fn rgb_to_luma(r: u8, g: u8, b: u8) -> u8 {
    ((9798 * u32::from(r) + 19235 * u32::from(g) + 3735 * u32::from(b) + 16384) >> 15) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luma_weights_are_opencvs() {
        assert_eq!(rgb_to_luma(255, 255, 255), 255);
        assert_eq!(rgb_to_luma(0, 0, 0), 0);
        // (9798 * 255 + 16384) >> 15 = 76, (19235 * 255 + 16384) >> 15 = 150
        assert_eq!(rgb_to_luma(255, 0, 0), 76);
        assert_eq!(rgb_to_luma(0, 255, 0), 150);
        assert_eq!(rgb_to_luma(0, 0, 255), 29);
    }

    #[test]
    fn sizes_parse_and_reject() {
        assert_eq!(
            "1920x1080".parse::<Size>().unwrap(),
            Size {
                width: 1920,
                height: 1080
            }
        );
        assert_eq!(
            "3X2".parse::<Size>().unwrap(),
            Size {
                width: 3,
                height: 2
            }
        );
        for bad in ["", "0x5", "5x0", "5", "ax5", "5x-1", "1920*1080"] {
            assert!(bad.parse::<Size>().is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn formats_round_trip_by_name() {
        for f in PixelFormat::ALL {
            assert_eq!(f.name().parse::<PixelFormat>().unwrap(), f);
        }
        assert_eq!("NV12".parse::<PixelFormat>().unwrap(), PixelFormat::Nv12);
        assert_eq!("I420".parse::<PixelFormat>().unwrap(), PixelFormat::Yu12);
        assert_eq!(
            "gbrg10p".parse::<PixelFormat>().unwrap(),
            PixelFormat::Bayer(Cfa::Gbrg, Samples::Mipi10)
        );
        assert_eq!(
            "y16".parse::<PixelFormat>().unwrap(),
            PixelFormat::Mono(Samples::Le16)
        );
        // Every format once, every name once; 8-bit mono only as grey.
        let mut names: Vec<&str> = PixelFormat::ALL.iter().map(|f| f.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PixelFormat::ALL.len());
        assert!(!PixelFormat::ALL.contains(&PixelFormat::Mono(Samples::Eight)));
        // A compressed format is not a pixel format, but a capture format.
        assert!("mjpeg".parse::<PixelFormat>().is_err());
        for name in ["mjpeg", "MJPG", "jpeg"] {
            assert_eq!(name.parse::<CaptureFormat>().unwrap(), CaptureFormat::Mjpeg);
        }
        assert_eq!(
            "rggb12".parse::<CaptureFormat>().unwrap(),
            CaptureFormat::Pixels(PixelFormat::Bayer(Cfa::Rggb, Samples::Le12))
        );
        let unknown = "h264".parse::<CaptureFormat>().unwrap_err().to_string();
        assert!(
            unknown
                .starts_with("unknown format 'h264' (expected mjpeg or a pixel format: grey, yuyv"),
            "{unknown}"
        );
    }

    #[test]
    fn rows_hold_their_samples_and_partial_mipi_groups_count_whole() {
        let row = |name: &str, width| name.parse::<PixelFormat>().unwrap().row_bytes(width);
        assert_eq!(row("rggb", 7), 7);
        assert_eq!(row("rggb10", 7), 14);
        assert_eq!(row("y12", 7), 14);
        // RAW10: 4 samples in 5 bytes; RAW12: 2 in 3.
        assert_eq!(row("bggr10p", 8), 10);
        assert_eq!(row("bggr10p", 9), 15);
        assert_eq!(row("y10p", 1), 5);
        assert_eq!(row("grbg12p", 4), 6);
        assert_eq!(row("y12p", 5), 9);
        assert_eq!(row("yu12", 7), 7);
        assert_eq!(row("yuyv", 7), 14);
        assert_eq!(row("rgbx", 7), 28);
    }

    #[test]
    fn frame_bytes_cover_every_plane() {
        let l = FrameLayout::packed(PixelFormat::Nv12, 6, 5);
        assert_eq!(l.frame_bytes(), 6 * 5 + 6 * 3);
        let l = FrameLayout::packed(PixelFormat::Nv21, 6, 5);
        assert_eq!(l.frame_bytes(), 6 * 5 + 6 * 3);
        let l = FrameLayout::packed(PixelFormat::Nv61, 6, 5);
        assert_eq!(l.frame_bytes(), 2 * 6 * 5);
        // Planar 4:2:0: two planes of ceil(stride / 2) x ceil(height / 2).
        let l = FrameLayout::packed(PixelFormat::Yu12, 7, 5);
        assert_eq!(l.frame_bytes(), 7 * 5 + 2 * 4 * 3);
        let l = FrameLayout {
            stride: 8,
            ..FrameLayout::packed(PixelFormat::Yv12, 6, 4)
        };
        assert_eq!(l.frame_bytes(), 8 * 4 + 2 * 4 * 2);
        let l = FrameLayout::packed(PixelFormat::Bayer(Cfa::Rggb, Samples::Mipi12), 5, 2);
        assert_eq!(l.frame_bytes(), 9 * 2);
        let l = FrameLayout {
            stride: 32,
            ..FrameLayout::packed(PixelFormat::Yuyv, 10, 3)
        };
        assert_eq!(l.frame_bytes(), 96);
    }

    /// Issue item 11: `--format rgbx --size 4294967295x1` named a byte count of a stride
    /// that had saturated at u32::MAX.
    #[test]
    fn r11_frame_sizes_never_wrap_or_pass_for_small() {
        let huge = FrameLayout::packed(PixelFormat::Rgbx, u32::MAX, 1);
        assert_eq!(
            huge.validate(),
            Err(LayoutError::TooLarge {
                width: u32::MAX,
                height: 1
            })
        );
        // u32::MAX rows of stride u32::MAX plus half as many again: more than 2^64 bytes.
        let nv12 = FrameLayout {
            format: PixelFormat::Nv12,
            width: 1,
            height: u32::MAX,
            stride: u32::MAX,
        };
        assert_eq!(nv12.checked_frame_bytes(), None);
        assert_eq!(nv12.frame_bytes(), usize::MAX);
        let rgbx = FrameLayout {
            format: PixelFormat::Rgbx,
            width: 1,
            height: u32::MAX,
            stride: u32::MAX,
        };
        let true_bytes = u64::from(u32::MAX) * u64::from(u32::MAX);
        assert_eq!(rgbx.checked_frame_bytes(), usize::try_from(true_bytes).ok());
        assert_eq!(
            FrameLayout::packed(PixelFormat::Nv12, 7, 5).checked_frame_bytes(),
            Some(7 * 5 + 7 * 3)
        );
    }

    #[test]
    fn layouts_are_validated() {
        assert!(FrameLayout::packed(PixelFormat::Rgb24, 17, 3)
            .validate()
            .is_ok());
        assert_eq!(
            FrameLayout::packed(PixelFormat::Grey, 0, 3).validate(),
            Err(LayoutError::Empty {
                width: 0,
                height: 3
            })
        );
        let narrow = FrameLayout {
            stride: 50,
            ..FrameLayout::packed(PixelFormat::Rgb24, 17, 3)
        };
        assert!(matches!(
            narrow.validate(),
            Err(LayoutError::StrideTooSmall { min: 51, .. })
        ));
        assert!(FrameLayout::packed(PixelFormat::Grey, 4100, 4110)
            .validate()
            .is_err());
        assert!(FrameLayout::packed(PixelFormat::Grey, 4096, 4112)
            .validate()
            .is_ok());
    }
}
