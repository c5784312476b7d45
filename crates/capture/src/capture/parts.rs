//! One builder for every source: [`SourceParts::build`] turns a kind and its parts (a
//! device or path, size, format, rate, I/O mode) into a [`SourceSpec`], with the checks
//! and defaults that the `--source` parser, `capture`'s flags and the config share.

use std::path::PathBuf;

use super::spec::{check_fps, check_frame_size, SourceSpec, DEFAULT_FPS, DEFAULT_PATTERN_SIZE};
use super::IoMode;
use crate::jpeg::Scale;
use edgesight_frame::frame::{CaptureFormat, PixelFormat, Size};

/// The kinds of source, as a spec's prefix and the config's `kind` name them.
#[derive(Clone, Copy, Debug, serde::Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// The built-in moving test pattern (`pattern:`).
    Pattern,
    /// A V4L2 camera (`v4l2:DEVICE`, or a device path alone).
    V4l2,
    /// A recording played back: a raw file, a directory of images or an MJPEG file (`replay:`).
    Replay,
}

impl SourceKind {
    /// The kind's name as a spec's prefix and the config's `kind` spell it ("pattern", ...).
    pub fn name(self) -> &'static str {
        match self {
            SourceKind::Pattern => "pattern",
            SourceKind::V4l2 => "v4l2",
            SourceKind::Replay => "replay",
        }
    }
}

/// A source's parts as the command line or a config gives them, each already read as its
/// type but not yet checked against the others: [`SourceParts::build`] makes the one
/// [`SourceSpec`] of them, with the checks and defaults that `--source`, `capture` and the
/// config share.
#[derive(Clone, Debug, Default)]
pub struct SourceParts {
    /// v4l2: the video device node.
    pub device: Option<PathBuf>,
    /// replay: a raw file (with size and format), a directory of images or a file of JPEG
    /// images back to back (an MJPEG stream).
    pub path: Option<PathBuf>,
    /// The frame format: what a pattern renders, a camera is asked for, or a raw file holds
    /// (mjpeg for JPEG frames).
    pub format: Option<CaptureFormat>,
    /// Frame width and height in pixels: a pattern's, a raw file's, or asked of a camera.
    pub size: Option<Size>,
    /// Frame rate in frames per second, held to `MIN_FPS..=MAX_FPS` by the build.
    pub fps: Option<f64>,
    /// v4l2: the I/O mode to pin; `None` tries dmabuf, userptr and mmap in turn.
    pub io: Option<IoMode>,
    /// JPEG frames decoded at this fraction of their size.
    pub scale: Option<Scale>,
}

/// One of a source's parts, as its config key names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourcePart {
    /// `device`: a camera's video device node.
    Device,
    /// `path`: a recording's raw file, image directory or MJPEG file.
    Path,
    /// `format`: the pixel format, or mjpeg for JPEG frames.
    Format,
    /// `size`: the frame width and height in pixels.
    Size,
    /// `fps`: the frame rate in frames per second.
    Fps,
    /// `io`: a camera's pinned I/O mode.
    Io,
    /// `scale`: the fraction of their size JPEG frames are decoded at.
    Scale,
}

impl SourcePart {
    /// The part's key in a source's config ("device", "fps", ...).
    pub fn key(self) -> &'static str {
        match self {
            SourcePart::Device => "device",
            SourcePart::Path => "path",
            SourcePart::Format => "format",
            SourcePart::Size => "size",
            SourcePart::Fps => "fps",
            SourcePart::Io => "io",
            SourcePart::Scale => "scale",
        }
    }
}

/// Why a source's parts make no source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadParts {
    /// The part at fault; `None` when it is how the parts go together.
    pub part: Option<SourcePart>,
    /// The part is absent (a config places this at the source, not at the part).
    pub missing: bool,
    /// What is wrong, in words for the user (without the part's name).
    pub message: String,
}

impl BadParts {
    fn at(part: SourcePart, message: impl Into<String>) -> BadParts {
        BadParts {
            part: Some(part),
            missing: false,
            message: message.into(),
        }
    }

    fn missing(part: SourcePart, message: &str) -> BadParts {
        BadParts {
            part: Some(part),
            missing: true,
            message: message.into(),
        }
    }
}

impl SourceParts {
    /// The source of `kind` these parts describe: the rate and frame size held to their
    /// bounds, parts the kind does not take refused, the ones it needs required, and the
    /// defaults filled in (the built-in pattern's size, format and rate; 30 fps for a
    /// replay). A scale applies to JPEG frames only: a v4l2 source with a pixel format, or a
    /// raw replay file, refuses one.
    pub fn build(self, kind: SourceKind) -> Result<SourceSpec, BadParts> {
        let SourceParts {
            device,
            path,
            format,
            size,
            fps,
            io,
            scale,
        } = self;
        let fps = fps
            .map(check_fps)
            .transpose()
            .map_err(|e| BadParts::at(SourcePart::Fps, e.to_string()))?;
        if let Some(size) = size {
            // Without a format (a camera's own), the size limits are those of any format;
            // JPEG frames become grey ones.
            let pixels = format.map(|f| f.pixels().unwrap_or(PixelFormat::Grey));
            check_frame_size(size, pixels)
                .map_err(|e| BadParts::at(SourcePart::Size, e.to_string()))?;
        }
        let scale_for_pixels = |format: PixelFormat| match scale {
            Some(s) if s != Scale::Full => Err(BadParts::at(
                SourcePart::Scale,
                format!("{s} applies to JPEG frames (format mjpeg), not to {format}"),
            )),
            _ => Ok(()),
        };
        let not_for = |given: &[(bool, SourcePart)]| match given.iter().find(|(g, _)| *g) {
            Some(&(_, part)) => Err(BadParts::at(
                part,
                format!("does not apply to a {} source", kind.name()),
            )),
            None => Ok(()),
        };
        match kind {
            SourceKind::Pattern => {
                not_for(&[
                    (device.is_some(), SourcePart::Device),
                    (path.is_some(), SourcePart::Path),
                    (io.is_some(), SourcePart::Io),
                    (scale.is_some(), SourcePart::Scale),
                ])?;
                let format =
                    match format {
                        Some(CaptureFormat::Mjpeg) => return Err(BadParts::at(
                            SourcePart::Format,
                            "mjpeg: the test pattern renders pixels (grey, yuyv, ...), not JPEG",
                        )),
                        Some(CaptureFormat::Pixels(format)) => format,
                        None => PixelFormat::Grey,
                    };
                Ok(SourceSpec::Pattern {
                    size: size.unwrap_or(DEFAULT_PATTERN_SIZE),
                    format,
                    fps: fps.unwrap_or(DEFAULT_FPS),
                })
            }
            SourceKind::V4l2 => {
                not_for(&[(path.is_some(), SourcePart::Path)])?;
                let device = device.ok_or_else(|| {
                    BadParts::missing(
                        SourcePart::Device,
                        "missing: a v4l2 source needs its device node, e.g. device = \"/dev/video0\"",
                    )
                })?;
                if device.as_os_str().is_empty() {
                    return Err(BadParts::at(
                        SourcePart::Device,
                        "empty: a v4l2 source needs its device node, e.g. device = \"/dev/video0\"",
                    ));
                }
                if let Some(CaptureFormat::Pixels(format)) = format {
                    scale_for_pixels(format)?;
                }
                Ok(SourceSpec::V4l2 {
                    device,
                    format,
                    size,
                    fps,
                    io,
                    scale: scale.unwrap_or_default(),
                })
            }
            SourceKind::Replay => {
                not_for(&[
                    (device.is_some(), SourcePart::Device),
                    (io.is_some(), SourcePart::Io),
                ])?;
                let path = path.ok_or_else(|| {
                    BadParts::missing(
                        SourcePart::Path,
                        "missing: a replay source needs a file or directory",
                    )
                })?;
                let raw = match (size, format) {
                    (Some(size), Some(CaptureFormat::Pixels(format))) => {
                        scale_for_pixels(format)?;
                        Some((size, format))
                    }
                    // JPEG images, in a directory or back to back in one file, say their
                    // own size.
                    (None, None | Some(CaptureFormat::Mjpeg)) => None,
                    _ => {
                        return Err(BadParts {
                            part: None,
                            missing: false,
                            message: "a raw replay file needs both size and format; a \
                                      directory of images or an MJPEG file neither"
                                .into(),
                        })
                    }
                };
                Ok(SourceSpec::Replay {
                    path,
                    raw,
                    fps: fps.unwrap_or(DEFAULT_FPS),
                    scale: scale.unwrap_or_default(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(width: u32, height: u32) -> Size {
        Size { width, height }
    }

    #[test]
    fn parts_build_with_the_shared_defaults_and_checks() {
        assert_eq!(
            SourceParts::default().build(SourceKind::Pattern),
            Ok(SourceSpec::default_pattern())
        );
        let device = SourceParts {
            device: Some("/dev/video0".into()),
            ..SourceParts::default()
        };
        assert_eq!(
            device.clone().build(SourceKind::Pattern).unwrap_err(),
            BadParts::at(SourcePart::Device, "does not apply to a pattern source")
        );
        assert!(device.build(SourceKind::V4l2).is_ok());
        let half_raw = SourceParts {
            path: Some("x.raw".into()),
            size: Some(size(8, 8)),
            ..SourceParts::default()
        };
        assert_eq!(half_raw.build(SourceKind::Replay).unwrap_err().part, None);
        let missing = SourceParts::default()
            .build(SourceKind::Replay)
            .unwrap_err();
        assert_eq!(
            (missing.part, missing.missing),
            (Some(SourcePart::Path), true)
        );
        let slow = SourceParts {
            fps: Some(0.001),
            ..SourceParts::default()
        };
        assert_eq!(
            slow.build(SourceKind::Pattern).unwrap_err().part,
            Some(SourcePart::Fps)
        );
    }

    #[test]
    fn jpeg_frames_take_a_scale_and_pixels_refuse_one() {
        let half = Some(Scale::Half);
        let camera = |format| SourceParts {
            device: Some("/dev/video0".into()),
            format,
            scale: half,
            ..SourceParts::default()
        };
        for format in [None, Some(CaptureFormat::Mjpeg)] {
            match camera(format).build(SourceKind::V4l2) {
                Ok(SourceSpec::V4l2 { scale, .. }) => assert_eq!(scale, Scale::Half),
                other => panic!("{other:?}"),
            }
        }
        let yuyv = camera(Some(CaptureFormat::Pixels(PixelFormat::Yuyv)));
        assert_eq!(
            yuyv.build(SourceKind::V4l2).unwrap_err(),
            BadParts::at(
                SourcePart::Scale,
                "1/2 applies to JPEG frames (format mjpeg), not to yuyv"
            )
        );
        let mjpeg_pattern = SourceParts {
            format: Some(CaptureFormat::Mjpeg),
            ..SourceParts::default()
        };
        assert_eq!(
            mjpeg_pattern.build(SourceKind::Pattern).unwrap_err().part,
            Some(SourcePart::Format)
        );
        // An MJPEG recording needs no size; with one it is not a raw file.
        let recording = |size| SourceParts {
            path: Some("clip.mjpeg".into()),
            format: Some(CaptureFormat::Mjpeg),
            size,
            scale: half,
            ..SourceParts::default()
        };
        assert!(matches!(
            recording(None).build(SourceKind::Replay),
            Ok(SourceSpec::Replay {
                raw: None,
                scale: Scale::Half,
                ..
            })
        ));
        assert_eq!(
            recording(Some(size(8, 8)))
                .build(SourceKind::Replay)
                .unwrap_err()
                .part,
            None
        );
    }
}
