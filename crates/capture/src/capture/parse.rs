//! The `--source` parser: a spec's text (`pattern:1280x720@30`, `/dev/video0`,
//! `replay:DIR@FPS`, ...) read into its parts and built by [`SourceParts::build`], so that
//! the command line, `capture`'s flags and the config share one set of checks.

use std::path::PathBuf;
use std::str::FromStr;

use super::parts::{SourceKind, SourceParts};
use super::spec::{parse_fps, SourceSpec};
use edgesight_frame::frame::{CaptureFormat, PixelFormat};

/// A spec that makes no source, with why.
#[derive(Debug, thiserror::Error)]
#[error("invalid source '{spec}': {reason} (expected pattern:WxH[:FORMAT]@FPS, a device path, v4l2:DEVICE, replay:FILE:WxH:FORMAT@FPS, replay:DIR@FPS or replay:FILE.mjpeg@FPS)")]
pub struct InvalidSource {
    /// The spec's text as it was given.
    pub spec: String,
    /// What makes it no source (a part missing, unreadable or out of bounds).
    pub reason: String,
}

impl FromStr for SourceSpec {
    type Err = InvalidSource;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason: String| InvalidSource {
            spec: s.to_string(),
            reason,
        };
        let build =
            |kind: SourceKind, parts: SourceParts| parts.build(kind).map_err(|e| bad(e.message));
        if s.starts_with('/') {
            // A device's path alone, as `capture` takes it: what `v4l2:` would say.
            return build(
                SourceKind::V4l2,
                SourceParts {
                    device: Some(PathBuf::from(s)),
                    ..SourceParts::default()
                },
            );
        }
        let (kind, rest) = s
            .split_once(':')
            .ok_or_else(|| bad("no kind before ':'".into()))?;
        match kind {
            "pattern" => {
                let (geometry, fps) = rest.rsplit_once('@').ok_or_else(|| bad("no @FPS".into()))?;
                let fps = parse_fps(fps).map_err(|e| bad(e.to_string()))?;
                let (size, format) = match geometry.split_once(':') {
                    Some((size, format)) => (
                        size,
                        format
                            .parse::<PixelFormat>()
                            .map_err(|e| bad(format!("{e}")))?,
                    ),
                    None => (geometry, PixelFormat::Grey),
                };
                let size = size.parse().map_err(|e| bad(format!("{e}")))?;
                build(
                    SourceKind::Pattern,
                    SourceParts {
                        size: Some(size),
                        format: Some(CaptureFormat::Pixels(format)),
                        fps: Some(fps),
                        ..SourceParts::default()
                    },
                )
            }
            "v4l2" if !rest.is_empty() => build(
                SourceKind::V4l2,
                SourceParts {
                    device: Some(PathBuf::from(rest)),
                    ..SourceParts::default()
                },
            ),
            "v4l2" => Err(bad("no device path".into())),
            "replay" => {
                let (body, fps) = rest.rsplit_once('@').ok_or_else(|| bad("no @FPS".into()))?;
                let fps = parse_fps(fps).map_err(|e| bad(e.to_string()))?;
                // FILE may itself hold ':', so the size and format are taken from the right.
                let mut parts = body.rsplitn(3, ':');
                let last = parts.next().unwrap_or_default();
                match (last.parse::<PixelFormat>(), parts.next(), parts.next()) {
                    (Ok(format), Some(size), Some(path)) if !path.is_empty() => {
                        let size = size.parse().map_err(|e| bad(format!("{e}")))?;
                        build(
                            SourceKind::Replay,
                            SourceParts {
                                path: Some(PathBuf::from(path)),
                                size: Some(size),
                                format: Some(CaptureFormat::Pixels(format)),
                                fps: Some(fps),
                                ..SourceParts::default()
                            },
                        )
                    }
                    _ if !body.is_empty() => build(
                        SourceKind::Replay,
                        SourceParts {
                            path: Some(PathBuf::from(body)),
                            fps: Some(fps),
                            ..SourceParts::default()
                        },
                    ),
                    _ => Err(bad("no file or directory".into())),
                }
            }
            other => Err(bad(format!("unknown kind '{other}'"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::spec::{check_fps, check_frame_size, BadFps, BadFrameSize};
    use crate::jpeg::Scale;
    use edgesight_frame::frame::LayoutError;
    use edgesight_frame::frame::Size;

    fn size(width: u32, height: u32) -> Size {
        Size { width, height }
    }

    #[test]
    fn parses_source_specs() {
        assert_eq!(
            "pattern:1280x720@30".parse::<SourceSpec>().unwrap(),
            SourceSpec::Pattern {
                size: size(1280, 720),
                format: PixelFormat::Grey,
                fps: 30.0
            }
        );
        assert_eq!(
            "pattern:64x48:yuyv@7.5".parse::<SourceSpec>().unwrap(),
            SourceSpec::Pattern {
                size: size(64, 48),
                format: PixelFormat::Yuyv,
                fps: 7.5
            }
        );
        assert_eq!(
            "/dev/video0".parse::<SourceSpec>().unwrap(),
            "v4l2:/dev/video0".parse::<SourceSpec>().unwrap(),
            "a device's path alone is a V4L2 source"
        );
        assert_eq!(
            "v4l2:/dev/video0".parse::<SourceSpec>().unwrap(),
            SourceSpec::V4l2 {
                device: "/dev/video0".into(),
                format: None,
                size: None,
                fps: None,
                io: None,
                scale: Scale::Full
            }
        );
        assert_eq!(
            "replay:/data/a:b.raw:640x480:nv12@15"
                .parse::<SourceSpec>()
                .unwrap(),
            SourceSpec::Replay {
                path: "/data/a:b.raw".into(),
                raw: Some((size(640, 480), PixelFormat::Nv12)),
                fps: 15.0,
                scale: Scale::Full
            }
        );
        assert_eq!(
            "replay:frames/@2".parse::<SourceSpec>().unwrap(),
            SourceSpec::Replay {
                path: "frames/".into(),
                raw: None,
                fps: 2.0,
                scale: Scale::Full
            }
        );
    }

    #[test]
    fn rejects_bad_specs_with_the_reason() {
        for (spec, reason) in [
            ("pattern:1280x720", "no @FPS"),
            ("pattern:1280x0@30", "invalid size"),
            ("pattern:64x48:yuv@30", "unknown pixel format 'yuv'"),
            ("pattern:64x48@0", "frame rate '0'"),
            ("pattern:64x48@nan", "frame rate 'nan'"),
            ("v4l2:", "no device path"),
            ("camera:/dev/video0", "unknown kind 'camera'"),
            ("replay:@30", "no file or directory"),
            ("dev/video0", "no kind"),
        ] {
            let err = spec.parse::<SourceSpec>().unwrap_err().to_string();
            assert!(err.contains(reason), "{spec}: {err}");
            assert!(err.contains(spec), "{spec}: {err}");
        }
    }

    #[test]
    fn specs_print_as_they_parse() {
        for spec in [
            "pattern:64x48:yuyv@7.5",
            "v4l2:/dev/video2",
            "replay:x.raw:8x8:grey@3",
            "replay:dir@1",
        ] {
            let parsed: SourceSpec = spec.parse().unwrap();
            assert_eq!(parsed.to_string().parse::<SourceSpec>().unwrap(), parsed);
        }
    }

    #[test]
    fn rates_outside_the_bounds_are_refused_everywhere() {
        for fps in ["1e-300", "6e-20", "0.009", "1000.5", "inf", "-1"] {
            let err = parse_fps(fps).unwrap_err();
            assert_eq!(err, BadFps::Text(fps.into()));
            assert_eq!(
                err.to_string(),
                format!("frame rate '{fps}' is not a number from 0.01 to 1000")
            );
            let spec = format!("pattern:64x48@{fps}");
            let err = spec.parse::<SourceSpec>().unwrap_err().to_string();
            assert!(
                err.starts_with(&format!(
                    "invalid source '{spec}': frame rate '{fps}' is not a number from 0.01 to 1000"
                )),
                "{err}"
            );
        }
        assert_eq!(parse_fps("0.01"), Ok(0.01));
        assert_eq!(parse_fps("1000"), Ok(1000.0));
        let err = check_fps(1000.5).unwrap_err();
        assert_eq!(err, BadFps::Number(1000.5));
        assert_eq!(
            err.to_string(),
            "frame rate 1000.5 is not a number from 0.01 to 1000"
        );
    }

    #[test]
    fn frame_sizes_beyond_the_caps_are_refused_in_specs() {
        for (spec, reason) in [
            (
                "pattern:100000x100000@1",
                "frame size 100000x100000 is too large (at most 16384 on a side)",
            ),
            (
                "pattern:16384x16384@1",
                "frame size 16384x16384 is too large (at most 16843009 pixels",
            ),
            (
                "replay:x.raw:16385x1:grey@1",
                "frame size 16385x1 is too large (at most 16384 on a side)",
            ),
        ] {
            let err = spec.parse::<SourceSpec>().unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("invalid source '{spec}': {reason}")),
                "{err}"
            );
        }
        assert!("pattern:16384x1024@1".parse::<SourceSpec>().is_ok());
        assert_eq!(
            check_frame_size(size(16385, 1), None),
            Err(BadFrameSize::SideTooLong(size(16385, 1)))
        );
        assert_eq!(
            check_frame_size(size(16384, 16384), None),
            Err(BadFrameSize::Layout(LayoutError::TooLarge {
                width: 16384,
                height: 16384
            }))
        );
        assert_eq!(
            check_frame_size(
                Size {
                    width: 16384,
                    height: 2
                },
                None
            ),
            Ok(())
        );
    }
}
