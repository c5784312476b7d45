//! What processing a frame gives back: its small results ([`FrameResult`]) and, for as
//! long as the frame's slot is held, its full images ([`FrameImages`]).

use std::fmt;
use std::ops::Deref;

use super::buffers::read_buffer;
#[allow(unused_imports)] // named in the docs
use super::{Gradients, Pipeline, PipelineError, StageTimings};
use crate::cl::{FrameSlot, Gpu};
use crate::region::{Region, RegionStats};

/// What one frame produced, without the full images.
#[derive(Clone, Debug)]
pub struct FrameResult {
    pub width: u32,
    pub height: u32,
    pub histogram: [u32; 256],
    pub otsu_threshold: u8,
    /// The whole frame as a region.
    pub frame: RegionStats,
    /// The configured regions, in order.
    pub regions: Vec<(Region, RegionStats)>,
    /// The camera-health grid: `grid.0` columns by `grid.1` rows of cells, row by row
    /// (none, and `grid` 0 x 0, unless [`Pipeline::set_health_grid`] asked for them).
    pub cells: Vec<RegionStats>,
    pub grid: (u32, u32),
    /// The histogram of the gradient magnitude, when `gradient_sampled`: it is counted on
    /// every few frames only, and only with a health grid.
    pub gradient_histogram: [u32; 256],
    pub gradient_sampled: bool,
    pub timings: StageTimings,
}

impl FrameResult {
    /// A result with nothing in it yet, to be filled by [`Pipeline::process_into`].
    pub fn empty() -> FrameResult {
        FrameResult {
            width: 0,
            height: 0,
            histogram: [0; 256],
            otsu_threshold: 0,
            frame: RegionStats::default(),
            regions: Vec::new(),
            cells: Vec::new(),
            grid: (0, 0),
            gradient_histogram: [0; 256],
            gradient_sampled: false,
            timings: StageTimings::default(),
        }
    }
}

/// The full per-pixel outputs of the last frame, dense, row-major.
#[derive(Clone, Debug, Default)]
pub struct Images {
    pub luma: Vec<u8>,
    /// Sobel's dx and dy: `Some` exactly when the pipeline was built to keep them
    /// ([`Gradients::Kept`]); `None` from a pipeline that never wrote them (the default,
    /// [`Pipeline::new`]), which has no such images to read.
    pub dx: Option<Vec<i16>>,
    pub dy: Option<Vec<i16>>,
    pub magnitude: Vec<u8>,
    pub edges: Vec<u8>,
    pub mask: Vec<u8>,
    /// `(height + 1) x (width + 1)`, as the three below.
    pub integral_sum: Vec<u32>,
    pub integral_sqsum: Vec<u64>,
    pub integral_edges: Vec<u32>,
    pub integral_foreground: Vec<u32>,
}

/// The images of the frame just processed. Grey frames (and NV12's Y plane) packed at
/// stride = width leave their luma in the frame slot itself, so this borrows the slot:
/// for a [`FrameSource`](crate::capture::FrameSource), the images can be read only until
/// the next `next_frame`, which may requeue and refill the slot with a newer frame than
/// the edges and mask. It borrows the pipeline too, so no other frame can overwrite them.
pub struct FrameImages<'a> {
    pub(super) pipeline: &'a Pipeline,
    pub(super) slot: &'a FrameSlot,
}

impl FrameImages<'_> {
    /// Reads back every per-pixel output of the frame (dx and dy where the pipeline keeps
    /// them).
    pub fn read_images(&self, gpu: &Gpu) -> Result<Images, PipelineError> {
        let p = self.pipeline;
        let b = &p.bufs;
        let luma = if p.luma_in_slot {
            read_buffer(gpu, self.slot.buffer(), b.luma.len)?
        } else {
            b.luma.read(gpu)?
        };
        let (sum, sqsum, edges, foreground) = p.integral.read_integrals(gpu)?;
        let (dx, dy) = match p.sobel.gradients() {
            Some([dx, dy]) => (Some(dx.read(gpu)?), Some(dy.read(gpu)?)),
            None => (None, None),
        };
        Ok(Images {
            luma,
            dx,
            dy,
            magnitude: b.magnitude.read(gpu)?,
            edges: b.edges.read(gpu)?,
            mask: b.mask.read(gpu)?,
            integral_sum: sum,
            integral_sqsum: sqsum,
            integral_edges: edges,
            integral_foreground: foreground,
        })
    }
}

/// A frame just processed: its results (this derefs to them) and its images while its
/// slot is held.
pub struct Processed<'a> {
    pub(super) result: FrameResult,
    pub(super) images: FrameImages<'a>,
}

impl Processed<'_> {
    /// Reads back every per-pixel output of the frame (see [`FrameImages`]).
    pub fn read_images(&self, gpu: &Gpu) -> Result<Images, PipelineError> {
        self.images.read_images(gpu)
    }

    /// The results, letting go of the slot and the pipeline.
    pub fn into_result(self) -> FrameResult {
        self.result
    }
}

impl fmt::Debug for Processed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Processed")
            .field("result", &self.result)
            .finish_non_exhaustive()
    }
}

impl Deref for Processed<'_> {
    type Target = FrameResult;
    fn deref(&self) -> &FrameResult {
        &self.result
    }
}
