//! The scans after the tile pass: left summed along the rows (where the pass left each
//! tile's own row sums), top down the bands, and the corners from left's band ends. A
//! work-item a line on CPUs and Mali; on GPUs each line shared by a group's work-items.

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::program::Program;

use super::blocked::{CornerParams, LeftParams, TopParams};
use super::{Blocked, Tiles};
use crate::cl::{launch, CallContext, ClError, Gpu, Record};
use crate::kernel_params;
use crate::pipeline::motion::TileParams;
use crate::pipeline::{IntegralLayout, Launch};
use edgesight_frame::frame::FrameLayout;

/// Work-items per group of the scans a work-item a line.
const LINE_GROUP_SIZE: usize = 64;
/// The parts of left, top and corner: the three u32 planes (sum, edges, foreground) and
/// the u64 squared sums, the second dimension of their passes.
const PARTS: usize = 4;
/// Lines and runs along each line in a group of the split scans (`SPLIT_LINES` and
/// `SPLIT_CHUNKS` in integral.cl, which sizes its local memory by them).
const SPLIT_LINES: usize = 32;
const SPLIT_CHUNKS: usize = 8;

kernel_params! {
    /// The parameters of integral.cl's scans: `integral_left_rows` takes left,
    /// `integral_tops` top, `integral_left_tops` both, `integral_corners` and
    /// `integral_corners_split` left, corner and what motion.cl's `motion_tiles` takes.
    struct ScanParams<'a> {
        width: u32,
        height: u32,
        left: Option<LeftParams<'a>>,
        top: Option<TopParams<'a>>,
        corner: Option<CornerParams<'a>>,
        motion: Option<TileParams<'a>>,
    }
}

/// How left, top and corner are summed over whole tiles after the tile pass.
pub(super) enum Scans {
    /// A work-item a line walking all of it: `integral_left_rows` where the tile pass
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

impl Scans {
    pub(super) fn new(
        gpu: &Gpu,
        program: &Program,
        layout: IntegralLayout,
    ) -> Result<Scans, ClError> {
        if layout == IntegralLayout::GroupBands {
            let left_tops = gpu.kernel(program, "integral_left_tops")?;
            let corners = gpu.kernel(program, "integral_corners_split")?;
            let most = [&left_tops, &corners]
                .into_iter()
                .map(|k| k.get_work_group_size(gpu.device.id()))
                .try_fold(usize::MAX, |m, s| Ok(m.min(s?)))
                .call("clGetKernelWorkGroupInfo")?
                .max(1);
            // Where the kernels allow fewer work-items a group, fewer lines, each still in
            // SPLIT_CHUNKS runs: a run's length bounds a work-item's loops, which Mesa's
            // llvmpipe ends after 65535 iterations in all (integral.cl).
            let chunks = SPLIT_CHUNKS.min(most);
            return Ok(Scans::Split {
                left_tops,
                corners,
                local: [SPLIT_LINES.min(most / chunks), chunks],
            });
        }
        let rows = match layout {
            IntegralLayout::ItemTiles | IntegralLayout::TileParts => {
                let rows = gpu.kernel(program, "integral_left_rows")?;
                let launch = Launch::one_d(gpu, &rows, LINE_GROUP_SIZE)?;
                Some((rows, launch))
            }
            _ => None,
        };
        let (tops, corners) = (
            gpu.kernel(program, "integral_tops")?,
            gpu.kernel(program, "integral_corners")?,
        );
        Ok(Scans::Chains {
            rows,
            tops_launch: Launch::one_d(gpu, &tops, LINE_GROUP_SIZE)?,
            tops,
            corners_launch: Launch::one_d(gpu, &corners, LINE_GROUP_SIZE)?,
            corners,
        })
    }

    /// Enqueues the scans of `g`, which `Blocked::new` made from `layout`'s [`Tiles`] and
    /// the tile pass wrote, and `motion`'s tiles in the last of them, handing each kernel's
    /// event to `event`.
    pub(super) fn enqueue(
        &self,
        gpu: &Gpu,
        layout: &FrameLayout,
        g: &Blocked,
        motion: &TileParams,
        record: Record,
        mut event: impl FnMut(Option<Event>),
    ) -> Result<(), ClError> {
        let (w, h) = (layout.width, layout.height);
        let t = Tiles::new(layout);
        let what = "clEnqueueNDRangeKernel(integral)";
        let scan = |left: bool, top: bool, corner: bool| ScanParams {
            width: w,
            height: h,
            left: left.then(|| g.left_params()),
            top: top.then(|| g.top_params()),
            corner: corner.then(|| g.corner_params()),
            motion: corner.then_some(*motion),
        };
        let tiles = t.whole_across() * t.whole_bands();
        match self {
            Scans::Chains {
                rows,
                tops,
                tops_launch,
                corners,
                corners_launch,
            } => {
                if let Some((rows, rows_launch)) = rows {
                    // SAFETY: `ScanParams` with left is the kernel's parameter list. Work-item
                    // (y, part) returns unless y < height and part < 4, and walks row y of the
                    // whole tiles of one part of left, `left_len()` elements a plane as
                    // `Blocked::new` made them for this layout.
                    event(unsafe {
                        launch(
                            gpu,
                            rows,
                            &scan(true, false, false),
                            &[rows_launch.global_1d(t.height), PARTS],
                            &[rows_launch.local[0], 1],
                            what,
                            record,
                        )
                    }?);
                }
                // SAFETY: `ScanParams` with top is the kernel's parameter list. Work-item (q,
                // part) returns unless 4q < the padded width and part < 4, and walks columns
                // 4q..4q + 3 down the whole bands of one part of top, `top_len()` elements a
                // plane as `Blocked::new` made them for this layout (the padded width is a
                // multiple of 16, so no vector crosses a plane's end). At least one work-item
                // is launched.
                event(unsafe {
                    launch(
                        gpu,
                        tops,
                        &scan(false, true, false),
                        &[tops_launch.global_1d(t.padded() / 4), PARTS],
                        &[tops_launch.local[0], 1],
                        what,
                        record,
                    )
                }?);
                // SAFETY: `ScanParams` with left, corner and motion is the kernel's
                // parameter list. Work-item (t, part) returns unless t is a whole tile column
                // and part < 4, reads left's rows 16 b + 15 of whole bands b in column t and
                // writes corner's column t, `left_len()` and `corner_len()` elements a plane
                // as `Blocked::new` made them for this layout. At least one work-item is
                // launched. With motion a fifth part's work-items, whole groups of them, run
                // motion_tiles over the whole tiles, which reads the same rows of left (what
                // [`TileParams`] says it touches).
                event(unsafe {
                    launch(
                        gpu,
                        corners,
                        &scan(true, false, true),
                        &[
                            corners_launch.global_1d(t.whole_across().max(1)),
                            PARTS + usize::from(motion.on()),
                        ],
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
                // SAFETY: `ScanParams` with left and top is the kernel's parameter list, and
                // `local` is at most SPLIT_LINES x SPLIT_CHUNKS, the work-items its local
                // buffer holds (and at most what the kernel allows). The groups are exactly 4 x
                // ceil(height / lines) of left and then 4 x ceil(padded width / lines) of top
                // as the kernel counts them, from the same width, height and lines: work-item
                // (line, k) of a group touches one part's row (or padded column) `line`, only
                // where it is below height (the padded width), and of it only whole tiles'
                // entries of left (whole bands' of top), `left_len()` (`top_len()`) elements a
                // plane as `Blocked::new` made them for this layout; every work-item of a group
                // reaches its one barrier.
                event(unsafe {
                    launch(
                        gpu,
                        left_tops,
                        &scan(true, true, false),
                        &[PARTS * (row_groups + column_groups) * lines, local[1]],
                        local,
                        what,
                        record,
                    )
                }?);
                let tile_groups = t.whole_across().max(1).div_ceil(lines);
                let motion_groups = if motion.on() {
                    tiles.div_ceil(lines * local[1])
                } else {
                    0
                };
                // SAFETY: `ScanParams` with left, corner and motion is the kernel's parameter
                // list, `local` as above. The groups are 4 x ceil(max(W16, 1) / lines) as the
                // kernel counts them and, with motion, a group for each lines x chunks whole
                // tiles after them: work-item (line, k) of a scan group takes tile column
                // `line` of one part only where it is a whole tile column, reads left's rows
                // 16 b + 15 of whole bands b in that column and writes corner's column,
                // `left_len()` and `corner_len()` elements a plane as `Blocked::new` made them
                // for this layout; the motion groups run motion_tiles, which reads the same
                // rows of left (what [`TileParams`] says it
                // touches); every
                // work-item of a group reaches its barriers.
                event(unsafe {
                    launch(
                        gpu,
                        corners,
                        &scan(true, false, true),
                        &[(PARTS * tile_groups + motion_groups) * lines, local[1]],
                        local,
                        what,
                        record,
                    )
                }?);
            }
        }
        Ok(())
    }
}
