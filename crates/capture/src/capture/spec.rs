//! Source specs: where frames come from, as the command line and the config spell it, and
//! the bounds every source's rate and frame size are held to. The builder of a spec from
//! its parts (`parts.rs`) and the `--source` parser (`parse.rs`) take both from here.

use std::fmt;
use std::path::PathBuf;

use super::IoMode;
use crate::jpeg::Scale;
use edgesight_frame::frame::{CaptureFormat, FrameLayout, LayoutError, PixelFormat, Size};

/// Where frames come from, as the command line and the config spell it:
/// `pattern:1280x720@30` (optionally `pattern:1280x720:yuyv@30`), `v4l2:/dev/video0` (or
/// the device's absolute path alone, `/dev/video0`),
/// `replay:FILE:WxH:FORMAT@FPS`, `replay:DIR@FPS` (a directory of PNG, JPEG or PGM/PPM
/// images), `replay:FILE@FPS` (JPEG images back to back: an MJPEG recording). The scale of
/// JPEG frames is set by the config or `capture --scale`, not in the spec.
#[derive(Clone, Debug, PartialEq)]
pub enum SourceSpec {
    /// The built-in test pattern, rendered by the program itself.
    Pattern {
        /// Frame width and height in pixels.
        size: Size,
        /// The pixel format the pattern is rendered in.
        format: PixelFormat,
        /// Frames per second, from [`MIN_FPS`] to [`MAX_FPS`].
        fps: f64,
    },
    /// A V4L2 camera; each `None` leaves the choice to the camera and edgesight.
    V4l2 {
        /// The video device node, e.g. `/dev/video0`.
        device: PathBuf,
        /// The format asked of the camera; `None` chooses among those it offers.
        format: Option<CaptureFormat>,
        /// Frame size in pixels asked of the camera; `None` keeps its current one.
        size: Option<Size>,
        /// Frames per second asked of the camera; `None` keeps its current rate.
        fps: Option<f64>,
        /// The I/O mode pinned; `None` tries dmabuf, userptr and mmap in turn.
        io: Option<IoMode>,
        /// The fraction of their size JPEG frames are decoded at (full for pixel formats).
        scale: Scale,
    },
    /// A recording played back in a loop, paced at its rate.
    Replay {
        /// The raw file, directory of images or MJPEG recording.
        path: PathBuf,
        /// Size and format of a raw file; `None` for a directory of images or an MJPEG
        /// recording.
        raw: Option<(Size, PixelFormat)>,
        /// Frames per second it is played at, from [`MIN_FPS`] to [`MAX_FPS`].
        fps: f64,
        /// The fraction of their size JPEG images are decoded at (full for a raw file).
        scale: Scale,
    },
}

/// The frame rate of a pattern or replay source that names none.
pub(crate) const DEFAULT_FPS: f64 = 30.0;
/// The frame size of a pattern source that names none.
pub(crate) const DEFAULT_PATTERN_SIZE: Size = Size {
    width: 1280,
    height: 720,
};

impl SourceSpec {
    /// The built-in default: a 1280x720 grey test pattern at 30 fps.
    pub fn default_pattern() -> SourceSpec {
        SourceSpec::Pattern {
            size: DEFAULT_PATTERN_SIZE,
            format: PixelFormat::Grey,
            fps: DEFAULT_FPS,
        }
    }
}

/// The slowest frame rate a source may be set to: one frame every 100 s. Slower rates
/// are no camera's, and their frame period no longer fits the monotonic clock's range.
pub const MIN_FPS: f64 = 0.01;
/// The fastest frame rate a source may be set to.
pub const MAX_FPS: f64 = 1000.0;
/// The longest side of a frame: V4L2 sizes are u32, but real drivers top out far below
/// (vivid at 4096, the largest sensors near 8192). The pipeline's own limits
/// ([`edgesight_frame::frame::MAX_PIXELS`]) apply on top.
pub const MAX_FRAME_SIDE: u32 = 16_384;

/// A frame rate that is not a number from [`MIN_FPS`] to [`MAX_FPS`].
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum BadFps {
    /// As written (a source spec, `--fps`).
    #[error("frame rate '{0}' is not a number from {MIN_FPS} to {MAX_FPS}")]
    Text(String),
    /// A number (a source's parts).
    #[error("frame rate {0:?} is not a number from {MIN_FPS} to {MAX_FPS}")]
    Number(f64),
}

/// A frame size the sources or the pipeline cannot take.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadFrameSize {
    /// A side beyond [`MAX_FRAME_SIDE`].
    #[error("frame size {0} is too large (at most {MAX_FRAME_SIDE} on a side)")]
    SideTooLong(Size),
    /// Beyond the pipeline's own limits, or empty.
    #[error(transparent)]
    Layout(#[from] LayoutError),
}

/// Parses a frame rate: a number from [`MIN_FPS`] to [`MAX_FPS`].
pub fn parse_fps(s: &str) -> Result<f64, BadFps> {
    s.trim()
        .parse::<f64>()
        .ok()
        .and_then(|fps| check_fps(fps).ok())
        .ok_or_else(|| BadFps::Text(s.to_string()))
}

/// Checks a frame rate given as a number: from [`MIN_FPS`] to [`MAX_FPS`].
pub(crate) fn check_fps(fps: f64) -> Result<f64, BadFps> {
    if (MIN_FPS..=MAX_FPS).contains(&fps) {
        Ok(fps)
    } else {
        Err(BadFps::Number(fps))
    }
}

/// Checks a frame size against [`MAX_FRAME_SIDE`] and, with its format (grey where a
/// camera will choose), against what the pipeline can process.
pub fn check_frame_size(size: Size, format: Option<PixelFormat>) -> Result<(), BadFrameSize> {
    if size.width > MAX_FRAME_SIDE || size.height > MAX_FRAME_SIDE {
        return Err(BadFrameSize::SideTooLong(size));
    }
    FrameLayout::packed(format.unwrap_or(PixelFormat::Grey), size.width, size.height).validate()?;
    Ok(())
}

impl fmt::Display for SourceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceSpec::Pattern { size, format, fps } => write!(f, "pattern:{size}:{format}@{fps}"),
            SourceSpec::V4l2 { device, .. } => write!(f, "v4l2:{}", device.display()),
            SourceSpec::Replay {
                path,
                raw: Some((size, format)),
                fps,
                ..
            } => write!(f, "replay:{}:{size}:{format}@{fps}", path.display()),
            SourceSpec::Replay {
                path,
                raw: None,
                fps,
                ..
            } => write!(f, "replay:{}@{fps}", path.display()),
        }
    }
}
