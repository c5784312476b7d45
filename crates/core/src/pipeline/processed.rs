//! What processing a frame gives back: its small results ([`FrameResult`]) and, for as
//! long as the frame's slot is held, its full images ([`FrameImages`]).

use std::fmt;
use std::ops::Deref;

use super::buffers::read_buffer_into;
use super::motion::control::MotionResult;
use super::motion_tiles::{Tiles, DIFF_BINS, TILE};
#[allow(unused_imports)] // named in the docs
use super::{FullImages, Pipeline, PipelineError, StageTimings};
use crate::cl::{FrameSlot, Gpu, Timing};
use edgesight_frame::frame::FrameLayout;
use edgesight_frame::region::{Region, RegionStats};

/// What one frame produced, without the full images.
#[derive(Clone, Debug)]
pub struct FrameResult {
    /// Frame width in pixels.
    pub width: u32,
    /// Frame height in pixels.
    pub height: u32,
    /// The luma histogram: how many of the frame's pixels have each level, 0 to 255.
    pub histogram: [u32; 256],
    /// Otsu's threshold on luma: the foreground is the pixels whose luma is above it.
    pub otsu_threshold: u8,
    /// The whole frame as a region.
    pub frame: RegionStats,
    /// The configured regions, in order.
    pub regions: Vec<(Region, RegionStats)>,
    /// The camera-health grid: `grid.0` columns by `grid.1` rows of cells, row by row
    /// (none, and `grid` 0 x 0, unless [`Pipeline::set_health_grid`] asked for them).
    pub cells: Vec<RegionStats>,
    /// The health grid's size in cells, (columns, rows); 0 x 0 without a grid.
    pub grid: (u32, u32),
    /// The histogram of the gradient magnitude, when `gradient_sampled`: it is counted on
    /// every few frames only, and only with a health grid.
    pub gradient_histogram: [u32; 256],
    /// Whether this frame counted `gradient_histogram`; if not, it holds what it held before.
    pub gradient_sampled: bool,
    /// The frame's motion (each region's moving pixels are in its stats).
    pub motion: MotionResult,
    /// Each stage's device time: this frame's where `timed`, else the last timed frame's
    /// ([`Pipeline::time_every`]; zero before the first).
    pub timings: StageTimings,
    /// Whether `timings` were measured on this frame rather than carried from an earlier one.
    pub timed: bool,
    /// Whose clock `timings` are on: the device's (profiling events) or the host's.
    pub timing: Timing,
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
            motion: MotionResult::default(),
            timings: StageTimings::default(),
            timed: false,
            timing: Timing::Device,
        }
    }

    /// Makes this result a copy of `other`, in the memory it already has: `clone_from`
    /// for a result that is refilled rather than made anew (a derived `clone_from` would
    /// allocate every region's name again).
    pub fn copy_from(&mut self, other: &FrameResult) {
        let FrameResult {
            width,
            height,
            histogram,
            otsu_threshold,
            frame,
            regions,
            cells,
            grid,
            gradient_histogram,
            gradient_sampled,
            motion,
            timings,
            timed,
            timing,
        } = other;
        (self.width, self.height, self.grid) = (*width, *height, *grid);
        self.histogram = *histogram;
        self.otsu_threshold = *otsu_threshold;
        self.frame = *frame;
        self.regions.truncate(regions.len());
        for (i, (region, stats)) in regions.iter().enumerate() {
            match self.regions.get_mut(i) {
                Some((mine, my_stats)) => {
                    mine.assign(region);
                    *my_stats = *stats;
                }
                None => self.regions.push((region.clone(), *stats)),
            }
        }
        self.cells.clone_from(cells);
        self.gradient_histogram = *gradient_histogram;
        self.gradient_sampled = *gradient_sampled;
        self.motion = *motion;
        self.timings = *timings;
        self.timed = *timed;
        self.timing = *timing;
    }
}

/// The pictures of a frame any pipeline gives ([`FrameImages::read_pictures`]): what the
/// status page and `process` show. Dense, row-major.
#[derive(Clone, Debug, Default)]
pub struct Pictures {
    /// The frame's 8-bit luma, width x height.
    pub luma: Vec<u8>,
    /// Sobel's 8-bit gradient magnitude (L1 or L2, at most 255), width x height.
    pub magnitude: Vec<u8>,
    /// 255 where luma is above the frame's Otsu threshold, else 0.
    pub mask: Vec<u8>,
}

/// Which whole 16 x 16 tiles moved, row by row of tiles (1: moved).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileMask {
    /// 1 where the tile moved, else 0: `tiles_x` tiles a row, `tiles_y` rows.
    pub mask: Vec<u8>,
    /// Whole tiles across the frame (its width divided by the tile side, rounded down).
    pub tiles_x: usize,
    /// Whole tiles down the frame (its height divided by the tile side, rounded down).
    pub tiles_y: usize,
}

impl TileMask {
    /// Whether pixel (x, y) moved: its tile did, the last column and row of tiles taking
    /// the pixels past the whole tiles.
    pub fn moving(&self, x: usize, y: usize) -> bool {
        let t = (x / TILE).min(self.tiles_x - 1);
        let b = (y / TILE).min(self.tiles_y - 1);
        self.mask[b * self.tiles_x + t] != 0
    }
}

/// Every per-pixel output of a frame, from a pipeline that keeps its full images
/// ([`FullImages::Kept`], [`FrameImages::read_images`]). Dense, row-major.
#[derive(Clone, Debug, Default)]
pub struct Images {
    /// Luma, magnitude and foreground mask, as any pipeline gives them.
    pub pictures: Pictures,
    /// Sobel's dx and dy.
    pub dx: Vec<i16>,
    /// Sobel's vertical derivative (dy), signed, per pixel.
    pub dy: Vec<i16>,
    /// Sobel's edge mask: 255 where the magnitude is at least the edge threshold.
    pub edges: Vec<u8>,
    /// `(height + 1) x (width + 1)`, as the three below: OpenCV's `integral` layout,
    /// assembled on the host from the pipeline's compact form (no device holds it).
    pub integral_sum: Vec<u32>,
    /// The integral of squared luma: the sum of luma² above and left of each point.
    pub integral_sqsum: Vec<u64>,
    /// The integral of the edge mask: edge pixels counted above and left of each point.
    pub integral_edges: Vec<u32>,
    /// The integral of the foreground mask: foreground pixels above and left of each point.
    pub integral_foreground: Vec<u32>,
}

/// What a frame's motion left on the device: its tiles' counts and mask as
/// `reference::motion::tiles` gives them, and the background after it (1/65536 luma, tile
/// by tile).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceMotion {
    /// The frame's tile counts and moving mask, as the kernels wrote them.
    pub tiles: Tiles,
    /// The background after this frame, one mean per whole tile, row by row, in 1/65536 luma.
    pub background: Vec<u32>,
}

impl DeviceMotion {
    /// Makes this a copy of `other`, in the memory this has once it is large enough.
    pub fn copy_from(&mut self, other: &DeviceMotion) {
        let (t, o) = (&mut self.tiles, &other.tiles);
        t.mask.clone_from(&o.mask);
        t.diff_histogram = o.diff_histogram;
        (t.moving, t.frame_sum) = (o.moving, o.frame_sum);
        (t.background_sum, t.gain) = (o.background_sum, o.gain);
        self.background.clone_from(&other.background);
    }
}

impl Default for DeviceMotion {
    fn default() -> DeviceMotion {
        DeviceMotion {
            tiles: Tiles {
                mask: Vec::new(),
                diff_histogram: [0; DIFF_BINS],
                moving: 0,
                frame_sum: 0,
                background_sum: 0,
                gain: 0,
            },
            background: Vec::new(),
        }
    }
}

/// The images of the frame just processed. Grey frames (and NV12's Y plane) packed at
/// stride = width leave their luma in the frame slot itself, so this borrows the slot:
/// for a frame source (edgesight-capture's `FrameSource`), the images can be read only until
/// the next `next_frame`, which may requeue and refill the slot with a newer frame than
/// the magnitude. It borrows the pipeline too, so no other frame can overwrite them.
pub struct FrameImages<'a> {
    pub(super) pipeline: &'a Pipeline,
    pub(super) slot: &'a FrameSlot,
}

impl FrameImages<'_> {
    /// The layout of the frame these images are of.
    pub fn layout(&self) -> &FrameLayout {
        &self.pipeline.layout
    }

    /// Luma, from its buffer or, where the stages read it in place, from the slot.
    pub fn read_luma(&self, gpu: &Gpu) -> Result<Vec<u8>, PipelineError> {
        let mut luma = Vec::new();
        self.read_luma_into(gpu, &mut luma)?;
        Ok(luma)
    }

    fn read_luma_into(&self, gpu: &Gpu, out: &mut Vec<u8>) -> Result<(), PipelineError> {
        let p = self.pipeline;
        match &p.bufs.luma {
            None => read_buffer_into(gpu, self.slot.buffer(), p.layout.pixels(), out)?,
            Some(luma) => luma.read_into(gpu, out)?,
        }
        Ok(())
    }

    /// Reads back luma and the magnitude, and makes the foreground mask from luma and the
    /// frame's threshold: what any pipeline, the daemon's included, can give without
    /// holding a mask. The mask is exactly what `binarize` writes in a pipeline that keeps
    /// it: 255 where luma > threshold (THRESH_BINARY), and the threshold is the very word
    /// (`results[256]`) that kernel reads, read back with the frame's results.
    pub fn read_pictures(&self, gpu: &Gpu) -> Result<Pictures, PipelineError> {
        let mut pictures = Pictures::default();
        self.read_pictures_into(gpu, &mut pictures)?;
        Ok(pictures)
    }

    /// [`FrameImages::read_pictures`] into `pictures`, in the memory it already has:
    /// verifying a live frame allocates nothing on the camera's thread.
    pub fn read_pictures_into(
        &self,
        gpu: &Gpu,
        pictures: &mut Pictures,
    ) -> Result<(), PipelineError> {
        let p = self.pipeline;
        self.read_luma_into(gpu, &mut pictures.luma)?;
        let threshold = p.read_back.result(256);
        pictures.mask.clear();
        pictures.mask.extend((pictures.luma.iter()).map(|&v| {
            if u32::from(v) > threshold {
                255
            } else {
                0
            }
        }));
        p.bufs.magnitude.read_into(gpu, &mut pictures.magnitude)?;
        Ok(())
    }

    /// The tiles that moved on this frame, where motion is measured.
    pub fn read_motion_mask(&self, gpu: &Gpu) -> Result<Option<TileMask>, PipelineError> {
        let p = self.pipeline;
        if p.motion_control.is_none() || p.motion.tiles() == 0 {
            return Ok(None);
        }
        let (mask, tiles_x, tiles_y) = p.motion.read_mask(gpu)?;
        Ok(Some(TileMask {
            mask,
            tiles_x: tiles_x as usize,
            tiles_y: tiles_y as usize,
        }))
    }

    /// The pipeline that made these images (what it tells about itself: the motion its
    /// frame ran, the frame's number).
    pub fn pipeline(&self) -> &Pipeline {
        self.pipeline
    }

    /// The frame's bytes as the kernels read them (its slot's), into `out`.
    pub fn read_frame_into(&self, gpu: &Gpu, out: &mut Vec<u8>) -> Result<(), PipelineError> {
        Ok(self.slot.read_into(gpu, out)?)
    }

    /// Reads back every per-pixel output of the frame, each as its kernel wrote it (the
    /// mask from `binarize`, not made on the host); refused
    /// ([`PipelineError::NotKept`]) by a pipeline built without its full images.
    pub fn read_images(&self, gpu: &Gpu) -> Result<Images, PipelineError> {
        let p = self.pipeline;
        let (Some(sobel), Some(mask)) = (p.sobel.kept(), p.otsu.mask()) else {
            return Err(PipelineError::NotKept);
        };
        let luma = self.read_luma(gpu)?;
        let (sum, sqsum, edges, foreground) = p.integral.read_integrals(gpu)?.opencv_images();
        Ok(Images {
            pictures: Pictures {
                luma,
                magnitude: p.bufs.magnitude.read(gpu)?,
                mask: mask.read(gpu)?,
            },
            dx: sobel.dx.read(gpu)?,
            dy: sobel.dy.read(gpu)?,
            edges: sobel.edges.read(gpu)?,
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
    /// Reads back luma, magnitude and mask (see [`FrameImages::read_pictures`]).
    pub fn read_pictures(&self, gpu: &Gpu) -> Result<Pictures, PipelineError> {
        self.images.read_pictures(gpu)
    }

    /// Reads back every per-pixel output of the frame (see [`FrameImages::read_images`]).
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
