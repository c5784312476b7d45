//! Frame sources: where frames come from before the pipeline sees them.
//!
//! Every source hands out frames that already lie in a [`FrameSlot`] (a host-mapped
//! OpenCL buffer), so the pipeline's first kernel reads them where they landed. A source
//! owns its slots: a camera keeps several queued with the driver while the caller works
//! on the one it was given, which is what overlaps capture with processing.
//!
//! The contract every source keeps:
//! - [`FrameSource::next_frame`] waits at most about the `wait` it is given, so a caller can
//!   check for shutdown between calls; [`Next::Idle`] means "nothing yet, call again".
//! - The frame it returns stays valid until the next call; that call gives its slot back.
//! - Transient trouble (a camera gone, a bad buffer) is handled inside the source: it is
//!   counted in [`CaptureStats`], reflected in [`FrameSource::is_up`], and never an `Err`.
//!   An `Err` means the source cannot go on at all (an OpenCL failure, say).
//!
//! One room, long as it is: the `FrameSource` contract, the types every source shares
//! and the builder from source specs, and their unit tests.

/// Logs a state change of a source (a mode refused, a camera lost or back) through
/// `tracing`, so the daemon's subscriber and `capture`'s stderr both show it.
#[macro_export]
macro_rules! capture_log {
    ($($arg:tt)*) => {
        tracing::info!(target: "edgesight::capture", "{}", format_args!($($arg)*))
    };
}

mod parse;
mod parts;
pub mod pattern;
pub mod replay;
mod spec;
pub mod v4l2;

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use edgesight_core::cl::{ClError, FrameSlot, Gpu};
use edgesight_frame::frame::{CaptureFormat, FrameLayout};

/// The sources' own reason for a lost frame, kept below capture so that what reads the
/// drops (`mailbox`, the metrics) need not import capture.
pub use edgesight_frame::frame::DropReason;
pub use parse::InvalidSource;
pub use parts::{BadParts, SourceKind, SourcePart, SourceParts};
pub(crate) use pattern::PatternSource;
pub(crate) use replay::ReplaySource;
pub use spec::{check_frame_size, parse_fps, BadFps, BadFrameSize, SourceSpec, MAX_FRAME_SIDE};
pub use spec::{MAX_FPS, MIN_FPS};
pub use v4l2::V4l2Source;

/// How frames reach the slots; exported as a metric label and logged when chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IoMode {
    /// V4L2 exports its buffers as dma-bufs and OpenCL imports them: no copy at all.
    Dmabuf,
    /// V4L2 writes straight into the mapped OpenCL buffers.
    Userptr,
    /// V4L2's own buffers, mapped, copied once into a slot.
    Mmap,
    /// Frames written by the program itself (test pattern, replay).
    Generated,
}

impl IoMode {
    /// The camera modes, in the order they are tried.
    pub(crate) const CAMERA_ORDER: [IoMode; 3] = [IoMode::Dmabuf, IoMode::Userptr, IoMode::Mmap];

    /// The mode's name as the config, the metric label and the logs spell it ("dmabuf", ...).
    pub fn name(self) -> &'static str {
        match self {
            IoMode::Dmabuf => "dmabuf",
            IoMode::Userptr => "userptr",
            IoMode::Mmap => "mmap",
            IoMode::Generated => "generated",
        }
    }
}

impl fmt::Display for IoMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An I/O mode name that is none of the camera modes; holds the text as it was given.
#[derive(Debug, thiserror::Error)]
#[error("unknown I/O mode '{0}' (expected dmabuf, userptr or mmap)")]
pub struct UnknownIoMode(pub String);

impl FromStr for IoMode {
    type Err = UnknownIoMode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        IoMode::CAMERA_ORDER
            .into_iter()
            .find(|m| m.name() == s.to_ascii_lowercase())
            .ok_or_else(|| UnknownIoMode(s.to_string()))
    }
}

/// One captured frame, in a slot that is ready for kernels on the source's queue.
pub struct Frame<'a> {
    /// The slot the frame's bytes lie in, lent until the next call to `next_frame`.
    pub slot: &'a FrameSlot,
    /// The frame in the slot: pixel format, width and height in pixels, row stride in bytes.
    pub layout: FrameLayout,
    /// The source's frame counter (V4L2's `sequence` for a camera).
    pub sequence: u64,
    /// When the frame was complete, on the monotonic clock (the driver's timestamp for a
    /// camera): the start of the frame's latency.
    pub captured: Instant,
    /// Host time spent decoding the frame into its slot (JPEG frames); `None` for frames
    /// that arrive as pixels.
    pub decoded: Option<Duration>,
    /// The frame as the JPEG image it arrived as (an MJPEG camera's or recording's), where
    /// the source has it: a recording always, a camera when asked beforehand
    /// ([`FrameSource::keep_jpeg`]), since its buffer goes back to the driver at once.
    pub jpeg: Option<&'a [u8]>,
}

/// What [`FrameSource::next_frame`] found.
pub enum Next<'a> {
    /// A frame arrived; it stays valid until the next call.
    Frame(Frame<'a>),
    /// No frame within the wait (pacing, a camera reconnecting); call again.
    Idle,
}

/// Counters a source keeps from its start (they survive reconnects).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaptureStats {
    /// Frames handed out.
    pub frames: u64,
    /// Frames lost, by [`DropReason`] (indexed by `reason as usize`).
    pub dropped: [u64; DropReason::ALL.len()],
    /// Times the device was lost and opened again.
    pub reconnects: u64,
}

impl CaptureStats {
    /// Frames lost for `reason` since the source started.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped[reason as usize]
    }

    /// Frames lost for any reason since the source started.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }
}

/// Why a source cannot go on at all; transient trouble is handled inside the source and is
/// never one of these.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The source can never work as asked (not a capture device, none of the formats read,
    /// a pinned I/O mode refused, a recording with nothing to play, a layout refused).
    #[error("{source_name}: {message}")]
    Source {
        /// The source as errors name it: a device path, `replay PATH`, a pattern's description.
        source_name: String,
        /// What is wrong, in words.
        message: String,
    },
    /// An OpenCL call on the source's frame slots failed (allocating, mapping, importing).
    #[error("{source_name}: OpenCL")]
    Cl {
        /// The source as errors name it: a device path, `replay PATH`, a pattern's description.
        source_name: String,
        /// The OpenCL failure, naming the call that failed.
        #[source]
        source: ClError,
    },
}

/// Why a source that is not up delivers no frames, as the camera's state shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Down<'a> {
    /// Absent, gone or failing: waited for and opened again.
    Absent,
    /// There, but its bus cannot carry the stream (a USB controller out of bandwidth):
    /// opened again like an absent one; `error` is the driver's answer and the advice.
    NoBandwidth {
        /// The driver's refusal of VIDIOC_STREAMON followed by [`v4l2::NO_BANDWIDTH`]'s advice.
        error: &'a str,
    },
}

/// A producer of frames. See the module documentation for the contract.
pub trait FrameSource: Send {
    /// What the source is, for logs and errors ("test pattern 1280x720 grey at 30 fps").
    fn describe(&self) -> String;
    /// The layout of the frames it produces now (after negotiation with a camera).
    fn layout(&self) -> FrameLayout;
    /// How frames reach the slots now ([`IoMode::Generated`] for the pattern and replay).
    fn io_mode(&self) -> IoMode;
    /// Whether frames can currently arrive (false while a camera is gone).
    fn is_up(&self) -> bool;
    /// Why a source that is not up delivers nothing.
    fn down(&self) -> Down<'_> {
        Down::Absent
    }
    /// The source's counters since it was opened (reconnects included).
    fn stats(&self) -> CaptureStats;
    /// Waits up to about `wait` for the next frame.
    fn next_frame(&mut self, gpu: &Gpu, wait: Duration) -> Result<Next<'_>, CaptureError>;
    /// What the source delivers: the layout's pixel format, or JPEG images whose luma
    /// fills the slots (an MJPEG camera or recording).
    fn capture_format(&self) -> CaptureFormat {
        CaptureFormat::Pixels(self.layout().format)
    }
    /// Whether the frames handed out from now on should carry their JPEG image
    /// ([`Frame::jpeg`]): a camera copies it out of the driver's buffer only while asked,
    /// as its copy costs a frame's compressed bytes. Sources without JPEG frames, and
    /// those that hold the image anyway, ignore it.
    fn keep_jpeg(&mut self, _keep: bool) {}
    /// The rate frames arrive at as the source itself knows it (a camera's driver's
    /// report, VIDIOC_G_PARM); `None` where it does not (the sources that pace themselves
    /// run at their configured rate).
    fn frame_rate(&self) -> Option<f64> {
        None
    }
}

/// The time `frames` frames take at `fps`, or `None` where that is not a duration (a rate
/// of 0, negative or NaN, or so slow that the time overflows). Every conversion of a rate
/// into a time goes through here, rates from drivers included.
pub(crate) fn frames_time(frames: f64, fps: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(frames / fps).ok()
}

/// Opens the source `spec` describes, with its slots on `gpu`.
pub fn open(spec: &SourceSpec, gpu: &Gpu) -> Result<Box<dyn FrameSource>, CaptureError> {
    match spec {
        SourceSpec::Pattern { size, format, fps } => Ok(Box::new(PatternSource::new(
            gpu,
            FrameLayout::packed(*format, size.width, size.height),
            *fps,
        )?)),
        SourceSpec::V4l2 {
            device,
            format,
            size,
            fps,
            io,
            scale,
        } => {
            let request = v4l2::Request {
                format: *format,
                size: *size,
                fps: *fps,
                io: *io,
                scale: *scale,
            };
            Ok(Box::new(V4l2Source::open(gpu, device, request)?))
        }
        SourceSpec::Replay {
            path,
            raw,
            fps,
            scale,
        } => Ok(Box::new(ReplaySource::open(gpu, path, *raw, *fps, *scale)?)),
    }
}

/// What a source's `fill` made of the slot it was lent (see [`PacedSlots::next_frame`]).
pub(crate) enum Fill {
    /// The frame is in the slot.
    Written,
    /// The frame is in the slot, decoded from a JPEG image in this much host time.
    Decoded(Duration),
    /// No frame this time: counted under the reason, and the caller sees [`Next::Idle`].
    Dropped(DropReason),
}

/// What the sources that write their own frames (test pattern, replay) share: two slots
/// used in turn, the pacer, and the counters.
pub(crate) struct PacedSlots {
    layout: FrameLayout,
    slots: [FrameSlot; 2],
    next_slot: usize,
    pacer: Pacer,
    stats: CaptureStats,
}

impl PacedSlots {
    /// Two slots for `layout` frames; `name` labels an OpenCL failure.
    pub(crate) fn new(
        gpu: &Gpu,
        layout: FrameLayout,
        fps: f64,
        name: &str,
    ) -> Result<PacedSlots, CaptureError> {
        let slot = || {
            FrameSlot::new(gpu, layout.frame_bytes()).map_err(|source| CaptureError::Cl {
                source_name: name.to_string(),
                source,
            })
        };
        Ok(PacedSlots {
            layout,
            slots: [slot()?, slot()?],
            next_slot: 0,
            pacer: Pacer::new(fps),
            stats: CaptureStats::default(),
        })
    }

    pub(crate) fn stats(&self) -> CaptureStats {
        self.stats
    }

    /// Waits for the next frame to be due, lets `fill` write frame `sequence` into the
    /// next slot, and hands that slot out. Frames skipped while the caller was busy count
    /// as sequence gaps; a frame `fill` could not make counts under the reason it gives,
    /// and its slot is used again next time.
    pub(crate) fn next_frame(
        &mut self,
        gpu: &Gpu,
        wait: Duration,
        name: impl FnOnce() -> String,
        fill: impl FnOnce(u64, &mut [u8]) -> Result<Fill, CaptureError>,
    ) -> Result<Next<'_>, CaptureError> {
        let Some((sequence, due, skipped)) = self.pacer.wait_next(wait) else {
            return Ok(Next::Idle);
        };
        self.stats.dropped[DropReason::SequenceGap as usize] += skipped;
        let index = self.next_slot;
        let [first, second] = &mut self.slots;
        let slot = if index == 0 { first } else { second };
        let filled = slot
            .write(gpu, |bytes| fill(sequence, bytes))
            .map_err(|source| CaptureError::Cl {
                source_name: name(),
                source,
            })??;
        let decoded = match filled {
            Fill::Dropped(reason) => {
                self.stats.dropped[reason as usize] += 1;
                return Ok(Next::Idle);
            }
            Fill::Decoded(time) => Some(time),
            Fill::Written => None,
        };
        self.next_slot = (index + 1) % 2;
        self.stats.frames += 1;
        Ok(Next::Frame(Frame {
            slot,
            layout: self.layout,
            sequence,
            captured: due,
            decoded,
            jpeg: None,
        }))
    }
}

/// Paces a source at a frame rate on the monotonic clock, the way a camera's sensor does:
/// frame `n` is due at `start + n / fps`, and a caller that falls behind skips frames
/// (counted as sequence gaps) instead of slowing the clock down.
///
/// [`Pacer::next_at`] takes the time as an argument, so tests drive it with a clock of
/// their own; [`Pacer::wait_next`] is the same on the real clock, with the sleeping.
#[derive(Clone, Debug)]
pub(crate) struct Pacer {
    /// Set by the first call, as a camera's clock starts with streaming, not with opening.
    start: Option<Instant>,
    period: Duration,
    /// The next sequence number to hand out.
    next: u64,
}

/// What a [`Pacer`] says at a given time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pace {
    /// Frame `sequence` is due (since `due`); `skipped` frames were missed before it.
    Due {
        sequence: u64,
        due: Instant,
        skipped: u64,
    },
    /// The next frame is due this much later.
    Wait(Duration),
}

impl Pacer {
    /// A pacer at `fps`, held to [`MIN_FPS`]..=[`MAX_FPS`] whatever the caller passes.
    pub fn new(fps: f64) -> Pacer {
        let slowest = Duration::from_secs_f64(1.0 / MIN_FPS);
        Pacer {
            start: None,
            period: frames_time(1.0, fps.clamp(MIN_FPS, MAX_FPS)).unwrap_or(slowest),
            next: 0,
        }
    }

    /// When frame `sequence` is due; `None` beyond the clock's range.
    fn due(&self, start: Instant, sequence: u64) -> Option<Instant> {
        let offset = frames_time(sequence as f64, 1.0 / self.period.as_secs_f64())?;
        start.checked_add(offset)
    }

    /// The next frame at time `now`: due (it is then handed out), or how long until it is.
    pub(crate) fn next_at(&mut self, now: Instant) -> Pace {
        let start = *self.start.get_or_insert(now);
        let Some(due) = self.due(start, self.next) else {
            return Pace::Wait(Duration::MAX);
        };
        if let Some(pause) = due.checked_duration_since(now).filter(|p| !p.is_zero()) {
            return Pace::Wait(pause);
        }
        // Late: take the newest frame already due, as a camera would deliver it.
        let elapsed = now.duration_since(start).as_secs_f64();
        let newest = (elapsed / self.period.as_secs_f64()).floor() as u64;
        let sequence = self.next.max(newest);
        let skipped = sequence - self.next;
        self.next = sequence + 1;
        Pace::Due {
            sequence,
            due: self.due(start, sequence).unwrap_or(due),
            skipped,
        }
    }

    /// Waits up to `wait` for the next frame to be due. Returns its sequence number, its due
    /// time and how many frames were skipped since the last one, or `None` if it is not due
    /// within `wait`.
    pub(crate) fn wait_next(&mut self, wait: Duration) -> Option<(u64, Instant, u64)> {
        let now = Instant::now();
        let pace = match self.next_at(now) {
            Pace::Wait(pause) if pause <= wait => {
                std::thread::sleep(pause);
                self.next_at(now + pause)
            }
            Pace::Wait(_) => {
                std::thread::sleep(wait);
                return None;
            }
            due => due,
        };
        match pace {
            Pace::Due {
                sequence,
                due,
                skipped,
            } => Some((sequence, due, skipped)),
            Pace::Wait(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn due(sequence: u64, due: Instant, skipped: u64) -> Pace {
        Pace::Due {
            sequence,
            due,
            skipped,
        }
    }

    #[test]
    fn pacer_skips_frames_a_slow_caller_missed() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let mut pacer = Pacer::new(1000.0);
        assert_eq!(pacer.next_at(t0), due(0, t0, 0));
        // 20 ms later: frames 1 to 19 were missed, frame 20 is due now.
        assert_eq!(pacer.next_at(t0 + ms(20)), due(20, t0 + ms(20), 19));
        assert_eq!(pacer.next_at(t0 + ms(20)), Pace::Wait(ms(1)));
        assert_eq!(pacer.next_at(t0 + ms(21)), due(21, t0 + ms(21), 0));
    }

    #[test]
    fn pacer_says_how_long_until_a_frame_is_due() {
        let t0 = Instant::now();
        let mut pacer = Pacer::new(1.0);
        assert_eq!(pacer.next_at(t0), due(0, t0, 0));
        let t = t0 + Duration::from_millis(10);
        assert_eq!(pacer.next_at(t), Pace::Wait(Duration::from_millis(990)));
        // Not due within the wait: nothing, and nothing handed out.
        assert_eq!(pacer.wait_next(Duration::ZERO), None);
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(pacer.next_at(t1), due(1, t1, 0));
    }

    #[test]
    fn pacer_holds_any_rate_to_the_bounds() {
        let t0 = Instant::now();
        // These rates panicked: 1e-300 making its period, 6e-20 adding it to the clock.
        for fps in [1e-300, 6e-20, 0.0, -5.0, f64::NAN, f64::NEG_INFINITY] {
            let mut pacer = Pacer::new(fps);
            assert_eq!(pacer.next_at(t0), due(0, t0, 0), "{fps}");
            assert_eq!(
                pacer.next_at(t0 + Duration::from_secs(1)),
                Pace::Wait(Duration::from_secs(99)),
                "{fps}"
            );
            assert_eq!(
                pacer.next_at(t0 + Duration::from_secs(100)),
                due(1, t0 + Duration::from_secs(100), 0),
                "{fps}"
            );
        }
        let mut fast = Pacer::new(f64::INFINITY);
        fast.next_at(t0);
        assert_eq!(
            fast.next_at(t0 + Duration::from_micros(500)),
            Pace::Wait(Duration::from_micros(500))
        );
    }

    #[test]
    fn rates_turn_into_times_only_where_they_can() {
        assert_eq!(frames_time(4.0, 2.0), Some(Duration::from_secs(2)));
        assert_eq!(frames_time(4.0, 0.01), Some(Duration::from_secs(400)));
        for fps in [0.0, -1.0, 1e-300, f64::NAN] {
            assert_eq!(frames_time(4.0, fps), None, "{fps}");
        }
    }
}
