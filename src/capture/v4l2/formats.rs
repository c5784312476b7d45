//! V4L2 pixel formats as edgesight names them: the fourcc table and its conversions,
//! the format a driver chose read back as a frame layout, the sizes and frame rates a
//! format offers (enumerated on a [`Device`]), and frame periods as VIDIOC_S_PARM takes them.

use std::mem;

use v4l::v4l2::vidioc;
use v4l::v4l_sys::*;

use super::device::{c_string, BufType, Device};
use crate::frame::{CaptureFormat, FrameLayout, PixelFormat, Size};
use crate::jpeg::Scale;

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
    Discrete(Size),
    Stepwise {
        min: Size,
        max: Size,
        step: (u32, u32),
    },
}

/// Frame rates a format and size offer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RateRange {
    Discrete(f64),
    Range { min: f64, max: f64 },
}

impl Device {
    /// The pixel formats the node offers, as (fourcc, description).
    pub(super) fn formats(&self, buf_type: BufType) -> Vec<(u32, String)> {
        let mut out = Vec::new();
        for index in 0..256 {
            // SAFETY: a plain C struct, all zero is valid.
            let mut desc: v4l2_fmtdesc = unsafe { mem::zeroed() };
            desc.index = index;
            desc.type_ = buf_type.raw();
            // SAFETY: VIDIOC_ENUM_FMT takes a struct v4l2_fmtdesc, which holds no pointers.
            if unsafe { self.ioctl(vidioc::VIDIOC_ENUM_FMT, &mut desc) }.is_err() {
                break;
            }
            out.push((desc.pixelformat, c_string(&desc.description)));
        }
        out
    }

    /// Frame sizes for a format: discrete sizes, or (min, max, step) ranges.
    pub(super) fn frame_sizes(&self, code: u32) -> Vec<SizeRange> {
        let mut out = Vec::new();
        for index in 0..256 {
            // SAFETY: a plain C struct, all zero is valid.
            let mut e: v4l2_frmsizeenum = unsafe { mem::zeroed() };
            e.index = index;
            e.pixel_format = code;
            // SAFETY: VIDIOC_ENUM_FRAMESIZES takes a struct v4l2_frmsizeenum, which holds
            // no pointers.
            if unsafe { self.ioctl(vidioc::VIDIOC_ENUM_FRAMESIZES, &mut e) }.is_err() {
                break;
            }
            // SAFETY: both union members are plain u32 fields, valid for any bytes; the
            // one read is the one `type_` says the driver filled.
            unsafe {
                if e.type_ == v4l2_frmsizetypes_V4L2_FRMSIZE_TYPE_DISCRETE {
                    let d = e.__bindgen_anon_1.discrete;
                    out.push(SizeRange::Discrete(Size {
                        width: d.width,
                        height: d.height,
                    }));
                } else {
                    let s = e.__bindgen_anon_1.stepwise;
                    out.push(SizeRange::Stepwise {
                        min: Size {
                            width: s.min_width,
                            height: s.min_height,
                        },
                        max: Size {
                            width: s.max_width,
                            height: s.max_height,
                        },
                        step: (s.step_width, s.step_height),
                    });
                    break;
                }
            }
        }
        out
    }

    /// Frame rates for a format and size: discrete rates, or a (min, max) range.
    pub(super) fn frame_rates(&self, code: u32, size: Size) -> Vec<RateRange> {
        let mut out = Vec::new();
        for index in 0..256 {
            // SAFETY: a plain C struct, all zero is valid.
            let mut e: v4l2_frmivalenum = unsafe { mem::zeroed() };
            e.index = index;
            e.pixel_format = code;
            e.width = size.width;
            e.height = size.height;
            // SAFETY: VIDIOC_ENUM_FRAMEINTERVALS takes a struct v4l2_frmivalenum, which
            // holds no pointers.
            if unsafe { self.ioctl(vidioc::VIDIOC_ENUM_FRAMEINTERVALS, &mut e) }.is_err() {
                break;
            }
            let fps = |f: v4l2_fract| {
                if f.numerator == 0 {
                    0.0
                } else {
                    f64::from(f.denominator) / f64::from(f.numerator)
                }
            };
            // SAFETY: both union members are plain u32 fractions, valid for any bytes; the
            // one read is the one `type_` says the driver filled.
            unsafe {
                if e.type_ == v4l2_frmivaltypes_V4L2_FRMIVAL_TYPE_DISCRETE {
                    out.push(RateRange::Discrete(fps(e.__bindgen_anon_1.discrete)));
                } else {
                    let s = e.__bindgen_anon_1.stepwise;
                    // The longest interval is the lowest rate.
                    out.push(RateRange::Range {
                        min: fps(s.max),
                        max: fps(s.min),
                    });
                    break;
                }
            }
        }
        out
    }
}

pub(super) fn read_format(f: &v4l2_format, buf_type: BufType) -> DriverFormat {
    // SAFETY: reads of plain integer fields (valid for any bytes) of the union member
    // `type_` names, the one the driver filled.
    unsafe {
        match buf_type {
            BufType::Capture => {
                let p = f.fmt.pix;
                DriverFormat {
                    fourcc: p.pixelformat,
                    width: p.width,
                    height: p.height,
                    bytesperline: p.bytesperline,
                    sizeimage: p.sizeimage,
                    planes: 1,
                }
            }
            BufType::CaptureMplane => {
                let p = f.fmt.pix_mp;
                let plane = p.plane_fmt[0];
                DriverFormat {
                    fourcc: p.pixelformat,
                    width: p.width,
                    height: p.height,
                    bytesperline: plane.bytesperline,
                    sizeimage: plane.sizeimage,
                    planes: p.num_planes,
                }
            }
        }
    }
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
    use crate::frame::{Cfa, Samples};

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
