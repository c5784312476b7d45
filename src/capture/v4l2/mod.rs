//! The V4L2 camera source: owns the device's fd and its buffer queue, fills the frame slots
//! it lends the caller, and keeps going when the camera does not. Knows nothing of kernels
//! or metrics.
//!
//! Opening negotiates the format, size and frame rate (the driver has the last word; its
//! `bytesperline` becomes the layout's stride) and tries the I/O modes dmabuf, userptr,
//! mmap in that order unless one is pinned, logging each refusal. A device that vanishes
//! (ENODEV, EIO, no frame for a while) is torn down completely and opened again with
//! exponential backoff, forever; each change of state is logged once.

mod device;
mod dmabuf;
mod formats;
mod queue;

pub mod list;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use device::{control_key, BufType, ControlInfo, Device};
use dmabuf::DmabufImporter;
pub use formats::{fourcc_name, v4l2_fourcc};
use queue::{Event, StartError, Stream, StreamError};

use super::{CaptureError, CaptureStats, DropReason, Frame, FrameSource, IoMode, Next};
use crate::cl::Gpu;
use crate::frame::{FrameLayout, PixelFormat, Size};

/// What the configuration asks of the camera; `None` leaves the choice to the driver (its
/// current format and size, its current rate, the first I/O mode that works).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Request {
    pub format: Option<PixelFormat>,
    pub size: Option<Size>,
    pub fps: Option<f64>,
    pub io: Option<IoMode>,
}

/// What the camera agreed to.
#[derive(Clone, Debug, PartialEq)]
pub struct Negotiated {
    pub layout: FrameLayout,
    pub io: IoMode,
    /// The rate the driver reports (VIDIOC_G_PARM), where it does.
    pub fps: Option<f64>,
    pub buf_type: BufType,
    /// Bytes per buffer the driver asked for (at least the frame's bytes).
    pub sizeimage: usize,
    pub buffers: u32,
    pub driver: String,
    pub card: String,
}

/// The first wait before reopening a lost camera, doubled after each failure up to
/// [`MAX_BACKOFF`].
pub const MIN_BACKOFF: Duration = Duration::from_millis(100);
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// With no frame for this long (or four frame periods, if longer) the camera is lost.
const STALL: Duration = Duration::from_secs(2);

/// Why a connection attempt failed.
enum ConnectError {
    /// The device is not something we can use (not a capture device, no format we read,
    /// the pinned I/O mode refused): fatal at start, retried after the camera was up once.
    Unusable(String),
    /// Gone, busy, or an error that may pass.
    Transient(String),
    Cl(crate::cl::ClError),
}

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

pub struct V4l2Source {
    path: PathBuf,
    request: Request,
    conn: Option<Connection>,
    negotiated: Option<Negotiated>,
    importer: Result<DmabufImporter, String>,
    stats: CaptureStats,
    backoff: Duration,
    retry_at: Instant,
    /// The last problem logged while down, so a retry that fails the same way is quiet.
    problem: Option<String>,
    ever_up: bool,
    /// Sequence numbers handed out (or dropped) before this connection.
    sequence_base: u64,
    /// Sequence numbers this connection has used, and the last V4L2 sequence seen.
    stream_position: u64,
    last_v4l2_sequence: Option<u32>,
    last_buffer_at: Instant,
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
            ever_up: false,
            sequence_base: 0,
            stream_position: 0,
            last_v4l2_sequence: None,
            last_buffer_at: now,
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
        }
    }

    /// What the camera agreed to at the last successful open.
    pub fn negotiated(&self) -> Option<&Negotiated> {
        self.negotiated.as_ref()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the device, negotiates and starts a stream; on success the source is up.
    fn connect(&mut self, gpu: &Gpu) -> Result<(), ConnectError> {
        let path = self.path.display().to_string();
        let dev =
            Device::open(&self.path).map_err(|e| ConnectError::Transient(format!("open: {e}")))?;
        let caps = dev.query_caps().map_err(|e| match e.raw_os_error() {
            Some(libc::ENOTTY) | Some(libc::EINVAL) => {
                ConnectError::Unusable("not a V4L2 device (VIDIOC_QUERYCAP refused)".into())
            }
            _ => ConnectError::Transient(format!("VIDIOC_QUERYCAP: {e}")),
        })?;
        let buf_type = caps.capture_type().ok_or_else(|| {
            ConnectError::Unusable(format!(
                "{} ({}) is not a video capture device",
                caps.card, caps.driver
            ))
        })?;
        if !caps.streaming() {
            return Err(ConnectError::Unusable(format!(
                "{} ({}) cannot stream (no V4L2_CAP_STREAMING)",
                caps.card, caps.driver
            )));
        }
        let offered: Vec<u32> = dev.formats(buf_type).into_iter().map(|(c, _)| c).collect();
        let current = dev
            .get_format(buf_type)
            .map_err(|e| ConnectError::Transient(format!("VIDIOC_G_FMT: {e}")))?;
        let format = match self.request.format {
            Some(f) => {
                if !offered.is_empty() && !offered.contains(&v4l2_fourcc(f)) {
                    return Err(ConnectError::Unusable(format!(
                        "does not offer {f} ({}); it offers {}",
                        fourcc_name(v4l2_fourcc(f)),
                        offered.iter().map(|&c| fourcc_name(c)).collect::<Vec<_>>().join(", ")
                    )));
                }
                f
            }
            None => formats::pixel_format(current.fourcc)
                .filter(|_| offered.contains(&current.fourcc) || offered.is_empty())
                .or_else(|| offered.iter().find_map(|&c| formats::pixel_format(c)))
                .ok_or_else(|| {
                    ConnectError::Unusable(format!(
                        "offers none of the formats edgesight reads (grey, yuyv, uyvy, nv12, rgb24, bgr24, rgbx, bgrx); it offers {}",
                        offered.iter().map(|&c| fourcc_name(c)).collect::<Vec<_>>().join(", ")
                    ))
                })?,
        };
        let size = self.request.size.unwrap_or(Size {
            width: current.width,
            height: current.height,
        });
        let code = v4l2_fourcc(format);
        let chosen = dev
            .set_format(buf_type, code, size)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::EBUSY) | Some(libc::ENODEV) | Some(libc::EIO) => {
                    ConnectError::Transient(format!("VIDIOC_S_FMT: {e}"))
                }
                _ => ConnectError::Unusable(format!("VIDIOC_S_FMT {format} {size}: {e}")),
            })?;
        if chosen.fourcc != code {
            return Err(ConnectError::Unusable(format!(
                "asked for {format} ({}), the driver chose {}",
                fourcc_name(code),
                fourcc_name(chosen.fourcc)
            )));
        }
        if chosen.planes != 1 {
            return Err(ConnectError::Unusable(format!(
                "{format} needs {} planes here; edgesight reads single-plane buffers",
                chosen.planes
            )));
        }
        let layout = chosen.layout().ok_or_else(|| {
            ConnectError::Unusable(format!(
                "the driver's {format} {}x{} with {} bytes per line is not a frame edgesight can process",
                chosen.width, chosen.height, chosen.bytesperline
            ))
        })?;
        if (layout.width, layout.height) != (size.width, size.height) {
            capture_log!(
                "{path}: asked for {size}, the driver chose {}x{}",
                layout.width,
                layout.height
            );
        }
        let fps = match self.request.fps {
            Some(want) => match dev.set_fps(buf_type, want) {
                Ok(Some(got)) => {
                    if (got - want).abs() > 0.01 * want {
                        capture_log!("{path}: asked for {want} fps, the driver runs at {got:.3}");
                    }
                    Some(got)
                }
                Ok(None) => {
                    capture_log!("{path}: the driver cannot set a frame rate; running at its own");
                    dev.get_fps(buf_type)
                }
                Err(e) => {
                    capture_log!(
                        "{path}: VIDIOC_S_PARM {want} fps: {e}; running at the driver's rate"
                    );
                    dev.get_fps(buf_type)
                }
            },
            None => dev.get_fps(buf_type),
        };
        let modes: Vec<IoMode> = match self.request.io {
            Some(mode) => vec![mode],
            None => IoMode::CAMERA_ORDER.to_vec(),
        };
        let mut refusals = Vec::new();
        for mode in modes {
            let importer = self.importer.as_ref().ok();
            if mode == IoMode::Dmabuf {
                if let Err(why) = &self.importer {
                    refusals.push(format!("dmabuf: {why}"));
                    if self.request.io.is_none() && !self.ever_up {
                        capture_log!(
                            "{path}: dmabuf unavailable ({why}); trying the next I/O mode"
                        );
                    }
                    continue;
                }
            }
            match Stream::start(
                gpu,
                &dev,
                buf_type,
                mode,
                layout,
                chosen.sizeimage as usize,
                importer,
            ) {
                Ok(stream) => {
                    let negotiated = Negotiated {
                        layout,
                        io: mode,
                        fps,
                        buf_type,
                        sizeimage: (chosen.sizeimage as usize).max(layout.frame_bytes()),
                        buffers: stream.buffer_count(),
                        driver: caps.driver.clone(),
                        card: caps.card.clone(),
                    };
                    capture_log!(
                        "{path}: streaming {} {}x{} (stride {}) {} at {} fps, io {mode}, {} buffers",
                        layout.format,
                        layout.width,
                        layout.height,
                        layout.stride,
                        buf_type.name(),
                        fps.map(|f| format!("{f:.3}")).unwrap_or_else(|| "unknown".into()),
                        stream.buffer_count()
                    );
                    self.conn = Some(Connection {
                        dev: Some(dev),
                        stream,
                    });
                    self.up(negotiated);
                    return Ok(());
                }
                Err(StartError::Refused(why)) => {
                    if self.request.io.is_none() {
                        capture_log!("{path}: {mode} refused ({why}); trying the next I/O mode");
                    }
                    refusals.push(format!("{mode}: {why}"));
                }
                Err(StartError::Failed(why)) => {
                    return Err(ConnectError::Transient(format!("{mode}: {why}")))
                }
                Err(StartError::Cl(e)) => return Err(ConnectError::Cl(e)),
            }
        }
        Err(ConnectError::Unusable(format!(
            "no I/O mode works ({})",
            refusals.join("; ")
        )))
    }

    /// Bookkeeping once a connection works.
    fn up(&mut self, negotiated: Negotiated) {
        if self.ever_up {
            self.stats.reconnects += 1;
        }
        self.ever_up = true;
        // A reconnect keeps the first negotiation's format and size, so frames keep the
        // layout the caller's pipeline was built for.
        self.request.format = Some(negotiated.layout.format);
        self.request.size = Some(Size {
            width: negotiated.layout.width,
            height: negotiated.layout.height,
        });
        self.negotiated = Some(negotiated);
        self.problem = None;
        self.backoff = MIN_BACKOFF;
        self.sequence_base += self.stream_position;
        self.stream_position = 0;
        self.last_v4l2_sequence = None;
        self.last_buffer_at = Instant::now();
    }

    /// Tears the connection down after `reason` and schedules the first retry.
    fn lose(&mut self, gpu: &Gpu, reason: String) {
        if let Some(mut conn) = self.conn.take() {
            conn.shut_down(Some(gpu));
        }
        capture_log!("{}: lost ({reason}); reconnecting", self.path.display());
        self.problem = Some(reason);
        self.backoff = MIN_BACKOFF;
        self.retry_at = Instant::now() + self.backoff;
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
    /// 640x480 where nothing was asked).
    fn layout(&self) -> FrameLayout {
        match &self.negotiated {
            Some(n) => n.layout,
            None => {
                let size = self.request.size.unwrap_or(Size {
                    width: 640,
                    height: 480,
                });
                FrameLayout::packed(
                    self.request.format.unwrap_or(PixelFormat::Grey),
                    size.width,
                    size.height,
                )
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

    fn stats(&self) -> CaptureStats {
        self.stats
    }

    fn next_frame(&mut self, gpu: &Gpu, wait: Duration) -> Result<Next<'_>, CaptureError> {
        let deadline = Instant::now() + wait;
        let (index, sequence, captured) = loop {
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
                        if self.problem.as_deref() != Some(message.as_str()) {
                            capture_log!("{}: still down ({message})", self.path.display());
                            self.problem = Some(message);
                        }
                        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
                        self.retry_at = Instant::now() + self.backoff;
                    }
                }
                continue;
            };
            let Some(dev) = conn.dev.as_ref() else {
                self.lose(gpu, "device closed".into());
                continue;
            };
            match conn.stream.next(gpu, dev, deadline) {
                Ok(Event::Frame {
                    index,
                    sequence,
                    captured,
                }) => break (index, self.account(sequence), captured),
                Ok(Event::Dropped { reason, sequence }) => {
                    self.account(sequence);
                    self.stats.dropped[reason as usize] += 1;
                }
                Ok(Event::Timeout) => {
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
        let slot = self
            .conn
            .as_ref()
            .and_then(|c| c.stream.slot(index))
            .ok_or_else(|| unusable(&self.path, format!("no frame slot {index}")))?;
        Ok(Next::Frame(Frame {
            slot,
            layout,
            sequence,
            captured,
        }))
    }
}
