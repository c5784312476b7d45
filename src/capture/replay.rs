//! Replay: recorded frames played back as if a camera delivered them, paced at a frame rate
//! and looping forever. Either a raw file of back-to-back frames of one format and size
//! (mapped with `memmap2`, never read whole), or a directory of PNG/JPEG/PGM/PPM images
//! played in file-name order (decoded one at a time with [`crate::input`]).
//!
//! Owns the file mapping and two frame slots; knows nothing of kernels or metrics.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use memmap2::Mmap;

use super::{CaptureError, CaptureStats, FrameSource, IoMode, Next, PacedSlots};
use crate::cl::Gpu;
use crate::frame::{FrameLayout, PixelFormat, Size};
use crate::input;

/// Where the frames come from.
enum Frames {
    /// A mapped raw file: frame `i` is bytes `i * frame_bytes ..`.
    Raw { map: Mmap, count: usize },
    /// Image files, sorted by name; the last one decoded is kept, so a single still image
    /// is decoded once.
    Images {
        files: Vec<PathBuf>,
        cached: Option<(usize, Vec<u8>)>,
    },
}

/// Frames from a raw file or a directory of images, paced at `fps`, looping.
pub struct ReplaySource {
    path: PathBuf,
    layout: FrameLayout,
    fps: f64,
    frames: Frames,
    slots: PacedSlots,
}

fn source_error(path: &Path, message: impl Into<String>) -> CaptureError {
    CaptureError::Source {
        source_name: format!("replay {}", path.display()),
        message: message.into(),
    }
}

/// The image files of a directory, in name order.
fn image_files(dir: &Path) -> Result<Vec<PathBuf>, CaptureError> {
    let entries = std::fs::read_dir(dir).map_err(|e| source_error(dir, e.to_string()))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| source_error(dir, e.to_string()))?.path();
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        if matches!(
            ext.as_deref(),
            Some("png" | "pgm" | "ppm" | "pnm" | "jpg" | "jpeg")
        ) && path.is_file()
        {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

impl ReplaySource {
    /// Opens `path`: a raw file of `raw`'s size and format, or (with `raw` `None`) a
    /// directory of images that all share the first one's size and format.
    pub fn open(
        gpu: &Gpu,
        path: &Path,
        raw: Option<(Size, PixelFormat)>,
        fps: f64,
    ) -> Result<ReplaySource, CaptureError> {
        let (layout, frames) = match raw {
            Some((size, format)) => {
                let layout = FrameLayout::packed(format, size.width, size.height);
                layout
                    .validate()
                    .map_err(|e| source_error(path, e.to_string()))?;
                let file = File::open(path).map_err(|e| source_error(path, e.to_string()))?;
                // SAFETY: the mapping is read-only; a recording truncated while it plays would
                // fault, which is the same risk as any reader of a file being rewritten.
                let map = unsafe { Mmap::map(&file) }
                    .map_err(|e| source_error(path, format!("cannot map: {e}")))?;
                let frame_bytes = layout.frame_bytes();
                if map.is_empty() || map.len() % frame_bytes != 0 {
                    return Err(source_error(
                        path,
                        format!(
                            "{} bytes is not a whole number of {format} {size} frames ({frame_bytes} bytes each)",
                            map.len()
                        ),
                    ));
                }
                let count = map.len() / frame_bytes;
                (layout, Frames::Raw { map, count })
            }
            None => {
                let files = image_files(path)?;
                let first = files.first().ok_or_else(|| {
                    source_error(path, "no PNG, JPEG or PGM/PPM images in the directory")
                })?;
                let frame =
                    input::load(first, None).map_err(|e| source_error(path, e.to_string()))?;
                let layout = frame.layout;
                let cached = Some((0, frame.bytes));
                (layout, Frames::Images { files, cached })
            }
        };
        Ok(ReplaySource {
            path: path.to_path_buf(),
            layout,
            fps,
            frames,
            slots: PacedSlots::new(gpu, layout, fps, &format!("replay {}", path.display()))?,
        })
    }

    /// How many distinct frames one loop holds.
    pub fn frame_count(&self) -> usize {
        match &self.frames {
            Frames::Raw { count, .. } => *count,
            Frames::Images { files, .. } => files.len(),
        }
    }
}

impl Frames {
    /// The bytes of frame `index` of the loop (decoding an image if needed).
    fn get(
        &mut self,
        path: &Path,
        layout: FrameLayout,
        index: usize,
    ) -> Result<&[u8], CaptureError> {
        match self {
            Frames::Raw { map, .. } => {
                let n = layout.frame_bytes();
                let start = index * n;
                map.get(start..start + n)
                    .ok_or_else(|| source_error(path, format!("frame {index} is past the end")))
            }
            Frames::Images { files, cached } => {
                if cached.as_ref().map(|(i, _)| *i) != Some(index) {
                    let file = files.get(index).ok_or_else(|| {
                        source_error(path, format!("frame {index} is past the end"))
                    })?;
                    let frame =
                        input::load(file, None).map_err(|e| source_error(path, e.to_string()))?;
                    if frame.layout != layout {
                        return Err(source_error(
                            path,
                            format!(
                                "{} (frame {index}) is {} {}x{}, the first image is {} {}x{}",
                                file.display(),
                                frame.layout.format,
                                frame.layout.width,
                                frame.layout.height,
                                layout.format,
                                layout.width,
                                layout.height
                            ),
                        ));
                    }
                    *cached = Some((index, frame.bytes));
                }
                match cached {
                    Some((_, bytes)) => Ok(bytes),
                    None => Err(source_error(path, "no frame decoded")),
                }
            }
        }
    }
}

impl FrameSource for ReplaySource {
    fn describe(&self) -> String {
        format!(
            "replay {} ({} frames of {} {}x{}) at {} fps",
            self.path.display(),
            self.frame_count(),
            self.layout.format,
            self.layout.width,
            self.layout.height,
            self.fps
        )
    }

    fn layout(&self) -> FrameLayout {
        self.layout
    }

    fn io_mode(&self) -> IoMode {
        IoMode::Generated
    }

    fn is_up(&self) -> bool {
        true
    }

    fn stats(&self) -> CaptureStats {
        self.slots.stats()
    }

    fn next_frame(&mut self, gpu: &Gpu, wait: Duration) -> Result<Next<'_>, CaptureError> {
        let count = self.frame_count().max(1) as u64;
        let (path, layout, frames) = (&self.path, self.layout, &mut self.frames);
        self.slots.next_frame(
            gpu,
            wait,
            || format!("replay {}", path.display()),
            |sequence, out| {
                let bytes = frames.get(path, layout, (sequence % count) as usize)?;
                out.copy_from_slice(bytes);
                Ok(())
            },
        )
    }
}
