//! Which of a camera's formats to stream when the config names none: the rule docs/src/cameras.md
//! states, as a function of what the camera offers, so it can be tested without one.
//!
//! 1. Only formats edgesight reads count; with a scale other than 1, only JPEG ones (a
//!    scale applies to JPEG frames).
//! 2. Their order of preference: the camera's current format, then the raw ones in the
//!    driver's order, then MJPEG (a raw frame costs no decoding, and is what the camera
//!    was set to).
//! 3. With a size or a rate asked for, the first of them that offers that size at that
//!    rate wins; then the first that cannot say (a driver that lists no sizes); then the
//!    first of all (the driver will pick the nearest size, which is logged). So a UVC
//!    webcam whose YUYV stops at 5 fps at 1080p streams MJPEG when 1080p at 30 fps is
//!    asked for, and keeps YUYV at 640x480.

use super::formats::{capture_format, fourcc_name};
use edgesight_frame::frame::CaptureFormat;

/// One format a camera offers, and whether it offers the size and rate asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Offer {
    pub code: u32,
    /// `Some(true)` if it offers the asked size at the asked rate (or nothing was asked),
    /// `Some(false)` if it does not, `None` if the driver cannot say.
    pub fits: Option<bool>,
}

/// A camera that offers no format edgesight can read (or, for a scale, no JPEG one).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "offers {}; it offers {}",
    if *jpeg_only {
        "no JPEG format (MJPG or JPEG), which a scale needs"
    } else {
        "none of the formats edgesight reads"
    },
    offered.join(", ")
)]
pub(super) struct NoReadableFormat {
    /// Only JPEG would do: the source asks for a scale.
    pub jpeg_only: bool,
    /// The fourccs the camera offers.
    pub offered: Vec<String>,
}

/// The code to stream, and why it was chosen (for the log), or why none can be.
pub(super) fn choose(
    offers: &[Offer],
    current: u32,
    jpeg_only: bool,
) -> Result<(u32, &'static str), NoReadableFormat> {
    let readable = |o: &&Offer| match capture_format(o.code) {
        Some(CaptureFormat::Mjpeg) => true,
        Some(CaptureFormat::Pixels(_)) => !jpeg_only,
        None => false,
    };
    let is_jpeg = |o: &&Offer| capture_format(o.code) == Some(CaptureFormat::Mjpeg);
    let ranked: Vec<&Offer> = offers
        .iter()
        .filter(|o| o.code == current)
        .chain(offers.iter().filter(|o| o.code != current && !is_jpeg(o)))
        .chain(offers.iter().filter(|o| o.code != current && is_jpeg(o)))
        .filter(readable)
        .collect();
    let first = |fits: Option<bool>| ranked.iter().find(|o| o.fits == fits).map(|o| o.code);
    if let Some(code) = first(Some(true)) {
        let why = if code == current {
            "the camera's current format"
        } else {
            "the first that offers the size and rate asked for"
        };
        return Ok((code, why));
    }
    if let Some(code) = first(None) {
        return Ok((code, "the driver lists no sizes or rates to choose by"));
    }
    if let Some(o) = ranked.first() {
        return Ok((
            o.code,
            "none offers the size and rate asked for; the driver picks the nearest",
        ));
    }
    Err(NoReadableFormat {
        jpeg_only,
        offered: offers.iter().map(|o| fourcc_name(o.code)).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::formats::fourcc;
    use super::*;

    fn offer(code: &[u8; 4], fits: Option<bool>) -> Offer {
        Offer {
            code: fourcc(code),
            fits,
        }
    }

    #[test]
    fn a_webcam_streams_mjpeg_where_its_yuyv_is_too_slow() {
        // A UVC webcam set to YUYV: 1080p at 30 fps only as MJPEG.
        let asked_1080p30 = [offer(b"YUYV", Some(false)), offer(b"MJPG", Some(true))];
        assert_eq!(
            choose(&asked_1080p30, fourcc(b"YUYV"), false).unwrap().0,
            fourcc(b"MJPG")
        );
        // At 640x480 both offer 30 fps: the current YUYV stays.
        let asked_vga = [offer(b"YUYV", Some(true)), offer(b"MJPG", Some(true))];
        assert_eq!(
            choose(&asked_vga, fourcc(b"YUYV"), false),
            Ok((fourcc(b"YUYV"), "the camera's current format"))
        );
        // A scale needs JPEG frames.
        assert_eq!(
            choose(&asked_vga, fourcc(b"YUYV"), true).unwrap().0,
            fourcc(b"MJPG")
        );
    }

    #[test]
    fn raw_formats_come_before_mjpeg_and_unknown_formats_never_count() {
        // Current H264 (not read), then MJPEG listed before NV12: NV12 wins.
        let offers = [
            offer(b"H264", Some(true)),
            offer(b"MJPG", Some(true)),
            offer(b"NV12", Some(true)),
        ];
        assert_eq!(
            choose(&offers, fourcc(b"H264"), false).unwrap().0,
            fourcc(b"NV12")
        );
        // A driver that cannot say beats one that says no; anything beats nothing.
        let offers = [offer(b"GREY", Some(false)), offer(b"MJPG", None)];
        assert_eq!(
            choose(&offers, fourcc(b"GREY"), false).unwrap().0,
            fourcc(b"MJPG")
        );
        let offers = [offer(b"GREY", Some(false)), offer(b"RGGB", Some(false))];
        assert_eq!(
            choose(&offers, fourcc(b"RGGB"), false).unwrap().0,
            fourcc(b"RGGB")
        );
        let refusal = |offers: &[Offer], jpeg_only| {
            let e = choose(offers, 0, jpeg_only).unwrap_err();
            (e.to_string(), e)
        };
        assert_eq!(
            refusal(&[offer(b"H264", Some(true)), offer(b"HEVC", None)], false),
            (
                "offers none of the formats edgesight reads; it offers H264, HEVC".into(),
                NoReadableFormat {
                    jpeg_only: false,
                    offered: vec!["H264".into(), "HEVC".into()]
                }
            )
        );
        assert_eq!(
            refusal(&[offer(b"YUYV", Some(true))], true),
            (
                "offers no JPEG format (MJPG or JPEG), which a scale needs; it offers YUYV".into(),
                NoReadableFormat {
                    jpeg_only: true,
                    offered: vec!["YUYV".into()]
                }
            )
        );
    }
}
