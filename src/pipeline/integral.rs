//! Integral stage: the integrals of luma, of its square and of its edge and foreground
//! pixels (edges and foreground counted from the magnitude and the device's Otsu
//! threshold, no mask read) in the compact blocked form `kernels/integral.cl` defines:
//! tiles of 16 x 16 pixels, per row, column and tile the prefixes over whole tiles (about
//! 2.6 bytes a pixel), and, only with the full images, each pixel's prefix within its tile
//! (8 more). The region stage reads any rectangle's sums in O(1) (`region_sums`): at each
//! corner at most three stored values and the at most 15 x 15 pixels of the corner's tile
//! before it, summed from luma and the magnitude. [`HostIntegrals`] assembles OpenCV's
//! (H+1)x(W+1) images (20 bytes a pixel) on the host for `process --raw`, so no device
//! ever holds those.
//!
//! Over 500 lines, for now: tile geometry, device buffers, host un-blocking, three pass
//! layouts with two scan families and the region sums live here together; issue 31 moves
//! the region sums into a stage of their own and the layouts into files of their own (not
//! done yet).

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::Buffer;

use super::buffers::held_bytes;
use super::{
    device_buffer, DeviceImage, FullImages, IntegralLayout, Launch, PipelineError, Tuning,
};
use crate::cl::{
    launch, write_blocking, CallContext, ClError, Gpu, KernelArg, Record, INTEGRAL_CL,
};
use crate::frame::FrameLayout;
use crate::region::{Region, RegionStats};

/// Work-items per group of the passes over whole tiles.
const LINE_GROUP_SIZE: usize = 64;
/// Work-items per group of `region_sums`, a group a region (`REGION_ITEMS` in
/// integral.cl, which it requires).
const REGION_ITEMS: usize = 64;
/// Work-items per group of `integral_tiles` (a multiple of 4 of 64 to 128: Mali's guide).
const TILES_GROUP: usize = 64;
/// Runs of bands per compute unit in the CPU pass: a few, so a slow core holds up little.
const BANDS_PER_COMPUTE_UNIT: usize = 4;
/// Most work-items in a group of the GPU pass: `GROUP_TILES` tiles of 16 columns in
/// integral.cl, whose local memory holds that many tiles.
const TILE_GROUP_MAX: usize = 128;
/// The parts of left, top and corner: the three u32 planes (sum, edges, foreground) and
/// the u64 squared sums, the second dimension of their passes.
const PARTS: usize = 4;
/// Lines and runs along each line in a group of the split scans (`SPLIT_LINES` and
/// `SPLIT_CHUNKS` in integral.cl, which sizes its local memory by them).
const SPLIT_LINES: usize = 32;
const SPLIT_CHUNKS: usize = 8;

/// The blocked form's geometry, as integral.cl defines it: tiles of [`Tiles::SIZE`]
/// pixels square in bands of as many rows, the last band and each band's last tile
/// possibly partial. Every buffer size and every element the host finds comes from here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Tiles {
    width: usize,
    height: usize,
}

impl Tiles {
    pub(super) const SIZE: usize = 16;

    pub(super) fn new(layout: &FrameLayout) -> Tiles {
        Tiles {
            width: layout.width as usize,
            height: layout.height as usize,
        }
    }

    /// Whole tiles a band (W16 in integral.cl).
    fn whole_across(&self) -> usize {
        self.width / Tiles::SIZE
    }

    /// Whole bands (H16).
    fn whole_bands(&self) -> usize {
        self.height / Tiles::SIZE
    }

    /// Bands, the last one possibly partial.
    fn bands(&self) -> usize {
        self.height.div_ceil(Tiles::SIZE)
    }

    /// A row padded to whole tiles (P).
    fn padded(&self) -> usize {
        self.width.next_multiple_of(Tiles::SIZE)
    }

    /// Local's elements a part, 0 where local is not kept.
    fn local_len(&self, images: FullImages) -> usize {
        match images {
            FullImages::Kept => self.padded() * self.height,
            FullImages::Discarded => 0,
        }
    }

    fn left_len(&self) -> usize {
        self.whole_across() * self.height
    }

    fn top_len(&self) -> usize {
        self.whole_bands() * self.padded()
    }

    fn corner_len(&self) -> usize {
        self.whole_across() * self.whole_bands()
    }

    /// Bytes the blocked integrals hold, guard bands aside: 20 an entry of left, top and
    /// corner, and with the full images 8 a pixel of the padded rows for local.
    pub(super) fn bytes(&self, images: FullImages) -> u64 {
        let entries = self.left_len() + self.top_len() + self.corner_len();
        8 * self.local_len(images) as u64 + 20 * entries as u64
    }

    /// Where local holds pixel (x, y): its band's tiles one after another, each its rows.
    fn local_index(&self, x: usize, y: usize) -> usize {
        let (b, r) = (y / Tiles::SIZE, y % Tiles::SIZE);
        let rows = Tiles::SIZE.min(self.height - Tiles::SIZE * b);
        Tiles::SIZE * b * self.padded()
            + Tiles::SIZE * rows * (x / Tiles::SIZE)
            + Tiles::SIZE * r
            + x % Tiles::SIZE
    }
}

/// The blocked integrals on the device, each part with its guard band: local per pixel
/// (u16 sum, u32 squared sum, u8 edge and foreground counts), empty unless the full
/// images are kept; left, top and corner with their u32 sum, edges and foreground as three
/// planes of one buffer and their u64 squared sums in another.
struct Blocked {
    sum: DeviceImage<u16>,
    sqsum: DeviceImage<u32>,
    edges: DeviceImage<u8>,
    foreground: DeviceImage<u8>,
    left: DeviceImage<u32>,
    left_sq: DeviceImage<u64>,
    top: DeviceImage<u32>,
    top_sq: DeviceImage<u64>,
    corner: DeviceImage<u32>,
    corner_sq: DeviceImage<u64>,
}

impl Blocked {
    fn new(gpu: &Gpu, t: &Tiles, images: FullImages) -> Result<Blocked, ClError> {
        let local = t.local_len(images);
        Ok(Blocked {
            sum: DeviceImage::new(gpu, local)?,
            sqsum: DeviceImage::new(gpu, local)?,
            edges: DeviceImage::new(gpu, local)?,
            foreground: DeviceImage::new(gpu, local)?,
            left: DeviceImage::new(gpu, 3 * t.left_len())?,
            left_sq: DeviceImage::new(gpu, t.left_len())?,
            top: DeviceImage::new(gpu, 3 * t.top_len())?,
            top_sq: DeviceImage::new(gpu, t.top_len())?,
            corner: DeviceImage::new(gpu, 3 * t.corner_len())?,
            corner_sq: DeviceImage::new(gpu, t.corner_len())?,
        })
    }

    fn held_bytes(&self) -> Result<u64, ClError> {
        Ok(held_bytes(&self.sum.buf)?
            + held_bytes(&self.sqsum.buf)?
            + held_bytes(&self.edges.buf)?
            + held_bytes(&self.foreground.buf)?
            + held_bytes(&self.left.buf)?
            + held_bytes(&self.left_sq.buf)?
            + held_bytes(&self.top.buf)?
            + held_bytes(&self.top_sq.buf)?
            + held_bytes(&self.corner.buf)?
            + held_bytes(&self.corner_sq.buf)?)
    }
}

/// The blocked integrals read back to the host.
pub(super) struct HostIntegrals {
    tiles: Tiles,
    sum: Vec<u16>,
    sqsum: Vec<u32>,
    edges: Vec<u8>,
    foreground: Vec<u8>,
    left: Vec<u32>,
    left_sq: Vec<u64>,
    top: Vec<u32>,
    top_sq: Vec<u64>,
    corner: Vec<u32>,
    corner_sq: Vec<u64>,
}

impl HostIntegrals {
    /// OpenCV's exclusive integrals at (x, y), 0 <= x <= width, 0 <= y <= height: luma's
    /// sum, its squared sum, the edge and the foreground counts of the pixels above and
    /// left, from the four parts as integral.cl adds them (each taken only where its
    /// condition holds). Every part and the total fit u64 without wrapping.
    fn at(&self, x: usize, y: usize) -> [u64; 4] {
        let g = &self.tiles;
        const S: usize = Tiles::SIZE;
        let (t, l, b, r) = (x / S, x % S, y / S, y % S);
        let mut v = [0u64; 4];
        let mut add = |words: &[u32], squares: &[u64], i: usize, plane: usize| {
            v[0] += u64::from(words[i]);
            v[1] += squares[i];
            v[2] += u64::from(words[plane + i]);
            v[3] += u64::from(words[2 * plane + i]);
        };
        if t > 0 && b > 0 {
            let i = (b - 1) * g.whole_across() + t - 1;
            add(&self.corner, &self.corner_sq, i, g.corner_len());
        }
        if t > 0 && r > 0 {
            let i = (t - 1) * g.height + y - 1;
            add(&self.left, &self.left_sq, i, g.left_len());
        }
        if b > 0 && l > 0 {
            let i = (b - 1) * g.padded() + x - 1;
            add(&self.top, &self.top_sq, i, g.top_len());
        }
        if l > 0 && r > 0 {
            let i = g.local_index(x - 1, y - 1);
            v[0] += u64::from(self.sum[i]);
            v[1] += u64::from(self.sqsum[i]);
            v[2] += u64::from(self.edges[i]);
            v[3] += u64::from(self.foreground[i]);
        }
        v
    }

    /// OpenCV's four `(height + 1) x (width + 1)` images: luma's sum (u32: it fits, for
    /// any frame `FrameLayout::validate` accepts), its squared sum, the edge and the
    /// foreground counts.
    #[allow(clippy::type_complexity)]
    pub(super) fn opencv_images(&self) -> (Vec<u32>, Vec<u64>, Vec<u32>, Vec<u32>) {
        let (w, h) = (self.tiles.width, self.tiles.height);
        let len = (w + 1) * (h + 1);
        let (mut sum, mut sqsum) = (Vec::with_capacity(len), Vec::with_capacity(len));
        let (mut edges, mut foreground) = (Vec::with_capacity(len), Vec::with_capacity(len));
        let narrow = |v: u64| u32::try_from(v).expect("a frame's sums fit u32");
        for y in 0..=h {
            for x in 0..=w {
                let [s, q, e, f] = self.at(x, y);
                sum.push(narrow(s));
                sqsum.push(q);
                edges.push(narrow(e));
                foreground.push(narrow(f));
            }
        }
        (sum, sqsum, edges, foreground)
    }
}

/// How the pass that writes local, left and top is laid out on the device.
enum Passes {
    /// CPUs: `integral_tile_bands`, `items` work-items of one, each a run of bands.
    ItemBands { kernel: Kernel, items: u32 },
    /// GPUs: a 2-D pass, `across` work-items a band in groups of `group`, whose left then
    /// needs summing along the rows: `integral_group_tiles`, a work-item per column and a
    /// group per `group / 16` tiles (`group` a multiple of 16), or `integral_tiles`, a
    /// work-item per tile.
    Grid {
        kernel: Kernel,
        across: usize,
        group: usize,
    },
}

/// How left, top and corner are summed over whole tiles after the first pass.
enum Scans {
    /// A work-item a line walking all of it: `integral_left_rows` where the first pass
    /// left each tile's own row sums (`rows`), then `integral_tops` and
    /// `integral_corners`. CPUs and Mali.
    Chains {
        rows: Option<(Kernel, Launch)>,
        tops: Kernel,
        tops_launch: Launch,
        corners: Kernel,
        corners_launch: Launch,
    },
    /// Groups of `local` = (lines, runs a line) work-items: `integral_left_tops`, then
    /// `integral_corners_split`. GPUs (`integral_group_tiles`).
    Split {
        left_tops: Kernel,
        corners: Kernel,
        local: [usize; 2],
    },
}

/// What the integrals and the region sums count, on the device: luma (its sum and squared
/// sum), its edges (`magnitude` at least `edge_threshold`) and its foreground (above the
/// threshold at word 256 of `results`, which the Otsu kernel wrote before). Luma and the
/// magnitude are dense, `pixels()` bytes each.
#[derive(Clone, Copy)]
pub(super) struct Counted<'a> {
    pub luma: &'a Buffer<u8>,
    pub magnitude: &'a Buffer<u8>,
    pub edge_threshold: u8,
    pub results: &'a Buffer<u32>,
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

pub(super) struct IntegralStage {
    passes: Passes,
    scans: Scans,
    region_sums: RegionSums,
    tiles: Tiles,
    /// Whether the passes write local (1) or not (0): only for the full images.
    keep_local: u32,
    blocked: Blocked,
    /// The whole frame, then the configured regions, then the health grid's cells.
    regions: Vec<Region>,
    /// How many of `regions` are grid cells (at the end).
    cells: usize,
    rects: Buffer<u32>,
}

impl IntegralStage {
    pub(super) fn new(
        gpu: &Gpu,
        layout: &FrameLayout,
        regions: &[Region],
        tuning: &Tuning,
        images: FullImages,
    ) -> Result<IntegralStage, PipelineError> {
        let tiles = Tiles::new(layout);
        let built = || -> Result<_, ClError> {
            let program = gpu.build_with(INTEGRAL_CL, tuning.stores.define())?;
            let k = |name| Kernel::create(&program, name).call("clCreateKernel");
            let passes = match tuning.integral_layout {
                IntegralLayout::ItemBands => {
                    let items = (gpu.info.compute_units as usize * BANDS_PER_COMPUTE_UNIT)
                        .clamp(1, tiles.bands());
                    Passes::ItemBands {
                        kernel: k("integral_tile_bands")?,
                        items: items as u32,
                    }
                }
                layout @ (IntegralLayout::ItemTiles | IntegralLayout::GroupBands) => {
                    // The kernel, pixels a work-item takes across a band, the group size
                    // wanted and what it must be a multiple of: integral_group_tiles gives
                    // each tile 16 work-items, so its groups hold whole tiles.
                    let (name, per_item, wanted, multiple) = match layout {
                        IntegralLayout::ItemTiles => {
                            ("integral_tiles", Tiles::SIZE, TILES_GROUP, 1)
                        }
                        _ => ("integral_group_tiles", 1, TILE_GROUP_MAX, Tiles::SIZE),
                    };
                    let kernel = k(name)?;
                    let most = kernel
                        .get_work_group_size(gpu.device.id())
                        .call("clGetKernelWorkGroupInfo")?;
                    Passes::Grid {
                        kernel,
                        across: tiles.padded() / per_item,
                        group: (wanted.min(most) / multiple).max(1) * multiple,
                    }
                }
            };
            let scans = if tuning.integral_layout == IntegralLayout::GroupBands {
                let (left_tops, corners) = (k("integral_left_tops")?, k("integral_corners_split")?);
                let most = [&left_tops, &corners]
                    .into_iter()
                    .map(|k| k.get_work_group_size(gpu.device.id()))
                    .try_fold(usize::MAX, |m, s| Ok(m.min(s?)))
                    .call("clGetKernelWorkGroupInfo")?
                    .max(1);
                let lines = SPLIT_LINES.min(most);
                Scans::Split {
                    left_tops,
                    corners,
                    local: [lines, (most / lines).min(SPLIT_CHUNKS)],
                }
            } else {
                let rows = match tuning.integral_layout {
                    IntegralLayout::ItemTiles => {
                        let rows = k("integral_left_rows")?;
                        let launch = Launch::one_d(gpu, &rows, LINE_GROUP_SIZE)?;
                        Some((rows, launch))
                    }
                    _ => None,
                };
                let (tops, corners) = (k("integral_tops")?, k("integral_corners")?);
                Scans::Chains {
                    rows,
                    tops_launch: Launch::one_d(gpu, &tops, LINE_GROUP_SIZE)?,
                    tops,
                    corners_launch: Launch::one_d(gpu, &corners, LINE_GROUP_SIZE)?,
                    corners,
                }
            };
            let region_sums = if tuning.integral_layout == IntegralLayout::GroupBands {
                RegionSums::Groups(k("region_sums")?)
            } else {
                let kernel = k("region_sums_items")?;
                let launch = Launch::one_d(gpu, &kernel, LINE_GROUP_SIZE)?;
                RegionSums::Items(kernel, launch)
            };
            Ok((passes, scans, region_sums))
        };
        let (passes, scans, region_sums) = built().map_err(|source| PipelineError::Stage {
            stage: "integral",
            source,
        })?;
        let mut stage = IntegralStage {
            passes,
            scans,
            region_sums,
            tiles,
            keep_local: u32::from(images == FullImages::Kept),
            blocked: Blocked::new(gpu, &tiles, images)?,
            regions: Vec::new(),
            cells: 0,
            rects: device_buffer(gpu, 4)?,
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

    /// Enqueues the blocked integrals of `counted`, handing each kernel's event to
    /// `event`.
    pub(super) fn enqueue_integrals(
        &self,
        gpu: &Gpu,
        layout: &FrameLayout,
        counted: &Counted,
        record: Record,
        mut event: impl FnMut(Option<Event>),
    ) -> Result<(), ClError> {
        let Counted {
            luma,
            magnitude,
            results,
            ..
        } = *counted;
        let (w, h) = (layout.width, layout.height);
        let et = u32::from(counted.edge_threshold);
        // Luma and the magnitude are dense: their rows are `w` apart.
        let src_stride = w;
        let g = &self.blocked;
        let t = &self.tiles;
        let what = "clEnqueueNDRangeKernel(integral)";
        match &self.passes {
            Passes::ItemBands { kernel, items } => {
                // SAFETY: the arguments are integral.cl's integral_tile_bands (luma,
                // src_stride, width, height, magnitude, edge_threshold, results, items,
                // keep_local, sum, sqsum, edges, foreground, left, left_sq, top, top_sq),
                // src_stride = width. Work-item k < `items` reads rows of its bands (all
                // below `height`), `width` columns each (a partial tile byte by byte), of
                // the two `pixels()`-byte inputs, word 256 of `results`, and writes its
                // bands' elements of local only where `keep_local` is 1 (then
                // `local_len()` each, 0 otherwise), of left (`left_len()` a plane)
                // and of top (`top_len()` a plane): `Blocked::new` made every part that
                // long from this stage's `Tiles`, i.e. from this layout. The pipeline, the
                // only caller, passes that layout, its inputs of `pixels()` bytes and its
                // 257-word results.
                event(unsafe {
                    launch(
                        gpu,
                        kernel,
                        &[
                            luma,
                            &src_stride,
                            &w,
                            &h,
                            magnitude,
                            &et,
                            results,
                            items,
                            &self.keep_local,
                            &g.sum.buf,
                            &g.sqsum.buf,
                            &g.edges.buf,
                            &g.foreground.buf,
                            &g.left.buf,
                            &g.left_sq.buf,
                            &g.top.buf,
                            &g.top_sq.buf,
                        ],
                        &[*items as usize],
                        &[1],
                        what,
                        record,
                    )
                }?);
            }
            Passes::Grid {
                kernel,
                across,
                group,
            } => {
                let global = [across.next_multiple_of(*group), t.bands()];
                // SAFETY: the arguments are those of integral_group_tiles and of
                // integral_tiles (the same parameters: luma, src_stride, width, height,
                // magnitude, edge_threshold, results, keep_local, sum, sqsum, edges,
                // foreground, left, left_sq, top, top_sq), src_stride = width; neither
                // writes local unless `keep_local` is 1. Band b's work-items read
                // its rows (below `height`) of the two `pixels()`-byte inputs only within
                // `width` columns, and word 256 of `results`; integral_group_tiles' item
                // (x, b) writes element x of the band's rows of local only where x < the
                // padded width (`group` a multiple of 16 of at most TILE_GROUP_MAX, the
                // tiles its local buffer holds), integral_tiles' item (t, b) its tile's
                // elements only where the tile lies in the frame; both write left only for
                // whole tiles and rows of the band, and top only for whole bands: within
                // `local_len()`, `left_len()` and `top_len()` a plane, the lengths
                // `Blocked::new` made from this layout's `Tiles`. The pipeline, the only
                // caller, passes that layout, its inputs and its 257-word results.
                event(unsafe {
                    launch(
                        gpu,
                        kernel,
                        &[
                            luma,
                            &src_stride,
                            &w,
                            &h,
                            magnitude,
                            &et,
                            results,
                            &self.keep_local,
                            &g.sum.buf,
                            &g.sqsum.buf,
                            &g.edges.buf,
                            &g.foreground.buf,
                            &g.left.buf,
                            &g.left_sq.buf,
                            &g.top.buf,
                            &g.top_sq.buf,
                        ],
                        &global,
                        &[*group, 1],
                        what,
                        record,
                    )
                }?);
            }
        }
        // integral_corners' and integral_corners_split's arguments (width, height, left,
        // left_sq, corner, corner_sq).
        let corner_args: [&dyn KernelArg; 6] = [
            &w,
            &h,
            &g.left.buf,
            &g.left_sq.buf,
            &g.corner.buf,
            &g.corner_sq.buf,
        ];
        match &self.scans {
            Scans::Chains {
                rows,
                tops,
                tops_launch,
                corners,
                corners_launch,
            } => {
                if let Some((rows, rows_launch)) = rows {
                    // SAFETY: the arguments are integral_left_rows' (width, height, left,
                    // left_sq). Work-item (y, part) returns unless y < height and part < 4,
                    // and walks row y of the whole tiles of one part of left, `left_len()`
                    // elements a plane as `Blocked::new` made them for this layout.
                    event(unsafe {
                        launch(
                            gpu,
                            rows,
                            &[&w, &h, &g.left.buf, &g.left_sq.buf],
                            &[rows_launch.global_1d(t.height), PARTS],
                            &[rows_launch.local[0], 1],
                            what,
                            record,
                        )
                    }?);
                }
                // SAFETY: the arguments are integral_tops' (width, height, top, top_sq). Work-item
                // (q, part) returns unless 4q < the padded width and part < 4, and walks columns
                // 4q..4q + 3 down the whole bands of one part of top, `top_len()` elements a plane
                // as `Blocked::new` made them for this layout (the padded width is a multiple of
                // 16, so no vector crosses a plane's end). At least one work-item is launched.
                event(unsafe {
                    launch(
                        gpu,
                        tops,
                        &[&w, &h, &g.top.buf, &g.top_sq.buf],
                        &[tops_launch.global_1d(t.padded() / 4), PARTS],
                        &[tops_launch.local[0], 1],
                        what,
                        record,
                    )
                }?);
                // SAFETY: the arguments are integral_corners' (width, height, left, left_sq,
                // corner, corner_sq). Work-item (t, part) returns unless t is a whole tile column
                // and part < 4, reads left's rows 16 b + 15 of whole bands b in column t and writes
                // corner's column t, `left_len()` and `corner_len()` elements a plane as
                // `Blocked::new` made them for this layout. At least one work-item is launched.
                event(unsafe {
                    launch(
                        gpu,
                        corners,
                        &corner_args,
                        &[corners_launch.global_1d(t.whole_across().max(1)), PARTS],
                        &[corners_launch.local[0], 1],
                        what,
                        record,
                    )
                }?);
            }
            Scans::Split {
                left_tops,
                corners,
                local,
            } => {
                let lines = local[0];
                let row_groups = t.height.div_ceil(lines);
                let column_groups = t.padded().div_ceil(lines);
                // SAFETY: the arguments are integral_left_tops' (width, height, left,
                // left_sq, top, top_sq), and `local` is at most SPLIT_LINES x SPLIT_CHUNKS,
                // the work-items its local buffer holds (and at most what the kernel
                // allows). The groups are exactly 4 x ceil(height / lines) of left and then
                // 4 x ceil(padded width / lines) of top as the kernel counts them, from the
                // same width, height and lines: work-item (line, k) of a group touches one
                // part's row (or padded column) `line`, only where it is below height (the
                // padded width), and of it only whole tiles' entries of left (whole bands'
                // of top), `left_len()` (`top_len()`) elements a plane as `Blocked::new`
                // made them for this layout; every work-item of a group reaches its one
                // barrier.
                event(unsafe {
                    launch(
                        gpu,
                        left_tops,
                        &[
                            &w,
                            &h,
                            &g.left.buf,
                            &g.left_sq.buf,
                            &g.top.buf,
                            &g.top_sq.buf,
                        ],
                        &[PARTS * (row_groups + column_groups) * lines, local[1]],
                        local,
                        what,
                        record,
                    )
                }?);
                let tile_groups = t.whole_across().max(1).div_ceil(lines);
                // SAFETY: the arguments are integral_corners_split's (width, height, left,
                // left_sq, corner, corner_sq), `local` as above. The groups are exactly
                // 4 x ceil(max(W16, 1) / lines) as the kernel counts them: work-item
                // (line, k) of a group takes tile column `line` of one part only where it
                // is a whole tile column, reads left's rows 16 b + 15 of whole bands b in
                // that column and writes corner's column, `left_len()` and `corner_len()`
                // elements a plane as `Blocked::new` made them for this layout; every
                // work-item of a group reaches its one barrier.
                event(unsafe {
                    launch(
                        gpu,
                        corners,
                        &corner_args,
                        &[PARTS * tile_groups * lines, local[1]],
                        local,
                        what,
                        record,
                    )
                }?);
            }
        }
        Ok(())
    }

    /// Enqueues the sums of every region (the whole frame first), from left, top and
    /// corner and, for each corner's part inside its tile, from `counted` itself.
    pub(super) fn enqueue_regions(
        &self,
        gpu: &Gpu,
        layout: &FrameLayout,
        counted: &Counted,
        sums: &Buffer<u64>,
        record: Record,
    ) -> Result<Option<Event>, ClError> {
        let count = self.regions.len() as u32;
        let et = u32::from(counted.edge_threshold);
        let g = &self.blocked;
        let n = self.regions.len();
        let (kernel, global, local) = match &self.region_sums {
            RegionSums::Groups(kernel) => (kernel, REGION_ITEMS * n, REGION_ITEMS),
            RegionSums::Items(kernel, launch) => (kernel, launch.global_1d(n), launch.local[0]),
        };
        // SAFETY: the arguments are those of region_sums and of region_sums_items (the same
        // parameters: luma, width, height, magnitude, edge_threshold, results, left,
        // left_sq, top, top_sq, corner, corner_sq, rects, count, out). region_sums' groups
        // are exactly `count` of REGION_ITEMS, the size the kernel requires, and
        // region_sums_items' work-item i returns unless i < `count`. Region i (a group, or
        // a work-item) reads rectangle i of `rects` (4 x `count` words); for
        // each of its four corners (inside the frame) at most one element of each of left,
        // top and corner at the indices integral.cl's formula gives (the lengths
        // `Blocked::new` made from this layout's `Tiles`), and of the dense `pixels()`-byte
        // luma and magnitude at most 15 rows of at most 15 pixels left of the corner and
        // above it within its tile, and word 256 of `results`; it writes 4 ulongs at 4i of
        // `out`. `set_regions` makes `rects` for exactly `self.regions` (4 words each),
        // after checking that every region lies inside this layout's frame, and the
        // pipeline, the only caller, passes its inputs, its 257-word results and `sums` of
        // `sums_len()` words, made for those regions.
        unsafe {
            launch(
                gpu,
                kernel,
                &[
                    counted.luma,
                    &layout.width,
                    &layout.height,
                    counted.magnitude,
                    &et,
                    counted.results,
                    &g.left.buf,
                    &g.left_sq.buf,
                    &g.top.buf,
                    &g.top_sq.buf,
                    &g.corner.buf,
                    &g.corner_sq.buf,
                    &self.rects,
                    &count,
                    sums,
                ],
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

    /// How many sums [`IntegralStage::enqueue_regions`] writes: four per region, the
    /// whole frame first.
    pub(super) fn sums_len(&self) -> usize {
        4 * self.regions.len()
    }

    /// Fills the whole frame's, each configured region's and each grid cell's statistics
    /// from `sums`, as [`IntegralStage::enqueue_regions`] wrote them, reusing `regions`' and
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
                    region.assign(r);
                    *stats = st;
                }
                None => regions.push((r.clone(), st)),
            }
        }
        cells.clear();
        cells.extend(stats.map(|(_, st)| st));
    }

    /// Whether each part's guard band is intact, by name.
    pub(super) fn guard_checks(&self, gpu: &Gpu) -> Result<[(&'static str, bool); 10], ClError> {
        let g = &self.blocked;
        Ok([
            ("integral_sum", g.sum.guard_intact(gpu)?),
            ("integral_sqsum", g.sqsum.guard_intact(gpu)?),
            ("integral_edges", g.edges.guard_intact(gpu)?),
            ("integral_foreground", g.foreground.guard_intact(gpu)?),
            ("integral_left", g.left.guard_intact(gpu)?),
            ("integral_left_sq", g.left_sq.guard_intact(gpu)?),
            ("integral_top", g.top.guard_intact(gpu)?),
            ("integral_top_sq", g.top_sq.guard_intact(gpu)?),
            ("integral_corner", g.corner.guard_intact(gpu)?),
            ("integral_corner_sq", g.corner_sq.guard_intact(gpu)?),
        ])
    }

    /// The bytes the stage's buffers hold on the device: the blocked integrals and the
    /// regions' rectangles (the sums are the pipeline's, read back with its results).
    pub(super) fn held_bytes(&self) -> Result<u64, ClError> {
        Ok(self.blocked.held_bytes()? + held_bytes(&self.rects)?)
    }

    /// Reads the blocked integrals back, local empty unless the full images are kept.
    pub(super) fn read_integrals(&self, gpu: &Gpu) -> Result<HostIntegrals, ClError> {
        let g = &self.blocked;
        Ok(HostIntegrals {
            tiles: self.tiles,
            sum: g.sum.read(gpu)?,
            sqsum: g.sqsum.read(gpu)?,
            edges: g.edges.read(gpu)?,
            foreground: g.foreground.read(gpu)?,
            left: g.left.read(gpu)?,
            left_sq: g.left_sq.read(gpu)?,
            top: g.top.read(gpu)?,
            top_sq: g.top_sq.read(gpu)?,
            corner: g.corner.read(gpu)?,
            corner_sq: g.corner_sq.read(gpu)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::PixelFormat;
    use crate::pipeline::{Pipeline, PipelineOptions, Setup, Tuning};
    use crate::reference;

    /// A grey frame's luma (the frame itself) and the reference's OpenCV-layout integrals
    /// of its sum, squared sum, edges and foreground, with the edge threshold given.
    struct Frame {
        width: usize,
        height: usize,
        luma: Vec<u8>,
        integrals: (Vec<u32>, Vec<u64>, Vec<u32>, Vec<u32>),
    }

    impl Frame {
        fn new(width: usize, height: usize, seed: u64, edge_threshold: u8) -> Frame {
            let mut state = seed.max(1);
            let luma: Vec<u8> = (0..width * height)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 24) as u8
                })
                .collect();
            let options = PipelineOptions::default();
            let (dx, dy) = reference::sobel(&luma, width, height, options.border);
            let magnitude = reference::magnitude(&dx, &dy, options.magnitude);
            let edges = reference::edge_mask(&magnitude, edge_threshold);
            let threshold = reference::otsu_threshold(&reference::histogram(&luma));
            let mask = reference::binarize(&luma, threshold);
            let (sum, sqsum) = reference::integral(&luma, width, height);
            let integrals = (
                sum,
                sqsum,
                reference::integral_count(&edges, width, height),
                reference::integral_count(&mask, width, height),
            );
            Frame {
                width,
                height,
                luma,
                integrals,
            }
        }

        /// The sums over columns x0..x1 and rows y0..y1, clipped to the frame (pixels
        /// past its right edge count 0).
        fn rect(&self, x0: usize, y0: usize, x1: usize, y1: usize) -> [u64; 4] {
            let (x1, stride) = (x1.min(self.width), self.width + 1);
            let (s, q, e, f) = &self.integrals;
            let corners = |at: &dyn Fn(usize) -> u64| {
                at(y1 * stride + x1) + at(y0 * stride + x0)
                    - at(y0 * stride + x1)
                    - at(y1 * stride + x0)
            };
            [
                corners(&|i| u64::from(s[i])),
                corners(&|i| q[i]),
                corners(&|i| u64::from(e[i])),
                corners(&|i| u64::from(f[i])),
            ]
        }

        /// Every part of the blocked form straight from its definition in integral.cl, as
        /// a sum over a rectangle; local's counts modulo 256 as stored.
        fn blocked(&self) -> HostIntegrals {
            const S: usize = Tiles::SIZE;
            let g = Tiles {
                width: self.width,
                height: self.height,
            };
            let (w16, h16, p) = (g.whole_across(), g.whole_bands(), g.padded());
            let mut out = HostIntegrals {
                tiles: g,
                sum: vec![0; g.local_len(FullImages::Kept)],
                sqsum: vec![0; g.local_len(FullImages::Kept)],
                edges: vec![0; g.local_len(FullImages::Kept)],
                foreground: vec![0; g.local_len(FullImages::Kept)],
                left: vec![0; 3 * g.left_len()],
                left_sq: vec![0; g.left_len()],
                top: vec![0; 3 * g.top_len()],
                top_sq: vec![0; g.top_len()],
                corner: vec![0; 3 * g.corner_len()],
                corner_sq: vec![0; g.corner_len()],
            };
            let narrow = |v: u64| u32::try_from(v).unwrap();
            for y in 0..self.height {
                let b = y / S;
                for x in 0..p {
                    let [s, q, e, f] = self.rect(x / S * S, b * S, x + 1, y + 1);
                    let i = g.local_index(x, y);
                    out.sum[i] = u16::try_from(s).unwrap();
                    out.sqsum[i] = narrow(q);
                    out.edges[i] = e as u8;
                    out.foreground[i] = f as u8;
                }
                for t in 0..w16 {
                    let [s, q, e, f] = self.rect(0, b * S, S * (t + 1), y + 1);
                    let (i, plane) = (t * self.height + y, g.left_len());
                    (out.left[i], out.left_sq[i]) = (narrow(s), q);
                    (out.left[plane + i], out.left[2 * plane + i]) = (narrow(e), narrow(f));
                }
            }
            for b in 0..h16 {
                for c in 0..p {
                    let [s, q, e, f] = self.rect(c / S * S, 0, c + 1, S * (b + 1));
                    let (i, plane) = (b * p + c, g.top_len());
                    (out.top[i], out.top_sq[i]) = (narrow(s), q);
                    (out.top[plane + i], out.top[2 * plane + i]) = (narrow(e), narrow(f));
                }
                for t in 0..w16 {
                    let [s, q, e, f] = self.rect(0, 0, S * (t + 1), S * (b + 1));
                    let (i, plane) = (b * w16 + t, g.corner_len());
                    (out.corner[i], out.corner_sq[i]) = (narrow(s), q);
                    (out.corner[plane + i], out.corner[2 * plane + i]) = (narrow(e), narrow(f));
                }
            }
            out
        }
    }

    const SIZES: [(usize, usize); 9] = [
        (1, 1),
        (15, 15),
        (16, 16),
        (17, 33),
        (40, 2),
        (2, 40),
        (47, 35),
        (64, 48),
        (100, 17),
    ];

    /// integral.cl's formula for I(x, y), as the host assembles OpenCV's layout with it,
    /// gives the reference's images from parts that hold exactly their definitions.
    #[test]
    fn the_formula_adds_the_parts_up_to_opencvs_images() {
        for (k, (w, h)) in SIZES.into_iter().enumerate() {
            for edge_threshold in [0, 64, 255] {
                let frame = Frame::new(w, h, 7 + k as u64, edge_threshold);
                let images = frame.blocked().opencv_images();
                assert!(images == frame.integrals, "{w}x{h}, {edge_threshold}");
            }
        }
    }

    fn gpu() -> Gpu {
        crate::cl::test_gpu()
    }

    /// Every layout's kernels write every part exactly as integral.cl defines it, padding
    /// included (and local's counts modulo 256 at a tile's last pixel); without the full
    /// images they write no local at all (its buffers are empty, and their guard bands
    /// intact).
    #[test]
    fn every_layout_writes_the_parts_as_defined() {
        let gpu = gpu();
        for (k, (w, h)) in SIZES.into_iter().chain([(641, 479)]).enumerate() {
            for edge_threshold in [0, 64] {
                let frame = Frame::new(w, h, 100 + k as u64, edge_threshold);
                let want = frame.blocked();
                let layout = FrameLayout::packed(PixelFormat::Grey, w as u32, h as u32);
                let options = PipelineOptions {
                    edge_threshold,
                    ..PipelineOptions::default()
                };
                for ((_, tuning), images) in Tuning::ALL
                    .into_iter()
                    .flat_map(|t| [(t, FullImages::Kept), (t, FullImages::Discarded)])
                {
                    let label = format!("{w}x{h}, {edge_threshold}, {tuning:?}, {images:?}");
                    let setup = Setup { tuning, images };
                    let mut pipeline =
                        Pipeline::with_setup(&gpu, layout, options, &[], setup).unwrap();
                    let mut slot = pipeline.new_slot(&gpu).unwrap();
                    slot.write_bytes(&gpu, &frame.luma).unwrap();
                    pipeline.process(&gpu, &slot).unwrap();
                    let got = pipeline.integral.read_integrals(&gpu).unwrap();
                    if images == FullImages::Kept {
                        assert!(got.sum == want.sum, "local sum, {label}");
                        assert!(got.sqsum == want.sqsum, "local sqsum, {label}");
                        assert!(got.edges == want.edges, "local edges, {label}");
                        assert!(got.foreground == want.foreground, "local fg, {label}");
                    } else {
                        assert!(got.sum.is_empty() && got.sqsum.is_empty(), "{label}");
                        assert!(got.edges.is_empty() && got.foreground.is_empty(), "{label}");
                    }
                    let broken = pipeline.broken_guards(&gpu).unwrap();
                    assert!(broken.is_empty(), "{broken:?}, {label}");
                    assert!(got.left == want.left, "left, {label}");
                    assert!(got.left_sq == want.left_sq, "left_sq, {label}");
                    assert!(got.top == want.top, "top, {label}");
                    assert!(got.top_sq == want.top_sq, "top_sq, {label}");
                    assert!(got.corner == want.corner, "corner, {label}");
                    assert!(got.corner_sq == want.corner_sq, "corner_sq, {label}");
                }
            }
        }
    }
}
