//! What a camera hands the HTTP side, and nothing else: the latest published frame, the
//! pictures a snapshot request is answered with, and what the camera is doing
//! ([`CameraStatus`], in `status.rs`). The camera threads (`daemon`) fill them and the
//! routes (`server`) read them; this module imports neither, so the two sides depend on
//! it and not on each other.

mod status;

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::oneshot;

use edgesight_core::health::HealthReport;
use edgesight_core::motion_events::MotionReport;
use edgesight_core::pipeline::{FrameResult, PipelineOptions};
use edgesight_frame::frame::DropReason;

pub use status::{CameraState, CameraStatus};

/// Why a frame was lost after the pipeline: the publisher had not taken the previous ones.
/// The last `reason` of `edgesight_frames_dropped_total`, after the capture's.
pub const DROP_PUBLISH_BACKLOG: &str = "publish_backlog";

/// The last published frame of a camera.
#[derive(Clone)]
pub struct Latest {
    /// The source's frame counter for this frame (V4L2's `sequence` for a camera).
    pub sequence: u64,
    /// When the publisher took the frame, on the monotonic clock: its age is how far
    /// behind the camera is (`/healthz`, `age_seconds`).
    pub published: Instant,
    /// The pipeline's results for the frame: its size, histogram, Otsu threshold and
    /// the stats of the whole frame and of each region.
    pub result: FrameResult,
    /// The pipeline options the frame was computed with (border, magnitude, edge
    /// threshold).
    pub options: PipelineOptions,
    /// The format and OpenCL device the frame came through.
    pub source: Arc<SourceInfo>,
    /// The frame rate and the drops, as the camera's metrics had them.
    pub activity: Activity,
    /// The camera-health detectors' numbers and states after this frame (none when they
    /// are off).
    pub health: Option<HealthReport>,
    /// The frame's motion: the whole frame's and each region's, with their events.
    pub motion: MotionReport,
}

impl Latest {
    /// Makes this `Latest` a copy of `other` in the memory it already has (the publisher
    /// keeps a pool of them, so that publishing allocates nothing once warm).
    pub fn copy_from(&mut self, other: &Latest) {
        self.sequence = other.sequence;
        self.published = other.published;
        self.result.copy_from(&other.result);
        self.options = other.options;
        self.source.clone_from(&other.source);
        self.activity = other.activity;
        self.health = other.health;
        self.motion.clone_from(&other.motion);
    }
}

/// How a camera keeps up: the values of its `edgesight_frame_rate` gauge and its
/// `edgesight_frames_dropped_total` counters, read when the frame was published (and again
/// while no frame comes), so the status page and `/api/v1/latest` say what `/metrics` says.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Activity {
    /// Frames published per second over the last 30 seconds, up to now (see
    /// `edgesight_frame_rate`).
    pub fps: f64,
    /// Frames the source lost, by [`DropReason`] (indexed by `reason as usize`).
    pub dropped: [u64; DropReason::ALL.len()],
    /// Frames lost because the publisher fell behind ([`DROP_PUBLISH_BACKLOG`]).
    pub backlog: u64,
}

impl Activity {
    /// The drops by their `reason` label, in the metrics' order.
    pub fn dropped_by_reason(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        DropReason::ALL
            .iter()
            .map(|r| (r.name(), self.dropped[*r as usize]))
            .chain([(DROP_PUBLISH_BACKLOG, self.backlog)])
    }

    /// Every frame lost: the source's drops of every reason and the publish backlog's.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum::<u64>() + self.backlog
    }
}

/// The format and OpenCL device of a camera's frames, shared by its published results.
pub struct SourceInfo {
    /// The pixel format's name, as the command line and configs spell it (`yuyv`, `grey`).
    pub format: &'static str,
    /// The OpenCL device that processes the frames, as `NAME (PLATFORM)`.
    pub device: String,
}

/// The pictures of the last processed frame, for `/snapshot/*.png` and an event's
/// picture. A request for an event's picture alone ([`Wants::EventPicture`]) that no
/// other request shares is answered with less: the frame's `jpeg` and no picture, or,
/// without one, `luma` alone; the pictures not read back are empty.
pub struct Snapshot {
    /// The frame's width in pixels, that of every picture here.
    pub width: u32,
    /// The frame's height in pixels, that of every picture here.
    pub height: u32,
    /// The frame's luma, one byte a pixel, row by row.
    pub luma: Vec<u8>,
    /// The Sobel gradient magnitude, one byte a pixel (not the thresholded edge mask,
    /// which the pipeline's `Images` calls `edges`).
    pub gradient: Vec<u8>,
    /// The Otsu mask, one byte a pixel: 255 where luma is above `otsu_threshold`, else 0.
    pub mask: Vec<u8>,
    /// Luma with every 16 x 16 tile that did not move dimmed to a third: the motion mask
    /// over the picture (all of it dimmed while no motion is watched).
    pub motion: Vec<u8>,
    /// The frame's luma histogram: how many pixels have each value from 0 to 255.
    pub histogram: [u32; 256],
    /// The luma threshold Otsu's method chose for the frame, the one `mask` is cut at.
    pub otsu_threshold: u8,
    /// The frame as the JPEG image the camera sent (an MJPEG camera or recording): an
    /// event's picture without an encode.
    pub jpeg: Option<Vec<u8>>,
}

/// What a snapshot request needs of the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wants {
    /// Every picture (a status page's snapshot).
    Pictures,
    /// An event's picture: the frame's JPEG where the camera sends JPEG images, else its
    /// luma. Nothing else is read back for it.
    EventPicture,
}

/// How a snapshot request is answered: the camera thread sends the pictures of its next
/// frame, or drops the request when it has none to give.
pub struct SnapshotReply {
    reply: oneshot::Sender<Arc<Snapshot>>,
    /// Which pictures the asker needs, so the camera thread reads back no more.
    pub wants: Wants,
}

impl SnapshotReply {
    /// A request for every picture, answered on `reply`.
    pub fn pictures(reply: oneshot::Sender<Arc<Snapshot>>) -> SnapshotReply {
        SnapshotReply {
            reply,
            wants: Wants::Pictures,
        }
    }

    /// A request for an event's picture, answered on `reply`.
    pub fn event_picture(reply: oneshot::Sender<Arc<Snapshot>>) -> SnapshotReply {
        SnapshotReply {
            reply,
            wants: Wants::EventPicture,
        }
    }

    /// Answers the request with `snapshot`; gives it back when the asker has gone.
    pub fn send(self, snapshot: Arc<Snapshot>) -> Result<(), Arc<Snapshot>> {
        self.reply.send(snapshot)
    }

    /// Whether the asker gave up waiting.
    pub fn is_closed(&self) -> bool {
        self.reply.is_closed()
    }
}
