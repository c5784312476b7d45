//! One builder for every source: [`SourceParts::build`] turns a kind and its parts (a
//! device or path, size, format, rate, I/O mode) into a [`SourceSpec`], with the checks
//! and defaults that the `--source` parser, `capture`'s flags and the config share.

use std::path::PathBuf;

use super::spec::{check_fps, check_frame_size, SourceSpec, DEFAULT_FPS, DEFAULT_PATTERN_SIZE};
use super::IoMode;
use crate::frame::{PixelFormat, Size};

/// The kinds of source, as a spec's prefix and the config's `kind` name them.
#[derive(Clone, Copy, Debug, serde::Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    Pattern,
    V4l2,
    Replay,
}

impl SourceKind {
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
    /// replay: a raw file (with size and format) or a directory of images.
    pub path: Option<PathBuf>,
    pub format: Option<PixelFormat>,
    pub size: Option<Size>,
    pub fps: Option<f64>,
    pub io: Option<IoMode>,
}

/// One of a source's parts, as its config key names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourcePart {
    Device,
    Path,
    Size,
    Fps,
    Io,
}

impl SourcePart {
    pub fn key(self) -> &'static str {
        match self {
            SourcePart::Device => "device",
            SourcePart::Path => "path",
            SourcePart::Size => "size",
            SourcePart::Fps => "fps",
            SourcePart::Io => "io",
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
    /// replay).
    pub fn build(self, kind: SourceKind) -> Result<SourceSpec, BadParts> {
        let SourceParts {
            device,
            path,
            format,
            size,
            fps,
            io,
        } = self;
        let fps = fps
            .map(check_fps)
            .transpose()
            .map_err(|e| BadParts::at(SourcePart::Fps, e))?;
        if let Some(size) = size {
            // Without a format (a camera's own), the size limits are those of any format.
            check_frame_size(size, format).map_err(|e| BadParts::at(SourcePart::Size, e))?;
        }
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
                ])?;
                Ok(SourceSpec::Pattern {
                    size: size.unwrap_or(DEFAULT_PATTERN_SIZE),
                    format: format.unwrap_or(PixelFormat::Grey),
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
                Ok(SourceSpec::V4l2 {
                    device,
                    format,
                    size,
                    fps,
                    io,
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
                    (Some(size), Some(format)) => Some((size, format)),
                    (None, None) => None,
                    _ => {
                        return Err(BadParts {
                            part: None,
                            missing: false,
                            message: "a raw replay file needs both size and format; a \
                                      directory of images neither"
                                .into(),
                        })
                    }
                };
                Ok(SourceSpec::Replay {
                    path,
                    raw,
                    fps: fps.unwrap_or(DEFAULT_FPS),
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
}
