//! The first pass over the tiles, which writes local (with the full images), left and top,
//! in the layout the tuning picks ([`IntegralLayout`]): a work-item per run of bands
//! (CPUs), per tile (Mali) or per column of a group of tiles (GPUs).

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::Buffer;
use opencl3::program::Program;

use super::blocked::{LeftParams, TopParams};
use super::{Blocked, Counted, Tiles};
use crate::cl::{launch, CallContext, ClError, Gpu, Record};
use crate::kernel_params;
use crate::pipeline::{FullImages, IntegralLayout};
use edgesight_frame::frame::FrameLayout;

/// Work-items per group of `integral_tiles` and `integral_tile_parts` (a multiple of 4 of
/// 64 to 128: Mali's guide).
const TILES_GROUP: usize = 64;
/// Runs of bands per compute unit in the CPU pass: a few, so a slow core holds up little.
const BANDS_PER_COMPUTE_UNIT: usize = 4;
/// Most tiles one work-item of the CPU pass walks, each band counted as a tile more: Mesa's
/// llvmpipe ends a work-item's loops after 65535 iterations in all, and the pass takes
/// about 6 a tile (integral.cl).
const ITEM_TILES_MAX: usize = 4096;
/// Most work-items in a group of the GPU pass: `GROUP_TILES` tiles of 16 columns in
/// integral.cl, whose local memory holds that many tiles.
const TILE_GROUP_MAX: usize = 128;

kernel_params! {
    /// The parameters of integral.cl's `integral_tile_bands` and, without `items`, of
    /// `integral_group_tiles`, `integral_tiles` and `integral_tile_parts`.
    struct TileParams<'a> {
        luma: &'a Buffer<u8>,
        src_stride: u32,
        width: u32,
        height: u32,
        magnitude: &'a Buffer<u8>,
        edge_threshold: u32,
        results: &'a Buffer<u32>,
        items: Option<u32>,
        keep_local: u32,
        sum: &'a Buffer<u16>,
        sqsum: &'a Buffer<u32>,
        edges: &'a Buffer<u8>,
        foreground: &'a Buffer<u8>,
        left: LeftParams<'a>,
        top: TopParams<'a>,
    }
}

/// The pass's kernel, how it is laid out on the device, and whether it writes local.
pub(super) struct TilePass {
    kernel: Kernel,
    shape: Shape,
    /// 1 where the pass writes local, 0 where not: only for the full images.
    keep_local: u32,
}

enum Shape {
    /// CPUs: `integral_tile_bands`, `items` work-items of one, each a run of bands.
    ItemBands { items: u32 },
    /// GPUs: a 2-D pass, `across` work-items a band in groups of `group`, whose left then
    /// needs summing along the rows: `integral_group_tiles`, a work-item per column and a
    /// group per `group / 16` tiles (`group` a multiple of 16), `integral_tiles`, a
    /// work-item per tile, or `integral_tile_parts`, four work-items per tile (`group` a
    /// multiple of 4, its quarters the parts of `group / 4` tiles).
    Grid { across: usize, group: usize },
}

impl TilePass {
    pub(super) fn new(
        gpu: &Gpu,
        program: &Program,
        layout: IntegralLayout,
        tiles: &Tiles,
        images: FullImages,
    ) -> Result<TilePass, ClError> {
        let keep_local = u32::from(images == FullImages::Kept);
        if layout == IntegralLayout::ItemBands {
            let steps = tiles.bands() * (tiles.padded() / Tiles::SIZE + 1);
            let items = (gpu.info.compute_units as usize * BANDS_PER_COMPUTE_UNIT)
                .max(steps.div_ceil(ITEM_TILES_MAX))
                .clamp(1, tiles.bands());
            return Ok(TilePass {
                kernel: gpu.kernel(program, "integral_tile_bands")?,
                shape: Shape::ItemBands {
                    items: items as u32,
                },
                keep_local,
            });
        }
        // The kernel, pixels a work-item takes across a band, the group size wanted and
        // what it must be a multiple of: integral_group_tiles gives each tile 16
        // work-items, so its groups hold whole tiles; integral_tile_parts gives a group's
        // tiles four work-items each, one a part, so its groups are a multiple of 4 (a
        // work-item for every 4 columns across a band).
        let (name, per_item, wanted, multiple) = match layout {
            IntegralLayout::ItemTiles => ("integral_tiles", Tiles::SIZE, TILES_GROUP, 1),
            IntegralLayout::TileParts => ("integral_tile_parts", Tiles::SIZE / 4, TILES_GROUP, 4),
            _ => ("integral_group_tiles", 1, TILE_GROUP_MAX, Tiles::SIZE),
        };
        let kernel = gpu.kernel(program, name)?;
        let most = kernel
            .get_work_group_size(gpu.device.id())
            .call("clGetKernelWorkGroupInfo")?;
        Ok(TilePass {
            kernel,
            shape: Shape::Grid {
                across: tiles.padded() / per_item,
                group: (wanted.min(most) / multiple).max(1) * multiple,
            },
            keep_local,
        })
    }

    /// Enqueues the pass over `counted` for frames of `layout`, into `g`, which
    /// `Blocked::new` made from that layout's [`Tiles`] and with local where this pass
    /// writes it.
    pub(super) fn enqueue(
        &self,
        gpu: &Gpu,
        layout: &FrameLayout,
        counted: &Counted,
        g: &Blocked,
        record: Record,
    ) -> Result<Option<Event>, ClError> {
        let Counted {
            luma,
            magnitude,
            results,
            ..
        } = *counted;
        let (global, local, dims, items) = match &self.shape {
            Shape::ItemBands { items } => ([*items as usize, 1], [1, 1], 1, Some(*items)),
            Shape::Grid { across, group } => {
                let bands = Tiles::new(layout).bands();
                (
                    [across.next_multiple_of(*group), bands],
                    [*group, 1],
                    2,
                    None,
                )
            }
        };
        let params = TileParams {
            luma,
            // Luma and the magnitude are dense: their rows are `width` apart.
            src_stride: layout.width,
            width: layout.width,
            height: layout.height,
            magnitude,
            edge_threshold: u32::from(counted.edge_threshold),
            results,
            items,
            keep_local: self.keep_local,
            sum: &g.sum.buf,
            sqsum: &g.sqsum.buf,
            edges: &g.edges.buf,
            foreground: &g.foreground.buf,
            left: g.left_params(),
            top: g.top_params(),
        };
        // SAFETY: `TileParams` is the kernel's parameter list, `items` exactly for
        // integral_tile_bands (`Shape::ItemBands`); none writes local unless `keep_local` is 1,
        // and `Blocked::new` made local `local_len()` long exactly where it is 1 (the integral
        // stage made both from one `FullImages`), and left and top `left_len()` and `top_len()`
        // a plane, all from this layout's `Tiles`. Every work-item reads rows below `height` of
        // the two `pixels()`-byte inputs only within `width` columns (a partial tile byte by
        // byte), and word 256 of `results`. integral_tile_bands' work-item k < `items` writes
        // its bands' elements of local, left and top. Of the 2-D passes, band b's work-items
        // write within that band: integral_group_tiles' item (x, b) element x of the band's
        // rows of local only where x < the padded width (`group` a multiple of 16 of at most
        // TILE_GROUP_MAX, the tiles its local buffer holds), integral_tiles' item (t, b) its
        // tile's elements only where the tile lies in the frame, and integral_tile_parts' its
        // part's of one tile, which it works out from its group and `group / 4` (the group a
        // multiple of 4), only where that tile lies in the frame; all write left only for
        // whole tiles and rows of the band, and top only for whole bands. The pipeline, the only
        // caller, passes the layout the stage was built for, its inputs of `pixels()` bytes and
        // its 257-word results.
        unsafe {
            launch(
                gpu,
                &self.kernel,
                &params,
                &global[..dims],
                &local[..dims],
                "clEnqueueNDRangeKernel(integral)",
                record,
            )
        }
    }
}
