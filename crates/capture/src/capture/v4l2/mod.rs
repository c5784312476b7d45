//! The V4L2 camera source: owns the device's fd and its buffer queue, fills the frame slots
//! it lends the caller, and keeps going when the camera does not. Knows nothing of kernels
//! or metrics.
//!
//! Opening negotiates the format, size and frame rate (the driver has the last word; its
//! `bytesperline` becomes the layout's stride) and tries the I/O modes dmabuf, userptr,
//! mmap in that order unless one is pinned, logging each refusal. A device that vanishes
//! (ENODEV, EIO, no frame for a while) is torn down completely and opened again with
//! exponential backoff, forever; each change of state is logged once.
//!
//! This file holds the source, its retries and its [`FrameSource`] impl; `connect.rs`
//! opens the device and negotiates, `device.rs` and `formats.rs` speak to the driver,
//! `queue.rs` runs the buffer queue.

mod choose;
mod connect;
mod device;
mod dmabuf;
mod formats;
mod queue;

pub mod list;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use connect::ConnectError;
pub use device::{BufType, ControlInfo, Device};
use dmabuf::{DmabufImporter, NoDmabufImport};
pub use formats::{RateRange, SizeRange};
use queue::{QueueEvent, Stream, StreamError};

use super::{CaptureError, CaptureStats, Down, DropReason, Frame, FrameSource, IoMode, Next};
use crate::jpeg::Scale;
use edgesight_core::cl::Gpu;
use edgesight_frame::frame::{CaptureFormat, FrameLayout, PixelFormat, Size};

/// What the configuration asks of the camera; `None` leaves the choice to the camera and
/// edgesight (the format by the rule of [`choose`], the current size and rate, the first
/// I/O mode that works).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Request {
    /// The format to ask for (pixels or MJPEG); `None` chooses among those the camera offers.
    pub format: Option<CaptureFormat>,
    /// Frame width and height in pixels; `None` keeps the camera's current size.
    pub size: Option<Size>,
    /// Frames per second; `None` keeps the camera's current rate.
    pub fps: Option<f64>,
    /// The I/O mode to pin; `None` tries dmabuf, userptr and mmap in turn.
    pub io: Option<IoMode>,
    /// JPEG frames decoded at this fraction of their size.
    pub scale: Scale,
}

/// What the camera agreed to.
#[derive(Clone, Debug, PartialEq)]
pub struct Negotiated {
    /// What the camera sends.
    pub delivered: CaptureFormat,
    /// The camera's frame size (before a JPEG frame's scaling).
    pub camera_size: Size,
    /// The frames in the slots: the camera's, or the luma its JPEG frames decode to.
    pub layout: FrameLayout,
    /// The I/O mode that worked (or the one pinned).
    pub io: IoMode,
    /// The rate the driver reports (VIDIOC_G_PARM), where it does.
    pub fps: Option<f64>,
    /// Whether the node captures single-planar or multi-planar buffers.
    pub buf_type: BufType,
    /// Bytes per buffer the driver asked for (at least the frame's bytes).
    pub sizeimage: usize,
    /// How many buffers the driver gave for the queue.
    pub buffers: u32,
    /// The driver's name from VIDIOC_QUERYCAP, e.g. `uvcvideo`.
    pub driver: String,
    /// The device's name as its driver reports it (VIDIOC_QUERYCAP's `card`).
    pub card: String,
}

/// What a camera whose bus has no bandwidth for its stream is told to do, after the
/// driver's error: in the log, `/api/v1/cameras` and the status page.
pub const NO_BANDWIDTH: &str = "the USB controller has no bandwidth left for this format and \
     rate: use MJPEG, a lower size or rate, or another USB controller";

/// The first wait before reopening a lost camera, doubled after each failure up to
/// [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// With no frame for this long (or four frame periods, if longer) the camera is lost.
const STALL: Duration = Duration::from_secs(2);

/// An open device and its running stream. `dev` is `None` once closed.
struct Connection {
    dev: Option<Device>,
    stream: Stream,
}

impl Connection {
    /// Stops the stream, closes the device, and only then releases the frame slots: a
    /// device that vanished ignores STREAMOFF and may write into USERPTR slots until its
    /// fd is closed.
    fn shut_down(&mut self, gpu: Option<&Gpu>) {
        if let Some(dev) = self.dev.take() {
            self.stream.stop(&dev);
            drop(dev);
        }
        self.stream.release(gpu);
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shut_down(None);
    }
}

/// A V4L2 camera as a [`FrameSource`]: streams into the frame slots it lends, and when the
/// device is lost, tears it down and opens it again with backoff.
pub struct V4l2Source {
    path: PathBuf,
    request: Request,
    conn: Option<Connection>,
    negotiated: Option<Negotiated>,
    importer: Result<DmabufImporter, NoDmabufImport>,
    stats: CaptureStats,
    backoff: Duration,
    retry_at: Instant,
    /// The last problem logged while down, so a retry that fails the same way is quiet.
    problem: Option<String>,
    /// Whether the last attempt to connect found the bus without bandwidth for the stream.
    starved: bool,
    ever_up: bool,
    /// Sequence numbers handed out (or dropped) before this connection.
    sequence_base: u64,
    /// Sequence numbers this connection has used, and the last V4L2 sequence seen.
    stream_position: u64,
    last_v4l2_sequence: Option<u32>,
    last_buffer_at: Instant,
    /// Whether JPEG frames keep their image ([`FrameSource::keep_jpeg`]), across reconnects.
    keep_jpeg: bool,
}

fn unusable(path: &Path, message: String) -> CaptureError {
    CaptureError::Source {
        source_name: path.display().to_string(),
        message,
    }
}

impl V4l2Source {
    /// Opens `path` and starts streaming. A camera that is absent or busy now is not an
    /// error: the source starts down and keeps trying. A device that can never work (not
    /// a capture device, none of our formats, the pinned I/O mode refused) is.
    pub fn open(gpu: &Gpu, path: &Path, request: Request) -> Result<V4l2Source, CaptureError> {
        let now = Instant::now();
        let mut source = V4l2Source {
            path: path.to_path_buf(),
            request,
            conn: None,
            negotiated: None,
            importer: DmabufImporter::for_gpu(gpu),
            stats: CaptureStats::default(),
            backoff: MIN_BACKOFF,
            retry_at: now,
            problem: None,
            starved: false,
            ever_up: false,
            sequence_base: 0,
            stream_position: 0,
            last_v4l2_sequence: None,
            last_buffer_at: now,
            keep_jpeg: false,
        };
        match source.connect(gpu) {
            Ok(()) => Ok(source),
            Err(ConnectError::Unusable(message)) => Err(unusable(path, message)),
            Err(ConnectError::Cl(source_err)) => Err(CaptureError::Cl {
                source_name: path.display().to_string(),
                source: source_err,
            }),
            Err(ConnectError::Transient(message)) => {
                capture_log!("{}: down ({message}); retrying", path.display());
                source.problem = Some(message);
                source.retry_at = now + source.backoff;
                Ok(source)
            }
            Err(ConnectError::NoBandwidth(message)) => {
                capture_log!("{}: down: {message}; retrying", path.display());
                source.problem = Some(message);
                source.starved = true;
                source.retry_at = now + source.backoff;
                Ok(source)
            }
        }
    }

    /// What the camera agreed to at the last successful open.
    pub fn negotiated(&self) -> Option<&Negotiated> {
        self.negotiated.as_ref()
    }

    /// Counts the sequence numbers a dequeued buffer used: its own and any it skipped.
    fn account(&mut self, v4l2_sequence: u32) -> u64 {
        let expected = self.last_v4l2_sequence.map_or(0, |s| s.wrapping_add(1));
        let gap = v4l2_sequence.wrapping_sub(expected);
        // A sequence that went backwards (a driver restarting its count) is no gap.
        let gap = if gap < 1 << 31 { u64::from(gap) } else { 0 };
        self.stats.dropped[DropReason::SequenceGap as usize] += gap;
        self.stream_position += gap + 1;
        self.last_v4l2_sequence = Some(v4l2_sequence);
        self.last_buffer_at = Instant::now();
        self.sequence_base + self.stream_position - 1
    }

    /// Logs why a retry failed, once per distinct reason, and waits longer before the next.
    fn still_down(&mut self, message: String) {
        if self.problem.as_deref() != Some(message.as_str()) {
            capture_log!("{}: still down ({message})", self.path.display());
            self.problem = Some(message);
        }
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        self.retry_at = Instant::now() + self.backoff;
    }

    fn stall_limit(&self) -> Duration {
        let period = self
            .negotiated
            .as_ref()
            .and_then(|n| n.fps)
            .filter(|f| *f > 0.0)
            .and_then(|f| super::frames_time(4.0, f))
            .unwrap_or(Duration::ZERO);
        STALL.max(period)
    }
}

impl FrameSource for V4l2Source {
    fn describe(&self) -> String {
        match &self.negotiated {
            Some(n) if n.delivered == CaptureFormat::Mjpeg => format!(
                "V4L2 {} ({} {}) mjpeg {} decoded to luma {}x{} io {}",
                self.path.display(),
                n.card,
                n.driver,
                n.camera_size,
                n.layout.width,
                n.layout.height,
                n.io
            ),
            Some(n) => format!(
                "V4L2 {} ({} {}) {} {}x{} io {}",
                self.path.display(),
                n.card,
                n.driver,
                n.layout.format,
                n.layout.width,
                n.layout.height,
                n.io
            ),
            None => format!("V4L2 {}", self.path.display()),
        }
    }

    /// The negotiated layout; before the camera was ever up, the requested one (grey
    /// 640x480 where nothing was asked; JPEG frames as grey ones at their scale).
    fn layout(&self) -> FrameLayout {
        match &self.negotiated {
            Some(n) => n.layout,
            None => {
                let size = self.request.size.unwrap_or(Size {
                    width: 640,
                    height: 480,
                });
                let (format, size) = match self.request.format.and_then(CaptureFormat::pixels) {
                    Some(format) => (format, size),
                    None => (PixelFormat::Grey, self.request.scale.apply(size)),
                };
                FrameLayout::packed(format, size.width, size.height)
            }
        }
    }

    fn io_mode(&self) -> IoMode {
        self.negotiated
            .as_ref()
            .map(|n| n.io)
            .or(self.request.io)
            .unwrap_or(IoMode::Mmap)
    }

    fn is_up(&self) -> bool {
        self.conn.is_some()
    }

    fn down(&self) -> Down<'_> {
        match (&self.problem, self.starved) {
            (Some(error), true) => Down::NoBandwidth { error },
            _ => Down::Absent,
        }
    }

    fn capture_format(&self) -> CaptureFormat {
        match &self.negotiated {
            Some(n) => n.delivered,
            None => self
                .request
                .format
                .unwrap_or(CaptureFormat::Pixels(self.layout().format)),
        }
    }

    fn keep_jpeg(&mut self, keep: bool) {
        self.keep_jpeg = keep;
    }

    fn frame_rate(&self) -> Option<f64> {
        self.negotiated
            .as_ref()
            .and_then(|n| n.fps)
            .filter(|f| *f > 0.0)
    }

    fn stats(&self) -> CaptureStats {
        self.stats
    }

    fn next_frame(&mut self, gpu: &Gpu, wait: Duration) -> Result<Next<'_>, CaptureError> {
        let deadline = Instant::now() + wait;
        let (index, sequence, captured, decoded) = loop {
            let Some(conn) = self.conn.as_mut() else {
                let now = Instant::now();
                if now < self.retry_at {
                    if now >= deadline {
                        return Ok(Next::Idle);
                    }
                    std::thread::sleep(self.retry_at.min(deadline) - now);
                    continue;
                }
                match self.connect(gpu) {
                    Ok(()) => {
                        capture_log!(
                            "{}: up again after {} reconnect(s)",
                            self.path.display(),
                            self.stats.reconnects
                        );
                    }
                    Err(ConnectError::Cl(source)) => {
                        return Err(CaptureError::Cl {
                            source_name: self.path.display().to_string(),
                            source,
                        })
                    }
                    Err(ConnectError::Unusable(message) | ConnectError::Transient(message)) => {
                        self.starved = false;
                        self.still_down(message);
                    }
                    Err(ConnectError::NoBandwidth(message)) => {
                        self.starved = true;
                        self.still_down(message);
                    }
                }
                continue;
            };
            let Some(dev) = conn.dev.as_ref() else {
                self.lose(gpu, "device closed".into());
                continue;
            };
            conn.stream.keep_jpeg(self.keep_jpeg);
            match conn.stream.next(gpu, dev, deadline) {
                Ok(QueueEvent::Frame {
                    index,
                    sequence,
                    captured,
                    decoded,
                }) => break (index, self.account(sequence), captured, decoded),
                Ok(QueueEvent::Dropped { reason, sequence }) => {
                    self.account(sequence);
                    self.stats.dropped[reason as usize] += 1;
                }
                Ok(QueueEvent::Timeout) => {
                    let quiet = self.last_buffer_at.elapsed();
                    if quiet < self.stall_limit() {
                        return Ok(Next::Idle);
                    }
                    self.lose(gpu, format!("no frame for {:.1} s", quiet.as_secs_f64()));
                }
                Err(StreamError::Lost(reason)) => self.lose(gpu, reason),
                Err(StreamError::Cl(source)) => {
                    return Err(CaptureError::Cl {
                        source_name: self.path.display().to_string(),
                        source,
                    })
                }
            }
        };
        self.stats.frames += 1;
        let layout = self.layout();
        let stream = self.conn.as_ref().map(|c| &c.stream);
        let slot = stream
            .and_then(|s| s.slot(index))
            .ok_or_else(|| unusable(&self.path, format!("no frame slot {index}")))?;
        Ok(Next::Frame(Frame {
            slot,
            layout,
            sequence,
            captured,
            decoded,
            jpeg: stream.and_then(|s| s.jpeg()),
        }))
    }
}
