//! Region stage: the sums of luma, of its square and of its edge and foreground pixels
//! over every region (the whole frame first, then the configured regions, then the health
//! grid's cells), each in O(1) from the integral stage's blocked integrals, and with
//! motion their moving pixels from the motion stage's mask of tiles, by
//! `region_sums` or `region_sums_items` from `kernels/regions.cl`: at each corner at most
//! three stored values and the at most 15 x 15 pixels of the corner's tile before it,
//! summed from luma and the magnitude. regions.cl is built with integral.cl and motion.cl,
//! in the one program the three stages share (`integral::program`).

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::Buffer;

use super::buffers::held_bytes;
use super::integral::{self, Blocked, CornerParams, Counted, LeftParams, TopParams};
use super::launch::StageContext;
use super::motion::MotionParams;
use super::{device_buffer, FullImages, IntegralLayout, Launch, PipelineError, Stage, Tuning};
use crate::cl::{launch, write_blocking, ClError, Gpu, Record};
use crate::kernel_params;
use edgesight_frame::frame::FrameLayout;
use edgesight_frame::region::{Region, RegionStats};

/// Work-items per group of `region_sums`, a group a region (`REGION_ITEMS` in
/// regions.cl, which it requires).
const REGION_ITEMS: usize = 64;
/// Work-items per group of `region_sums_items`, a work-item a region.
const ITEMS_GROUP_SIZE: usize = 64;

kernel_params! {
    /// The parameters of regions.cl's `region_sums` and `region_sums_items`.
    struct RegionParams<'a> {
        luma: &'a Buffer<u8>,
        width: u32,
        height: u32,
        magnitude: &'a Buffer<u8>,
        edge_threshold: u32,
        results: &'a Buffer<u32>,
        left: LeftParams<'a>,
        top: TopParams<'a>,
        corner: CornerParams<'a>,
        rects: &'a Buffer<u32>,
        count: u32,
        out: &'a Buffer<u64>,
        motion: MotionParams<'a>,
    }
}

/// How the region sums are laid out (the same arguments either way).
enum RegionSums {
    /// GPUs: `region_sums`, a work-group of [`REGION_ITEMS`] a region, a work-item a row
    /// of a corner's in-tile part.
    Groups(Kernel),
    /// CPUs and Mali: `region_sums_items`, a work-item a region (no local memory, no
    /// barriers), in groups of the launch's size.
    Items(Kernel, Launch),
}

pub(super) struct RegionsStage {
    region_sums: RegionSums,
    /// The frames measured.
    layout: FrameLayout,
    /// The whole frame, then the configured regions, then the health grid's cells.
    regions: Vec<Region>,
    /// How many of `regions` are grid cells (at the end).
    cells: usize,
    rects: Buffer<u32>,
}

impl RegionsStage {
    /// The stage measuring `regions` (and the whole frame) on frames of `layout`.
    pub(super) fn new(
        gpu: &Gpu,
        layout: &FrameLayout,
        regions: &[Region],
        tuning: &Tuning,
        images: FullImages,
    ) -> Result<RegionsStage, PipelineError> {
        let built = || -> Result<_, ClError> {
            let program = integral::program(gpu, tuning, images)?;
            Ok(if tuning.integral_layout == IntegralLayout::GroupBands {
                RegionSums::Groups(gpu.kernel(&program, "region_sums")?)
            } else {
                let kernel = gpu.kernel(&program, "region_sums_items")?;
                let launch = Launch::one_d(gpu, &kernel, ITEMS_GROUP_SIZE)?;
                RegionSums::Items(kernel, launch)
            })
        };
        let mut stage = RegionsStage {
            region_sums: built().stage(Stage::Regions)?,
            layout: *layout,
            regions: Vec::new(),
            cells: 0,
            rects: device_buffer(gpu, 4)?,
        };
        stage.set_regions(gpu, regions, &[])?;
        Ok(stage)
    }

    pub(super) fn set_regions(
        &mut self,
        gpu: &Gpu,
        regions: &[Region],
        cells: &[Region],
    ) -> Result<(), PipelineError> {
        let layout = &self.layout;
        for r in regions.iter().chain(cells) {
            r.validate(layout)?;
        }
        let whole = Region {
            name: String::new(),
            x: 0,
            y: 0,
            width: layout.width,
            height: layout.height,
        };
        let all: Vec<Region> = std::iter::once(whole)
            .chain(regions.iter().cloned())
            .chain(cells.iter().cloned())
            .collect();
        let rects: Vec<u32> = all
            .iter()
            .flat_map(|r| [r.x, r.y, r.width, r.height])
            .collect();
        let mut rect_buf = device_buffer::<u32>(gpu, rects.len())?;
        write_blocking(gpu, &mut rect_buf, 0, &rects)?;
        self.rects = rect_buf;
        self.regions = all;
        self.cells = cells.len();
        Ok(())
    }

    /// The configured regions (without the whole frame and the grid cells).
    pub(super) fn configured_regions(&self) -> &[Region] {
        &self.regions[1..self.regions.len() - self.cells]
    }

    /// The grid cells measured after the configured regions.
    pub(super) fn cells(&self) -> &[Region] {
        &self.regions[self.regions.len() - self.cells..]
    }

    /// Enqueues the sums of every region (the whole frame first), from left, top and
    /// corner of `g` and, for each corner's part inside its tile, from `counted` itself.
    pub(super) fn enqueue(
        &self,
        gpu: &Gpu,
        counted: &Counted,
        g: &Blocked,
        sums: &Buffer<u64>,
        motion: MotionParams,
        record: Record,
    ) -> Result<Option<Event>, ClError> {
        let n = self.regions.len();
        let (kernel, global, local) = match &self.region_sums {
            RegionSums::Groups(kernel) => (kernel, REGION_ITEMS * n, REGION_ITEMS),
            RegionSums::Items(kernel, launch) => (kernel, launch.global_1d(n), launch.local[0]),
        };
        let params = RegionParams {
            luma: counted.luma,
            width: self.layout.width,
            height: self.layout.height,
            magnitude: counted.magnitude,
            edge_threshold: u32::from(counted.edge_threshold),
            results: counted.results,
            left: g.left_params(),
            top: g.top_params(),
            corner: g.corner_params(),
            rects: &self.rects,
            count: n as u32,
            out: sums,
            motion,
        };
        // SAFETY: `RegionParams` is the kernel's parameter list. region_sums' groups are
        // exactly `count` of REGION_ITEMS, the size the kernel requires, and
        // region_sums_items' work-item i returns unless i < `count`. Region i (a group, or a
        // work-item) reads rectangle i of `rects` (4 x `count` words); for each of its four
        // corners (inside the frame) at most one element of each of left, top and corner at
        // the indices integral.cl's formula gives (the lengths `Blocked::new` made from this
        // layout's `Tiles`), and of the dense `pixels()`-byte luma and magnitude at most 15
        // rows of at most 15 pixels left of the corner and above it within its tile, and
        // word 256 of `results`; it writes 4 ulongs at 4i of `out`. `set_regions` makes
        // `rects` for exactly `self.regions` (4 words each), after checking that every
        // region lies inside `self.layout`'s frame, and the pipeline, the only caller, built
        // its integral and motion stages for the same layout and passes their buffers, its
        // inputs, its 257-word results and `sums` of 4 x `region_count()` words, made for
        // those regions. With motion on (the motion stage has whole tiles), region i reads
        // the mask bytes of the tiles its rectangle touches (of the tiles_x x tiles_y that
        // width and height give; a vector reaching past the mask's end is read byte by
        // byte) and writes ulong i after the 68 count words of `moving_out`; region 0 also
        // reads and zeroes acc[0..=64] and reads and writes light[0..6] (the motion
        // stage's, 65 and 6 words) and writes those 68 words: the pipeline passes its
        // readout's motion part, 68 words and a ulong for each of these regions.
        unsafe {
            launch(
                gpu,
                kernel,
                &params,
                &[global],
                &[local],
                "clEnqueueNDRangeKernel(region_sums)",
                record,
            )
        }
    }

    /// How many regions are measured, the whole frame included.
    pub(super) fn region_count(&self) -> usize {
        self.regions.len()
    }

    /// Fills the whole frame's, each configured region's and each grid cell's statistics
    /// from `sums`, as [`RegionsStage::enqueue`] wrote them, and their moving pixels from
    /// `moving` (none: 0), reusing `regions`' and `cells`' allocations.
    pub(super) fn fill(
        &self,
        sums: &[u64],
        moving: Option<&[u64]>,
        frame: &mut RegionStats,
        regions: &mut Vec<(Region, RegionStats)>,
        cells: &mut Vec<RegionStats>,
    ) {
        let configured = self.regions.len() - 1 - self.cells;
        let mut stats = self
            .regions
            .iter()
            .zip(sums.chunks_exact(4))
            .enumerate()
            .map(|(i, (r, s))| {
                let st = RegionStats {
                    area: u64::from(r.width) * u64::from(r.height),
                    sum: s[0],
                    sqsum: s[1],
                    edges: s[2],
                    foreground: s[3],
                    motion: moving.map_or(0, |m| m[i]),
                };
                (r, st)
            });
        let (_, whole) = stats
            .next()
            .expect("the whole frame is always the first region");
        *frame = whole;
        regions.truncate(configured);
        for (i, (r, st)) in stats.by_ref().take(configured).enumerate() {
            match regions.get_mut(i) {
                Some((region, stats)) => {
                    region.assign(r);
                    *stats = st;
                }
                None => regions.push((r.clone(), st)),
            }
        }
        cells.clear();
        cells.extend(stats.map(|(_, st)| st));
    }

    /// The bytes the stage's buffers hold on the device: the regions' rectangles (the
    /// sums are the pipeline's, read back with its results).
    pub(super) fn held_bytes(&self) -> Result<u64, ClError> {
        held_bytes(&self.rects)
    }
}
