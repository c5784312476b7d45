//! Connecting a V4L2 source: opening the device, negotiating format, size, frame rate and
//! I/O mode (the driver has the last word, and each refusal is logged), starting the
//! stream, and the bookkeeping when a connection comes up or is lost.

use std::time::Instant;

use super::formats::{self, fourcc_name, v4l2_fourcc};
use super::queue::{StartError, Stream};
use super::{Connection, Device, Negotiated, V4l2Source, MIN_BACKOFF};
use crate::capture::IoMode;
use crate::cl::Gpu;
use crate::frame::Size;

/// Why a connection attempt failed.
pub(super) enum ConnectError {
    /// The device is not something we can use (not a capture device, no format we read,
    /// the pinned I/O mode refused): fatal at start, retried after the camera was up once.
    Unusable(String),
    /// Gone, busy, or an error that may pass.
    Transient(String),
    Cl(crate::cl::ClError),
}

impl V4l2Source {
    /// Opens the device, negotiates and starts a stream; on success the source is up.
    pub(super) fn connect(&mut self, gpu: &Gpu) -> Result<(), ConnectError> {
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
    pub(super) fn lose(&mut self, gpu: &Gpu, reason: String) {
        if let Some(mut conn) = self.conn.take() {
            conn.shut_down(Some(gpu));
        }
        capture_log!("{}: lost ({reason}); reconnecting", self.path.display());
        self.problem = Some(reason);
        self.backoff = MIN_BACKOFF;
        self.retry_at = Instant::now() + self.backoff;
    }
}
