//! Replay: recorded frames played back as if a camera delivered them, paced at a frame rate
//! and looping forever. Either a raw file of back-to-back frames of one format and size
//! (each frame read with one positioned read straight into its slot, never the file read
//! whole), a directory of PNG/JPEG/PGM/PPM images played in file-name order (decoded one
//! at a time with [`crate::input`]), or an MJPEG recording: JPEG images back to back in one
//! file ([`mjpeg`]). JPEG images give their luma, at the source's scale.
//!
//! A recording may change while it plays, and that never stops the source. A raw file
//! that shrank, grew or was replaced is followed: its length is taken again before every
//! frame, the loop is its whole frames now, and a frame that cannot be read whole is
//! dropped as a `short_frame`. (The file is not memory-mapped: a mapping of a file that
//! shrinks faults with SIGBUS, which would end the whole daemon.) An MJPEG recording cut
//! shorter in place, or replaced by a rename, is indexed again at a loop's end or at a
//! read past its end. An image of a directory that is missing, unreadable, incomplete or
//! of another size than the first is skipped and dropped as a `bad_image`; the rest play
//! on. A file found bad is not read again until its inode, length or modification time
//! changes, and a JPEG's size is taken from its header before it is decoded. Each change
//! is logged once.
//!
//! With nothing left to play the two differ. A raw file without a whole frame reports
//! itself down and stays open: a recorder rewriting it in place fills it again, and the
//! open file shows that at once. A directory whose every image was bad on its last try
//! fails (`Err`): its camera shows down, logs the reason once and is opened again with a
//! growing delay, which also lists the directory again, so images written under new names
//! are found. So does an MJPEG recording indexed again with no image left in it.
//!
//! Owns the open file or the image list, and two frame slots; knows nothing of kernels or
//! metrics.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{
    CaptureError, CaptureStats, DropReason, Fill, Frame, FrameSource, IoMode, Next, PacedSlots,
};
use crate::input;
use crate::jpeg::Scale;
use edgesight_core::cl::Gpu;
use edgesight_frame::files::OpenError;
use edgesight_frame::frame::{CaptureFormat, FrameLayout, PixelFormat, Size};

mod mjpeg;

/// Logs a problem with a recording as a warning, on the capture log target.
macro_rules! replay_warn {
    ($($arg:tt)*) => {
        tracing::warn!(target: "edgesight::capture", "{}", format_args!($($arg)*))
    };
}
use replay_warn;

/// Where the frames come from.
enum Frames {
    Raw(RawFile),
    Images(ImageDir),
    Mjpeg(mjpeg::MjpegFile),
}

/// Frames from a replay, paced at `fps`, looping.
pub(crate) struct ReplaySource {
    path: PathBuf,
    layout: FrameLayout,
    fps: f64,
    frames: Frames,
    /// Frames dropped in a row since the last one made: a raw file's whole loop of them
    /// means down.
    drops_in_a_row: u64,
    slots: PacedSlots,
}

fn source_error(path: &Path, message: impl Into<String>) -> CaptureError {
    CaptureError::Source {
        source_name: format!("replay {}", path.display()),
        message: message.into(),
    }
}

impl ReplaySource {
    /// Opens `path`: a raw file of `raw`'s size and format, or (with `raw` `None`) a
    /// directory of images that share the size and format of the first readable one, or
    /// an MJPEG recording; JPEG images decoded at `scale`.
    pub fn open(
        gpu: &Gpu,
        path: &Path,
        raw: Option<(Size, PixelFormat)>,
        fps: f64,
        scale: Scale,
    ) -> Result<ReplaySource, CaptureError> {
        let (layout, frames) = match raw {
            Some((size, format)) => {
                let layout = FrameLayout::packed(format, size.width, size.height);
                layout
                    .validate()
                    .map_err(|e| source_error(path, e.to_string()))?;
                (layout, Frames::Raw(RawFile::open(path, layout)?))
            }
            None if path.is_dir() => {
                let dir = ImageDir::open(path, scale)?;
                (dir.layout, Frames::Images(dir))
            }
            None => {
                let recording = mjpeg::MjpegFile::open(path, scale)?;
                (recording.layout, Frames::Mjpeg(recording))
            }
        };
        Ok(ReplaySource {
            path: path.to_path_buf(),
            layout,
            fps,
            frames,
            drops_in_a_row: 0,
            slots: PacedSlots::new(gpu, layout, fps, &format!("replay {}", path.display()))?,
        })
    }

    /// How many frames one loop holds now (for a raw file, the whole frames it has).
    pub(crate) fn frame_count(&self) -> usize {
        match &self.frames {
            Frames::Raw(raw) => raw.count(),
            Frames::Images(dir) => dir.files.len(),
            Frames::Mjpeg(recording) => recording.count(),
        }
    }
}

/// A raw recording, read frame by frame with positioned reads.
struct RawFile {
    file: File,
    /// The open file's device and inode, to notice the path now naming another file.
    identity: (u64, u64),
    frame_bytes: usize,
    /// The length last seen, so that a change is logged once.
    len: u64,
    /// The last read failure logged, so that a repeated one is not.
    last_problem: Option<String>,
    /// Whether the path was found gone (the open file still plays).
    path_gone: bool,
}

fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

/// The metadata of the regular file `path` names now, if it is another one than the
/// file of `playing` identity (a recording replaced by a rename). A path gone reads as
/// no change, the open file playing on; `gone` remembers it so that it is logged once.
fn replaced(path: &Path, playing: (u64, u64), gone: &mut bool) -> Option<std::fs::Metadata> {
    match std::fs::metadata(path) {
        Ok(meta) => {
            *gone = false;
            (meta.is_file() && identity(&meta) != playing).then_some(meta)
        }
        Err(e) => {
            if !*gone {
                *gone = true;
                replay_warn!(
                    "replay {}: {e}; playing the file already open until the path is back",
                    path.display()
                );
            }
            None
        }
    }
}

impl RawFile {
    fn open(path: &Path, layout: FrameLayout) -> Result<RawFile, CaptureError> {
        // Opened without blocking: a FIFO is refused, not waited on.
        let (file, len) = edgesight_frame::files::open_regular(path).map_err(|e| {
            source_error(
                path,
                match e {
                    OpenError::Io(e) => e.to_string(),
                    OpenError::NotRegular(kind) => format!("not a regular file but {kind}"),
                },
            )
        })?;
        let meta = file
            .metadata()
            .map_err(|e| source_error(path, e.to_string()))?;
        let frame_bytes = layout.frame_bytes();
        if len == 0 || !len.is_multiple_of(frame_bytes as u64) {
            return Err(source_error(
                path,
                format!(
                    "{len} bytes is not a whole number of {} {}x{} frames ({frame_bytes} bytes each)",
                    layout.format, layout.width, layout.height
                ),
            ));
        }
        Ok(RawFile {
            file,
            identity: identity(&meta),
            frame_bytes,
            len,
            last_problem: None,
            path_gone: false,
        })
    }

    fn count(&self) -> usize {
        usize::try_from(self.len / self.frame_bytes as u64).unwrap_or(usize::MAX)
    }

    /// Reads frame `sequence` of the loop into `out`, after following the file's changes.
    fn fill(&mut self, path: &Path, sequence: u64, out: &mut [u8]) -> Fill {
        self.follow_path(path);
        match self.file.metadata() {
            Ok(meta) if meta.len() != self.len => {
                let was = self.len;
                self.len = meta.len();
                let partial = if self.len.is_multiple_of(self.frame_bytes as u64) {
                    ""
                } else {
                    " (the partial frame at its end is skipped)"
                };
                replay_warn!(
                    "replay {}: the file changed from {was} to {} bytes; playing its {} whole frames{partial}",
                    path.display(),
                    self.len,
                    self.count(),
                );
            }
            Ok(_) => {}
            Err(e) => return self.dropped(path, format!("cannot read its length: {e}")),
        }
        let count = self.len / self.frame_bytes as u64;
        if count == 0 {
            // Logged with the change of length.
            return Fill::Dropped(DropReason::ShortFrame);
        }
        let offset = (sequence % count) * self.frame_bytes as u64;
        let Some(frame) = out.get_mut(..self.frame_bytes) else {
            return self.dropped(path, format!("a slot of {} bytes is too small", out.len()));
        };
        match self.file.read_exact_at(frame, offset) {
            Ok(()) => {
                self.last_problem = None;
                Fill::Written
            }
            // The file shrank since its length was taken; the next frame sees the new one.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                Fill::Dropped(DropReason::ShortFrame)
            }
            Err(e) => self.dropped(path, format!("reading the frame at byte {offset}: {e}")),
        }
    }

    /// Opens the file the path names now if it is another one than the file playing (a
    /// recording replaced by a rename); notes a path gone, and keeps playing the open file.
    fn follow_path(&mut self, path: &Path) {
        let Some(meta) = replaced(path, self.identity, &mut self.path_gone) else {
            return;
        };
        match edgesight_frame::files::open_regular(path) {
            Ok((file, _)) => {
                replay_warn!(
                    "replay {}: replaced by another file; playing it",
                    path.display()
                );
                self.file = file;
                self.identity = identity(&meta);
            }
            Err(OpenError::Io(e)) => {
                let _ = self.dropped(path, format!("cannot open its replacement: {e}"));
            }
            Err(OpenError::NotRegular(kind)) => {
                let _ = self.dropped(path, format!("replaced by {kind}"));
            }
        }
    }

    /// Logs `problem` unless it is the one logged last, and drops the frame.
    fn dropped(&mut self, path: &Path, problem: String) -> Fill {
        if self.last_problem.as_deref() != Some(problem.as_str()) {
            replay_warn!(
                "replay {}: {problem}; frames are dropped until it reads again",
                path.display()
            );
            self.last_problem = Some(problem);
        }
        Fill::Dropped(DropReason::ShortFrame)
    }
}

/// A directory of images, played in name order.
struct ImageDir {
    files: Vec<PathBuf>,
    layout: FrameLayout,
    /// JPEG images' luma scale.
    scale: Scale,
    /// The decoded image of a directory of one, decoded once; `None` with several, which
    /// are read again each loop so that a change to one shows.
    cached: Option<Vec<u8>>,
    /// What was last wrong with each file, so that each problem is logged once.
    problems: Vec<Option<String>>,
    /// The version of each file found bad, which is not read again (a JPEG of the wrong
    /// size, or one of many scans, would otherwise be read, even decoded, on every loop).
    bad: Vec<Option<FileKey>>,
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

/// The error of a directory none of whose images reads, naming the first one's problem;
/// the same at open and while playing, so that a camera failing on it logs it once.
fn none_readable(dir: &Path, problems: &[Option<String>]) -> CaptureError {
    source_error(
        dir,
        format!(
            "none of its {} images can be read (the first: {})",
            problems.len(),
            problems.first().cloned().flatten().unwrap_or_default()
        ),
    )
}

/// How long opening a directory tries its images for the first that reads. Each image's
/// work is bounded (its bytes, pixels and scans, about a second at the largest), but a
/// directory of many that fail only once decoded would hold the camera's start, and the
/// service's READY, past the unit's start timeout; past this the open fails, saying so,
/// and the camera waits to open again like any other that failed.
const OPEN_WITHIN: Duration = Duration::from_secs(20);

impl ImageDir {
    /// Lists the images and takes the layout of the first that reads; fails when there is
    /// none, none reads, or none read within [`OPEN_WITHIN`].
    fn open(dir: &Path, scale: Scale) -> Result<ImageDir, CaptureError> {
        Self::open_within(dir, scale, OPEN_WITHIN)
    }

    /// [`ImageDir::open`], trying images for `within` (at least one).
    fn open_within(dir: &Path, scale: Scale, within: Duration) -> Result<ImageDir, CaptureError> {
        let start = std::time::Instant::now();
        let files = image_files(dir)?;
        if files.is_empty() {
            return Err(source_error(
                dir,
                "no PNG, JPEG or PGM/PPM images in the directory",
            ));
        }
        let mut problems = vec![None; files.len()];
        for (index, file) in files.iter().enumerate() {
            if index > 0 && start.elapsed() >= within {
                return Err(source_error(
                    dir,
                    format!(
                        "no image read within {} s ({index} of its {} images tried, the \
                         first: {})",
                        within.as_secs(),
                        files.len(),
                        problems[0].clone().unwrap_or_default()
                    ),
                ));
            }
            match input::load_image(file, scale) {
                Ok(frame) => {
                    return Ok(ImageDir {
                        layout: frame.layout,
                        scale,
                        cached: (files.len() == 1).then_some(frame.bytes),
                        bad: vec![None; files.len()],
                        files,
                        problems,
                    })
                }
                Err(e) => problems[index] = Some(e.to_string()),
            }
        }
        Err(none_readable(dir, &problems))
    }

    /// Copies image `sequence` of the loop into `out`, decoding it unless it is cached. An
    /// error once every image was found bad on its last try: the camera then fails, and is
    /// opened again (the directory listed again) with a growing delay.
    fn fill(&mut self, dir: &Path, sequence: u64, out: &mut [u8]) -> Result<Fill, CaptureError> {
        let Some(frame) = out.get_mut(..self.layout.frame_bytes()) else {
            return Ok(Fill::Dropped(DropReason::BadImage));
        };
        if let Some(bytes) = &self.cached {
            frame.copy_from_slice(bytes);
            return Ok(Fill::Written);
        }
        let index = (sequence % self.files.len() as u64) as usize;
        let key = std::fs::metadata(&self.files[index])
            .ok()
            .map(|meta| file_key(&meta));
        // A file found bad is not read again until it changes; its problem stays as logged.
        let loaded = match (key, self.bad[index]) {
            (Some(key), Some(bad)) if key == bad => Err(None),
            _ => self.load(index).map_err(Some),
        };
        self.bad[index] = loaded.as_ref().err().and(key);
        match loaded {
            Ok(bytes) => {
                if self.problems[index].take().is_some() {
                    replay_warn!(
                        "replay {}: {} reads again",
                        dir.display(),
                        self.files[index].display()
                    );
                }
                frame.copy_from_slice(&bytes);
                Ok(Fill::Written)
            }
            Err(problem) => {
                if let Some(problem) = problem {
                    if self.problems[index].as_deref() != Some(problem.as_str()) {
                        replay_warn!("replay {}: skipping {problem}", dir.display());
                        self.problems[index] = Some(problem);
                    }
                }
                if self.problems.iter().all(Option::is_some) {
                    return Err(none_readable(dir, &self.problems));
                }
                Ok(Fill::Dropped(DropReason::BadImage))
            }
        }
    }

    /// Decodes image `index`, or says what is wrong with it (naming the file). One of
    /// another size than the first is refused from its header where it has one that says.
    fn load(&self, index: usize) -> Result<Vec<u8>, String> {
        let file = &self.files[index];
        match input::load_image_as(file, self.scale, self.layout) {
            Ok(frame) => Ok(frame.bytes),
            Err(input::InputError::OtherLayout { got, want, .. }) => Err(format!(
                "{} (frame {index}) is {} {}x{}, the first image is {} {}x{}",
                file.display(),
                got.format,
                got.width,
                got.height,
                want.format,
                want.width,
                want.height
            )),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// What tells one version of a file from another without reading it: its device, inode,
/// length and modification time.
type FileKey = (u64, u64, u64, i64, i64);

fn file_key(meta: &std::fs::Metadata) -> FileKey {
    (
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
    )
}

impl FrameSource for ReplaySource {
    fn describe(&self) -> String {
        if let Frames::Mjpeg(_) = self.frames {
            return format!(
                "replay {} (MJPEG, {} JPEG images, luma {}x{}) at {} fps",
                self.path.display(),
                self.frame_count(),
                self.layout.width,
                self.layout.height,
                self.fps
            );
        }
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

    fn capture_format(&self) -> CaptureFormat {
        match self.frames {
            Frames::Mjpeg(_) => CaptureFormat::Mjpeg,
            _ => CaptureFormat::Pixels(self.layout.format),
        }
    }

    /// A raw file is down once a whole loop of frames in a row could not be read (it holds
    /// no whole frame, say), and up again with the next frame read. A directory or an
    /// MJPEG recording is up while open: with no image readable it fails instead (at open,
    /// for a recording).
    fn is_up(&self) -> bool {
        match &self.frames {
            Frames::Raw(raw) => self.drops_in_a_row < raw.count().max(1) as u64,
            Frames::Images(_) | Frames::Mjpeg(_) => true,
        }
    }

    fn stats(&self) -> CaptureStats {
        self.slots.stats()
    }

    fn next_frame(&mut self, gpu: &Gpu, wait: Duration) -> Result<Next<'_>, CaptureError> {
        let (path, frames, drops) = (&self.path, &mut self.frames, &mut self.drops_in_a_row);
        let next = self.slots.next_frame(
            gpu,
            wait,
            || format!("replay {}", path.display()),
            |sequence, out| {
                let filled = match frames {
                    Frames::Raw(raw) => raw.fill(path, sequence, out),
                    Frames::Images(dir) => dir.fill(path, sequence, out)?,
                    Frames::Mjpeg(recording) => recording.fill(path, sequence, out)?,
                };
                *drops = match filled {
                    Fill::Written | Fill::Decoded(_) => 0,
                    Fill::Dropped(_) => *drops + 1,
                };
                Ok(filled)
            },
        )?;
        // A recording's image stays read until the next frame's: it is the frame's JPEG.
        Ok(match (next, &self.frames) {
            (Next::Frame(frame), Frames::Mjpeg(recording)) => Next::Frame(Frame {
                jpeg: Some(recording.jpeg()),
                ..frame
            }),
            (next, _) => next,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resilience round 3, finding 5: images that fail only once decoded, tried one after
    /// another, held a camera's start (and READY) for minutes. Opening tries them for a
    /// bounded time, then fails naming how far it got and why the first failed.
    #[test]
    fn round3_5_opening_a_directory_tries_its_images_for_a_bounded_time() {
        let dir = std::env::temp_dir().join(format!("es-replay-open-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.pgm"), b"P5\n4 2\n255\nshort").unwrap();
        std::fs::write(dir.join("b.pgm"), b"P5\n4 2\n255\n01234567").unwrap();
        let opened = ImageDir::open_within(&dir, Scale::Full, Duration::from_secs(60));
        assert_eq!(opened.expect("b reads").layout.width, 4);
        let err = ImageDir::open_within(&dir, Scale::Full, Duration::ZERO)
            .err()
            .expect("out of time after the first");
        let text = err.to_string();
        assert!(
            text.contains("no image read within 0 s (1 of its 2 images tried, the first: ")
                && text.contains("a.pgm"),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
