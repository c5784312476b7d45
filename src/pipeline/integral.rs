//! Integral stage: integral sum and squared sum of luma and the edge and foreground counts
//! (`kernels/integral.cl`, all four in bands of rows; edges and foreground counted from
//! the magnitude and the device's Otsu threshold, no mask read), and the region stage that
//! reads any rectangle's sums from them in O(1) (`region_sums`).

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::Buffer;

use super::buffers::held_bytes;
use super::{device_buffer, DeviceImage, IntegralLayout, Launch, PipelineError, Tuning};
use crate::cl::{launch, write_blocking, CallContext, ClError, Gpu, INTEGRAL_CL};
use crate::frame::FrameLayout;
use crate::region::{Region, RegionStats};

/// Work-items per group of the region sums.
const LINE_GROUP_SIZE: usize = 64;
/// Bands of rows per compute unit in the CPU passes: a few, so a slow core holds up little.
const BANDS_PER_COMPUTE_UNIT: u32 = 4;
/// Most work-items in a GPU band's group (`BAND_GROUP_MAX` in integral.cl).
const BAND_GROUP_MAX: usize = 256;
/// Most rows in a GPU band (`BAND_ROWS_MAX` in integral.cl).
const BAND_ROWS_MAX: u32 = 64;
/// Fewest rows in a GPU band: below that, the bands' column sums cost more than the
/// parallelism gains (measured on an NVIDIA H100: BENCHMARKS.md).
const MIN_BAND_ROWS: u32 = 4;
/// GPU bands per compute unit.
const BANDS_PER_GPU_COMPUTE_UNIT: u32 = 2;

/// How the passes are laid out on the device.
enum Passes {
    /// Bands of rows, a work-item each: the bands' column sums, then every band writes all
    /// four images row by row (CPUs).
    ItemBands {
        columns_kernel: Kernel,
        bands_kernel: Kernel,
        bands: u32,
        cols: Buffer<u32>,
        tops: Buffer<u32>,
        tops2: Buffer<u64>,
    },
    /// Bands of rows, a work-group each, about one band per compute unit: the bands' column
    /// sums, their prefix down the bands, then every band's group scans its rows in chunks
    /// and writes all four images (GPUs).
    GroupBands {
        sums_kernel: Kernel,
        carries_kernel: Kernel,
        images_kernel: Kernel,
        band_rows: u32,
        bands: u32,
        group: usize,
        /// A uint4 per band and column: the column sums, then what lies above the band.
        cols: Buffer<u32>,
    },
}

pub(super) struct IntegralStage {
    passes: Passes,
    region_sums: Kernel,
    launch: Launch,
    sum: DeviceImage<u32>,
    sqsum: DeviceImage<u64>,
    edges: DeviceImage<u32>,
    foreground: DeviceImage<u32>,
    /// The whole frame, then the configured regions, then the health grid's cells.
    regions: Vec<Region>,
    /// How many of `regions` are grid cells (at the end).
    cells: usize,
    rects: Buffer<u32>,
    sums: Buffer<u64>,
}

impl IntegralStage {
    pub(super) fn new(
        gpu: &Gpu,
        layout: &FrameLayout,
        regions: &[Region],
        tuning: &Tuning,
    ) -> Result<IntegralStage, PipelineError> {
        let built = || -> Result<_, ClError> {
            let program = gpu.build_with(INTEGRAL_CL, tuning.stores.define())?;
            let k = |name| Kernel::create(&program, name).call("clCreateKernel");
            let w = layout.width as usize;
            let passes = match tuning.integral_layout {
                IntegralLayout::ItemBands => {
                    // A band's column sums of luma² are uint: at most 66051 rows a band.
                    let bands = (gpu.info.compute_units * BANDS_PER_COMPUTE_UNIT)
                        .max(layout.height.div_ceil(66_051))
                        .clamp(1, layout.height);
                    let b = bands as usize;
                    Passes::ItemBands {
                        columns_kernel: k("integral_band_columns")?,
                        bands_kernel: k("integral_bands")?,
                        bands,
                        cols: device_buffer(gpu, 4 * b * w)?,
                        tops: device_buffer(gpu, 3 * b * (w + 1))?,
                        tops2: device_buffer(gpu, b * (w + 1))?,
                    }
                }
                IntegralLayout::GroupBands => {
                    let images_kernel = k("integral_band_images")?;
                    let group = BAND_GROUP_MAX
                        .min(
                            images_kernel
                                .get_work_group_size(gpu.device.id())
                                .call("clGetKernelWorkGroupInfo")?,
                        )
                        .max(1);
                    // About two bands per compute unit: a band's rows are scanned one
                    // after another, so the device needs many bands at once to hide the
                    // latency, while every band adds column sums to write and scan.
                    let band_rows = layout
                        .height
                        .div_ceil(BANDS_PER_GPU_COMPUTE_UNIT * gpu.info.compute_units.max(1))
                        .clamp(MIN_BAND_ROWS, BAND_ROWS_MAX)
                        .min(layout.height);
                    let bands = layout.height.div_ceil(band_rows);
                    Passes::GroupBands {
                        sums_kernel: k("integral_band_sums")?,
                        carries_kernel: k("integral_band_carries")?,
                        images_kernel,
                        band_rows,
                        bands,
                        group,
                        cols: device_buffer(gpu, 4 * bands as usize * w)?,
                    }
                }
            };
            Ok((passes, k("region_sums")?))
        };
        let (passes, region_sums) = built().map_err(|source| PipelineError::Stage {
            stage: "integral",
            source,
        })?;
        let launch = Launch::one_d(gpu, &region_sums, LINE_GROUP_SIZE)?;
        let len = (layout.width as usize + 1) * (layout.height as usize + 1);
        let mut stage = IntegralStage {
            passes,
            region_sums,
            launch,
            sum: DeviceImage::new(gpu, len)?,
            sqsum: DeviceImage::new(gpu, len)?,
            edges: DeviceImage::new(gpu, len)?,
            foreground: DeviceImage::new(gpu, len)?,
            regions: Vec::new(),
            cells: 0,
            rects: device_buffer(gpu, 4)?,
            sums: device_buffer(gpu, 4)?,
        };
        stage.set_regions(gpu, layout, regions, &[])?;
        Ok(stage)
    }

    pub(super) fn set_regions(
        &mut self,
        gpu: &Gpu,
        layout: &FrameLayout,
        regions: &[Region],
        cells: &[Region],
    ) -> Result<(), PipelineError> {
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
        self.sums = device_buffer(gpu, rects.len())?;
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

    /// Enqueues the integrals of luma, of its edges (`magnitude` at least
    /// `edge_threshold`) and of its foreground (above the threshold at word 256 of
    /// `results`, which the Otsu kernel wrote before), handing each kernel's event to
    /// `event`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn enqueue_integrals(
        &self,
        gpu: &Gpu,
        layout: &FrameLayout,
        luma: &Buffer<u8>,
        magnitude: &Buffer<u8>,
        edge_threshold: u8,
        results: &Buffer<u32>,
        mut event: impl FnMut(Event),
    ) -> Result<(), ClError> {
        let (w, h) = (layout.width, layout.height);
        let et = u32::from(edge_threshold);
        // Luma and the magnitude are dense: their rows are `w` apart.
        let src_stride = w;
        match &self.passes {
            Passes::ItemBands {
                columns_kernel,
                bands_kernel,
                bands,
                cols,
                tops,
                tops2,
            } => {
                let what = "clEnqueueNDRangeKernel(integral bands)";
                // One work-item per group: a band is a long sequential walk.
                let global = [*bands as usize];
                // SAFETY: the arguments are integral.cl's integral_band_columns (luma,
                // src_stride, width, height, magnitude, edge_threshold, results, bands,
                // cols), src_stride = width. Work-item b < `bands` walks the rows of band b
                // (all below `height`), `width` columns of each of the two `pixels()`-byte
                // inputs, reads word 256 of `results`, and writes its band's 4 x `width`
                // column sums. `cols` holds 4 x `bands` x `width` words, made in
                // `IntegralStage::new` for this layout and band count; the pipeline, the
                // only caller, passes that layout, its inputs of `pixels()` bytes and its
                // 257-word results.
                event(unsafe {
                    launch(
                        gpu,
                        columns_kernel,
                        &[
                            luma,
                            &src_stride,
                            &w,
                            &h,
                            magnitude,
                            &et,
                            results,
                            bands,
                            cols,
                        ],
                        &global,
                        &[1],
                        what,
                    )
                }?);
                // SAFETY: the arguments are integral_bands' (luma, src_stride, width,
                // height, magnitude, edge_threshold, results, bands, cols, tops, tops2,
                // sum, sqsum, ecount, fcount), src_stride = width. Work-item b < `bands`
                // reads its band's rows of the inputs, word 256 of `results` and the column
                // sums above it, writes its band's row of
                // `tops` (3 x (width + 1) words) and `tops2` (width + 1), and its rows of
                // the four (width + 1) x (height + 1) images, all of which
                // `IntegralStage::new` made for this layout and band count.
                event(unsafe {
                    launch(
                        gpu,
                        bands_kernel,
                        &[
                            luma,
                            &src_stride,
                            &w,
                            &h,
                            magnitude,
                            &et,
                            results,
                            bands,
                            cols,
                            tops,
                            tops2,
                            &self.sum.buf,
                            &self.sqsum.buf,
                            &self.edges.buf,
                            &self.foreground.buf,
                        ],
                        &global,
                        &[1],
                        what,
                    )
                }?);
            }
            Passes::GroupBands {
                sums_kernel,
                carries_kernel,
                images_kernel,
                band_rows,
                bands,
                group,
                cols,
            } => {
                let what = "clEnqueueNDRangeKernel(integral bands)";
                let local = self.launch.local[0];
                let quads = self.launch.global_1d((w as usize).div_ceil(4));
                // SAFETY: the arguments are integral_band_sums' (luma, src_stride, width,
                // height, magnitude, edge_threshold, results, band_rows, cols), src_stride =
                // width. Work-item (x, b) returns unless x < width and b x band_rows <
                // height, reads word 256 of the 257-word `results` and four columns from x
                // of its band's rows of the two `pixels()`-byte inputs, and writes them to
                // band b's row of `cols`, which holds `bands` x `width` uint4s for `bands` =
                // height / band_rows rounded up, as `IntegralStage::new` made it for this
                // layout; the pipeline, the only caller, passes that layout and its inputs.
                event(unsafe {
                    launch(
                        gpu,
                        sums_kernel,
                        &[
                            luma,
                            &src_stride,
                            &w,
                            &h,
                            magnitude,
                            &et,
                            results,
                            band_rows,
                            cols,
                        ],
                        &[quads, *bands as usize],
                        &[local, 1],
                        what,
                    )
                }?);
                // SAFETY: the arguments are integral_band_carries' (width, bands, cols).
                // Work-item x returns unless x < width and walks column x down the
                // `bands` rows of uint4s of `cols` (made for this layout, see above).
                event(unsafe {
                    launch(
                        gpu,
                        carries_kernel,
                        &[&w, bands, cols],
                        &[self.launch.global_1d(w as usize)],
                        &[local],
                        what,
                    )
                }?);
                // SAFETY: the arguments are integral_band_images' (luma, src_stride,
                // width, height, magnitude, edge_threshold, results, band_rows, cols, sum,
                // sqsum, ecount, fcount), src_stride = width. Group b < `bands` scans rows
                // b x band_rows up to `height` of the inputs, `width` columns each, reads
                // word 256 of `results` and its band's row of `cols` and writes those rows of
                // the four (width + 1) x (height + 1) images; `group` is at most
                // BAND_GROUP_MAX, the kernel's local buffer. All were made for this layout
                // by `IntegralStage::new`.
                event(unsafe {
                    launch(
                        gpu,
                        images_kernel,
                        &[
                            luma,
                            &src_stride,
                            &w,
                            &h,
                            magnitude,
                            &et,
                            results,
                            band_rows,
                            cols,
                            &self.sum.buf,
                            &self.sqsum.buf,
                            &self.edges.buf,
                            &self.foreground.buf,
                        ],
                        &[*bands as usize * group],
                        &[*group],
                        what,
                    )
                }?);
            }
        }
        Ok(())
    }

    /// Enqueues the sums of every region (the whole frame first).
    pub(super) fn enqueue_regions(
        &self,
        gpu: &Gpu,
        layout: &FrameLayout,
    ) -> Result<Event, ClError> {
        let count = self.regions.len() as u32;
        let src_stride = layout.width + 1;
        // SAFETY: the arguments are region_sums' (sum, src_stride, width, height, sqsum, edges,
        // foreground, rects, count, out), src_stride = width + 1. Work-item i returns unless i
        // < `count`, reads rectangle i of `rects` (4 x `count` words), the four corners of that
        // rectangle in the four (width + 1) x (height + 1) images, and writes 4 ulongs at 4i of
        // `out`. `set_regions` makes `rects` and `sums` for exactly `self.regions` (4 words
        // each) after checking that every region lies inside this layout's frame.
        unsafe {
            launch(
                gpu,
                &self.region_sums,
                &[
                    &self.sum.buf,
                    &src_stride,
                    &layout.width,
                    &layout.height,
                    &self.sqsum.buf,
                    &self.edges.buf,
                    &self.foreground.buf,
                    &self.rects,
                    &count,
                    &self.sums,
                ],
                &[self.launch.global_1d(self.regions.len())],
                &[self.launch.local[0]],
                "clEnqueueNDRangeKernel(region_sums)",
            )
        }
    }

    /// The device buffer of the region sums: four per region, the whole frame first.
    pub(super) fn sums(&self) -> &Buffer<u64> {
        &self.sums
    }

    /// How many sums [`IntegralStage::sums`] holds.
    pub(super) fn sums_len(&self) -> usize {
        4 * self.regions.len()
    }

    /// Fills the whole frame's, each configured region's and each grid cell's statistics
    /// from `sums`, read back from [`IntegralStage::sums`], reusing `regions`' and
    /// `cells`' allocations.
    pub(super) fn fill_regions(
        &self,
        sums: &[u64],
        frame: &mut RegionStats,
        regions: &mut Vec<(Region, RegionStats)>,
        cells: &mut Vec<RegionStats>,
    ) {
        let configured = self.regions.len() - 1 - self.cells;
        let mut stats = self.regions.iter().zip(sums.chunks_exact(4)).map(|(r, s)| {
            let st = RegionStats {
                area: u64::from(r.width) * u64::from(r.height),
                sum: s[0],
                sqsum: s[1],
                edges: s[2],
                foreground: s[3],
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
                    // Field by field: String::clone_from reuses the name's allocation (a
                    // derived Clone::clone_from would not).
                    region.name.clone_from(&r.name);
                    (region.x, region.y) = (r.x, r.y);
                    (region.width, region.height) = (r.width, r.height);
                    *stats = st;
                }
                None => regions.push((r.clone(), st)),
            }
        }
        cells.clear();
        cells.extend(stats.map(|(_, st)| st));
    }

    /// Whether each integral image's guard band is intact, by name.
    pub(super) fn guard_checks(&self, gpu: &Gpu) -> Result<[(&'static str, bool); 4], ClError> {
        Ok([
            ("integral_sum", self.sum.guard_intact(gpu)?),
            ("integral_sqsum", self.sqsum.guard_intact(gpu)?),
            ("integral_edges", self.edges.guard_intact(gpu)?),
            ("integral_foreground", self.foreground.guard_intact(gpu)?),
        ])
    }

    /// The bytes the stage's buffers hold on the device: the four images, the passes'
    /// column sums and the regions' rectangles and sums.
    pub(super) fn held_bytes(&self) -> Result<u64, ClError> {
        let passes = match &self.passes {
            Passes::ItemBands {
                cols, tops, tops2, ..
            } => held_bytes(cols)? + held_bytes(tops)? + held_bytes(tops2)?,
            Passes::GroupBands { cols, .. } => held_bytes(cols)?,
        };
        Ok(passes
            + held_bytes(&self.sum.buf)?
            + held_bytes(&self.sqsum.buf)?
            + held_bytes(&self.edges.buf)?
            + held_bytes(&self.foreground.buf)?
            + held_bytes(&self.rects)?
            + held_bytes(&self.sums)?)
    }

    /// Reads the four integral images.
    #[allow(clippy::type_complexity)]
    pub(super) fn read_integrals(
        &self,
        gpu: &Gpu,
    ) -> Result<(Vec<u32>, Vec<u64>, Vec<u32>, Vec<u32>), ClError> {
        Ok((
            self.sum.read(gpu)?,
            self.sqsum.read(gpu)?,
            self.edges.read(gpu)?,
            self.foreground.read(gpu)?,
        ))
    }
}
