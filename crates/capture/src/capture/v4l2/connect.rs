//! Connecting a V4L2 source: opening the device, negotiating format, size, frame rate and
//! I/O mode (the driver has the last word, and each refusal is logged), starting the
//! stream, and the bookkeeping when a connection comes up or is lost.

use std::time::Instant;

use super::choose::{choose, Offer};
use super::formats::{self, fourcc_name, v4l2_fourcc, RateRange, SizeRange};
use super::queue::{JpegFrames, StartError, Stream};
use super::{Connection, Device, Negotiated, V4l2Source, MIN_BACKOFF};
use crate::capture::IoMode;
use crate::jpeg::{LumaDecoder, Scale};
use edgesight_core::cl::Gpu;
use edgesight_frame::frame::{CaptureFormat, Size};

/// Whether the camera offers `code` at `size` and at least `fps` (a hundredth less passes:
/// drivers round 30 to 29.97); `None` where its driver lists no sizes or rates.
fn fits(dev: &Device, code: u32, size: Size, fps: Option<f64>) -> Option<bool> {
    let sizes = dev.frame_sizes(code);
    if sizes.is_empty() {
        return None;
    }
    let on_step = |v: u32, min: u32, max: u32, step: u32| {
        (min..=max).contains(&v) && (v - min).is_multiple_of(step.max(1))
    };
    let has_size = sizes.iter().any(|range| match *range {
        SizeRange::Discrete(s) => s == size,
        SizeRange::Stepwise { min, max, step } => {
            on_step(size.width, min.width, max.width, step.0)
                && on_step(size.height, min.height, max.height, step.1)
        }
    });
    if !has_size {
        return Some(false);
    }
    let Some(fps) = fps else {
        return Some(true);
    };
    let rates = dev.frame_rates(code, size);
    if rates.is_empty() {
        return None;
    }
    Some(rates.iter().any(|rate| match *rate {
        RateRange::Discrete(f) => f >= 0.99 * fps,
        RateRange::Range { max, .. } => max >= 0.99 * fps,
    }))
}

/// Whether `driver`'s answer `e` to VIDIOC_STREAMON says the USB bus cannot carry the
/// stream: ENOSPC, the host controller's answer when the periodic bandwidth it has left
/// (the other cameras on it hold theirs) is too little for the format, size and rate; and
/// uvcvideo's EIO, its answer when none of the camera's alternate settings is fast enough
/// for them.
pub(super) fn out_of_bandwidth(driver: &str, e: &std::io::Error) -> bool {
    match e.raw_os_error() {
        Some(libc::ENOSPC) => true,
        Some(libc::EIO) => driver == "uvcvideo",
        _ => false,
    }
}

/// Why a connection attempt failed.
pub(super) enum ConnectError {
    /// The device is not something we can use (not a capture device, no format we read,
    /// the pinned I/O mode refused): fatal at start, retried after the camera was up once.
    Unusable(String),
    /// Gone, busy, or an error that may pass.
    Transient(String),
    /// The device is there, but its bus cannot carry the stream (see
    /// [`out_of_bandwidth`]): retried like a transient error, shown as its own state.
    NoBandwidth(String),
    Cl(edgesight_core::cl::ClError),
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
        let size = self.request.size.unwrap_or(Size {
            width: current.width,
            height: current.height,
        });
        let code = self.format_code(&dev, &offered, current.fourcc, size)?;
        let delivered = formats::capture_format(code).ok_or_else(|| {
            ConnectError::Unusable(format!(
                "{} is not a format edgesight reads",
                fourcc_name(code)
            ))
        })?;
        let chosen = dev
            .set_format(buf_type, code, size)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::EBUSY) | Some(libc::ENODEV) | Some(libc::EIO) => {
                    ConnectError::Transient(format!("VIDIOC_S_FMT: {e}"))
                }
                _ => ConnectError::Unusable(format!("VIDIOC_S_FMT {delivered} {size}: {e}")),
            })?;
        if chosen.fourcc != code {
            return Err(ConnectError::Unusable(format!(
                "asked for {delivered} ({}), the driver chose {}",
                fourcc_name(code),
                fourcc_name(chosen.fourcc)
            )));
        }
        if chosen.planes != 1 {
            return Err(ConnectError::Unusable(format!(
                "{delivered} needs {} planes here; edgesight reads single-plane buffers",
                chosen.planes
            )));
        }
        let scale = self.request.scale;
        let layout = chosen.layout(scale).ok_or_else(|| {
            ConnectError::Unusable(format!(
                "the driver's {delivered} {}x{} with {} bytes per line is not a frame edgesight can process",
                chosen.width, chosen.height, chosen.bytesperline
            ))
        })?;
        let camera_size = Size {
            width: chosen.width,
            height: chosen.height,
        };
        if camera_size != size {
            capture_log!(
                "{path}: asked for {size}, the driver chose {}x{}",
                chosen.width,
                chosen.height
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
        let jpeg = delivered == CaptureFormat::Mjpeg;
        let modes: Vec<IoMode> = match self.request.io {
            Some(mode) if jpeg && mode != IoMode::Mmap => {
                return Err(ConnectError::Unusable(format!(
                    "io {mode}: MJPEG frames are decoded on the CPU from V4L2's own buffers; \
                     use io = \"mmap\" (or leave io out)"
                )))
            }
            Some(mode) => vec![mode],
            None if jpeg => vec![IoMode::Mmap],
            None => IoMode::CAMERA_ORDER.to_vec(),
        };
        let mut decoder = if jpeg {
            Some(LumaDecoder::new().map_err(|e| ConnectError::Unusable(e.to_string()))?)
        } else {
            None
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
            let frames = decoder.take().map(|decoder| JpegFrames {
                decoder,
                size: camera_size,
                scale,
                pitch: layout.stride as usize,
                logged: false,
                keep: false,
                kept: Vec::new(),
            });
            match Stream::start(
                gpu,
                &dev,
                buf_type,
                mode,
                layout,
                chosen.sizeimage as usize,
                importer,
                frames,
            ) {
                Ok(stream) => {
                    let negotiated = Negotiated {
                        delivered,
                        camera_size,
                        layout,
                        io: mode,
                        fps,
                        buf_type,
                        sizeimage: (chosen.sizeimage as usize).max(layout.frame_bytes()),
                        buffers: stream.buffer_count(),
                        driver: caps.driver.clone(),
                        card: caps.card.clone(),
                    };
                    let decoded = if jpeg {
                        format!(" decoded to luma {}x{}", layout.width, layout.height)
                    } else {
                        String::new()
                    };
                    capture_log!(
                        "{path}: streaming {delivered} {}x{} (stride {}){decoded} {} at {} fps, io {mode}, {} buffers",
                        chosen.width,
                        chosen.height,
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
                // Another I/O mode moves the same bytes over the same bus: no use trying.
                Err(StartError::Streamon(e)) if out_of_bandwidth(&caps.driver, &e) => {
                    return Err(ConnectError::NoBandwidth(format!(
                        "VIDIOC_STREAMON: {e}: {}",
                        super::NO_BANDWIDTH
                    )))
                }
                Err(StartError::Streamon(e)) => {
                    return Err(ConnectError::Transient(format!(
                        "{mode}: VIDIOC_STREAMON: {e}"
                    )))
                }
                Err(StartError::Cl(e)) => return Err(ConnectError::Cl(e)),
            }
        }
        Err(ConnectError::Unusable(format!(
            "no I/O mode works ({})",
            refusals.join("; ")
        )))
    }

    /// The format to stream: the one asked for (refused if the camera does not offer
    /// it), or the rule of [`choose`] over what it offers at `size` and the rate asked for.
    fn format_code(
        &self,
        dev: &Device,
        offered: &[u32],
        current: u32,
        size: Size,
    ) -> Result<u32, ConnectError> {
        let names = || {
            offered
                .iter()
                .map(|&c| fourcc_name(c))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self.request.format {
            Some(CaptureFormat::Mjpeg) => formats::JPEG_FOURCCS
                .into_iter()
                .find(|c| offered.contains(c) || offered.is_empty())
                .ok_or_else(|| {
                    ConnectError::Unusable(format!(
                        "does not offer mjpeg (MJPG or JPEG); it offers {}",
                        names()
                    ))
                }),
            Some(CaptureFormat::Pixels(f)) => {
                let code = v4l2_fourcc(f);
                if !offered.is_empty() && !offered.contains(&code) {
                    return Err(ConnectError::Unusable(format!(
                        "does not offer {f} ({}); it offers {}",
                        fourcc_name(code),
                        names()
                    )));
                }
                Ok(code)
            }
            None => {
                let asked = self.request.size.is_some() || self.request.fps.is_some();
                let offers: Vec<Offer> = offered
                    .iter()
                    .map(|&code| Offer {
                        code,
                        fits: if asked {
                            fits(dev, code, size, self.request.fps)
                        } else {
                            Some(true)
                        },
                    })
                    .collect();
                let jpeg_only = self.request.scale != Scale::Full;
                let (code, why) = choose(&offers, current, jpeg_only)
                    .map_err(|e| ConnectError::Unusable(e.to_string()))?;
                if !self.ever_up {
                    capture_log!(
                        "{}: no format configured; streaming {} ({why})",
                        self.path.display(),
                        fourcc_name(code)
                    );
                }
                Ok(code)
            }
        }
    }

    /// Bookkeeping once a connection works.
    fn up(&mut self, negotiated: Negotiated) {
        if self.ever_up {
            self.stats.reconnects += 1;
        }
        self.ever_up = true;
        self.starved = false;
        // A reconnect keeps the first negotiation's format and size, so frames keep the
        // layout the caller's pipeline was built for.
        self.request.format = Some(negotiated.delivered);
        self.request.size = Some(negotiated.camera_size);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// ENOSPC from any driver, and EIO from uvcvideo only, say the bus is out of
    /// bandwidth; a vanished device or another driver's EIO do not.
    #[test]
    fn the_answers_that_mean_no_usb_bandwidth() {
        let e = std::io::Error::from_raw_os_error;
        assert!(out_of_bandwidth("uvcvideo", &e(libc::ENOSPC)));
        assert!(out_of_bandwidth("vivid", &e(libc::ENOSPC)));
        assert!(out_of_bandwidth("uvcvideo", &e(libc::EIO)));
        assert!(!out_of_bandwidth("vivid", &e(libc::EIO)));
        assert!(!out_of_bandwidth("uvcvideo", &e(libc::ENODEV)));
        assert!(!out_of_bandwidth("uvcvideo", &e(libc::EBUSY)));
    }
}
