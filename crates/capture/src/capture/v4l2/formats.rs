//! V4L2 pixel formats as edgesight names them: the fourcc table and its conversions,
//! the format a driver chose as a frame layout, the sizes and frame rates a format offers
//! (enumerated by `device.rs`), and frame periods as VIDIOC_S_PARM takes them. Plain
//! values: no ioctl is issued here.

use crate::jpeg::Scale;
use edgesight_frame::frame::{CaptureFormat, FrameLayout, PixelFormat, Size};

/// A four-character code as V4L2 packs it (first character in the low byte).
pub(super) const fn fourcc(code: &[u8; 4]) -> u32 {
    u32::from_le_bytes(*code)
}

/// V4L2's codes of the mono formats wider than 8 bits, in [`Samples::ALL`] order (8-bit
/// mono is `GREY`). `Y12P` is newer than some kernels' headers; the code is the same.
const MONO_FOURCCS: [&[u8; 4]; 6] = [b"GREY", b"Y10 ", b"Y12 ", b"Y16 ", b"Y10P", b"Y12P"];
/// V4L2's codes of the Bayer formats, by [`Cfa::ALL`] and [`Samples::ALL`].
const BAYER_FOURCCS: [[&[u8; 4]; 6]; 4] = [
    [b"RGGB", b"RG10", b"RG12", b"RG16", b"pRAA", b"pRCC"],
    [b"GRBG", b"BA10", b"BA12", b"GR16", b"pgAA", b"pgCC"],
    [b"GBRG", b"GB10", b"GB12", b"GB16", b"pGAA", b"pGCC"],
    [b"BA81", b"BG10", b"BG12", b"BYR2", b"pBAA", b"pBCC"],
];

/// The V4L2 pixel format of each [`PixelFormat`] (memory byte order as the format names it).
pub(super) fn v4l2_fourcc(format: PixelFormat) -> u32 {
    match format {
        PixelFormat::Grey => fourcc(b"GREY"),
        PixelFormat::Yuyv => fourcc(b"YUYV"),
        PixelFormat::Uyvy => fourcc(b"UYVY"),
        PixelFormat::Nv12 => fourcc(b"NV12"),
        PixelFormat::Nv21 => fourcc(b"NV21"),
        PixelFormat::Nv16 => fourcc(b"NV16"),
        PixelFormat::Nv61 => fourcc(b"NV61"),
        PixelFormat::Yu12 => fourcc(b"YU12"),
        PixelFormat::Yv12 => fourcc(b"YV12"),
        PixelFormat::Rgb24 => fourcc(b"RGB3"),
        PixelFormat::Bgr24 => fourcc(b"BGR3"),
        // V4L2_PIX_FMT_RGBX32: bytes R, G, B, X.
        PixelFormat::Rgbx => fourcc(b"XB24"),
        // V4L2_PIX_FMT_XBGR32: bytes B, G, R, X.
        PixelFormat::Bgrx => fourcc(b"XR24"),
        PixelFormat::Mono(samples) => fourcc(MONO_FOURCCS[samples as usize]),
        PixelFormat::Bayer(cfa, samples) => fourcc(BAYER_FOURCCS[cfa as usize][samples as usize]),
    }
}

/// The [`PixelFormat`] of a V4L2 pixel format, if the pipeline reads it.
pub(super) fn pixel_format(code: u32) -> Option<PixelFormat> {
    PixelFormat::ALL
        .into_iter()
        .find(|&f| v4l2_fourcc(f) == code)
}

/// V4L2's codes for JPEG frames: `MJPG` (UVC cameras, v4l2loopback) and `JPEG` (some
/// other drivers), in the order they are asked for.
pub(super) const JPEG_FOURCCS: [u32; 2] = [fourcc(b"MJPG"), fourcc(b"JPEG")];

/// What edgesight reads a V4L2 format as, if it reads it.
pub(super) fn capture_format(code: u32) -> Option<CaptureFormat> {
    if JPEG_FOURCCS.contains(&code) {
        return Some(CaptureFormat::Mjpeg);
    }
    pixel_format(code).map(CaptureFormat::Pixels)
}

/// A fourcc as text ("YUYV"), with unprintable bytes as '?'.
pub(super) fn fourcc_name(code: u32) -> String {
    code.to_le_bytes()
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '?'
            }
        })
        .collect::<String>()
        .trim_end()
        .to_string()
}

/// The format the driver chose, read back after VIDIOC_S_FMT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DriverFormat {
    pub fourcc: u32,
    pub width: u32,
    pub height: u32,
    pub bytesperline: u32,
    /// Bytes a buffer must hold.
    pub sizeimage: u32,
    pub planes: u8,
}

impl DriverFormat {
    /// The frames' layout in the slots, if the pipeline can read this format: the
    /// driver's, or for JPEG frames the grey luma they decode to at `scale`.
    pub(super) fn layout(&self, scale: Scale) -> Option<FrameLayout> {
        let format = match capture_format(self.fourcc)? {
            CaptureFormat::Mjpeg => {
                let size = scale.apply(Size {
                    width: self.width,
                    height: self.height,
                });
                let layout = FrameLayout::packed(PixelFormat::Grey, size.width, size.height);
                return layout.validate().ok().map(|()| layout);
            }
            CaptureFormat::Pixels(format) => format,
        };
        let layout = FrameLayout {
            format,
            width: self.width,
            height: self.height,
            stride: self
                .bytesperline
                .max(u32::try_from(format.row_bytes(self.width)).unwrap_or(u32::MAX)),
        };
        layout.validate().ok().map(|()| layout)
    }
}

/// Sizes a format offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeRange {
    /// One frame size offered, in pixels.
    Discrete(Size),
    /// Any size from `min` to `max` in steps (a continuous range has steps of 1).
    Stepwise {
        /// The smallest frame size, in pixels.
        min: Size,
        /// The largest frame size, in pixels.
        max: Size,
        /// The steps between sizes offered: (width, height) in pixels.
        step: (u32, u32),
    },
}

/// Frame rates a format and size offer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RateRange {
    /// One rate offered, in frames per second.
    Discrete(f64),
    /// Any rate from `min` to `max` (a stepwise or continuous range of frame intervals).
    Range {
        /// The lowest rate (the longest frame interval), in frames per second.
        min: f64,
        /// The highest rate (the shortest frame interval), in frames per second.
        max: f64,
    },
}

/// The frame period of `fps` as a reduced fraction of seconds `(numerator, denominator)`,
/// as VIDIOC_S_PARM takes it (exact for rates with up to three decimals).
pub(super) fn period_fraction(fps: f64) -> (u32, u32) {
    let scaled = (fps * 1000.0).round().clamp(1.0, 4_000_000.0) as u32;
    let (mut n, mut d) = (1000u32, scaled);
    let (mut a, mut b) = (n, d);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    if a > 1 {
        n /= a;
        d /= a;
    }
    (n, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgesight_frame::frame::{Cfa, Samples};

    #[test]
    fn fourccs_match_v4l2() {
        assert_eq!(fourcc(b"YUYV"), 0x5659_5559);
        assert_eq!(fourcc_name(v4l2_fourcc(PixelFormat::Rgb24)), "RGB3");
        for f in PixelFormat::ALL {
            assert_eq!(pixel_format(v4l2_fourcc(f)), Some(f));
        }
        assert_eq!(pixel_format(fourcc(b"MJPG")), None);
        for code in [b"MJPG", b"JPEG"] {
            assert_eq!(capture_format(fourcc(code)), Some(CaptureFormat::Mjpeg));
        }
        assert_eq!(capture_format(fourcc(b"H264")), None);
        assert_eq!(
            pixel_format(fourcc(b"BA81")),
            Some(PixelFormat::Bayer(Cfa::Bggr, Samples::Eight))
        );
        assert_eq!(
            pixel_format(fourcc(b"pgAA")),
            Some(PixelFormat::Bayer(Cfa::Grbg, Samples::Mipi10))
        );
        assert_eq!(
            pixel_format(fourcc(b"Y10 ")),
            Some(PixelFormat::Mono(Samples::Le10))
        );
        // Every format has a code of its own.
        let mut codes: Vec<u32> = PixelFormat::ALL.iter().map(|&f| v4l2_fourcc(f)).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), PixelFormat::ALL.len());
    }

    #[test]
    fn frame_periods_are_exact_fractions() {
        assert_eq!(period_fraction(30.0), (1, 30));
        assert_eq!(period_fraction(25.0), (1, 25));
        assert_eq!(period_fraction(7.5), (2, 15));
        assert_eq!(period_fraction(29.97), (100, 2997));
        assert_eq!(period_fraction(0.5), (2, 1));
    }
}
