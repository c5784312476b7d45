//! What a camera hands the HTTP side, and nothing else: the latest published frame and
//! the pictures a snapshot request is answered with. The camera threads (`daemon`) fill
//! them and the routes (`server`) read them; this module imports neither, so the two
//! sides depend on it and not on each other.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::oneshot;

use crate::pipeline::{FrameResult, PipelineOptions};

/// The last published frame of a camera.
pub struct Latest {
    pub sequence: u64,
    pub published: Instant,
    pub result: FrameResult,
    pub options: PipelineOptions,
    /// The format and OpenCL device the frame came through.
    pub source: Arc<SourceInfo>,
}

/// The format and OpenCL device of a camera's frames, shared by its published results.
pub struct SourceInfo {
    pub format: &'static str,
    pub device: String,
}

/// The pictures of the last processed frame, for `/snapshot/*.png`.
pub struct Snapshot {
    pub width: u32,
    pub height: u32,
    pub luma: Vec<u8>,
    /// The Sobel gradient magnitude, one byte a pixel (not the thresholded edge mask,
    /// which the pipeline's `Images` calls `edges`).
    pub gradient: Vec<u8>,
    pub mask: Vec<u8>,
    pub histogram: [u32; 256],
    pub otsu_threshold: u8,
}

/// How a snapshot request is answered: the camera thread sends the pictures of its next
/// frame, or drops the sender when it has none to give.
pub(crate) type SnapshotReply = oneshot::Sender<Arc<Snapshot>>;
