//! Pixel formats and frame geometry: what a frame's bytes mean, and how many of them there are.
//!
//! Knows nothing of OpenCL; both the kernels' launchers and the references take their
//! geometry from here, so a layout is validated once, before anything is enqueued.

use std::fmt;
use std::str::FromStr;

/// The largest frame the pipeline accepts: the u32 integral image of an all-white frame of
/// this many pixels still fits (255 * 16_843_009 < 2^32).
pub(crate) const MAX_PIXELS: u64 = 16_843_009;
/// The widest row. The blocked integrals do not depend on it (a band's left prefixes, the
/// widest sums along a row, keep their squared sums in u64 and their other sums reach
/// 255 x 16 x 65535, far below u32's limit); it stays where the old row sums put it, so the
/// accepted frames stay those the tests cover, and the image decoders are held to it.
pub(crate) const MAX_WIDTH: u32 = 65_535;

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
    /// 3 bytes per pixel, R G B (V4L2 `RGB3`).
    Rgb24,
    /// 3 bytes per pixel, B G R (V4L2 `BGR3`).
    Bgr24,
    /// 4 bytes per pixel, R G B and an ignored byte.
    Rgbx,
    /// 4 bytes per pixel, B G R and an ignored byte (V4L2 `XR24` in memory order).
    Bgrx,
}

impl PixelFormat {
    /// Every format, in the order help texts list them.
    pub const ALL: [PixelFormat; 8] = [
        PixelFormat::Grey,
        PixelFormat::Yuyv,
        PixelFormat::Uyvy,
        PixelFormat::Nv12,
        PixelFormat::Rgb24,
        PixelFormat::Bgr24,
        PixelFormat::Rgbx,
        PixelFormat::Bgrx,
    ];

    /// The lower-case name used on the command line and in configs.
    pub fn name(self) -> &'static str {
        match self {
            PixelFormat::Grey => "grey",
            PixelFormat::Yuyv => "yuyv",
            PixelFormat::Uyvy => "uyvy",
            PixelFormat::Nv12 => "nv12",
            PixelFormat::Rgb24 => "rgb24",
            PixelFormat::Bgr24 => "bgr24",
            PixelFormat::Rgbx => "rgbx",
            PixelFormat::Bgrx => "bgrx",
        }
    }

    /// Bytes per pixel of the first (or only) plane.
    pub fn bytes_per_pixel(self) -> u32 {
        match self {
            PixelFormat::Grey | PixelFormat::Nv12 => 1,
            PixelFormat::Yuyv | PixelFormat::Uyvy => 2,
            PixelFormat::Rgb24 | PixelFormat::Bgr24 => 3,
            PixelFormat::Rgbx | PixelFormat::Bgrx => 4,
        }
    }
}

impl fmt::Display for PixelFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown pixel format name.
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown pixel format '{0}' (expected one of grey, yuyv, uyvy, nv12, rgb24, bgr24, rgbx, bgrx)"
)]
pub struct UnknownFormat(pub String);

impl FromStr for PixelFormat {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        PixelFormat::ALL
            .into_iter()
            .find(|f| f.name() == lower)
            .ok_or_else(|| UnknownFormat(s.to_string()))
    }
}

/// A frame size, parsed from `WxH`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    pub width: u32,
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
/// (V4L2's `bytesperline`, at least `width * bytes_per_pixel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameLayout {
    pub format: PixelFormat,
    pub width: u32,
    pub height: u32,
    pub stride: u32,
}

/// A layout the pipeline cannot take.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LayoutError {
    #[error("frame size {width}x{height} is empty")]
    Empty { width: u32, height: u32 },
    #[error("frame size {width}x{height} is too large (at most {MAX_PIXELS} pixels and a width of at most {MAX_WIDTH})")]
    TooLarge { width: u32, height: u32 },
    #[error("row stride {stride} is smaller than a {format} row of width {width} ({min} bytes)")]
    StrideTooSmall {
        format: PixelFormat,
        width: u32,
        stride: u32,
        min: u64,
    },
    #[error("a {format} frame of {width}x{height} with a row stride of {stride} needs more bytes than this machine can address")]
    TooManyBytes {
        format: PixelFormat,
        width: u32,
        height: u32,
        stride: u32,
    },
}

impl FrameLayout {
    /// A layout with rows packed tightly (stride = width * bytes per pixel). A row too wide
    /// for a u32 stride gets the largest stride, which [`FrameLayout::validate`] refuses.
    pub fn packed(format: PixelFormat, width: u32, height: u32) -> Self {
        FrameLayout {
            format,
            width,
            height,
            stride: width.saturating_mul(format.bytes_per_pixel()),
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
        u64::from(self.width) * u64::from(self.format.bytes_per_pixel())
    }

    /// Pixels in the frame (saturated at `usize::MAX`, which only a layout
    /// [`FrameLayout::validate`] refuses can reach).
    pub fn pixels(&self) -> usize {
        (self.width as usize).saturating_mul(self.height as usize)
    }

    /// Bytes a buffer holding this frame needs (both planes for NV12; the last row of a
    /// plane counts in full, stride included, as V4L2 sizes its buffers).
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
        let rows = match self.format {
            PixelFormat::Nv12 => usize::try_from(self.height)
                .ok()?
                .checked_add(self.height.div_ceil(2) as usize)?,
            _ => usize::try_from(self.height).ok()?,
        };
        stride.checked_mul(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!("mjpeg".parse::<PixelFormat>().is_err());
    }

    #[test]
    fn frame_bytes_cover_both_nv12_planes() {
        let l = FrameLayout::packed(PixelFormat::Nv12, 6, 5);
        assert_eq!(l.frame_bytes(), 6 * 5 + 6 * 3);
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
